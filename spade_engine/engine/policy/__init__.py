"""Policies: one protocol, several backends (procedural, Hugging Face transformers, vLLM)."""

from .base import Policy, PolicyRequest, Sample

__all__ = ["Policy", "PolicyRequest", "Sample"]
