"""Benchmark of the procedural designer's novelty: how many of its proposals are new environments.

The procedural policy (a simulation, not an LLM) writes environment code from the templates of
``spade_policy/procedural/families.py``. A proposal is *novel* when its novelty
(1 - max cosine similarity of the embedding of ``novelty_text(code)`` against every accepted
environment) reaches ``memory.novelty_threshold``; a valid proposal that is not novel is a
duplicate and is not played. This script runs a seeded procedural run and reports:

* ``novel_share``: novel proposals / proposals that reached the novelty check (valid ones);
* ``novel_share_of_proposals``: novel proposals / all proposals (repairs and invalid included);
* ``accepted_share``: accepted / all proposals;
* ``novel_share_last_quarter``: the novel share among the last quarter of checked proposals
  (the archive is fullest there);
* duplicates by family, and the wall time split into sandbox, policy and embedding work
  (the stage timings) and the rest, with ``s_per_env`` = wall seconds per environment.

Three modes, all with the real embedding model and the default config (seeded):

* ``loop`` (default): the real engine loop (``Engine.run``, as ``spade-engine start --max-envs N``
  does): sandboxed validation, hints, k plain + k hinted sandboxed plays, regret, live projections;
* ``stages``: the designer, validator and novelty stages only (``stages.propose``, ``validate``,
  ``propose_repair``) against an in-process memory of accepted environments. Plays are not run:
  each play's outcome is the procedural agent's own per-episode draw (it solves an episode exactly
  when ``Random("agent:<env>:<play seed>:<hinted>") < solve_probability``, see
  ``ProceduralPolicy._act``), which gives the adaptive designer the same difficulty feedback as
  the plays would, at a fraction of the cost. Nothing is written to the log in this mode;
* ``designer``: the designer and the novelty check only, with the designer's deliberate defects
  off (``policy.procedural.defect_rate = 0``, so there is nothing to validate or repair) and no sandbox;
  plays as in ``stages``; proposals are embedded in batches of one block of skills (which
  changes no decision, see :func:`run_designer`). The cheapest faithful measure of novelty,
  used by the slow test.

Prints figures, and as its LAST line one JSON object.

    python3 bench/novelty.py                       # 300 environments, real loop
    python3 bench/novelty.py --mode stages --n 1000
    python3 bench/novelty.py --mode designer --n 1000
    python3 bench/novelty.py --quick               # 30 environments
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()  # no tqdm or Hugging Face progress bars in the benchmark's output

from spade_engine.config import load_config  # noqa: E402
from spade_engine.engine import stages  # noqa: E402
from spade_engine.engine.pipeline import env_id_for  # noqa: E402
from spade_engine.runs.engine import open_engine  # noqa: E402
from spade_engine.events.store import new_run_id  # noqa: E402


def _outcome(st_proposed: Any, st_validated: Any) -> dict[str, Any]:
    return {
        "env_id": st_proposed.env_id,
        "skill": st_proposed.skill,
        "attempt": st_proposed.attempt,
        "valid": bool(st_validated.valid),
        "novel": st_validated.novel,
        "novelty": st_validated.novelty,
        "accepted": bool(st_validated.valid and st_validated.accepted),
        "error_kind": st_validated.error_kind,
    }


def run_loop(cfg: Any, root: Path) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The real loop; outcomes of every proposal, in id order, and the timings."""
    with open_engine(cfg, run_id=new_run_id(), data_dir=root, create=True) as opened:
        engine = opened.engine
        engine.ctx.embedder.embed(["warm up"])  # model loading is startup, not loop time
        engine.ctx.timings.embedding = 0.0
        t0 = time.perf_counter()
        engine.run()
        wall = time.perf_counter() - t0
        outs = [_outcome(s.proposed, s.validated) for s in engine.state.proposed() if s.validated is not None]
        tm = engine.ctx.timings.as_dict()
    return outs, {"wall": wall, **tm}


def _simulated_plays(policy: Any, proposed: Any, seed: int, k: int) -> tuple[float, float]:
    """(plain win rate, regret) of k plain + k hinted plays decided by the procedural agent's
    per-episode draw (see the module docstring); a solved play has reward 1, an unsolved 0."""
    from spade_engine.policy.procedural.families import FAMILIES

    family = FAMILIES.get(proposed.skill)
    rewards: dict[bool, list[float]] = {False: [], True: []}
    for spec in stages.play_specs(seed, proposed.env_id, k):
        draw = random.Random(f"agent:{proposed.env_id}:{spec.seed}:{int(spec.hinted)}").random()
        rewards[spec.hinted].append(1.0 if draw < policy.solve_probability(family, proposed.difficulty, spec.hinted) else 0.0)
    plain, hinted = rewards[False], rewards[True]
    win = sum(plain) / len(plain)
    return win, max(0.0, sum(hinted) / len(hinted) - win)


