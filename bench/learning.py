"""Does the engine's trainer make a real model better? A fixed-pool learning experiment with a control.

The catalogue's Qwen2.5-Coder-0.5B-Instruct (llama.cpp serving, the engine's own GRPO trainer with
LoRA adapters synced into llama.cpp after every update) trains on a fixed pool of reasoning-gym
items (``--env-source reasoning-gym:TASKS``: items from the training seed range, wrapped as
environments, played ``--plays`` times each through the sandbox). Two arms, each an ordinary
engine run (its log replays with ``spade-engine replay RUN --verify``):

* **R, real reward**: the environments' own rewards (the task's verifier);
* **D, random reward** (the control, ``trainer.reward_control = "coin"``): every play's reward
  replaced by a fair coin flip before advantages are computed, trained with the compute of R
  (``--match updates``, the default: as many updates of as many samples; ``--match tokens``: as
  many trained tokens, ``--token-budget`` or R's, which takes D many more updates when the random
  reward shortens its answers), so a gain that comes from
  training on the model's own samples, not from the reward (Shao et al. 2025, spurious rewards),
  shows up in D too.

Held-out evaluation: items of the same tasks from the evaluation seed range (never generated for
training), ``--eval-size`` per task (at least 200 in all by default), greedy, asked exactly as the
training plays ask (``--eval-prompt agent-v1``: the agent's system prompt, the pool's instruction
after the question), scored by the task's verifier, recorded as ``EvaluationCompleted`` in each arm's run (the base weights ``v0`` once, in
R's run; then every ``--eval-every`` updates and the final version of each arm). The gain is the
final version's accuracy minus the base's on the same items, with a paired 95% interval over the
items (``spade-engine compare`` pairs the same way).

Prints progress, and as its LAST line one JSON object: ``heldout_gain`` and ``heldout_gain_ci95``
(R final - v0), ``random_reward_gain`` and ``random_reward_gain_ci95`` (D final - v0),
``real_minus_random`` and its interval, ``items``, ``trained_tokens`` (R; D's beside it),
``minutes``, per-task accuracies, the learning curves (held-out accuracy and training reward
against trained tokens, per arm), the runs' ids and the load average. With ``--report`` it also
writes ``docs/results/<date>-learning.{json,md,png,html}``.

    python3 bench/learning.py                  # the 0.5B: R trains 30 minutes, D as many updates; with three
                                               # held-out evaluations of about 16 minutes, 95 minutes on 2 CPU cores
    python3 bench/learning.py --smoke          # a tiny random GGUF model, a minute (CI)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()

from spade_engine.compare.summary import paired_accuracy  # noqa: E402
from spade_engine.config import load_config  # noqa: E402
from spade_engine.envsources import fixed_source_overrides, parse_env_source  # noqa: E402
from spade_engine.evaluation.runner import EVAL_PROMPTS  # noqa: E402
from spade_engine.events.store import new_run_id, open_event_log  # noqa: E402
from spade_engine.runs.engine import open_engine  # noqa: E402

#: tasks whose base accuracy (0.5B, greedy, 320 tokens, asked as agent-v1, 16 items of the
#: screening seed 96) is between about 15% and 60%: basic_arithmetic 6/16, chain_sum 6/16 (products
#: 2, lcm 1; gcd, fraction_simplification, decimal_arithmetic, leg_counting 0). simple_equations
#: (runs 4-7) fails on wrong long divisions, which a few updates do not teach; letter_counting (runs
#: 1-2) rewarded guesses of small numbers (docs/notes/measurements.md). The run of 2026-12-07 with
#: these defaults gained +0.095 [+0.035, +0.155] (docs/results/2026-12-07-learning.md).
TASKS = ("basic_arithmetic", "chain_sum")
MODEL = "qwen2.5-coder-0.5b-instruct"


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class CappedTrainer:
    """The engine's in-process trainer, stopped (and the engine told to stop) after ``cap``
    updates or once its updates have trained on ``token_budget`` tokens; one update at a time
    so the budget is checked after each."""

    def __init__(self, trainer: Any, cap: int, on_cap: Any, token_budget: int | None = None):
        self._trainer, self._cap, self._on_cap, self._budget = trainer, cap, on_cap, token_budget

    def trained_tokens(self) -> int:
        return sum(int((u.metrics or {}).get("tokens", 0)) for u in self._trainer.updates)

    def capped(self) -> bool:
        return len(self._trainer.updates) >= self._cap or (self._budget is not None and self.trained_tokens() >= self._budget)

    def run(self, *, flush: bool = True, **kw: Any) -> list[Any]:
        if self.capped():
            self._on_cap()
            return []
        out = self._trainer.run(flush=flush, max_updates=1, **kw)
        if self.capped():
            self._on_cap()
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._trainer, name)


class TimedEvaluator:
    """The trainer's held-out evaluator, timed: an arm's time budget counts training, not the
    evaluations run between its updates (scoring 200 items takes minutes here)."""

    def __init__(self, evaluator: Any):
        self._evaluator = evaluator
        self.seconds = 0.0

    def _timed(self, name: str, *args: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return getattr(self._evaluator, name)(*args, **kw)
        finally:
            self.seconds += time.perf_counter() - t0

    def catch_up(self, *args: Any, **kw: Any) -> Any:
        return self._timed("catch_up", *args, **kw)

    def after_update(self, *args: Any, **kw: Any) -> Any:
        return self._timed("after_update", *args, **kw)

    def evaluate_version(self, *args: Any, **kw: Any) -> Any:
        return self._timed("evaluate_version", *args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._evaluator, name)


class TrainingClock:
    """Stops the engine once ``seconds`` have passed outside held-out evaluations."""

    def __init__(self, seconds: float, stop: Any, timed: TimedEvaluator | None):
        self._seconds, self._stop, self._timed = seconds, stop, timed
        self._t0 = time.perf_counter()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def training_seconds(self) -> float:
        return time.perf_counter() - self._t0 - (self._timed.seconds if self._timed is not None else 0.0)

    def _watch(self) -> None:
        while not self._done.wait(1.0):
            if self.training_seconds() >= self._seconds:
                self._stop()
                return

    def cancel(self) -> None:
        self._done.set()


class ArmProgress:
    """What an arm prints between its updates, which are minutes apart: each held-out
    evaluation's items as they are scored (about every ``every`` seconds, and at its end), and
    the plays of the items estimated so far (how many groups had the reward variance an update
    needs), at most every ``every`` seconds."""

    def __init__(self, name: str, every: float = 60.0):
        self.name, self.every = name, every
        self._last = self._last_plays = -math.inf
        self._estimated: set[str] = set()
        self._plays = self._wins = self._varied = 0

    def evaluation(self, task: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done in (0, total) or now - self._last >= self.every:
            self._last = now
            say(f"arm {self.name}: held-out {task}: {done}/{total} items scored")

    def plays(self, state: Any) -> None:
        for st in state.envs.values():
            if st.env_id in self._estimated or not st.estimates:
                continue
            self._estimated.add(st.env_id)
            rewards = [float(p.episode_reward) for (hinted, _), (_, p) in st.plays.items() if not hinted]
            self._plays += len(rewards)
            self._wins += sum(1 for r in rewards if r > 0)
            self._varied += len(set(rewards)) > 1
            now = time.monotonic()
            if now - self._last_plays < self.every:
                continue
            self._last_plays = now
            say(f"arm {self.name}: item {len(self._estimated)} played: {sum(1 for r in rewards if r > 0)}/{len(rewards)} "
                f"right; {self._varied} of {len(self._estimated)} groups with reward variance, "
                f"{self._wins}/{self._plays} plays right so far")


def timed_training(engine: Any, capped: CappedTrainer, seconds: float) -> TrainingClock:
    """Wrap the engine's evaluator in a TimedEvaluator and start the arm's training clock."""
    inner = capped._trainer
    timed = TimedEvaluator(inner.evaluator) if inner.evaluator is not None else None
    if timed is not None:
        inner.evaluator = timed
    return TrainingClock(seconds, engine.stop, timed)


def overrides(a: argparse.Namespace, *, control: str, base_eval: bool) -> dict[str, Any]:
    source = "reasoning-gym:" + ",".join(a.tasks) + f"?size={a.pool_size}"
    out: dict[str, Any] = {
        "seed": a.seed, "policy.kind": "llamacpp", "policy.model": a.model,
        "policy.llamacpp.parallel": a.parallel,
        "policy.generation.agent.max_new_tokens": a.max_new_tokens, "policy.generation.agent.temperature": a.temperature,
        "policy.generation.agent.top_p": 1.0,
        "policy.generation.hinter.max_new_tokens": 48,
        "loop.env_source": source, **fixed_source_overrides(parse_env_source(source)),
        "loop.plain_plays": a.plays, "loop.hinted_plays": 1, "loop.max_envs": 100_000, "loop.turn_limit": 1,
        "loop.designer_batch": a.batch_groups,
        "trainer.enabled": True, "trainer.lora": True, "trainer.lora_r": a.lora_r, "trainer.lora_alpha": 2 * a.lora_r,
        "trainer.batch_groups": a.batch_groups, "trainer.learning_rate": a.lr, "trainer.device": "cpu",
        "trainer.micro_batch_size": a.micro_batch, "trainer.max_lag": 1, "trainer.train_designer": False,
        "trainer.reward_control": control,
        "eval.every": a.eval_every or 1_000_000, "eval.suites": ["reasoning-gym:" + ",".join(a.tasks)], "eval.size": a.eval_size,
        "eval.seed": a.eval_seed, "eval.max_new_tokens": a.eval_max_new_tokens, "eval.batch_size": 32,
        "eval.prompt": a.eval_prompt,
        "eval.base": base_eval,
        # one sandbox worker per play, the hinted one included: a round's plays decode together
        # (llama.cpp batches them). Each item gets workers // concurrent_envs; with one worker too few
        # its hinted play ran alone after the plain ones (about 40 s a round on the 0.5B, 2026-12-05)
        "sandbox.workers": (a.plays + 1) * a.concurrent_envs, "loop.concurrent_envs": a.concurrent_envs,
        # the trainer scores long answers in chunks of positions (an update of 8 x 600 tokens peaks near 20 GB otherwise)
        "trainer.logits_chunk": 128,
    }
    if a.backend == "transformers":  # a GPU (or a CPU, slowly): the transformers policy, trainer on the same device
        gpu = a.device.startswith("cuda")
        del out["policy.llamacpp.parallel"]
        out.update({
            "policy.kind": "transformers", "policy.transformers.device": a.device,
            "policy.transformers.batch_size": a.plays * a.concurrent_envs,
            "trainer.device": a.device, "trainer.logits_chunk": 1024 if gpu else 128,
            # merged weights per version (the transformers policy loads them): bf16 on a GPU, 1 GB a version
            "trainer.merged_weights": True, "trainer.merged_weights_dtype": "bfloat16" if gpu else "float32",
        })
    return out


def run_arm(name: str, a: argparse.Namespace, data: Path, *, control: str, base_eval: bool, seconds: float,
            token_budget: int | None, cap: int | None = None) -> dict[str, Any]:
    cap = a.updates if cap is None else cap
    cfg = load_config(overrides=overrides(a, control=control, base_eval=base_eval), environ={})
    run_id = new_run_id()
    budget = f"{token_budget} trained tokens" if token_budget else f"{seconds / 60:.0f} minutes"
    say(f"arm {name}: run {run_id}, up to {cap} updates or {budget}")
    t0 = time.perf_counter()
    with open_engine(cfg, run_id=run_id, data_dir=data, create=True) as opened:
        engine = opened.engine
        capped = CappedTrainer(engine.trainer, cap, engine.stop, token_budget=token_budget)
        engine.trainer = capped
        shown = ArmProgress(name.split()[0])
        if capped._trainer.evaluator is not None:  # before timed_training wraps it
            capped._trainer.evaluator.on_progress = shown.evaluation
        timer = timed_training(engine, capped, seconds)
        seen = [0]

        def progress(state: Any) -> None:
            shown.plays(state)
            n = len(state.policy_updates)
            if n != seen[0]:
                seen[0] = n
                m = state.policy_updates[-1].metrics
                say(f"arm {name}: update {n}: {int(m.get('tokens', 0))} tokens, train reward "
                    f"{m.get('agent_reward_mean', float('nan')):.3f}, mismatch {m.get('logprob_mismatch', float('nan')):.3f}, "
                    f"{capped.trained_tokens()} trained tokens in {(time.perf_counter() - t0) / 60:.1f} min")

        engine.on_progress = progress
        try:
            reason = engine.run()
        finally:
            timer.cancel()
        train_s = timer.training_seconds()
        updates = list(engine.state.policy_updates)
        evaluator = engine.trainer.evaluator
        if updates and evaluator is not None:  # the final version, unless the periodic evaluation did it
            last = updates[-1]
            say(f"arm {name}: stopped ({reason}) after {train_s / 60:.1f} min and {len(updates)} updates; evaluating {last.version}")
            evaluator.evaluate_version(last.version, last.checkpoint, adapter=last.adapter)
        wall = time.perf_counter() - t0
    return {"run_id": run_id, "reason": reason, "updates": len(updates), "trained_tokens": capped.trained_tokens(),
            "train_seconds": round(train_s, 1), "seconds": round(wall, 1)}


def read_arm(data: Path, run_id: str) -> dict[str, Any]:
    """An arm's figures from one pass over its log: ``curves`` (held-out accuracy per evaluated
    version and training reward per update, against the trained tokens so far) and ``detail``
    (per update its metrics: trained tokens, training reward, the policy shift and the log-prob
    mismatch; per policy version the plain plays it played: how many, the share won, answer
    tokens, answers cut at the token limit)."""
    from spade_engine.blobs import BlobError, BlobStore, restore_generation
    from spade_engine.evaluation.scoring import wilson_interval
    from spade_engine.events.catalogue import EvaluationCompleted, PolicyUpdated, RolloutCompleted
    from spade_engine.events.datadir import DataDir

    blobs = BlobStore(DataDir(data).blobs_dir)
    tokens_at = {"v0": 0}
    total = 0
    train: list[dict[str, Any]] = []
    evals: dict[str, list[Any]] = {}
    updates: list[dict[str, Any]] = []
    plays: dict[str, dict[str, Any]] = {}
    log = open_event_log(run_id, data_dir=data)
    try:
        for rec in log.read():
            if rec.envelope.type not in ("PolicyUpdated", "EvaluationCompleted", "RolloutCompleted"):
                continue
            ev = rec.envelope.event()
            if isinstance(ev, PolicyUpdated):
                m = ev.metrics or {}
                total += int(m.get("tokens", 0))
                tokens_at[ev.version] = total
                r, n = m.get("agent_reward_mean"), int(m.get("samples", 0))
                if r is not None and n:
                    lo, hi = wilson_interval(r * n, n)
                    train.append({"version": ev.version, "tokens": total, "reward": round(r, 4), "low": round(lo, 4),
                                  "high": round(hi, 4), "samples": n})
                updates.append({"version": ev.version, **{k: m.get(k) for k in (
                    "tokens", "samples", "agent_reward_mean", "policy_shift_kl", "logprob_shift_positive",
                    "logprob_shift_negative", "logprob_mismatch", "grad_norm")}})
            elif isinstance(ev, EvaluationCompleted):
                evals.setdefault(ev.policy_version, []).append(ev)
            elif isinstance(ev, RolloutCompleted) and not ev.hinted:
                row = plays.setdefault(ev.policy_version, {"plays": 0, "won": 0, "tokens": 0, "cut": 0})
                row["plays"] += 1
                row["won"] += ev.episode_reward > 0
                for turn in ev.turns:
                    if turn.generation is None:
                        continue
                    row["cut"] += turn.generation.finish_reason == "length"
                    try:
                        gen = restore_generation(turn.generation, blobs)
                    except (BlobError, ValueError):
                        gen = None
                    row["tokens"] += len(gen.completion_token_ids) if gen is not None else 0
    finally:
        log.close()
    heldout = []
    for version, events in evals.items():
        n = sum(e.items * e.k for e in events)
        c = sum(e.correct for e in events)
        lo, hi = wilson_interval(c, n)
        heldout.append({"version": version, "tokens": tokens_at.get(version), "accuracy": round(c / n, 4),
                        "low": round(lo, 4), "high": round(hi, 4), "items": n})
    heldout.sort(key=lambda p: (p["tokens"] is None, p["tokens"] or 0))
    for row in plays.values():
        row["win_rate"] = round(row["won"] / row["plays"], 4) if row["plays"] else None
        row["mean_tokens"] = round(row.pop("tokens") / row["plays"], 1) if row["plays"] else None
    return {"curves": {"heldout": heldout, "train": train},
            "detail": {"updates": updates, "plays": dict(sorted(plays.items(), key=lambda kv: int(kv[0].lstrip("v") or 0)))}}


def curves(data: Path, run_id: str) -> dict[str, Any]:
    """The ``curves`` part of :func:`read_arm`."""
    return read_arm(data, run_id)["curves"]


def paired(data: Path, run_a: str, ver_a: str, run_b: str, ver_b: str) -> dict[str, Any]:
    la, lb = open_event_log(run_a, data_dir=data), open_event_log(run_b, data_dir=data)
    try:
        cmp = paired_accuracy(la, lb, version_a=ver_a, version_b=ver_b)
    finally:
        la.close()
        lb.close()
    d, lo, hi, n = cmp.pooled()
    return {"delta": round(d, 4), "ci95": [round(lo, 4), round(hi, 4)], "items": n,
            "a_only": sum(t.a_only for t in cmp.tasks), "b_only": sum(t.b_only for t in cmp.tasks),
            "accuracy_a": round(cmp.micro_a or 0.0, 4), "accuracy_b": round(cmp.micro_b or 0.0, 4),
            "per_task": {t.task: {"a": round(t.accuracy_a, 4), "b": round(t.accuracy_b, 4), "delta": round(t.delta, 4),
                                  "ci95": [round(t.delta_low, 4), round(t.delta_high, 4)]} for t in cmp.tasks}}


def curve_figures(arms: dict[str, dict[str, Any]], labels: dict[str, str], colors: dict[str, str], *,
                  heldout_title: str = "held-out accuracy (greedy, 95% Wilson)") -> dict[str, bytes]:
    """Held-out accuracy and training reward against trained tokens, one line per arm (``arms``:
    :func:`curves` of each), as PNG (matplotlib, when installed) and HTML (plotly)."""
    out: dict[str, bytes] = {}
    placed = {arm: [p for p in c["heldout"] if p["tokens"] is not None] for arm, c in arms.items()}
    try:
        import io

        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for arm, c in arms.items():
            h, tr, color = placed[arm], c["train"], colors[arm]
            axes[0].errorbar([p["tokens"] for p in h], [p["accuracy"] for p in h],
                             yerr=[[p["accuracy"] - p["low"] for p in h], [p["high"] - p["accuracy"] for p in h]],
                             marker="o", capsize=3, color=color, label=labels[arm])
            axes[1].plot([p["tokens"] for p in tr], [p["reward"] for p in tr], marker=".", color=color, label=labels[arm])
            axes[1].fill_between([p["tokens"] for p in tr], [p["low"] for p in tr], [p["high"] for p in tr], color=color, alpha=0.12)
        axes[0].set(title=heldout_title, xlabel="trained tokens", ylabel="accuracy")
        axes[1].set(title="training reward (true reward of the plays)", xlabel="trained tokens", ylabel="mean reward")
        for ax in axes:
            ax.grid(alpha=0.3)
            ax.legend()
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        out[".png"] = buf.getvalue()
    except ImportError:  # pragma: no cover - matplotlib is in the dev extra
        pass
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=(heldout_title, "training reward"))
    for arm, c in arms.items():
        h, tr, color = placed[arm], c["train"], colors[arm]
        fig.add_trace(go.Scatter(x=[p["tokens"] for p in h], y=[p["accuracy"] for p in h], name=f"{labels[arm]}: held-out",
                                 line={"color": color}, error_y={"type": "data", "symmetric": False,
                                 "array": [p["high"] - p["accuracy"] for p in h], "arrayminus": [p["accuracy"] - p["low"] for p in h]}),
                      row=1, col=1)
        fig.add_trace(go.Scatter(x=[p["tokens"] for p in tr], y=[p["reward"] for p in tr], name=f"{labels[arm]}: training reward",
                                 line={"color": color, "dash": "dot"}), row=1, col=2)
    fig.update_xaxes(title_text="trained tokens")
    out[".html"] = fig.to_html(include_plotlyjs="cdn", full_html=True).encode()
    return out


def figures(result: dict[str, Any]) -> dict[str, bytes]:
    """The two arms' learning curves (:func:`curve_figures`)."""
    return curve_figures(result["curves"], {"real": "real reward", "random": "random reward"},
                         {"real": "#2563eb", "random": "#dc2626"})


