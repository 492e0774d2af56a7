"""The replay-driven trainer: log -> batches -> GRPO update -> checkpoint -> PolicyUpdated.

The trainer's only input is the event log. It folds records into a
:class:`~.batches.BatchAssembler` from its resume point, and whenever ``batch_groups`` complete
groups have produced samples it takes one optimizer step on both roles and publishes the result.

Crash safety (the order of one update)::

    1. train (in memory)
    2. write checkpoint (+ optimizer state) blobs       content-addressed, atomic rename
    3. append PolicyUpdated{version, parent, checkpoint, consumed, metrics}   one atomic append
    4. commit consumer group "trainer" at ``consumed``

The last PolicyUpdated is the trainer's state: on start it loads that checkpoint and optimizer
state and treats every RegretEstimated before ``consumed`` as trained (their groups are discarded
while the log is re-read to rebuild pending groups). A SIGKILL before 3 loses the in-memory
update and the orphan blob is harmless: the same groups are trained again from the previous
weights, so no event ever contributes to two published versions. A SIGKILL between 3 and 4
leaves the committed offset behind: PolicyUpdated wins. ``tests/test_trainer_resume.py`` kills
a trainer subprocess at each of these points (through the ``SPADE_TRAINER_FAULT`` test hook,
which sends the process a real SIGKILL) and at random times.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..blobs import BlobStore
from ..config import TrainerConfig
from ..events.catalogue import BlobRef, PolicyUpdated
from ..events.codec import make_envelope
from ..events.log import Cursor, EventLog, Record, advance
from .batches import BatchAssembler, BatchStats, TrainSample, build_samples
from .checkpoints import (
    DEEPSPEED_STATE,
    latest_policy_update,
    load_deepspeed_state,
    load_optimizer,
    load_weights_into,
    save_adapter,
    save_deepspeed_state,
    save_optimizer,
    save_weights,
    verified_path,
)
from .model import TrainerSetupError, TrainModel, load_base_model
from .update import train_on_samples

__all__ = ["Trainer", "TrainerState", "UpdateObserver", "FAULT_ENV", "GROUP"]

GROUP = "trainer"
FAULT_ENV = "SPADE_TRAINER_FAULT"
_fault_counts: dict[str, int] = {}
logger = logging.getLogger(__name__)


class UpdateObserver(Protocol):
    """What the trainer tells about its versions, injected by whoever builds it (the periodic
    held-out evaluation of ``[eval]``, :class:`spade_engine.evaluation.periodic.PeriodicEvaluator`):
    the trainer never imports the evaluation, which plays episodes with the engine's code."""

    def catch_up(self, latest: PolicyUpdated | None) -> object:
        """Called once before the first read, with the version the trainer resumed from (or
        ``None`` for the base weights)."""
        ...

    def after_update(self, ev: PolicyUpdated) -> object:
        """Called after each published update."""
        ...