def run_stages(cfg: Any, root: Path) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Designer + validator + novelty stages without plays (see the module docstring)."""
    from spade_engine.archive.memory import EnvironmentMemory, decode_embedding

    run_id = new_run_id()
    with open_engine(cfg, run_id=run_id, data_dir=root, create=True, projections=True) as opened:
        memory = EnvironmentMemory(None, cfg.memory)
        opened.engine.ctx = ctx = dataclasses.replace(opened.engine.ctx, memory=memory)
        history: dict[str, list[tuple[float, float, float]]] = {}
        recent: dict[str, str] = {}
        outs: list[dict[str, Any]] = []
        ctx.embedder.embed(["warm up"])
        ctx.timings.embedding = 0.0
        t0 = time.perf_counter()
        for index in range(int(cfg.loop.max_envs)):
            proposed = stages.propose(
                ctx, env_id=env_id_for(run_id, index), index=index,
                skill_history=lambda s: list(history.get(s, [])), recent_env=recent.get,
            )
            while True:
                verdict = stages.validate(ctx, proposed)
                outs.append(_outcome(proposed, verdict))
                if verdict.valid or proposed.attempt >= cfg.loop.max_repairs:
                    break
                proposed = stages.propose_repair(
                    ctx, env_id=env_id_for(run_id, index, proposed.attempt + 1), failed=proposed, verdict=verdict,
                    skill_history=lambda s: list(history.get(s, [])),
                )
            if verdict.valid and verdict.accepted:
                vec = decode_embedding(verdict.embedding_b64, memory.dim)
                memory.add(proposed.env_id, vec, skill=proposed.skill, code=proposed.code)
                recent[proposed.skill] = proposed.env_id
                win, regret = _simulated_plays(ctx.policy, proposed, cfg.seed, cfg.loop.plays_per_env)
                history.setdefault(proposed.skill, []).append((float(proposed.difficulty), win, regret))
        wall = time.perf_counter() - t0
        tm = ctx.timings.as_dict()
    return outs, {"wall": wall, **tm}


def run_designer(cfg: Any, root: Path) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The designer and the novelty check only: no sandbox, no log (see the module docstring).

    Environments are proposed in blocks of one per skill (``choose_skill`` covers every skill once
    per block), so a proposal's skill history only depends on earlier blocks: each block is
    embedded in one batch, then its proposals are judged against the memory in order, exactly as
    one-at-a-time embedding would judge them."""
    from spade_engine.archive.embedder import Embedder
    from spade_engine.archive.memory import EnvironmentMemory
    from spade_engine.engine.corpus import Corpus
    from spade_engine.engine.designer import novelty_text
    from spade_engine.policy.registry import make_policy

    del root
    policy = make_policy(cfg.policy, band=(cfg.reward.band_low, cfg.reward.band_high))
    ctx = stages.StageContext(run_id="run-novelty-bench0", cfg=cfg, policy=policy, corpus=Corpus.from_paths(cfg.loop.corpus))
    embedder = Embedder(cfg.memory.embedding_model)
    embedder.embed(["warm up"])
    memory = EnvironmentMemory(None, cfg.memory)
    history: dict[str, list[tuple[float, float, float]]] = {}
    outs: list[dict[str, Any]] = []
    block = len(ctx.skills())
    n = int(cfg.loop.max_envs)
    embedding_s = 0.0
    t0 = time.perf_counter()
    for first in range(0, n, block):
        props = [
            stages.propose(ctx, env_id=env_id_for(ctx.run_id, i), index=i, skill_history=lambda s: list(history.get(s, [])))
            for i in range(first, min(n, first + block))
        ]
        t1 = time.perf_counter()
        vecs = embedder.embed([novelty_text(p.code) for p in props])
        embedding_s += time.perf_counter() - t1
        for p, vec in zip(props, vecs):
            novelty, _ = memory.novelty(vec)
            novel = bool(novelty >= cfg.memory.novelty_threshold)
            outs.append({"env_id": p.env_id, "skill": p.skill, "attempt": 0, "valid": True, "novel": novel,
                         "novelty": float(novelty), "accepted": novel, "error_kind": None if novel else "duplicate"})
            if novel:
                memory.add(p.env_id, vec, skill=p.skill, code=p.code)
                win, regret = _simulated_plays(policy, p, cfg.seed, cfg.loop.plays_per_env)
                history.setdefault(p.skill, []).append((float(p.difficulty), win, regret))
    wall = time.perf_counter() - t0
    return outs, {"wall": wall, "sandbox": 0.0, "policy": ctx.timings.policy, "embedding": embedding_s}


