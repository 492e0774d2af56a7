"""Does self-play help? SPADE self-play against a fixed pool, in miniature, at matched trained tokens.

One agent model (default: the catalogue's ``qwen2.5-coder-0.5b-instruct``, served by llama.cpp,
trained by the engine's GRPO trainer with LoRA adapters synced into llama.cpp after each update)
and four arms, each an ordinary engine run (``spade-engine replay RUN --verify`` passes on it):

* **A, self-play**: the engine's designer writes one-answer puzzle environments (``--designer-format``)
  from its corpus and memory, the agent is hinted and plays them, the agent is trained on its
  plays. The designer is ``--designer-model`` (default: the catalogue's 1.5B, frozen: the 0.5B
  writes no sound environment, see the docs' designer results; the public SPADE release likewise
  ships a static pool written by a larger model), or ``--designer-model same``: the trained model
  designs too and is trained on both roles, as SPADE does when the model can design. The bundled
  seed puzzles of the format are played too (``loop.seed_plays``), so the agent has something to
  train on before the designer's first accepted environment;
* **B, fixed pool**: the reasoning-gym tasks of ``bench/learning.py`` (``--train-tasks``, items of
  the training seed range), real reward;
* **C, no training**: the base weights (``v0``, evaluated once in A's run);
* **D, random reward**: B's pool, every play's reward replaced by a coin flip before the
  advantages (``trainer.reward_control = "coin"``): what training on the model's own samples
  gives without the reward.

Matched compute: A trains first, for ``--minutes`` (it is the slowest to produce trainable plays);
B and D then train until their updates have consumed A's trained tokens (checked after every
update, so they overshoot by at most one update; ``trained_token_ratio_*`` in the JSON).

Held out twice: (1) ``--eval-tasks``, reasoning-gym tasks that neither arm trains on (the engine
skills that practise them are left out of A's designer skills and seeds, and B's tasks may not
practise them either); (2) items of B's tasks from the evaluation seed range (B practised the
task, never the item). Both greedy, scored by the tasks' verifiers, recorded as
``EvaluationCompleted`` in each arm's run (every ``--eval-every`` updates and the final version),
compared paired on items: arm minus C and A minus B, per split, with paired 95% intervals.
Whatever sign comes out is reported; nothing is tuned on the evaluation items.

Prints progress, and as its LAST line one JSON object (accuracies and deltas per split with
intervals, trained tokens per arm, the learning curves, runs, load average). With ``--report`` it
writes ``docs/results/<date>-selfplay.{json,md,png,html}``.

    python3 bench/selfplay_vs_fixed.py                  # 0.5B agent, 1.5B designer, llama.cpp on CPU (about 2 hours)
    python3 bench/selfplay_vs_fixed.py --designer-model same --minutes 20
    python3 bench/selfplay_vs_fixed.py --smoke          # tiny random GGUF models, tiny sizes (CI)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()  # no tqdm or Hugging Face progress bars in the benchmark's output

from learning import TASKS as TRAIN_TASKS  # noqa: E402
from learning import CappedTrainer, curve_figures, curves, say, timed_training  # noqa: E402
from spade_engine.compare.summary import compute, paired_accuracy  # noqa: E402
from spade_engine.config import load_config  # noqa: E402
from spade_engine.engine.seed_archive import BUNDLED_DIR  # noqa: E402
from spade_engine.envsources import fixed_source_overrides, parse_env_source  # noqa: E402
from spade_engine.evaluation.runner import EVAL_PROMPTS  # noqa: E402
from spade_engine.events.store import new_run_id, open_event_log  # noqa: E402
from spade_engine.runs.engine import open_engine  # noqa: E402
from spade_engine.sandbox.scaffold import code_format  # noqa: E402

#: held-out tasks: none shares an engine skill with the training tasks (basic_arithmetic and
#: chain_sum -> arithmetic). Chosen by the 0.5B's base accuracy (greedy, 320 tokens,
#: agent-plain-v1, 16 items of evaluation seed 96, which no run evaluates on, 2026-12-08):
#: simple_equations 3, number_sequence 2, number_sorting 1, and 0 for letter_counting,
#: spell_backward, propositional_logic, syllogism and word_sorting (lcm: 1 of 16 under agent-v1).
#: The earlier default, syllogism, word_sorting and lcm, had 1 right of 90 at v0: nothing could show
EVAL_TASKS = ("simple_equations", "number_sequence", "lcm")
DESIGNER_MODEL = "qwen2.5-coder-1.5b-instruct"

#: engine skills that practise what a reasoning-gym task evaluates: left out of arm A's seeds and
#: designer skills when that task is held out, and refused in B's pool
TASK_SKILLS: dict[str, tuple[str, ...]] = {
    "gcd": ("gcd_steps",), "lcm": ("gcd_steps",), "prime_factorization": ("gcd_steps",),
    "basic_arithmetic": ("arithmetic",), "leg_counting": ("arithmetic",), "chain_sum": ("arithmetic",),
    "decimal_arithmetic": ("arithmetic",), "products": ("arithmetic",), "fraction_simplification": ("gcd_steps", "arithmetic"),
    "simple_equations": ("linear_equation",), "polynomial_equations": ("linear_equation",),
    "number_sequence": ("sequence",), "letter_counting": ("string_ops",), "spell_backward": ("string_ops",),
    "caesar_cipher": ("string_ops",), "word_sorting": ("ordering", "sort_swaps"), "number_sorting": ("ordering", "sort_swaps"),
    "syllogism": ("truth_table",), "propositional_logic": ("truth_table",), "shortest_path": ("graph_path",),
}

ARMS = {"a": "A (self-play)", "b": "B (fixed pool)", "c": "C (no training)", "d": "D (random reward)"}
COLORS = {"a": "#16a34a", "b": "#2563eb", "c": "#6b7280", "d": "#dc2626"}


def held_out_skills(eval_tasks: list[str]) -> list[str]:
    """The engine skills arm A must not practise when ``eval_tasks`` are held out."""
    return sorted({skill for task in eval_tasks for skill in TASK_SKILLS.get(task, ())})


def format_seeds(fmt: str, data: Path, exclude_skills: list[str]) -> Path:
    """A directory with the bundled seed environments of designer format ``fmt``, without those
    of the held-out skills."""
    out = data / f"seeds-{fmt}"
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(BUNDLED_DIR.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        skill = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("# skill:")), "")
        if code_format(text) == fmt and skill not in exclude_skills:
            shutil.copyfile(path, out / path.name)
    if not any(out.glob("*.py")):
        raise SystemExit(f"no bundled seed environment has designer format {fmt!r} outside {exclude_skills}")
    return out


def common_overrides(a: argparse.Namespace) -> dict[str, Any]:
    """What every training arm shares: the agent model and its serving, the plays, the trainer
    and the held-out evaluation."""
    return {
        "seed": a.seed, "policy.kind": "llamacpp", "policy.model": a.model, "policy.llamacpp.parallel": a.parallel,
        "policy.generation.agent.max_new_tokens": a.max_new_tokens, "policy.generation.agent.temperature": a.temperature,
        "policy.generation.agent.top_p": 1.0, "policy.generation.hinter.max_new_tokens": 96,
        "loop.plain_plays": a.plays, "loop.hinted_plays": 1, "loop.turn_limit": 1, "loop.concurrent_envs": a.concurrent_envs,
        "trainer.enabled": True, "trainer.lora": True, "trainer.lora_r": a.lora_r, "trainer.lora_alpha": 2 * a.lora_r,
        "trainer.batch_groups": a.batch_groups, "trainer.learning_rate": a.lr, "trainer.device": "cpu",
        "trainer.micro_batch_size": a.micro_batch, "trainer.max_lag": 2, "trainer.logits_chunk": 128,
        "eval.every": a.eval_every or 1_000_000, "eval.suites": ["reasoning-gym:" + ",".join([*a.eval_tasks, *a.train_tasks])],
        "eval.size": a.eval_size, "eval.seed": a.eval_seed, "eval.max_new_tokens": a.eval_max_new_tokens,
        "eval.batch_size": 32, "eval.base": False, "eval.prompt": a.eval_prompt,
        "sandbox.workers": (a.plays + 1) * a.concurrent_envs,  # the hinted play too: every play of a round decodes together
    }


def arm_overrides(arm: str, a: argparse.Namespace, data: Path) -> dict[str, Any]:
    base = common_overrides(a)
    if arm == "a":
        from spade_engine.engine.skills import skill_names

        held = held_out_skills(a.eval_tasks)
        same = a.designer_model == "same"
        return {
            **base, "eval.base": True,  # C: the base weights, evaluated once, here
            "policy.designer_model": None if same else a.designer_model,
            "trainer.train_designer": same,
            "policy.generation.designer.max_new_tokens": a.designer_max_new_tokens,
            "loop.designer_format": a.designer_format, "loop.repair_shows_code": False, "loop.max_repairs": 1,
            "loop.designer_batch": 4, "loop.max_envs": 100_000,
            "loop.skills": [s for s in skill_names("engine") if s not in held],
            "loop.seed_envs": str(format_seeds(a.designer_format, data, held)), "loop.seed_plays": True,
        }
    source = "reasoning-gym:" + ",".join(a.train_tasks) + f"?size={a.pool_size}"
    return {
        **base, "loop.env_source": source, **fixed_source_overrides(parse_env_source(source)),
        "loop.max_envs": 100_000, "loop.designer_batch": a.batch_groups, "trainer.train_designer": False,
        "trainer.reward_control": "coin" if arm == "d" else "none",
    }


def run_arm(arm: str, a: argparse.Namespace, data: Path, *, seconds: float, token_budget: int | None) -> dict[str, Any]:
    name = ARMS[arm]
    cfg = load_config(overrides=arm_overrides(arm, a, data), environ={})
    run_id = new_run_id()
    budget = f"{token_budget} trained tokens" if token_budget else f"{seconds / 60:.0f} minutes"
    say(f"arm {name}: run {run_id}, up to {a.updates} updates or {budget}")
    t0 = time.perf_counter()
    with open_engine(cfg, run_id=run_id, data_dir=data, create=True) as opened:
        engine = opened.engine
        capped = CappedTrainer(engine.trainer, a.updates, engine.stop, token_budget=token_budget)
        engine.trainer = capped
        timer = timed_training(engine, capped, seconds)
        seen = [0, 0]

        def progress(state: Any) -> None:
            n, envs = len(state.policy_updates), len(state.roots())
            if (n, envs) != tuple(seen):
                seen[:] = [n, envs]
                m = state.policy_updates[-1].metrics if n else {}
                say(f"arm {name}: {envs} environments, {n} updates, {capped.trained_tokens()} trained tokens, "
                    f"last train reward {m.get('agent_reward_mean', float('nan')):.3f}, "
                    f"{(time.perf_counter() - t0) / 60:.1f} min")

        engine.on_progress = progress
        try:
            reason = engine.run()
        finally:
            timer.cancel()
        train_s = timer.training_seconds()
        updates = list(engine.state.policy_updates)
        stats = engine.state.stats()
        evaluator = engine.trainer.evaluator
        if updates and evaluator is not None:
            last = updates[-1]
            say(f"arm {name}: stopped ({reason}) after {train_s / 60:.1f} min and {len(updates)} updates; evaluating {last.version}")
            evaluator.evaluate_version(last.version, last.checkpoint, adapter=last.adapter)
        elif evaluator is not None:
            say(f"arm {name}: stopped ({reason}) after {train_s / 60:.1f} min with no update (no group had reward variance)")
            if arm != "a":  # A's run evaluated v0 already (eval.base)
                evaluator.evaluate_version("v0", None)
        wall = time.perf_counter() - t0
    log = open_event_log(run_id, data_dir=data)
    try:
        spent = compute(log)
    finally:
        log.close()
    return {"run_id": run_id, "reason": reason, "updates": len(updates), "trained_tokens": capped.trained_tokens(),
            "train_seconds": round(train_s, 1), "seconds": round(wall, 1), "environments": stats["roots"],
            "accepted": stats["accepted"], "plays": stats["plays"], "completion_tokens": spent.completion_tokens,
            "agent_tokens": spent.agent_tokens, "designer_tokens": spent.designer_tokens}


def compare(data: Path, run_x: str, ver_x: str, run_y: str, ver_y: str, splits: dict[str, list[str]]) -> dict[str, Any]:
    """Y's accuracy minus X's, paired on items, pooled over each split's tasks."""
    lx, ly = open_event_log(run_x, data_dir=data), open_event_log(run_y, data_dir=data)
    try:
        cmp = paired_accuracy(lx, ly, version_a=ver_x, version_b=ver_y)
    finally:
        lx.close()
        ly.close()
    out: dict[str, Any] = {}
    for split, tasks in splits.items():
        part = dataclasses.replace(cmp, tasks=[t for t in cmp.tasks if t.task in tasks])
        d, lo, hi, n = part.pooled()
        out[split] = {"delta": round(d, 4), "ci95": [round(lo, 4), round(hi, 4)], "items": n,
                      "x": round(part.micro_a or 0.0, 4), "y": round(part.micro_b or 0.0, 4),
                      "per_task": {t.task: {"x": round(t.accuracy_a, 4), "y": round(t.accuracy_b, 4)} for t in part.tasks}}
    return out


