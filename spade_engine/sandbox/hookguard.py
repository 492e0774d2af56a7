"""Detecting that the audit hook was disarmed from inside the task.

The audit hook (the second layer, after the seccomp filter) is a Python closure in the same
process as the environment, and a Python hook cannot be removed, but it can be made harmless:
its closure cells can be found through ``gc`` and rewritten, its code object replaced, or the
globals and mutable tables it reads patched. Two checks catch that, and the engine compares
both with what the task reported before any environment code ran (its ``ready`` frame):

* **fingerprint**: :class:`HookGuard` covers the identity of the hook's code object and of
  every object its closure cells hold (recursively for the helper closures it calls; library
  functions they call, like ``os.path.realpath``, by identity), the contents of the mutable
  tables among them, and the identity of every global or builtin name its code looks up. The
  task takes that description before any environment code runs and compares the current one
  with it before every reply (by identity, tables by contents); the fingerprint it sends stays
  the same string while they match and changes from the first difference on. (The hook itself
  also kills the task on the two direct routes: ``gc.get_objects``/``get_referrers``/
  ``get_referents`` and setting a function's ``__code__``.)
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

__all__ = ["HEARTBEAT_EVENT", "HookGuard", "describe"]

HEARTBEAT_EVENT = "spade.heartbeat"

_FunctionType = types.FunctionType
_CodeType = types.CodeType
_type, _tuple, _len = type, tuple, len
_builtins = builtins.__dict__
_names_of: dict[Any, tuple[str, ...]] = {}  # code -> names it looks up
_MISSING = object()


def _names(code: Any) -> tuple[str, ...]:
    """Every global or builtin name ``code`` (and the code nested in it) may look up (cached)."""
    names = _names_of.get(code)
    if names is None:
        out: list[str] = []
        stack = [code]
        while stack:
            c = stack.pop()
            out.extend(c.co_names)
            stack.extend(k for k in c.co_consts if _type(k) is _CodeType)
        names = _names_of[code] = _tuple(out)
    return names


def describe(hook: Any) -> tuple[list[Any], list[dict[Any, Any]]]:
    """``(objects, tables)`` that identify ``hook``: the objects (compared by identity: code,
    globals, looked-up names, defaults, closure contents) and its mutable tables (dicts, compared
    by contents). The hook's helper closures (functions of its module) are described in
    full; library functions they call by identity only. No ``id()`` (each call of it is an audit
    event): this runs before every reply."""
    home = hook.__globals__
    refs: list[Any] = [hook]
    tables: list[dict[Any, Any]] = []
    stack = [hook]
    seen: list[Any] = []
    add = refs.append
    while stack:
        f = stack.pop()
        seen.append(f)
        code = f.__code__
        g = f.__globals__
        add(code)
        add(g)
        for name in _names(code):  # globals and builtins the code looks up
            add(g.get(name, _MISSING) if name in g else _builtins.get(name, _MISSING))
        add(f.__defaults__)
        for cell in f.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                add(_MISSING)
                continue
            add(value)
            t = _type(value)
            if t is dict:  # the hook's mutable tables: by contents too (a list, e.g. the heartbeat, by identity)
                tables.append(value)
            elif t is _FunctionType and value.__globals__ is home and _len(seen) < 32 and not any(value is x for x in seen):
                stack.append(value)
    return refs, tables


class HookGuard:
    """The hook's description when the task started; :meth:`fingerprint` is the same string as
    long as nothing in it changed, and another one from the first change on."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook
        self._refs, tables = describe(hook)
        self._tables = [dict(t) for t in tables]  # copies: what the tables held at the start
        self._fp = f"{_len(self._refs)}:{_len(self._tables)}"

    def fingerprint(self) -> str:
        refs, tables = describe(self.hook)
        if _len(refs) != _len(self._refs) or tables != self._tables:
            return f"changed:{_len(refs)}"
        for i, (a, b) in enumerate(zip(refs, self._refs)):
            if a is not b:
                return f"changed:{i}"
        return self._fp
