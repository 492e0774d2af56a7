"""Benchmark of the self-play loop with the procedural policy (a simulation, not an LLM).

Runs the full pipeline (real sandbox validation and plays, embedding novelty, live archive and
memory projections, SQLite log) for a fixed number of environments twice with the same seed:
once with the adaptive designer, once with a fixed-difficulty control (the baseline). Prints
figures, and as its LAST line one JSON object with:

* ``envs_per_min``, ``plays_per_min``: throughput of the adaptive run (model loading excluded);
* ``sandbox_share``: fraction of the adaptive run's wall time spent in sandbox work (validation,
  resets and steps);
* ``frontier_share``: fraction of valid (accepted and played) environments whose plain win rate
  is in the frontier band [0.4, 0.6], adaptive designer;
* ``frontier_share_fixed``: the same for the fixed-difficulty control;

plus the control's throughput and the time shares of policy and embedding work.

    python3 bench/loop.py            # 40 environments per run, k = 4
    python3 bench/loop.py --quick    # 14 environments per run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()  # no tqdm or Hugging Face progress bars in the benchmark's output

from spade_engine.config import load_config  # noqa: E402
from spade_engine.runs.engine import open_engine  # noqa: E402
from spade_engine.events.store import new_run_id  # noqa: E402


def run_once(n: int, k: int, adaptive: bool, seed: int, projections: bool, root: Path) -> dict:
    cfg = load_config(
        overrides={"seed": seed, "loop.max_envs": n, "loop.plays_per_env": k, "policy.adaptive": adaptive},
        environ={},
    )
    t_open = time.perf_counter()
    with open_engine(cfg, run_id=new_run_id(), data_dir=root, create=True, projections=projections) as opened:
        engine = opened.engine
        if engine.ctx.embedder is not None:
            engine.ctx.embedder.embed(["warm up"])  # model loading is startup, not loop time
        startup = time.perf_counter() - t_open
        engine.ctx.timings.embedding = 0.0
        t0 = time.perf_counter()
        reason = engine.run()
        wall = time.perf_counter() - t0
        st = engine.state
        stats = st.stats()
        played = [s.regret.win_rate_plain for s in st.proposed() if s.regret is not None]
        tm = engine.ctx.timings
    return {
        "adaptive": adaptive,
        "reason": reason,
        "envs": stats["roots"],
        "proposals": stats["proposals"],
        "valid": stats["valid"],
        "accepted": stats["accepted"],
        "plays": stats["plays"],
        "wall_s": wall,
        "startup_s": startup,
        "sandbox_s": tm.sandbox,
        "policy_s": tm.policy,
        "embedding_s": tm.embedding,
        "frontier_share": (sum(1 for w in played if 0.4 <= w <= 0.6) / len(played)) if played else 0.0,
        "mean_win_rate": (sum(played) / len(played)) if played else 0.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=40, help="environments per run (default 40)")
    ap.add_argument("--k", type=int, default=4, help="plain and hinted plays per environment (default 4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", default=None, help="comma-separated run seeds: both runs at each, figures averaged "
                    "(frontier_gain_per_seed and its 95%% interval over seeds in the JSON)")
    ap.add_argument("--quick", action="store_true", help="14 environments per run")
    ap.add_argument("--no-projections", action="store_true", help="skip the embedding model, memory and archive")
    args = ap.parse_args()
    n = 14 if args.quick else args.n
    seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else [args.seed]
    pairs = []
    with tempfile.TemporaryDirectory(prefix="spade-bench-loop-") as tmp:
        root = Path(tmp)
        for seed in seeds:
            adaptive = run_once(n, args.k, True, seed, not args.no_projections, root / f"adaptive-{seed}")
            fixed = run_once(n, args.k, False, seed, not args.no_projections, root / f"fixed-{seed}")
            pairs.append((seed, adaptive, fixed))
            for r in (adaptive, fixed):
                name = "adaptive designer" if r["adaptive"] else "fixed difficulty (control)"
                print(
                    f"seed {seed} {name:<27} {r['envs']} envs ({r['proposals']} proposals, {r['valid']} valid, "
                    f"{r['accepted']} accepted), {r['plays']} plays in {r['wall_s']:.1f}s (+{r['startup_s']:.1f}s startup); "
                    f"sandbox {r['sandbox_s']:.1f}s, policy {r['policy_s']:.2f}s, embedding {r['embedding_s']:.1f}s; "
                    f"frontier share {r['frontier_share']:.2f}, mean plain win rate {r['mean_win_rate']:.2f}", flush=True,
                )
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    gains = [a["frontier_share"] - f["frontier_share"] for _, a, f in pairs]
    half = 0.0
    if len(gains) > 1:
        import statistics

        from scipy.stats import t as student_t

        half = float(student_t.ppf(0.975, len(gains) - 1)) * statistics.stdev(gains) / len(gains) ** 0.5
    w = sum(a["wall_s"] for _, a, _ in pairs)
    result = {
        "envs": n,
        "seeds": seeds,
        "plays_per_env": 2 * args.k,
        "envs_per_min": round(sum(a["envs"] for _, a, _ in pairs) / w * 60, 2),
        "plays_per_min": round(sum(a["plays"] for _, a, _ in pairs) / w * 60, 2),
        "sandbox_share": round(sum(a["sandbox_s"] for _, a, _ in pairs) / w, 4),
        "policy_share": round(sum(a["policy_s"] for _, a, _ in pairs) / w, 4),
        "embedding_share": round(sum(a["embedding_s"] for _, a, _ in pairs) / w, 4),
        "frontier_share": round(mean([a["frontier_share"] for _, a, _ in pairs]), 4),
        "frontier_share_fixed": round(mean([f["frontier_share"] for _, _, f in pairs]), 4),
        "frontier_gain": round(mean(gains), 4),
        "frontier_gain_ci95": [round(mean(gains) - half, 4), round(mean(gains) + half, 4)],
        "frontier_gain_per_seed": [round(g, 4) for g in gains],
        "envs_per_min_fixed": round(sum(f["envs"] for _, _, f in pairs) / sum(f["wall_s"] for _, _, f in pairs) * 60, 2),
        "projections": not args.no_projections,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
