"""Issue 31, class 4: one large event stops a run for good. Events are small by construction (long
observations, actions and token ids as content-addressed blobs), every backend and the import
take far more than the engine writes, and the Kafka topics are configured for it.

The unit tests here need nothing; the Kafka ones start a real broker (marker ``kafka``)."""

from __future__ import annotations

import json
import time
import uuid

import msgspec
import pytest
from typer.testing import CliRunner

from spade_engine.blobs import BlobStore
from spade_engine.cli import app
from spade_engine.engine.offload import fit_event
from spade_engine.events import make_envelope
from spade_engine.events.catalogue import EnvironmentProposed, Generation, RolloutCompleted, Turn
from spade_engine.events.codec import encode_envelope
from spade_engine.events.sizes import ENGINE_EVENT_BYTES, INLINE_TEXT_CHARS, MAX_EVENT_BYTES, payload_bytes
from spade_engine.events.sqlite.log import SqliteEventLog
from spade_engine.events.store import new_run_id
from spade_engine.trainer.batches import BatchAssembler


def big_play(turns: int = 25, obs_chars: int = 44_000, tokens: int = 6_000, play: str = "e/p0", action_chars: int = 10_000) -> RolloutCompleted:
    """The issue's play: 44 kB observations per turn, and the token ids a real model records."""
    ts = []
    for i in range(turns):
        gen = Generation(prompt_token_ids=list(range(tokens)), completion_token_ids=list(range(300)),
                         logprobs=[-0.5] * 300, finish_reason="stop")
        ts.append(Turn(observation=f"turn {i}: " + "o" * obs_chars, action="\\boxed{" + "a" * action_chars + "}", reward=0.0,
                       generation=gen))
    return RolloutCompleted(env_id="e", play_id=play, hinted=False, seed=1, policy_version="v", episode_reward=1.0,
                            turns=ts, terminated=True, end_reason="terminated")


def test_a_large_play_fits_and_nothing_is_lost(tmp_path):
    blobs = BlobStore(tmp_path / "blobs")
    play = big_play()
    assert payload_bytes(play) > 2 * 1024 * 1024  # what the engine used to append (over Kafka's default 1 MiB)
    small = fit_event(play, blobs)
    assert payload_bytes(small) <= ENGINE_EVENT_BYTES
    assert (small.episode_reward, small.terminated, small.end_reason, len(small.turns)) == (1.0, True, "terminated", 25)
    for before, after in zip(play.turns, small.turns):
        assert after.observation.startswith(before.observation[:1000]) and after.observation.endswith("characters]")
        assert len(after.observation) <= INLINE_TEXT_CHARS
        assert blobs.get_bytes(after.observation_ref).decode() == before.observation
        assert blobs.get_bytes(after.action_ref).decode() == before.action
        assert after.generation.ref is not None and after.generation.completion_token_ids == []
        assert after.generation.finish_reason == "stop"
    # the trainer reads the token ids back from the blob
    again = BatchAssembler(blobs=blobs)._generation(small.turns[3].generation)
    assert again.prompt_token_ids == play.turns[3].generation.prompt_token_ids
    assert again.logprobs == play.turns[3].generation.logprobs
    # small plays are untouched, and the same play gives the same event (content-addressed)
    tiny = big_play(turns=2, obs_chars=100, tokens=10, action_chars=5)
    assert fit_event(tiny, blobs) is tiny
    assert msgspec.json.encode(fit_event(play, blobs)) == msgspec.json.encode(small)


def test_no_play_can_be_too_large_to_record(tmp_path):
    """Thousands of long turns: previews shrink, then only the turns that fit are kept and the
    play says so; its reward and end reason stay."""
    blobs = BlobStore(tmp_path / "blobs")
    many = big_play(turns=600, obs_chars=5_000, tokens=10)
    fitted = fit_event(many, blobs)
    assert payload_bytes(fitted) <= ENGINE_EVENT_BYTES and len(fitted.turns) == 600 and fitted.error is None
    absurd = big_play(turns=20_000, obs_chars=10, tokens=2)
    cut = fit_event(absurd, blobs)
    assert payload_bytes(cut) <= ENGINE_EVENT_BYTES
    assert 0 < len(cut.turns) < 20_000 and "too many to record" in cut.error
    assert (cut.episode_reward, cut.end_reason) == (1.0, "terminated")


