"""The event catalogue and codec: immutability, canonical JSON, upcasting, schemas, bad input."""

from __future__ import annotations

import json

import msgspec
import pytest

from spade_engine.events import (
    EVENT_TYPES,
    EnvironmentValidated,
    FutureSchemaVersion,
    MalformedEvent,
    RolloutCompleted,
    UnknownEventType,
    decode_envelope,
    json_schemas,
    make_envelope,
    new_event_id,
)
from spade_engine.events.catalogue import UPCASTERS, register_upcaster

from factories import run_events


def test_catalogue_has_every_pipeline_event():
    assert set(EVENT_TYPES) == {
        "RunStarted",
        "EnvironmentProposed",
        "EnvironmentValidated",
        "HintWritten",
        "RolloutCompleted",
        "RegretEstimated",
        "EnvironmentReplayed",
        "PolicyUpdated",
        "PolicyLoaded",
        "RunStopped",
        "EvaluationCompleted",
    }


def test_rollout_carries_what_the_trainer_needs():
    fields = set(RolloutCompleted.__struct_fields__)
    assert {"env_id", "hinted", "seed", "policy_version", "episode_reward", "turns"} <= fields
    env = run_events("r", n_envs=1)
    rollout = next(e for e in env if e.type == "RolloutCompleted").event()
    gen = rollout.turns[0].generation
    assert gen.prompt_token_ids == [1, 2, 3]
    assert gen.completion_token_ids == [4, 5]
    assert gen.logprobs == [-0.5, -1.25]
    assert rollout.turns[0].reward in (0.0, 1.0)


def test_events_are_immutable():
    env = run_events("r", n_envs=1)[1]
    with pytest.raises(AttributeError):
        env.type = "X"  # type: ignore[misc]
    payload = env.event()
    with pytest.raises(AttributeError):
        payload.valid = False  # type: ignore[misc]


def test_keys_route_environment_events_by_env_id():
    events = run_events("run-x", n_envs=2)
    for e in events:
        if e.type in ("RunStarted", "RunStopped"):
            assert e.key == "run-x"
        else:
            assert e.key == e.payload["env_id"]


def test_canonical_json_is_sorted_compact_and_stable():
    e = run_events("r", n_envs=1)[2]
    raw = e.to_json()
    obj = json.loads(raw)
    assert raw == json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    again = decode_envelope(raw)
    assert again == e and again.to_json() == raw


def test_uuid7_ids_are_time_ordered_and_unique():
    ids = [new_event_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert all(i[14] == "7" for i in ids)


@pytest.mark.parametrize(
    "raw,needle",
    [
        (b"{not json", "not valid JSON"),
        (b"[1,2]", "JSON object"),
        (b'{"event_id":"x","type":"RunStopped"}', "lacks field"),
    ],
)
def test_malformed_envelopes_have_clear_errors(raw, needle):
    with pytest.raises(MalformedEvent, match=needle):
        decode_envelope(raw)


def test_unknown_type_and_future_version_are_distinct_errors():
    e = run_events("r", n_envs=1)[0]
    unknown = msgspec.structs.replace(e, type="SomethingNew")
    with pytest.raises(UnknownEventType):
        unknown.event()
    future = msgspec.structs.replace(e, schema_version=99)
    with pytest.raises(FutureSchemaVersion):
        future.event()


def test_unknown_payload_fields_are_kept_verbatim():
    e = run_events("r", n_envs=1)[1]
    payload = dict(e.payload, added_by_newer_engine={"x": 1})
    newer = msgspec.structs.replace(e, payload=payload)
    back = decode_envelope(newer.to_json())
    assert back.payload["added_by_newer_engine"] == {"x": 1}
    assert back.event().env_id == e.payload["env_id"]


def test_upcasting_hook_upgrades_old_versions(monkeypatch):
    # pretend EnvironmentValidated is at v2, where v1 called the field "ok" instead of "valid"
    monkeypatch.setattr(EnvironmentValidated, "VERSION", 2)
    monkeypatch.setitem(UPCASTERS, ("EnvironmentValidated", 1), UPCASTERS.get(("EnvironmentValidated", 1)))

    @register_upcaster("EnvironmentValidated", 1)
    def v1_to_v2(p):
        p["valid"] = p.pop("ok")
        return p

    old = make_envelope(EnvironmentValidated(env_id="e1", valid=True), run_id="r", producer="t")
    legacy_payload = dict(old.payload)
    legacy_payload["ok"] = legacy_payload.pop("valid")
    legacy = msgspec.structs.replace(old, schema_version=1, payload=legacy_payload)
    assert legacy.event().valid is True


def test_missing_upcaster_is_an_error(monkeypatch):
    monkeypatch.setattr(EnvironmentValidated, "VERSION", 3)
    e = make_envelope(EnvironmentValidated(env_id="e1", valid=True), run_id="r", producer="t")
    old = msgspec.structs.replace(e, schema_version=1)
    with pytest.raises(MalformedEvent, match="no upcaster"):
        old.event()


def test_bad_payload_is_malformed_not_a_crash():
    e = run_events("r", n_envs=1)[1]
    bad = msgspec.structs.replace(e, payload={"env_id": 5})
    with pytest.raises(MalformedEvent):
        bad.event()


def test_json_schema_for_every_type_validates_real_events():
    schemas = json_schemas()
    assert set(schemas) == set(EVENT_TYPES)
    for name, schema in schemas.items():
        assert schema["properties"]["type"] == {"const": name}
        assert "payload" in schema["properties"]
        assert set(schema["required"]) >= {"event_id", "type", "run_id", "key", "payload"}
    # the schema's payload definition names the payload's required fields
    rc = schemas["RolloutCompleted"]["$defs"]["RolloutCompleted"]
    assert {"env_id", "hinted", "seed", "episode_reward"} <= set(rc["required"])
