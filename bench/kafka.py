"""Benchmark the Kafka event log against a bare kafka-python producer, on a real broker.

Starts its own single-node broker (``spade_engine.devtools.kafka_broker``, the same code as
``scripts/kafka_broker.py``) in a temporary directory and stops it at the end.

* produce: N events (default 100k) through ``KafkaEventLog.append`` in batches (canonical JSON
  encoding, run check, event-id index for idempotence, headers, waits for every ack), and, in the
  same run, the same keys/bytes/headers through a bare ``KafkaProducer`` with the same settings
  (acks=all, idempotence, linger, batch size) into a topic with the same partitions, then flush;
  ``produce_ratio`` = ours / baseline; both are measured ``--repeat`` times, alternating, into
  fresh runs/topics, and the best run of each counts (every run is printed);
* consume: the embedded runner feeding the per-run statistics projection from the Kafka log;
* end to end: a follower applies the projection while events are appended at a steady rate;
  latency = projection applied - append called (p50, p99);
* the engine's pattern (``loop_events_per_s``): what ``start`` does per event, one event appended,
  then the run state and the live projections (through the engine's own runner,
  ``live_projection_runner``) fold what the log gained (two reads from their cursors),
  ``--loop-n`` times; the same on the embedded SQLite log in the same run
  (``sqlite_loop_events_per_s``); ``loop_ratio`` = Kafka / SQLite, printed and in the JSON;
  ``one_read_speedup``: the engine's single read for state and projections against a read each;
* a whole run (``--run-envs N``, with ``--loop-only`` too): ``spade-engine start --new --max-envs N``
  with the simulation policy at each of ``--run-seeds``, on the SQLite log and on the broker, one
  after the other; ``run_ratio`` = Kafka wall time / SQLite wall time (the user's question: how much
  slower is a Kafka run), with the event count of each run.

Last line: one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

# this file is named kafka.py: keep its folder off the path so `import kafka` finds kafka-python
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from kafka import KafkaAdminClient, KafkaProducer  # noqa: E402

from spade_engine.consumers import EmbeddedRunner  # noqa: E402
from spade_engine.consumers.stats import RunStatsProjection  # noqa: E402
from spade_engine.devtools.kafka_broker import KafkaBroker  # noqa: E402
from spade_engine.events import encode_envelope  # noqa: E402
from spade_engine.events.kafka.log import KafkaEventLog  # noqa: E402

sys.path.append(str(_HERE))  # after the kafka package: this file is named kafka.py
from eventlog import build  # noqa: E402  (the same events as the SQLite bench)


class _Timed(RunStatsProjection):
    """The stats projection, noting when each event was applied."""

    def __init__(self, run_id: str):
        super().__init__(run_id)
        self.applied_at: dict[str, float] = {}

    def apply(self, record) -> None:
        super().apply(record)
        self.applied_at.setdefault(record.envelope.event_id, time.perf_counter())


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=5000, help="events per append call")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2, help="alternating baseline/ours measurements (ABBA); the best of each counts")
    ap.add_argument("--e2e-n", type=int, default=3000, help="events of the latency phase")
    ap.add_argument("--e2e-rate", type=float, default=1000.0, help="events per second in the latency phase")
    ap.add_argument("--loop-n", type=int, default=300, help="events of the engine-pattern phase (one append + two reads each)")
    ap.add_argument("--loop-only", action="store_true", help="measure only the engine-pattern phase (and --run-envs)")
    ap.add_argument("--run-envs", type=int, default=24, help="environments of each whole run (0: skip the run phase)")
    ap.add_argument("--run-seeds", default="3,4", help="seeds of the whole runs, comma-separated")
    ap.add_argument("--bootstrap", default=None, help="use this running broker (HOST:PORT) instead of starting one")
    args = ap.parse_args()

    if args.bootstrap:
        print(json.dumps(run(args.bootstrap, args), sort_keys=True))
        return
    with tempfile.TemporaryDirectory() as tmp:
        broker = KafkaBroker(Path(tmp) / "broker", heap="768m")
        t0 = time.perf_counter()
        broker.start(timeout=300)
        print(f"broker up at {broker.bootstrap} in {time.perf_counter() - t0:.1f}s", flush=True)
        try:
            result = run(broker.bootstrap, args)
        finally:
            broker.stop()
    print(json.dumps(result, sort_keys=True))


def loop_pattern(log, n: int, start: int, *, one_read: bool = True) -> float:
    """Events per second of the engine's pattern on ``log``: append one event, then fold what the
    log gained into the run state and into the live projections (as ``Engine._append`` does:
    :func:`~spade_engine.engine.loop.fold_new_records`, one read for both). ``one_read=False``:
    the pattern before 2026-12-04, a read for each (the baseline of ``one_read_speedup``)."""
    from spade_engine.engine.loop import fold_new_records
    from spade_engine.engine.state import RunState
    from spade_engine.runs.context import live_projection_runner

    envs = build(n, log.run_id, start=start)
    state = RunState(run_id=log.run_id)
    runner = live_projection_runner(log, [RunStatsProjection(log.run_id)])  # the engine's own runner settings
    t = time.perf_counter()
    for e in envs:
        log.append([e])
        if one_read:
            fold_new_records(log, state, runner)
        else:
            state.refresh(log)
            runner.catch_up()
    elapsed = time.perf_counter() - t
    runner.flush()
    assert len(state.seen) == n, len(state.seen)
    return n / elapsed


def run_loop(bootstrap: str, args) -> dict:
    """The engine-pattern phase on Kafka and on SQLite (after a warm-up on each)."""
    from spade_engine.events.sqlite.log import SqliteEventLog

    with tempfile.TemporaryDirectory() as tmp:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for name in ("warm", "measured"):
            run_id = f"run-bench-loop-{name}-{stamp}"  # fresh on a broker that outlives the bench (--bootstrap)
            k = KafkaEventLog(bootstrap, run_id, create=True, partitions=args.partitions)
            q = SqliteEventLog(Path(tmp) / name / "events.sqlite", run_id, create=True)
            k2 = KafkaEventLog(bootstrap, run_id + "-two-reads", create=True, partitions=args.partitions)
            try:
                n = 20 if name == "warm" else args.loop_n
                kafka_rate = loop_pattern(k, n, 5 * 10**6)
                two_reads_rate = loop_pattern(k2, n, 5 * 10**6, one_read=False)
                sqlite_rate = loop_pattern(q, n, 5 * 10**6)
            finally:
                k.close()
                k2.close()
                q.close()
    print(f"engine pattern (append 1, fold with one read): kafka {kafka_rate:,.1f} events/s, sqlite {sqlite_rate:,.1f} events/s, "
          f"kafka/sqlite {kafka_rate / sqlite_rate:.3f}; kafka with a read each for state and projections "
          f"{two_reads_rate:,.1f} events/s (one read: {kafka_rate / two_reads_rate:.2f}x)", flush=True)
    return {"loop_n": args.loop_n, "loop_events_per_s": round(kafka_rate, 1), "sqlite_loop_events_per_s": round(sqlite_rate, 1),
            "two_reads_loop_events_per_s": round(two_reads_rate, 1), "one_read_speedup": round(kafka_rate / two_reads_rate, 3),
            "loop_ratio": round(kafka_rate / sqlite_rate, 3)}


def run_whole(bootstrap: str, args) -> dict:
    """``start`` on SQLite and on Kafka at each seed (same config, simulation policy): wall times."""
    import os
    import subprocess

    from spade_engine.events.sqlite.log import SqliteEventLog

    seeds = [int(x) for x in args.run_seeds.split(",") if x.strip()]
    env = dict(os.environ, PYTHONPATH=str(_HERE.parent))
    times: dict[str, list[float]] = {"sqlite": [], "kafka": []}
    events: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            for backend in ("sqlite", "kafka"):
                data = Path(tmp) / f"{backend}-{seed}"
                cmd = [sys.executable, "-m", "spade_engine.cli", "start", "--new", "--max-envs", str(args.run_envs),
                       "--seed", str(seed), "--data-dir", str(data), "--backend", backend]
                if backend == "kafka":
                    cmd += ["--bootstrap", bootstrap]
                t0 = time.perf_counter()
                res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
                dt = time.perf_counter() - t0
                if res.returncode != 0:
                    raise SystemExit(f"start on {backend} failed:\n{res.stdout[-1500:]}\n{res.stderr[-1500:]}")
                times[backend].append(dt)
                if backend == "sqlite":
                    (run_dir,) = [p for p in (data / "runs").iterdir() if p.is_dir()]
                    q = SqliteEventLog(run_dir / "events.sqlite", run_dir.name, create=False)
                    events.append(sum(q.count_by_type().values()))
                    q.close()
            print(f"whole run, seed {seed}: {events[-1]} events; sqlite {times['sqlite'][-1]:.1f}s, "
                  f"kafka {times['kafka'][-1]:.1f}s, kafka/sqlite {times['kafka'][-1] / times['sqlite'][-1]:.2f}", flush=True)
    ratio = sum(times["kafka"]) / sum(times["sqlite"])
    return {"run_envs": args.run_envs, "run_seeds": seeds, "run_events": events, "run_s_sqlite": [round(t, 2) for t in times["sqlite"]],
            "run_s_kafka": [round(t, 2) for t in times["kafka"]], "run_ratio": round(ratio, 3)}


def run(bootstrap: str, args) -> dict:
    loop = run_loop(bootstrap, args)
    if args.run_envs > 0:
        loop.update(run_whole(bootstrap, args))
    if args.loop_only:
        return loop
    bare = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
                         batch_size=256 * 1024, max_request_size=8 * 1024 * 1024)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    # warm up both paths (connections, broker JIT) on a separate run/topic
    warm = KafkaEventLog(bootstrap, "run-bench-warmup", create=True, partitions=args.partitions)
    warm_envs = build(5000, "run-bench-warmup", start=10**7)
    warm.append(warm_envs)
    warm.close()
    admin.create_topics({"bench-warmup": {"num_partitions": args.partitions, "replication_factor": 1}}, wait_for_metadata=True)
    for e in warm_envs:
        bare.send("bench-warmup", key=e.key.encode(), value=encode_envelope(e), headers=KafkaEventLog.headers_for(e))
    bare.flush()

    # measured --repeat times, alternating (ABBA...), each into a fresh run/topic; the best of each counts
    base_times: list[float] = []
    ours_times: list[float] = []
    log = None
    for rep in range(args.repeat):
        run_id = f"run-bench-kafka-{rep}"
        envs = build(args.n, run_id)
        items = [(e.key.encode(), encode_envelope(e), KafkaEventLog.headers_for(e)) for e in envs]
        if rep == 0:
            print(f"built {len(envs)} events, {sum(len(v) for _, v, _ in items) / len(items):.0f} bytes each", flush=True)
        topic = f"bench-baseline-{rep}"
        admin.create_topics({topic: {"num_partitions": args.partitions, "replication_factor": 1}}, wait_for_metadata=True)
        if log is not None:
            log.close()
        log = KafkaEventLog(bootstrap, run_id, create=True, partitions=args.partitions)
        for side in (("base", "ours") if rep % 2 == 0 else ("ours", "base")):
            if side == "base":
                # baseline: a bare producer with the same settings, same key/bytes/headers, own topic
                t = time.perf_counter()
                for k, v, h in items:
                    bare.send(topic, key=k, value=v, headers=h)
                bare.flush()
                base_times.append(time.perf_counter() - t)
                print(f"baseline producer: {args.n / base_times[-1]:,.0f} events/s", flush=True)
            else:
                t = time.perf_counter()
                new = 0
                for i in range(0, len(envs), args.batch):
                    new += log.append(envs[i:i + args.batch])
                ours_times.append(time.perf_counter() - t)
                assert new == args.n, new
                print(f"KafkaEventLog.append: {args.n / ours_times[-1]:,.0f} events/s", flush=True)
    bare.close()
    admin.close()
    assert log is not None
    baseline_s, ours_s = min(base_times), min(ours_times)

    # consume: the embedded runner + stats projection from a fresh reader
    reader = KafkaEventLog(bootstrap, log.run_id, create=False)
    proj = RunStatsProjection(log.run_id)
    t = time.perf_counter()
    got = EmbeddedRunner(reader, [proj], flush_every=10**9, commit_offsets=True).catch_up()
    consume_s = time.perf_counter() - t
    assert got == args.n and proj.state.total == args.n, (got, proj.state.total)
    print(f"consume (runner + stats projection): {args.n / consume_s:,.0f} events/s", flush=True)
    reader.close()

    # end to end: append at a steady rate, a follower applies the projection
    e2e_run = "run-bench-e2e"
    w = KafkaEventLog(bootstrap, e2e_run, create=True, partitions=args.partitions)
    r = KafkaEventLog(bootstrap, e2e_run, create=False)
    timed = _Timed(e2e_run)
    stop = threading.Event()
    follower = EmbeddedRunner(r, [timed], commit_offsets=False)
    th = threading.Thread(target=follower.run, args=(stop,), kwargs={"poll_interval": 0.01}, daemon=True)
    th.start()
    time.sleep(2.0)  # the follower is assigned and polling
    e2e = build(args.e2e_n, e2e_run, start=10**6)
    sent_at: dict[str, float] = {}
    step = 10
    interval = step / args.e2e_rate
    next_t = time.perf_counter()
    for i in range(0, len(e2e), step):
        batch = e2e[i:i + step]
        now = time.perf_counter()
        for e in batch:
            sent_at[e.event_id] = now
        w.append(batch)
        next_t += interval
        time.sleep(max(0.0, next_t - time.perf_counter()))
    deadline = time.time() + 60
    while len(timed.applied_at) < len(e2e) and time.time() < deadline:
        time.sleep(0.05)
    stop.set()
    th.join(30)
    lat = [(timed.applied_at[k] - s) * 1000 for k, s in sent_at.items() if k in timed.applied_at]
    assert len(lat) == len(e2e), f"only {len(lat)} of {len(e2e)} events reached the projection"
    w.close()
    r.close()
    log.close()
    return {
        "n": args.n,
        "batch": args.batch,
        "partitions": args.partitions,
        "produce_events_per_s": round(args.n / ours_s, 1),
        "baseline_produce_events_per_s": round(args.n / baseline_s, 1),
        "produce_ratio": round(baseline_s / ours_s, 3),
        "repeat": args.repeat,
        "produce_s_runs": [round(t, 2) for t in ours_times],
        "baseline_produce_s_runs": [round(t, 2) for t in base_times],
        "consume_events_per_s": round(args.n / consume_s, 1),
        "e2e_n": len(lat),
        "e2e_rate_events_per_s": args.e2e_rate,
        "e2e_p50_ms": round(pct(lat, 0.50), 2),
        "e2e_p99_ms": round(pct(lat, 0.99), 2),
        **loop,
    }


if __name__ == "__main__":
    main()
