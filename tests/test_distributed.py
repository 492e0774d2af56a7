"""Scale-out on the real Kafka broker: role workers as separate processes, two of them SIGKILLed.

One designer, two validators, two rollout workers and one regret worker (procedural policy) run
a run of 10 environments on a 4-partition topic. One validator and one rollout worker are killed
with SIGKILL once some of their outputs are in the log; the group gives their partitions to the
survivors. The run must complete, every environment must be in the archive (rebuilt from the
Kafka log) exactly once with exactly its 2k plays, and every recorded regret must equal what the
single-process code path computes from the recorded plays.

The validators run with ``--no-novelty`` (no embedding model load): this test is about
partition assignment and fail-over; novelty is covered by the engine's own tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from spade_engine.archive.queries import dump_archive, list_environments, plays_of
from spade_engine.archive.replay import open_live_projections, open_projections, replay_run
from spade_engine.engine.regret_replay import recompute_regrets, verify_regrets
from spade_engine.engine.state import RunState
from spade_engine.events.errors import RunNotFound
from spade_engine.events.kafka.log import KafkaEventLog
from spade_engine.events.store import DataDir, new_run_id

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
N_ENVS, K = 10, 2


def _spawn(args: list[str], log_path: Path, bootstrap: str, data: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, "-m", "spade_engine.cli", "worker", *args, "--backend", "kafka", "--bootstrap", bootstrap, "-d", str(data)]
    return subprocess.Popen(cmd, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))


def _open(bootstrap: str, run_id: str, timeout: float = 60) -> KafkaEventLog:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return KafkaEventLog(bootstrap, run_id, create=False)
        except RunNotFound:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _by_producer_pid(state_log: KafkaEventLog) -> dict[int, Counter]:
    out: dict[int, Counter] = defaultdict(Counter)
    for rec in state_log.read():
        producer = rec.envelope.producer
        if ":" in producer:
            out[int(producer.rsplit(":", 1)[1])][rec.envelope.type] += 1
    return out


def test_scale_out_with_sigkilled_workers(kafka_bootstrap: str, tmp_path: Path) -> None:
    run_id = new_run_id()
    data = tmp_path / "data"
    logs = tmp_path / "logs"
    logs.mkdir()
    procs: dict[str, subprocess.Popen] = {}
    common = ["--run", run_id, "--session-timeout", "3"]
    killed: dict[str, int] = {}
    try:
        procs["designer"] = _spawn(
            ["designer", "--run", run_id, "--new", "--max-envs", str(N_ENVS), "--plays", str(K), "--seed", "7",
             "--partitions", "4", "--ahead", "4"],
            logs / "designer.log", kafka_bootstrap, data,
        )
        log = _open(kafka_bootstrap, run_id)
        for name in ("validator-a", "validator-b"):
            procs[name] = _spawn(["validator", *common, "--no-novelty", "--sandbox-workers", "1"], logs / f"{name}.log", kafka_bootstrap, data)
        for name in ("rollout-a", "rollout-b"):
            procs[name] = _spawn(["rollout", *common, "--sandbox-workers", "1"], logs / f"{name}.log", kafka_bootstrap, data)
        procs["regret"] = _spawn(["regret", *common], logs / "regret.log", kafka_bootstrap, data)

        targets = {"validator": "EnvironmentValidated", "rollout": "RolloutCompleted"}
        deadline = time.monotonic() + 240
        finished = False
        while time.monotonic() < deadline:
            for role, etype in targets.items():
                if role in killed:
                    continue
                counts = _by_producer_pid(log)
                for name in (f"{role}-a", f"{role}-b"):
                    p = procs[name]
                    if counts.get(p.pid, Counter())[etype] >= 1:
                        os.kill(p.pid, signal.SIGKILL)  # mid-run: its partitions must move
                        p.wait(10)
                        killed[role] = p.pid
                        break
            state = RunState.from_log(log)
            if state.finished:
                finished = True
                break
            for name, p in procs.items():
                if p.poll() is not None and p.pid not in killed.values() and name != "designer":
                    pytest.fail(f"{name} exited with {p.returncode}:\n{(logs / f'{name}.log').read_text()[-3000:]}")
            time.sleep(1.0)
        tails = "\n".join(f"--- {f.name}\n{f.read_text()[-1500:]}" for f in sorted(logs.iterdir()))
        assert finished, f"the run did not complete in time\n{tails}"
        assert set(killed) == {"validator", "rollout"}, f"workers were not killed mid-run: {killed}\n{tails}"
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
            p.wait(30)

    # the run: every environment finished, each stage output recorded once per environment
    state = RunState.from_log(log)
    roots = state.roots()
    assert len(roots) == N_ENVS
    accepted = [s for s in state.proposed() if s.accepted]
    assert accepted, "no environment was accepted"
    per_env: dict[tuple[str, str], set[str]] = defaultdict(set)
    plays_per_slot: dict[tuple[str, bool, int], set[str]] = defaultdict(set)
    producers: dict[str, set[str]] = defaultdict(set)
    for rec in log.read():
        env = rec.envelope
        ev = env.event()
        if hasattr(ev, "env_id"):
            per_env[(env.type, ev.env_id)].add(env.event_id)
            producers[env.type].add(env.producer)
        if env.type == "RolloutCompleted":
            plays_per_slot[(ev.env_id, ev.hinted, ev.index)].add(env.event_id)
    for st in state.proposed():
        assert len(per_env[("EnvironmentProposed", st.env_id)]) == 1
        assert len(per_env[("EnvironmentValidated", st.env_id)]) == 1, st.env_id
    for st in accepted:
        assert len(per_env[("HintWritten", st.env_id)]) == 1, st.env_id
        assert len(per_env[("RolloutCompleted", st.env_id)]) == 2 * K, st.env_id
        assert len(per_env[("RegretEstimated", st.env_id)]) == 1, st.env_id
    assert all(len(ids) == 1 for ids in plays_per_slot.values())
    # both replicas of each role did work, including the killed ones before they died
    assert len(producers["EnvironmentValidated"]) == 2 and len(producers["RolloutCompleted"]) == 2
    survivors_after = [
        rec.envelope for rec in log.read()
        if rec.envelope.type == "EnvironmentValidated" and not rec.envelope.producer.endswith(f":{killed['validator']}")
    ]
    assert survivors_after, "the surviving validator did no work"

    # the archive, rebuilt from the Kafka log, holds each environment exactly once; the two-process
    # replay (a child reopens the Kafka log) rebuilds the same archive as the one-process one
    par = replay_run(log, tmp_path / "replay", parallel=True)
    seq = replay_run(log, tmp_path / "replay-seq", parallel=False)
    assert (par.events, par.cursor) == (seq.events, seq.cursor) and par.events == sum(log.end_cursor().values())
    with open_projections(tmp_path / "replay-seq") as one:
        seq_archive, seq_memory = dump_archive(one.archive.engine), len(one.memory)
    projs = open_projections(tmp_path / "replay")
    assert dump_archive(projs.archive.engine) == seq_archive and len(projs.memory) == seq_memory
    try:
        rows = list_environments(projs.archive.engine, limit=None)
        ids = [r["env_id"] for r in rows]
        assert sorted(ids) == sorted(st.env_id for st in state.proposed())
        assert len(ids) == len(set(ids))
        recomputed = {again.env_id: again for _, again in recompute_regrets(log)}
        by_id = {r["env_id"]: r for r in rows}
        for st in accepted:
            row = by_id[st.env_id]
            assert (row["plays_plain"], row["plays_hinted"]) == (K, K)
            assert len(plays_of(projs.archive.engine, st.env_id)) == 2 * K
            again = recomputed[st.env_id]
            assert row["regret"] == pytest.approx(again.regret, abs=1e-12)
            assert row["win_rate_plain"] == pytest.approx(again.win_rate_plain, abs=1e-12)
            assert row["designer_reward"] == pytest.approx(again.designer_reward, abs=1e-12)
    finally:
        projs.close()
    # `worker consumers` (the faust-streaming driver on Kafka) builds the run's live projections
    # from the same log: its archive equals the replay's
    consumers = _spawn(["consumers", "--run", run_id, "--until-idle", "8"], logs / "consumers.log", kafka_bootstrap, data)
    try:
        assert consumers.wait(240) == 0, (logs / "consumers.log").read_text()[-3000:]
    finally:
        if consumers.poll() is None:
            consumers.kill()
            consumers.wait(30)
    with open_live_projections(DataDir(data).run_dir(run_id)) as live:
        assert dump_archive(live.archive.engine) == seq_archive
        assert {p.name: p.position() for p in live.all} == {p: par.cursor for p in ("archive", "memory", "difficulty")}
    # the single-process regret code path gives exactly the recorded numbers
    assert verify_regrets(log) == []
    log.close()
