"""The scaffold: an engine-provided base class (``TextGame``, in ``textgame.py``) that a designer
may subclass instead of writing the whole reset/step/solution contract.

A small model writing a standalone environment fails mostly on the contract, not the game
(measured with Qwen2.5-Coder-0.5B: reset() returning None, reset() calling itself, a missing
reset()). With the scaffold it writes only the game: ``setup(rng)`` draws the hidden state and
returns the first observation, ``act(command)`` plays one command (the text inside ``\\boxed{}``,
spaces trimmed) and returns ``(text, reward, done)``, and ``plan()`` lists the winning commands.
``TextGame`` does the rest: the turn count and the turn budget, the ``\\boxed{}`` parsing, a reply
with no action, the (observation, info) and 5-tuple shapes, and ``solution()``. A puzzle is the
smallest game: only ``setup(rng)``, which returns the question and sets ``self.answer``, computed
by the code; the base's own ``act()`` scores each reply against it and its ``plan()`` answers it.

:func:`inline` puts the base class's source into a proposal that subclasses it, so the recorded
code stays one standalone module that runs in the sandbox like any other environment (and in
any copy of the archive, without this package). :func:`strip` takes it out again to show a
designer the game only.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = [
    "BASE_NAME", "BASE_SOURCE", "BEGIN", "END", "inline", "strip", "is_scaffolded", "subclasses_base", "game_line_numbers",
    "code_format", "puzzle_only",
]

BASE_NAME = "TextGame"
BASE_SOURCE = Path(__file__).with_name("textgame.py").read_text(encoding="utf-8")
BEGIN = BASE_SOURCE.splitlines()[0]
END = BASE_SOURCE.rstrip("\n").splitlines()[-1]

# These run over model-written code in the engine's process, each in linear time: every start is a
# "class" literal at a line start, and each quantified run ends at a character the next part
# cannot begin with (white space before a word, a word before white space or a parenthesis), so no
# run is tried two ways; the runs of different starts are disjoint.
_SUBCLASS = re.compile(rf"^class\s+\w+\s*\(\s*{BASE_NAME}\s*\)\s*:", re.M)
_DEFINES_BASE = re.compile(rf"^class\s+{BASE_NAME}\b", re.M)


def subclasses_base(code: str) -> bool:
    """Whether ``code`` has a top-level class deriving from ``TextGame``."""
    return bool(_SUBCLASS.search(code))


def is_scaffolded(code: str) -> bool:
    """Whether ``code`` carries the inlined base class."""
    return BEGIN in code


def inline(code: str) -> str:
    """``code`` with the base class's source put before its first subclass of ``TextGame``;
    ``code`` unchanged when it has no such subclass, already carries the base, or defines a
    ``TextGame`` of its own."""
    m = _SUBCLASS.search(code)
    if m is None or is_scaffolded(code) or _DEFINES_BASE.search(code):
        return code
    return code[: m.start()] + BASE_SOURCE + "\n\n" + code[m.start():]


def strip(code: str) -> str:
    """``code`` without the inlined base class (the game as its designer wrote it): from its
    first line to the first last line after it, with up to three newlines after (the blank lines
    :func:`inline` adds). Found with two ``find`` calls: the lazy pattern this replaces was
    quadratic on code repeating the first line without the last."""
    start = code.find(BEGIN)
    end = code.find(END, start + len(BEGIN)) if start >= 0 else -1
    if end < 0:
        return code
    end += len(END)
    for _ in range(3):
        if code.startswith("\n", end):
            end += 1
    return code[:start] + code[end:]


_DEFINES_ACT = re.compile(r"^[ \t]+def\s+act\s*\(", re.M)  # linear: an indent run, then a literal


def code_format(code: str) -> str:
    """What ``code`` is, in the terms of ``loop.designer_format``: ``standalone`` (a whole
    environment class), ``scaffold`` (a TextGame game with its own act()) or ``puzzle`` (a
    TextGame game without act(): the base scores each reply against ``self.answer``)."""
    if not (is_scaffolded(code) or subclasses_base(code)):
        return "standalone"
    return "scaffold" if _DEFINES_ACT.search(strip(code)) else "puzzle"


#: what TextGame provides and a puzzle does not write (puzzle_only drops them)
PROVIDED = frozenset({"__init__", "reset", "step", "solution", "act", "plan"})
_IMPORTS = ("random", "re", "math")


def puzzle_only(code: str) -> str:
    """A designer's puzzle as the format defines it: its TextGame subclass keeps its docstring,
    class attributes, ``setup()`` and helper methods, and loses the methods the base provides
    (``reset``, ``step``, ``solution``, ``act``, ``plan``, ``__init__``: a small model writes them
    anyway, copying the base's description, and its versions break the contract); an import of
    ``TextGame`` is dropped (the base is inlined) and ``import random/re/math`` are added when
    missing (as the SPADE release's loader adds common imports). ``code`` unchanged when it does
    not parse or has no TextGame subclass with a ``setup()``."""
    import ast

    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return code
    game = next((n for n in tree.body if isinstance(n, ast.ClassDef)
                 and any(isinstance(b, ast.Name) and b.id == BASE_NAME for b in n.bases)), None)
    if game is None or not any(isinstance(f, ast.FunctionDef) and f.name == "setup" for f in game.body):
        return code
    drop: set[int] = set()
    for node in game.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in PROVIDED:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            drop.update(range(first, (node.end_lineno or node.lineno) + 1))
    imported: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[-1].lower() == "textgame":
            drop.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        elif isinstance(node, ast.Import):
            if any(a.name.split(".")[-1].lower() == "textgame" for a in node.names):
                drop.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
            imported.update(a.asname or a.name for a in node.names)
    lines = code.splitlines()
    at = max([0, *((n.end_lineno or n.lineno) for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__")])
    missing = [f"import {m}" for m in _IMPORTS if m not in imported]
    kept = [line for n, line in enumerate(lines, 1) if n not in drop and n <= at]
    kept += missing + [line for n, line in enumerate(lines, 1) if n not in drop and n > at]
    return "\n".join(kept).rstrip() + "\n"


_LINE = re.compile(r"\bline (\d+)\b")  # linear: a literal, then one digit run


def game_line_numbers(code: str, text: str) -> str:
    """``text`` (a verdict quoting ``line N`` of the inlined ``code``: a syntax error's ``line N:``,
    a traceback's ``(line N in fn: ...)``) with the line numbers of the game as its designer wrote
    it, which is what a repair shows; lines of the base class itself are left as they are."""
    if not is_scaffolded(code):
        return text
    start = code[: code.index(BEGIN)].count("\n") + 1  # the base's first line
    size = (BASE_SOURCE + "\n\n").count("\n")  # the lines inline() added

    def renumber(m: re.Match[str]) -> str:
        n = int(m.group(1))
        return f"line {n - size if n >= start + size else n}"

    return _LINE.sub(renumber, text)
