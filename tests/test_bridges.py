"""Bridges to researchers' tools: `archive export` (Parquet read back with pyarrow, JSON Lines),
an archived environment as a sandboxed Gymnasium environment (`gym.make("spade/Archived-v0")`,
`spade_engine.make`), and TensorBoard event files from the log read back with TensorBoard's own
event reader."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from archive_support import chain, mixed_run
from factories import run_events
from sandbox_support import fast_config, wait_no_sandbox_processes
from spade_engine.cli import app
from spade_engine.events import make_envelope
from spade_engine.events.catalogue import EvaluationCompleted, PolicyUpdated
from spade_engine.events.store import open_event_log

RUN = "run-20260601-000000-bridge"
ENVS = Path(__file__).parent / "envs"


def _cli(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "data"
    log = open_event_log(RUN, data_dir=root, create=True)
    log.append(mixed_run(RUN, 10))
    log.close()
    assert _cli("archive", "list", "--refresh", "-d", str(root)).exit_code == 0
    return root


# -- archive export ---------------------------------------------------------------------------------


def test_parquet_export_reads_back_with_pyarrow(root, tmp_path):
    import pyarrow.parquet as pq

    from spade_engine.archive.queries import list_environments, plays_of
    from spade_engine.archive.replay import open_live_projections
    from spade_engine.config import load_config
    from spade_engine.events.store import DataDir

    res = _cli("archive", "export", "-t", "all", "-o", str(tmp_path / "out"), "-d", str(root))
    assert res.exit_code == 0, res.output
    envs = pq.read_table(tmp_path / "out" / "environments.parquet").to_pylist()
    plays = pq.read_table(tmp_path / "out" / "plays.parquet").to_pylist()
    turns = pq.read_table(tmp_path / "out" / "turns.parquet").to_pylist()
    with open_live_projections(DataDir(root).run_dir(RUN), load_config()) as projs:
        expected = list_environments(projs.archive.engine, limit=None)
        expected_plays = [p for e in expected for p in plays_of(projs.archive.engine, e["env_id"])]
    assert [e["env_id"] for e in envs] == [e["env_id"] for e in expected] and len(envs) == 10
    for got, want in zip(envs, expected):
        assert {k: got[k] for k in ("skill", "verdict", "code", "parents", "win_rate_plain", "regret", "novelty")} == {
            k: want[k] for k in ("skill", "verdict", "code", "parents", "win_rate_plain", "regret", "novelty")}
    assert sorted(p["event_id"] for p in plays) == sorted(p["event_id"] for p in expected_plays)
    assert {p["skill"] for p in plays} == {"math", "logic", "text"}
    # turns: one per play here (the factories' plays are one turn long), with tokens and log-probs
    assert len(turns) == len(plays) == 8 * 8
    t = turns[0]
    assert t["observation"] == "count to 3" and t["turn"] == 0
    assert t["completion_token_ids"] == [4, 5] and t["logprobs"] == [-0.5, -1.25]
    assert {x["event_id"] for x in turns} == {p["event_id"] for p in plays}
    assert "environments: 10 rows" in res.stderr and "turns: 64 rows" in res.stderr


def test_jsonl_export_has_the_same_rows_and_goes_to_stdout(root, tmp_path):
    import pyarrow.parquet as pq

    res = _cli("archive", "export", "-t", "plays", "-f", "jsonl", "-d", str(root))
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert _cli("archive", "export", "-t", "plays", "-o", str(tmp_path / "p.parquet"), "-d", str(root)).exit_code == 0
    parquet = pq.read_table(tmp_path / "p.parquet").to_pylist()
    for row in parquet:  # the same rows; times are Parquet timestamps there, the log's ISO text here
        row["occurred_at"] = row["occurred_at"].strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert rows == parquet


def test_parquet_times_are_timestamps_and_plays_say_round_and_end_reason(root, tmp_path):
    """What a notebook reads: times as UTC timestamps (once text), each play's round and why it
    ended, and the docs' example (docs/guides/replay-and-retrain.md: pyarrow, then pandas)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from spade_engine.events.catalogue import END_REASONS

    res = _cli("archive", "export", "-t", "all", "-o", str(tmp_path / "out"), "-d", str(root))
    assert res.exit_code == 0, res.output
    plays = pq.read_table(tmp_path / "out" / "plays.parquet")
    envs = pq.read_table(tmp_path / "out" / "environments.parquet")
    assert plays.schema.field("occurred_at").type == pa.timestamp("us", tz="UTC")
    assert envs.schema.field("proposed_at").type == pa.timestamp("us", tz="UTC")
    rows = plays.to_pylist()
    assert all(r["occurred_at"] is not None and r["occurred_at"].tzinfo is not None for r in rows)
    assert {r["round"] for r in rows} == {0} and all(r["end_reason"] in END_REASONS for r in rows)
    # each play's end_reason is the one its RolloutCompleted records
    log = open_event_log(RUN, data_dir=root)
    try:
        recorded = {rec.envelope.event_id: rec.envelope.event().end_reason for rec in log.read()
                    if rec.envelope.type == "RolloutCompleted"}
    finally:
        log.close()
    assert {r["event_id"]: r["end_reason"] for r in rows} == recorded and set(recorded.values()) == {"terminated"}
    # the docs' example (docs/guides/replay-and-retrain.md), as written there
    import pandas as pd

    turns = pq.read_table(tmp_path / "out" / "turns.parquet").to_pandas()
    frame = pd.read_parquet(tmp_path / "out" / "plays.parquet")
    assert len(turns) == len(frame) == 64
    assert str(frame["occurred_at"].dtype) == "datetime64[us, UTC]"
    assert frame.groupby("round")["episode_reward"].mean().index.tolist() == [0]


