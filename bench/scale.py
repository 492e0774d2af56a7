"""Benchmark of distributed validation: validations per second with 1 and with 2 validator workers.

On a real Kafka broker (started here with the devtools helper behind ``scripts/kafka_broker.py``,
stopped at the end), for each worker count in the same run of the script:

1. a fresh run (topic with ``--partitions`` partitions) gets RunStarted, and N EnvironmentProposed
   events are built beforehand by the procedural designer (the stage code of ``start``);
2. that many ``spade-engine worker validator`` processes are started (real sandbox, embedding
   novelty unless ``--no-novelty``) and given time to load and join their consumer group;
3. the N proposals are appended at once, and the clock runs until N EnvironmentValidated are in
   the log.

Measurements alternate in ABBA order (``--repeat`` per worker count, default 2) and each figure
pools its measurements (total validations / total time), so drifting load on a shared machine
does not favour one side. The baseline is the 1-worker figure. Worker start-up (imports, model load, group join) is not
timed. Prints figures; the LAST line is one JSON object with ``validations_per_s_1``,
``validations_per_s_2`` and ``scale_ratio`` (2-worker / 1-worker). On a machine with 2 cores
shared with other work, the ratio is bounded by the free cores.

    python3 bench/scale.py               # N = 40
    python3 bench/scale.py --quick       # N = 16
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bench/kafka.py would shadow the kafka package: drop this folder from the import path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()  # no tqdm or Hugging Face progress bars in the benchmark's output

from spade_engine import __version__  # noqa: E402
from spade_engine.config import load_config  # noqa: E402
from spade_engine.devtools.kafka_broker import KafkaBroker  # noqa: E402
from spade_engine.engine.corpus import Corpus  # noqa: E402
from spade_engine.engine.pipeline import new_env  # noqa: E402
from spade_engine.policy.registry import make_policy  # noqa: E402
from spade_engine.engine.stages import StageContext  # noqa: E402
from spade_engine.engine.state import RunState  # noqa: E402
from spade_engine.events.catalogue import RunStarted  # noqa: E402
from spade_engine.events.codec import make_envelope  # noqa: E402
from spade_engine.events.kafka.log import KafkaEventLog  # noqa: E402
from spade_engine.events.store import new_run_id  # noqa: E402


def proposals(cfg, run_id: str, n: int) -> list:
    """N first proposals of a run, made by the procedural designer with the loop's stage code."""
    policy = make_policy(cfg.policy)
    ctx = StageContext(run_id=run_id, cfg=cfg, policy=policy, corpus=Corpus.from_paths(cfg.loop.corpus))
    state = RunState(run_id=run_id)
    out = []
    for i in range(n):
        env = make_envelope(new_env(ctx, state, i), run_id=run_id, producer="bench")
        state.add_envelope(env)
        out.append(env)
    return out


def measure(bootstrap: str, workers: int, n: int, partitions: int, novelty: bool, data: Path, logs: Path) -> float:
    run_id = new_run_id()
    cfg = load_config(overrides={"seed": 11, "log.backend": "kafka", "log.partitions": partitions, "sandbox.workers": 1})
    log = KafkaEventLog(bootstrap, run_id, partitions=partitions)
    log.append([make_envelope(RunStarted(config=cfg.model_dump(mode="json"), engine_version=__version__, seed=cfg.seed,
                                         backend="kafka"), run_id=run_id, producer="bench")])
    envs = proposals(cfg, run_id, n)
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    procs, outs = [], []
    try:
        for i in range(workers):
            out = logs / f"validator-{workers}-{i}.log"
            outs.append(out)
            cmd = [sys.executable, "-m", "spade_engine.cli", "worker", "validator", "--run", run_id, "--backend", "kafka",
                   "--bootstrap", bootstrap, "-d", str(data), "--sandbox-workers", "1", "--session-timeout", "6",
                   *([] if novelty else ["--no-novelty"])]
            procs.append(subprocess.Popen(cmd, stdout=open(out, "wb"), stderr=subprocess.STDOUT, env=env, cwd=str(ROOT)))
        # ready = every member reports a share of the partitions and together they cover all
        deadline = time.monotonic() + 240
        while True:
            shares = []
            for out in outs:
                lines = [ln for ln in out.read_text(errors="replace").splitlines() if "assigned partitions" in ln]
                shares.append(json.loads(lines[-1].split("assigned partitions", 1)[1]) if lines else [])
            if all(shares) and sum(len(s) for s in shares) == partitions:
                break
            for p, out in zip(procs, outs):
                if p.poll() is not None:
                    raise SystemExit(f"validator exited early:\n{out.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise SystemExit(f"validators did not join in time: {shares}")
            time.sleep(0.3)
        time.sleep(2.0)  # let the last rebalance settle
        t0 = time.perf_counter()
        log.append(envs)
        while log.count_by_type().get("EnvironmentValidated", 0) < n:
            if time.perf_counter() - t0 > 900:
                raise SystemExit("validation did not finish in 900s")
            time.sleep(0.1)
        elapsed = time.perf_counter() - t0
        per_worker: dict[str, int] = {}
        for rec in log.read():
            if rec.envelope.type == "EnvironmentValidated":
                per_worker[rec.envelope.producer] = per_worker.get(rec.envelope.producer, 0) + 1
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        log.close()
    rate = n / elapsed
    print(f"{workers} validator worker(s): {n} validations in {elapsed:.2f}s = {rate:.2f}/s "
          f"(partitions {shares}, validations per worker {sorted(per_worker.values())})", flush=True)
    return rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=40, help="proposals to validate per measurement")
    ap.add_argument("--quick", action="store_true", help="N = 16")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=2, help="measurements per worker count, in ABBA order (rates pool them)")
    ap.add_argument("--no-novelty", dest="novelty", action="store_false", help="skip the embedding novelty check")
    args = ap.parse_args()
    n = 16 if args.quick else args.n
    with tempfile.TemporaryDirectory(prefix="spade-bench-scale-") as tmp:
        tmp_path = Path(tmp)
        logs = tmp_path / "logs"
        logs.mkdir()
        broker = KafkaBroker(tmp_path / "broker", heap="512m")
        broker.start(timeout=180)
        try:
            # ABBA order (1, 2, 2, 1, ...) so drift in the machine's load hits both figures alike
            order = [w for i in range(args.repeat) for w in ((1, 2) if i % 2 == 0 else (2, 1))]
            secs = {1: 0.0, 2: 0.0}
            for w in order:
                secs[w] += n / measure(broker.bootstrap, w, n, args.partitions, args.novelty, tmp_path / "data", logs)
            r1, r2 = n * args.repeat / secs[1], n * args.repeat / secs[2]
        finally:
            broker.stop()
    print(f"cores: {os.cpu_count()}, novelty: {args.novelty}, N = {n}")
    print(json.dumps({
        "validations_per_s_1": round(r1, 3),
        "validations_per_s_2": round(r2, 3),
        "scale_ratio": round(r2 / r1, 3),
        "n": n,
        "partitions": args.partitions,
        "repeat": args.repeat,
        "novelty": args.novelty,
    }))


if __name__ == "__main__":
    main()
