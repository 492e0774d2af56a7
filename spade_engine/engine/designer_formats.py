"""The designer formats (``loop.designer_format``): what differs between writing a standalone
environment, a game on the engine's ``TextGame`` base class, and a one-answer puzzle.

Each :class:`DesignerFormat` holds everything the designer stages need to know about one format:
its prompt, how a prompt of it is recognised (for a repair of a proposal whose run config is not
at hand), its repair advice and short-code limit, the start of the reply the engine writes for
the model (with the stop strings that end it), and how the model's code is reduced to the
format's part before the base class is inlined. The design stage (``stages/design.py``) asks
:func:`designer_format` or :func:`format_of_prompt` and never branch on the format's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..sandbox.scaffold import puzzle_only
from .designer import ADVICE, designer_messages
from .designer_puzzle import (
    PUZZLE_ADVICE,
    PUZZLE_MARK,
    PUZZLE_SHORT_LINES,
    PUZZLE_STOPS,
    puzzle_designer_messages,
    puzzle_reply_prefix,
)
from .designer_scaffold import (
    SCAFFOLD_ADVICE,
    SCAFFOLD_MARK,
    SCAFFOLD_SHORT_LINES,
    scaffold_designer_messages,
)

__all__ = ["DesignerFormat", "FORMATS", "designer_format", "format_of_prompt"]


def _unchanged(code: str) -> str:
    return code


@dataclass(frozen=True)
class DesignerFormat:
    """One designer format (see the module docstring)."""

    #: the ``loop.designer_format`` value, also what :func:`~..sandbox.scaffold.code_format` says of its code
    name: str
    #: the prompt: ``messages(skill=, difficulty=, document_text=, ...) -> [system, user]``
    messages: Callable[..., list[dict[str, str]]]
    #: text every prompt of this format contains (``None``: the standalone format, the fallback)
    mark: str | None
    #: ``(pattern in a failed check's detail, advice)`` for a repair
    advice: tuple[tuple[str, str], ...]
    #: a truncated completion is asked for again in under this many lines
    short_lines: int
    #: the start of the reply the engine writes for the model, by skill (``None``: the model starts it)
    reply_prefix: Callable[[str], str] | None = None
    #: stop strings added to the designer's own while the engine writes the reply's start
    stops: tuple[str, ...] = ()
    #: the model's code reduced to the format's part (before the base class is inlined)
    normalize: Callable[[str], str] = _unchanged


FORMATS: dict[str, DesignerFormat] = {
    "standalone": DesignerFormat("standalone", designer_messages, None, ADVICE, 120),
    "scaffold": DesignerFormat("scaffold", scaffold_designer_messages, SCAFFOLD_MARK, SCAFFOLD_ADVICE, SCAFFOLD_SHORT_LINES),
    "puzzle": DesignerFormat(
        "puzzle", puzzle_designer_messages, PUZZLE_MARK, PUZZLE_ADVICE, PUZZLE_SHORT_LINES,
        reply_prefix=puzzle_reply_prefix, stops=PUZZLE_STOPS,
        normalize=puzzle_only,  # setup() and its helpers, not the base's methods the 0.5B writes after it
    ),
}


def designer_format(name: str) -> DesignerFormat:
    """The format named ``name`` (``loop.designer_format``; the config validates it)."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown designer format {name!r} (one of {', '.join(FORMATS)})") from None


def format_of_prompt(prompt: str) -> DesignerFormat:
    """The format a recorded designer prompt was written in: by its mark, else standalone."""
    for fmt in FORMATS.values():
        if fmt.mark is not None and fmt.mark in prompt:
            return fmt
    return FORMATS["standalone"]