def test_an_empty_run_exports_the_same_schema(tmp_path):
    import pyarrow.parquet as pq

    from spade_engine.archive.export import schema

    root = tmp_path / "data"
    log = open_event_log(RUN, data_dir=root, create=True)
    log.append(run_events(RUN, 0))
    log.close()
    res = _cli("archive", "export", "--refresh", "-t", "turns", "-o", str(tmp_path / "t.parquet"), "-d", str(root))
    assert res.exit_code == 0, res.output
    table = pq.read_table(tmp_path / "t.parquet")
    assert table.num_rows == 0 and table.schema.equals(schema("turns"))


@pytest.mark.parametrize("args, needle", [
    (["-t", "nope", "-o", "x"], "unknown table 'nope'"),
    (["-f", "csv", "-o", "x"], "unknown format 'csv'"),
    (["-t", "plays"], "--out is needed: Parquet is binary"),
    (["-t", "all", "-f", "jsonl"], "--out is needed: a directory for --table all"),
])
def test_export_bad_input_is_one_line(root, args, needle):
    res = _cli("archive", "export", *args, "-d", str(root))
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.stderr.splitlines() == [res.stderr.splitlines()[0]] and needle in res.stderr


# -- Gymnasium ------------------------------------------------------------------------------------


@pytest.fixture
def gym_root(tmp_path):
    """A run holding two accepted real environments and a rejected one."""
    root = tmp_path / "data"
    log = open_event_log(RUN, data_dir=root, create=True)
    start, stop = run_events(RUN, 0)
    log.append([
        start,
        *chain(RUN, "env-guess", vec=None, code=(ENVS / "guess_number_env.py").read_text()),
        *chain(RUN, "env-arith", vec=None, code=(ENVS / "arithmetic_env.py").read_text()),
        *_rejected(chain(RUN, "env-broken", vec=None, code="class BrokenEnv:\n    pass\n", accepted=False)),
        stop,
    ])
    log.close()
    return root


def _rejected(events):
    return [msgspec.structs.replace(e, payload={**e.payload, "valid": False, "error_kind": "contract",
                                                "failed_check": "env_class"})
            if e.type == "EnvironmentValidated" else e for e in events]


SANDBOX = fast_config(workers=1, uid_base=2_000_000_160)


