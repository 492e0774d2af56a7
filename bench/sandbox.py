"""Sandbox benchmark: validation latency with the warm pool vs one fresh python process per
validation (the same checks), and the step round trip of a running episode.

    python3 bench/sandbox.py [--reps 3] [--invalid-reps 8] [--baseline-reps 1] [--steps 600]

Ours: a SandboxPool (isolated, pre-forked workers) validates each example environment ``--reps``
times, then an invalid environment (its rewards break the contract) ``--invalid-reps`` times,
one after the other: a worker is recycled after every such verdict, so this measures that cost. Baseline: for each validation, a fresh ``python`` worker process is started (without the
isolation layers, which only makes the baseline cheaper), runs the same Validator checks, and is
closed. Step round trip: ``session.step`` on a live GuessNumberEnv episode (engine -> task ->
engine, graded). Last line: JSON with validate_p50_ms, invalid_validate_p50_ms,
baseline_validate_p50_ms, validate_speedup (baseline / ours) and step_roundtrip_p50_ms.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from spade_engine.config import SandboxConfig  # noqa: E402
from spade_engine.sandbox import SandboxPool  # noqa: E402
from spade_engine.sandbox.validator import Validator  # noqa: E402

ENVS = ROOT / "tests" / "envs"
INVALID = """
class TooRichEnv:
    def reset(self, seed=None):
        return "hi", {}
    def step(self, action):
        return "done", 5.0, True, False, {}
"""


def p50(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3, help="validations of each environment with the warm pool")
    ap.add_argument("--invalid-reps", type=int, default=8, help="validations of an invalid environment with the warm pool")
    ap.add_argument("--baseline-reps", type=int, default=1, help="fresh-process validations of each environment")
    ap.add_argument("--steps", type=int, default=600, help="steps timed for the round trip")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    sources = {p.name: p.read_text() for p in sorted(ENVS.glob("*.py"))}
    cfg = SandboxConfig(workers=2, uid_base=2_000_000_200)

    # -- ours: warm, isolated pool ----------------------------------------------------------
    t0 = time.perf_counter()
    pool = SandboxPool(cfg)
    start_s = time.perf_counter() - t0
    print(f"pool of {cfg.workers} isolated workers ready in {start_s:.2f}s; layers missing: {pool.missing_layers or 'none'}")
    validator = Validator(pool, turn_limit=8)
    validator.validate(next(iter(sources.values())))  # warm-up
    ours: list[float] = []
    for _ in range(args.reps):
        for name, src in sources.items():
            t = time.perf_counter()
            report = validator.validate(src)
            ours.append((time.perf_counter() - t) * 1000)
            assert report.valid, (name, report.failed_check, report.detail)
    print(f"warm pool:   {len(ours)} validations, p50 {p50(ours):.1f} ms, mean {statistics.mean(ours):.1f} ms")
    invalid: list[float] = []
    for _ in range(args.invalid_reps):
        t = time.perf_counter()
        report = validator.validate(INVALID)
        invalid.append((time.perf_counter() - t) * 1000)
        assert report.error_kind == "contract", (report.failed_check, report.detail)
    if invalid:
        print(f"invalid env: {len(invalid)} validations, p50 {p50(invalid):.1f} ms (workers recycled: {pool.recycled})")

    # -- step round trip ------------------------------------------------------------------------
    steps: list[float] = []
    with pool.open_session(sources["guess_number_env.py"]) as session:
        seed = 0
        while len(steps) < args.steps:
            session.reset(seed=seed)
            seed += 1
            for guess in range(1, 7):
                t = time.perf_counter()
                _, _, terminated, truncated, _ = session.step(f"\\boxed{{{guess * 7}}}")
                steps.append((time.perf_counter() - t) * 1000)
                if terminated or truncated:
                    break
    pool.close()
    print(f"step round trip: {len(steps)} steps, p50 {p50(steps):.3f} ms, p90 {sorted(steps)[int(len(steps) * 0.9)]:.3f} ms")

    # -- baseline: a fresh python process per validation ----------------------------------------
    base_cfg = SandboxConfig(workers=1, uid_base=2_000_000_210)
    baseline: list[float] = []
    for _ in range(args.baseline_reps):
        for name, src in sources.items():
            t = time.perf_counter()
            with SandboxPool(base_cfg, isolate=False) as fresh:
                report = Validator(fresh, turn_limit=8).validate(src)
            baseline.append((time.perf_counter() - t) * 1000)
            assert report.valid, (name, report.failed_check, report.detail)
    print(f"baseline:    {len(baseline)} validations in fresh processes, p50 {p50(baseline):.1f} ms")

    result = {
        "validate_p50_ms": round(p50(ours), 2),
        "invalid_validate_p50_ms": round(p50(invalid), 2) if invalid else None,
        "baseline_validate_p50_ms": round(p50(baseline), 2),
        "validate_speedup": round(p50(baseline) / p50(ours), 2),
        "step_roundtrip_p50_ms": round(p50(steps), 4),
        "validations": len(ours),
        "baseline_validations": len(baseline),
        "steps": len(steps),
        "workers": cfg.workers,
        "pool_start_s": round(start_s, 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