def arm_curves(data: Path, arms: dict[str, Any]) -> dict[str, Any]:
    """Each training arm's curves, B's and D's starting from the base point evaluated in A's run."""
    out = {k: curves(data, arms[k]["run_id"]) for k in ("a", "b", "d")}
    base = [p for p in out["a"]["heldout"] if p["version"] == "v0"]
    for k in ("b", "d"):
        out[k]["heldout"] = base + out[k]["heldout"]
    return out


def figures(result: dict[str, Any]) -> dict[str, bytes]:
    """Held-out accuracy (both splits together) and training reward against trained tokens, per arm."""
    arms = {k: v for k, v in result["curves"].items() if v}
    return curve_figures(arms, ARMS, COLORS, heldout_title="held-out accuracy, all held-out items (greedy, 95% Wilson)")


def render(r: dict[str, Any]) -> str:
    """The results page's body."""
    stem = f"{r['provenance']['date']}-selfplay"
    designer = "the agent model itself (trained on both roles)" if r["designer_model"] == "same" else f"`{r['designer_model']}` (frozen)"
    lines = [
        f"Agent `{r['model']}` (llama.cpp serving, LoRA r={r['lora_r']}, the engine's GRPO trainer, learning rate {r['lr']}, "
        f"{r['plays']} plays per environment at temperature {r.get('temperature', 1.0)}, {r['batch_groups']} groups per update). Arm A's designer: {designer}, "
        f"format `{r['designer_format']}`, skills {', '.join(r['held_out_skills']) or 'none'} held out. "
        f"Arms B and D train on reasoning-gym `{', '.join(r['train_tasks'])}` (training seed range).",
        "",
        f"Held-out tasks (no arm trained on them): `{', '.join(r['eval_tasks'])}`; held-out items of B's tasks: "
        f"`{', '.join(r['train_tasks'])}` from the evaluation seed range; {r['eval_size']} items per task, greedy, "
        f"{r['eval_max_new_tokens']} tokens per answer, prompt `{r.get('eval_prompt', 'boxed-v1')}`, evaluation seed "
        f"{r.get('eval_seed', 0)}. Deltas are paired over items with 95% intervals.",
        "",
        "| arm | updates | trained tokens | environments (accepted) | held-out tasks | held-out items |",
        "|---|---|---|---|---|---|",
    ]
    for k in ("c", "a", "b", "d"):
        arm = r["arms"][k]
        acc = r["accuracy"][k]
        lines.append(f"| {ARMS[k]} | {arm['updates']} | {arm['trained_tokens']} | {arm.get('environments', 0)} "
                     f"({arm.get('accepted', 0)}) | {acc['held_out_tasks']:.3f} | {acc['held_out_items']:.3f} |")
    lines += ["", "| comparison | held-out tasks | held-out items |", "|---|---|---|"]
    for key, label in (("a_c", "A - C"), ("b_c", "B - C"), ("d_c", "D - C"), ("a_b", "A - B")):
        d = r["deltas"][key]
        cells = [f"{d[s]['delta']:+.3f} [{d[s]['ci95'][0]:+.3f}, {d[s]['ci95'][1]:+.3f}] ({d[s]['items']} items)"
                 for s in ("held_out_tasks", "held_out_items")]
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    lines += ["", f"Trained tokens relative to A: B {r['trained_token_ratio_b_a']}, D {r['trained_token_ratio_d_a']}. "
              f"Wall time {r['minutes']:.0f} minutes; load average {r['load_average_start']} at the start, "
              f"{r['load_average_end']} at the end.", "",
              f"![learning curves]({stem}.png)", "", f"Interactive: [{stem}.html]({stem}.html)", "",
              "Runs (replay with `spade-engine replay RUN --verify`): "
              + ", ".join(f"{ARMS[k]} `{r['arms'][k]['run_id']}`" for k in ("a", "b", "d")) + "."]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny random GGUF models and tiny sizes (checks the script; CI)")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct", help="the agent model (trained)")
    ap.add_argument("--designer-model", default=DESIGNER_MODEL,
                    help="arm A's designer: a frozen model, or 'same' (the agent model designs and is trained on both roles)")
    ap.add_argument("--designer-format", choices=("standalone", "scaffold", "puzzle"), default="puzzle")
    ap.add_argument("--designer-max-new-tokens", type=int, default=1024)
    ap.add_argument("--train-tasks", nargs="+", default=list(TRAIN_TASKS), help="arms B and D's pool")
    ap.add_argument("--eval-tasks", nargs="+", default=list(EVAL_TASKS), help="held-out tasks (no arm trains on them)")
    ap.add_argument("--pool-size", type=int, default=400, help="items per training task")
    ap.add_argument("--plays", type=int, default=8, help="plain plays per environment (the GRPO group)")
    ap.add_argument("--batch-groups", type=int, default=4, help="groups with reward variance per update")
    ap.add_argument("--updates", type=int, default=40, help="most updates per arm")
    ap.add_argument("--minutes", type=float, default=30.0, help="arm A's training time (B and D are matched on its trained tokens)")
    ap.add_argument("--lr", type=float, default=1e-4,
                    help="LoRA learning rate. 1e-4: on the 0.5B's first batch of 32 answers a step moves the policy by "
                         "KL 0.009 a token and raises the right answers most; 2e-4 (the default until 2026-12-05) moves it "
                         "by 0.06 and lowers mostly the wrong ones, and the next answers ran longer and scored a tenth as "
                         "often (bench/step_size.py, docs/results/2026-12-05-step-size.md)")
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=320, help="tokens per training answer (bench/learning.py's)")
    ap.add_argument("--temperature", type=float, default=0.7,
                    help="the agent's sampling temperature in training plays (bench/learning.py's: its reported gain was at 0.7)")
    ap.add_argument("--parallel", type=int, default=16, help="sequences llama.cpp decodes together")
    ap.add_argument("--concurrent-envs", type=int, default=2, help="environments played at once")
    ap.add_argument("--eval-size", type=int, default=40, help="held-out items per task")
    ap.add_argument("--eval-seed", type=int, default=0)
    ap.add_argument("--eval-every", type=int, default=0, help="also evaluate every N updates (0: v0 and the final ones)")
    ap.add_argument("--eval-max-new-tokens", type=int, default=320)
    ap.add_argument("--eval-prompt", choices=tuple(EVAL_PROMPTS), default="agent-plain-v1",
                    help="the held-out items' prompt: agent-plain-v1 (the agent's system prompt, which every arm trains "
                         "under, and the bare question: A's puzzles end with 'Please reason step by step...', B's and D's "
                         "items with the pool's instruction, so neither arm is asked its own way); agent-v1 would ask as B "
                         "trains; boxed-v1 is the runs' default until 2026-12-07, a prompt no arm trains under")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, default=None, help="keep the runs here (default: a temporary directory)")
    ap.add_argument("--report", action="store_true", help="write docs/results/<date>-selfplay.{json,md,png,html}")
    a = ap.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="spade-bench-selfplay-")
    if a.smoke:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from models_support import write_tiny_gguf

        agent, designer = Path(tmp.name) / "agent.gguf", Path(tmp.name) / "designer.gguf"
        write_tiny_gguf(agent, arch="qwen2", seed=0)
        write_tiny_gguf(designer, arch="qwen2", seed=1)
        os.environ["SPADE_MODEL_CACHE"] = str(Path(tmp.name) / "cache")
        a.model, a.designer_model = str(agent), str(designer)
        a.train_tasks, a.eval_tasks, a.pool_size, a.plays, a.batch_groups, a.updates = ["letter_counting"], ["lcm"], 4, 2, 1, 1
        a.max_new_tokens, a.designer_max_new_tokens, a.eval_size, a.eval_max_new_tokens = 4, 8, 3, 4
        a.minutes, a.parallel, a.lr, a.concurrent_envs = 0.5, 4, 1e-3, 1
    overlap = set(a.train_tasks) & set(a.eval_tasks)
    if overlap:
        ap.error(f"--train-tasks and --eval-tasks overlap: {sorted(overlap)} (the evaluation must be held out)")
    held = held_out_skills(a.eval_tasks)
    practised = sorted(set(held) & {s for t in a.train_tasks for s in TASK_SKILLS.get(t, ())})
    if practised:
        ap.error(f"--train-tasks practise the held-out skills {practised} (the evaluation must be held out)")
    load_start = round(os.getloadavg()[0], 2)
    t_all = time.perf_counter()
    data = a.data_dir or Path(tmp.name) / "data"
    data.mkdir(parents=True, exist_ok=True)
    say(f"agent {a.model}, designer {a.designer_model}; held-out tasks {', '.join(a.eval_tasks)} (skills "
        f"{', '.join(held) or 'none'} held out of A), held-out items of {', '.join(a.train_tasks)}; "
        f"{a.eval_size} items per task; load average {load_start}")
    arms = {"a": run_arm("a", a, data, seconds=a.minutes * 60, token_budget=None)}
    budget = max(arms["a"]["trained_tokens"], 1)
    for k in ("b", "d"):
        arms[k] = run_arm(k, a, data, seconds=a.minutes * 60 * 3, token_budget=budget)
    arms["c"] = {"run_id": arms["a"]["run_id"], "version": "v0", "updates": 0, "trained_tokens": 0}
    splits = {"held_out_tasks": list(a.eval_tasks), "held_out_items": list(a.train_tasks)}
    base_run = arms["a"]["run_id"]
    deltas = {f"{k}_c": compare(data, base_run, "v0", arms[k]["run_id"], "latest", splits) for k in ("a", "b", "d")}
    deltas["a_b"] = compare(data, arms["b"]["run_id"], "latest", arms["a"]["run_id"], "latest", splits)
    accuracy = {"c": {s: deltas["a_c"][s]["x"] for s in splits}}
    for k in ("a", "b", "d"):
        accuracy[k] = {s: deltas[f"{k}_c"][s]["y"] for s in splits}
    ratio = lambda k: round(arms[k]["trained_tokens"] / arms["a"]["trained_tokens"], 3) if arms["a"]["trained_tokens"] else None  # noqa: E731
    result = {
        "model": a.model, "designer_model": a.designer_model, "designer_format": a.designer_format, "smoke": a.smoke,
        "train_tasks": a.train_tasks, "eval_tasks": a.eval_tasks, "held_out_skills": held, "pool_size": a.pool_size,
        "plays": a.plays, "batch_groups": a.batch_groups, "lr": a.lr, "lora_r": a.lora_r, "eval_size": a.eval_size,
        "eval_max_new_tokens": a.eval_max_new_tokens, "eval_prompt": a.eval_prompt, "eval_seed": a.eval_seed,
        "temperature": a.temperature, "max_new_tokens": a.max_new_tokens,
        "accuracy": accuracy, "deltas": deltas,
        "delta_a_c": deltas["a_c"]["held_out_tasks"]["delta"], "delta_b_c": deltas["b_c"]["held_out_tasks"]["delta"],
        "delta_a_b": deltas["a_b"]["held_out_tasks"]["delta"],
        **{f"arm_{k}_trained_tokens": arms[k]["trained_tokens"] for k in ("a", "b", "d")},
        **{f"arm_{k}_updates": arms[k]["updates"] for k in ("a", "b", "d")},
        "trained_token_ratio_b_a": ratio("b"), "trained_token_ratio_d_a": ratio("d"),
        "arms": arms,
        "curves": arm_curves(data, arms),
        "minutes": round((time.perf_counter() - t_all) / 60, 1),
        "load_average_start": load_start, "load_average_end": round(os.getloadavg()[0], 2),
    }
    for key in ("a_c", "b_c", "d_c", "a_b"):
        d = deltas[key]
        say(f"{key.replace('_', ' - ').upper()}: held-out tasks {d['held_out_tasks']['delta']:+.3f} {d['held_out_tasks']['ci95']}, "
            f"held-out items {d['held_out_items']['delta']:+.3f} {d['held_out_items']['ci95']}")
    if a.report:
        from results_page import write_results

        page = write_results("selfplay", result, render, extra_files=figures(result))
        say(f"results page {page}")
    if a.data_dir is None:
        tmp.cleanup()
    print(json.dumps(result, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
