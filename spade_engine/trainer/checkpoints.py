"""Checkpoints: model weights (and optimizer state) as safetensors in the content-addressed store,
and the PolicyUpdated events that announce them. The safetensors files themselves are written and
read by the Hugging Face helpers the policies share (:mod:`spade_engine.policy.hf`).

* :func:`save_weights` writes the *effective* weights of a model (LoRA adapters merged into
  their base layers, tied tensors stored once) to ``<data>/blobs`` and returns a
  :class:`~spade_engine.events.catalogue.BlobRef` (``cas://sha256/<hex>``); the same weights
  always give the same digest;
* :func:`load_weights_into` (re-exported from :mod:`spade_engine.policy.hf`) copies a checkpoint
  into a model in place (so compiled graphs and static caches built on it stay valid);
* :func:`save_optimizer` / :func:`load_optimizer` round-trip an optimizer's state (tensors in
  safetensors, hyper-parameters in its metadata) so a resumed trainer continues AdamW exactly;
  :func:`save_deepspeed_state` / :func:`load_deepspeed_state` do the same for a DeepSpeed engine
  (its own checkpoint directory, partitioned optimizer state included, as one tar blob);
* :func:`latest_policy_update` finds a run's newest PolicyUpdated, :func:`sync_policy` makes a
  rollout/designer policy load it when its version differs (what workers call when they see one).
"""

from __future__ import annotations

import os
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import torch

from ..blobs import BlobStore
from ..policy.hf import (
    SAFETENSORS,
    effective_state_dict,
    load_safetensors_with_metadata,
    load_weights_into,
    save_safetensors,
)
from ..events.catalogue import BlobRef, PolicyUpdated
from ..events.log import EventLog, Record

__all__ = [
    "effective_state_dict",
    "save_weights",
    "save_adapter",
    "load_weights_into",
    "save_optimizer",
    "load_optimizer",
    "save_deepspeed_state",
    "load_deepspeed_state",
    "DEEPSPEED_STATE",
    "latest_policy_update",
    "sync_policy",
    "version_step",
    "verified_path",
]

DEEPSPEED_STATE = "application/x-tar; format=deepspeed-checkpoint"
_DS_TAG = "state"


def _put_safetensors(blobs: BlobStore, tensors: dict[str, torch.Tensor], metadata: dict[str, Any]) -> BlobRef:
    # identical content gives identical bytes (save_safetensors), hence the same digest
    blobs.root.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=blobs.root, prefix=".ckpt-", suffix=".safetensors")
    os.close(fd)
    try:
        save_safetensors(tensors, tmp, metadata)
        return blobs.put_file(tmp, media_type=SAFETENSORS)
    finally:
        Path(tmp).unlink(missing_ok=True)


def save_weights(
    model: Any, blobs: BlobStore, *, metadata: dict[str, str] | None = None, dtype: str | None = None
) -> BlobRef:
    """Write the model's effective weights as one safetensors blob; return its reference.
    ``dtype`` (``"float32"``, ``"bfloat16"``): cast the floating-point tensors to it first
    (``trainer.merged_weights_dtype``).

    Metadata must be deterministic for identical weights to share a digest (no timestamps).
    """
    tensors = effective_state_dict(model)
    if dtype is not None:
        cast = getattr(torch, dtype)
        tensors = {k: v.to(cast) if v.is_floating_point() else v for k, v in tensors.items()}
    return _put_safetensors(blobs, tensors, {"kind": "weights", **(metadata or {})})


def save_adapter(model: Any, blobs: BlobStore, *, metadata: dict[str, str] | None = None) -> BlobRef:
    """Write a LoRA model's adapter alone (relative to the base weights) as one blob of media type
    :data:`~spade_engine.policy.lora_adapter.ADAPTER_MEDIA_TYPE`; return its reference."""
    from ..policy.lora_adapter import ADAPTER_MEDIA_TYPE, adapter_state

    tensors, meta = adapter_state(model)
    ref = _put_safetensors(blobs, tensors, {**meta, **(metadata or {})})
    return BlobRef(uri=ref.uri, sha256=ref.sha256, size=ref.size, media_type=ADAPTER_MEDIA_TYPE)


