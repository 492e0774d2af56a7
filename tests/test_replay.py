"""Replay: rebuilding projections from the log equals the live ones; --verify, --until,
snapshots + restart; difficulty series; the replay and archive commands."""

from __future__ import annotations

import json
import sqlite3

import msgspec
import pytest
from typer.testing import CliRunner

from archive_support import mixed_run
from spade_engine.archive.difficulty import DifficultySeries
from spade_engine.archive.replay import first_difference, open_live_projections, replay_run, verify_projections
from spade_engine.cli import app
from spade_engine.consumers import EmbeddedRunner
from spade_engine.events import SqliteEventLog
from spade_engine.events.store import DataDir

RUN = "run-20260101-000000-abcdef"


@pytest.fixture
def data(tmp_path):
    root = tmp_path / "data"
    log = SqliteEventLog(DataDir(root).log_path(RUN), RUN)
    log.append(mixed_run(RUN, 12))
    yield root, log
    log.close()


def _live(root, log, *, flush_every=5000):
    projs = open_live_projections(DataDir(root).run_dir(RUN))
    EmbeddedRunner(log, projs.all, flush_every=flush_every).catch_up()
    return projs


def test_replay_from_zero_equals_live(data, tmp_path):
    root, log = data
    # live projections are fed in small flushes, as a run does
    live = _live(root, log, flush_every=7)
    result = replay_run(log, tmp_path / "rebuilt")
    assert result.events == len(list(log.read())) and result.cursor == log.end_cursor()
    from spade_engine.archive.replay import open_projections

    with open_projections(tmp_path / "rebuilt") as rebuilt:
        assert verify_projections(live, rebuilt) is None
        assert len(rebuilt.memory) == 10 and len(rebuilt.difficulty.rows()) > 0
    for name in ("archive.sqlite", "memory/state.json", "memory/vectors.f32", "memory/index.faiss", "difficulty.json"):
        assert (tmp_path / "rebuilt" / name).exists(), name
    live.close()


def test_replay_refuses_a_non_empty_target(data, tmp_path):
    root, log = data
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    from spade_engine.archive.replay import ReplayError

    with pytest.raises(ReplayError, match="not empty"):
        replay_run(log, tmp_path / "busy")


def test_first_difference_names_the_place():
    assert first_difference({"a": [{"env_id": "e1", "x": 1}]}, {"a": [{"env_id": "e1", "x": 1}]}) is None
    diff = first_difference({"a": [{"env_id": "e1", "x": 1}]}, {"a": [{"env_id": "e1", "x": 2}]})
    assert diff == "a[env_id=e1].x: live 1 != replay 2"
    assert "2 items live, 1 replayed" in first_difference({"a": [1, 2]}, {"a": [1]})


def test_until_offset_and_time(data, tmp_path):
    root, log = data
    records = list(log.read())
    res = replay_run(log, tmp_path / "u1", until=20)
    assert res.events == 20 and res.cursor == {0: 20}
    from spade_engine.archive.replay import open_projections, parse_until

    with open_projections(tmp_path / "u1") as p:
        assert p.archive.position() == {0: 20}
        from spade_engine.archive.queries import list_environments

        # 1 RunStarted + env-0000 (2+1+8+1=12 events) + 7 events of env-0001
        envs = {e["env_id"]: e for e in list_environments(p.archive.engine, limit=None)}
        assert set(envs) == {"env-0000", "env-0001"} and envs["env-0001"]["win_rate_plain"] is None
    t = records[30].envelope.occurred_at
    res = replay_run(log, tmp_path / "u2", until=parse_until(t))
    expected = next((i for i, r in enumerate(records) if r.envelope.occurred_at > t), len(records))
    assert res.events == expected and 31 <= expected < len(records)


def test_snapshot_and_restart_resume_from_the_snapshot(tmp_path):
    root = tmp_path / "data"
    log = SqliteEventLog(DataDir(root).log_path(RUN), RUN)
    events = mixed_run(RUN, 12)
    half = len(events) // 2
    log.append(events[:half])
    projs = _live(root, log)
    positions = [p.position() for p in projs.all]
    assert positions == [{0: half}] * 3
    projs.close()
    log.append(events[half:])

    reopened = open_live_projections(DataDir(root).run_dir(RUN))
    assert [p.position() for p in reopened.all] == [{0: half}] * 3
    seen: list[int] = []

    class Counting:
        def __init__(self, inner):
            self.inner, self.name = inner, inner.name

        def apply(self, rec):
            seen.append(rec.offset)
            self.inner.apply(rec)

        def flush(self, cursor):
            self.inner.flush(cursor)

        def position(self):
            return self.inner.position()

        @property
        def skipped(self):
            return self.inner.skipped

    EmbeddedRunner(log, [Counting(p) for p in reopened.all]).catch_up()
    assert min(seen) == half and len(seen) == 3 * (len(events) - half)
    # the resumed projections equal a replay from zero
    replay_run(log, tmp_path / "full")
    from spade_engine.archive.replay import open_projections

    with open_projections(tmp_path / "full") as full:
        assert verify_projections(reopened, full) is None
    reopened.close()
    log.close()


