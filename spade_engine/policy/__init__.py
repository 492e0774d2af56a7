"""Policies: one protocol (``protocol``), backends registered by name (``registry``) with their
settings sections of ``[policy]`` (``settings``: the built-in backends' models).

Backends (imported lazily by the registry): ``procedural/`` (a labelled simulation: template
environments from skill families, a simulated agent), ``transformers_policy`` (Hugging Face
transformers, CPU or GPU; decoding in ``decoding``, its grouped-query attention in
``attention``, prompt reuse in ``prefix_cache``), ``vllm_policy`` (optional GPU extra). ``tiny``
builds tiny seeded test models (no download); ``hf`` holds the Hugging Face helpers the backends
and the trainer share (offline mode, device and dtype, safetensors load/save).
"""

from .protocol import Policy, PolicyRequest, Sample

__all__ = ["Policy", "PolicyRequest", "Sample"]
