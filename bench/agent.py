"""Benchmark of the Reasoning Agent with a real model: the bundled seed environments played through
the real sandbox and runner, under the current agent prompt and under the previous one.

Two arms in the same run, with the same loaded model and the same play seeds:

* **current**: :data:`~spade_engine.engine.rollouts.AGENT_SYSTEM_PROMPT` and today's ``TextGame``
  instruction lines ("Please reason step by step, and put your final answer within \\boxed{}");
* **baseline**: the previous prompt (``\\boxed{<action>}``) and instruction lines
  (``\\boxed{answer}`` / ``\\boxed{action}``), put back into each environment's inlined base class.

Each environment of ``--format`` (``puzzle``, ``scaffold``, ``standalone`` or ``all``) is played
``--plays`` times without a hint, greedy by default (``--temperature``), with the agent's token
limit ``--max-new-tokens`` (default 512: the config's 8,192 is the release's, hours on a CPU).

Prints one line per play and, as its LAST line, one JSON object: the current arm's
``solved_share`` (plays with episode reward 1), ``mean_reward``, ``boxed_share`` (agent replies
with a ``\\boxed{}``), ``tag_share`` (replies with ``<action>``/``<answer>`` tags instead),
``placeholder_share`` (replies whose boxed text is a placeholder: ``answer``, ``action``,
``<action>``), ``end_reasons``, ``agent_tokens_per_s``; the same under ``baseline``; and the
deltas current - baseline.

    python3 bench/agent.py --model ~/.cache/spade-models/qwen2.5-coder-0.5b-instruct/hf --n 5
    python3 bench/agent.py --model tiny:1 --n 2 --max-new-tokens 8      # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()  # no tqdm or Hugging Face progress bars in the benchmark's output

from spade_engine.config import load_config  # noqa: E402
from spade_engine.engine.rollouts import AGENT_SYSTEM_PROMPT, PlaySpec, parse_boxed, play_episodes  # noqa: E402
from spade_engine.engine.seed_archive import load_seed_envs  # noqa: E402
from spade_engine.events.store import new_run_id  # noqa: E402
from spade_engine.policy.hf import model_source  # noqa: E402
from spade_engine.policy.transformers_policy import TransformersPolicy  # noqa: E402
from spade_engine.runs.engine import open_engine  # noqa: E402
from spade_engine.sandbox.scaffold import BASE_SOURCE, code_format  # noqa: E402
from spade_engine.engine.seeds import derive_seed  # noqa: E402

BASELINE_PROMPT = (
    "You are playing an interactive text environment. Each turn you see an observation. Think "
    "briefly, then reply with exactly one action wrapped as \\boxed{<action>}. The environment "
    "only reads the last \\boxed{...} in your reply."
)
#: today's TextGame instruction lines -> the previous ones (as written in textgame.py's source)
BASELINE_LINES = {
    "Please reason step by step, and put your final answer within \\\\boxed{}.": "Reply with your answer written as \\\\boxed{answer}.",
    "Each turn, think briefly, then put your one action within \\\\boxed{}.": "Reply with one action per turn, written as \\\\boxed{action}.",
    "No answer found: put your final answer within \\\\boxed{}.": "No answer found: write it as \\\\boxed{answer}.",
    "No action found: put your one action within \\\\boxed{}.": "No action found: reply with one action written as \\\\boxed{action}.",
}
_TAGS = re.compile(r"<(action|answer)>", re.IGNORECASE)
_PLACEHOLDERS = {"answer", "action", "<action>", "<answer>", "...", ""}


def baseline_code(code: str) -> str:
    """``code`` with the previous instruction lines (refused when textgame.py no longer holds
    today's lines: the baseline arm would silently play the current ones)."""
    stale = [new for new in BASELINE_LINES if new not in BASE_SOURCE]
    if stale:
        raise SystemExit(f"bench/agent.py: BASELINE_LINES is out of date with sandbox/textgame.py (missing {stale})")
    for new, old in BASELINE_LINES.items():
        code = code.replace(new, old)
    return code


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_arm(policy: Any, ctx: Any, cfg: Any, arm: str, envs: list, a: argparse.Namespace, say: Any) -> dict[str, Any]:
    prompt = AGENT_SYSTEM_PROMPT if arm == "current" else BASELINE_PROMPT
    settings = {**ctx.settings("agent"), "max_new_tokens": a.max_new_tokens, "temperature": a.temperature}
    replies, rewards, ends, tokens = [], [], Counter(), 0
    t0 = time.perf_counter()
    for env in envs:
        code = env.code if arm == "current" else baseline_code(env.code)
        specs = [PlaySpec(index=i, hinted=False, seed=derive_seed(a.seed, env.name, "play", i)) for i in range(a.plays)]

        def open_session(code: str = code) -> Any:
            return ctx.pool.open_session(code, step_timeout_s=cfg.sandbox.step_timeout_s, max_turns=cfg.loop.turn_limit)

        for p in play_episodes(env_id=f"bench-{env.name}", specs=specs, open_session=open_session, generate=ctx.generate,
                               policy_version="v0", hint=None, turn_limit=cfg.loop.turn_limit, settings=settings,
                               system_prompt=prompt):
            rewards.append(p.episode_reward)
            ends[p.end_reason] += 1
            for turn in p.turns:
                ids = turn.generation.completion_token_ids if turn.generation else []
                tokens += len(ids)
                replies.append(policy.tokenizer.decode(ids, skip_special_tokens=True))
            last = replies[-1] if p.turns else ""
            say(f"[{arm}] {env.name} play {p.index}: reward {p.episode_reward:.2f}, {p.end_reason}, {len(p.turns)} turn(s); "
                f"last reply ends {last[-80:]!r}")
    wall = time.perf_counter() - t0
    boxed = [parse_boxed(r) for r in replies]
    n = max(1, len(replies))
    return {
        "plays": len(rewards),
        "solved_share": round(sum(1 for r in rewards if r >= 1.0) / max(1, len(rewards)), 4),
        "mean_reward": round(sum(rewards) / max(1, len(rewards)), 4),
        "replies": len(replies),
        "boxed_share": round(sum(1 for b in boxed if b is not None) / n, 4),
        "tag_share": round(sum(1 for r, b in zip(replies, boxed) if b is None and _TAGS.search(r)) / n, 4),
        "placeholder_share": round(sum(1 for b in boxed if b is not None and b.strip().lower() in _PLACEHOLDERS) / n, 4),
        "end_reasons": dict(ends.most_common()),
        "agent_tokens": tokens,
        "agent_tokens_per_s": round(tokens / wall, 2) if wall > 0 else None,
        "wall_s": round(wall, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a catalogue name (spade-engine models list), a model directory, a .gguf file, or tiny[:SEED] for a smoke run")
    ap.add_argument("--format", default="puzzle", choices=["puzzle", "scaffold", "standalone", "all"],
                    help="which bundled seed environments to play")
    ap.add_argument("--n", type=int, default=None, help="environments (default: all of the format)")
    ap.add_argument("--plays", type=int, default=1, help="plays per environment")
    ap.add_argument("--max-new-tokens", type=int, default=512, help="the agent's token limit per reply")
    ap.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    ap.add_argument("--arms", default="baseline,current", help="which arms to run, in order")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    def say(line: str) -> None:
        print(line, flush=True)

    envs = [s for s in load_seed_envs("bundled") if args.format == "all" or code_format(s.code) == args.format]
    envs = envs[: args.n] if args.n else envs
    t0 = time.perf_counter()
    policy = TransformersPolicy.from_pretrained(model_source(args.model))
    say(f"model {args.model} loaded in {time.perf_counter() - t0:.0f}s; {len(envs)} {args.format} environments x "
        f"{args.plays} play(s), agent limit {args.max_new_tokens} tokens, temperature {args.temperature}; load {load()}")
    cfg = load_config(overrides={"seed": args.seed, "policy.kind": "transformers", "policy.model": "bench",
                                 "loop.seed_envs": "none"}, environ={})
    arms: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp, \
            open_engine(cfg, run_id=new_run_id(), data_dir=Path(tmp), create=True, policy=policy) as opened:
        for arm in [x.strip() for x in args.arms.split(",") if x.strip()]:
            arms[arm] = res = run_arm(policy, opened.engine.ctx, cfg, arm, envs, args, say)
            say(f"[{arm}] solved {res['solved_share']:.0%} of {res['plays']} plays, mean reward {res['mean_reward']}; "
                f"replies with \\boxed{{}} {res['boxed_share']:.0%}, with tags instead {res['tag_share']:.0%}, "
                f"placeholders {res['placeholder_share']:.0%}; {res['agent_tokens']} tokens at {res['agent_tokens_per_s']} tok/s, "
                f"{res['wall_s']}s; end reasons {res['end_reasons']}")
    current, base = arms.get("current", {}), arms.get("baseline")
    out: dict[str, Any] = {k: current.get(k) for k in ("solved_share", "mean_reward", "boxed_share", "tag_share",
                                                         "placeholder_share", "end_reasons", "agent_tokens_per_s")}
    if base and current:
        out.update({f"delta_{k}": round(current[k] - base[k], 4) for k in ("solved_share", "mean_reward", "boxed_share", "tag_share")})
    out.update({"model": args.model, "format": args.format, "envs": len(envs), "current": current, "baseline": base, "load_end": load()})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
