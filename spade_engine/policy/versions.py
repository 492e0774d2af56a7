"""Serving a trainer's version: the one way a policy is switched to a PolicyUpdated's weights.

A version is a merged safetensors checkpoint and, from a LoRA trainer (event v2), the adapter
alone. :func:`load_policy_update` checks both blobs' digests and hands their paths to the policy's
``load_version``: the transformers and vLLM backends copy the merged weights in, the llama.cpp
backend loads the adapter on top of its base GGUF. It returns how long the switch took, which
callers record (the engine's ``policy_sync_s`` activity, the dashboard).
"""

from __future__ import annotations

import time

from ..blobs import BlobStore
from ..events.catalogue import PolicyLoaded, PolicyUpdated
from .protocol import Policy

__all__ = ["update_paths", "load_policy_update", "loaded_event"]


def update_paths(ev: PolicyUpdated, blobs: BlobStore) -> tuple[str | None, str | None]:
    """The verified local paths of ``ev``'s checkpoint and adapter (``None`` for what it lacks)."""
    checkpoint = str(blobs.verified(ev.checkpoint)) if ev.checkpoint is not None else None
    adapter = str(blobs.verified(ev.adapter)) if ev.adapter is not None else None
    return checkpoint, adapter


def load_policy_update(policy: Policy, ev: PolicyUpdated, blobs: BlobStore) -> float:
    """Make ``policy`` serve ``ev``'s version; returns the seconds it took."""
    t = time.perf_counter()
    checkpoint, adapter = update_paths(ev, blobs)
    policy.load_version(ev.version, checkpoint, adapter=adapter)
    return time.perf_counter() - t


def loaded_event(policy: Policy, ev: PolicyUpdated, seconds: float, *, producer_role: str) -> PolicyLoaded:
    """The PolicyLoaded event recording that ``policy`` now serves ``ev`` (after
    :func:`load_policy_update` took ``seconds``)."""
    served = "adapter" if policy.kind == "llamacpp" and ev.adapter is not None else (
        "checkpoint" if ev.checkpoint is not None else "base")
    return PolicyLoaded(version=ev.version, seconds=round(seconds, 4), served_as=served, policy_kind=policy.kind,
                        producer_role=producer_role)