def save_optimizer(optimizer: torch.optim.Optimizer, blobs: BlobStore) -> BlobRef:
    """The optimizer's state as a safetensors blob (hyper-parameters in its metadata)."""
    state = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, Any] = {}
    for pid, st in state["state"].items():
        for name, val in st.items():
            key = f"{pid}.{name}"
            if torch.is_tensor(val):
                tensors[key] = val.detach().to("cpu").contiguous().clone()
            else:
                scalars[key] = val
    return _put_safetensors(blobs, tensors, {"kind": "optimizer", "param_groups": state["param_groups"], "scalars": scalars})


def load_optimizer(optimizer: torch.optim.Optimizer, path: str | Path) -> None:
    """Restore state written by :func:`save_optimizer` into ``optimizer`` (same parameter order)."""
    tensors, meta = load_safetensors_with_metadata(path)
    state: dict[int, dict[str, Any]] = {}
    for key, val in tensors.items():
        pid, name = key.split(".", 1)
        state.setdefault(int(pid), {})[name] = val
    for key, val in meta.get("scalars", {}).items():
        pid, name = key.split(".", 1)
        state.setdefault(int(pid), {})[name] = val
    if "param_groups" not in meta:
        raise ValueError(f"{path} is not an optimizer checkpoint")
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})


def save_deepspeed_state(engine: Any, blobs: BlobStore) -> BlobRef:
    """A DeepSpeed engine's own checkpoint (``engine.save_checkpoint``: module, partitioned
    optimizer and scheduler state) packed into one tar blob of media type :data:`DEEPSPEED_STATE`."""
    blobs.root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=blobs.root, prefix=".ds-") as tmp:
        ckpt = Path(tmp) / "ckpt"
        engine.save_checkpoint(str(ckpt), tag=_DS_TAG, save_latest=False)
        packed = Path(tmp) / "state.tar"
        with tarfile.open(packed, "w") as tar:
            for f in sorted((ckpt / _DS_TAG).rglob("*")):
                if f.is_file():
                    info = tar.gettarinfo(str(f), arcname=f.relative_to(ckpt).as_posix())
                    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                    with open(f, "rb") as fh:
                        tar.addfile(info, fh)
        return blobs.put_file(packed, media_type=DEEPSPEED_STATE)


def load_deepspeed_state(engine: Any, path: str | Path) -> None:
    """Restore a blob written by :func:`save_deepspeed_state` into a DeepSpeed engine built with
    the same model and ZeRO configuration."""
    with tempfile.TemporaryDirectory(prefix="spade-ds-") as tmp:
        try:
            with tarfile.open(path) as tar:
                tar.extractall(tmp, filter="data")
        except tarfile.TarError as exc:
            raise ValueError(f"{path} is not a DeepSpeed state blob: {exc}") from None
        loaded, _ = engine.load_checkpoint(
            tmp, tag=_DS_TAG, load_optimizer_states=True, load_lr_scheduler_states=True, load_module_strict=True
        )
        if loaded is None:
            raise ValueError(f"{path}: DeepSpeed found no checkpoint in it")


def version_step(version: str) -> int | None:
    """``"v12"`` -> 12; other version strings -> None."""
    if version.startswith("v") and version[1:].isdigit():
        return int(version[1:])
    return None


def verified_path(blobs: BlobStore, ref: BlobRef) -> Path:
    """Local path of ``ref`` after checking its sha256 (streamed); raises BlobError if corrupt."""
    return blobs.verified(ref)


def latest_policy_update(log: EventLog, cursor: dict[int, int] | None = None) -> tuple[Record, PolicyUpdated] | None:
    """The newest PolicyUpdated in ``log`` (at or after ``cursor``), with its record."""
    found: tuple[Record, PolicyUpdated] | None = None
    for rec in log.read(cursor):
        if rec.envelope.type != PolicyUpdated.TYPE:
            continue
        try:
            ev = rec.envelope.event()
        except Exception:  # noqa: BLE001 - a consumer never crashes on a bad event
            continue
        if found is None or ev.step >= found[1].step:
            found = (rec, ev)
    return found


def sync_policy(policy: Any, log: EventLog, blobs: BlobStore) -> bool:
    """Load the run's newest policy version into ``policy`` if it is not already running it.

    Returns True when weights were loaded. Rollout and designer workers call this whenever they
    see a PolicyUpdated (or before each batch).
    """
    from ..policy.versions import load_policy_update

    latest = latest_policy_update(log)
    if latest is None:
        return False
    _, ev = latest
    if ev.version == policy.version:
        return False
    load_policy_update(policy, ev, blobs)
    return True
