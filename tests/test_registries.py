"""The structure's seams: the policy and log backend registries, the split policy config (and its
upcast of the first schema), the one recorded-config reader, and the stage table shared by the
loop and the workers."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from spade_engine.config import EngineConfig, RewardConfig, load_config
from spade_engine.engine import regret as R
from spade_engine.engine.pipeline import STAGES, output_event_id, role_inputs
from spade_engine.errors import ConfigError, SpadeError
from spade_engine.events import make_envelope
from spade_engine.events.backends import backend_names, reopen_log
from spade_engine.events.catalogue import EnvironmentProposed, RunStarted
from spade_engine.events.errors import EventLogError
from spade_engine.events.sqlite.log import SqliteEventLog
from spade_engine.policy import registry
from spade_engine.policy.procedural import ProceduralPolicy
from spade_engine.recorded import recorded_config, recorded_config_or_default
from spade_engine.runs.engine import require_trainable


# -- policy registry --------------------------------------------------------------------------


def test_policy_backends_are_found_by_name() -> None:
    assert {"procedural", "transformers", "vllm"} <= set(registry.backend_names())
    cfg = load_config(overrides={"policy.procedural.agent_skill": 0.33})
    policy = registry.make_policy(cfg.policy)
    assert isinstance(policy, ProceduralPolicy) and policy.skill == 0.33 and policy.trainable is False
    assert policy.tokenize("two words") is None
    with pytest.raises(SpadeError, match="needs a model"):
        registry.make_policy(load_config(overrides={"policy.kind": "transformers"}).policy)
    with pytest.raises(SpadeError, match="unknown policy kind 'nope'"):
        registry.backend("nope")


def test_a_new_backend_is_one_registration() -> None:
    built = []

    def build(cfg, *, band, data_dir=None):
        built.append((cfg.model, band))
        return ProceduralPolicy(band=band)

    registry.register(registry.PolicyBackend("echo-test", build, trainable=True, needs_model=True))
    try:
        cfg = load_config(overrides={"policy.kind": "echo-test", "policy.model": "m"})  # config accepts it now
        registry.make_policy(cfg.policy, band=(0.3, 0.7))
        assert built == [("m", (0.3, 0.7))]
        require_trainable(cfg.with_overrides({"trainer.enabled": True}))  # trainable backend + model: fine
    finally:
        registry._registered.pop("echo-test")
    with pytest.raises(ConfigError, match="unknown policy kind"):
        load_config(overrides={"policy.kind": "echo-test"})


def test_a_new_backend_brings_its_own_settings_section(tmp_path: Path) -> None:
    from pydantic import Field

    from spade_engine.policy.settings import BackendSettings

    class EchoSettings(BackendSettings):
        skill: float = Field(0.5, ge=0.0, le=1.0)
        greeting: str = "hello"

    built = []

    def build(cfg, *, band, data_dir=None):
        built.append(cfg.section("echo"))
        return ProceduralPolicy(skill=cfg.echo.skill, band=band)

    registry.register(registry.PolicyBackend("echo", build, trainable=False, needs_model=False, settings=EchoSettings))
    try:
        assert load_config().policy.echo == EchoSettings()  # every config has the section, with its defaults
        f = tmp_path / "echo.toml"
        f.write_text('[policy]\nkind = "echo"\n[policy.echo]\nskill = 0.25\n')
        cfg = load_config(f, overrides={"policy.echo.greeting": "hi"})
        policy = registry.make_policy(cfg.policy, band=(0.3, 0.7))  # no model needed: its registration says so
        assert built == [EchoSettings(skill=0.25, greeting="hi")] and policy.skill == 0.25
        assert EngineConfig.model_validate(cfg.model_dump(mode="json")) == cfg  # recorded and read back
        assert cfg.policy.procedural.agent_skill == 0.7  # the built-in sections stay as they were
        with pytest.raises(ConfigError, match=r"policy\.echo\.skill: Input should be less than or equal to 1"):
            load_config(overrides={"policy.echo.skill": 2})
        with pytest.raises(ConfigError, match=r"policy\.echo\.nope: unknown key"):
            load_config(overrides={"policy.echo.nope": 1})
        with pytest.raises(ConfigError, match="needs a model to train"):
            require_trainable(cfg.with_overrides({"trainer.enabled": True, "policy.model": "m"}))  # not trainable
        with pytest.raises(SpadeError, match="cannot be named 'model'"):
            registry.register(registry.PolicyBackend("model", build, trainable=False, needs_model=False, settings=EchoSettings))
    finally:
        registry._registered.pop("echo")
    with pytest.raises(ConfigError, match=r"policy\.echo: unknown key"):
        load_config(f)  # without its backend, its section is an unknown key again


def test_an_entry_point_registration_carries_its_flags_and_settings(monkeypatch) -> None:
    import sys
    import types
    from importlib.metadata import EntryPoint

    from spade_engine.policy.settings import BackendSettings

    class PluginSettings(BackendSettings):
        level: int = 3

    plugin = types.ModuleType("spade_test_plugin")
    plugin.build = lambda cfg, *, band, data_dir=None: ProceduralPolicy(band=band)  # type: ignore[attr-defined]
    plugin.BACKEND = registry.PolicyBackend(  # type: ignore[attr-defined]
        "whatever", "spade_test_plugin:build", trainable=False, needs_model=False, settings=PluginSettings)
    monkeypatch.setitem(sys.modules, "spade_test_plugin", plugin)
    eps = [EntryPoint("plugged", "spade_test_plugin:BACKEND", registry.ENTRY_POINT_GROUP),
           EntryPoint("bare", "spade_test_plugin:build", registry.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(registry, "entry_points", lambda group: eps if group == registry.ENTRY_POINT_GROUP else [])
    plugged, bare = registry.backend("plugged"), registry.backend("bare")
    assert (plugged.name, plugged.trainable, plugged.needs_model) == ("plugged", False, False)
    assert (bare.trainable, bare.needs_model, bare.settings) == (True, True, None)  # a bare build function, as before
    cfg = load_config(overrides={"policy.kind": "plugged", "policy.plugged.level": 5})
    assert cfg.policy.section("plugged") == PluginSettings(level=5) and "bare" not in cfg.policy.model_dump()
    assert isinstance(registry.make_policy(cfg.policy), ProceduralPolicy)


def test_a_catalogue_name_is_resolved_through_the_model_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SPADE_MODEL_CACHE", str(tmp_path / "empty-cache"))
    cfg = load_config(overrides={"policy.kind": "transformers", "policy.model": "qwen2.5-coder-0.5b-instruct"})
    with pytest.raises(SpadeError, match="spade-engine models fetch qwen2.5-coder-0.5b-instruct"):
        registry.make_policy(cfg.policy, data_dir=tmp_path)
    # a spec that is not a catalogue name goes to transformers unchanged (tiny builds locally)
    tiny = registry.make_policy(load_config(overrides={"policy.kind": "transformers", "policy.model": "tiny:3"}).policy)
    assert tiny.describe()["model"] == "tiny:3" and tiny.trainable is True


def test_train_falls_back_to_the_recorded_model_of_any_trainable_backend(tmp_path: Path) -> None:
    from spade_engine.runs.train_cli import base_model_of

    log = SqliteEventLog(tmp_path / "events.sqlite", "run-t")
    try:
        for kind in ("transformers", "vllm"):  # no PolicyUpdated yet: the run's own model
            assert base_model_of(log, load_config(overrides={"policy.kind": kind, "policy.model": "m"}), None) == "m"
        with pytest.raises(ConfigError, match="no model to train"):
            base_model_of(log, load_config(overrides={"policy.model": "m"}), None)  # the simulation has no weights
    finally:
        log.close()


def test_training_the_simulation_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="needs a model to train"):
        require_trainable(load_config(overrides={"trainer.enabled": True}))


# -- the split policy config --------------------------------------------------------------------


def test_first_schema_policy_keys_are_upcast(tmp_path: Path) -> None:
    old = {"policy": {"kind": "procedural", "agent_skill": 0.3, "defect_rate": 0.0, "device": "cpu", "max_new_tokens": 8}}
    cfg = EngineConfig.model_validate(old)
    assert cfg.policy.procedural.agent_skill == 0.3 and cfg.policy.procedural.defect_rate == 0.0
    # a flat generation key set the one setting every role used: each role gets it
    assert cfg.policy.transformers.device == "cpu"
    assert [cfg.policy.generation.for_role(r).max_new_tokens for r in ("designer", "hinter", "agent")] == [8, 8, 8]
    f = tmp_path / "old.toml"
    f.write_text("[policy]\nadaptive = false\ntemperature = 0.5\n")
    from_file = load_config(f)
    assert from_file.policy.procedural.adaptive is False
    assert {from_file.policy.generation.for_role(r).temperature for r in ("designer", "hinter", "agent")} == {0.5}
    # dotted legacy flags override a dumped (nested) config
    assert cfg.with_overrides({"policy.agent_skill": 0.9}).policy.procedural.agent_skill == 0.9
    dumped = cfg.model_dump(mode="json")
    assert "agent_skill" not in dumped["policy"] and dumped["policy"]["procedural"]["agent_skill"] == 0.3
    assert EngineConfig.model_validate(dumped) == cfg


def test_reward_variants_live_in_one_table() -> None:
    (variant,) = [f for name, f in RewardConfig.model_fields.items() if name == "variant"]
    assert set(typing.get_args(variant.annotation)) == set(R.VARIANTS)
    with pytest.raises(ValueError, match="expected one of"):
        R.designer_reward(0.1, 0.5, variant="nope")


# -- log backends and the recorded config --------------------------------------------------------


def test_log_backends_registry_and_reopen(tmp_path: Path) -> None:
    assert backend_names() == ["sqlite", "kafka"]
    log = SqliteEventLog(tmp_path / "events.sqlite", "run-x")
    env = make_envelope(EnvironmentProposed(env_id="e", skill="s", difficulty=0.5, code="c", code_sha256="0", policy_version="v0"),
                        run_id="run-x", producer="t")
    log.append([env])
    again = reopen_log(log.backend, log.reopen_args())
    try:
        assert again.has_event(env.event_id) and not again.has_event("nope")
        assert [r.envelope.event_id for r in again.read()] == [env.event_id]
    finally:
        again.close()
        log.close()
    with pytest.raises(EventLogError, match="unknown backend 'nope'"):
        reopen_log("nope", {})
    with pytest.raises(ConfigError, match="unknown backend"):
        load_config(overrides={"log.backend": "nope"})


def test_log_backend_entries_say_what_callers_used_to_ask_by_name(tmp_path: Path, monkeypatch) -> None:
    import dataclasses

    from spade_engine.events.backends import BACKENDS, driver_backends, log_backend
    from spade_engine.events.store import resolve_run

    # which driver feeds a backend's projections
    assert (log_backend("sqlite").consumer_driver, log_backend("kafka").consumer_driver) == ("embedded", "faust")
    assert driver_backends("faust") == ["kafka"] and driver_backends("embedded") == ["sqlite", "kafka"]
    # scan_counts is part of the protocol: the SQLite log decoded every event before storing it
    log = SqliteEventLog(tmp_path / "events.sqlite", "run-s")
    try:
        env = make_envelope(EnvironmentProposed(env_id="e", skill="s", difficulty=0.5, code="c", code_sha256="0",
                                                policy_version="v0"), run_id="run-s", producer="t")
        log.append([env])
        assert log.scan_counts() == ({"EnvironmentProposed": 1}, None)
    finally:
        log.close()
    # a backend's own resolve hook is what resolve_run uses
    fake = dataclasses.replace(log_backend("sqlite"), name="fake", resolve=lambda run_id, **_: f"found-{run_id}")
    monkeypatch.setitem(BACKENDS, "fake", fake)
    assert resolve_run("abc", data_dir=tmp_path, backend="fake") == "found-abc"


def test_recorded_config_reader(tmp_path: Path) -> None:
    log = SqliteEventLog(tmp_path / "events.sqlite", "run-y")
    try:
        assert recorded_config(log) is None
        assert recorded_config_or_default(log) == EngineConfig()
        cfg = load_config(overrides={"seed": 11})
        started = RunStarted(config=cfg.model_dump(mode="json"), engine_version="t", seed=11, backend="sqlite", policy={})
        log.append([make_envelope(started, run_id="run-y", producer="t")])
        assert recorded_config(log) == cfg
    finally:
        log.close()
    bad = SqliteEventLog(tmp_path / "bad.sqlite", "run-z")
    try:
        broken = RunStarted(config={"loop": {"plays_per_env": -3}}, engine_version="t", seed=0, backend="sqlite", policy={})
        bad.append([make_envelope(broken, run_id="run-z", producer="t")])
        with pytest.raises(ConfigError, match="recorded config is not readable"):
            recorded_config(bad)
        with pytest.raises(ConfigError):
            recorded_config_or_default(bad)  # never silently replaced by the defaults
    finally:
        bad.close()


def test_regret_replay_reads_the_recorded_config_through_the_one_reader(tmp_path: Path) -> None:
    from spade_engine.engine.regret_replay import recompute_regrets, verify_regrets

    log = SqliteEventLog(tmp_path / "events.sqlite", "run-r")
    try:
        assert recompute_regrets(log) == []  # no RunStarted yet: the defaults, nothing to recompute
        broken = RunStarted(config={"loop": {"plays_per_env": -3}}, engine_version="t", seed=0, backend="sqlite", policy={})
        log.append([make_envelope(broken, run_id="run-r", producer="t")])
        with pytest.raises(ConfigError, match="recorded config is not readable"):
            recompute_regrets(log)  # never audited against the defaults instead
        with pytest.raises(ConfigError, match="recorded config is not readable"):
            verify_regrets(log)
    finally:
        log.close()


# -- the stage table ---------------------------------------------------------------------------


def test_stage_table_roles_and_inputs() -> None:
    assert list(STAGES) == ["validate", "repair", "hint", "play", "regret", "round", "replay"]
    assert role_inputs("validator") == ("EnvironmentProposed",)
    # the hint it writes starts its first plays; a round's estimate and a replay choice start the later ones
    assert role_inputs("rollout") == ("EnvironmentValidated", "RegretEstimated", "EnvironmentReplayed")
    assert role_inputs("regret") == ("RolloutCompleted",)
    payload = EnvironmentProposed(env_id="e1", skill="s", difficulty=0.5, code="c", code_sha256="0", policy_version="v0")
    assert output_event_id("run-a", payload) == output_event_id("run-a", payload)
    assert output_event_id("run-a", payload) != output_event_id("run-b", payload)


@pytest.mark.sandbox
def test_the_local_loop_gives_stage_outputs_deterministic_ids(tmp_path: Path) -> None:
    """Both drivers name a stage output the same way, so a re-run stage appends nothing new."""
    from spade_engine.engine.state import RunState
    from spade_engine.events.codec import decode_envelope
    from spade_engine.runs.engine import open_engine

    cfg = load_config(overrides={"seed": 3, "loop.max_envs": 2, "loop.plays_per_env": 1, "sandbox.workers": 1,
                                 "policy.defect_rate": 0.0})
    with open_engine(cfg, run_id="run-ids-000001", data_dir=tmp_path, create=True, projections=False) as opened:
        opened.engine.run()
        log = opened.engine.log
        recs = list(log.read())
        stage_outputs = [r for r in recs if r.envelope.type not in ("RunStarted", "RunStopped")]
        assert {r.envelope.type for r in stage_outputs} >= {"EnvironmentProposed", "EnvironmentValidated"}
        for r in stage_outputs:
            assert r.envelope.event_id == output_event_id(log.run_id, r.envelope.event())
        n = len(recs)
        # appending a stage output again (a re-run stage) is a no-op
        again = decode_envelope(stage_outputs[-1].raw)
        assert log.append([again]) == 0 and len(list(log.read())) == n
        assert RunState.from_log(log).stats()["proposals"] == 2
