"""Hugging Face helpers shared by the policy backends and the trainer: offline mode, device and
dtype resolution, and safetensors load/save (effective state dicts, in-place loading, files with
canonical metadata).

The trainer writes checkpoints with :func:`effective_state_dict` (LoRA merged, tied tensors once)
and :func:`save_safetensors`, and every policy backend loads them with :func:`load_weights_into`
(vLLM: :func:`load_safetensors`), so both sides agree on the format without depending on each
other.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ..errors import SpadeError

__all__ = [
    "PolicyLoadError",
    "model_source",
    "offline",
    "resolve_device",
    "resolve_dtype",
    "unwrap_model",
    "is_peft",
    "effective_state_dict",
    "load_weights_into",
    "SAFETENSORS",
    "save_safetensors",
    "load_safetensors",
    "load_safetensors_with_metadata",
]

#: the media type of a safetensors blob
SAFETENSORS = "application/vnd.safetensors"
#: the one metadata key :func:`save_safetensors` writes (its value: canonical JSON)
_META_KEY = "spade"


class PolicyLoadError(SpadeError):
    """A model, tokenizer or checkpoint could not be loaded."""


def require_merged_weights(kind: str, version: str, checkpoint: str | None, adapter: str | None) -> None:
    """Refuse a version recorded as its LoRA adapter alone (``trainer.merged_weights = false``)
    for a backend that loads merged weights (transformers, vLLM)."""
    if checkpoint is None and adapter is not None:
        raise PolicyLoadError(
            f"{version} was recorded as a LoRA adapter alone (trainer.merged_weights = false): the {kind} "
            "policy loads merged weights; serve it with the llamacpp policy"
        )


def model_source(spec: str, *, data_dir: str | Path | None = None) -> str:
    """What ``from_pretrained`` loads for a ``--model`` spec: a catalogue name becomes its fetched
    directory, a ``.gguf`` file its converted one (:func:`spade_engine.models.resolve_model_spec`;
    the cache is ``$SPADE_MODEL_CACHE``, else ``<data dir>/models``); a directory, a hub id or
    ``tiny[:SEED]`` is returned unchanged."""
    from ..models.resolve import resolve_model_spec

    return resolve_model_spec(spec, data_dir=data_dir)


def offline() -> bool:
    """True when the Hugging Face hub must not be contacted."""
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(dtype: str | torch.dtype = "auto", device: torch.device | None = None) -> torch.dtype:
    """``auto``: bf16 on a CUDA device that supports it, else fp32."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        if device is not None and device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    table = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
             "fp32": torch.float32, "float32": torch.float32}
    if dtype not in table:
        raise PolicyLoadError(f"unknown dtype {dtype!r} (expected auto, bf16, fp16 or fp32)")
    return table[dtype]


def unwrap_model(model: Any) -> Any:
    """The module holding the weights (DeepSpeed engines expose ``.module``)."""
    return getattr(model, "module", model) if type(model).__name__ == "DeepSpeedEngine" else model


def is_peft(model: Any) -> bool:
    try:
        from peft import PeftModel
    except ImportError:  # pragma: no cover - peft is installed in dev
        return False
    return isinstance(model, PeftModel)


def effective_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """CPU copies of the weights a plain (non-LoRA) model of the same architecture would load.

    LoRA adapters are merged for the copy and unmerged again; tensors shared by several names
    (tied embeddings) are kept under their first name only.
    """
    model = unwrap_model(model)
    if is_peft(model):
        model.merge_adapter()
        try:
            raw = model.get_base_model().state_dict()
            sd = {k.replace(".base_layer.", "."): v.detach().to("cpu", copy=True) for k, v in raw.items() if "lora_" not in k}
        finally:
            model.unmerge_adapter()
    else:
        sd = {k: v.detach() for k, v in model.state_dict().items()}
    out: dict[str, torch.Tensor] = {}
    seen: set[tuple[int, int]] = set()
    for k, v in sd.items():
        ident = (v.data_ptr(), v.numel()) if v.device.type != "meta" else (id(v), 0)
        if v.numel() and ident in seen:
            continue
        seen.add(ident)
        out[k] = v.to("cpu").contiguous().clone()
    return out


def load_weights_into(model: Any, path: str | Path) -> None:
    """Copy the safetensors weights at ``path`` into ``model`` in place.

    Every tensor in the file must match a parameter/buffer; names missing from the file must be
    tied to one that is present (e.g. ``lm_head.weight``). Raises ``ValueError`` otherwise.
    """
    sd = load_safetensors(path)
    target = unwrap_model(model)
    if is_peft(target):
        base = target.get_base_model()
        names = {k.replace(".base_layer.", "."): k for k in base.state_dict() if "lora_" not in k}
        unknown = [k for k in sd if k not in names]
        if unknown:
            raise ValueError(f"checkpoint has tensors the model lacks: {unknown[:5]}")
        params = dict(base.state_dict(keep_vars=True))
        with torch.no_grad():
            for k, v in sd.items():
                params[names[k]].copy_(v.to(params[names[k]].dtype))
        return
    own = target.state_dict(keep_vars=True)
    unknown = [k for k in sd if k not in own]
    if unknown:
        raise ValueError(f"checkpoint has tensors the model lacks: {unknown[:5]}")
    present = {(t.data_ptr(), t.numel()) for k, t in own.items() if k in sd}
    missing = [k for k, t in own.items() if k not in sd and (t.data_ptr(), t.numel()) not in present]
    if missing:
        raise ValueError(f"checkpoint lacks tensors the model needs: {missing[:5]}")
    wrong = [f"{k} {tuple(v.shape)} != {tuple(own[k].shape)}" for k, v in sd.items() if v.shape != own[k].shape]
    if wrong:
        raise ValueError(f"checkpoint shapes do not match the model: {wrong[:3]}")
    with torch.no_grad():
        for k, v in sd.items():
            own[k].copy_(v.to(device=own[k].device, dtype=own[k].dtype))


def save_safetensors(tensors: dict[str, torch.Tensor], path: str | Path, metadata: dict[str, Any]) -> None:
    """Write ``tensors`` to the safetensors file ``path`` with ``metadata`` (JSON values).

    safetensors writes its metadata map in hash order: the metadata is kept under ONE key as a
    canonical JSON string, so identical content always gives identical bytes (hence the same
    digest in the blob store)."""
    meta = {_META_KEY: json.dumps(metadata, sort_keys=True, separators=(",", ":"))}
    save_file(tensors, str(path), metadata=meta)


def load_safetensors(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of the safetensors file ``path`` (on the CPU)."""
    return load_file(str(path))


def load_safetensors_with_metadata(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The tensors of the safetensors file ``path`` and the metadata :func:`save_safetensors`
    wrote (``{}`` for a file written otherwise)."""
    with safe_open(str(path), framework="pt") as fh:
        meta = json.loads((fh.metadata() or {}).get(_META_KEY, "{}"))
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    return tensors, meta
