"""Does self-play help? SPADE self-play vs a fixed reasoning-gym pool vs no training, on held-out tasks.

Three arms, one base model (default: the catalogue's ``qwen2.5-coder-0.5b-instruct``; fetch it
with ``spade-engine models fetch`` and point ``SPADE_MODEL_CACHE`` at the cache):

* **A, self-play**: ``start --model M --train``: the model designs environments, writes hints,
  plays them, and the in-process trainer trains it (GRPO, both roles) between environments;
  with ``--seed-plays`` (default) it starts from the bundled seed environments of its designer
  format (``--designer-format``, default puzzle: 9 one-answer puzzles) and plays them too
  (``loop.seed_plays``), as a cold start whose designer has not yet written an accepted
  environment still has something to train the agent on;
* **B, fixed pool**: the same, with ``--env-source reasoning-gym:TRAIN_TASKS?size=N``: wrapped
  reasoning-gym items instead of the designer (only the agent role is trained);
* **C, no training**: the base weights.

Both training arms stop after the same number of policy updates (``--updates``, same trainer
settings: LoRA by default, ``--batch-groups`` groups of ``--plays`` plain plays per update), or,
with ``--token-budget N``, once their updates have trained on N tokens (checked after every
update, so the arms' trained tokens differ by at most one update's), or when their time budget
runs out. The JSON says whether the arms matched (``updates_matched``, ``trained_token_ratio_a_b``,
``completion_token_ratio_a_b``): an arm cut by its time budget is a mismatch, reported, never
hidden.

Held out means skills too: the engine skills that overlap a held-out task (``gcd`` ->
``gcd_steps``, ``basic_arithmetic`` and ``leg_counting`` -> ``arithmetic``, ...) are left out of
arm A's seed environments and of its designer's skills (``loop.skills``), so self-play never
practises the held-out skill while the fixed pool cannot (``held_out_skills`` in the JSON). Each arm's final policy is then evaluated greedily on held-out reasoning-gym tasks
that neither arm trained on (``--eval-tasks``, disjoint from ``--train-tasks``; items from the
evaluation seed range), recorded as EvaluationCompleted in the arm's run (C: in the data
directory's ``evaluations`` log), and compared paired on items (``spade-engine compare``'s
numbers). The last line is JSON: per-arm accuracy (mean over the evaluation tasks), the deltas
A-C, B-C, A-B with paired 95% intervals, per-task accuracies, updates, tokens, times, and the
machine's load average.

    python3 bench/selfplay_vs_fixed.py                  # the 0.5B model, LoRA, 1 update per arm (CPU: about 45 minutes)
    python3 bench/selfplay_vs_fixed.py --device cuda --no-lora --updates 8 --eval-size 50   # on a GPU
    python3 bench/selfplay_vs_fixed.py --smoke          # tiny random model, tiny sizes (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()  # no tqdm or Hugging Face progress bars in the benchmark's output

from spade_engine.compare.summary import compute, paired_accuracy  # noqa: E402
from spade_engine.config import EvalConfig, load_config  # noqa: E402
from spade_engine.evaluation.periodic import PeriodicEvaluator, build_eval_tasks  # noqa: E402
from spade_engine.evaluation.recording import open_evaluations_log  # noqa: E402
from spade_engine.events.store import new_run_id, open_event_log  # noqa: E402
from spade_engine.engine.seed_archive import BUNDLED_DIR  # noqa: E402
from spade_engine.runs.engine import open_engine  # noqa: E402
from spade_engine.sandbox.scaffold import code_format  # noqa: E402

#: arm B's pool: tasks the base 0.5B solves now and then (sampled at temperature 0.6 with 200
#: tokens, 2026-12-02: syllogism and letter_counting 1 of 8 answers each; chain_sum, lcm and
#: spell_backward 0 of 40 plays in the first CPU run, ransom_note and isomorphic_strings cut
#: before their answer), so some groups have the reward variance a GRPO update needs
TRAIN_TASKS = ("syllogism", "letter_counting")
EVAL_TASKS = ("gcd", "basic_arithmetic", "leg_counting")

#: engine skills that practise what a reasoning-gym task evaluates: left out of arm A's seeds and
#: designer skills when that task is held out
TASK_SKILLS: dict[str, tuple[str, ...]] = {
    "gcd": ("gcd_steps",), "lcm": ("gcd_steps",), "prime_factorization": ("gcd_steps",),
    "basic_arithmetic": ("arithmetic",), "leg_counting": ("arithmetic",), "chain_sum": ("arithmetic",),
    "decimal_arithmetic": ("arithmetic",), "fraction_simplification": ("gcd_steps", "arithmetic"),
    "simple_equations": ("linear_equation",), "polynomial_equations": ("linear_equation",),
    "number_sequence": ("sequence",), "letter_counting": ("string_ops",), "spell_backward": ("string_ops",),
    "caesar_cipher": ("string_ops",), "word_sorting": ("ordering", "sort_swaps"), "number_sorting": ("ordering", "sort_swaps"),
    "syllogism": ("truth_table",), "propositional_logic": ("truth_table",), "shortest_path": ("graph_path",),
}


def held_out_skills(eval_tasks: list[str]) -> list[str]:
    """The engine skills arm A must not practise when ``eval_tasks`` are held out."""
    return sorted({skill for task in eval_tasks for skill in TASK_SKILLS.get(task, ())})


class CappedTrainer:
    """The engine's in-process trainer, stopped after ``cap`` updates or, with ``token_budget``,
    once its updates have trained on that many tokens (then the engine is told to stop): every
    other attribute is the wrapped trainer's."""

    def __init__(self, trainer: Any, cap: int, on_cap: Any, token_budget: int | None = None):
        self._trainer = trainer
        self._cap = cap
        self._on_cap = on_cap
        self._budget = token_budget

    def trained_tokens(self) -> int:
        return sum(int((u.metrics or {}).get("tokens", 0)) for u in self._trainer.updates)

    def capped(self) -> bool:
        return len(self._trainer.updates) >= self._cap or (self._budget is not None and self.trained_tokens() >= self._budget)

    def run(self, *, flush: bool = True, **kw: Any) -> list[Any]:
        if self.capped():
            self._on_cap()
            return []
        # one update at a time under a token budget, so the budget is checked after each
        step = 1 if self._budget is not None else self._cap - len(self._trainer.updates)
        out = self._trainer.run(flush=flush, max_updates=step, **kw)
        if self.capped():
            self._on_cap()
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._trainer, name)


