"""Periodic held-out evaluation by the trainer (the ``[eval]`` config section).

A :class:`PeriodicEvaluator` is handed to a :class:`~spade_engine.trainer.loop.Trainer` by
whoever builds it (:func:`spade_engine.runs.training.build_trainer`; the trainer knows it only
as an :class:`~spade_engine.trainer.loop.UpdateObserver`, so it never imports the evaluation,
which plays episodes with the engine's code). After the trainer publishes the ``PolicyUpdated``
of step ``s`` with ``s % eval.every == 0`` it loads that update's checkpoint (sha256 checked)
into its evaluation policy, scores it on ``eval.suites`` with :func:`~.runner.evaluate`, and
appends one ``EvaluationCompleted`` per task to the run's own log (producer ``trainer-eval``), so
the held-out accuracy of every evaluated version sits in the log next to the training that
produced it.
With ``eval.base`` the base weights (``v0``) are evaluated once, before the first update.

* The items are generated once per evaluator (same suites, size and seed for every version), so
  versions are compared on the same items (``item_ids`` / ``item_correct`` pair them).
* Event ids and the ``evaluation_id`` are functions of (run, version, settings, task): appending
  the same evaluation twice records it once, and :meth:`PeriodicEvaluator.catch_up` (called when
  the trainer starts reading) evaluates a due version whose evaluation is missing, e.g. a trainer
  killed between its PolicyUpdated and the evaluation.
* The evaluation policy is either given (the in-process trainer of ``start --train`` passes the
  engine's own policy, which loads each new version anyway) or built on first use from the base
  model (``spade-engine train``, ``worker trainer``): a second copy of the weights, in evaluation
  mode, never the trainer's training model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..blobs import BlobStore
from ..config import EvalConfig, SandboxConfig
from ..errors import ConfigError
from ..events.catalogue import BlobRef, EvaluationCompleted, PolicyUpdated
from ..events.codec import make_envelope
from ..events.log import EventLog
from ..policy.protocol import Policy
from ..trainer.checkpoints import verified_path
from .runner import EvalSettings, PolicyInfo, evaluate
from .suites import EvalTask, archive_tasks, parse_suite, reasoning_gym_tasks

__all__ = [
    "PRODUCER",
    "PeriodicEvaluator",
    "eval_settings",
    "build_eval_tasks",
    "periodic_evaluation_id",
    "transformers_policy_factory",
    "run_log_opener",
    "standalone_evaluator",
]

PRODUCER = "trainer-eval"
#: sampling temperature of avg@k when ``eval.temperature`` is not set (as ``spade-engine eval``)
DEFAULT_SAMPLING_TEMPERATURE = 0.6
_NS = uuid.UUID("0f3f6a8e-6f1c-4a53-9d55-3e1a3b0c9e21")
log_ = logging.getLogger(__name__)


def eval_settings(cfg: EvalConfig) -> EvalSettings:
    """The sampling settings of an ``[eval]`` section."""
    temp = cfg.temperature if cfg.temperature is not None else (0.0 if cfg.k == 1 else DEFAULT_SAMPLING_TEMPERATURE)
    return EvalSettings(k=cfg.k, temperature=temp, max_new_tokens=cfg.max_new_tokens, batch_size=cfg.batch_size,
                        prompt=cfg.prompt)


def build_eval_tasks(cfg: EvalConfig, *, open_log: Callable[[str], EventLog] | None = None) -> list[EvalTask]:
    """The tasks of ``cfg.suites`` (reasoning-gym items generated now; ``archive:RUN`` read through
    ``open_log(run)``, which must return a log the caller's data directory holds)."""
    tasks: list[EvalTask] = []
    for text in cfg.suites:
        spec = parse_suite(text)
        if spec.kind == "reasoning-gym":
            tasks.extend(reasoning_gym_tasks(spec, size=cfg.size, seed=cfg.seed))
            continue
        if open_log is None:
            raise ConfigError(f"eval.suites: {text} needs the data directory of run {spec.run}")
        src = open_log(str(spec.run))
        try:
            tasks.extend(archive_tasks(src, size=cfg.size, seed=cfg.seed))
        finally:
            src.close()
    labels = [t.label for t in tasks]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"eval.suites names a task twice: {', '.join(sorted({x for x in labels if labels.count(x) > 1}))}")
    return tasks


