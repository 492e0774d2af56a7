"""Which weights ``--run R --version V`` means: the PolicyUpdated of that version and its file.

``V`` is a version announced by a ``PolicyUpdated`` of run R (``v3``), ``latest`` (the newest
one) or ``v0`` (the base weights the run started from: no checkpoint). The checkpoint is read
from the data directory's blob store after its sha256 is checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..blobs import BlobStore
from ..errors import SpadeError
from ..events.catalogue import PolicyUpdated
from ..events.log import EventLog
from ..trainer.checkpoints import latest_policy_update, verified_path

__all__ = ["CheckpointError", "RunCheckpoint", "find_checkpoint"]


class CheckpointError(SpadeError):
    """The run has no such policy version, or its checkpoint is missing or corrupt."""


@dataclass(frozen=True)
class RunCheckpoint:
    """A run's policy version: its base model, and the verified checkpoint path (``None``: the base weights,
    or a LoRA version recorded as its ``adapter`` alone)."""

    run_id: str
    version: str
    base_model: str | None
    path: Path | None
    sha256: str | None
    #: the verified LoRA adapter of the version, when its trainer wrote one (PolicyUpdated v2)
    adapter: Path | None = None


def _updates(log: EventLog) -> list[PolicyUpdated]:
    out = []
    for rec in log.read():
        if rec.envelope.type != PolicyUpdated.TYPE:
            continue
        try:
            out.append(rec.envelope.event())
        except Exception:  # noqa: BLE001 - unreadable updates cannot be loaded anyway
            continue
    return out


def find_checkpoint(log: EventLog, version: str, blobs: BlobStore) -> RunCheckpoint:
    """The checkpoint of ``version`` in ``log`` (``latest``: the newest update, ``v0``: base weights)."""
    updates = _updates(log)
    base = next((u.base_model for u in updates if u.base_model), None)
    if version == "v0" or (version == "latest" and not updates):
        return RunCheckpoint(run_id=log.run_id, version="v0", base_model=base, path=None, sha256=None)
    if version == "latest":
        found = latest_policy_update(log)
        ev = found[1] if found else None
    else:
        ev = next((u for u in updates if u.version == version), None)
    if ev is None:
        known = ", ".join(["v0", *[u.version for u in updates]])
        raise CheckpointError(f"run {log.run_id} has no policy version {version!r} (known: {known})")
    if ev.checkpoint is None and ev.adapter is not None:  # a LoRA version recorded as its adapter alone
        return RunCheckpoint(
            run_id=log.run_id, version=ev.version, base_model=ev.base_model or base, path=None,
            sha256=ev.adapter.sha256, adapter=verified_path(blobs, ev.adapter),
        )
    if ev.checkpoint is None:
        return RunCheckpoint(run_id=log.run_id, version=ev.version, base_model=ev.base_model or base, path=None, sha256=None)
    path = verified_path(blobs, ev.checkpoint)
    adapter = verified_path(blobs, ev.adapter) if ev.adapter is not None else None
    return RunCheckpoint(
        run_id=log.run_id, version=ev.version, base_model=ev.base_model or base, path=path, sha256=ev.checkpoint.sha256,
        adapter=adapter,
    )
