"""When the faust supervisor replaces its worker: :class:`WorkerHealth`, the verdicts.

Pure bookkeeping, no clocks read and no processes touched: the supervisor
(:func:`~spade_engine.consumers.faust_app.supervise_stats`) feeds it what it observes every few
seconds, on the monotonic clock that all processes share on Linux:

* ``beat``: when the worker's event loop last ticked (0 before its first tick);
* ``ready``: when the worker was last given its partitions (0 before it joined its group);
* ``state``: the group's lag and committed offsets, or ``None`` when the broker did not answer.

A worker is judged by its commits only once it holds partitions. Before that it is starting: a
spawned Python process imports faust, starts its services and joins the consumer group, which
takes seconds on an idle machine and tens of seconds on a loaded one. Judging that time against
``stall_s`` would kill every replacement before it could commit anything, again and again.
Starting has its own, longer allowance, ``start_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WorkerHealth"]


@dataclass
class WorkerHealth:
    """The health of one worker process, from its start to the verdict that replaces it.

    :meth:`judge` returns ``None`` while the worker is healthy, else the reason to restart it.
    """

    stall_s: float
    start_s: float
    started_at: float
    best: int = -1  # the most records ever seen committed
    moved_at: float = 0.0  # when ``best`` last grew (or the lag was 0)
    known_at: float = 0.0  # when the broker last answered the lag check

    def __post_init__(self) -> None:
        self.known_at = self.known_at or self.started_at

    def needs_check(self, beat: float, ready: float) -> bool:
        """Whether the broker's lag answer matters now (not while the worker is starting)."""
        return bool(beat and ready)

    def judge(
        self, now: float, beat: float, ready: float, state: tuple[int, dict[int, int]] | None = None
    ) -> str | None:
        """The reason to restart the worker now, or ``None``."""
        if not beat or not ready:
            if now - self.started_at >= self.start_s:
                what = "ticked" if not beat else "been given its partitions"
                return f"it has not {what} in the {now - self.started_at:.0f}s since it started"
            if not beat:
                return None
        if now - beat >= self.stall_s:
            return f"its event loop has not ticked for {now - beat:.0f}s"
        if not ready:
            return None  # ticking, still joining its group: within the start allowance
        if state is None:
            if now - max(self.known_at, ready) >= 4 * self.stall_s:
                # no answer for long: restart the worker too (harmless if the broker is down)
                return f"no lag answer for {now - max(self.known_at, ready):.0f}s"
            return None
        self.known_at = now
        lag, committed = state
        # a commit listing that comes back partial or empty while the group coordinator
        # reloads is not movement: progress is the most records ever seen committed
        progress = sum(committed.values())
        if progress > self.best or lag == 0:
            self.best, self.moved_at = max(self.best, progress), now
            return None
        since = max(self.moved_at, ready)  # the clock starts when the worker got its partitions
        if now - since >= self.stall_s:
            return f"stalled ({lag} records behind for {now - since:.0f}s)"
        return None
