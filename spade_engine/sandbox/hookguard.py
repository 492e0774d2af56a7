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
with") and recycles its worker.

In the worker the hook and these checks are built privately (:func:`make_fingerprint` and the
hook are cloned with globals of their own and a private copy of the builtins) and run in a thread
in which no environment code runs, so nothing an environment can reach from Python (modules,
classes, the builtins, its own frames) leads to them: rewriting them needs a raw memory primitive.
This is still detection, not a wall: code with raw memory access (a C extension, ctypes) can
forge both checks, which is why the kernel layers (seccomp, namespaces, cgroups) exist
underneath and hold whatever happens to the hook.

Imported by the untrusted worker as a plain module: standard library only.
"""

from __future__ import annotations

import builtins
import types
from typing import Any, Callable

__all__ = ["HEARTBEAT_EVENT", "HookGuard", "describe", "make_fingerprint"]

HEARTBEAT_EVENT = "spade.heartbeat"


def make_fingerprint(hook: Any, function_type: type, code_type: type, default_builtins: dict[str, Any]) -> tuple[Callable[[], str], Callable[[], tuple[list[Any], list[dict[Any, Any]]]]]:
    """``(fingerprint, describe)`` for ``hook``: ``describe()`` gives ``(objects, tables)`` that
    identify it (objects compared by identity: code, globals, looked-up names, defaults, closure
    contents, recursively for the helper closures of its own globals; tables, the dicts among
    them, by contents), ``fingerprint()`` the same string as long as nothing in that description
    changed since this call and another one from the first change on. Every helper is local to
    this call, so a clone of this function with private globals (the worker's) depends on
    nothing shared. No ``id()`` (each call of it is an audit event): this runs before every reply."""
    names_of: dict[Any, tuple[str, ...]] = {}
    missing = object()

    def names(code: Any) -> tuple[str, ...]:
        """Every global or builtin name ``code`` (and the code nested in it) may look up (cached)."""
        found = names_of.get(code)
        if found is None:
            out: list[str] = []
            stack = [code]
            while stack:
                c = stack.pop()
                out.extend(c.co_names)
                stack.extend(k for k in c.co_consts if type(k) is code_type)
            found = names_of[code] = tuple(out)
        return found

    def describe_() -> tuple[list[Any], list[dict[Any, Any]]]:
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
            b = g.get("__builtins__", default_builtins)
            if type(b) is not dict:
                b = vars(b)
            add(code)
            add(g)
            for name in names(code):  # globals and builtins the code looks up
                add(g.get(name, missing) if name in g else b.get(name, missing))
            add(f.__defaults__)
            for cell in f.__closure__ or ():
                try:
                    value = cell.cell_contents
                except ValueError:  # an empty cell
                    add(missing)
                    continue
                add(value)
                t = type(value)
                if t is dict:  # the hook's mutable tables: by contents too (a list, e.g. the heartbeat, by identity)
                    tables.append(value)
                elif t is function_type and value.__globals__ is home and len(seen) < 32 and not any(value is x for x in seen):
                    stack.append(value)
        return refs, tables

    refs0, tables0 = describe_()
    saved = [dict(t) for t in tables0]  # copies: what the tables held at the start
    fp0 = f"{len(refs0)}:{len(saved)}"

    def fingerprint() -> str:
        refs, tables = describe_()
        if len(refs) != len(refs0) or tables != saved:
            return f"changed:{len(refs)}"
        for i, (a, b) in enumerate(zip(refs, refs0)):
            if a is not b:
                return f"changed:{i}"
        return fp0

    return fingerprint, describe_


def describe(hook: Any) -> tuple[list[Any], list[dict[Any, Any]]]:
    """``(objects, tables)`` that identify ``hook`` (see :func:`make_fingerprint`)."""
    return make_fingerprint(hook, types.FunctionType, types.CodeType, builtins.__dict__)[1]()


class HookGuard:
    """The hook's description when the task started; :meth:`fingerprint` is the same string as
    long as nothing in it changed, and another one from the first change on."""

    def __init__(self, hook: Any) -> None:
        self.hook = hook
        self.fingerprint = make_fingerprint(hook, types.FunctionType, types.CodeType, builtins.__dict__)[0]
