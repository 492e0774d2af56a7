"""The validator: ordered checks that decide whether a model-written environment is usable.

Every check runs the environment only inside a sandbox task; every decision is taken here, in
the engine's process, on the JSON that crossed the pipe. Checks, in order (the first failure
decides the verdict and its :class:`ErrorKind`):

==================  ============================================================  ================
check               passes when                                                   fails as
==================  ============================================================  ================
``parse``           the source parses                                             syntax
``static_screen``   no import of process/socket/ctypes modules, no os.system...   forbidden
``env_class``       exactly one environment class                                 contract
``import``          module import + one instance within time and memory limits    timeout, memory,
                                                                                  crash, forbidden
``reset``           reset(seed) -> (str, dict) at two seeds                       contract, crash
``determinism``     same seed -> same observation (fresh instance, second reset)  nondeterministic
``step``            step(probe) -> (str, number, bool, bool, dict) for every      contract, crash
                    probe action, garbage included
``rewards``         every reward seen is finite and within the reward range       contract
``episode_ends``    repeated garbage actions end the episode within the turn      contract
                    limit: min(the environment's own max_turns, the budget)
``solution``        solution() gives actions at both seeds within the turn limit; unsolvable
                    for a puzzle, over 8 more seeds: a repeated      trivial
                    question keeps its answer; questions differ; the
                    question does not show its answer; six or more
                    different questions do not all share one answer;
                    and with the random draws after the k-th changed,
                    a question that stays the same keeps its answer
``not_trivial``     no probe action wins                                          trivial
``replay``          in a fresh task, where solution() never ran: its actions     unsolvable,
                    reach success at both seeds, and the same actions with a      trivial
                    deliberately wrong final answer (same shape, other value)
                    do not
``gymnasium_api``   gymnasium's check_env, run here in the engine on a view of    contract
                    a fresh instance (its spaces as declared, every reset and
                    step a call into the task) passes
==================  ============================================================  ================

The last two checks run in a second task, opened after the first one ended: a ``solution()``
that arms the win (no action wins without it) is caught there, since nothing it did in the first
process exists in the second. No verdict is computed in a process the environment's code ran in:
the task only sends raw observations, rewards and actions; ``parse`` (the static screen) is
answered by a task in which no environment code has run yet, and gymnasium's checker runs here.

The turn budget (``turn_limit``, the run's ``loop.turn_limit``) is applied the way the SPADE
release does it: the sandbox constructs the environment, then caps its own ``max_turns`` at the
budget, so an environment designed for 30 or 40 turns is validated (and played) within the
budget; the effective limit of an environment is min(its own max_turns, budget).

Any check can also fail as ``timeout`` (wall clock / CPU), ``memory``, ``crash`` (the environment
raised or its process died), ``forbidden`` (the seccomp filter or the audit hook killed it, or it
tampered with the hook) or ``sandbox`` (a reply that does not fit the reply schema, e.g. from a
patched worker; the reason is in the detail).

The reset seeds and the probe actions are drawn per validation from a seed (:mod:`.probes`): the
engine derives it from the run's seed and the environment's key and records what was drawn in
``EnvironmentValidated`` (``validation_seeds``, ``probe_actions``), so replay is exact but an
environment cannot know them in advance. :meth:`Validator.validate` never raises for anything an
environment does: every failure is a verdict.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..events.catalogue import ValidationCheck
from . import EnvError, ErrorKind, SandboxError, SandboxPool
from . import probes as probe_inputs
from .grading import REWARD_RANGE, StepResult, check_reward, decode_reset, decode_step, select_env_class
from .limits import MAX_DETAIL_CHARS, MAX_NAME_CHARS, clip
from .pool import Task
from .scaffold import code_format

__all__ = ["ErrorKind", "ValidationReport", "Validator", "CHECKS", "CHECK_NAMES"]

log = logging.getLogger("spade_engine.sandbox")

#: the checks in the order they run: (name, the Validator method that runs it)
CHECKS: tuple[tuple[str, str], ...] = (
    ("parse", "_parse"),
    ("static_screen", "_static"),
    ("env_class", "_env_class"),
    ("import", "_import"),
    ("reset", "_reset"),
    ("determinism", "_determinism"),
    ("step", "_step"),
    ("rewards", "_rewards"),
    ("episode_ends", "_episode_ends"),
    ("solution", "_solution"),
    ("not_trivial", "_not_trivial"),
    ("replay", "_replay"),
    ("gymnasium_api", "_gymnasium"),
)
#: checks that run in a second, fresh task (one where solution() never ran)
FRESH_TASK_CHECKS = frozenset({"replay", "gymnasium_api"})
CHECK_NAMES = tuple(name for name, _ in CHECKS)
#: resets a puzzle's one-answer test draws (``solution`` check)
PUZZLE_SEEDS = 8
#: more resets drawn when every question of the first ``PUZZLE_SEEDS`` had one answer: a puzzle
#: whose questions all share one answer over all of them ignores its values (the 0.5B's ``return
#: 42``; the 1.5B's five questions answered 10), and one fixed reply would win every episode. A
#: sound yes/no puzzle gives one answer at every one of the 32 seeds with probability 2**-31
PUZZLE_MORE_SEEDS = 24
#: a reset seed with this bit asks TextGame for its fork probe (``textgame.py``); draws probed
FORK, FORK_DRAWS = 1 << 62, 24


@dataclass
class ValidationReport:
    """The verdict on one environment source, with every check run."""

    valid: bool
    error_kind: str | None = None
    failed_check: str | None = None
    checks: list[ValidationCheck] = field(default_factory=list)
    class_name: str | None = None
    contract: str | None = None
    has_solution: bool = False
    seconds: float = 0.0
    solution_actions: list[str] | None = None
    sandbox_layers: dict[str, bool] = field(default_factory=dict)
    seed: int | None = None
    seeds: list[int] = field(default_factory=list)
    probes: list[str] = field(default_factory=list)

    @property
    def detail(self) -> str:
        """The failed check's explanation ("" when valid)."""
        for c in self.checks:
            if not c.passed:
                return c.detail
        return ""

    def payload_fields(self) -> dict[str, Any]:
        """The fields of an ``EnvironmentValidated`` payload this report fills in."""
        return {
            "valid": self.valid,
            "error_kind": self.error_kind,
            "failed_check": self.failed_check,
            "checks": list(self.checks),
            "class_name": self.class_name,
            "contract": self.contract,
            "has_solution": self.has_solution,
            "seconds": self.seconds,
            "sandbox_layers": dict(self.sandbox_layers),
            "validation_seeds": list(self.seeds),
            "probe_actions": list(self.probes),
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``spade-engine validate --json`` prints)."""
        d = self.payload_fields()
        d["checks"] = [{"name": c.name, "passed": c.passed, "detail": c.detail, "seconds": round(c.seconds, 6)} for c in self.checks]
        d["solution_actions"] = self.solution_actions
        d["validation_seed"] = self.seed
        return d


class _Fail(Exception):
    def __init__(self, kind: ErrorKind | str, detail: str) -> None:
        super().__init__(detail)
        self.kind = str(kind)
        self.detail = detail


class _Run:
    """State of one validation: the task, the instances, what was observed so far."""

    def __init__(self, task: Task, source: str, v: "Validator", seeds: tuple[int, int], probes: tuple[str, ...]) -> None:
        self.task = task
        self.source = source
        self.v = v
        self.seeds = seeds
        self.probes = probes
        self.garbage = probes[1]  # a seeded garbage word, for the episode-end check
        self.parsed: Any = None
        self.class_name: str | None = None
        self.contract: str | None = None
        self.has_solution = False
        self.iid: int | None = None
        self.turn_limit = v.turn_limit  # min(designed max_turns, budget) once known
        self.designed_max_turns: int | None = None
        self.first_obs: dict[int, str] = {}
        self.probe_results: list[tuple[str, StepResult]] = []
        self.solution_actions: list[str] | None = None
        #: solution() actions per validation seed (replayed in the fresh task)
        self.solutions: dict[int, list[str]] = {}
        self.spaces: Any = None  # a gymnasium environment's declared spaces (replies.SpacesInfo)
        self.fresh = False  # running in the second task
        self.deadline = time.monotonic() + v.validate_timeout_s  # the whole validation's

    def call(self, op: str, timeout: float, **args: Any) -> Any:
        try:
            return self.task.call(op, timeout=timeout, **args)
        except SandboxError as exc:  # EnvError, StepTimeout, SandboxCrash: all carry a kind
            raise _Fail(exc.kind, str(exc)) from None

    def new(self) -> int:
        out = self.call("new", self.v.import_timeout_s, max_turns=self.v.turn_limit)
        self.spaces = out.spaces
        designed = out.designed_max_turns
        if designed is not None and designed > 0:
            self.designed_max_turns = designed
            self.turn_limit = min(designed, self.v.turn_limit)
        return out.iid

    def reset(self, iid: int, seed: int) -> tuple[str, dict[str, Any]]:
        data = self.call("reset", self.v.step_timeout_s, iid=iid, seed=seed)
        try:
            return decode_reset(data)
        except EnvError as exc:
            self.task.tainted = True
            raise _Fail(exc.kind, f"reset(seed={seed}): {exc}") from None

    def step(self, iid: int, action: str) -> StepResult:
        data = self.call("step", self.v.step_timeout_s, iid=iid, action=action)
        try:
            return decode_step(data)
        except EnvError as exc:
            self.task.tainted = True
            raise _Fail(exc.kind, f"step({_short(action)}): {exc}") from None


#: verdicts found by the engine from well-formed replies of code that ran without error
_CLEAN_VERDICTS = frozenset({ErrorKind.NONDETERMINISTIC.value, ErrorKind.UNSOLVABLE.value, ErrorKind.TRIVIAL.value})
#: checks that run no environment code (the source is only parsed)
_NO_CODE_CHECKS = frozenset({"parse", "static_screen", "env_class"})


def _tainting(report: "ValidationReport") -> bool:
    """Did the environment's code fail in this validation (raise, break the contract, time out,
    tamper...)? Then its worker is recycled, whatever state it might have left behind."""
    if report.valid or report.failed_check in _NO_CODE_CHECKS:
        return False
    return report.error_kind not in _CLEAN_VERDICTS


def _boxed_text(action: str) -> str:
    """The text of a ``\\boxed{...}`` action (the action itself when it has none)."""
    inner = action.strip()
    if inner.startswith("\\boxed{") and inner.endswith("}"):
        inner = inner[len("\\boxed{"):-1]
    return " ".join(inner.split())


#: an answer that is a list of numbers: ``[2, 5, 7]``, ``(2, 5, 7)`` or ``2, 5, 7``
_NUMBER_LIST = re.compile(r"[\[(]?\s*(-?\d+(?:\.\d+)?(?:\s*,\s*-?\d+(?:\.\d+)?)+)\s*[\])]?")


def _shows(question: str, answer: str) -> bool:
    """Whether ``question`` contains ``answer``: a number as a number of its own, a list of numbers
    as those numbers in order however they are separated (``[2, 5, 7]`` in "2, 5 and 7"), a text
    of more than three words (or the whole question) as a phrase; a short word may be one of the
    options."""
    if not answer:
        return False
    q = " ".join(question.split())
    # All linear over the question (environment text, in the engine's process): the number
    # pattern has one way to match; the search compares the answer (a number) only where no digit
    # or point comes before, so the digit runs it walks at different starts are disjoint; a list's
    # literal numbers and the separators between them (never digits) match one way.
    if re.fullmatch(r"-?\d+(?:\.\d+)?", answer):
        return re.search(rf"(?<![\d.]){re.escape(answer)}(?![\d]|\.\d)", q) is not None
    listed = _NUMBER_LIST.fullmatch(answer)
    if listed:
        numbers = re.split(r"\s*,\s*", listed.group(1))
        pattern = r"[\s,;]+(?:and\s+)?".join(re.escape(n) for n in numbers)
        return re.search(rf"(?<![\d.]){pattern}(?![\d]|\.\d)", q) is not None
    return answer.lower() == q.lower() or (len(answer.split()) > 3 and answer.lower() in q.lower())


def _short(action: str, n: int = 40) -> str:
    return repr(action if len(action) <= n else action[:n] + "...")


class Validator:
    """Validates environment sources in a :class:`SandboxPool` (thread-safe: one task each)."""

    def __init__(
        self,
        pool: SandboxPool,
        turn_limit: int = 25,
        *,
        reward_range: tuple[float, float] = REWARD_RANGE,
        success_reward: float = 1.0,
        check_gymnasium: bool = True,
    ) -> None:
        cfg = pool.config
        self.pool = pool
        self.turn_limit = turn_limit
        self.reward_range = reward_range
        self.success_reward = success_reward
        self.check_gymnasium = check_gymnasium
        self.import_timeout_s = cfg.import_timeout_s
        self.step_timeout_s = cfg.step_timeout_s
        self.validate_timeout_s = cfg.validate_timeout_s

    def _won(self, r: StepResult) -> bool:
        return r.terminated and r.reward_problem is None and r.reward >= self.success_reward - 1e-9

    def validate(self, source: str, *, seed: int | None = None) -> ValidationReport:
        """Run every check in order until one fails; never raises for a bad environment.

        ``seed`` draws the reset seeds and probe actions (:mod:`.probes`); without one they are
        drawn from a fresh random seed. The report records the seed and what was drawn."""
        t0 = time.perf_counter()
        seed = probe_inputs.random_seed() if seed is None else int(seed)
        seeds, probes = probe_inputs.validation_seeds(seed), probe_inputs.probe_actions(seed)
        report = ValidationReport(
            valid=False, sandbox_layers=dict(self.pool.layers), seed=seed, seeds=list(seeds), probes=list(probes)
        )
        if not isinstance(source, str):
            source = ""
        task: Task | None = None
        run: _Run | None = None
        try:
            deadline = time.monotonic() + self.validate_timeout_s
            task = self.pool.task(timeout_s=self.validate_timeout_s)
            task.label = "validation"
            run = _Run(task, source, self, seeds, probes)
            run.deadline = deadline
            self._run_checks(run, report)
        except Exception as exc:  # noqa: BLE001 - nothing an environment does may escape the validator
            kind = exc.kind if isinstance(exc, SandboxError) else ErrorKind.SANDBOX.value
            if not isinstance(exc, SandboxError):
                log.exception("validator: unexpected error")
            detail = clip(f"{type(exc).__name__}: {exc}" if not isinstance(exc, SandboxError) else str(exc), MAX_DETAIL_CHARS)
            report.checks.append(ValidationCheck(name="sandbox", passed=False, detail=detail, seconds=time.perf_counter() - t0))
            report.valid, report.error_kind, report.failed_check = False, kind, "sandbox"
            if run is not None:
                run.task.abort()
            elif task is not None:
                task.abort()
        finally:
            task = run.task if run is not None else task
            if task is not None:
                if _tainting(report):
                    task.tainted = True  # the environment's code failed: its worker is not reused
                task.end()
        if run is not None:
            report.class_name = clip(run.class_name, MAX_NAME_CHARS) if run.class_name else None
            report.contract, report.has_solution = run.contract, run.has_solution
            report.solution_actions = run.solution_actions if report.valid else None
        report.seconds = time.perf_counter() - t0
        return report

    def _run_checks(self, run: _Run, report: ValidationReport) -> None:
        steps: list[tuple[str, Callable[[_Run], str]]] = [
            (name, getattr(self, method)) for name, method in CHECKS if name != "gymnasium_api" or self.check_gymnasium
        ]
        for name, fn in steps:
            c0 = time.perf_counter()
            try:
                if name in FRESH_TASK_CHECKS and not run.fresh:
                    self._fresh_task(run)
                detail = fn(run)
                report.checks.append(ValidationCheck(name=name, passed=True, detail=clip(detail, MAX_DETAIL_CHARS), seconds=time.perf_counter() - c0))
            except _Fail as f:
                report.checks.append(ValidationCheck(name=name, passed=False, detail=clip(f.detail, MAX_DETAIL_CHARS), seconds=time.perf_counter() - c0))
                report.error_kind, report.failed_check = f.kind, name
                return
        report.valid = True

    # -- the checks (each returns a detail, or raises _Fail) ----------------------------------

    def _parse(self, run: _Run) -> str:
        out = run.call("parse", self.import_timeout_s, source=run.source)
        err = out.syntax_error
        if err:
            raise _Fail(ErrorKind.SYNTAX, f"line {err.lineno}: {err.msg}" + (f": {err.text.strip()}" if err.text else ""))
        run.parsed = out
        return f"{len(run.source.splitlines())} lines"

    def _static(self, run: _Run) -> str:
        found = run.parsed.forbidden
        if found:
            raise _Fail(ErrorKind.FORBIDDEN, "; ".join(f"line {f.lineno}: {f.what}" for f in found[:5]))
        return "nothing forbidden found"

    def _env_class(self, run: _Run) -> str:
        name, why = select_env_class(run.parsed.classes)
        if name is None:
            raise _Fail(ErrorKind.CONTRACT, why)
        run.class_name = name
        return why

    def _import(self, run: _Run) -> str:
        out = run.call("load", self.import_timeout_s, source=run.source, class_name=run.class_name)
        run.contract = out.contract
        run.has_solution = out.has_solution
        run.iid = run.new()
        turns = (
            f"max_turns {run.designed_max_turns} capped at the budget {self.turn_limit}"
            if run.designed_max_turns is not None and run.designed_max_turns > self.turn_limit
            else f"turn limit {run.turn_limit}"
        )
        return f"{run.class_name} ({run.contract} contract{', with solution()' if run.has_solution else ''}; {turns})"

    def _reset(self, run: _Run) -> str:
        assert run.iid is not None
        for seed in run.seeds:
            obs, _ = run.reset(run.iid, seed)
            run.first_obs[seed] = obs
        return f"seeds {run.seeds}: observations of {', '.join(str(len(o)) for o in run.first_obs.values())} characters"

    def _determinism(self, run: _Run) -> str:
        assert run.iid is not None
        seed = run.seeds[0]
        other = run.new()
        obs_b, _ = run.reset(other, seed)
        if obs_b != run.first_obs[seed]:
            raise _Fail(ErrorKind.NONDETERMINISTIC, f"two instances reset with seed={seed} gave different observations")
        obs_a, _ = run.reset(run.iid, seed)
        if obs_a != run.first_obs[seed]:
            raise _Fail(ErrorKind.NONDETERMINISTIC, f"resetting again with seed={seed} gave a different observation")
        run.call("close", self.step_timeout_s, iid=other)
        return f"seed {seed}: the same observation from a fresh instance and from a second reset"

    def _step(self, run: _Run) -> str:
        assert run.iid is not None
        for probe in run.probes:
            run.reset(run.iid, run.seeds[0])
            run.probe_results.append((probe, run.step(run.iid, probe)))
        return f"{len(run.probes)} probe actions answered"

    def _rewards(self, run: _Run) -> str:
        for probe, r in run.probe_results:
            problem = check_reward(r, self.reward_range)
            if problem:
                raise _Fail(ErrorKind.CONTRACT, f"step({_short(probe)}): {problem}")
        return f"all rewards finite and within [{self.reward_range[0]:g}, {self.reward_range[1]:g}]"

    def _episode_ends(self, run: _Run) -> str:
        assert run.iid is not None
        probe = run.garbage
        run.reset(run.iid, run.seeds[0])
        limit = run.turn_limit
        for turn in range(1, limit + 1):
            r = run.step(run.iid, probe)
            run.probe_results.append((probe, r))
            problem = check_reward(r, self.reward_range)
            if problem:
                raise _Fail(ErrorKind.CONTRACT, f"turn {turn}: {problem}")
            if r.terminated or r.truncated:
                return f"ended after {turn} garbage turn(s) (limit {limit})"
        which = (
            f"its max_turns ({limit})" if limit < self.turn_limit else f"the turn budget ({limit})"
        )
        raise _Fail(
            ErrorKind.CONTRACT,
            f"the episode did not end within {which} on repeated garbage actions: step() must return "
            "truncated=True once self.turn_count >= self.max_turns",
        )

    def _solution(self, run: _Run) -> str:
        """solution()'s actions at both seeds (replayed later, in a fresh task); a puzzle's
        one-answer checks."""
        assert run.iid is not None
        if not run.has_solution:
            return "no solution() (not replayed)"
        details = []
        for seed in run.seeds:
            run.reset(run.iid, seed)
            out = run.call("solution", self.step_timeout_s, iid=run.iid)
            if out.kind == "bad":
                raise _Fail(ErrorKind.CONTRACT, out.bad)
            actions = out.actions
            if out.kind == "text" and not actions:
                run.solutions.clear()
                return "solution() returned text without \\boxed{} actions (not replayed)"
            if out.kind == "none" or not actions:
                raise _Fail(ErrorKind.UNSOLVABLE, f"seed {seed}: solution() gave no actions")
            if len(actions) > run.turn_limit:
                raise _Fail(ErrorKind.UNSOLVABLE, f"seed {seed}: solution needs {len(actions)} turns, the turn limit is {run.turn_limit}")
            run.solutions[seed] = list(actions)
            if seed == run.seeds[0]:
                run.solution_actions = list(actions)
            details.append(f"seed {seed}: {len(actions)} action(s)")
        if code_format(run.source) == "puzzle":
            details.append(self._one_answer(run))
        return "; ".join(details)

    def _fresh_task(self, run: _Run) -> None:
        """End the validation's task and continue in a new one, where the environment is loaded
        again and solution() has never run."""
        old = run.task
        old.end()
        left = max(1.0, run.deadline - time.monotonic())
        try:
            run.task = self.pool.task(timeout_s=left)
        except SandboxError as exc:
            raise _Fail(exc.kind, f"a fresh task for the replay: {exc}") from None
        run.task.label = "validation"
        run.fresh = True
        run.call("load", self.import_timeout_s, source=run.source, class_name=run.class_name)
        run.iid = run.new()

    def _replay(self, run: _Run) -> str:
        """In the fresh task: solution()'s actions win at both seeds; the same actions with a
        deliberately wrong final answer do not."""
        assert run.iid is not None
        if not run.solutions:
            return "no solution() actions (not replayed)"
        details = []
        for seed, actions in run.solutions.items():
            won, i, replay = self._play(run, seed, actions)
            if not won:
                last = replay[-1][1] if replay else None
                got = "did not end" if last is None or not (last.terminated or last.truncated) else f"ended with reward {last.reward:g}"
                # what each action got back: the designer sees where its solution and its step() disagree
                steps = [f"{_short(a)} -> {_short(r.observation, 90)} ({r.reward:g})" for a, r in replay]
                shown = steps if len(steps) <= 4 else [steps[0], "...", *steps[-3:]]
                raise _Fail(
                    ErrorKind.UNSOLVABLE,
                    f"seed {seed}: replaying solution() ({len(actions)} actions) in a fresh process {got}, not success "
                    f"(a solution() that sets up its own win does not count); replay: {'; '.join(shown)}",
                )
            details.append(f"seed {seed}: solved in {i} step(s)")
            wrong = probe_inputs.wrong_answer(actions[i - 1], probe_inputs.seed_for(seed, "wrong"))
            lost, _, _ = self._play(run, seed, [*actions[: i - 1], wrong])
            if lost:
                raise _Fail(
                    ErrorKind.TRIVIAL,
                    f"seed {seed}: a deliberately wrong final answer {_short(wrong)} (instead of {_short(actions[i - 1])}) "
                    "also wins: the outcome does not depend on the answer",
                )
        return "; ".join(details) + "; a wrong final answer loses"

    def _play(self, run: _Run, seed: int, actions: list[str]) -> tuple[bool, int, list[tuple[str, StepResult]]]:
        """Reset at ``seed`` and step ``actions`` until the episode ends: (won, steps, replay)."""
        assert run.iid is not None
        run.reset(run.iid, seed)
        last: StepResult | None = None
        replay: list[tuple[str, StepResult]] = []
        i = 0
        for i, action in enumerate(actions, 1):
            last = run.step(run.iid, action)
            replay.append((action, last))
            problem = check_reward(last, self.reward_range)
            if problem:
                raise _Fail(ErrorKind.CONTRACT, f"seed {seed}, solution step {i}: {problem}")
            if last.terminated or last.truncated:
                break
        return last is not None and self._won(last), i, replay

    def _one_answer(self, run: _Run) -> str:
        """A puzzle is a question that decides its answer, drawn anew per seed, without the
        answer in it. Over ``PUZZLE_SEEDS`` more resets: two episodes that ask the same question
        have the same answer (``unsolvable`` otherwise: an answer drawn apart from its question);
        different questions do not all share one answer (``unsolvable``: a fixed answer; when the
        first resets' answers all agree, up to ``PUZZLE_MORE_SEEDS`` more are drawn before it is
        decided); at least two questions differ (``trivial`` otherwise: one fixed item); the question does
        not show its answer at every seed (``trivial``). Each is a measured 0.5B failure that the
        other checks pass. Before them: the puzzle makes no generator or hash of its own
        (``random.Random(...)``, ``hash(...)``, ``hashlib``...: ``unsolvable``), which would let
        the answer be a hidden pseudo-random function of the values the question shows (this is a
        static screen, answered by the task before any of its code ran)."""
        assert run.iid is not None
        hidden = [f for f in run.parsed.hidden_draws if not f.what.startswith(("rng.", "self.rng."))]
        if hidden:
            where = "; ".join(f"line {f.lineno}: {f.what}" for f in hidden[:3])
            raise _Fail(ErrorKind.UNSOLVABLE, f"the answer may come from a generator or hash of its own ({where}), a value no "
                        "player can work out from the question: setup(rng) must draw only from rng and compute "
                        "self.answer from the values it shows")
        asked: dict[str, tuple[int, str]] = {}
        shown = 0
        for k in range(PUZZLE_SEEDS):
            obs, answer = self._ask(run, asked, (run.seeds[0] + 7919 * (k + 1)) & 0x7FFFFFFF)
            shown += _shows(obs.rsplit("\n", 1)[0], answer)
        if len(asked) < 2:
            raise _Fail(ErrorKind.TRIVIAL, f"every one of {PUZZLE_SEEDS} seeds asks the same question: draw the "
                        "puzzle's values with rng, so each episode is a new question")
        drawn = PUZZLE_SEEDS
        while len({a for _, a in asked.values()}) == 1 and drawn < PUZZLE_SEEDS + PUZZLE_MORE_SEEDS:
            drawn += 1
            self._ask(run, asked, (run.seeds[0] + 7919 * drawn) & 0x7FFFFFFF)
        answers = {a for _, a in asked.values()}
        if len(answers) == 1:
            raise _Fail(
                ErrorKind.UNSOLVABLE,
                f"all {len(asked)} different questions over {drawn} seeds have the same answer ({_short(answers.pop())}): "
                "self.answer must be computed from the values the question shows, not fixed",
            )
        self._answer_follows_question(run)
        if shown == PUZZLE_SEEDS:
            raise _Fail(ErrorKind.TRIVIAL, f"the question shows its own answer at every one of {PUZZLE_SEEDS} seeds "
                        f"(e.g. {_short(answer)}): the answer must be computed, not read off")
        return f"{len(asked)} distinct questions over {drawn} seeds, each with one answer, not shown in it"

    def _ask(self, run: _Run, asked: dict[str, tuple[int, str]], seed: int) -> tuple[str, str]:
        """Reset the puzzle at ``seed``: its question and answer, checked against the questions
        ``asked`` before (the same question must have the same answer) and added to them."""
        assert run.iid is not None
        obs, _ = run.reset(run.iid, seed)
        answer = self._answer(run)
        if answer in ("", "None"):
            raise _Fail(ErrorKind.UNSOLVABLE, f"seed {seed}: self.answer is {answer or 'empty'}: setup() must "
                        "compute it from the values it draws")
        if obs in asked and asked[obs][1] != answer:
            other, before = asked[obs]
            raise _Fail(
                ErrorKind.UNSOLVABLE,
                f"the same question has two answers (seed {other}: {_short(before)}; seed {seed}: "
                f"{_short(answer)}): self.answer must be computed from the values the question shows",
            )
        asked.setdefault(obs, (seed, answer))
        return obs, answer

    def _answer(self, run: _Run) -> str:
        """The answer of the puzzle episode just reset: the text of its solution."""
        return _boxed_text(" ".join(run.call("solution", self.step_timeout_s, iid=run.iid).actions or []))

    def _answer_follows_question(self, run: _Run) -> None:
        """The answer depends only on draws the question shows: the base's fork probe (reset seed
        ``FORK | k << 32 | s``: the first k draws of seed s, the rest of s + 1) replays setup()
        with the draws after the k-th changed; when the question stays the same and the answer
        does not, the answer came from a draw the question never shows (``unsolvable``). Seed s
        is the first validation seed, whose question and solution the checks before recorded."""
        assert run.iid is not None
        base = run.seeds[0]
        question, answer = run.first_obs[base], _boxed_text(" ".join(run.solution_actions or []))
        for k in range(FORK_DRAWS):
            obs, _ = run.reset(run.iid, FORK | k << 32 | base)
            if obs != question:
                continue
            other = self._answer(run)
            if other != answer:
                raise _Fail(
                    ErrorKind.UNSOLVABLE,
                    f"the answer does not follow from the question: with random draw {k + 1} onwards changed, the "
                    f"question stays the same and the answer changes ({_short(answer)} -> {_short(other)}): "
                    "compute self.answer from the values the question shows, never draw it separately",
                )

    def _not_trivial(self, run: _Run) -> str:
        for probe, r in run.probe_results:
            if self._won(r):
                raise _Fail(ErrorKind.TRIVIAL, f"the probe action {_short(probe)} wins (reward {r.reward:g})")
        return f"none of {len(run.probes)} probe actions wins"

    def _gymnasium(self, run: _Run) -> str:
        """gymnasium's checker, run here on a view of a fresh instance in the task: the verdict
        is the engine's, computed from the raw observations the task sends."""
        import warnings

        import gymnasium
        from gymnasium.utils.env_checker import check_env

        iid = run.new()
        env = _CheckedEnv(run, iid, run.spaces)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                check_env(env, skip_render_check=True, skip_close_check=True)
            except _Fail:
                raise
            except (AssertionError, gymnasium.error.Error, TypeError, ValueError) as exc:
                raise _Fail(ErrorKind.CONTRACT, f"gymnasium check_env: {type(exc).__name__}: {exc}") from None
        return "check_env passed (run by the engine)" + (f" ({len(caught)} warning(s))" if caught else "")