def test_difficulty_rows_per_window_and_skill(data, tmp_path):
    root, log = data
    series = DifficultySeries(tmp_path / "d.json", window=6)
    EmbeddedRunner(log, [series]).catch_up()
    rows = series.rows()
    assert [r["window"] for r in rows if r["skill"] == "*"] == [0, 1]
    w0 = {r["skill"]: r for r in rows if r["window"] == 0}
    assert set(w0) == {"*", "math", "logic", "text"}
    assert w0["*"]["environments"] == 6 and w0["*"]["accepted"] == 5 and w0["*"]["valid"] == 6
    assert w0["*"]["validation_pass_rate"] == 1.0 and w0["*"]["acceptance_rate"] == pytest.approx(5 / 6)
    # win rates of env 0..5 accepted ones: 0.0, 0.5, 1.0, 0.25, (4 rejected), 0.5
    assert w0["*"]["win_rate_plain"] == pytest.approx((0.0 + 0.5 + 1.0 + 0.25 + 0.5) / 5)
    assert w0["math"]["environments"] == 2 and w0["math"]["regret"] == pytest.approx((1.0 + 0.75) / 2)  # env-0000 and env-0003
    assert w0["*"]["novelty"] == pytest.approx(0.42)
    assert series.rows(window=12)[0]["environments"] == 12
    on_disk = json.loads((tmp_path / "d.json").read_text())
    assert on_disk["rows"] == rows and on_disk["cursor"] == {"0": len(list(log.read()))}


def test_difficulty_does_not_depend_on_interleaving(tmp_path):
    events = mixed_run("r1", 6)
    a = DifficultySeries(None)
    b = DifficultySeries(None)
    from spade_engine.events.log import Record

    recs = [Record(0, i, e, b"") for i, e in enumerate(events)]
    for r in recs:
        a.apply(r)
    # environments delivered env by env in reverse order (as from other partitions)
    by_env: dict[str, list] = {}
    for r in recs:
        by_env.setdefault(r.envelope.key, []).append(r)
    for key in reversed(list(by_env)):
        for r in by_env[key]:
            b.apply(r)
    assert a.rows() == b.rows()


def _cli(*args):
    return CliRunner().invoke(app, [*args])


def _as_estimated(events):
    """``events`` with every RegretEstimated replaced by what the regret stage computes from the
    plays it names (``mixed_run``'s estimates carry made-up designer rewards)."""
    from spade_engine.config import EngineConfig
    from spade_engine.engine.rounds import estimate_round
    from spade_engine.events.catalogue import payload_to_builtins

    proposed, plays, out = {}, {}, []
    for env in events:
        ev = env.event()
        if env.type == "EnvironmentProposed":
            proposed[ev.env_id] = ev
        elif env.type == "RolloutCompleted":
            plays[env.event_id] = ev
        elif env.type == "RegretEstimated":
            est = estimate_round(proposed[ev.env_id], [(i, plays[i]) for i in ev.rollout_ids], EngineConfig().reward,
                                 EngineConfig().loop, round_=0, replay=False, prev=None)
            est = msgspec.structs.replace(est, skill=ev.skill)
            env = msgspec.structs.replace(env, payload=payload_to_builtins(est))
        out.append(env)
    return out


def test_replay_command_verify_equal_then_tampered(data, tmp_path):
    root, log = data
    _live(root, log).close()
    # the estimates are recomputed from the plays they name: mixed_run's made-up rewards differ
    res = _cli("replay", "--data-dir", str(root), "--into", str(tmp_path / "r0"), "--verify")
    assert res.exit_code == 1, res.output
    assert "regret of env-0000: designer_reward recorded 0.7 != recomputed" in res.output
    root = tmp_path / "recomputable"  # the same run with the estimates the regret stage computes
    log = SqliteEventLog(DataDir(root).log_path(RUN), RUN)
    log.append(_as_estimated(mixed_run(RUN, 12)))
    _live(root, log).close()
    log.close()
    res = _cli("replay", "--data-dir", str(root), "--into", str(tmp_path / "r1"), "--verify")
    assert res.exit_code == 0, res.output
    assert "live projections equal the replay" in res.output and "skipped events: 0" in res.output
    # tamper with the live archive: --verify names the first difference and exits 1
    db = sqlite3.connect(DataDir(root).run_dir(RUN) / "archive.sqlite")
    db.execute("UPDATE environments SET regret = 0.123 WHERE env_id = 'env-0002'")
    db.commit()
    db.close()
    res = _cli("replay", "--data-dir", str(root), "--into", str(tmp_path / "r2"), "--verify")
    assert res.exit_code == 1, res.output
    assert "archive.environments[env_id=env-0002].regret: live 0.123 != replay 0.0" in res.output


