"""Errors raised by the sandbox and the fixed taxonomy of why an environment was rejected.

:class:`ErrorKind` is the vocabulary of ``EnvironmentValidated.error_kind`` and of the ``kind``
attribute every :class:`SandboxError` carries, so a rollout failure and a validation failure are
described with the same words.
"""

from __future__ import annotations

from enum import Enum

from ..errors import SpadeError

__all__ = [
    "ErrorKind",
    "SandboxError",
    "IsolationError",
    "PoolExhausted",
    "StepTimeout",
    "SandboxCrash",
    "EnvError",
]


class ErrorKind(str, Enum):
    """Why an environment failed (or a play of it ended abnormally)."""

    SYNTAX = "syntax"  #: the source does not parse
    CONTRACT = "contract"  #: wrong class/method/return shapes or types, reward out of range, endless episode
    TIMEOUT = "timeout"  #: wall-clock or CPU limit hit
    MEMORY = "memory"  #: address-space limit hit
    CRASH = "crash"  #: the environment raised, exited, or the worker died / sent garbage
    NONDETERMINISTIC = "nondeterministic"  #: same seed, different observation
    UNSOLVABLE = "unsolvable"  #: solution() replay does not reach success
    TRIVIAL = "trivial"  #: a probe (garbage) action wins
    FORBIDDEN = "forbidden"  #: processes, sockets, ctypes, files outside the temp dir, ...
    DUPLICATE = "duplicate"  #: valid but not novel (decided by the memory, not the validator)
    SANDBOX = "sandbox"  #: the sandbox itself failed (not the environment's fault)

    def __str__(self) -> str:  # "timeout", not "ErrorKind.TIMEOUT"
        return self.value


class SandboxError(SpadeError):
    """Base class of sandbox errors; ``kind`` is an :class:`ErrorKind` value."""

    kind: str = ErrorKind.SANDBOX.value

    def __init__(self, message: str, *, kind: str | ErrorKind | None = None) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = str(kind)


class IsolationError(SandboxError):
    """An isolation layer the pool may not run without is unavailable on this machine: any layer
    with ``require_isolation``, the seccomp filter unless ``allow_without_seccomp``."""


class PoolExhausted(SandboxError):
    """No worker became free within the acquire timeout (or the pool is closed)."""


class StepTimeout(SandboxError):
    """A call into the environment exceeded its wall-clock limit; the worker was killed."""

    kind = ErrorKind.TIMEOUT.value


class SandboxCrash(SandboxError):
    """The worker died, was killed for a forbidden operation, or sent garbage; the session is dead.

    ``kind`` says why (``crash``, ``forbidden``, ``memory``, ``timeout`` for CPU limit)."""

    kind = ErrorKind.CRASH.value


class EnvError(SandboxCrash):
    """The environment raised or broke the contract in one call; the worker itself is healthy
    and the session stays usable (``session.alive``), though callers that treat every
    :class:`SandboxCrash` as the end of the episode are right to.

    ``kind`` is ``crash`` (it raised), ``memory`` (MemoryError), ``contract`` (bad return),
    ``syntax`` (when opening a session on source that does not parse)."""

    kind = ErrorKind.CONTRACT.value
