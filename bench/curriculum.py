"""Benchmark of the curriculum algorithm with the procedural policy (a simulation, not an LLM), on CPU.

1. **Level replay on vs off.** The full loop (real sandbox validation and plays, embedding
   novelty, live projections, SQLite log) runs twice with the same seed and the same number of
   new environments: once with every curriculum slot a new environment (off), once with
   prioritised level replay (``replay.p``, robust PLR rank + staleness, ``--score``). Each round
   the agent plays (a new environment's first round or a replay round) is one training round; per
   window of ``--window`` rounds it prints the share of rounds whose plain win rate is in the
   frontier band [band_low, band_high] and their mean regret, for both runs.
2. **Designer samples used per update, before vs after.** The skill schedule of the loop under
   the default config (all 16 engine skill families, each block of 16 environments covering each
   once in a seeded order) over ``--designs`` environments, with designer rewards drawn at random,
   is folded into the trainer's batch assembler and cut into batches of ``--batch-groups`` groups:
   the designer samples that get a non-zero advantage out of the candidates, with the per-batch
   per-skill centring (before: ``designer_baseline = "batch"``) and with the running per-skill
   window (after, the default).
3. **Over time, with a learning agent** (``--train``, off by default: minutes on CPU). The
   procedural policy of part 1 does not learn, so its frontier share has no trend. With ``--train``
   a tiny random byte-level model (``tiny:0``) is the agent and is trained between rounds by the
   replay-driven trainer, reading only the log; each round fills ``--train-slots`` curriculum slots
   (new toy environments, or with level replay on, replays chosen by positive value loss), each
   played ``--train-plays`` times; a play is won when the model's first token is a lowercase
   letter (chance about 0.1, a reward the tiny model can learn). Per round it prints the mean win
   rate, the frontier share of the round's slots and the replays, for level replay off and on.

The LAST line is one JSON object with ``frontier_share_off``/``_on``, ``frontier_share_ratio``
(on / off; null when off is 0) and ``frontier_share_delta`` (on - off), the same for ``regret``,
``replays``, and
``designer_used_share_before``/``_after`` and ``designer_used_delta`` (after - before) at the
default batch size (4 groups); the raw counts ``designer_used_before_N``/``designer_used_after_N``
out of ``designer_candidates_N`` and the shares at every ``--batch-groups`` size N;
``designer_used_ratio`` (after / before) at ``designer_ratio_groups``, the smallest batch size
whose before share is not 0 (at 4 and 8 groups per-batch centring uses none: 16 skills in turn put
each skill at most once in a batch; null when every size is degenerate). With ``--train`` also
``train_win_rate_first_off``/``_last_off`` (the first and last round's mean win rate) and the same
``_on``, ``train_frontier_share_off``/``_on`` over all rounds, ``train_replays``.

    python3 bench/curriculum.py            # 24 new environments per run, k = 4
    python3 bench/curriculum.py --quick    # 6 new environments per run
    python3 bench/curriculum.py --seeds 0,1,2,3,4 --report   # part 1 at five seeds, averaged; a results page
    python3 bench/curriculum.py --train    # also the learning agent over time (minutes)
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
from spade_engine.engine.skills import skill_names  # noqa: E402
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


def designer_share(n: int, batch_groups: int, baseline: str, seed: int) -> tuple[int, int]:
    """``(used, candidates)``: designer samples with a non-zero advantage, out of all of them,
    under the default config's skills and skill schedule."""
    loop = load_config(environ={}).loop
    skills = list(loop.skills) or skill_names(loop.skill_set)
    rng = random.Random(seed)
    gen = Generation(prompt_token_ids=[1, 2], completion_token_ids=[3, 4], logprobs=[-1.0, -1.0])
    asm = BatchAssembler()
    for i in range(n):
        skill = choose_skill(seed, i, skills, per_block=loop.skills_per_block, block_envs=loop.block_envs)
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
    return used, candidates


# -- over time, with a learning agent (--train) ------------------------------------------------------

TRAIN_PROMPT = [{"role": "user", "content": "Say a word."}]
TRAIN_CODE = "class WordEnv:\n    pass\n"


def _won(token_ids: list[int]) -> float:
    return 1.0 if token_ids and ord("a") <= token_ids[0] <= ord("z") else 0.0


