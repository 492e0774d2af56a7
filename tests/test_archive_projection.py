"""The archive projection: what it records, idempotence, bad input, schema versions.

The archive tests run against SQLite and a real PostgreSQL server (marked `postgres`)."""

from __future__ import annotations

import msgspec
import pytest
from sqlalchemy import text

from archive_support import mixed_run
from factories import run_events
from spade_engine.archive.db import ArchiveSchemaError, make_engine, migrate, open_engine, schema_revision
from spade_engine.archive.models import SCHEMA_VERSION
from spade_engine.archive.projection import ArchiveProjection
from spade_engine.archive.queries import archive_state, dump_archive, get_environment, list_environments, plays_of
from spade_engine.consumers import EmbeddedRunner
from spade_engine.events import PolicyUpdated, SqliteEventLog, make_envelope
from spade_engine.events.catalogue import BlobRef


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def archive_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'archive.sqlite'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def log(tmp_path):
    lg = SqliteEventLog(tmp_path / "run" / "events.sqlite", "r1")
    yield lg
    lg.close()


def _fill(log, archive_url, events):
    log.append(events)
    proj = ArchiveProjection.open(archive_url)
    EmbeddedRunner(log, [proj]).catch_up()
    return proj


def test_archive_reflects_the_log(log, archive_url):
    events = mixed_run("r1", 10)
    policy = make_envelope(
        PolicyUpdated(version="v1", parent_version="v0", step=1,
                      checkpoint=BlobRef(uri="cas://sha256/ab", sha256="ab", size=3), metrics={"loss": 0.5}),
        run_id="r1", producer="trainer",
    )
    proj = _fill(log, archive_url, [*events, policy])
    eng = proj.engine
    envs = {e["env_id"]: e for e in list_environments(eng, limit=None)}
    assert len(envs) == 10
    e0 = envs["env-0000"]
    assert e0["skill"] == "math" and e0["verdict"] == "accepted" and e0["valid"] is True
    assert e0["code"].startswith("class E0Env") and len(e0["code_sha256"]) == 64
    assert e0["plays_plain"] == 4 and e0["plays_hinted"] == 4
    assert e0["win_rate_plain"] == 0.0 and e0["win_rate_hinted"] == 1.0 and e0["regret"] == 1.0
    assert e0["designer_reward"] == 0.7 and e0["hint"] == "answer in \\boxed{}" and e0["policy_version"] == "v0"
    assert e0["novelty"] == 0.42
    # offsets: the first event of env-0000 is right after RunStarted
    assert e0["first_offset"] == 1 and e0["last_offset"] == 1 + 2 + 1 + 8 - 1 + 1
    rejected = envs["env-0004"]
    assert rejected["verdict"] == "rejected" and rejected["failed_check"] == "novelty"
    assert rejected["error_kind"] == "duplicate" and rejected["plays_plain"] == 0
    # filters
    assert {e["env_id"] for e in list_environments(eng, skill="logic", limit=None)} == {"env-0001", "env-0004", "env-0007"}
    band = list_environments(eng, win_min=0.4, win_max=0.6, verdict="accepted", limit=None)
    assert {e["env_id"] for e in band} == {"env-0001", "env-0005"}
    assert get_environment(eng, "env-0003")["win_rate_plain"] == 0.25
    plays = plays_of(eng, "env-0000")
    assert len(plays) == 8 and sum(p["hinted"] for p in plays) == 4 and all(p["turns"] == 1 for p in plays)
    state = archive_state(eng)
    assert state["counts"] == {"environments": 10, "plays": 8 * 8, "estimates": 8, "policy_versions": 1}
    assert e0["rounds"] == 1 and e0["replays"] == 0 and e0["win_rate_smoothed"] is None  # the fixture records none
    assert state["cursor"] == {"0": len(events) + 1}
    with eng.connect() as conn:
        row = conn.execute(text("SELECT checkpoint_sha256, metrics FROM policy_versions WHERE version='v1'")).one()
    assert row[0] == "ab"
    proj.close()


def test_reapplying_the_log_changes_nothing(log, archive_url):
    events = run_events("r1", 3, k=2)
    proj = _fill(log, archive_url, events)
    before = dump_archive(proj.engine)
    # feed the whole log again, twice, including a flush in between (re-delivery after a crash)
    for rec in log.read():
        proj.apply(rec)
    proj.flush(log.end_cursor())
    for rec in log.read():
        proj.apply(rec)
    proj.flush(log.end_cursor())
    assert dump_archive(proj.engine) == before
    assert before["environments"][0]["plays_plain"] == 2
    proj.close()


