"""The policy backends by name: ``policy.kind`` -> the function that builds the backend, whether
it has weights to train and needs a model, and its settings section.

A backend is one module with a ``build(cfg: PolicyConfig, *, band, data_dir) -> Policy`` function,
plus its registration: one :class:`PolicyBackend` in :data:`BUILTIN`, or, from another package,
an entry point in the ``spade_engine.policies`` group naming a :class:`PolicyBackend` (an entry
point naming a bare build function registers a trainable backend that needs a model and has no
settings), or :func:`register` at run time. A backend's settings (a pydantic model,
``settings=``) become its section of ``[policy]``, validated by
:class:`~spade_engine.config.PolicyConfig` and read by the backend as ``cfg.section(name)`` (or
``cfg.<name>``). Backend modules are imported only when their backend is built, so optional
dependencies (vLLM) stay optional; a settings model given as ``"module:Class"`` is imported when a
config is read, so it belongs in a light module (the built-in ones are :mod:`.settings`).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ..errors import SpadeError
from .settings import LlamaCppPolicyConfig, ProceduralPolicyConfig, TransformersPolicyConfig, VllmPolicyConfig

if TYPE_CHECKING:  # pragma: no cover
    from ..config import PolicyConfig
    from .protocol import Policy

__all__ = [
    "PolicyBackend", "BUILTIN", "register", "backend_names", "backend", "lookup", "backend_settings", "make_policy",
    "ENTRY_POINT_GROUP",
]

ENTRY_POINT_GROUP = "spade_engine.policies"


def _load(ref: str, what: str) -> Any:
    module, _, attr = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        raise SpadeError(f"the {what} is not available: {exc}") from None


@dataclass(frozen=True)
class PolicyBackend:
    """A named backend: ``factory`` is ``"module:function"`` (imported lazily) or a callable;
    ``settings`` its section of ``[policy]``: a pydantic model, ``"module:Class"``, or ``None``
    for a backend without settings."""

    name: str
    factory: str | Callable[..., Any]
    trainable: bool
    needs_model: bool
    description: str = ""
    settings: type[BaseModel] | str | None = None

    def build(self, cfg: "PolicyConfig", *, band: tuple[float, float], data_dir: Any = None) -> "Policy":
        fn = self.factory
        if isinstance(fn, str):
            fn = _load(fn, f"{self.name} policy")
        return fn(cfg, band=band, data_dir=data_dir)

    def settings_model(self) -> type[BaseModel] | None:
        """The pydantic model of this backend's ``[policy.<name>]`` section, if it has one."""
        model = self.settings
        if isinstance(model, str):
            model = _load(model, f"settings of the {self.name} policy")
        if model is not None and not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise SpadeError(f"the settings of the {self.name} policy are not a pydantic model: {model!r}")
        return model


BUILTIN: dict[str, PolicyBackend] = {
    b.name: b
    for b in (
        PolicyBackend("procedural", "spade_engine.policy.procedural.policy:build", trainable=False, needs_model=False,
                      description="labelled simulation: template environments and a simulated agent, no model",
                      settings=ProceduralPolicyConfig),
        PolicyBackend("transformers", "spade_engine.policy.transformers_policy:build", trainable=True, needs_model=True,
                      description="Hugging Face transformers causal LM (CPU or GPU)", settings=TransformersPolicyConfig),
        PolicyBackend("llamacpp", "spade_engine.policy.llamacpp_policy:build", trainable=True, needs_model=True,
                      description="llama.cpp on GGUF models (CPU; optional build: spade-engine models install-llamacpp)",
                      settings=LlamaCppPolicyConfig),
        PolicyBackend("vllm", "spade_engine.policy.vllm_policy:build", trainable=True, needs_model=True,
                      description="vLLM in-process engine (optional GPU extra)", settings=VllmPolicyConfig),
    )
}
_registered: dict[str, PolicyBackend] = {}


#: keys of ``[policy]`` that are not backend sections
RESERVED = ("kind", "model", "designer_model", "generation")


def register(backend: PolicyBackend) -> None:
    """Add (or replace) a backend at run time."""
    if backend.settings is not None and backend.name in RESERVED:
        raise SpadeError(f"a policy backend with settings cannot be named {backend.name!r} (a key of [policy] itself)")
    _registered[backend.name] = backend


def _entry_point_backend(ep: EntryPoint) -> PolicyBackend:
    """An entry point's backend: the :class:`PolicyBackend` it names (under the entry point's
    name), or, for an entry point naming a build function (or one that does not load now), that
    function as a trainable backend that needs a model, built lazily as before."""
    try:
        obj = ep.load()
    except Exception:  # noqa: BLE001 - a broken plugin must not break reading every config; building it says why
        obj = None
    if isinstance(obj, PolicyBackend):
        return obj if obj.name == ep.name else dataclasses.replace(obj, name=ep.name)
    return PolicyBackend(ep.name, ep.value, trainable=True, needs_model=True, description=f"entry point {ep.value}")


def _from_entry_points() -> dict[str, PolicyBackend]:
    return {ep.name: _entry_point_backend(ep) for ep in entry_points(group=ENTRY_POINT_GROUP)}


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


def backend_settings() -> dict[str, type[BaseModel]]:
    """The settings model of every registered backend that has one, by name: the sections
    :class:`~spade_engine.config.PolicyConfig` validates (built-in backends first)."""
    backends = _all()
    order = [*BUILTIN, *(n for n in backends if n not in BUILTIN)]
    out: dict[str, type[BaseModel]] = {}
    for name in order:
        model = backends[name].settings_model()
        if model is not None and name not in RESERVED:
            out[name] = model
    return out


def make_policy(cfg: "PolicyConfig", *, band: tuple[float, float] = (0.4, 0.6), data_dir: Any = None) -> "Policy":
    """The policy backend named by ``cfg.kind``, built from its section of the config.

    ``data_dir`` locates the model cache for catalogue names (``--model qwen2.5-coder-0.5b-instruct``)."""
    b = backend(cfg.kind)
    if b.needs_model and not cfg.model:
        raise SpadeError(f"the {cfg.kind} policy needs a model (--model NAME_OR_PATH)")
    policy = b.build(cfg, band=band, data_dir=data_dir)
    if cfg.designer_model:
        from .routed import RoleRoutedPolicy

        if not b.needs_model:
            raise SpadeError(f"policy.designer_model needs a backend that runs models, not {cfg.kind}")
        designer = b.build(cfg.model_copy(update={"model": cfg.designer_model, "designer_model": None}), band=band,
                           data_dir=data_dir)
        return RoleRoutedPolicy(policy, designer)
    return policy

