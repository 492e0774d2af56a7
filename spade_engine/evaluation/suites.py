"""Held-out evaluation suites: what ``SUITE`` names mean and the items each task holds.

Two kinds of suite:

* ``reasoning-gym[:task1,task2,...]`` (alias ``rg``): procedural generators with verifiers from
  the `reasoning-gym <https://pypi.org/project/reasoning-gym/>`_ package; without tasks,
  :data:`DEFAULT_TASKS`. Task ``t`` with ``size`` n and ``seed`` s is
  ``reasoning_gym.create_dataset(t, size=n, seed=eval_dataset_seed(s, t, n))``: its item ``i``
  is generated from seed ``base + i``, always in the evaluation seed range (:mod:`.seeds`).
* ``archive:RUN``: the accepted environments of a recorded run, grouped by skill (one task per
  skill, one item per environment, first ``size`` in log order when a size is given). Item
  seed = ``eval_seed("archive", RUN, env_id, s)``, the seed its first play resets it with.
  Such a suite is held out only for a policy that did not train on RUN.

Parsing is separate from loading (:func:`parse_suite` checks names without generating items)
so the CLI reports a bad suite before it loads a model.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import SpadeError
from ..events.log import EventLog
from .seeds import eval_dataset_seed, eval_seed

__all__ = [
    "SuiteError",
    "DEFAULT_TASKS",
    "DEFAULT_SIZE",
    "SuiteSpec",
    "EvalItem",
    "EvalTask",
    "parse_suite",
    "reasoning_gym_tasks",
    "archive_tasks",
    "reasoning_gym_version",
    "describe_tasks",
    "import_reasoning_gym",
]

#: reasoning-gym tasks of ``reasoning-gym`` with no task list: one or two per category, each
#: with an oracle answer its own verifier scores 1.0 (checked offline on reasoning-gym 0.1.25)
DEFAULT_TASKS = (
    "basic_arithmetic",
    "gcd",
    "leg_counting",
    "letter_counting",
    "word_sorting",
    "spell_backward",
    "family_relationships",
    "knights_knaves",
    "maze",
    "simple_equations",
)
#: items per reasoning-gym task when no size is given
DEFAULT_SIZE = 50
#: tasks that cannot be built from a name alone
_UNSUPPORTED = {"composite": "it combines other datasets and needs a dataset config"}


class SuiteError(SpadeError):
    """A suite spec names something that does not exist or cannot be evaluated."""


@dataclass(frozen=True)
class SuiteSpec:
    """A parsed ``SUITE`` argument: ``kind`` reasoning-gym or archive, and its tasks or run."""

    kind: str
    tasks: tuple[str, ...] = ()
    run: str | None = None

    @property
    def name(self) -> str:
        return "reasoning-gym" if self.kind == "reasoning-gym" else f"archive:{self.run}"


@dataclass(frozen=True)
class EvalItem:
    """One item: its index, seed and id; a reasoning-gym entry or an archived environment's code."""

    index: int
    seed: int
    item_id: str
    question: str = ""
    answer: Any = None
    entry: dict[str, Any] = field(default_factory=dict)
    code: str = ""
    difficulty: float | None = None


@dataclass
class EvalTask:
    """One task of a suite with its items, what generated them, and (reasoning-gym) its dataset."""

    suite: str
    task: str
    seed: int
    items: list[EvalItem]
    generator: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    dataset: Any = None
    turn_limit: int = 1
    source_run: str | None = None

    @property
    def label(self) -> str:
        """``suite/task``, unique within one evaluation."""
        return f"{self.suite}/{self.task}"


def import_reasoning_gym() -> Any:
    """The ``reasoning_gym`` package, imported without the ``SyntaxWarning`` lines some of its
    dependencies (cellpylib: ``is`` with a literal) print while Python compiles them, which would
    otherwise precede every ``eval``'s output; warnings of our own code are untouched."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            import reasoning_gym
            import reasoning_gym.factory  # noqa: F401 - the datasets register themselves here
            import reasoning_gym.utils  # noqa: F401
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise SuiteError(f"reasoning-gym is not installed (pip install reasoning-gym): {exc}") from None
    return reasoning_gym


def _registry() -> dict[str, Any]:
    return import_reasoning_gym().factory.DATASETS


def reasoning_gym_version() -> str:
    """The installed distribution's version (the module's ``__version__`` lags behind it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("reasoning-gym")
    except PackageNotFoundError:  # pragma: no cover
        return "unknown"


