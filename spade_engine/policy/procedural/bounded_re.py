"""Regular expressions over environment and model text with a time bound: the procedural
agent's parsers run in the engine's own process, on observations that model-written code
produced, and one observation once made a pattern backtrack for half an hour (the run showed no
progress and Ctrl-C waited for it).

The module offers the few ``re`` functions the procedural policy uses, with the same signatures
and results, backed by the ``regex`` package with a timeout per call (:data:`TIMEOUT_S`) and, for
the searches, the text cut to :data:`MAX_CHARS` (``sub`` and ``split`` see the whole text). A call that runs out of time gives what "no match" gives (``None``,
``[]``, the text unchanged or unsplit), so the agent answers as it does for an observation it does
not understand, and is logged once per pattern. Import it as ``re`` (``from . import bounded_re
as re``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import regex

__all__ = ["M", "S", "TIMEOUT_S", "MAX_CHARS", "search", "fullmatch", "findall", "finditer", "sub", "split"]

log = logging.getLogger("spade_engine.policy")

M = regex.M
S = regex.S
#: the longest any one pattern may run (seconds)
TIMEOUT_S = 0.25
#: the longest text a pattern is run over (observations are at most 100 000 characters)
MAX_CHARS = 100_000
_warned: set[str] = set()


def _timed_out(pattern: Any) -> None:
    key = str(getattr(pattern, "pattern", pattern))[:80]
    if key not in _warned:
        _warned.add(key)
        log.warning("a regular expression of the procedural agent ran out of time (%.2fs): %r", TIMEOUT_S, key)


def _cut(text: str) -> str:
    return text[:MAX_CHARS] if len(text) > MAX_CHARS else text


def search(pattern: str, string: str, flags: int = 0) -> Any:
    try:
        return regex.search(pattern, _cut(string), flags, timeout=TIMEOUT_S)
    except TimeoutError:
        _timed_out(pattern)
        return None


def fullmatch(pattern: str, string: str, flags: int = 0) -> Any:
    try:
        return regex.fullmatch(pattern, _cut(string), flags, timeout=TIMEOUT_S)
    except TimeoutError:
        _timed_out(pattern)
        return None


def findall(pattern: str, string: str, flags: int = 0) -> list[Any]:
    try:
        return regex.findall(pattern, _cut(string), flags, timeout=TIMEOUT_S)
    except TimeoutError:
        _timed_out(pattern)
        return []


def finditer(pattern: str, string: str, flags: int = 0) -> list[Any]:
    """All matches at once (a list, so the time bound covers the whole scan)."""
    try:
        return list(regex.finditer(pattern, _cut(string), flags, timeout=TIMEOUT_S))
    except TimeoutError:
        _timed_out(pattern)
        return []


def sub(pattern: str, repl: str | Callable[[Any], str], string: str, count: int = 0, flags: int = 0) -> str:
    try:
        return regex.sub(pattern, repl, string, count, flags, timeout=TIMEOUT_S)
    except TimeoutError:
        _timed_out(pattern)
        return string


def split(pattern: str, string: str, maxsplit: int = 0, flags: int = 0) -> list[str]:
    try:
        return regex.split(pattern, string, maxsplit, flags, timeout=TIMEOUT_S)
    except TimeoutError:
        _timed_out(pattern)
        return [string]