def train_arm(root: Path, *, replay: bool, rounds: int, slots: int, plays: int, seed: int, lr: float) -> list[dict]:
    """One arm of ``--train``: per round, ``slots`` curriculum decisions played ``plays`` times by
    the tiny model, recorded as the engine's events, then a trainer built from the log trains on
    them and the policy loads its new version. Returns one summary per round."""
    import hashlib

    from spade_engine.blobs import BlobStore
    from spade_engine.config import TrainerConfig
    from spade_engine.engine.level_replay import choose_replay
    from spade_engine.engine.pipeline import env_id_for, output_event_id
    from spade_engine.engine.rounds import estimate_round, prior_of, round_play_specs
    from spade_engine.engine.state import RunState
    from spade_engine.events import EnvironmentValidated, RolloutCompleted, RunStarted, SqliteEventLog, Turn
    from spade_engine.policy.protocol import PolicyRequest
    from spade_engine.policy.transformers_policy import TransformersPolicy
    from spade_engine.trainer.checkpoints import sync_policy
    from spade_engine.trainer.loop import Trainer

    root.mkdir(parents=True, exist_ok=True)
    run_id = "run-bench-train"
    cfg = load_config(overrides={"seed": seed, "replay.enabled": replay, "replay.p": 0.5, "replay.score": "pvl",
                                 "replay.min_candidates": 4, "replay.hinted": False}, environ={})
    log = SqliteEventLog(root / "events.sqlite", run_id)
    blobs = BlobStore(root / "blobs")
    log.append([make_envelope(RunStarted(config=cfg.model_dump(mode="json"), engine_version="bench", seed=seed),
                              run_id=run_id, producer="bench")])
    policy = TransformersPolicy.from_tiny(seed=0)
    tcfg = TrainerConfig(learning_rate=lr, batch_groups=slots, micro_batch_size=32, device="cpu", max_lag=1)
    state = RunState.from_log(log)
    code_sha = hashlib.sha256(TRAIN_CODE.encode()).hexdigest()

    def append(payload) -> None:
        log.append([make_envelope(payload, run_id=run_id, producer="bench", event_id=output_event_id(run_id, payload))])
        state.refresh(log)

    out = []
    try:
        for _ in range(rounds):
            estimates, replays = [], 0
            for _slot in range(slots):
                choice = choose_replay(cfg.replay, cfg.loop, state, seed=cfg.seed, policy_version=policy.version)
                if choice is not None:
                    append(choice)
                    replays += 1
                    env_id, round_ = choice.env_id, choice.round
                else:
                    env_id, round_ = env_id_for(run_id, len(state.roots())), 0
                    append(EnvironmentProposed(env_id=env_id, skill="words", difficulty=0.5, code=TRAIN_CODE,
                                               code_sha256=code_sha, policy_version=policy.version))
                    append(EnvironmentValidated(env_id=env_id, valid=True, accepted=True))
                specs = round_play_specs(cfg.seed, env_id, round_, plain=plays, hinted=0)
                samples = policy.generate([PolicyRequest(role="agent", messages=TRAIN_PROMPT, seed=sp.seed, max_new_tokens=3)
                                           for sp in specs])
                for sp, sample in zip(specs, samples):
                    r = _won(sample.completion_token_ids)
                    append(RolloutCompleted(
                        env_id=env_id, play_id=f"{env_id}/r{round_}/p{sp.index}", hinted=False, seed=sp.seed,
                        policy_version=policy.version, episode_reward=r, terminated=True, index=sp.index, round=round_,
                        turns=[Turn(observation="Say a word.", action=sample.text, reward=r, terminated=True,
                                    generation=sample.generation())],
                    ))
                st = state.env(env_id)
                est = estimate_round(st.proposed, st.all_plays(), cfg.reward, cfg.loop, round_=round_, replay=choice is not None,
                                     prev=state.lp_heads.get("words"),
                                     prior=prior_of([e for _, e in st.estimates.values()], round_))
                append(est)
                estimates.append(est)
            Trainer(log, blobs=blobs, config=tcfg, base_model="tiny:0").run()
            sync_policy(policy, log, blobs)
            out.append({"win_rate": sum(e.win_rate_plain for e in estimates) / len(estimates),
                        "frontier": sum(1 for e in estimates if in_band(e.win_rate_plain)) / len(estimates),
                        "replays": replays, "version": policy.version})
    finally:
        log.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envs", type=int, default=24, help="new environments per run")
    ap.add_argument("--plays", type=int, default=4, help="k plain and k hinted plays per round")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--seeds", default=None, help="comma-separated seeds: level replay off and on at each, figures averaged")
    ap.add_argument("--report", action="store_true", help="write docs/results/<date>-curriculum.{json,md}")
    ap.add_argument("--score", choices=["regret", "pvl"], default="regret")
    ap.add_argument("--p", type=float, default=0.5, help="replay.p")
    ap.add_argument("--window", type=int, default=8, help="training rounds per printed window")
    ap.add_argument("--designs", type=int, default=700, help="environments in the designer-sample simulation")
    ap.add_argument("--batch-groups", type=int, nargs="+", default=[4, 8, 12])
    ap.add_argument("--quick", action="store_true", help="6 new environments per run")
    ap.add_argument("--train", action="store_true", help="also the learning agent over time (tiny model, minutes)")
    ap.add_argument("--train-rounds", type=int, default=12, help="--train: rounds (a trainer update after each)")
    ap.add_argument("--train-slots", type=int, default=4, help="--train: curriculum slots per round")
    ap.add_argument("--train-plays", type=int, default=8, help="--train: plays per slot")
    ap.add_argument("--train-lr", type=float, default=3e-2, help="--train: learning rate of the tiny model")
    args = ap.parse_args()
    if args.quick:
        args.envs, args.designs = 6, 140

    seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else [args.seed]
    per_seed = []
    for seed in seeds:
        with tempfile.TemporaryDirectory(prefix="spade-bench-curriculum-") as tmp:
            off = run_loop(args.envs, args.plays, seed, False, args.score, args.p, Path(tmp) / "off")
            on = run_loop(args.envs, args.plays, seed, True, args.score, args.p, Path(tmp) / "on")
        band = off["band"]
        (fo, ro), (fn, rn) = summarise(off["rounds"], band), summarise(on["rounds"], band)
        per_seed.append({"seed": seed, "frontier_share_off": round(fo, 4), "frontier_share_on": round(fn, 4),
                         "regret_off": round(ro, 4), "regret_on": round(rn, 4), "rounds_off": len(off["rounds"]),
                         "rounds_on": len(on["rounds"]), "replays": sum(1 for r in on["rounds"] if r["replay"])})
        if len(seeds) > 1:
            print(f"seed {seed}: frontier share off {fo:.3f}, on {fn:.3f} ({per_seed[-1]['replays']} replays); "
                  f"regret off {ro:.3f}, on {rn:.3f}", flush=True)
    print(f"level replay ({args.envs} new environments, k = {args.plays}, replay.p {args.p}, score {args.score}); "
          f"band [{band[0]}, {band[1]}]" + (f"; rounds of seed {seeds[-1]}" if len(seeds) > 1 else ""))
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
    mean = lambda key: sum(p[key] for p in per_seed) / len(per_seed)  # noqa: E731
    f_off, f_on, r_off, r_on = (mean(k) for k in ("frontier_share_off", "frontier_share_on", "regret_off", "regret_on"))
    replays = sum(p["replays"] for p in per_seed)
    deltas = [p["frontier_share_on"] - p["frontier_share_off"] for p in per_seed]
    half = 0.0
    if len(deltas) > 1:
        var = sum((d - (f_on - f_off)) ** 2 for d in deltas) / (len(deltas) - 1)
        half = 1.96 * (var / len(deltas)) ** 0.5
    print(f"  all{' (mean over seeds ' + ','.join(map(str, seeds)) + ')' if len(seeds) > 1 else ''}:  frontier share "
          f"off {f_off:.3f}, on {f_on:.3f} (on - off {f_on - f_off:+.3f} +- {half:.3f}); mean regret off {r_off:.3f}, on {r_on:.3f}")

    shares, counts = {}, {}
    print(f"designer samples used per update ({args.designs} environments, {len(skill_names())} skills in turn)")
    for bg in args.batch_groups:
        ub, cb = designer_share(args.designs, bg, "batch", args.seed)
        ua, ca = designer_share(args.designs, bg, "window", args.seed)
        counts[bg] = (ub, ua, cb)
        shares[bg] = (ub / cb if cb else 0.0, ua / ca if ca else 0.0)
        print(f"  batch_groups {bg:>2}: before (per-batch centring) {ub}/{cb} = {shares[bg][0]:.3f}, "
              f"after (running window) {ua}/{ca} = {shares[bg][1]:.3f}")
    default = 4 if 4 in shares else args.batch_groups[0]
    before, after = shares[default]
    ratio_bg = next((bg for bg in sorted(shares) if shares[bg][0] > 0), None)
    train = {}
    if args.train:
        with tempfile.TemporaryDirectory(prefix="spade-bench-curriculum-train-") as tmp:
            arms = {name: train_arm(Path(tmp) / name, replay=name == "on", rounds=args.train_rounds, slots=args.train_slots,
                                    plays=args.train_plays, seed=args.seed, lr=args.train_lr) for name in ("off", "on")}
        print(f"over time with a learning agent (tiny model, {args.train_rounds} rounds of {args.train_slots} slots x "
              f"{args.train_plays} plays, lr {args.train_lr}; level replay p 0.5 by pvl)")
        print(f"  {'round':>5}  {'win off':>7}  {'win on':>7}  {'band off':>8}  {'band on':>8}  {'replays':>7}")
        for i, (a, b) in enumerate(zip(arms["off"], arms["on"])):
            print(f"  {i:>5}  {a['win_rate']:7.3f}  {b['win_rate']:7.3f}  {a['frontier']:8.2f}  {b['frontier']:8.2f}  {b['replays']:>7}")
        for name, rows in arms.items():
            train[f"train_win_rate_first_{name}"] = round(rows[0]["win_rate"], 4)
            train[f"train_win_rate_last_{name}"] = round(rows[-1]["win_rate"], 4)
            train[f"train_frontier_share_{name}"] = round(sum(r["frontier"] for r in rows) / len(rows), 4)
        train["train_replays"] = sum(r["replays"] for r in arms["on"])
    result = {
        "envs": args.envs,
        "p": args.p,
        "score": args.score,
        "seeds": seeds,
        "per_seed": per_seed,
        "frontier_share_delta_ci95": [round(f_on - f_off - half, 4), round(f_on - f_off + half, 4)],
        "on_ahead_seeds": sum(1 for d in deltas if d > 0),
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
        "designer_ratio_groups": ratio_bg,
        "designer_used_ratio": round(shares[ratio_bg][1] / shares[ratio_bg][0], 4) if ratio_bg else None,
        **{f"designer_used_share_before_{bg}": round(b, 4) for bg, (b, _) in shares.items()},
        **{f"designer_used_share_after_{bg}": round(a, 4) for bg, (_, a) in shares.items()},
        **{f"designer_used_before_{bg}": ub for bg, (ub, _, _) in counts.items()},
        **{f"designer_used_after_{bg}": ua for bg, (_, ua, _) in counts.items()},
        **{f"designer_candidates_{bg}": c for bg, (_, _, c) in counts.items()},
        **train,
    }
    if args.report:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from results_page import write_results

        print(f"results page {write_results('curriculum', result, render)}")
    print(json.dumps(result))