@pytest.mark.sandbox
def test_gym_make_plays_an_archived_environment_to_the_end(gym_root):
    import gymnasium as gym

    import spade_engine.gym  # noqa: F401  (registers spade/Archived-v0)

    env = gym.make("spade/Archived-v0", run=RUN[:12], env_id="env-gu", data_dir=str(gym_root), sandbox=SANDBOX)
    try:
        obs, info = env.reset(seed=7)
        assert "I picked a number from 1 to 50" in obs
        assert info["env_id"] == "env-guess" and info["run_id"] == RUN
        from spade_engine.config import EngineConfig

        assert info["turn_limit"] == EngineConfig().loop.turn_limit  # the run recorded the default config
        assert env.observation_space.contains(obs)
        low, high, turns = 1, 50, 0
        while True:  # binary search to the end of the episode
            guess = (low + high) // 2
            obs, reward, terminated, truncated, info = env.step(f"\\boxed{{{guess}}}")
            turns += 1
            if terminated or truncated:
                break
            low, high = (guess + 1, high) if obs == "Higher." else (low, guess - 1)
        assert terminated and not truncated and reward == 1.0 and obs == "Correct!" and turns <= 6
        # info says why the episode ended, in RolloutCompleted's words, and which turn it is
        assert info["end_reason"] == "terminated" and info["turn"] == turns and info["env_id"] == "env-guess"
        # the next episode, lost on purpose: the environment's own limit ends it
        env.reset(seed=8)
        results = [env.step("\\boxed{0}") for _ in range(6)]
        assert results[-1][3] is True and not any(r[2] for r in results)
        assert results[-1][4]["end_reason"] == "truncated" and [r[4]["turn"] for r in results] == [1, 2, 3, 4, 5, 6]
        assert all("end_reason" not in r[4] for r in results[:-1]), "only the last step of an episode has one"
    finally:
        env.close()
    assert wait_no_sandbox_processes(SANDBOX) == []


@pytest.mark.sandbox
def test_spade_engine_make_truncates_at_the_turn_limit_and_refuses_rejected_environments(gym_root):
    import spade_engine
    from spade_engine.gym import ArchivedEnvError

    env = spade_engine.make(RUN, "env-arith", data_dir=gym_root, sandbox=SANDBOX)
    try:
        obs, _ = env.reset(seed=3)
        a, b, c = (int(x) for x in obs.replace("*", "+").split("Compute ")[1].split(".")[0].split(" + "))
        obs, reward, terminated, truncated, _ = env.step(f"\\boxed{{{a + b * c}}}")
        assert (obs, reward, terminated, truncated) == ("Correct.", 1.0, True, False)
    finally:
        env.close()
    env = spade_engine.make(RUN, "env-guess", data_dir=gym_root, sandbox=SANDBOX, turn_limit=2)
    try:
        env.reset(seed=1)
        assert env.step("\\boxed{0}")[3] is False
        last = env.step("\\boxed{0}")
        assert last[3] is True  # truncated at turn_limit, before the env's own 6
        assert last[4]["end_reason"] == "turn_limit" and last[4]["turn"] == 2
    finally:
        env.close()
    with pytest.raises(ArchivedEnvError, match="env-broken was rejected by the validator .contract at env_class."):
        spade_engine.make(RUN, "env-broken", data_dir=gym_root, sandbox=SANDBOX)
    with pytest.raises(ArchivedEnvError, match="ambiguous"):
        spade_engine.make(RUN, "env-", data_dir=gym_root, sandbox=SANDBOX)
    with pytest.raises(ArchivedEnvError, match="no environment 'nope'"):
        spade_engine.make(RUN, "nope", data_dir=gym_root, sandbox=SANDBOX)
    assert wait_no_sandbox_processes(SANDBOX) == []


# -- TensorBoard ----------------------------------------------------------------------------------


