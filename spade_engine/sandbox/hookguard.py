"""Detecting that the audit hook was disarmed from inside the task.

The audit hook (the second layer, after the seccomp filter) is a Python closure in the same
process as the environment, and a Python hook cannot be removed, but it can be made harmless:
its closure cells can be found through ``gc`` and rewritten, its code object replaced, or the
globals and mutable tables it reads patched. Two checks catch that, and the engine compares
both with what the task reported before any environment code ran (its ``ready`` frame):

* **fingerprint**: :func:`fingerprint` covers the identity of the hook's code object and of
  every object its closure cells hold (recursively for the helper closures it calls), the
  contents of the mutable tables among them, and the identity of every global or builtin name
  its code looks up. Any rewrite changes it.
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
_id, _type, _len, _repr, _sorted, _hash, _tuple = id, type, len, repr, sorted, hash, tuple
_builtins = builtins.__dict__


def _names(code: Any, out: list[str]) -> None:
    out.extend(code.co_names)
    for c in code.co_consts:
        if _type(c) is _CodeType:
            _names(c, out)


def _describe(obj: Any, depth: int, out: list[Any], seen: set[int]) -> None:
    t = _type(obj)
    out.append(_id(obj))
    out.append(_id(t))
    if t is dict:  # the hook's mutable tables: their contents (a list, e.g. the heartbeat, only by identity)
        out.append(_repr(_sorted((_repr(k), _repr(v)) for k, v in obj.items())))
    elif t is _FunctionType and depth < 4 and _id(obj) not in seen:
        seen.add(_id(obj))
        code = obj.__code__
        out.append(_id(code))
        out.append(_id(obj.__globals__))
        names: list[str] = []
        _names(code, names)
        g = obj.__globals__
        for name in names:  # globals and builtins the code looks up
            if name in g:
                out.append(_id(g[name]))
            elif name in _builtins:
                out.append(_id(_builtins[name]))
        out.append(_repr(obj.__defaults__))
        for cell in obj.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                out.append(None)
                continue
            _describe(value, depth + 1, out, seen)


def fingerprint(hook: Any) -> str:
    """A value that changes when ``hook``'s code, closure, tables or looked-up names change."""
    out: list[Any] = []
    _describe(hook, 0, out, set())
    return f"{_len(out)}:{_hash(_tuple(out)) & 0xFFFFFFFFFFFFFFFF:016x}"