def render(r: dict) -> str:
    """The results page's body: level replay on against off, per seed and on average."""
    lo, hi = r["frontier_share_delta_ci95"]
    lines = [
        f"The procedural simulation (real sandbox, procedural policy), {r['envs']} new environments per run, level replay "
        f"off and on (`replay.p` {r['p']}, score `{r['score']}`) at seeds {', '.join(map(str, r['seeds']))}. Frontier share: "
        "the share of training rounds (new environments' rounds and replays) whose plain win rate is in the band.",
        "",
        "| seed | frontier share off | on | replays | mean regret off | on |",
        "|---|---|---|---|---|---|",
    ]
    for p in r["per_seed"]:
        lines.append(f"| {p['seed']} | {p['frontier_share_off']:.3f} | {p['frontier_share_on']:.3f} | {p['replays']} | "
                     f"{p['regret_off']:.3f} | {p['regret_on']:.3f} |")
    lines += ["", f"Mean: off {r['frontier_share_off']:.3f}, on {r['frontier_share_on']:.3f}, on - off "
              f"{r['frontier_share_delta']:+.3f} [{lo:+.3f}, {hi:+.3f}] (95%, over seeds); on ahead at "
              f"{r['on_ahead_seeds']} of {len(r['seeds'])} seeds."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