def test_an_older_event_never_overwrites_a_newer_one(log, archive_url):
    events = run_events("r1", 1, k=2)
    regret = next(e for e in events if e.type == "RegretEstimated")
    newer = msgspec.structs.replace(
        make_envelope(PolicyUpdated(version="x", parent_version=None, checkpoint=None, step=0), run_id="r1", producer="t"),
    )
    re2 = msgspec.structs.replace(regret, event_id=newer.event_id, payload={**regret.payload, "regret": 0.9})
    proj = _fill(log, archive_url, [*events, re2])
    assert get_environment(proj.engine, "env-0000")["regret"] == 0.9
    # re-deliver the older estimate: the newer one stays
    older = next(r for r in log.read() if r.envelope.event_id == regret.event_id)
    proj.apply(older)
    proj.flush(log.end_cursor())
    assert get_environment(proj.engine, "env-0000")["regret"] == 0.9
    proj.close()


def test_unknown_malformed_and_future_events_are_skipped_and_counted(log, archive_url):
    events = run_events("r1", 2)
    good = events[1]
    unknown = msgspec.structs.replace(good, event_id="00000000-0000-7000-8000-000000000001", type="AlienLanded", payload={"x": 1})
    future = msgspec.structs.replace(good, event_id="00000000-0000-7000-8000-000000000002", schema_version=99)
    malformed = msgspec.structs.replace(good, event_id="00000000-0000-7000-8000-000000000003", payload={"env_id": 5})
    proj = _fill(log, archive_url, [*events, unknown, future, malformed])
    assert proj.skipped == {
        "future version EnvironmentProposed v99": 1,
        "malformed EnvironmentProposed": 1,
        "unknown type AlienLanded": 1,
    }
    assert len(list_environments(proj.engine, limit=None)) == 2
    # re-delivering them does not count them twice, and the counts survive a reopen
    for rec in log.read():
        proj.apply(rec)
    proj.flush(log.end_cursor())
    proj.close()
    again = ArchiveProjection.open(archive_url)
    assert sum(again.skipped.values()) == 3
    assert archive_state(again.engine)["skipped"]["unknown type AlienLanded"] == 1
    again.close()


def test_position_is_saved_with_the_tables(log, archive_url):
    events = run_events("r1", 2)
    proj = _fill(log, archive_url, events)
    assert proj.position() == {0: len(events)}
    proj.close()
    reopened = ArchiveProjection.open(archive_url)
    assert reopened.position() == {0: len(events)}
    reopened.close()


def test_older_schema_is_refused_with_a_clear_message_then_migrated(tmp_path, archive_url, log):
    engine = make_engine(archive_url)
    migrate(engine, "0001")  # a database made by an older engine
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO environments (env_id, skill, code, code_sha256, parents, attempt, verdict, plays_plain, "
            "plays_hinted, partition, sources) VALUES ('old-env', 'math', '', '', '[]', 0, 'accepted', 0, 0, 0, '{}')"
        ))
    assert schema_revision(engine) == ("0001", True)
    engine.dispose()
    with pytest.raises(ArchiveSchemaError) as err:
        open_engine(archive_url)
    assert "schema version 0001" in str(err.value) and "spade-engine archive migrate" in str(err.value)
    # refused means untouched
    engine = make_engine(archive_url)
    assert schema_revision(engine)[0] == "0001"
    assert migrate(engine) == ("0001", SCHEMA_VERSION)
    engine.dispose()
    proj = ArchiveProjection.open(archive_url)
    assert get_environment(proj.engine, "old-env")["verdict"] == "accepted"  # nothing lost
    assert proj.skipped == {} and proj.position() == {}
    proj.close()


def test_foreign_database_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'other.sqlite'}"
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE environments (x INTEGER)"))
    engine.dispose()
    with pytest.raises(ArchiveSchemaError, match="not a spade-engine archive"):
        open_engine(url)


def _as_v1(envelope):
    """The envelope as an engine before rounds wrote it (RolloutCompleted / RegretEstimated v1)."""
    drop = {"RolloutCompleted": ("round",),
            "RegretEstimated": ("round", "win_rate_smoothed", "designer_final", "replay", "baseline", "baseline_prev")}
    if envelope.type not in drop:
        return envelope
    payload = {k: v for k, v in envelope.payload.items() if k not in drop[envelope.type]}
    return msgspec.structs.replace(envelope, schema_version=1, payload=payload)


def test_archive_of_schema_0002_migrates_to_what_a_rebuild_gives(log, archive_url):
    """A run recorded before rounds (v1 events) projected at schema 0002 and migrated to 0003
    equals the archive rebuilt from the log: its one estimate per environment moves into
    ``estimates`` and each environment gets rounds = 1 and its smoothed win rate."""
    from alembic import command

    from spade_engine.archive.db import _alembic_config

    proj = _fill(log, archive_url, [_as_v1(e) for e in mixed_run("r1", 10)])
    rebuilt = dump_archive(proj.engine)
    assert len(rebuilt["estimates"]) == 8 and all(e["designer_final"] and e["round"] == 0 for e in rebuilt["estimates"])
    proj.close()
    engine = make_engine(archive_url)
    with engine.begin() as conn:
        command.downgrade(_alembic_config(conn), "0002")
    assert schema_revision(engine)[0] == "0002"
    assert migrate(engine) == ("0002", SCHEMA_VERSION)
    assert dump_archive(engine) == rebuilt
    engine.dispose()
