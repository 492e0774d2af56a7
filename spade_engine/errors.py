"""Error types shared across spade-engine.

Every error a user can cause (bad input, bad config, corrupt files) is a :class:`SpadeError`
with a message that names the thing at fault; the CLI prints it without a traceback.
"""

from __future__ import annotations


class SpadeError(Exception):
    """Base class for errors reported to users as a message, not a traceback."""


class ConfigError(SpadeError):
    """The configuration (file, environment or flags) is invalid."""


class DiskFull(SpadeError):
    """A write failed because the device is full (or the user's quota is spent): the message says
    what could not be written. Nothing recorded before is lost; free space and resume."""


_FULL_TEXTS = ("database or disk is full", "no space left on device", "disk quota exceeded")


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an exception it was raised from or during) is a full device: ENOSPC or
    EDQUOT from the operating system, SQLite's SQLITE_FULL (through sqlite3 or SQLAlchemy)."""
    import errno

    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, DiskFull):
            return True
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(exc).lower()
        if any(t in text for t in _FULL_TEXTS):
            return True
        orig = getattr(exc, "orig", None)  # SQLAlchemy wraps the DB-API error
        exc = orig if isinstance(orig, BaseException) else (exc.__cause__ or exc.__context__)
        seen += 1
    return False


def disk_full(what: str, exc: BaseException) -> DiskFull:
    """The error to raise when writing ``what`` filled the disk (``exc``, see :func:`is_disk_full`)."""
    return DiskFull(
        f"disk full: {what} could not be written ({_first_line(exc)}); every event recorded before is kept: "
        "free space on that device and start the run again to resume it"
    )


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