def test_replay_command_counts_skipped_and_until(data, tmp_path):
    root, log = data
    import msgspec

    rec = next(iter(log.read()))
    log.append([msgspec.structs.replace(rec.envelope, event_id="00000000-0000-7000-8000-0000000000aa", type="Mystery")])
    res = _cli("replay", RUN[:10], "--data-dir", str(root), "--into", str(tmp_path / "r"), "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert summary["skipped"]["archive"] == {"unknown type Mystery": 1}
    assert summary["skipped"]["memory"] == {"unknown type Mystery": 1}
    res = _cli("replay", "--data-dir", str(root), "--into", str(tmp_path / "u"), "--until", "5", "--json")
    assert json.loads(res.output)["events"] == 5
    res = _cli("replay", "--data-dir", str(root), "--into", str(tmp_path / "bad"), "--until", "yesterday")
    assert res.exit_code == 2 and "neither an offset nor an ISO time" in res.output


def test_archive_commands(data, tmp_path):
    root, log = data
    res = _cli("archive", "list", "--data-dir", str(root))
    assert res.exit_code == 2 and "no archive yet" in res.output
    res = _cli("archive", "list", "--data-dir", str(root), "--refresh", "--json")
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.output)) == 12
    res = _cli("archive", "list", "--data-dir", str(root), "--verdict", "rejected")
    assert res.exit_code == 0 and "env-0004" in res.output and "env-0000" not in res.output
    assert "skipped events: 0" in res.output
    res = _cli("archive", "search", "--data-dir", str(root), "--skill", "logic", "--win-min", "0.4", "--win-max", "0.6", "--json")
    assert [e["env_id"] for e in json.loads(res.output)] == ["env-0001"]
    res = _cli("archive", "show", "env-0003", "--data-dir", str(root), "--json")
    shown = json.loads(res.output)
    assert shown["win_rate_plain"] == 0.25 and len(shown["plays"]) == 8
    res = _cli("archive", "show", "nope", "--data-dir", str(root))
    assert res.exit_code == 2 and "no environment 'nope'" in res.output


def test_archive_migrate_command(data, tmp_path):
    root, log = data
    from spade_engine.archive.db import make_engine, migrate

    path = DataDir(root).run_dir(RUN) / "archive.sqlite"
    engine = make_engine(f"sqlite:///{path}")
    migrate(engine, "0001")
    engine.dispose()
    res = _cli("archive", "list", "--data-dir", str(root))
    assert res.exit_code == 2 and "schema version 0001" in res.output and "archive migrate" in res.output
    res = _cli("archive", "migrate", "--data-dir", str(root))
    assert res.exit_code == 0 and "from schema version 0001 to 0003" in res.output
    res = _cli("archive", "list", "--data-dir", str(root), "--refresh", "--json")
    assert res.exit_code == 0 and len(json.loads(res.output)) == 12


@pytest.mark.slow
def test_archive_search_by_text(tmp_path):
    from archive_support import chain
    from spade_engine.archive.embedder import Embedder

    root = tmp_path / "data"
    log = SqliteEventLog(DataDir(root).log_path(RUN), RUN)
    codes = {
        "env-sort": "class SortEnv:\n    '''Sort a list of integers in ascending order.'''\n",
        "env-chess": "class KnightEnv:\n    '''Knight moves on a chessboard.'''\n",
        "env-prime": "class PrimeEnv:\n    '''Is the number prime? Answer yes or no.'''\n",
    }
    vecs = Embedder().embed(list(codes.values()))
    for (env_id, code), v in zip(codes.items(), vecs):
        log.append(chain(RUN, env_id, vec=v, code=code))
    log.close()
    res = _cli("archive", "search", "--data-dir", str(root), "--refresh", "--text", "ordering numbers from small to large", "--json", "-k", "2")
    assert res.exit_code == 0, res.output
    found = json.loads(res.stdout)  # stderr says it loads the embedding model
    assert found[0]["env_id"] == "env-sort" and len(found) == 2
    assert found[0]["similarity"] > found[1]["similarity"]
    assert "the 2 most similar of 3 matching environments (-k 3 for all)" in res.stderr  # never silently capped
    res = _cli("archive", "search", "--data-dir", str(root), "--json", "-k", "1")
    assert res.exit_code == 0 and len(json.loads(res.stdout)) == 1
    assert "the 1 of 3 matching environments (-k 3 for all)" in res.stderr
    res = _cli("archive", "search", "--data-dir", str(root), "--json", "-k", "3")
    assert len(json.loads(res.stdout)) == 3 and "matching environments" not in res.stderr