def parse_suite(spec: str) -> SuiteSpec:
    """``reasoning-gym[:t1,t2]`` / ``rg[:...]`` / ``archive:RUN`` -> :class:`SuiteSpec`.

    Task names are checked against reasoning-gym's registry (with close matches in the error).
    """
    text = spec.strip()
    head, _, rest = text.partition(":")
    head = head.strip().lower()
    if head in ("reasoning-gym", "reasoning_gym", "rg"):
        names = [t.strip() for t in rest.split(",") if t.strip()] if rest.strip() else list(DEFAULT_TASKS)
        registry = _registry()
        for name in names:
            if name in _UNSUPPORTED:
                raise SuiteError(f"reasoning-gym task {name!r} is not supported: {_UNSUPPORTED[name]}")
            if name not in registry:
                close = difflib.get_close_matches(name, list(registry), n=3)
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise SuiteError(f"unknown reasoning-gym task {name!r}{hint}; {len(registry)} tasks exist")
        if len(set(names)) != len(names):
            raise SuiteError(f"suite {spec!r} names a task twice")
        return SuiteSpec(kind="reasoning-gym", tasks=tuple(names))
    if head == "archive":
        run = rest.strip()
        if not run:
            raise SuiteError("archive suite needs a run: archive:RUN")
        return SuiteSpec(kind="archive", run=run)
    raise SuiteError(f"unknown suite {spec!r} (expected reasoning-gym:TASK[,TASK...] or archive:RUN)")


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=str, sort_keys=True))


def reasoning_gym_tasks(spec: SuiteSpec, *, size: int | None, seed: int) -> list[EvalTask]:
    """Generate every task's items (deterministic for ``seed``; seeds in the evaluation range)."""
    reasoning_gym = import_reasoning_gym()

    n = DEFAULT_SIZE if size is None else size
    generator = f"reasoning-gym {reasoning_gym_version()}"
    out: list[EvalTask] = []
    for name in spec.tasks:
        base = eval_dataset_seed(seed, name, n)
        try:
            dataset = reasoning_gym.create_dataset(name, size=n, seed=base)
        except Exception as exc:  # noqa: BLE001 - third-party generator: report, never a traceback
            raise SuiteError(f"reasoning-gym task {name!r} cannot be built: {type(exc).__name__}: {exc}") from None
        items: list[EvalItem] = []
        for i in range(n):
            try:
                entry = dataset[i]
            except Exception as exc:  # noqa: BLE001
                raise SuiteError(
                    f"reasoning-gym task {name!r} failed to generate item {i} (seed {base + i}): "
                    f"{type(exc).__name__}: {exc}"
                ) from None
            items.append(
                EvalItem(
                    index=i, seed=base + i, item_id=f"{name}/{base + i}", question=str(entry["question"]),
                    answer=entry.get("answer"), entry=entry,
                )
            )
        config = dataclasses.asdict(dataset.config) if dataclasses.is_dataclass(dataset.config) else {}
        out.append(
            EvalTask(
                suite=spec.name, task=name, seed=seed, items=items, generator=generator,
                config=_jsonable(config), dataset=dataset,
            )
        )
    return out


def archive_tasks(log: EventLog, *, size: int | None, seed: int, turn_limit: int | None = None) -> list[EvalTask]:
    """The accepted environments of ``log``'s run, one task per skill (first ``size`` in log order)."""
    from ..engine.state import RunState
    from ..recorded import recorded_config_or_default

    state = RunState.from_log(log)
    accepted = [st for st in state.proposed() if st.accepted and st.proposed is not None]
    if size is not None:
        accepted = accepted[:size]
    if not accepted:
        raise SuiteError(f"run {log.run_id} has no accepted environments to evaluate on")
    limit = turn_limit or recorded_config_or_default(log).loop.turn_limit
    by_skill: dict[str, list[EvalItem]] = {}
    for st in accepted:
        p = st.proposed
        assert p is not None
        items = by_skill.setdefault(p.skill, [])
        items.append(
            EvalItem(
                index=len(items), seed=eval_seed("archive", log.run_id, p.env_id, seed), item_id=p.env_id,
                code=p.code, difficulty=p.difficulty,
            )
        )
    suite = f"archive:{log.run_id}"
    return [
        EvalTask(
            suite=suite, task=skill, seed=seed, items=items, generator=f"archive {log.run_id}",
            config={"turn_limit": limit}, turn_limit=limit, source_run=log.run_id,
        )
        for skill, items in sorted(by_skill.items())
    ]


def describe_tasks(tasks: Sequence[EvalTask]) -> str:
    """``task (n items)`` for each task, comma-separated."""
    return ", ".join(f"{t.task} ({len(t.items)})" for t in tasks)
