"""Benchmark of the Environment Designer with a real model: N proposals through the real stages.

Two arms in the same run, with the same loaded model:

* **current**: the designer prompt of issue 17 (contract, do-not list, turn budget, complete seed
  environments as examples), the designer's generation settings (``[policy.generation.designer]``),
  the seed archive recorded first (so near-copies of a seed are duplicates), batched design
  (``--batch`` proposals per generate call), repairs of every rejection (duplicates included) with
  targeted advice;
* **baseline**: the previous prompt and settings (``bench/designer_baseline.py``: skeleton with
  ``...`` bodies, no example, 512 new tokens at temperature 1.0 and top-p 1.0, turn limit 8, one
  proposal per call unless ``--baseline-batch``, repairs of invalid ones only, the old repair
  message). Both arms use today's sandbox (turn cap, stdlib names) and sampler.

Each arm: N first proposals -> sandboxed validation + embedding novelty -> one repair round ->
validation. Nothing is played. Then plain ``model.generate()`` and the engine's sampler decode the
same batch of designer prompts for ``--compare-tokens`` tokens (sampler prefix cache emptied),
for tokens/s at the same batch.

Prints figures, and as its LAST line one JSON object: the current arm's ``valid_first_try``,
``valid_after_repair``, ``accepted`` (valid and novel after at most one repair; fractions of N),
``error_kinds`` (first tries), ``designer_tokens_per_s`` (completion tokens / designer seconds, prefill included),
``s_per_accepted_env`` (the arm's wall time / accepted environments; null when none); the same under ``baseline``; ``sampler_tokens_per_s`` and
``generate_tokens_per_s`` (decoding at the same batch, prefill excluded) and their ratio; the load
averages seen.

    python3 bench/designer.py --model ~/.cache/spade-models/qwen2.5-coder-0.5b-instruct/hf --n 8
    python3 bench/designer.py --model tiny --n 2 --max-new-tokens 48      # smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from designer_baseline import BASELINE_SETTINGS, baseline_designer_messages, baseline_repair_messages  # noqa: E402
from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()  # no tqdm or Hugging Face progress bars in the benchmark's output

from spade_engine.config import load_config  # noqa: E402
from spade_engine.engine import stages  # noqa: E402
from spade_engine.engine.pipeline import design_batch, missing_seeds, next_stage  # noqa: E402
from spade_engine.events.store import new_run_id  # noqa: E402
from spade_engine.policy.protocol import PolicyRequest  # noqa: E402
from spade_engine.policy.hf import model_source  # noqa: E402
from spade_engine.policy.transformers_policy import TransformersPolicy  # noqa: E402
from spade_engine.runs.engine import open_engine  # noqa: E402


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@contextlib.contextmanager
def baseline_repairs() -> Iterator[None]:
    """The baseline arm's repair message (the design stage's module global, for this arm only)."""
    saved = stages.design.repair_messages
    stages.design.repair_messages = baseline_repair_messages  # type: ignore[assignment]
    try:
        yield
    finally:
        stages.design.repair_messages = saved  # type: ignore[assignment]


def run_arm(
    policy: Any, arm: str, *, n: int, batch: int, max_new: int, seed: int, root: Path, say: Any, baseline_batch: int = 1,
    extra: dict[str, Any] | None = None, preset: str | None = None,
) -> dict[str, Any]:
    if arm == "current":
        overrides = {
            "loop.seed_envs": "bundled", "loop.designer_batch": batch,
            "policy.generation.designer.max_new_tokens": max_new, **(extra or {}),
        }
    else:
        overrides = {
            "loop.seed_envs": "none", "loop.designer_batch": baseline_batch, "loop.turn_limit": 8,
            **{f"policy.generation.designer.{k}": v for k, v in BASELINE_SETTINGS.items()},
        }
    cfg = load_config(
        overrides={"seed": seed, "policy.kind": policy.kind, "policy.model": "bench", "loop.max_repairs": 1, **overrides},
        environ={}, preset=preset if arm == "current" else None,
    )
    t_open = time.perf_counter()
    load_start = load()
    with open_engine(cfg, run_id=new_run_id(), data_dir=root, create=True, policy=policy) as opened, (
        baseline_repairs() if arm == "baseline" else contextlib.nullcontext()
    ):
        eng = opened.engine
        if arm == "baseline":
            eng.ctx = dataclasses.replace(eng.ctx, designer_prompt=baseline_designer_messages)
        ctx = eng.ctx
        ctx.embedder.embed(["warm up"])
        eng.start_record()
        for payload in missing_seeds(ctx, eng.state):
            eng._append(payload)
        validate_pending(eng, ctx)
        say(f"[{arm}] {len(ctx.seed_envs)} seed environments recorded ({time.perf_counter() - t_open:.0f}s of setup)")
        t0 = time.perf_counter()
        design_s, tokens = 0.0, 0
        slots = list(range(n))
        step = cfg.loop.designer_batch or 1
        for i in range(0, n, step):
            t = time.perf_counter()
            out = design_batch(ctx, eng.state, repairs=[], new_indices=slots[i : i + step])
            design_s += time.perf_counter() - t
            for payload, cause in out:
                tokens += len(payload.generation.completion_token_ids) if payload.generation else 0
                eng._append(payload, cause)
            say(f"[{arm}] designed slots {slots[i : i + step]} ({time.perf_counter() - t:.0f}s)")
            validate_pending(eng, ctx)
        first = [st for st in eng.state.roots()]
        kinds = Counter(st.validated.error_kind or "?" for st in first if not (st.validated.valid and st.validated.accepted))
        valid_first = sum(1 for st in first if st.validated.valid)
        # one repair round: the current arm repairs every rejection, the baseline invalid ones only
        todo = [st for st in first if next_stage(cfg.loop, cfg.replay, st, seed=cfg.seed) == "repair" and (arm == "current" or not st.validated.valid)]
        for i in range(0, len(todo), step):
            t = time.perf_counter()
            out = design_batch(ctx, eng.state, repairs=todo[i : i + step], new_indices=[])
            design_s += time.perf_counter() - t
            for payload, cause in out:
                tokens += len(payload.generation.completion_token_ids) if payload.generation else 0
                eng._append(payload, cause)
            say(f"[{arm}] repaired {[st.env_id for st in todo[i : i + step]]} ({time.perf_counter() - t:.0f}s)")
            validate_pending(eng, ctx)
        wall = time.perf_counter() - t0
        final = []
        for st in first:
            cur = st
            while cur.repaired_by is not None:
                cur = eng.state.envs[cur.repaired_by]
            final.append(cur)
        valid_after = sum(1 for st in final if st.validated is not None and st.validated.valid)
        accepted = sum(1 for st in final if st.accepted)
        repair_kinds = Counter(
            st.validated.error_kind or "?" for st in final if st.proposed.attempt > 0 and not st.accepted  # type: ignore[union-attr]
        )
        verdicts = [_verdict(st, eng.state, final_st) for st, final_st in zip(first, final)]
        prompts = [st.proposed.prompt for st in first]  # type: ignore[union-attr]
        system = (ctx.designer_prompt or stages.prompt_builder(ctx.cfg.loop))(skill="arithmetic", difficulty=0.5, document_text="")[0]["content"]
    res = {
        "n": n,
        "valid_first_try": valid_first / n,
        "valid_after_repair": valid_after / n,
        "accepted": accepted / n,
        "accepted_count": accepted,
        "error_kinds": dict(kinds.most_common()),
        "repair_error_kinds": dict(repair_kinds.most_common()),
        "designer_tokens": tokens,
        "designer_s": round(design_s, 2),
        "designer_tokens_per_s": round(tokens / design_s, 3) if design_s else 0.0,
        "wall_s": round(wall, 1),
        "s_per_accepted_env": round(wall / accepted, 1) if accepted else None,
        "batch": step,
        "max_new_tokens": cfg.policy.generation.designer.max_new_tokens,
        "load_start": load_start,
        "load_end": load(),
        "run_id": eng.run_id,
        "verdicts": verdicts,
    }
    res["_messages"] = [[{"role": "system", "content": system}, {"role": "user", "content": p}] for p in prompts]
    return res


def _verdict(first: Any, state: Any, final: Any) -> dict[str, Any]:
    """One slot: its first try's verdict and its final one (after the repair, if any)."""

    def one(st: Any) -> dict[str, Any]:
        v, g = st.validated, st.proposed.generation
        return {"env_id": st.env_id, "valid": bool(v and v.valid), "accepted": bool(st.accepted),
                "error_kind": (v.error_kind if v else None) or None, "failed_check": (v.failed_check if v else None) or None,
                "class_name": (v.class_name if v else None) or None,
                "finish_reason": g.finish_reason if g is not None else None}

    return {"first": one(first), "final": one(final) if final is not first else None}


