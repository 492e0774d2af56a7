"""Detecting that the audit hook was disarmed from inside the task.

The audit hook (the second layer, after the seccomp filter) is a Python closure in the same
process as the environment, and a Python hook cannot be removed, but it can be made harmless:
its closure cells can be found through ``gc`` and rewritten, its code object replaced, or the
globals and mutable tables it reads patched. Two checks catch that, and the engine compares
both with what the task reported before any environment code ran (its ``ready`` frame):

* **fingerprint**: :func:`fingerprint` covers the identity of the hook's code object and of
  every object its closure cells hold (recursively for the helper closures it calls; library
  functions they call, like ``os.path.realpath``, by identity), the contents of the mutable
  tables among them, and the identity of every global or builtin name its code looks up. Any
  rewrite of those changes it.
* **heartbeat**: before every reply the task raises the audit event ``spade.heartbeat`` with the
  command's sequence number; the hook stores it where the task reads it back. A hook whose code
  was replaced, or that no longer runs, does not echo it.

A mismatch is an anomaly: the engine kills the task (``forbidden``, "the audit hook was tampered
with") and recycles its worker. This is detection, not a wall: code that also rewrites the task's
own reply path can forge both checks, which is why the kernel filter exists underneath.

Imported by the untrusted worker as a plain module: standard library only.
"""

from __future__ import annotations

import builtins
import types
from typing import Any

__all__ = ["HEARTBEAT_EVENT", "fingerprint"]

HEARTBEAT_EVENT = "spade.heartbeat"

_FunctionType = types.FunctionType
_CodeType = types.CodeType
_id, _type, _repr, _sorted, _hash, _tuple, _frozenset = id, type, repr, sorted, hash, tuple, frozenset
_builtins = builtins.__dict__
_names_of: dict[int, tuple[Any, tuple[str, ...]]] = {}  # id(code) -> (code, names it looks up)


def _names(code: Any) -> tuple[str, ...]:
    """Every global or builtin name ``code`` (and the code nested in it) may look up (cached)."""
    hit = _names_of.get(_id(code))
    if hit is not None and hit[0] is code:
        return hit[1]
    out: list[str] = []
    stack = [code]
    while stack:
        c = stack.pop()
        out.extend(c.co_names)
        stack.extend(k for k in c.co_consts if _type(k) is _CodeType)
    names = _tuple(out)
    _names_of[_id(code)] = (code, names)
    return names


def _table(d: dict[Any, Any]) -> Any:
    try:
        return _hash(_frozenset(d.items()))
    except TypeError:  # unhashable values
        return _repr(_sorted((_repr(k), _repr(v)) for k, v in d.items()))


def _describe(fn: Any, out: list[Any], home: Any) -> None:
    """Append what identifies ``fn`` and, in full, the helper closures of the hook it holds
    (functions of the hook's module: ``home`` is its globals); library functions they call are
    kept by identity only. Iterative, and cheap: it runs before every reply."""
    stack = [fn]
    seen: set[int] = set()
    append = out.append
    while stack:
        f = stack.pop()
        seen.add(_id(f))
        code = f.__code__
        g = f.__globals__
        append(_id(code))
        append(_id(g))
        for name in _names(code):  # globals and builtins the code looks up
            append(_id(g[name]) if name in g else _id(_builtins.get(name)))
        append(_id(f.__defaults__))
        for cell in f.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                append(None)
                continue
            append(_id(value))
            t = _type(value)
            if t is dict:  # the hook's mutable tables: their contents (a list, e.g. the heartbeat, by identity)
                append(_table(value))
            elif t is _FunctionType and value.__globals__ is home and _id(value) not in seen and len(seen) < 32:
                stack.append(value)


def fingerprint(hook: Any) -> str:
    """A value that changes when ``hook``'s code, closure, tables or looked-up names change."""
    out: list[Any] = [_id(hook)]
    _describe(hook, out, hook.__globals__)
    return f"{len(out)}:{_hash(_tuple(out)) & 0xFFFFFFFFFFFFFFFF:016x}"