def test_tensorboard_event_files_read_back(root, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = open_event_log(RUN, data_dir=root)
    extra = [
        make_envelope(PolicyUpdated(version=f"v{i}", parent_version=f"v{i - 1}", checkpoint=None, step=i,
                                    metrics={"loss": 0.5 / i, "kl": 0.01 * i}), run_id=RUN, producer="test")
        for i in (1, 2, 3)
    ] + [
        make_envelope(EvaluationCompleted(
            evaluation_id="e1", suite="reasoning-gym", task="gcd", items=4, seed=0, k=1, temperature=0.0, greedy=True,
            correct=c, accuracy=c / 4, ci_low=0.0, ci_high=1.0, policy_version=v, checkpoint_sha256=None, model="tiny", item_seeds=[1, 2, 3, 4],
            mean_score=c / 4), run_id=RUN, producer="test")
        for v, c in (("v0", 1), ("v3", 3))
    ]
    log.append(extra)
    regrets = [(rec.envelope.key, rec.envelope.payload) for rec in log.read() if rec.envelope.type == "RegretEstimated"]
    order = [rec.envelope.key for rec in log.read() if rec.envelope.type == "EnvironmentProposed"]
    log.close()
    res = _cli("metrics", "tensorboard", "-d", str(root), "--logdir", str(tmp_path / "tb"))
    assert res.exit_code == 0, res.output
    acc = EventAccumulator(str(tmp_path / "tb" / RUN))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"env/valid", "env/novelty", "env/win_rate_plain", "env/regret", "train/loss", "train/kl",
            "eval/reasoning-gym/gcd/accuracy", "skill/math/regret"} <= tags

    def series(tag):
        return [(e.step, round(e.value, 6)) for e in acc.Scalars(tag)]

    assert series("env/regret") == [(order.index(k), round(p["regret"], 6)) for k, p in regrets]
    assert series("env/win_rate_plain") == [(order.index(k), round(p["win_rate_plain"], 6)) for k, p in regrets]
    assert series("env/valid") == [(i, 1.0) for i in range(10)]  # mixed_run: every one valid (some duplicates)
    assert series("train/loss") == [(1, 0.5), (2, 0.25), (3, round(0.5 / 3, 6))]
    assert series("eval/reasoning-gym/gcd/accuracy") == [(0, 0.25), (3, 0.75)]
    # a second export replaces the first instead of doubling every point
    assert _cli("metrics", "tensorboard", "-d", str(root), "--logdir", str(tmp_path / "tb")).exit_code == 0
    again = EventAccumulator(str(tmp_path / "tb" / RUN))
    again.Reload()
    assert len(again.Scalars("env/regret")) == len(regrets)


def test_tensorboard_steps_count_environments_not_proposals(tmp_path):
    """A repair is recorded at the step of the environment it repairs and seeds are not on the
    axis, so N environments (as `status` counts them) span steps 0..N-1 (once 0-528 for 425)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def proposal(events, **fields):
        return [msgspec.structs.replace(e, payload={**e.payload, **fields}) if e.type == "EnvironmentProposed" else e
                for e in events]

    root = tmp_path / "data"
    start, stop = run_events(RUN, 0)
    body = [
        *proposal(chain(RUN, "seed-1", vec=None), designer="seed:coin_jars"),
        *_rejected(chain(RUN, "env-a", vec=None, accepted=False)),
        *_rejected(proposal(chain(RUN, "env-a-r1", vec=None, accepted=False), attempt=1, repair_of="env-a")),
        *proposal(chain(RUN, "env-a-r2", vec=None), attempt=2, repair_of="env-a-r1"),
        *chain(RUN, "env-b", vec=None),
        *proposal(chain(RUN, "env-c", vec=None), attempt=0),
    ]
    log = open_event_log(RUN, data_dir=root, create=True)
    log.append([start, *body, stop])
    log.close()
    res = _cli("metrics", "tensorboard", "-d", str(root), "--logdir", str(tmp_path / "tb"))
    assert res.exit_code == 0, res.output
    acc = EventAccumulator(str(tmp_path / "tb" / RUN))
    acc.Reload()
    valid = [(e.step, e.value) for e in acc.Scalars("env/valid")]
    assert valid == [(0, 0.0), (0, 0.0), (0, 1.0), (1, 1.0), (2, 1.0)], "env-a and its two repairs at step 0"
    assert sorted({e.step for e in acc.Scalars("env/regret")}) == [0, 1, 2]
    status = json.loads(_cli("status", "-d", str(root), "--json").stdout)
    assert status["roots"] == 3 and max(step for step, _ in valid) == status["roots"] - 1
