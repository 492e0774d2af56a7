"""The policy backends by name: ``policy.kind`` -> the function that builds the backend.

A backend is one module with a ``build(cfg: PolicyConfig, *, band, data_dir) -> Policy`` function, plus
one line in :data:`BUILTIN` (or, from another package, an entry point in the
``spade_engine.policies`` group, or :func:`register` at run time). Modules are imported only when
their backend is built, so optional dependencies (vLLM) stay optional.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from ..errors import SpadeError

if TYPE_CHECKING:  # pragma: no cover
    from ..config import PolicyConfig
    from .protocol import Policy

__all__ = ["PolicyBackend", "BUILTIN", "register", "backend_names", "backend", "lookup", "make_policy", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "spade_engine.policies"


@dataclass(frozen=True)
class PolicyBackend:
    """A named backend: ``factory`` is ``"module:function"`` (imported lazily) or a callable."""

    name: str
    factory: str | Callable[..., Any]
    trainable: bool
    needs_model: bool
    description: str = ""

    def build(self, cfg: "PolicyConfig", *, band: tuple[float, float], data_dir: Any = None) -> "Policy":
        fn = self.factory
        if isinstance(fn, str):
            module, _, attr = fn.partition(":")
            try:
                fn = getattr(importlib.import_module(module), attr)
            except ImportError as exc:
                raise SpadeError(f"the {self.name} policy is not available: {exc}") from None
        return fn(cfg, band=band, data_dir=data_dir)


BUILTIN: dict[str, PolicyBackend] = {
    b.name: b
    for b in (
        PolicyBackend("procedural", "spade_engine.policy.procedural.policy:build", trainable=False, needs_model=False,
                      description="labelled simulation: template environments and a simulated agent, no model"),
        PolicyBackend("transformers", "spade_engine.policy.transformers_policy:build", trainable=True, needs_model=True,
                      description="Hugging Face transformers causal LM (CPU or GPU)"),
        PolicyBackend("vllm", "spade_engine.policy.vllm_policy:build", trainable=True, needs_model=True,
                      description="vLLM in-process engine (optional GPU extra)"),
    )
}
_registered: dict[str, PolicyBackend] = {}


def register(backend: PolicyBackend) -> None:
    """Add (or replace) a backend at run time."""
    _registered[backend.name] = backend


def _from_entry_points() -> dict[str, PolicyBackend]:
    found: dict[str, PolicyBackend] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found[ep.name] = PolicyBackend(ep.name, ep.value, trainable=True, needs_model=True, description=f"entry point {ep.value}")
    return found


def _all() -> dict[str, PolicyBackend]:
    return {**_from_entry_points(), **BUILTIN, **_registered}


def backend_names() -> list[str]:
    """Every backend name ``policy.kind`` accepts."""
    return sorted(_all())


def backend(kind: str) -> PolicyBackend:
    """The backend registered as ``kind``."""
    found = _all().get(kind)
    if found is None:
        raise SpadeError(f"unknown policy kind {kind!r} (registered: {', '.join(backend_names())})")
    return found


def lookup(kind: str) -> PolicyBackend | None:
    """The backend registered as ``kind``, or ``None`` for a kind no backend is registered under
    (a policy not built through the registry, such as a test double)."""
    return _all().get(kind)


def make_policy(cfg: "PolicyConfig", *, band: tuple[float, float] = (0.4, 0.6), data_dir: Any = None) -> "Policy":
    """The policy backend named by ``cfg.kind``, built from its section of the config.

    ``data_dir`` locates the model cache for catalogue names (``--model qwen2.5-coder-0.5b-instruct``)."""
    b = backend(cfg.kind)
    if b.needs_model and not cfg.model:
        raise SpadeError(f"the {cfg.kind} policy needs a model (--model NAME_OR_PATH)")
    return b.build(cfg, band=band, data_dir=data_dir)
