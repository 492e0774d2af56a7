"""LoRA adapters as files: the trainer's adapter blob, and its GGUF form for llama.cpp.

The trainer (``trainer.lora``) trains low-rank adapters on the dequantised base model and writes,
beside the merged checkpoint, the adapter alone (:func:`save_adapter`): a safetensors file with
PEFT's tensor names (``base_model.model.<module>.lora_A.weight`` / ``lora_B``) and the adapter's
rank and alpha in its metadata. Every adapter is relative to the run's base weights (it is the
whole trained delta, not the last step's), so an inference engine holding the base model serves
any version by loading that version's adapter.

:func:`adapter_to_gguf` writes the same adapter as a llama.cpp LoRA adapter (``general.type =
adapter``, ``adapter.type = lora``, ``adapter.lora.alpha``; tensors ``blk.N.attn_q.weight.lora_a``
and ``.lora_b`` named by gguf's own tensor-name map for the base model's architecture). llama.cpp
scales ``B @ A`` by ``alpha / rank``, as PEFT does without rsLoRA.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .hf import load_safetensors_with_metadata, save_safetensors, unwrap_model

__all__ = ["ADAPTER_MEDIA_TYPE", "AdapterError", "GgufArch", "adapter_state", "save_adapter_file", "read_adapter",
           "adapter_to_gguf", "gguf_architecture", "load_adapter_into"]

#: the media type of an adapter blob (safetensors with PEFT names)
ADAPTER_MEDIA_TYPE = "application/vnd.safetensors; kind=lora-adapter"
_PREFIX = "base_model.model."


class AdapterError(ValueError):
    """An adapter file that cannot be read, converted or loaded."""


def adapter_state(model: Any) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The LoRA tensors of a PEFT model (PEFT's names, CPU float32 copies) and the metadata an
    adapter file records: rank, alpha, target modules."""
    from peft import get_peft_model_state_dict

    model = unwrap_model(model)
    cfg = model.peft_config["default"]
    if getattr(cfg, "use_rslora", False):
        raise AdapterError("rsLoRA adapters scale by alpha/sqrt(r); llama.cpp serves only alpha/r adapters")
    sd = get_peft_model_state_dict(model, save_embedding_layers=False)
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous().clone() for k, v in sd.items() if ".lora_" in k}
    meta = {
        "kind": "lora-adapter",
        "r": int(cfg.r),
        "alpha": float(cfg.lora_alpha),
        "target_modules": sorted(cfg.target_modules) if not isinstance(cfg.target_modules, str) else cfg.target_modules,
    }
    return tensors, meta


def save_adapter_file(model: Any, path: str | Path, metadata: dict[str, Any] | None = None) -> None:
    """Write the PEFT model's adapter to the safetensors file ``path`` (deterministic bytes)."""
    tensors, meta = adapter_state(model)
    save_safetensors(tensors, path, {**meta, **(metadata or {})})