def test_without_a_blob_store_texts_are_cut_rather_than_the_run_stopped():
    play = big_play(turns=40)
    cut = fit_event(play, None)
    assert payload_bytes(cut) <= ENGINE_EVENT_BYTES and cut.turns[0].observation_ref is None
    assert cut.turns[0].observation.endswith("characters]") and cut.episode_reward == 1.0


def test_a_designer_generation_moves_to_a_blob(tmp_path):
    blobs = BlobStore(tmp_path / "blobs")
    prop = EnvironmentProposed(env_id="e", skill="s", difficulty=0.5, code="x", code_sha256="", policy_version="v",
                               prompt="p" * 50_000, generation=Generation(prompt_token_ids=list(range(90_000)),
                                                                          completion_token_ids=list(range(16_000)), logprobs=[-1.0] * 16_000))
    small = fit_event(prop, blobs)
    assert payload_bytes(small) <= ENGINE_EVENT_BYTES and small.generation.ref is not None
    assert small.prompt == prop.prompt  # the prompt fits once the tokens moved
    assert json.loads(blobs.get_bytes(small.generation.ref))["completion_token_ids"] == list(range(16_000))


def _cli(*args: str):
    return CliRunner().invoke(app, list(args), env={}, catch_exceptions=False)


def test_an_old_run_with_a_15_mb_play_exports_and_imports_back_by_default(tmp_path):
    """Older engines wrote plays of ~15 MB (this one is as the issue's run wrote it): export and
    import must round-trip any run the engine wrote, with the default --max-event-bytes."""
    root, other = tmp_path / "data", tmp_path / "other"
    run_id = new_run_id()
    (root / "runs" / run_id).mkdir(parents=True)
    log = SqliteEventLog(root / "runs" / run_id / "events.sqlite", run_id)
    play = big_play(turns=70, obs_chars=90_000, tokens=20_000)
    env = make_envelope(play, run_id=run_id, producer="old-engine", event_id=str(uuid.uuid4()))
    raw = encode_envelope(env)
    assert 14_000_000 < len(raw) < MAX_EVENT_BYTES
    log.append_raw([(env, raw)])
    log.close()
    out = tmp_path / "run.jsonl"
    res = _cli("events", "export", run_id, "-d", str(root), "-o", str(out))
    assert res.exit_code == 0, res.output
    res = _cli("events", "import", str(out), "-d", str(other))
    assert res.exit_code == 0, res.output
    back = SqliteEventLog(other / "runs" / run_id / "events.sqlite", run_id, create=False)
    try:
        assert [rec.raw for rec in back.read()] == [raw]  # byte for byte
    finally:
        back.close()


# ----------------------------------------------------------------------------------------------
# Kafka


@pytest.mark.kafka
def test_the_issues_play_is_recorded_on_kafka_and_an_old_topic_is_raised(kafka_bootstrap, tmp_path):
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    from spade_engine.events.kafka.log import KafkaEventLog

    blobs = BlobStore(tmp_path / "blobs")
    run_id = new_run_id()
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:  # a run's topic as an older engine made it: the broker's default record size (~1 MiB)
        admin.create_topics([NewTopic(f"spade.{run_id}", 1, 1, topic_configs={"retention.ms": "-1"})])
        log = KafkaEventLog(kafka_bootstrap, run_id, create=True)
        try:
            # the broker applies an altered topic config asynchronously: poll it (bounded)
            deadline, value = time.monotonic() + 20, None
            while value != str(MAX_EVENT_BYTES) and time.monotonic() < deadline:
                cfg = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, log.topic)])
                value = cfg["topic"].get(log.topic, {}).get("max.message.bytes", {}).get("value")
                if value != str(MAX_EVENT_BYTES):
                    time.sleep(0.5)
            assert value == str(MAX_EVENT_BYTES)
            play = big_play()
            small = fit_event(play, blobs)
            env = make_envelope(small, run_id=run_id, producer="t", event_id=str(uuid.uuid4()))
            assert log.append([env]) == 1
            # an imported event of an older engine (15 MB) is stored as well
            old = make_envelope(big_play(turns=70, obs_chars=90_000, tokens=20_000, play="e/p1"), run_id=run_id,
                                producer="old", event_id=str(uuid.uuid4()))
            raw = encode_envelope(old)
            assert log.append_raw([(old, raw)]) == 1
            got = {rec.envelope.event_id: rec for rec in log.read()}
            assert got[env.event_id].envelope.event() == small
            assert got[old.event_id].raw == raw
        finally:
            log.close()
    finally:
        admin.close()