def _settings_digest(cfg: EvalConfig) -> str:
    doc = cfg.model_dump(mode="json")
    doc.pop("every", None)
    doc.pop("base", None)
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def periodic_evaluation_id(run_id: str, version: str, cfg: EvalConfig) -> str:
    """The deterministic ``evaluation_id`` of the periodic evaluation of ``version`` in a run."""
    return str(uuid.uuid5(_NS, f"{run_id}/{version}/{_settings_digest(cfg)}"))


@dataclass
class PeriodicEvaluator:
    """Evaluates the trainer's new versions every ``cfg.every`` updates (see the module docstring).

    Args:
        cfg: the run's ``[eval]`` section.
        log: the run's log (results are appended to it).
        blobs: where the checkpoints are.
        policy: the policy to evaluate with (it is switched to each evaluated version), or
        policy_factory: builds it on first use (then it is closed by :meth:`close`).
        tasks: the items (default: built from ``cfg`` on first use).
        sandbox: sandbox limits for archive suites (a pool is started on first use) or
        pool: an existing sandbox pool to play archive suites in.
        model: the model name recorded in the events (default: the policy's own description).
        on_progress: told ``(task, items done, items)`` while a version is scored.
    """

    cfg: EvalConfig
    log: EventLog
    blobs: BlobStore
    policy: Policy | None = None
    policy_factory: Callable[[], Policy] | None = None
    tasks: list[EvalTask] | None = None
    open_log: Callable[[str], EventLog] | None = None
    sandbox: SandboxConfig | None = None
    pool: Any = None
    model: str | None = None
    producer: str = PRODUCER
    on_result: Callable[[str, list[EvaluationCompleted]], None] | None = None
    #: ``on_progress(task label, items done, items)`` while a version is scored
    on_progress: Callable[[str, int, int], None] | None = None
    evaluated: list[str] = field(default_factory=list)
    _owns_policy: bool = False
    _owns_pool: bool = False
    _caught_up: bool = False

    def __post_init__(self) -> None:
        if self.cfg.every < 1:
            raise ConfigError("eval.every must be at least 1 for periodic evaluation")
        if self.policy is None and self.policy_factory is None:
            raise ConfigError("a periodic evaluator needs a policy or a policy factory")
        self.settings = eval_settings(self.cfg)

    # -- when -------------------------------------------------------------------------------------

    def due(self, step: int) -> bool:
        """Whether the update of ``step`` is evaluated (step 0 = the base weights, with ``eval.base``)."""
        return self.cfg.base if step == 0 else step % self.cfg.every == 0

    def recorded_ids(self) -> set[str]:
        """``evaluation_id`` of every EvaluationCompleted already in the log."""
        out: set[str] = set()
        for rec in self.log.read():
            if rec.envelope.type == EvaluationCompleted.TYPE:
                eid = rec.envelope.payload.get("evaluation_id")
                if isinstance(eid, str):
                    out.add(eid)
        return out

    def catch_up(self, latest: PolicyUpdated | None) -> list[EvaluationCompleted]:
        """Once per process, before training: evaluate the base weights (no update yet) or the
        latest version, when due and not yet recorded."""
        if self._caught_up:
            return []
        self._caught_up = True
        step = latest.step if latest is not None else 0
        version = latest.version if latest is not None else "v0"
        if not self.due(step) or periodic_evaluation_id(self.log.run_id, version, self.cfg) in self.recorded_ids():
            return []
        if latest is None:
            return self.evaluate_version(version, None)
        return self.evaluate_version(version, latest.checkpoint, adapter=latest.adapter)

    def after_update(self, ev: PolicyUpdated) -> list[EvaluationCompleted]:
        """Called by the trainer after it published ``ev``: evaluate it when due."""
        self._caught_up = True  # a trainer that already trained needs no catch-up
        if not self.due(ev.step):
            return []
        return self.evaluate_version(ev.version, ev.checkpoint, adapter=ev.adapter)

    # -- how --------------------------------------------------------------------------------------

    def _policy(self) -> Policy:
        if self.policy is None:
            assert self.policy_factory is not None
            self.policy = self.policy_factory()
            self._owns_policy = True
        return self.policy

    def _tasks(self) -> list[EvalTask]:
        if self.tasks is None:
            self.tasks = build_eval_tasks(self.cfg, open_log=self.open_log)
        return self.tasks

    def _pool(self) -> Any:
        if self.pool is None:
            from ..sandbox import SandboxPool

            self.pool = SandboxPool(self.sandbox or SandboxConfig())
            self._owns_pool = True
        return self.pool

    def evaluate_version(
        self, version: str, checkpoint: BlobRef | None, *, adapter: BlobRef | None = None
    ) -> list[EvaluationCompleted]:
        """Load ``version`` (its checkpoint and adapter, or the base weights for ``v0``), score
        it, record it."""
        tasks = self._tasks()
        policy = self._policy()
        if policy.version != version:
            path = str(verified_path(self.blobs, checkpoint)) if checkpoint is not None else None
            adapter_path = str(verified_path(self.blobs, adapter)) if adapter is not None else None
            if path is None and adapter_path is None and version != "v0":
                raise ConfigError(f"policy version {version} has no checkpoint to evaluate")
            policy.load_version(version, path, adapter=adapter_path)
        needs_pool = any(t.dataset is None for t in tasks)
        sandbox = self.sandbox or SandboxConfig()
        results = evaluate(
            policy, tasks, self.settings, pool=self._pool() if needs_pool else None,
            step_timeout_s=sandbox.step_timeout_s, concurrency=sandbox.workers, on_progress=self.on_progress,
        )
        desc: dict[str, Any] = {}
        try:
            desc = dict(policy.describe())
        except Exception:  # noqa: BLE001 - informational
            pass
        info = PolicyInfo(
            version=version, model=self.model or str(desc.get("model") or desc.get("kind") or "unknown"),
            checkpoint_sha256=(checkpoint.sha256 if checkpoint is not None else adapter.sha256 if adapter is not None else None),
            run_id=self.log.run_id,
        )
        evaluation_id = periodic_evaluation_id(self.log.run_id, version, self.cfg)
        events = [r.event(evaluation_id=evaluation_id, policy=info, settings=self.settings) for r in results]
        envelopes = [
            make_envelope(e, run_id=self.log.run_id, producer=self.producer,
                          event_id=str(uuid.uuid5(_NS, f"{evaluation_id}/{e.suite}/{e.task}")))
            for e in events
        ]
        self.log.append(envelopes)
        self.evaluated.append(version)
        if self.on_result is not None:
            self.on_result(version, events)
        return events

    def close(self) -> None:
        if self._owns_pool and self.pool is not None:
            self.pool.close()
            self.pool = None
        if self._owns_policy and self.policy is not None:
            self.policy.close()
            self.policy = None