def read_adapter(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The tensors and metadata of an adapter file written by :func:`save_adapter_file`."""
    try:
        tensors, meta = load_safetensors_with_metadata(path)
    except Exception as exc:  # noqa: BLE001 - safetensors raises several kinds for a bad file
        raise AdapterError(f"{path} is not a readable adapter file: {exc}") from None
    if meta.get("kind") != "lora-adapter" or "r" not in meta or "alpha" not in meta:
        raise AdapterError(f"{path} is not a LoRA adapter written by the trainer (metadata {sorted(meta)})")
    return tensors, meta


def load_adapter_into(model: Any, path: str | Path) -> None:
    """Copy an adapter file's tensors into a PEFT model built with the same rank and targets
    (the trainer resuming: its adapter stays relative to the base weights)."""
    from peft import set_peft_model_state_dict

    tensors, meta = read_adapter(path)
    target = unwrap_model(model)
    cfg = target.peft_config["default"]
    if int(meta["r"]) != int(cfg.r) or float(meta["alpha"]) != float(cfg.lora_alpha):
        raise AdapterError(
            f"adapter {path} has rank {meta['r']} and alpha {meta['alpha']}, the trainer is set to rank {cfg.r} "
            f"and alpha {cfg.lora_alpha}"
        )
    result = set_peft_model_state_dict(target, tensors)
    unexpected = list(getattr(result, "unexpected_keys", []) or [])
    if unexpected:
        raise AdapterError(f"adapter {path} has tensors the model lacks: {unexpected[:3]}")


@dataclass(frozen=True)
class GgufArch:
    """What converting an adapter needs to know of its base GGUF model."""

    arch: str
    blocks: int
    heads: int
    kv_heads: int


def gguf_architecture(gguf_path: str | Path) -> GgufArch:
    """The architecture, block count and attention head counts of a GGUF model file."""
    import gguf

    reader = gguf.GGUFReader(str(gguf_path))

    def field(key: str) -> Any:
        found = reader.get_field(key)
        if found is None:
            raise AdapterError(f"{gguf_path} has no {key}")
        return found.contents()

    arch = str(field("general.architecture"))
    heads = int(field(f"{arch}.attention.head_count"))
    kv = reader.get_field(f"{arch}.attention.head_count_kv")
    return GgufArch(arch=arch, blocks=int(field(f"{arch}.block_count")), heads=heads,
                    kv_heads=int(kv.contents()) if kv is not None else heads)


def _llama_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """The row order llama.cpp's converter gives llama's q/k projections (rotary halves
    interleaved); an adapter's lora_B rows of those projections get the same order."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


#: architectures whose converter permutes the q/k rows (convert_hf_to_gguf's LlamaModel family)
_PERMUTED = frozenset({"llama"})


def adapter_to_gguf(adapter_path: str | Path, out_path: str | Path, *, base: GgufArch) -> int:
    """Write the adapter file at ``adapter_path`` as a llama.cpp LoRA adapter at ``out_path`` for
    the base model ``base``; returns the number of adapted weight matrices."""
    import gguf

    arch, n_blocks = base.arch, base.blocks
    tensors, meta = read_adapter(adapter_path)
    arches = {name: key for key, name in gguf.MODEL_ARCH_NAMES.items()}
    if arch not in arches:
        raise AdapterError(f"gguf {gguf.__name__} does not know the architecture {arch!r}")
    names = gguf.get_tensor_name_map(arches[arch], n_blocks)
    pairs: dict[str, dict[str, np.ndarray]] = {}
    for key, value in tensors.items():
        stem, _, part = key.rpartition(".lora_")
        which = part.split(".", 1)[0]  # "A" or "B"
        if which not in ("A", "B"):
            raise AdapterError(f"adapter tensor {key!r} is neither lora_A nor lora_B")
        module = stem[len(_PREFIX):] if stem.startswith(_PREFIX) else stem
        target = names.get_name(module + ".weight", try_suffixes=(".weight",))
        if target is None:
            raise AdapterError(f"adapter tensor {key!r}: no {arch} GGUF tensor for module {module!r}")
        pairs.setdefault(target, {})[which] = value.to(torch.float32).numpy()
    writer = gguf.GGUFWriter(str(out_path), arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(meta["alpha"]))
    for target in sorted(pairs):
        ab = pairs[target]
        if set(ab) != {"A", "B"}:
            raise AdapterError(f"adapter for {target} lacks lora_{'B' if 'A' in ab else 'A'}")
        a, b = ab["A"], ab["B"]  # (r, in) and (out, r): ggml's ne = (in, r) and (r, out)
        if a.shape[0] != b.shape[1]:
            raise AdapterError(f"adapter for {target}: lora_A {a.shape} and lora_B {b.shape} disagree on the rank")
        if arch in _PERMUTED and target.endswith((".attn_q.weight", ".attn_k.weight")):
            b = _llama_permute(b, base.heads if ".attn_q." in target else base.kv_heads)
        writer.add_tensor(f"{target}.lora_a", np.ascontiguousarray(a))
        writer.add_tensor(f"{target}.lora_b", np.ascontiguousarray(b))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return len(pairs)
