"""A prefix cache: the keys and values of token sequences the sampler already computed, reused
when a later prompt starts with the same tokens.

Prompts in self-play repeat themselves: every designer prompt opens with the same system prompt
and contract, a repair is the previous prompt plus the previous completion plus the validator's
verdict, and each agent turn is the previous turn's conversation plus one reply and one
observation. Without a cache each of them is prefilled from its first token. On a CPU, where
prefill of a few thousand tokens takes minutes, that repeated work dominates a run.

:class:`PrefixCache` keeps, per entry, a token sequence and its per-layer keys/values (computed
with positions starting at 0, as the sampler does for every left-padded row); :meth:`lookup`
returns the entry with the longest common prefix with a prompt. Entries are evicted least
recently used beyond ``max_tokens`` tokens, and an entry that is a prefix of a newly stored one is
dropped (the new one covers it). The cache is per process and per set of weights: loading new
weights must :meth:`clear` it.

Reuse changes nothing but floating-point rounding: the keys and values of a position depend only
on the tokens up to it and their positions.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

__all__ = ["PrefixCache", "CachedPrefix", "common_prefix"]


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two int arrays."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


@dataclass
class CachedPrefix:
    """One cached sequence: its tokens and, per layer, keys and values ``(heads, n, head_dim)``."""

    tokens: np.ndarray
    keys: list[torch.Tensor]
    values: list[torch.Tensor]

    def __len__(self) -> int:
        return len(self.tokens)


class PrefixCache:
    """Least-recently-used cache of computed prefixes, bounded by ``max_tokens`` tokens in all."""

    def __init__(self, max_tokens: int = 65_536, *, min_tokens: int = 16):
        self.max_tokens = max(0, int(max_tokens))
        self.min_tokens = max(1, int(min_tokens))
        self._entries: OrderedDict[int, CachedPrefix] = OrderedDict()
        self._next = 0
        self.hits = 0
        self.reused_tokens = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def tokens(self) -> int:
        return sum(len(e) for e in self._entries.values())

    def clear(self) -> None:
        self._entries.clear()

    def lookup(self, prompt: Sequence[int]) -> tuple[CachedPrefix | None, int]:
        """The entry sharing the longest prefix with ``prompt`` and that length, capped at
        ``len(prompt) - 1`` (the last prompt token is always computed, for its logits);
        ``(None, 0)`` below ``min_tokens``."""
        if not self._entries or len(prompt) < 2:
            return None, 0
        p = np.asarray(prompt, dtype=np.int64)
        best, best_n, best_key = None, 0, None
        for key, entry in self._entries.items():
            n = common_prefix(p, entry.tokens)
            if n > best_n:
                best, best_n, best_key = entry, n, key
        best_n = min(best_n, len(prompt) - 1)
        if best is None or best_n < self.min_tokens:
            return None, 0
        self._entries.move_to_end(best_key)  # type: ignore[arg-type]
        self.hits += 1
        self.reused_tokens += best_n
        return best, best_n

    def store(self, tokens: Sequence[int], keys: list[torch.Tensor], values: list[torch.Tensor]) -> None:
        """Keep ``tokens`` with their keys/values (one ``(heads, n, head_dim)`` tensor per layer)."""
        if self.max_tokens <= 0 or len(tokens) < self.min_tokens or len(tokens) > self.max_tokens:
            return
        t = np.asarray(tokens, dtype=np.int64)
        for e in self._entries.values():
            if len(e) >= len(t) and common_prefix(t, e.tokens) == len(t):
                return  # an entry already covers it
        for key in [k for k, e in self._entries.items() if len(e) <= len(t) and common_prefix(t, e.tokens) == len(e)]:
            del self._entries[key]  # covered by the new entry
        self._entries[self._next] = CachedPrefix(tokens=t, keys=keys, values=values)
        self._next += 1
        while self._entries and self.tokens > self.max_tokens:
            self._entries.popitem(last=False)
