"""Independent sandbox round trips at once: calls run in threads, results come back in order.

A sandbox call (open a session, reset, step, close) mostly waits on another process: the task
forks, loads the environment, runs its code. One after the other, the engine's process and the
sandbox workers take turns on the CPU; at once (one thread per call, up to the pool's worker
count), several workers run while the engine waits. Nothing about the results depends on the
order the calls run in: each call touches its own session, and the caller applies the results
(log appends, timings, verdicts) afterwards in its own thread, in the calls' order, so event
order and content stay exactly those of a sequential run.

The calls must catch what they expect to raise; anything they let through is raised here, after
every call has finished, the first one in call order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["at_once"]

T = TypeVar("T")


def at_once(calls: Sequence[Callable[[], T]], limit: int) -> list[T]:
    """The results of ``calls``, in order, with at most ``limit`` running at a time (one or no
    call, or ``limit`` 1: plainly one after the other, in this thread)."""
    if len(calls) <= 1 or limit <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(max_workers=min(limit, len(calls)), thread_name_prefix="sandbox-call") as pool:
        futures = [pool.submit(call) for call in calls]
    return [f.result() for f in futures]
