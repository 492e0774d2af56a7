"""Size limits on everything that crosses the sandbox boundary, and the engine's re-check of them.

The worker applies these limits before it answers (it truncates error texts, refuses observations
over :data:`MAX_OBS_CHARS`, caps info dicts), but the worker runs next to the environment, which
can patch it. So the engine re-checks every limit on its side:

* the reply schemas (:mod:`.replies`) carry the same limits: a reply over them does not fit and is
  a ``sandbox`` verdict for that environment (the worker is recycled);
* info dicts are walked against :data:`MAX_INFO_ITEMS`/:data:`MAX_INFO_DEPTH`/... by
  :func:`info_problem` (a ``contract`` error);
* before anything is recorded, :func:`clip` bounds every text of a ``RolloutCompleted`` and an
  ``EnvironmentValidated`` (observations, actions, check details, errors): a text over its limit
  is cut and ends with :func:`marker` (``...[truncated N characters]``), so the event stays small
  and says that it was cut.

Imported by the untrusted worker too, as a plain module: standard library only, no relative imports.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "MAX_OBS_CHARS",
    "MAX_ACTION_CHARS",
    "MAX_SOURCE_CHARS",
    "MAX_INFO_ITEMS",
    "MAX_INFO_DEPTH",
    "MAX_INFO_LIST",
    "MAX_INFO_STR",
    "MAX_INFO_KEY",
    "MAX_SOLUTION_ACTIONS",
    "MAX_ERROR_CHARS",
    "MAX_TRACEBACK_CHARS",
    "MAX_BAD_CHARS",
    "MAX_NAME_CHARS",
    "MAX_CLASSES",
    "MAX_METHODS",
    "MAX_BASES",
    "MAX_FINDINGS",
    "MAX_CHECK_MESSAGE",
    "MAX_WARNINGS",
    "MAX_WARNING_CHARS",
    "MAX_DETAIL_CHARS",
    "MAX_EVENT_CHARS",
    "MAX_CHARSET_CHARS",
    "marker",
    "clip",
    "info_problem",
]

MAX_OBS_CHARS = 100_000  #: one observation (and a solution() text)
MAX_ACTION_CHARS = 8_192  #: one action sent to step() (and one solution() action)
MAX_SOURCE_CHARS = 200_000  #: an environment's source
MAX_INFO_ITEMS = 200  #: values in one info dict, all levels together
MAX_INFO_DEPTH = 4  #: nesting of containers inside an info dict
MAX_INFO_LIST = 50  #: items of one list or dict inside info
MAX_INFO_STR = 1_000  #: one string inside info
MAX_INFO_KEY = 100  #: one key inside info
MAX_SOLUTION_ACTIONS = 256
MAX_ERROR_CHARS = 2_000  #: an error message from the task
MAX_TRACEBACK_CHARS = 4_000
MAX_BAD_CHARS = 300  #: why a value could not be sent
MAX_NAME_CHARS = 200  #: class, method and base names from parse
MAX_CLASSES = 200
MAX_METHODS = 200
MAX_BASES = 20
MAX_FINDINGS = 20  #: static-screen findings
MAX_CHECK_MESSAGE = 600  #: gymnasium check_env's failure message
MAX_WARNINGS = 10
MAX_WARNING_CHARS = 300
MAX_DETAIL_CHARS = 2_000  #: a validator check's detail, as recorded
MAX_EVENT_CHARS = 100  #: an audit event name in a forbidden report
MAX_CHARSET_CHARS = 10_000  #: a gymnasium Text space's charset sent as text (larger: sent as unknown)


def marker(cut: int) -> str:
    """What ends a text that was cut by :func:`clip`."""
    return f"...[truncated {cut} characters]"


def clip(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its start plus :func:`marker`, the
    whole at most ``limit`` characters long."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(marker(len(text))))  # the marker of a smaller cut is never longer
    return text[:keep] + marker(len(text) - keep)


def info_problem(value: Any) -> str | None:
    """Why an info dict (as decoded from JSON) exceeds the info limits, or ``None``."""
    if type(value) is not dict:
        return "info must be a dict"
    budget = [MAX_INFO_ITEMS]
    return _walk(value, 0, budget)


def _walk(x: Any, depth: int, budget: list[int]) -> str | None:
    budget[0] -= 1
    if budget[0] < 0:
        return f"info has more than {MAX_INFO_ITEMS} values"
    t = type(x)
    if x is None or t in (bool, int, float):
        return None
    if t is str:
        return f"an info string has {len(x)} characters (limit {MAX_INFO_STR})" if len(x) > MAX_INFO_STR else None
    if t in (list, dict):
        if depth > MAX_INFO_DEPTH:
            return f"info is nested deeper than {MAX_INFO_DEPTH}"
        if len(x) > MAX_INFO_LIST:
            return f"an info container has {len(x)} items (limit {MAX_INFO_LIST})"
        items = x.items() if t is dict else ((None, v) for v in x)
        for k, v in items:
            if k is not None and len(k) > MAX_INFO_KEY:
                return f"an info key has {len(k)} characters (limit {MAX_INFO_KEY})"
            why = _walk(v, depth + 1, budget)
            if why:
                return why
        return None
    return f"info holds a {t.__name__}"
