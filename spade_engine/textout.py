"""Printing to the terminal, pipes and files: the one place the CLI writes text from.

Text that models, users or the log wrote (environment code, observations, hints, exception
messages, skill names, ids) is data, never rich markup, and its control characters are shown as
escapes, so ``[/bold]`` in an error stays text and an ANSI or OSC sequence in an observation
cannot repaint the user's terminal (a fake green "valid" line is impossible). Output that goes to
a pipe or a file is written for programs: lines never wrapped, tables as TSV, JSON one document
per line, code byte for byte.

* :func:`escape`: non-printable characters (C0/C1 controls, DEL, line and paragraph separators,
  bidi and other format characters, unassigned code points) as ``\\n``, ``\\x1b``, ``\\u202e``...
* :func:`plain`: a rich ``Text`` holding escaped text (rich never parses a ``Text`` as markup).
* :func:`say` / :func:`note`: one line on stdout / stderr, styled on a terminal, plain in a pipe;
  :func:`aside`: a remark next to a table (stdout on a terminal, stderr in a pipe).
* :func:`table`: a rich table of plain cells on a terminal, TSV (header line first) otherwise.
* :func:`json_text` / :func:`print_json`: JSON whose strings hold no raw non-printable character
  (U+2028, U+2029, U+0085 and the C1 controls are ``\\u`` escapes), so consumers that split on
  Unicode line breaks see one document per line.
* :func:`write_exact`: text (code) to stdout exactly, as UTF-8 bytes.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO

from rich.console import Console
from rich.text import Text

__all__ = [
    "out", "err", "escape", "plain", "styled", "is_terminal", "say", "note", "aside", "table", "tsv_row", "json_text",
    "print_json", "json_line_bytes", "write_exact", "QUIET_LIBRARIES", "quiet_libraries",
]

#: standard output (tables, results) and standard error (messages, progress)
out = Console()
err = Console(stderr=True, soft_wrap=True)

_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


#: the non-printable characters text usually holds (controls, NBSP, soft hyphen, zero-width and
#: bidi format characters, line/paragraph separators, BOM, surrogates): replaced by one regex pass;
#: anything rarer is caught by a per-character pass only when the result is still not printable
#: (one character class: linear over any text, model text included)
_COMMON = re.compile(
    "[\x00-\x1f\x7f-\xa0\xad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff]"
)


def _sub_unprintable(s: str, repl: Callable[[str], str], keep: str) -> str:
    """Replace every character of ``s`` that ``str.isprintable`` rejects (and is not in ``keep``)."""
    r = _COMMON.sub(lambda m: m.group() if m.group() in keep else repl(m.group()), s)
    if (r.translate({ord(k): None for k in keep}) if keep else r).isprintable():
        return r
    return "".join(c if c.isprintable() or c in keep else repl(c) for c in r)


def _escape_char(c: str) -> str:
    short = _SHORT.get(c)
    if short is not None:
        return short
    cp = ord(c)
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def escape(text: Any, *, keep: str = "") -> str:
    """``text`` with every non-printable character written as an escape (``\\x1b``, ``\\n``,
    ``\\u2028``); characters in ``keep`` (for example ``"\\n\\t"`` for code) stay as they are."""
    s = text if isinstance(text, str) else str(text)
    if s.isprintable():
        return s
    return _sub_unprintable(s, _escape_char, keep)


def plain(text: Any, style: str | None = None, *, keep: str = "") -> Text:
    """Escaped ``text`` as a rich ``Text``: shown verbatim, never interpreted as markup."""
    return Text(escape(text, keep=keep), style=style or "")


def styled(*parts: str | tuple[Any, str | None]) -> Text:
    """One ``Text`` from trusted literals (``str``) and ``(untrusted value, style)`` pairs; every
    value is escaped. Example: ``styled(("error:", "bold red"), " ", (message, None))``."""
    text = Text()
    for part in parts:
        if isinstance(part, tuple):
            value, style = part
            text.append(escape(value), style=style or "")
        else:
            text.append(part)
    return text


def is_terminal(console: Console | None = None) -> bool:
    """Whether ``console`` (stdout by default) writes to a terminal rather than a pipe or file."""
    return (console or out).is_terminal


def _emit(console: Console, stream: TextIO, line: Text | str) -> None:
    text = line if isinstance(line, Text) else plain(line)
    if console.is_terminal:
        console.print(text, soft_wrap=True, highlight=False)
    else:
        stream.write(text.plain + "\n")
        stream.flush()


def say(line: Text | str) -> None:
    """One line on stdout, never wrapped: styled on a terminal, plain text otherwise. A ``str`` is
    escaped (use :func:`styled` to mix trusted styling with untrusted values)."""
    _emit(out, sys.stdout, line)


def note(line: Text | str) -> None:
    """:func:`say` on stderr (messages, warnings, progress)."""
    _emit(err, sys.stderr, line)


def aside(line: Text | str) -> None:
    """A remark about a table or listing (counts, "N of M", hints): on stdout next to it on a
    terminal, on stderr otherwise, so that piped stdout holds only the TSV or JSON."""
    if is_terminal():
        say(line)
    else:
        note(line)


def tsv_row(cells: Iterable[Any]) -> str:
    """One TSV line: each cell escaped, so a tab or newline inside a cell never splits it."""
    return "\t".join("" if c is None else escape(c) for c in cells)


def table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    title: str | None = None,
    right: Iterable[str] = (),
    heading: bool = False,
    console: Console | None = None,
    stream: TextIO | None = None,
) -> None:
    """Print a table: on a terminal a rich table whose cells are plain text (``title`` above it,
    columns named in ``right`` right-aligned); otherwise TSV, the column names first, no title
    (so ``cut``, ``sort`` and csv readers with ``delimiter='\\t'`` read it). With ``heading``
    (several tables in one output), the TSV block starts with a ``# title`` line and ends with a
    blank line."""
    con = console or out
    if not con.is_terminal:
        fh = stream or (sys.stderr if con.stderr else sys.stdout)
        if heading and title:
            fh.write("# " + escape(title) + "\n")
        fh.write(tsv_row(columns) + "\n")
        for row in rows:
            fh.write(tsv_row(row) + "\n")
        if heading:
            fh.write("\n")
        fh.flush()
        return
    from rich import box
    from rich.table import Table

    right = set(right)
    t = Table(title=plain(title) if title else None, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    for c in columns:
        t.add_column(c, justify="right" if c in right else "left", overflow="fold")
    for row in rows:
        t.add_row(*(plain("-" if c is None else c) for c in row))
    con.print(t)


def _json_escape(c: str) -> str:
    cp = ord(c)
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    cp -= 0x10000
    return f"\\u{0xD800 + (cp >> 10):04x}\\u{0xDC00 + (cp & 0x3FF):04x}"


def json_text(obj: Any, *, indent: int | None = None, sort_keys: bool = False) -> str:
    """``obj`` as JSON (UTF-8 text kept readable) with every non-printable character inside a
    string written as a ``\\u`` escape: no raw U+2028, U+2029, U+0085, C1 control or bidi
    override ever reaches a terminal or a line-splitting consumer. Without ``indent`` the result
    is one line."""
    s = json.dumps(obj, ensure_ascii=False, indent=indent, sort_keys=sort_keys, default=str)
    if s.isprintable():
        return s
    # indented JSON holds structural newlines; every other unprintable character is inside a string
    return _sub_unprintable(s, _json_escape, "\n" if indent is not None else "")


def json_line_bytes(raw: bytes) -> bytes:
    """Compact JSON bytes (one document, no raw newline) with the same escaping as
    :func:`json_text`: equal once decoded, byte for byte equal when nothing needed escaping."""
    text = raw.decode("utf-8", errors="surrogateescape")
    if text.isprintable():
        return raw
    return _sub_unprintable(text, _json_escape, "").encode("utf-8", errors="surrogateescape")


def print_json(obj: Any, *, sort_keys: bool = False) -> None:
    """One JSON document on stdout: indented on a terminal, one line in a pipe or file."""
    sys.stdout.write(json_text(obj, indent=2 if is_terminal() else None, sort_keys=sort_keys) + "\n")
    sys.stdout.flush()


def write_exact(text: str) -> None:
    """``text`` on stdout exactly, as UTF-8 (what ``archive show ENV > env.py`` writes). A lone
    surrogate, which UTF-8 cannot hold, is written as a backslash escape."""
    data = text.encode("utf-8", errors="backslashreplace")
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # pragma: no cover - a text-only stream
        sys.stdout.write(data.decode("utf-8"))
    else:
        sys.stdout.flush()
        buffer.write(data)
        buffer.flush()


#: environment variables that keep third-party progress bars out of spade-engine's output
QUIET_LIBRARIES = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def quiet_libraries() -> None:
    """No tqdm or Hugging Face progress bars (unless the user set these variables already); must
    run before those libraries are imported (the CLI's entry point and the benchmarks call it)."""
    for name, value in QUIET_LIBRARIES.items():
        os.environ.setdefault(name, value)
