"""Benchmark the embedded SQLite event log against raw sqlite3.executemany.

Appends N events (default 200k) in batches through ``SqliteEventLog.append`` (which encodes
canonical JSON, checks the run, and inserts idempotently on event_id), then reads them all back
decoded. Baseline, in the same run: ``sqlite3.executemany`` of the same already-encoded rows into
a bare table (same columns, no unique index, same WAL/synchronous settings, same batching).
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=1000)
    args = ap.parse_args()
    run_id = "run-bench"
    envs = build(args.n, run_id)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # baseline: pre-encoded rows, bare table
        rows = [(e.event_id, e.type, encode_envelope(e)) for e in envs]
        conn = sqlite3.connect(tmp / "bare.sqlite", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, event_id TEXT, type TEXT, body BLOB)")
        t0 = time.perf_counter()
        for s in range(0, len(rows), args.batch):
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO t(event_id, type, body) VALUES (?,?,?)",
                             rows[s:s + args.batch])
            conn.execute("COMMIT")
        base_s = time.perf_counter() - t0
        conn.close()

        log = SqliteEventLog(tmp / "ours" / "events.sqlite", run_id)
        t0 = time.perf_counter()
        for s in range(0, len(envs), args.batch):
            log.append(envs[s:s + args.batch])
        ours_s = time.perf_counter() - t0

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
        "append_events_per_s": round(args.n / ours_s),
        "read_events_per_s": round(args.n / read_s),
        "read_decoded_events_per_s": round(args.n / read_dec_s),
        "baseline_append_events_per_s": round(args.n / base_s),
        "append_ratio": round(base_s / ours_s, 3),
        "baseline": "sqlite3.executemany of the same encoded rows into a bare table",
    }
    print(f"ours:     append {result['append_events_per_s']:>9,} ev/s   read {result['read_events_per_s']:>9,} ev/s"
          f"   read+decode {result['read_decoded_events_per_s']:>9,} ev/s")
    print(f"baseline: append {result['baseline_append_events_per_s']:>9,} ev/s")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
