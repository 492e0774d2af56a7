"""Policies: one protocol, several backends (procedural, Hugging Face transformers, vLLM).

Backends are imported lazily: ``from spade_engine.policy.transformers_policy import
TransformersPolicy`` (torch + transformers), ``...vllm_policy import VllmPolicy`` (optional
extra), ``...tiny import build_tiny_model`` (tiny seeded test models, no download).
"""

from .protocol import Policy, PolicyRequest, Sample

__all__ = ["Policy", "PolicyRequest", "Sample"]