def _say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def base_overrides(a: argparse.Namespace) -> dict[str, Any]:
    return {
        "seed": a.seed, "policy.kind": "transformers", "policy.model": a.model,
        # per role: the agent and the hint at --max-new-tokens (temperature 1.0, exploring), the
        # designer at --designer-max-new-tokens (a designer cut at a few hundred tokens is a
        # truncated completion, rejected before validation)
        "policy.generation.agent.max_new_tokens": a.max_new_tokens, "policy.generation.agent.temperature": 1.0,
        "policy.generation.hinter.max_new_tokens": a.max_new_tokens,
        "policy.generation.designer.max_new_tokens": a.designer_max_new_tokens,
        "loop.designer_format": a.designer_format, "loop.repair_shows_code": a.designer_format == "standalone",
        "policy.transformers.device": a.device,
        "loop.plays_per_env": a.plays, "loop.max_envs": a.max_envs, "loop.max_repairs": a.max_repairs, "loop.turn_limit": 4,
        "trainer.enabled": True, "trainer.lora": a.lora, "trainer.batch_groups": a.batch_groups, "trainer.device": a.device,
        "trainer.learning_rate": a.lr, "trainer.micro_batch_size": a.micro_batch, "trainer.max_lag": 8,
        "sandbox.workers": 2, "sandbox.import_timeout_s": 30.0, "sandbox.step_timeout_s": 10.0,
        "sandbox.validate_timeout_s": 120.0,
    }


def eval_config(a: argparse.Namespace) -> EvalConfig:
    return EvalConfig(every=1, suites=["reasoning-gym:" + ",".join(a.eval_tasks)], size=a.eval_size, seed=a.eval_seed,
                      max_new_tokens=a.eval_max_new_tokens, batch_size=a.eval_batch, base=False)


def eval_progress(arm: str) -> Any:
    """A progress callback for an arm's held-out evaluation: one line per task whenever its
    count of scored items changes."""
    seen: dict[str, int] = {}

    def progress(task: str, done: int, total: int) -> None:
        if done and seen.get(task) != done:
            seen[task] = done
            _say(f"arm {arm}: held-out {task} {done}/{total} items")

    return progress


