"""Benchmark of the curriculum algorithm with the procedural policy (a simulation, not an LLM), on CPU.

1. **Level replay on vs off.** The full loop (real sandbox validation and plays, embedding
   novelty, live projections, SQLite log) runs twice with the same seed and the same number of
   new environments: once with every curriculum slot a new environment (off), once with
   prioritised level replay (``replay.p``, robust PLR rank + staleness, ``--score``). Each round
   the agent plays (a new environment's first round or a replay round) is one training round; per
   window of ``--window`` rounds it prints the share of rounds whose plain win rate is in the
   frontier band [band_low, band_high] and their mean regret, for both runs.
2. **Designer samples used per update, before vs after.** The skill schedule of the loop (seven
   skills, each block of seven environments covering each once in a seeded order) over
   ``--designs`` environments, with designer rewards drawn at random, is folded into the trainer's
   batch assembler and cut into batches of ``--batch-groups`` groups: the share of designer
   samples that get a non-zero advantage, with the per-batch per-skill centring (before:
   ``designer_baseline = "batch"``) and with the running per-skill window (after, the default).

The LAST line is one JSON object with ``frontier_share_off``/``_on``, ``frontier_share_ratio``
(on / off; null when off is 0) and ``frontier_share_delta`` (on - off), the same for ``regret``,
``replays``, and
``designer_used_share_before``/``_after``, ``designer_used_delta`` (after - before) and
``designer_used_ratio`` (after / before; null when before is 0, as in ``--quick``) at the
default batch size, plus the shares at every ``--batch-groups`` size.

    python3 bench/curriculum.py            # 24 new environments per run, k = 4
    python3 bench/curriculum.py --quick    # 6 new environments per run
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()  # no tqdm or Hugging Face progress bars in the benchmark's output

from spade_engine.config import load_config  # noqa: E402
from spade_engine.engine.designer import SKILLS  # noqa: E402
from spade_engine.engine.regret import in_band  # noqa: E402
from spade_engine.engine.stages import choose_skill  # noqa: E402
from spade_engine.events import EnvironmentProposed, Generation, RegretEstimated, make_envelope  # noqa: E402
from spade_engine.events.log import Record  # noqa: E402
from spade_engine.events.store import new_run_id  # noqa: E402
from spade_engine.runs.engine import open_engine  # noqa: E402
from spade_engine.trainer.batches import BatchAssembler, build_samples  # noqa: E402


def run_loop(n: int, k: int, seed: int, replay: bool, score: str, p: float, root: Path) -> dict:
    """One run of the loop; the training rounds in the order they were played."""
    over = {"seed": seed, "loop.max_envs": n, "loop.plays_per_env": k, "replay.enabled": replay, "replay.score": score,
            "replay.p": p, "replay.min_candidates": 3}
    cfg = load_config(overrides=over, environ={})
    with open_engine(cfg, run_id=new_run_id(), data_dir=root, create=True) as opened:
        engine = opened.engine
        t0 = time.perf_counter()
        engine.run()
        wall = time.perf_counter() - t0
        rounds = []
        for rec in engine.log.read():
            if rec.envelope.type == "RegretEstimated":
                est = rec.envelope.event()
                rounds.append({"env_id": est.env_id, "round": est.round, "replay": est.replay,
                               "win_rate": est.win_rate_plain, "regret": est.regret})
    return {"rounds": rounds, "wall_s": wall, "band": (cfg.reward.band_low, cfg.reward.band_high)}


def summarise(rounds: list[dict], band: tuple[float, float]) -> tuple[float, float]:
    if not rounds:
        return 0.0, 0.0
    share = sum(1 for r in rounds if in_band(r["win_rate"], *band)) / len(rounds)
    return share, sum(r["regret"] for r in rounds) / len(rounds)


def designer_share(n: int, batch_groups: int, baseline: str, seed: int) -> float:
    skills = list(SKILLS)
    rng = random.Random(seed)
    gen = Generation(prompt_token_ids=[1, 2], completion_token_ids=[3, 4], logprobs=[-1.0, -1.0])
    asm = BatchAssembler()
    for i in range(n):
        skill = choose_skill(seed, i, skills)
        for ev in (
            EnvironmentProposed(env_id=f"e{i}", skill=skill, difficulty=0.5, code="x", code_sha256="0", policy_version="v0",
                                generation=gen),
            RegretEstimated(env_id=f"e{i}", skill=skill, plain_rewards=[], hinted_rewards=[], win_rate_plain=0.5,
                            win_rate_hinted=0.5, regret=0.0, designer_reward=rng.random()),
        ):
            asm.observe(Record(0, 2 * i, make_envelope(ev, run_id="bench", producer="bench"), b""))
    used = candidates = 0
    while asm.ready:
        _, stats = build_samples(asm.take(batch_groups), current_step=0, max_lag=4, lag_of=asm.lag, designer_baseline=baseline)
        used += stats.designer_samples
        candidates += stats.designer_candidates
    return used / candidates if candidates else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envs", type=int, default=24, help="new environments per run")
    ap.add_argument("--plays", type=int, default=4, help="k plain and k hinted plays per round")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--score", choices=["regret", "pvl"], default="regret")
    ap.add_argument("--p", type=float, default=0.5, help="replay.p")
    ap.add_argument("--window", type=int, default=8, help="training rounds per printed window")
    ap.add_argument("--designs", type=int, default=700, help="environments in the designer-sample simulation")
    ap.add_argument("--batch-groups", type=int, nargs="+", default=[4, 8, 12])
    ap.add_argument("--quick", action="store_true", help="6 new environments per run")
    args = ap.parse_args()
    if args.quick:
        args.envs, args.designs = 6, 140

    with tempfile.TemporaryDirectory(prefix="spade-bench-curriculum-") as tmp:
        off = run_loop(args.envs, args.plays, args.seed, False, args.score, args.p, Path(tmp) / "off")
        on = run_loop(args.envs, args.plays, args.seed, True, args.score, args.p, Path(tmp) / "on")
    band = off["band"]
    print(f"level replay ({args.envs} new environments, k = {args.plays}, replay.p {args.p}, score {args.score}); "
          f"band [{band[0]}, {band[1]}]")
    print(f"  off: {len(off['rounds'])} training rounds in {off['wall_s']:.1f}s")
    replays = sum(1 for r in on["rounds"] if r["replay"])
    print(f"  on:  {len(on['rounds'])} training rounds ({replays} replays) in {on['wall_s']:.1f}s")
    print(f"  {'rounds':>9}  {'band off':>8}  {'band on':>8}  {'regret off':>10}  {'regret on':>9}")
    for w in range(0, max(len(off["rounds"]), len(on["rounds"])), args.window):
        a, b = off["rounds"][w : w + args.window], on["rounds"][w : w + args.window]
        fa, ra = summarise(a, band)
        fb, rb = summarise(b, band)
        fmt = lambda x, rs: f"{x:8.2f}" if rs else f"{'-':>8}"  # noqa: E731
        print(f"  {w:>4}-{w + args.window - 1:<4}  {fmt(fa, a)}  {fmt(fb, b)}  {fmt(ra, a):>10}  {fmt(rb, b):>9}")
    f_off, r_off = summarise(off["rounds"], band)
    f_on, r_on = summarise(on["rounds"], band)
    print(f"  all:  frontier share off {f_off:.3f}, on {f_on:.3f}; mean regret off {r_off:.3f}, on {r_on:.3f}")

    shares = {}
    print(f"designer samples used per update ({args.designs} environments, {len(SKILLS)} skills in turn)")
    for bg in args.batch_groups:
        before = designer_share(args.designs, bg, "batch", args.seed)
        after = designer_share(args.designs, bg, "window", args.seed)
        shares[bg] = (before, after)
        print(f"  batch_groups {bg:>2}: before (per-batch centring) {before:.3f}, after (running window) {after:.3f}")
    default = 4 if 4 in shares else args.batch_groups[0]
    before, after = shares[default]
    result = {
        "envs": args.envs,
        "replays": replays,
        "frontier_share_off": round(f_off, 4),
        "frontier_share_on": round(f_on, 4),
        "frontier_share_ratio": round(f_on / f_off, 4) if f_off else None,
        "frontier_share_delta": round(f_on - f_off, 4),
        "regret_off": round(r_off, 4),
        "regret_on": round(r_on, 4),
        "regret_ratio": round(r_on / r_off, 4) if r_off else None,
        "regret_delta": round(r_on - r_off, 4),
        "designer_used_share_before": round(before, 4),
        "designer_used_share_after": round(after, 4),
        "designer_used_delta": round(after - before, 4),
        "designer_used_ratio": round(after / before, 4) if before else None,
        **{f"designer_used_share_before_{bg}": round(b, 4) for bg, (b, _) in shares.items()},
        **{f"designer_used_share_after_{bg}": round(a, 4) for bg, (_, a) in shares.items()},
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