def render(r: dict[str, Any]) -> str:
    """The results page's body."""
    from results_page import results_stem

    stem = results_stem(r["provenance"]["date"], r.get("report_name", "learning"))
    g, d, rm = r["heldout_gain_ci95"], r["random_reward_gain_ci95"], r["real_minus_random_ci95"]
    lines = [
        f"Model `{r['model']}` (llama.cpp serving, LoRA r={r['lora_r']} trained by the engine's GRPO trainer), "
        f"fixed pool of reasoning-gym `{', '.join(r['tasks'])}` (training seed range, {r['pool_size']} items per task, "
        f"{r['plays']} plays per item at temperature {r.get('temperature', 1.0)}, {r['batch_groups']} groups per update, "
        f"learning rate {r['lr']}).",
        "",
        f"Held-out: {r['items']} items of the same tasks from the evaluation seed range, greedy, "
        f"{r['eval_max_new_tokens']} tokens per answer, prompt `{r.get('eval_prompt', 'boxed-v1')}`; paired 95% intervals over items.",
        "",
        "| arm | updates | trained tokens | held-out accuracy | gain over v0 | 95% interval |",
        "|---|---|---|---|---|---|",
        f"| base (v0) | 0 | 0 | {r['base_accuracy']:.3f} | | |",
        f"| R: real reward | {r['arms']['real']['updates']} | {r['trained_tokens']} | {r['real_accuracy']:.3f} | "
        f"{r['heldout_gain']:+.3f} | [{g[0]:+.3f}, {g[1]:+.3f}] |",
        f"| D: random reward (control) | {r['arms']['random']['updates']} | {r['random_trained_tokens']} | "
        f"{r['random_accuracy']:.3f} | {r['random_reward_gain']:+.3f} | [{d[0]:+.3f}, {d[1]:+.3f}] |",
        "",
        f"R minus D: {r['real_minus_random']:+.3f} [{rm[0]:+.3f}, {rm[1]:+.3f}]. "
        f"Wall time {r['minutes']:.0f} minutes; load average {r['load_average_start']} at the start, "
        f"{r['load_average_end']} at the end.",
        "",
        "Per task (accuracy v0 -> R final, delta and its interval):",
        "",
        "| task | v0 | R | delta | 95% interval |",
        "|---|---|---|---|---|",
    ]
    for task, t in r["per_task"].items():
        lines.append(f"| {task} | {t['a']:.3f} | {t['b']:.3f} | {t['delta']:+.3f} | [{t['ci95'][0]:+.3f}, {t['ci95'][1]:+.3f}] |")
    lines += ["", f"![learning curves]({stem}.png)", "", f"Interactive: [{stem}.html]({stem}.html)", ""]
    lines += render_detail(r.get("detail"))
    lines.append(f"Runs (replay with `spade-engine replay RUN --verify`): R `{r['arms']['real']['run_id']}`, "
                 f"D `{r['arms']['random']['run_id']}`.")
    return "\n".join(lines)