def format_seeds(fmt: str, data: Path, exclude_skills: list[str] = ()) -> Path:
    """A directory with the bundled seed environments of designer format ``fmt`` (arm A's
    ``--seed-plays``: they are hinted and played like designed environments), without those of
    the held-out skills."""
    out = data / f"seeds-{fmt}"
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(BUNDLED_DIR.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        skill = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("# skill:")), "")
        if code_format(text) == fmt and skill not in exclude_skills:
            shutil.copyfile(path, out / path.name)
    if not any(out.glob("*.py")):
        raise SystemExit(f"no bundled seed environment has designer format {fmt!r} outside {list(exclude_skills)}")
    return out


def run_arm(name: str, overrides: dict[str, Any], a: argparse.Namespace, data: Path, tasks: list) -> dict[str, Any]:
    cfg = load_config(overrides=overrides, environ={})
    run_id = new_run_id()
    _say(f"arm {name}: run {run_id} ({cfg.loop.env_source or 'designer'}), up to {a.updates} updates, {a.arm_seconds:.0f} s")
    t0 = time.perf_counter()
    with open_engine(cfg, run_id=run_id, data_dir=data, create=True) as opened:
        engine = opened.engine
        engine.trainer = CappedTrainer(engine.trainer, a.updates, engine.stop, token_budget=a.token_budget)
        timer = threading.Timer(a.arm_seconds, engine.stop)
        timer.daemon = True
        timer.start()
        last = [0]

        def progress(state: Any) -> None:
            n = len(state.roots())
            if n != last[0]:
                last[0] = n
                _say(f"arm {name}: {n} environments, {len(state.policy_updates)} updates")

        engine.on_progress = progress
        try:
            reason = engine.run()
        finally:
            timer.cancel()
        train_s = time.perf_counter() - t0
        updates = list(engine.state.policy_updates)
        latest = updates[-1] if updates else None
        _say(f"arm {name}: stopped ({reason}) after {train_s:.0f} s with {len(updates)} updates; evaluating")
        t1 = time.perf_counter()
        ev = PeriodicEvaluator(eval_config(a), log=engine.log, blobs=engine.blobs, policy=engine.ctx.policy, tasks=tasks,
                               model=a.model, on_progress=eval_progress(name))
        ev.evaluate_version(latest.version if latest else "v0", latest.checkpoint if latest else None,
                            adapter=latest.adapter if latest else None)
        eval_s = time.perf_counter() - t1
        stats = engine.state.stats()
    log = open_event_log(run_id, data_dir=data)
    try:
        spent = compute(log)
    finally:
        log.close()
    return {"run_id": run_id, "reason": reason, "updates": len(updates), "train_seconds": train_s, "eval_seconds": eval_s,
            "environments": stats["roots"], "accepted": stats["accepted"], "plays": stats["plays"],
            "completion_tokens": spent.completion_tokens, "trained_tokens": spent.trained_tokens,
            "agent_tokens": spent.agent_tokens, "designer_tokens": spent.designer_tokens, "hint_tokens": spent.hint_tokens}


def run_base(a: argparse.Namespace, data: Path, tasks: list) -> dict[str, Any]:
    from spade_engine.evaluation.periodic import transformers_policy_factory

    _say("arm C: evaluating the base weights")
    t0 = time.perf_counter()
    log = open_evaluations_log(data)
    try:
        policy = transformers_policy_factory(a.model, data_dir=data, max_new_tokens=a.eval_max_new_tokens, device=a.device)()
        try:
            PeriodicEvaluator(eval_config(a), log=log, blobs=None, policy=policy, tasks=tasks,  # type: ignore[arg-type]
                              model=a.model, on_progress=eval_progress("C (no training)")).evaluate_version("v0", None)
        finally:
            policy.close()
    finally:
        log.close()
    return {"run_id": "evaluations", "updates": 0, "eval_seconds": time.perf_counter() - t0, "completion_tokens": 0,
            "trained_tokens": 0}


def _log(data: Path, run_id: str) -> Any:
    return open_evaluations_log(data) if run_id == "evaluations" else open_event_log(run_id, data_dir=data)


