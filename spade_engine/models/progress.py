"""Progress reporting for long model work (downloads, assembly, conversion).

Fetching and converting call a :class:`Progress`; the CLI picks rich bars on a terminal and
plain timestamped lines otherwise (logs, CI), and library callers get silence by default.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Protocol

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress as RichBars, SpinnerColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn

__all__ = ["Progress", "Stage", "NullProgress", "LineProgress", "RichProgress", "human_bytes", "progress_for"]


def human_bytes(n: float | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


class Stage(Protocol):
    """One stage of work; ``advance`` moves it on, ``note`` says what it is doing now."""

    def advance(self, amount: float = 1, note: str | None = None) -> None: ...

    def note(self, text: str) -> None: ...

    def set_total(self, total: float) -> None: ...

    def __enter__(self) -> "Stage": ...

    def __exit__(self, *exc: object) -> None: ...


class Progress(Protocol):
    def stage(self, label: str, total: float | None = None, *, bytes_: bool = False) -> Stage: ...


class _NullStage:
    def advance(self, amount: float = 1, note: str | None = None) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def set_total(self, total: float) -> None:
        pass

    def __enter__(self) -> "_NullStage":
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class NullProgress:
    """Reports nothing."""

    def __enter__(self) -> "NullProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def stage(self, label: str, total: float | None = None, *, bytes_: bool = False) -> Stage:
        return _NullStage()


class _LineStage:
    def __init__(self, owner: "LineProgress", label: str, total: float | None, bytes_: bool):
        self.owner, self.label, self.total, self.bytes_ = owner, label, total, bytes_
        self.done = 0.0
        self.decile = 0
        self.t0 = time.monotonic()

    def _amount(self) -> str:
        if self.total is None:
            return human_bytes(self.done) if self.bytes_ else f"{self.done:g}"
        if self.bytes_:
            return f"{human_bytes(self.done)}/{human_bytes(self.total)}"
        return f"{self.done:g}/{self.total:g}"

    def advance(self, amount: float = 1, note: str | None = None) -> None:
        self.done += amount
        if note is not None:
            self.owner.line(f"{self.label}: {note} [{self._amount()}]")
        elif self.total:
            decile = int(10 * self.done / self.total)
            if decile > self.decile and decile < 10:
                self.decile = decile
                self.owner.line(f"{self.label}: {10 * decile}% [{self._amount()}]")

    def note(self, text: str) -> None:
        self.owner.line(f"{self.label}: {text}")

    def set_total(self, total: float) -> None:
        self.total = total

    def __enter__(self) -> "_LineStage":
        self.owner.line(f"{self.label}: started" + (f" ({human_bytes(self.total)})" if self.bytes_ and self.total else ""))
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        how = "done" if exc_type is None else "failed"
        self.owner.line(f"{self.label}: {how} in {time.monotonic() - self.t0:.1f}s [{self._amount()}]")


class LineProgress:
    """One plain line per event, prefixed with seconds since start (for logs and pipes)."""

    def __init__(self, stream: IO[str] | None = None):
        self.stream = stream
        self.t0 = time.monotonic()

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def line(self, text: str) -> None:
        stream = self.stream or sys.stderr
        stream.write(f"[{time.monotonic() - self.t0:7.1f}s] {text}\n")
        stream.flush()

    def stage(self, label: str, total: float | None = None, *, bytes_: bool = False) -> Stage:
        return _LineStage(self, label, total, bytes_)


class _RichStage:
    def __init__(self, bars: RichBars, label: str, total: float | None, bytes_: bool):
        self.bars, self.label, self.total, self.bytes_ = bars, label, total, bytes_
        self.done = 0.0
        self.task = bars.add_task(escape(label), total=total, detail="")

    def _detail(self, note: str | None) -> str:
        amount = ""
        if self.bytes_:
            amount = human_bytes(self.done) + (f"/{human_bytes(self.total)}" if self.total else "")
        return escape(" ".join(x for x in (amount, note or "") if x))

    def advance(self, amount: float = 1, note: str | None = None) -> None:
        self.done += amount
        self.bars.update(self.task, advance=amount, detail=self._detail(note))

    def note(self, text: str) -> None:
        self.bars.update(self.task, detail=self._detail(text))

    def set_total(self, total: float) -> None:
        self.total = total
        self.bars.update(self.task, total=total)

    def __enter__(self) -> "_RichStage":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            total = self.total if self.total is not None else max(self.done, 1)
            self.bars.update(self.task, total=total, completed=total, detail=self._detail("done"))
        else:
            self.bars.update(self.task, detail=self._detail("failed"))
        self.bars.stop_task(self.task)


class RichProgress:
    """Rich progress bars (one per stage) on a terminal; use as a context manager."""

    def __init__(self, console: Console):
        self.bars = RichBars(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[detail]}"),
            console=console,
        )

    def __enter__(self) -> "RichProgress":
        self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.stop()

    def stage(self, label: str, total: float | None = None, *, bytes_: bool = False) -> Stage:
        return _RichStage(self.bars, label, total, bytes_)


def progress_for(console: Console, *, interactive: bool) -> LineProgress | RichProgress:
    """Rich bars when ``interactive`` (both output streams are terminals), else plain lines."""
    if interactive:
        return RichProgress(console)
    return LineProgress()
