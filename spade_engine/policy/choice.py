"""Which backend runs a ``--model``, and building that policy as ``start --model`` does.

A GGUF model (a catalogue name or a ``.gguf`` file) on a machine without CUDA runs on llama.cpp,
which reads the quantised file several times faster than transformers reads its dequantised
copy; everything else runs on transformers. ``start``, ``eval`` and the model benchmarks use
these two functions, so a model spec means the same backend everywhere.
"""

from __future__ import annotations

from typing import Any

from ..config import PolicyConfig
from .protocol import Policy
from .registry import make_policy

__all__ = ["default_kind_for_model", "model_policy"]


def default_kind_for_model(model: str, *, cuda: bool | None = None) -> str:
    """The backend a ``--model`` runs on when none is asked for: ``llamacpp`` for a GGUF model (a
    catalogue name or a ``.gguf`` file) on a machine without a CUDA device, where llama.cpp reads
    the quantised file five times faster than transformers reads its dequantised copy;
    ``transformers`` for everything else (directories, hub ids, ``tiny``, and GPUs)."""
    from ..models.catalogue import load_catalogue

    gguf = model.lower().endswith(".gguf") or model in load_catalogue()
    if not gguf:
        return "transformers"
    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    return "transformers" if cuda else "llamacpp"


def model_policy(
    model: str, *, kind: str | None = None, generation: dict[str, Any] | None = None,
    sections: dict[str, Any] | None = None, data_dir: Any = None,
) -> "Policy":
    """The policy a ``--model`` spec runs on, as ``start --model`` builds it: ``kind`` (default
    :func:`default_kind_for_model`), with ``[policy.generation]`` and backend ``sections`` given
    as dicts (``{"llamacpp": {"parallel": 16}}``)."""
    cfg = PolicyConfig.model_validate({
        "kind": kind or default_kind_for_model(model), "model": model, "generation": generation or {}, **(sections or {}),
    })
    return make_policy(cfg, data_dir=data_dir)
