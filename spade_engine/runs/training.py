"""The one place a run's trainer is built: :func:`build_trainer`, used by the in-process trainer
of ``start`` (``trainer.enabled``, :mod:`.engine`), ``spade-engine train`` (:mod:`.train_cli`) and
``worker trainer`` (:mod:`.worker_cli`).

The trainer module (and torch with it) is imported only when a trainer is built.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..blobs import BlobStore
from ..config import EngineConfig
from ..events.catalogue import PolicyUpdated
from ..events.log import EventLog

if TYPE_CHECKING:  # pragma: no cover
    from ..trainer.loop import Trainer, UpdateObserver

__all__ = ["build_trainer"]


def build_trainer(
    cfg: EngineConfig,
    log: EventLog,
    blobs: BlobStore,
    *,
    data_dir: Path | None,
    base_model: str | None = None,
    on_update: Callable[[PolicyUpdated], None] | None = None,
    evaluator: "UpdateObserver | None" = None,
) -> "Trainer":
    """The trainer of ``cfg`` on ``log``: ``cfg.trainer``'s settings, scoring each trained role at
    the temperature the policy samples it with, from ``base_model`` (default: ``policy.model``).

    ``data_dir`` is where a catalogue model name is looked up; ``on_update`` is called with each
    published PolicyUpdated; ``evaluator`` (the periodic held-out evaluation, built and closed by
    the caller) is told about the base weights and each published version."""
    from ..trainer.loop import Trainer

    return Trainer(
        log, blobs=blobs, config=cfg.trainer, base_model=base_model if base_model is not None else cfg.policy.model,  # type: ignore[arg-type]
        temperature=cfg.policy.generation.trained_temperatures(), on_update=on_update, data_dir=data_dir,
        evaluator=evaluator, merged_weights=cfg.records_merged_weights(),
    )