def validate_pending(eng: Any, ctx: Any) -> None:
    todo = [st for st in eng.state.proposed() if next_stage(eng.cfg.loop, eng.cfg.replay, st, seed=eng.cfg.seed) == "validate"]
    if todo:
        for st, verdict in zip(todo, stages.validate_batch(ctx, [st.proposed for st in todo])):
            eng._append(verdict, st.proposed_id)


def compare_generate(policy: TransformersPolicy, messages: list[list[dict[str, str]]], tokens: int) -> dict[str, float]:
    """Decoding tokens/s of the engine's sampler and of plain ``model.generate()`` on the same
    batch of prompts, ``tokens`` new tokens each (sampling at the designer's temperature)."""
    import torch

    prompts = [policy.render(PolicyRequest(role="designer", messages=m)) for m in messages]
    B = len(prompts)
    policy.prefix_cache.clear()
    reports: list[Any] = []
    t0 = time.perf_counter()
    policy.sampler.sample(prompts, max_new_tokens=tokens, temperature=0.6, top_p=0.95, row_seeds=list(range(B)),
                          on_progress=reports.append)
    ours_total = time.perf_counter() - t0
    ours_decode = ours_total - reports[-1].prefill_s
    policy.prefix_cache.clear()
    P = max(len(p) for p in prompts)
    pad = policy.sampler.pad_id
    ids = torch.tensor([[pad] * (P - len(p)) + list(p) for p in prompts])
    mask = torch.tensor([[0] * (P - len(p)) + [1] * len(p) for p in prompts])
    kw = dict(input_ids=ids, attention_mask=mask, do_sample=True, temperature=0.6, top_p=0.95, top_k=0, pad_token_id=pad)
    with torch.inference_mode():
        t0 = time.perf_counter()
        policy.model.generate(**kw, max_new_tokens=1)
        prefill = time.perf_counter() - t0
        t0 = time.perf_counter()
        policy.model.generate(**kw, max_new_tokens=tokens, min_new_tokens=tokens)
        gen_total = time.perf_counter() - t0
    gen_decode = max(1e-9, gen_total - prefill)
    return {
        "compare_batch": B,
        "compare_tokens": tokens,
        "sampler_tokens_per_s": round(B * tokens / ours_decode, 3),
        "generate_tokens_per_s": round(B * tokens / gen_decode, 3),
        "sampler_speedup": round(gen_decode / ours_decode, 3),
        "sampler_total_s": round(ours_total, 1),
        "generate_total_s": round(gen_total + prefill, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a catalogue name (spade-engine models list), a model directory, a .gguf file, or tiny[:SEED] for a smoke run")
    ap.add_argument("--n", type=int, default=8, help="first proposals per arm")
    ap.add_argument("--batch", type=int, default=4, help="proposals per batched designer call (current arm)")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="designer token limit of the current arm (default: the config's)")
    ap.add_argument("--compare-tokens", type=int, default=32, help="new tokens per row in the generate() comparison")
    ap.add_argument("--baseline-batch", type=int, default=1,
                    help="proposals per call in the baseline arm (1 = as before; more saves time and changes no proposal)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override for the current arm (repeatable), e.g. loop.prompt_examples=1")
    ap.add_argument("--preset", default=None, metavar="NAME|none",
                    help="config preset of the current arm (default: the one the model catalogue names for --model, as "
                         "`start --model` uses it; none: the engine's defaults)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--report", action="store_true", help="write docs/results/<date>-designer-<model>.{json,md}")
    ap.add_argument("--report-from", type=Path, default=None, metavar="JSON",
                    help="write the results page from a saved result (a results JSON or a log of this script) and stop")
    ap.add_argument("--dtype", default="auto", help="transformers weights' dtype")
    ap.add_argument("--policy", default=None, metavar="llamacpp|transformers",
                    help="the backend (default: as start --model picks it: llamacpp for a GGUF model on a CPU)")
    ap.add_argument("--arms", default="current,baseline", help="which arms to run, in order")
    ap.add_argument("--keep", default=None, metavar="DIR",
                    help="keep each arm's data directory under DIR (to read the proposals with spade-engine audit)")
    args = ap.parse_args()
    from results_page import load_result, provenance, write_results

    if args.report_from is not None:
        r = load_result(args.report_from, "designer")
        print(f"results page {write_results(report_name(r['model']), r, render)}")
        return
    started = provenance()

    def say(line: str) -> None:
        print(line, flush=True)

    t0 = time.perf_counter()
    from spade_engine.policy.choice import model_policy

    policy = model_policy(args.model, kind=args.policy, sections={"transformers": {"dtype": args.dtype}})
    from spade_engine.runs.progress import ModelActivity

    activity, last = ModelActivity(), [0.0]

    def progress(p: Any) -> None:  # one line a minute while a long call runs
        activity.on_progress(p)
        if time.monotonic() - last[0] >= 60:
            last[0] = time.monotonic()
            say(f"  ... {activity.text()} (load {load()})")

    policy.on_progress = progress
    d = policy.describe()
    size = f"{d['parameters'] / 1e6:.0f}M parameters, {d['dtype']}" if "parameters" in d else f"GGUF {d.get('gguf')}"
    say(f"model {args.model} ({policy.kind}): {size} on {d.get('device', 'cpu')}, "
        f"{os.cpu_count()} CPUs, torch threads {__import__('torch').get_num_threads()}, loaded in "
        f"{time.perf_counter() - t0:.0f}s; load average {load()}")
    from spade_engine.runs.start import catalogue_preset

    preset = None if args.preset == "none" else args.preset or catalogue_preset(args.model)
    max_new = args.max_new_tokens or load_config(environ={}, preset=preset).policy.generation.designer.max_new_tokens
    say(f"current arm: preset {preset or 'none (defaults)'}, designer format "
        f"{load_config(environ={}, preset=preset).loop.designer_format}, {max_new} designer tokens at most")
    arms: dict[str, dict[str, Any]] = {}
    with (contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory(prefix="bench-designer-")) as tmp:
        for arm in [a.strip() for a in args.arms.split(",") if a.strip()]:
            res = run_arm(policy, arm, n=args.n, batch=min(args.batch, args.n), max_new=max_new, seed=args.seed,
                          root=Path(tmp) / arm, say=say, baseline_batch=min(args.baseline_batch, args.n),
                          extra=dict(kv.split("=", 1) for kv in args.set), preset=preset)
            arms[arm] = res
            say(f"[{arm}] valid first try {res['valid_first_try']:.0%}, after repair {res['valid_after_repair']:.0%}, "
                f"accepted {res['accepted']:.0%}; first-try rejections {res['error_kinds']}; "
                f"{res['designer_tokens']} designer tokens at {res['designer_tokens_per_s']} tok/s; "
                f"{res['wall_s']}s ({res['s_per_accepted_env'] or '-'}s per accepted env); load {res['load_start']} -> {res['load_end']}")
    first = next(iter(arms.values()))
    cmp: dict[str, Any] = {}
    if isinstance(policy, TransformersPolicy):  # llama.cpp against transformers: bench/inference.py
        cmp = compare_generate(policy, first["_messages"][: min(args.batch, args.n)], args.compare_tokens)
        say(f"decoding at batch {cmp['compare_batch']}: sampler {cmp['sampler_tokens_per_s']} tok/s, "
            f"generate() {cmp['generate_tokens_per_s']} tok/s (x{cmp['sampler_speedup']})")
    for res in arms.values():
        res.pop("_messages", None)
    current = arms.get("current", first)
    out = {k: current[k] for k in ("valid_first_try", "valid_after_repair", "accepted", "error_kinds",
                                   "designer_tokens_per_s", "s_per_accepted_env")}
    out.update({"model": args.model, "preset": preset, "policy": policy.kind, "n": args.n, "current": current, "baseline": arms.get("baseline"), **cmp, "load_end": load(),
                "provenance": started})
    if args.report:
        say(f"results page {write_results(report_name(args.model), json.loads(json.dumps(out, default=str)), render)}")
    print(json.dumps(out, default=str))


def report_name(model: str) -> str:
    return "designer-" + Path(model).name.removesuffix(".gguf").replace(":", "-")


def render(r: dict[str, Any]) -> str:
    """The results page's body: each arm's figures and each slot's verdicts."""
    lines = [f"Model `{r['model']}` ({r['policy']}), preset `{r.get('preset') or 'none'}`, {r['n']} first proposals per arm, "
             "one repair round; validation in the sandbox, novelty against the seed archive. Nothing is played.", ""]
    for arm in ("current", "baseline"):
        a = r.get(arm)
        if not a:
            continue
        lines += [f"## {arm}", "",
                  f"- valid first try {a['valid_first_try']:.0%}, after repair {a['valid_after_repair']:.0%}, accepted "
                  f"{a['accepted']:.0%} ({a.get('accepted_count', '?')} of {a['n']})",
                  f"- first-try rejections: {a['error_kinds']}; after the repair: {a.get('repair_error_kinds')}",
                  f"- {a['designer_tokens']} designer tokens in {a['designer_s']} s ({a['designer_tokens_per_s']} tokens/s, prefill "
                  f"included); batch {a['batch']}, at most {a['max_new_tokens']} tokens; wall {a['wall_s']} s; load "
                  f"{a['load_start']} -> {a['load_end']}", ""]
        if a.get("verdicts"):
            lines += ["| slot | first try | finish | repaired | accepted |", "|---|---|---|---|---|"]
            for v in a["verdicts"]:
                f, fin = v["first"], v["final"]

                def word(x: dict[str, Any]) -> str:
                    return "valid" if x["valid"] else f"{x['error_kind']} ({x['failed_check']})"

                lines.append(f"| {f['env_id']} | {word(f)} | {f['finish_reason']} | {word(fin) if fin else '-'} | "
                             f"{(fin or f)['class_name'] if (fin or f)['accepted'] else 'no'} |")
            lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
