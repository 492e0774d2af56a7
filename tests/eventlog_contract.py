"""The EventLog contract: one test suite every backend must pass unchanged.

A backend's test module subclasses :class:`EventLogContract` and provides a ``make_log`` fixture
returning a factory ``make_log(run_id) -> EventLog`` (a fresh, empty log per run id), and a
``reopen`` fixture returning ``reopen(log) -> EventLog`` (a new client on the same stored log, as
another process would open it).
"""

from __future__ import annotations

import threading
import time

import pytest

from spade_engine.events import EventLog, MalformedEvent, advance, make_envelope
from spade_engine.events.catalogue import RunStopped

from factories import env_chain, run_events


def _ids(records):
    return [r.envelope.event_id for r in records]


class EventLogContract:
    """Subclass and provide ``make_log`` and ``reopen`` fixtures."""

    def test_is_an_eventlog(self, make_log):
        log = make_log("run-contract-proto")
        assert isinstance(log, EventLog)
        assert log.run_id == "run-contract-proto"

    def test_append_then_read_back_everything(self, make_log):
        log = make_log("run-contract-a")
        events = run_events("run-contract-a", n_envs=3)
        assert log.append(events) == len(events)
        got = list(log.read())
        assert sorted(_ids(got)) == sorted(e.event_id for e in events)
        by_id = {r.envelope.event_id: r for r in got}
        for e in events:
            assert by_id[e.event_id].envelope == e
            assert by_id[e.event_id].raw == e.to_json()

    def test_order_is_kept_per_key(self, make_log):
        log = make_log("run-contract-order")
        events = []
        for i in range(4):
            events.extend(env_chain("run-contract-order", f"env-{i}"))
        # interleave in several batches
        for start in range(0, len(events), 7):
            log.append(events[start:start + 7])
        got = list(log.read())
        for i in range(4):
            key = f"env-{i}"
            expected = [e.event_id for e in events if e.key == key]
            assert [r.envelope.event_id for r in got if r.envelope.key == key] == expected

    def test_append_is_idempotent_on_event_id(self, make_log):
        log = make_log("run-contract-idem")
        events = run_events("run-contract-idem", n_envs=1)
        log.append(events)
        assert log.append(events[:3]) == 0
        assert log.append(events[2:4] + events[2:4]) == 0
        got = list(log.read())
        assert len(got) == len(events)
        assert len(set(_ids(got))) == len(events)
        assert sum(log.count_by_type().values()) == len(events)

    def test_duplicate_within_one_batch_recorded_once(self, make_log):
        log = make_log("run-contract-dupbatch")
        e = make_envelope(RunStopped(reason="completed"), run_id="run-contract-dupbatch", producer="t")
        assert log.append([e, e, e]) == 1
        assert _ids(log.read()) == [e.event_id]

    def test_wrong_run_is_rejected_and_nothing_recorded(self, make_log):
        log = make_log("run-contract-wrong")
        good = run_events("run-contract-wrong", n_envs=1)
        log.append(good)
        bad = run_events("some-other-run", n_envs=1)
        with pytest.raises(MalformedEvent):
            log.append(good[:0] + bad)
        assert len(list(log.read())) == len(good)

    def test_read_from_cursor_and_limit(self, make_log):
        log = make_log("run-contract-cursor")
        events = run_events("run-contract-cursor", n_envs=2)
        log.append(events)
        first = list(log.read(limit=5))
        assert len(first) == 5
        cursor = {}
        for r in first:
            cursor = advance(cursor, r)
        rest = list(log.read(cursor))
        assert len(first) + len(rest) == len(events)
        assert not set(_ids(first)) & set(_ids(rest))
        assert list(log.read(log.end_cursor())) == []

    def test_offsets_increase_within_partition(self, make_log):
        log = make_log("run-contract-offsets")
        log.append(run_events("run-contract-offsets", n_envs=2))
        last: dict[int, int] = {}
        for r in log.read():
            assert r.offset > last.get(r.partition, -1)
            last[r.partition] = r.offset

    def test_consumer_groups_commit_and_resume(self, make_log, reopen):
        log = make_log("run-contract-groups")
        events = run_events("run-contract-groups", n_envs=2)
        log.append(events)
        assert log.committed("projector") == {}
        cursor = {}
        seen = []
        for r in log.read(limit=6):
            seen.append(r.envelope.event_id)
            cursor = advance(cursor, r)
        log.commit("projector", cursor)
        assert log.committed("projector") == cursor
        assert log.committed("other-group") == {}
        other = reopen(log)
        try:
            resumed = list(other.read(other.committed("projector")))
        finally:
            other.close()
        assert sorted(seen + _ids(resumed)) == sorted(e.event_id for e in events)

    def test_count_by_type(self, make_log):
        log = make_log("run-contract-count")
        log.append(run_events("run-contract-count", n_envs=3, k=2))
        counts = log.count_by_type()
        assert counts["RunStarted"] == 1
        assert counts["EnvironmentProposed"] == 3
        assert counts["RolloutCompleted"] == 12
        assert counts["RegretEstimated"] == 3
        assert counts["RunStopped"] == 1

    def test_follow_sees_new_events(self, make_log, reopen):
        log = make_log("run-contract-follow")
        first = run_events("run-contract-follow", n_envs=1)
        log.append(first)
        later = env_chain("run-contract-follow", "env-late")
        writer = reopen(log)
        stop = threading.Event()
        got = []

        def produce():
            time.sleep(0.3)
            writer.append(later)

        t = threading.Thread(target=produce)
        t.start()
        try:
            for r in log.follow(stop=stop, idle_timeout=15):
                got.append(r.envelope.event_id)
                if len(got) == len(first) + len(later):
                    stop.set()
        finally:
            t.join()
            writer.close()
        assert sorted(got) == sorted(e.event_id for e in first + later)

    def test_follow_ends_after_idle_timeout(self, make_log):
        log = make_log("run-contract-idle")
        log.append(run_events("run-contract-idle", n_envs=1))
        t0 = time.monotonic()
        n = sum(1 for _ in log.follow(idle_timeout=0.5))
        assert n > 0
        assert time.monotonic() - t0 < 30

    def test_dead_letters_keep_reason_and_bytes(self, make_log):
        log = make_log("run-contract-dead")
        log.dead_letter(b"\x00not json", "not valid JSON", source="test")
        letters = log.dead_letters()
        assert len(letters) == 1
        assert letters[0].raw == b"\x00not json"
        assert "not valid JSON" in letters[0].reason
        assert list(log.read()) == []

    def test_concurrent_writers_lose_nothing(self, make_log, reopen):
        log = make_log("run-contract-concurrent")
        batches = [env_chain("run-contract-concurrent", f"env-{i}") for i in range(6)]
        errors = []

        def write(batch):
            w = reopen(log)
            try:
                w.append(batch)
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                w.close()

        threads = [threading.Thread(target=write, args=(b,)) for b in batches]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        expected = {e.event_id for b in batches for e in b}
        assert set(_ids(log.read())) == expected
