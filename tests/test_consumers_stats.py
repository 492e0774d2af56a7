"""The per-run statistics projection and the embedded driver on the SQLite log."""

from __future__ import annotations

import json

import msgspec
from typer.testing import CliRunner

from spade_engine.cli import app
from spade_engine.consumers import EmbeddedRunner
from spade_engine.consumers.cli import snapshot_path
from spade_engine.consumers.projection import Projection
from spade_engine.consumers.stats import RunStats, RunStatsProjection, reduce_stats
from spade_engine.events import SqliteEventLog
from spade_engine.events.log import Record

from factories import env_chain, run_events


def test_reducer_counts_each_event_once_whatever_the_order():
    events = run_events("r", n_envs=3, k=2)
    a = RunStats()
    for e in events:
        reduce_stats(a, e)
    b = RunStats()
    for e in list(reversed(events)) + events[:5]:  # another order, with duplicates
        reduce_stats(b, e)
    assert a.summary() == b.summary()
    assert a.counts == {
        "RunStarted": 1, "EnvironmentProposed": 3, "EnvironmentValidated": 3, "HintWritten": 3,
        "RolloutCompleted": 12, "RegretEstimated": 3, "RunStopped": 1,
    }
    times = sorted(e.occurred_at for e in events)
    assert (a.first_at, a.last_at) == (times[0], times[-1])


def test_reducer_skips_what_it_cannot_read():
    e = run_events("r", n_envs=1)[0]
    s = RunStats()
    reduce_stats(s, msgspec.structs.replace(e, type="FromTheFuture", event_id="x1"))
    reduce_stats(s, msgspec.structs.replace(e, schema_version=99, event_id="x2"))
    reduce_stats(s, e)
    assert s.counts == {"RunStarted": 1}
    assert s.skipped == {"unknown type FromTheFuture": 1, "future version RunStarted v99": 1}


def test_projection_snapshot_round_trips_state_and_cursor(tmp_path):
    path = tmp_path / "stats.json"
    p = RunStatsProjection("r", path)
    assert isinstance(p, Projection)
    events = run_events("r", n_envs=1)
    for i, e in enumerate(events):
        p.apply(Record(0, i, e, e.to_json()))
    p.flush({0: len(events)})
    q = RunStatsProjection("r", path)
    assert q.position() == {0: len(events)}
    assert q.state.summary() == p.state.summary()
    assert not list(tmp_path.glob("*.tmp"))
    # re-applying an already counted event changes nothing
    q.apply(Record(0, 0, events[0], events[0].to_json()))
    assert q.state.total == len(events)


def test_embedded_runner_resumes_from_committed_cursor(tmp_path):
    log = SqliteEventLog(tmp_path / "r" / "events.sqlite", "r")
    first = run_events("r", n_envs=2)
    log.append(first)
    snap = tmp_path / "stats.json"
    runner = EmbeddedRunner(log, [RunStatsProjection("r", snap)])
    assert runner.catch_up() == len(first)
    assert log.committed("projection:stats") == {0: len(first)}
    more = env_chain("r", "env-late")
    log.append(more)
    proj = RunStatsProjection("r", snap)  # a restarted consumer
    runner2 = EmbeddedRunner(log, [proj])
    assert runner2.run(idle_timeout=0.5) == len(more)  # only the new records are read
    assert proj.state.total == len(first) + len(more)
    assert log.committed("projection:stats") == {0: len(first) + len(more)} == proj.position()
    log.close()


