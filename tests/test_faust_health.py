"""WorkerHealth: when the faust supervisor replaces its worker. Pure verdicts on given times, so a
slow start on a loaded machine is told apart from a stall without any clock in the test."""

from __future__ import annotations

from spade_engine.consumers.faust_health import WorkerHealth

STALL, START = 6.0, 180.0


def _health(started_at: float = 0.0) -> WorkerHealth:
    return WorkerHealth(stall_s=STALL, start_s=START, started_at=started_at)


def test_a_worker_still_starting_is_not_judged_by_its_commits():
    h = _health()
    # not ticking yet (importing faust, starting services) long past stall_s: still starting
    for now in (5, 11, 30, 90, 179):
        assert not h.needs_check(0.0, 0.0)
        assert h.judge(now, 0.0, 0.0) is None
    # ticking, still joining its group: the event loop is watched, the commits are not
    assert not h.needs_check(170.0, 0.0)
    assert h.judge(170.5, 170.0, 0.0) is None
    assert h.judge(178.0, 171.0, 0.0) is not None  # but a loop that stops ticking is a stall
    assert "event loop has not ticked" in h.judge(178.0, 171.0, 0.0)


def test_a_worker_that_never_starts_is_restarted_after_the_start_allowance():
    assert "has not ticked in the 180s since it started" in _health().judge(180.0, 0.0, 0.0)
    reason = _health().judge(181.0, 180.9, 0.0)
    assert reason is not None and "has not been given its partitions" in reason


def test_the_stall_clock_starts_when_the_worker_gets_its_partitions():
    """The bug this replaces: the clock ran from the process start, so a replacement that took
    longer than stall_s to start was killed before it could commit, one after another."""
    h = _health(started_at=0.0)
    ready = 42.0  # 42 s to start on a loaded machine, far past stall_s
    assert h.needs_check(44.5, ready)
    assert h.judge(45.0, 44.5, ready, (8, {})) is None  # first answer: the clock starts
    assert h.judge(50.0, 49.5, ready, (8, {})) is None  # 5 s without a commit
    reason = h.judge(51.5, 51.0, ready, (8, {}))  # 6.5 s without a commit: stalled
    assert reason is not None and "stalled (8 records behind" in reason


def test_commits_that_move_keep_the_worker_and_a_lag_of_zero_is_healthy():
    h = _health()
    ready = 10.0
    now = 12.0
    for committed in range(1, 40):  # one more record committed each check
        assert h.judge(now, now - 0.3, ready, (5, {0: committed})) is None
        now += 5.0
    for _ in range(20):  # caught up: nothing to commit, nothing stalls
        assert h.judge(now, now - 0.3, ready, (0, {0: 39})) is None
        now += 5.0


def test_a_partial_commit_listing_is_not_movement():
    h = _health()
    assert h.judge(12.0, 11.8, 10.0, (5, {0: 3, 1: 4})) is None  # best = 7
    assert h.judge(15.0, 14.8, 10.0, (5, {0: 3})) is None  # shrinks while the coordinator reloads
    assert h.judge(17.5, 17.3, 10.0, (5, {0: 3, 1: 4})) is None  # back to 7: no progress, 5.5 s
    assert "stalled" in h.judge(18.5, 18.3, 10.0, (5, {0: 3, 1: 4}))  # 6.5 s at 7


def test_no_lag_answer_for_long_restarts_and_an_answer_resets_the_count():
    h = _health()
    ready = 10.0
    assert h.judge(12.0, 11.9, ready, (0, {0: 1})) is None
    assert h.judge(30.0, 29.9, ready, None) is None  # the broker does not answer: 18 s
    assert h.judge(35.9, 35.8, ready, None) is None  # 23.9 s < 4 * stall_s
    assert h.judge(36.0, 35.9, ready, (0, {0: 1})) is None  # it answers again
    assert h.judge(59.0, 58.9, ready, None) is None  # 23 s since that answer
    assert "no lag answer for 24s" in h.judge(60.0, 59.9, ready, None)


def test_a_reassignment_restarts_the_stall_clock():
    h = _health()
    assert h.judge(12.0, 11.9, 10.0, (5, {0: 2})) is None
    # partitions revoked and given back at 17.5 (a rebalance): no commit needed before 23.5
    assert h.judge(20.0, 19.9, 17.5, (5, {0: 2})) is None
    assert h.judge(23.0, 22.9, 17.5, (5, {0: 2})) is None
    assert "stalled" in h.judge(23.6, 23.5, 17.5, (5, {0: 2}))