def _fault(point: str) -> None:
    """Test hook: ``SPADE_TRAINER_FAULT=point:n`` SIGKILLs this process the n-th time it gets here."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    name, _, n = spec.partition(":")
    if name != point:
        return
    _fault_counts[point] = _fault_counts.get(point, 0) + 1
    if _fault_counts[point] >= int(n or 1):
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class TrainerState:
    """Where the trainer is: its version, step and resume cursor (from the last PolicyUpdated)."""

    version: str = "v0"
    step: int = 0
    consumed: Cursor = field(default_factory=dict)


@dataclass
class _Held:
    """Ready groups taken for the next update (samples are built when it runs, so designer
    rewards are centred per skill across the whole batch)."""

    groups: list[Any] = field(default_factory=list)
    contributing: set[str] = field(default_factory=set)
    consumed: Cursor = field(default_factory=dict)

    def add(self, group: Any, contributes: bool) -> None:
        self.groups.append(group)
        if contributes:
            self.contributing.add(group.group_id)
        self.consumed[group.partition] = max(self.consumed.get(group.partition, 0), group.offset + 1)


class Trainer:
    """GRPO on both roles from a run's event log (see the module docstring).

    Args:
        log: the run's event log.
        blobs: the content-addressed store for checkpoints (``<data>/blobs``).
        config: the trainer section of the run config.
        base_model: model spec (``tiny[:SEED]``, local path, hub id) the run's v0 weights are.
        model, tokenizer: an already-built base model (tests); else loaded from ``base_model``.
        temperature: the sampling temperature the policy records log-probs with: one number, or
            one per trained role (``GenerationConfig.trained_temperatures()``);
            ``trainer.temperature``, when set, overrides it for every role.
        data_dir: where a catalogue model name in ``base_model`` is looked up (its model cache).
        evaluator: told about the base weights and each published version (:class:`UpdateObserver`).
        merged_weights: with LoRA, also record each version's merged weights beside its adapter
            (False: the adapter alone, for a llama.cpp policy; ignored without LoRA, or when the
            adapter is not relative to the base weights, where the merged weights are the record).
    """

    def __init__(
        self,
        log: EventLog,
        *,
        blobs: BlobStore,
        config: TrainerConfig,
        base_model: str,
        model: Any = None,
        temperature: float | Mapping[str, float] = 1.0,
        producer: str = "trainer",
        on_update: Callable[[PolicyUpdated], None] | None = None,
        data_dir: Any = None,
        evaluator: UpdateObserver | None = None,
        merged_weights: bool = True,
    ):
        from ..policy.hf import resolve_device

        self.log = log
        self.blobs = blobs
        self.cfg = config
        self.base_model = base_model
        self.temperature = config.temperature if config.temperature is not None else temperature
        self.producer = producer
        self.on_update = on_update
        self.merged_weights = merged_weights
        self.device = resolve_device(config.device)
        if model is None:
            model, _ = load_base_model(base_model, device=self.device, data_dir=data_dir)
        # the KL term's reference is the base model, also when resuming from a later version
        ref_model = copy.deepcopy(model) if config.kl_coef > 0 else None
        self.state = TrainerState()
        self.resumed_from: PolicyUpdated | None = None
        #: whether the LoRA adapter is relative to the base weights (so it is written with each
        #: version and an engine holding the base model can serve it); False only after resuming a
        #: LoRA run whose versions recorded merged weights alone (PolicyUpdated v1)
        self.adapter_on_base = bool(config.lora)
        last = latest_policy_update(log)
        resume_adapter = None
        if last is not None:
            _, ev = last
            if ev.base_model and ev.base_model != base_model:
                raise TrainerSetupError(
                    f"run {log.run_id} was trained from base model {ev.base_model!r}, not {base_model!r}"
                )
            if config.lora and ev.adapter is not None:
                resume_adapter = verified_path(blobs, ev.adapter)  # loaded into the LoRA model below
            elif ev.checkpoint is None and ev.adapter is not None:
                raise TrainerSetupError(
                    f"run {log.run_id}'s {ev.version} recorded its LoRA adapter alone (trainer.merged_weights = false): "
                    "resume it with trainer.lora = true"
                )
            elif ev.checkpoint is not None:
                load_weights_into(model, verified_path(blobs, ev.checkpoint))
                if config.lora:
                    self.adapter_on_base = False
                    logger.warning(
                        "%s recorded merged weights without an adapter: training a new adapter on top of them "
                        "(its versions cannot be served as adapters on the base model)", ev.version)
            self.state = TrainerState(
                version=ev.version, step=ev.step, consumed={int(k): int(v) for k, v in ev.consumed.items()}
            )
            self.resumed_from = ev
        self.tm = TrainModel(model, config, device=self.device, ref_model=ref_model)
        if resume_adapter is not None:
            from ..policy.lora_adapter import load_adapter_into

            load_adapter_into(self.tm.model, resume_adapter)
        if self.resumed_from is not None and self.resumed_from.optimizer is not None:
            self._restore_optimizer(self.resumed_from.version, self.resumed_from.optimizer)
        self.assembler = BatchAssembler(blobs=blobs, trigger_from=self.state.consumed, designer_window=config.designer_window)
        self.position: Cursor = {}
        self.held = _Held()
        self.updates: list[PolicyUpdated] = []
        self.pad_id = 0
        #: periodic held-out evaluation (``[eval]``), or ``None``
        self.evaluator: UpdateObserver | None = evaluator

    def _restore_optimizer(self, version: str, ref: BlobRef) -> None:
        """Load version's optimizer state, if it was written by the same kind of trainer (plain
        AdamW or DeepSpeed); otherwise say that the moments restart."""
        deepspeed_state = ref.media_type == DEEPSPEED_STATE
        if self.tm.engine is not None and deepspeed_state:
            load_deepspeed_state(self.tm.engine, verified_path(self.blobs, ref))
        elif self.tm.engine is None and not deepspeed_state and (not self.cfg.lora or self.adapter_on_base):
            load_optimizer(self.tm.optimizer, verified_path(self.blobs, ref))
        else:
            kind = "DeepSpeed" if deepspeed_state else "plain"
            logger.warning("the optimizer state of %s was written by a %s trainer: not restored, Adam's moments restart",
                           version, kind)

    # -- reading -------------------------------------------------------------------------------

    def _observe(self, rec: Record) -> list[PolicyUpdated]:
        self.assembler.observe(rec)
        self.position = advance(self.position, rec)
        out = []
        while self.assembler.ready:
            (group,) = self.assembler.take(1)
            samples, _ = self._build([group])
            self.held.add(group, bool(samples))
            if len(self.held.contributing) >= self.cfg.batch_groups:
                ev = self.update()
                if ev is not None:
                    out.append(ev)
        return out

    def run(
        self,
        *,
        follow: bool = False,
        stop: threading.Event | None = None,
        idle_timeout: float | None = None,
        max_updates: int | None = None,
        flush: bool = True,
    ) -> list[PolicyUpdated]:
        """Consume the log from the current position; return the updates published.

        One-shot (default): read what is in the log now, then (``flush``) train on a last partial
        batch. ``follow``: keep waiting for new events until ``stop``/``idle_timeout``/``max_updates``.
        """
        published: list[PolicyUpdated] = []
        if self.evaluator is not None:
            self.evaluator.catch_up(self.resumed_from if not self.updates else self.updates[-1])
        source = (
            self.log.follow(self.position, stop=stop, idle_timeout=idle_timeout)
            if follow
            else self.log.read(self.position)
        )
        for rec in source:
            published.extend(self._observe(rec))
            if max_updates is not None and len(published) >= max_updates:
                return published
        if flush and self.held.groups and (max_updates is None or len(published) < max_updates):
            ev = self.update()
            if ev is not None:
                published.append(ev)
        return published

    # -- one update ----------------------------------------------------------------------------

    def update(self) -> PolicyUpdated | None:
        """Train on the held samples and publish a new version (None when there is nothing)."""
        held, self.held = self.held, _Held()
        samples, stats = self._build(held.groups)
        if not samples:
            return None
        t0 = time.perf_counter()
        _fault("before_update")
        metrics = self._train(samples)
        metrics.update(stats.as_metrics())
        metrics["seconds"] = time.perf_counter() - t0
        metrics["tokens_per_s"] = metrics["tokens"] / max(metrics["seconds"], 1e-9)
        metrics["already_trained_groups_skipped"] = float(self.assembler.already_trained)
        step = self.state.step + 1
        version = f"v{step}"
        _fault("before_checkpoint")
        with self.tm.gathered():
            adapter_only = bool(self.cfg.lora and self.adapter_on_base and not self.merged_weights)
            # float32 (the default): as the trainer holds them; TrainerConfig allows bfloat16 with LoRA only
            dtype = None if self.cfg.merged_weights_dtype == "float32" else self.cfg.merged_weights_dtype
            ckpt = None if adapter_only else save_weights(
                self.tm.model, self.blobs, metadata={"base_model": self.base_model}, dtype=dtype
            )
            adapter_ref = None
            if self.cfg.lora and self.adapter_on_base:
                t_adapter = time.perf_counter()
                adapter_ref = save_adapter(self.tm.model, self.blobs, metadata={"base_model": self.base_model})
                metrics["adapter_save_s"] = time.perf_counter() - t_adapter
        opt_ref = None
        if self.tm.engine is not None:
            opt_ref = save_deepspeed_state(self.tm.engine, self.blobs)
        elif not self.cfg.lora or self.adapter_on_base:
            opt_ref = save_optimizer(self.tm.optimizer, self.blobs)
        _fault("after_checkpoint")
        consumed = dict(self.state.consumed)
        for p, o in held.consumed.items():
            consumed[p] = max(consumed.get(p, 0), o)
        roles = sorted({s.role for s in samples})
        ev = PolicyUpdated(
            version=version,
            parent_version=self.state.version,
            checkpoint=ckpt,
            step=step,
            consumed={str(p): int(o) for p, o in consumed.items()},
            metrics={k: float(v) for k, v in metrics.items() if math.isfinite(float(v))},
            roles=roles,
            base_model=self.base_model,
            optimizer=opt_ref,
            env_ids=[g.group_id for g in held.groups],
            adapter=adapter_ref,
        )
        self.log.append([make_envelope(ev, run_id=self.log.run_id, producer=self.producer)])
        _fault("after_event")
        self.log.commit(GROUP, consumed)
        _fault("after_commit")
        self.state = TrainerState(version=version, step=step, consumed=consumed)
        self.assembler.version_steps[version] = step
        self.updates.append(ev)
        if self.on_update is not None:
            self.on_update(ev)
        if self.evaluator is not None:
            self.evaluator.after_update(ev)
        return ev

    def _build(self, groups: list[Any]) -> tuple[list[TrainSample], BatchStats]:
        return build_samples(
            groups,
            current_step=self.state.step,
            max_lag=self.cfg.max_lag,
            lag_of=self.assembler.lag,
            designer=self.cfg.train_designer,
            advantage_norm=self.cfg.advantage_norm,
            designer_baseline=self.cfg.designer_baseline,
            designer_scale=self.cfg.designer_reward_scale,
            reward_control=self.cfg.reward_control,
        )

    def _train(self, samples: list[TrainSample]) -> dict[str, float]:
        return train_on_samples(self.tm, samples, temperature=self.temperature, pad_id=self.pad_id)
