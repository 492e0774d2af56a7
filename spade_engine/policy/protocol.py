"""The Policy protocol: the one interface the engine and the trainer use to sample text.

A policy plays three roles (``designer``, ``hinter``, ``agent``) from chat messages. LLM backends
use only ``messages``; the procedural backend (a labelled simulation for offline runs and tests)
may also read the structured ``context`` the engine attaches, one frozen type per role
(:mod:`spade_engine.policy.request_context`: skill, difficulty, document, turn...).
Every sample carries the token ids and behaviour log-probs the trainer needs (empty lists for
backends without tokens), and why it ended (:data:`FINISH_REASONS`).

Generation settings travel with each request (``max_new_tokens``, ``temperature``, ``top_p``,
``stop``, ``enable_thinking``): the stages fill them from the role's section of
``[policy.generation]``; ``None`` leaves the backend's own default.

Every backend declares two attributes that not every backend uses: ``context_window`` (prompt +
completion tokens at most, ``None`` for a backend without a fixed window; the designer's document
budget is fitted to it) and ``on_progress`` (a callable the run sets to receive
:class:`GenerationProgress` during long calls; a backend that reports no progress keeps it and
never calls it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ..events.catalogue import Generation
from .request_context import RequestContext

__all__ = ["Role", "PolicyRequest", "Sample", "Policy", "FINISH_REASONS", "GenerationProgress"]

Role = Literal["designer", "hinter", "agent"]

#: why a completion ended: ``stop`` (an end-of-sequence token), ``length`` (``max_new_tokens``
#: reached), ``stop_string`` (one of the request's ``stop`` strings, cut from the text),
#: ``context`` (the model's context window is full: the prompt left no room, or it cut the reply)
FINISH_REASONS = ("stop", "length", "stop_string", "context")


@dataclass(frozen=True)
class PolicyRequest:
    """One prompt: chat ``messages`` ({"role", "content"} dicts) for a given ``role``."""

    role: Role
    messages: list[dict[str, str]]
    #: the role's structured facts (:mod:`~spade_engine.policy.request_context`); only simulations read them
    context: RequestContext = None
    seed: int | None = None
    max_new_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    enable_thinking: bool | None = None


@dataclass(frozen=True)
class Sample:
    """One completion with what the trainer needs."""

    text: str
    prompt_token_ids: list[int] = field(default_factory=list)
    completion_token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "stop"

    def generation(self) -> Generation:
        return Generation(
            prompt_token_ids=list(self.prompt_token_ids),
            completion_token_ids=list(self.completion_token_ids),
            logprobs=list(self.logprobs),
            finish_reason=self.finish_reason,
        )


@dataclass(frozen=True)
class GenerationProgress:
    """What a backend is doing during one batched call (for live progress displays).

    ``step`` of at most ``max_steps`` decoding steps; ``rows`` completions in the batch of which
    ``finished`` are done; ``tokens`` new tokens so far over every row; ``prompt_tokens`` the
    batch's prompt tokens; ``elapsed_s`` since the call started, ``prefill_s`` of it spent on the
    prompts; ``roles`` the requests' roles."""

    roles: tuple[str, ...]
    rows: int
    finished: int
    step: int
    max_steps: int
    tokens: int
    prompt_tokens: int
    elapsed_s: float
    prefill_s: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        """New tokens per second of decoding (all rows together, prefill excluded)."""
        decode = self.elapsed_s - self.prefill_s
        return self.tokens / decode if decode > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds until the longest row can reach its token limit at the current pace (an upper
        bound: rows usually stop earlier)."""
        decode = self.elapsed_s - self.prefill_s
        if self.step <= 0 or decode <= 0:
            return None
        return (self.max_steps - self.step) * decode / self.step


@runtime_checkable
class Policy(Protocol):
    """Generates text for batches of requests and reports which version of weights it runs."""

    #: backend kind, the name it is registered under (:mod:`spade_engine.policy.registry`)
    kind: str
    #: whether it has weights the trainer can train (PolicyUpdated checkpoints load into it)
    trainable: bool
    #: set by the run to receive progress during long calls; ``None``: nobody listens
    on_progress: Callable[[GenerationProgress], None] | None

    @property
    def context_window(self) -> int | None:
        """Prompt + completion tokens at most (``None``: no fixed window, e.g. the procedural simulation)."""
        ...

    @property
    def version(self) -> str:
        """The policy version (``"v0"`` for the initial weights, then PolicyUpdated versions)."""
        ...

    def generate(self, requests: Sequence[PolicyRequest]) -> list[Sample]:
        """One sample per request, in order (batched where the backend can)."""
        ...

    def load_version(self, version: str, checkpoint: str | None, *, adapter: str | None = None) -> None:
        """Switch to new weights announced by PolicyUpdated: ``checkpoint`` a safetensors file of
        the merged weights, ``adapter`` the LoRA adapter alone when the trainer wrote one (both
        ``None``: the base weights). A backend uses whichever form it serves
        (:func:`spade_engine.policy.versions.load_policy_update` is the way callers switch)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What to record in RunStarted.policy (kind, model, dtype, device, ...)."""
        ...

    def tokenize(self, text: str) -> list[int] | None:
        """Token ids of ``text`` (no special tokens) under the policy's tokenizer; ``None`` for a
        backend without one (the procedural simulation), whose budgets then count words."""
        ...

    def close(self) -> None:
        """Release what the backend holds (engines, device memory); the policy is unusable after."""
        ...