def transformers_policy_factory(
    model: str, *, data_dir: Path | None, max_new_tokens: int, device: str = "auto"
) -> Callable[[], Policy]:
    """A factory for an evaluation policy of ``model`` (a catalogue name, directory, hub id or
    ``tiny[:SEED]``) on the transformers backend."""

    def build() -> Policy:
        from ..config import PolicyConfig
        from ..policy.registry import make_policy

        cfg = PolicyConfig.model_validate({
            "kind": "transformers", "model": model, "transformers": {"device": device},
            "generation": {"max_new_tokens": max_new_tokens, "temperature": 0.0},
        })
        return make_policy(cfg, data_dir=data_dir)

    return build


def run_log_opener(data_dir: Path, *, backend: str = "sqlite", bootstrap: str | None = None) -> Callable[[str], EventLog]:
    """``open_log(run)`` for archive suites: a run (or unique prefix) of ``data_dir``."""

    def open_log(run: str) -> EventLog:
        from ..events.store import open_event_log, resolve_run

        run_id = resolve_run(run, data_dir=data_dir, backend=backend, bootstrap=bootstrap)
        return open_event_log(run_id, data_dir=data_dir, backend=backend, bootstrap=bootstrap, read_only=True)

    return open_log


def standalone_evaluator(
    cfg: Any, log: EventLog, blobs: BlobStore, *, base_model: str, data_dir: Path,
    on_result: Callable[[str, list[EvaluationCompleted]], None] | None = None,
) -> PeriodicEvaluator | None:
    """The evaluator of a trainer running on its own (``spade-engine train``, ``worker trainer``):
    ``None`` unless ``cfg.eval.every`` > 0; its policy is a separate copy of ``base_model``."""
    if cfg.eval.every < 1:
        return None
    return PeriodicEvaluator(
        cfg.eval, log=log, blobs=blobs,
        policy_factory=transformers_policy_factory(base_model, data_dir=data_dir, max_new_tokens=cfg.eval.max_new_tokens),
        open_log=run_log_opener(data_dir, backend=cfg.log.backend, bootstrap=cfg.log.bootstrap),
        sandbox=cfg.sandbox, model=base_model, on_result=on_result,
    )