def test_cli_runs_the_embedded_driver_on_sqlite(tmp_path):
    run_id = "run-20260101-000000-abcdef"
    log = SqliteEventLog(tmp_path / "runs" / run_id / "events.sqlite", run_id)
    events = run_events(run_id, n_envs=2)
    log.append(events)
    log.close()
    cli = CliRunner()
    res = cli.invoke(app, ["consumers", "run", "--data-dir", str(tmp_path), "--until-idle", "0.3"])
    assert res.exit_code == 0, res.output
    assert snapshot_path(tmp_path, run_id).exists()
    res = cli.invoke(app, ["consumers", "stats", "--data-dir", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["total"] == len(events) and summary["counts"]["RolloutCompleted"] == 8
    res = cli.invoke(app, ["consumers", "stats", "--data-dir", str(tmp_path)])  # TSV in a pipe
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert rows[0] == ["type", "count"] and rows[-1] == ["total", str(len(events))]
    assert dict(rows[1:-1])["RolloutCompleted"] == "8" and "cursor" in res.stderr
    res = cli.invoke(app, ["consumers", "run", "--data-dir", str(tmp_path), "--driver", "faust"])
    assert res.exit_code == 2 and "kafka" in res.output


class _CountingStats(RunStatsProjection):
    """The real statistics projection, counting its flushes (each writes its snapshot file)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.flushes = 0

    def flush(self, cursor):
        self.flushes += 1
        super().flush(cursor)


def test_the_engine_runner_does_not_flush_after_every_catch_up(tmp_path):
    """The engine appends an event, then catches its live projections up, once per event: its
    runner (``live_projection_runner``, ``lazy_flush``) flushes and commits every 200 records or
    2 s, not at every catch-up (a flush and an offset commit per event made a Kafka run crawl at a
    few events per second). What is left is flushed by the context's closer (``runner.flush``)."""
    import time

    from spade_engine.runs.context import live_projection_runner

    log = SqliteEventLog(tmp_path / "r" / "events.sqlite", "r")
    events = run_events("r", n_envs=12)
    assert len(events) < 200, "fewer events than the runner's batch: only time or the end flushes them"
    proj = _CountingStats("r", tmp_path / "stats.json")
    runner = live_projection_runner(log, [proj])
    started = time.monotonic()
    for e in events:  # the engine's pattern: append, then catch up
        log.append([e])
        assert runner.catch_up() == 1
    elapsed = time.monotonic() - started
    # a flush at a catch-up happens only when 2 s passed since the last one (a loaded machine may
    # take longer than that over the loop, so the bound follows the time it really took)
    assert proj.flushes <= elapsed / runner.flush_interval_s + 1, (proj.flushes, elapsed, len(events))
    runner.flush()
    assert proj.position() == {0: len(events)} == log.committed("projection:stats"), "nothing is lost at the end"
    assert RunStatsProjection("r", tmp_path / "stats.json").state.total == len(events)
    log.close()


class _CountingReads:
    """A log that counts its reads (the rest is the real SQLite log's)."""

    def __init__(self, log):
        self._log = log
        self.reads = 0

    def __getattr__(self, name):
        return getattr(self._log, name)

    def read(self, cursor=None, **kw):
        self.reads += 1
        return self._log.read(cursor, **kw)


def test_the_engine_folds_state_and_projections_with_one_read(tmp_path):
    """After each append the engine folds what the log gained into its run state and its live
    projections with one read from the earlier of their cursors (a read each cost two broker round
    trips apiece on Kafka). A runner that lags behind the state (a projection restored from an older
    snapshot) still gets every record, and the state gets none twice."""
    from spade_engine.engine.loop import fold_new_records
    from spade_engine.engine.state import RunState
    from spade_engine.runs.context import live_projection_runner

    real = SqliteEventLog(tmp_path / "r" / "events.sqlite", "r")
    log = _CountingReads(real)
    events = run_events("r", n_envs=4)
    real.append(events[:10])
    state = RunState.from_log(real)  # the state has the first 10, the fresh projection none
    proj = RunStatsProjection("r", tmp_path / "stats.json")
    runner = live_projection_runner(log, [proj])
    for e in events[10:]:
        log.append([e])
        before = log.reads
        fold_new_records(log, state, runner)
        assert log.reads == before + 1
    runner.flush()
    assert len(state.seen) == len(events) and sum(state.skipped.values()) == 0
    assert proj.state.total == len(events) and proj.position() == state.cursor == {0: len(events)}
    # and it is what two separate reads give
    alone = RunState.from_log(real)
    assert alone.cursor == state.cursor and alone.seen == state.seen and alone.stats() == state.stats()
    real.close()
