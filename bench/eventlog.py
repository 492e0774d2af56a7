"""Benchmark the embedded SQLite event log against raw sqlite3.executemany.

Appends N events (default 200k) in batches through ``SqliteEventLog.append`` (which encodes
canonical JSON, checks the run, and inserts idempotently on event_id), then reads them all back
decoded. Baseline, in the same run: ``sqlite3.executemany`` of the same already-encoded rows into
a bare table (same columns, no unique index, same WAL/synchronous settings, same batching).
Both are measured ``--repeat`` times, alternating, into fresh files; the best run of each counts
(a shared VM's I/O noise is larger than the difference measured), and every run is printed.
Last line: JSON with the figures and ``append_ratio`` (ours / baseline).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spade_engine.events import (  # noqa: E402
    Generation,
    RolloutCompleted,
    SqliteEventLog,
    Turn,
    encode_envelope,
    make_envelope,
)


def build(n: int, run_id: str, start: int = 0):
    """``n`` RolloutCompleted envelopes (8 plays per environment), the events benches append."""
    out = []
    for i in range(start, start + n):
        payload = RolloutCompleted(
            env_id=f"env-{i // 8:06d}",
            play_id=f"p{i}",
            hinted=bool(i % 2),
            seed=i,
            policy_version="v0",
            episode_reward=float(i % 3 == 0),
            turns=[Turn(observation="obs", action="\\boxed{4}", reward=1.0, terminated=True,
                        generation=Generation(prompt_token_ids=[1, 2, 3], completion_token_ids=[4], logprobs=[-0.1]))],
            terminated=True,
        )
        out.append(make_envelope(payload, run_id=run_id, producer="bench"))
    return out


def _baseline(path: Path, rows: list[tuple], batch: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, event_id TEXT, type TEXT, body BLOB)")
    t0 = time.perf_counter()
    for s in range(0, len(rows), batch):
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO t(event_id, type, body) VALUES (?,?,?)", rows[s:s + batch])
        conn.execute("COMMIT")
    dt = time.perf_counter() - t0
    conn.close()
    return dt


def _ours(path: Path, run_id: str, envs: list, batch: int) -> tuple[float, SqliteEventLog]:
    log = SqliteEventLog(path, run_id)
    t0 = time.perf_counter()
    for s in range(0, len(envs), batch):
        log.append(envs[s:s + batch])
    return time.perf_counter() - t0, log


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3, help="alternating baseline/ours measurements; the best of each counts")
    args = ap.parse_args()
    run_id = "run-bench"
    envs = build(args.n, run_id)
    rows = [(e.event_id, e.type, encode_envelope(e)) for e in envs]  # baseline input: pre-encoded rows
    base_times: list[float] = []
    ours_times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for rep in range(args.repeat):
            # alternate the order (ABBA...) so drift on a shared machine hits both sides alike
            order = ("base", "ours") if rep % 2 == 0 else ("ours", "base")
            for side in order:
                if side == "base":
                    base_times.append(_baseline(tmp / f"bare-{rep}.sqlite", rows, args.batch))
                else:
                    dt, log = _ours(tmp / f"ours-{rep}" / "events.sqlite", run_id, envs, args.batch)
                    ours_times.append(dt)
                    if rep < args.repeat - 1:
                        log.close()
        base_s, ours_s = min(base_times), min(ours_times)

        t0 = time.perf_counter()
        n_read = sum(1 for _ in log.read())
        read_s = time.perf_counter() - t0
        assert n_read == args.n, (n_read, args.n)
        t0 = time.perf_counter()
        n_dec = sum(1 for r in log.read() if r.envelope.type)
        read_dec_s = time.perf_counter() - t0
        assert n_dec == args.n
        log.close()

    result = {
        "events": args.n,
        "batch": args.batch,
        "repeat": args.repeat,
        "append_events_per_s": round(args.n / ours_s),
        "read_events_per_s": round(args.n / read_s),
        "read_decoded_events_per_s": round(args.n / read_dec_s),
        "baseline_append_events_per_s": round(args.n / base_s),
        "append_ratio": round(base_s / ours_s, 3),
        "append_s_runs": [round(t, 3) for t in ours_times],
        "baseline_append_s_runs": [round(t, 3) for t in base_times],
        "baseline": "sqlite3.executemany of the same encoded rows into a bare table",
    }
    print(f"ours:     append {result['append_events_per_s']:>9,} ev/s   read {result['read_events_per_s']:>9,} ev/s"
          f"   read+decode {result['read_decoded_events_per_s']:>9,} ev/s")
    print(f"baseline: append {result['baseline_append_events_per_s']:>9,} ev/s")
    print(json.dumps(result))



if __name__ == "__main__":
    main()