def summarise(outs: list[dict[str, Any]], timing: dict[str, float], n: int) -> dict[str, Any]:
    checked = [o for o in outs if o["valid"] and o["novel"] is not None]
    novel = [o for o in checked if o["novel"]]
    dup = [o for o in checked if not o["novel"]]
    accepted = [o for o in outs if o["accepted"]]
    q = checked[-max(1, len(checked) // 4):] if checked else []
    by_family: dict[str, dict[str, int]] = {}
    for o in checked:
        b = by_family.setdefault(o["skill"], {"checked": 0, "novel": 0, "duplicate": 0})
        b["checked"] += 1
        b["novel" if o["novel"] else "duplicate"] += 1
    wall = timing["wall"]
    other = max(0.0, wall - timing["sandbox"] - timing["policy"] - timing["embedding"])
    return {
        "envs": n,
        "proposals": len(outs),
        "valid": sum(1 for o in outs if o["valid"]),
        "checked": len(checked),
        "novel": len(novel),
        "duplicates": len(dup),
        "accepted": len(accepted),
        "novel_share": round(len(novel) / len(checked), 4) if checked else 0.0,
        "novel_share_of_proposals": round(len(novel) / len(outs), 4) if outs else 0.0,
        "accepted_share": round(len(accepted) / len(outs), 4) if outs else 0.0,
        "novel_share_last_quarter": round(sum(1 for o in q if o["novel"]) / len(q), 4) if q else 0.0,
        "duplicates_by_family": {k: v["duplicate"] for k, v in sorted(by_family.items())},
        "novel_share_by_family": {k: round(v["novel"] / v["checked"], 3) for k, v in sorted(by_family.items())},
        "wall_s": round(wall, 2),
        "s_per_env": round(wall / n, 4) if n else 0.0,
        "sandbox_s": round(timing["sandbox"], 2),
        "policy_s": round(timing["policy"], 2),
        "embedding_s": round(timing["embedding"], 2),
        "other_s": round(other, 2),
        "sandbox_share": round(timing["sandbox"] / wall, 4) if wall else 0.0,
        "policy_share": round(timing["policy"] / wall, 4) if wall else 0.0,
        "embedding_share": round(timing["embedding"] / wall, 4) if wall else 0.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=300, help="environments (first proposals) in the run (default 300)")
    ap.add_argument("--mode", choices=("loop", "stages", "designer"), default="loop",
                    help="real loop; designer+validator+novelty stages; or designer+novelty only (defect-free, no sandbox)")
    ap.add_argument("--k", type=int, default=4, help="plain and hinted plays per environment (default 4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="30 environments")
    args = ap.parse_args()
    n = 30 if args.quick else args.n
    overrides: dict[str, Any] = {"seed": args.seed, "loop.max_envs": n, "loop.plays_per_env": args.k}
    if args.mode == "designer":
        overrides["policy.procedural.defect_rate"] = 0.0
    cfg = load_config(overrides=overrides, environ={})
    with tempfile.TemporaryDirectory(prefix="spade-bench-novelty-") as tmp:
        runner = {"loop": run_loop, "stages": run_stages, "designer": run_designer}[args.mode]
        outs, timing = runner(cfg, Path(tmp))
    res = {"mode": args.mode, "seed": args.seed, "threshold": cfg.memory.novelty_threshold, **summarise(outs, timing, n)}
    print(
        f"{args.mode}: {n} envs, {res['proposals']} proposals ({res['valid']} valid, {res['checked']} novelty-checked): "
        f"{res['novel']} novel ({res['novel_share']:.1%} of checked, {res['novel_share_of_proposals']:.1%} of proposals; "
        f"last quarter {res['novel_share_last_quarter']:.1%}), {res['duplicates']} duplicates, "
        f"{res['accepted']} accepted ({res['accepted_share']:.1%})"
    )
    print(
        f"wall {res['wall_s']:.1f}s ({res['s_per_env']:.3f} s/env): sandbox {res['sandbox_s']:.1f}s, policy {res['policy_s']:.2f}s, "
        f"embedding {res['embedding_s']:.1f}s, other {res['other_s']:.1f}s"
    )
    print("family            checked  novel  dup  novel share")
    for fam, share in res["novel_share_by_family"].items():
        dup = res["duplicates_by_family"][fam]
        checked = sum(1 for o in outs if o["skill"] == fam and o["valid"] and o["novel"] is not None)
        print(f"{fam:<17} {checked:>7} {checked - dup:>6} {dup:>4}  {share:.1%}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