def pair(data: Path, x: str, y: str) -> Any:
    lx, ly = _log(data, x), _log(data, y)
    try:
        return paired_accuracy(lx, ly)
    finally:
        lx.close()
        ly.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="tiny random model and tiny sizes (a CI smoke test)")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--updates", type=int, default=1, help="policy updates per training arm (with --token-budget: at most)")
    ap.add_argument("--token-budget", type=int, default=None,
                    help="stop each training arm once its updates have trained on this many tokens (matched compute)")
    ap.add_argument("--device", default="auto", help="auto (cuda when there is one), cpu or cuda, for the policy and the trainer")
    ap.add_argument("--batch-groups", type=int, default=1, help="groups (environments with reward variance) per update")
    ap.add_argument("--plays", type=int, default=4, help="k plain (and k hinted) plays per environment")
    ap.add_argument("--max-new-tokens", type=int, default=320, help="token budget of an agent turn and of a hint while training")
    ap.add_argument("--designer-max-new-tokens", type=int, default=2048, help="token budget of a designer completion (arm A)")
    ap.add_argument("--seed-plays", action=argparse.BooleanOptionalAction, default=True,
                    help="arm A starts from the bundled seeds of its designer format and plays them (loop.seed_plays)")
    ap.add_argument("--designer-format", choices=("standalone", "scaffold", "puzzle"), default="puzzle",
                    help="what arm A's designer writes (loop.designer_format; scaffold and puzzle repairs ask for a new attempt)")
    ap.add_argument("--max-envs", type=int, default=40, help="most environments per arm")
    ap.add_argument("--max-repairs", type=int, default=1)
    ap.add_argument("--arm-seconds", type=float, default=1000.0, help="time budget of each training arm")
    ap.add_argument("--train-tasks", nargs="+", default=list(TRAIN_TASKS), help="arm B's pool")
    ap.add_argument("--pool-size", type=int, default=50, help="items per training task")
    ap.add_argument("--eval-tasks", nargs="+", default=list(EVAL_TASKS), help="held-out tasks (neither arm trains on them)")
    ap.add_argument("--eval-size", type=int, default=10, help="held-out items per task")
    ap.add_argument("--eval-seed", type=int, default=0)
    ap.add_argument("--eval-max-new-tokens", type=int, default=384,
                    help="answer budget per held-out item (the 0.5B's answers run to 200-250 tokens: at 160 every one was cut)")
    ap.add_argument("--eval-batch", type=int, default=15)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--no-lora", dest="lora", action="store_false", help="train every weight (default on CPU: LoRA)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, default=None, help="keep the runs here (default: a temporary directory)")
    a = ap.parse_args()
    if a.smoke:
        a.model, a.updates, a.plays, a.max_new_tokens, a.max_envs, a.max_repairs = "tiny:0", 1, 2, 8, 2, 0
        a.designer_max_new_tokens = 8
        a.arm_seconds, a.pool_size, a.eval_size, a.eval_max_new_tokens, a.eval_batch = 300.0, 3, 2, 8, 8
        a.train_tasks, a.eval_tasks, a.lr = ["letter_counting"], ["gcd", "leg_counting"], 1e-3
    overlap = set(a.train_tasks) & set(a.eval_tasks)
    if overlap:
        ap.error(f"--train-tasks and --eval-tasks overlap: {sorted(overlap)} (the evaluation must be held out)")
    if a.device == "auto":
        import torch

        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    held_out = held_out_skills(a.eval_tasks)
    skill_overlap = sorted(set(held_out) & {s for t in a.train_tasks for s in TASK_SKILLS.get(t, ())})
    if skill_overlap:
        ap.error(f"--train-tasks practise the held-out skills {skill_overlap} (the evaluation must be held out)")
    load = os.getloadavg()
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="spade-bench-svf-") as tmp:
        data = a.data_dir or Path(tmp)
        data.mkdir(parents=True, exist_ok=True)
        tasks = build_eval_tasks(eval_config(a))  # the same items for every arm
        _say(f"model {a.model} on {a.device}; held-out tasks {', '.join(a.eval_tasks)} ({a.eval_size} items each; "
             f"skills {', '.join(held_out) or 'none'} held out of arm A); arm B trains on {', '.join(a.train_tasks)}; "
             f"load average {load[0]:.1f}")
        arms = {"c": run_base(a, data, tasks)}
        base = base_overrides(a)
        from spade_engine.engine.skills import skill_names

        arm_a = {**base, "loop.skills": [s for s in skill_names("engine") if s not in held_out]}
        if a.seed_plays:
            arm_a.update({"loop.seed_envs": str(format_seeds(a.designer_format, data, held_out)), "loop.seed_plays": True})
        arms["a"] = run_arm("A (self-play)", arm_a, a, data, tasks)
        source = "reasoning-gym:" + ",".join(a.train_tasks) + f"?size={a.pool_size}"
        arms["b"] = run_arm("B (fixed pool)", {**base, "loop.env_source": source, "loop.max_repairs": 0,
                                                "memory.novelty_threshold": 0.0}, a, data, tasks)
        acc: dict[str, float] = {}
        per_task: dict[str, dict[str, float]] = {}
        deltas: dict[str, Any] = {}
        for x, y in (("c", "a"), ("c", "b"), ("b", "a")):
            cmp = pair(data, arms[x]["run_id"], arms[y]["run_id"])
            acc[x], acc[y] = cmp.macro_a, cmp.macro_b  # type: ignore[assignment]
            for t in cmp.tasks:
                per_task.setdefault(t.task, {})[x] = round(t.accuracy_a, 4)
                per_task[t.task][y] = round(t.accuracy_b, 4)
            mean = lambda v: sum(v) / len(v)  # noqa: E731
            deltas[f"{y}_{x}"] = {"delta": round(mean([t.delta for t in cmp.tasks]), 4),
                                  "low": round(mean([t.delta_low for t in cmp.tasks]), 4),
                                  "high": round(mean([t.delta_high for t in cmp.tasks]), 4),
                                  "discordant": [sum(t.a_only for t in cmp.tasks), sum(t.b_only for t in cmp.tasks)]}
        wall = time.perf_counter() - t_all
    for k, arm in arms.items():
        _say(f"arm {k.upper()}: accuracy {acc[k]:.3f}  " + json.dumps({x: v for x, v in arm.items() if x != "run_id"}))
    tok_a, tok_b = arms["a"]["completion_tokens"], arms["b"]["completion_tokens"]
    tr_a, tr_b = arms["a"]["trained_tokens"], arms["b"]["trained_tokens"]
    updates_matched = arms["a"]["updates"] == arms["b"]["updates"] and arms["a"]["updates"] > 0
    if not updates_matched:
        _say(f"arms NOT matched: A {arms['a']['updates']} updates ({arms['a']['reason']}), "
             f"B {arms['b']['updates']} updates ({arms['b']['reason']})")
    result = {
        "model": a.model, "smoke": a.smoke, "lora": a.lora, "device": a.device, "updates_asked": a.updates,
        "token_budget": a.token_budget, "updates_matched": updates_matched,
        "trained_token_ratio_a_b": round(tr_a / tr_b, 3) if tr_b else None, "held_out_skills": held_out,
        "designer_format": a.designer_format, "arm_a_seed_plays": a.seed_plays,
        "arm_a_accuracy": round(acc["a"], 4), "arm_b_accuracy": round(acc["b"], 4), "arm_c_accuracy": round(acc["c"], 4),
        "delta_a_c": deltas["a_c"]["delta"], "delta_b_c": deltas["b_c"]["delta"], "delta_a_b": deltas["a_b"]["delta"],
        "delta_intervals": deltas,
        "arm_a_updates": arms["a"]["updates"], "arm_b_updates": arms["b"]["updates"],
        "arm_a_completion_tokens": tok_a, "arm_b_completion_tokens": tok_b,
        "arm_a_trained_tokens": arms["a"]["trained_tokens"], "arm_b_trained_tokens": arms["b"]["trained_tokens"],
        "completion_token_ratio_a_b": round(tok_a / tok_b, 3) if tok_b else None,
        "arm_a_seconds": round(arms["a"]["train_seconds"], 1), "arm_b_seconds": round(arms["b"]["train_seconds"], 1),
        "eval_seconds": round(sum(arm["eval_seconds"] for arm in arms.values()), 1),
        "eval_tasks": a.eval_tasks, "eval_items_per_task": a.eval_size, "train_tasks": a.train_tasks,
        "per_task_accuracy": per_task, "arms": {k: {x: v for x, v in arm.items()} for k, arm in arms.items()},
        "wall_seconds": round(wall, 1), "load_average_start": round(load[0], 2), "load_average_end": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