BIG_OBSERVATIONS = '''
import random
class WideEnv:
    """Benign: every observation is 44 kB (a long table), the episode lasts 25 turns."""
    def reset(self, seed=None):
        self.rng = random.Random(seed)
        self.t = 0
        self.n = self.rng.randint(10**6, 10**9)
        return self.table(), {}
    def table(self):
        rows = ["row %05d | %s" % (i, "".join(self.rng.choice("abcdef") for _ in range(30))) for i in range(1100)]
        return "Find the number %d.\\n" % self.n + "\\n".join(rows)
    def step(self, action):
        self.t += 1
        if action.strip() == "\\\\boxed{%d}" % self.n:
            return "yes", 1.0, True, False, {}
        return self.table(), 0.0, False, self.t >= 25, {}
    def solution(self):
        return ["\\\\boxed{%d}" % self.n]
'''


@pytest.mark.kafka
@pytest.mark.sandbox
def test_a_run_with_44kb_observations_goes_on_with_kafka(kafka_bootstrap, tmp_path):
    """The issue's run, through the engine's own loop on Kafka: every play recorded, each event
    under the engine's limit, the observations whole in their blobs; a second start (resume) of
    the same run goes on as well."""
    import hashlib

    from sandbox_support import fast_config

    from spade_engine.config import load_config
    from spade_engine.engine.corpus import Corpus
    from spade_engine.engine.loop import Engine
    from spade_engine.engine.pipeline import env_id_for
    from spade_engine.engine.stages import StageContext
    from spade_engine.events.kafka.log import KafkaEventLog
    from spade_engine.policy.registry import make_policy
    from spade_engine.sandbox import SandboxCrash, SandboxError, SandboxPool, StepTimeout
    from spade_engine.sandbox.validator import Validator

    run_id = new_run_id()
    blobs = BlobStore(tmp_path / "blobs")
    with SandboxPool(fast_config(uid_base=2_000_000_240)) as pool:
        for attempt in range(2):  # start, then resume
            log = KafkaEventLog(kafka_bootstrap, run_id, create=True)
            try:
                cfg = load_config(overrides={"seed": 3, "loop.max_envs": 1 + attempt, "loop.plays_per_env": 2, "loop.max_repairs": 0})
                cfg = cfg.model_copy(update={"sandbox": pool.config, "log": cfg.log.model_copy(update={"backend": "kafka"})})
                policy = make_policy(cfg.policy)
                ctx = StageContext(run_id=run_id, cfg=cfg, policy=policy, corpus=Corpus.from_paths([]),
                                   validator=Validator(pool, turn_limit=cfg.loop.turn_limit), pool=pool,
                                   sandbox_layers=dict(pool.layers), step_errors=((StepTimeout,), (SandboxCrash, SandboxError)))
                engine = Engine(log=log, cfg=cfg, ctx=ctx, blobs=blobs)

                def propose(eng, index):
                    return EnvironmentProposed(
                        env_id=env_id_for(eng.run_id, index), skill="arithmetic", difficulty=0.5, code=BIG_OBSERVATIONS,
                        code_sha256=hashlib.sha256(BIG_OBSERVATIONS.encode()).hexdigest(), policy_version=policy.version,
                    )

                engine.proposer = propose
                assert engine.run() == "max_envs"
            finally:
                log.close()
    log = KafkaEventLog(kafka_bootstrap, run_id, create=False)
    try:
        records = list(log.read())
    finally:
        log.close()
    assert max(len(r.raw) for r in records) < ENGINE_EVENT_BYTES + 4096
    plays = [r.envelope.event() for r in records if r.envelope.type == "RolloutCompleted"]
    assert len(plays) == 8  # 2 environments x (2 plain + 2 hinted)
    long_turns = [t for p in plays for t in p.turns if t.observation_ref is not None]
    assert long_turns and all(len(blobs.get_bytes(t.observation_ref)) > 40_000 for t in long_turns)
    whole = max(sum(len(blobs.get_bytes(t.observation_ref)) for t in p.turns if t.observation_ref) for p in plays)
    assert whole > 1024 * 1024  # inline, that play alone was over the broker's default record size
    stops = [r.envelope.payload["reason"] for r in records if r.envelope.type == "RunStopped"]
    assert stops == ["max_envs", "max_envs"]