def test_parallel_replay_equals_sequential(data, tmp_path):
    """The two-process replay (archive here, memory and difficulty in a child that reads the log
    itself) rebuilds exactly what the one-process replay does, also when bounded by --until."""
    from spade_engine.archive.replay import open_projections

    import msgspec

    root, log = data
    rec = next(iter(log.read()))
    log.append([msgspec.structs.replace(rec.envelope, event_id="00000000-0000-7000-8000-0000000000ab", type="Mystery")])
    seq = replay_run(log, tmp_path / "seq", parallel=False)
    par = replay_run(log, tmp_path / "par", parallel=True)
    assert (par.events, par.cursor, par.skipped) == (seq.events, seq.cursor, seq.skipped)
    assert par.skipped == {name: {"unknown type Mystery": 1} for name in ("archive", "memory", "difficulty")}
    with open_projections(tmp_path / "seq") as a, open_projections(tmp_path / "par") as b:
        assert verify_projections(a, b) is None
        assert len(b.memory) == 10 and b.difficulty.rows()
    cut = replay_run(log, tmp_path / "par-cut", parallel=True, until=20)
    assert cut.events == 20 and cut.cursor == {0: 20}
    with open_projections(tmp_path / "par-cut") as p:
        assert [x.position() for x in p.all] == [{0: 20}] * 3


def test_parallel_replay_reports_a_failed_child(data, tmp_path, monkeypatch):
    """A child that cannot do its half is a clear ReplayError, not a half-built replay called done."""
    import spade_engine.archive.replay as replay_mod
    from spade_engine.archive.replay import ReplayError

    root, log = data
    missing = tmp_path / "nowhere" / "events.sqlite"
    monkeypatch.setattr(replay_mod, "log_opener", lambda _log: ("sqlite", {"path": str(missing), "run_id": RUN}))
    with pytest.raises(ReplayError, match=r"replay child process failed: .*no event log at .*nowhere"):
        replay_run(log, tmp_path / "par", parallel=True)


def test_parallel_replay_needs_a_log_another_process_can_open(data, tmp_path):
    from spade_engine.archive.replay import ReplayError

    root, log = data

    class Wrapped:  # an EventLog another process has no way to reopen
        def __getattr__(self, name):
            return getattr(log, name)

        def reopen_args(self):  # the EventLog protocol's way of saying so
            return None

    with pytest.raises(ReplayError, match="needs a log another process can open"):
        replay_run(Wrapped(), tmp_path / "w", parallel=True)
    # without asking for it, such a log is replayed in one process
    assert replay_run(Wrapped(), tmp_path / "w2").events == len(list(log.read()))


def test_replay_covers_the_log_as_it_was_when_it_started(data):
    """Events appended while a replay reads are left out, so both processes of a parallel
    replay stop at the same event."""
    from spade_engine.archive.fold import bounds, records

    root, log = data
    n = len(list(log.read()))
    stop, until_time = bounds(log, None)
    assert stop == {0: n} and until_time is None
    it = records(log, stop, until_time)
    first = [next(it) for _ in range(5)]
    log.append(mixed_run(RUN, 2, seed=1)[1:-1])
    assert len(first) + sum(1 for _ in it) == n
    assert bounds(log, 10) == ({0: 10}, None) and bounds(log, {0: 10**9})[0] == {0: len(list(log.read()))}


def test_an_estimate_without_its_proposal_is_a_regret_mismatch(tmp_path):
    from spade_engine.engine.regret_replay import verify_regrets

    log = SqliteEventLog(tmp_path / "events.sqlite", RUN)
    try:
        log.append([e for e in _as_estimated(mixed_run(RUN, 2)) if not (e.type == "EnvironmentProposed" and e.key == "env-0001")])
        (bad,) = verify_regrets(log)
        assert (bad.env_id, bad.field) == ("env-0001", "EnvironmentProposed")
    finally:
        log.close()