class _CheckedEnv:
    """Built on first use (imports gymnasium): see :func:`_checked_env_class`."""

    def __new__(cls, run: _Run, iid: int, spaces: Any) -> Any:
        return _checked_env_class()(run, iid, spaces)


_CHECKED: Any = None


def _checked_env_class() -> Any:
    """A gymnasium.Env whose reset/step are calls into the validation's task (graded here) and
    whose spaces are the environment's declared Text spaces (gymnasium contract) or the SPADE
    contract's text spaces."""
    global _CHECKED
    if _CHECKED is not None:
        return _CHECKED
    import gymnasium as gym
    from gymnasium.spaces import Text

    from .adapters import AnyText
    from .limits import MAX_ACTION_CHARS, MAX_OBS_CHARS

    def space(info: Any, default: int) -> Any:
        if info is None:
            return AnyText(default)
        if info.charset:
            return Text(info.max_length, min_length=info.min_length, charset=info.charset)
        return AnyText(info.max_length, min_length=info.min_length)

    class CheckedEnv(gym.Env):
        metadata: dict[str, Any] = {"render_modes": []}

        def __init__(self, run: _Run, iid: int, spaces: Any) -> None:
            self.run, self.iid = run, iid
            self.observation_space = space(spaces.observation_space if spaces else None, MAX_OBS_CHARS)
            self.action_space = space(spaces.action_space if spaces else None, MAX_ACTION_CHARS)

        def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
            super().reset(seed=seed)
            return self.run.reset(self.iid, seed)  # type: ignore[arg-type]

        def step(self, action: Any) -> Any:
            r = self.run.step(self.iid, str(action))
            return r.as_tuple()

    _CHECKED = CheckedEnv
    return _CHECKED