def _num(v: Any, fmt: str) -> str:
    return "" if v is None else format(v, fmt)


def render_detail(detail: dict[str, Any] | None) -> list[str]:
    """The page's tables of what each update did (:func:`arm_detail` of each arm)."""
    if not detail:
        return []
    names = {"real": "R", "random": "D"}
    lines = ["What each update did (the policy shift is measured on the update's own samples, rescored after it: KL per "
             "token, and the mean change of the log-prob per token of the answers with positive and negative advantage):",
             "", "| arm | version | trained tokens | training reward | KL per token | positive answers | negative answers "
             "| log-prob mismatch |", "|---|---|---|---|---|---|---|---|"]
    for arm, d in detail.items():
        for u in d["updates"]:
            lines.append(f"| {names.get(arm, arm)} | {u['version']} | {_num(u['tokens'], '.0f')} | "
                         f"{_num(u['agent_reward_mean'], '.3f')} | {_num(u['policy_shift_kl'], '.4f')} | "
                         f"{_num(u['logprob_shift_positive'], '+.4f')} | {_num(u['logprob_shift_negative'], '+.4f')} | "
                         f"{_num(u['logprob_mismatch'], '.3f')} |")
    lines += ["", "The training plays (plain plays, temperature as above) by the policy version that played them:", "",
              "| arm | version | plays | won | answer tokens (mean) | cut at the token limit |", "|---|---|---|---|---|---|"]
    for arm, d in detail.items():
        for version, row in d["plays"].items():
            lines.append(f"| {names.get(arm, arm)} | {version} | {row['plays']} | {_num(row['win_rate'], '.3f')} | "
                         f"{_num(row['mean_tokens'], '.0f')} | {row['cut']} |")
    return [*lines, ""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="a tiny random GGUF model and tiny sizes (checks the script; CI)")
    ap.add_argument("--model", default=MODEL)
    ap.add_argument("--tasks", nargs="+", default=list(TASKS))
    ap.add_argument("--pool-size", type=int, default=400, help="training items per task")
    ap.add_argument("--plays", type=int, default=8, help="plain plays per item (the GRPO group)")
    ap.add_argument("--batch-groups", type=int, default=4, help="groups with reward variance per update")
    ap.add_argument("--updates", type=int, default=6, help="most updates per arm")
    ap.add_argument("--minutes", type=float, default=30.0,
                    help="arm R's training time, held-out evaluations not counted (D is matched on R's updates or tokens: --match)")
    ap.add_argument("--token-budget", type=int, default=None, help="train each arm on this many tokens (default: R's)")
    ap.add_argument("--match", choices=("tokens", "updates"), default="updates",
                    help="what D matches of R: trained tokens, or updates (same samples per update; a random reward "
                         "can shorten answers to a tenth, and then matching tokens takes D many more updates)")
    ap.add_argument("--lr", type=float, default=1e-4,
                    help="LoRA learning rate. 1e-4: on the 0.5B's first batch of 32 answers a step moves the policy by "
                         "KL 0.009 a token and raises the right answers most; 2e-4 (the default until 2026-12-05) moves it "
                         "by 0.06 and lowers mostly the wrong ones, and the next answers ran longer and scored a tenth as "
                         "often (bench/step_size.py, docs/results/2026-12-05-step-size.md)")
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=320,
                    help="tokens per training answer (the held-out budget: a shorter one scores long right answers 0)")
    ap.add_argument("--temperature", type=float, default=0.7,
                    help="the training plays' sampling temperature (top-p 1.0); held-out answers are greedy. 0.7 "
                         "tripled the groups with reward variance against 1.0 (docs/notes/measurements.md)")
    ap.add_argument("--parallel", type=int, default=16, help="sequences llama.cpp decodes together")
    ap.add_argument("--backend", choices=("llamacpp", "transformers"), default="llamacpp",
                    help="llamacpp (a CPU: the GGUF, LoRA adapters synced into llama.cpp) or transformers (a GPU: the "
                         "dequantised model, merged weights loaded after each update; with --device cuda)")
    ap.add_argument("--device", default="cpu", help="with --backend transformers: cpu, cuda or cuda:N (policy and trainer)")
    ap.add_argument("--concurrent-envs", type=int, default=2, help="items played at once (their plays decode together)")
    ap.add_argument("--eval-size", type=int, default=100, help="held-out items per task")
    ap.add_argument("--eval-seed", type=int, default=6,
                    help="held-out items: 6 is the reported run's; a new experiment takes a seed no run has looked at "
                         "(0-7, 96, 98 and 99 have been)")
    ap.add_argument("--eval-every", type=int, default=0, help="also evaluate every N updates (0: v0 and the final ones)")
    ap.add_argument("--eval-max-new-tokens", type=int, default=320)
    ap.add_argument("--eval-prompt", choices=tuple(EVAL_PROMPTS), default="agent-v1",
                    help="the held-out items' prompt: agent-v1 asks as the training plays ask (the agent's system prompt, "
                         "the pool's instruction after the question), so the held-out items differ from the training "
                         "ones only in the items; boxed-v1 is `spade-engine eval`'s default (the seven runs up to "
                         "2026-12-06 used it)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, default=None, help="keep the runs here (default: a temporary directory)")
    ap.add_argument("--report", action="store_true", help="write docs/results/<date>-<report-name>.{json,md,png,html}")
    ap.add_argument("--report-name", default="learning", help="the results page's name after its date")
    ap.add_argument("--report-from", type=Path, default=None, metavar="JSON",
                    help="write the results page of an earlier run from the JSON line it printed (nothing is run; "
                         "with --data-dir, the updates' and plays' tables are read from its runs when the JSON lacks them)")
    a = ap.parse_args()
    if a.report_from is not None:
        from results_page import load_result, write_results

        result = load_result(a.report_from, "learning")
        result["report_name"] = a.report_name  # the page's own files are named after it
        if "detail" not in result and a.data_dir is not None:  # a run from before the detail existed: read its logs
            result["detail"] = {arm: read_arm(a.data_dir, result["arms"][arm]["run_id"])["detail"] for arm in ("real", "random")}
        page = write_results(a.report_name, result, render, extra_files=figures(result))
        say(f"results page {page}")
        return
    tmp = tempfile.TemporaryDirectory(prefix="spade-bench-learning-")
    if a.smoke:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from models_support import write_tiny_gguf

        gguf = Path(tmp.name) / "tiny.gguf"
        write_tiny_gguf(gguf, arch="qwen2", seed=0)
        os.environ["SPADE_MODEL_CACHE"] = str(Path(tmp.name) / "cache")
        # transformers: the built-in tiny model (a context of 32k positions; the tiny GGUF's 256 hold
        # no reasoning-gym prompt in its byte-level tokens, so every play would end at the context)
        a.model = "tiny:0" if a.backend == "transformers" else str(gguf)
        a.tasks, a.pool_size, a.plays, a.batch_groups, a.updates = ["leg_counting"], 4, 2, 1, 1
        a.max_new_tokens, a.eval_size, a.eval_max_new_tokens, a.minutes, a.parallel, a.lr = 4, 3, 4, 1.0, 4, 1e-3
        a.concurrent_envs, a.eval_every = 1, 0
    from results_page import provenance

    measured = provenance()  # recorded in the JSON: a page written later from it names this run
    load_start = round(os.getloadavg()[0], 2)
    t_all = time.perf_counter()
    data = a.data_dir or Path(tmp.name) / "data"
    data.mkdir(parents=True, exist_ok=True)
    say(f"model {a.model}; tasks {', '.join(a.tasks)}; held-out {a.eval_size} items per task; load average {load_start}")
    real = run_arm("R (real reward)", a, data, control="none", base_eval=True, seconds=a.minutes * 60,
                   token_budget=a.token_budget)
    if a.match == "updates":  # D takes as many updates (of as many samples) as R, whatever their lengths
        random_arm = run_arm("D (random reward)", a, data, control="coin", base_eval=False, seconds=a.minutes * 60 * 3,
                             token_budget=None, cap=max(real["updates"], 1))
    else:
        budget = a.token_budget or real["trained_tokens"]
        random_arm = run_arm("D (random reward)", a, data, control="coin", base_eval=False, seconds=a.minutes * 60 * 3,
                             token_budget=max(budget, 1))
    gain = paired(data, real["run_id"], "v0", real["run_id"], "latest")
    # D's final against the base weights evaluated in R's run: the same items, paired
    rand = paired(data, real["run_id"], "v0", random_arm["run_id"], "latest")
    rvd = paired(data, random_arm["run_id"], "latest", real["run_id"], "latest")
    logs = {"real": read_arm(data, real["run_id"]), "random": read_arm(data, random_arm["run_id"])}
    result = {
        "model": a.model, "backend": a.backend, "device": a.device, "smoke": a.smoke, "tasks": a.tasks, "pool_size": a.pool_size, "plays": a.plays,
        "batch_groups": a.batch_groups, "lr": a.lr, "temperature": a.temperature, "match": a.match, "lora_r": a.lora_r, "eval_max_new_tokens": a.eval_max_new_tokens,
        "eval_prompt": a.eval_prompt,
        "heldout_gain": gain["delta"], "heldout_gain_ci95": gain["ci95"],
        "random_reward_gain": rand["delta"], "random_reward_gain_ci95": rand["ci95"],
        "real_minus_random": rvd["delta"], "real_minus_random_ci95": rvd["ci95"],
        "items": gain["items"], "base_accuracy": gain["accuracy_a"], "real_accuracy": gain["accuracy_b"],
        "random_accuracy": rand["accuracy_b"], "per_task": gain["per_task"], "random_per_task": rand["per_task"],
        "discordant_real": [gain["a_only"], gain["b_only"]], "discordant_random": [rand["a_only"], rand["b_only"]],
        "trained_tokens": real["trained_tokens"], "random_trained_tokens": random_arm["trained_tokens"],
        "trained_token_ratio": round(random_arm["trained_tokens"] / real["trained_tokens"], 3) if real["trained_tokens"] else None,
        "arms": {"real": real, "random": random_arm},
        "curves": {arm: logs[arm]["curves"] for arm in ("real", "random")},
        "detail": {arm: logs[arm]["detail"] for arm in ("real", "random")},
        "minutes": round((time.perf_counter() - t_all) / 60, 1),
        "load_average_start": load_start, "load_average_end": round(os.getloadavg()[0], 2),
        "report_name": a.report_name, "provenance": measured,
    }
    say(f"held-out gain (R final - v0) {result['heldout_gain']:+.3f} {result['heldout_gain_ci95']} over {result['items']} items; "
        f"random-reward control {result['random_reward_gain']:+.3f} {result['random_reward_gain_ci95']}; "
        f"R - D {result['real_minus_random']:+.3f} {result['real_minus_random_ci95']}")
    if a.report:
        from results_page import write_results

        page = write_results(a.report_name, result, render, extra_files=figures(result))
        say(f"results page {page}")
    if a.data_dir is None:
        tmp.cleanup()
    print(json.dumps(result, sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
