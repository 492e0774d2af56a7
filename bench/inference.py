"""Inference speed of the real-model backends on this machine: llama.cpp against transformers.

For each model (catalogue names; default the 0.5B and the 1.5B), each prompt kind (the designer's
prompts as the engine builds them with the small-model preset: system prompt, a document, complete
seed examples; and the agent's: its system prompt and a reasoning-gym question) and each batch
size (default 1, 4 and 16), both backends complete the same distinct prompts with the same seeds
and temperature, every row running to exactly ``--new-tokens`` tokens (end-of-sequence ignored),
with every cache emptied first (no prefix reuse):

* **prefill tokens/s**: prompt tokens / time until every prompt was processed;
* **decode tokens/s**: new tokens / the rest of the time (all rows together).

The machine's memory copy bandwidth is measured in the same run (numpy copies of 1 GiB). A
decoding step reads every weight once, so ``bandwidth / weight bytes`` bounds the steps per
second; ``bandwidth_share`` is the measured steps/s at batch 1 over that bound (llama.cpp reads the
GGUF file's bytes; transformers, float32, four bytes per parameter).

Prints a table, and as its LAST line one JSON object: per model, kind, backend and batch the
figures; ``speedup_decode_b4`` (llama.cpp decode tokens/s over transformers' at batch 4, designer
prompts, first model; goal >= 5), ``bandwidth_share`` (llama.cpp, batch 1, designer prompts, first
model), ``copy_gb_per_s``, and the load averages seen.

    python3 bench/inference.py                                   # both models, ~15 minutes
    python3 bench/inference.py --model qwen2.5-coder-0.5b-instruct --batches 1,4
    python3 bench/inference.py --smoke                           # a tiny GGUF, seconds (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()

import numpy as np  # noqa: E402

MODELS = ("qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct")


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def copy_bandwidth(gib: float = 1.0, repeats: int = 5) -> float:
    """Memory copy bandwidth in GB/s (bytes read + written per second, best of ``repeats``)."""
    n = int(gib * (1 << 30)) // 8
    src = np.ones(n, dtype=np.float64)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t)
    return 2 * src.nbytes / best / 1e9


def designer_prompts(policy: Any, n: int) -> list[list[dict[str, str]]]:
    """``n`` designer prompts as the engine builds them (small-model preset, seed examples)."""
    from spade_engine.config import load_config
    from spade_engine.engine import stages
    from spade_engine.engine.corpus import bundled_corpus
    from spade_engine.engine.designer import CodeExample
    from spade_engine.engine.seed_archive import load_seed_envs

    cfg = load_config(preset="small-model", overrides={"seed": 1}, environ={})
    seeds = load_seed_envs("bundled")
    ctx = stages.StageContext(run_id="run-bench-inference", cfg=cfg, policy=policy, corpus=bundled_corpus(),
                              tokenize=policy.tokenize, seed_envs=seeds)
    pool = [CodeExample(env_id=f"seed-{s.name}", code=s.code, skill=s.skill, note=f"skill {s.skill}") for s in seeds]
    return [stages.design_job(ctx, env_id=f"bench-{i:05d}", index=i, skill_history=lambda skill: [],
                              examples_pool=pool).messages for i in range(n)]


def agent_prompts(n: int) -> list[list[dict[str, str]]]:
    """``n`` agent prompts: the agent's system prompt and a reasoning-gym question each."""
    import reasoning_gym

    from spade_engine.engine.rollouts import AGENT_SYSTEM_PROMPT, first_user_message

    items = list(reasoning_gym.create_dataset("basic_arithmetic", size=n, seed=7))
    return [[{"role": "system", "content": AGENT_SYSTEM_PROMPT},
             {"role": "user", "content": first_user_message(item["question"], None)}] for item in items]


def run_llamacpp(policy: Any, prompts: list[list[int]], new_tokens: int) -> dict[str, float]:
    from spade_engine.policy.llamacpp_engine import SeqRequest

    engine = policy.engine
    engine.clear_cache()
    final: list[Any] = []
    t = time.perf_counter()
    out = engine.generate([SeqRequest(p, new_tokens, temperature=0.6, top_p=0.95, seed=i) for i, p in enumerate(prompts)],
                          on_progress=final.append, progress_every_s=1e9, ignore_eog=True)
    wall = time.perf_counter() - t
    report = final[-1]
    return _figures(prompts, sum(len(o.token_ids) for o in out), report.prefill_s, wall)


def run_transformers(policy: Any, prompts: list[list[int]], new_tokens: int) -> dict[str, float]:
    sampler = policy.sampler
    policy.prefix_cache.clear()
    final: list[Any] = []
    eos, sampler.eos_ids = sampler.eos_ids, []
    try:
        t = time.perf_counter()
        out = sampler.sample(prompts, max_new_tokens=new_tokens, temperature=0.6, top_p=0.95,
                             row_seeds=list(range(len(prompts))), on_progress=final.append)
        wall = time.perf_counter() - t
    finally:
        sampler.eos_ids = eos
    policy.prefix_cache.clear()
    return _figures(prompts, sum(len(c.token_ids) for c in out), final[-1].prefill_s, wall)


def _figures(prompts: list[list[int]], new: int, prefill_s: float, wall: float) -> dict[str, float]:
    decode_s = max(wall - prefill_s, 1e-9)
    return {
        "batch": len(prompts), "prompt_tokens": sum(len(p) for p in prompts), "new_tokens": new,
        "prefill_s": round(prefill_s, 3), "decode_s": round(decode_s, 3),
        "prefill_tokens_per_s": round(sum(len(p) for p in prompts) / max(prefill_s, 1e-9), 1),
        "decode_tokens_per_s": round(new / decode_s, 2),
        "decode_steps_per_s": round(new / len(prompts) / decode_s, 2),
    }


def build_policies(model: str, backends: list[str], *, parallel: int, smoke: Path | None) -> dict[str, Any]:
    from spade_engine.config import PolicyConfig
    from spade_engine.policy.registry import make_policy

    out: dict[str, Any] = {}
    for kind in backends:
        spec = str(smoke) if smoke is not None else model
        cfg = {"kind": kind, "model": spec, "llamacpp": {"parallel": parallel, "context_per_sequence": 4096}}
        if kind == "transformers":
            cfg["transformers"] = {"dtype": "fp32", "device": "cpu", "batch_size": 64}
        out[kind] = make_policy(PolicyConfig.model_validate(cfg))
    return out


def smoke_gguf(work: Path) -> Path:
    """A tiny random qwen2 GGUF in ``work`` for ``--smoke`` runs, with the model cache there too."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from models_support import write_tiny_gguf

    path = work / "tiny.gguf"
    write_tiny_gguf(path, arch="qwen2", seed=0)
    os.environ["SPADE_MODEL_CACHE"] = str(work / "cache")
    return path


def weight_bytes(kind: str, policy: Any) -> int:
    if kind == "llamacpp":
        return policy.engine.path.stat().st_size
    return 4 * sum(p.numel() for p in policy.model.parameters())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", default=None, help="catalogue model (repeatable; default: the 0.5B and the 1.5B)")
    ap.add_argument("--batches", default="1,4,16", help="batch sizes")
    ap.add_argument("--new-tokens", type=int, default=32, help="new tokens per row")
    ap.add_argument("--kinds", default="designer,agent", help="prompt kinds")
    ap.add_argument("--backends", default="llamacpp,transformers")
    ap.add_argument("--smoke", action="store_true", help="a tiny random GGUF model, batches 1,2, 4 new tokens (checks the script)")
    ap.add_argument("--out", default=None, help="also write the JSON to this file")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from results_page import add_report_options, provenance, report_from, write_results

    add_report_options(ap, "inference")
    args = ap.parse_args()
    if report_from(args.report_from, "inference", "inference", render):
        return
    started = provenance()
    batches = [int(b) for b in args.batches.split(",")]
    kinds = [k for k in args.kinds.split(",") if k]
    backends = [b for b in args.backends.split(",") if b]
    smoke_file = None
    tmp = tempfile.TemporaryDirectory(prefix="bench-inference-")
    if args.smoke:
        smoke_file = smoke_gguf(Path(tmp.name))
        batches, args.new_tokens = [1, 2], 4
    models = ["tiny"] if args.smoke else (args.model or list(MODELS))
    say = lambda line: print(line, flush=True)  # noqa: E731
    bw = copy_bandwidth(0.25 if args.smoke else 1.0)
    say(f"memory copy bandwidth {bw:.1f} GB/s; {os.cpu_count()} CPUs; load {load()}")
    results: dict[str, Any] = {}
    for model in models:
        t = time.perf_counter()
        policies = build_policies(model, backends, parallel=max(batches), smoke=smoke_file)
        say(f"{model}: loaded {', '.join(policies)} in {time.perf_counter() - t:.0f}s")
        any_policy = next(iter(policies.values()))
        texts = {}
        if "designer" in kinds:
            texts["designer"] = designer_prompts(any_policy, max(batches))
        if "agent" in kinds:
            texts["agent"] = agent_prompts(max(batches))
        for kind, messages in texts.items():
            from spade_engine.policy.protocol import PolicyRequest

            prompts = [any_policy.render(PolicyRequest(role="agent" if kind == "agent" else "designer", messages=m))
                       for m in messages]
            for backend, policy in policies.items():
                bound = bw * 1e9 / weight_bytes(backend, policy)
                for b in batches:
                    run = run_llamacpp if backend == "llamacpp" else run_transformers
                    fig = run(policy, prompts[:b], args.new_tokens)
                    fig["bandwidth_share"] = round(fig["decode_steps_per_s"] / bound, 3)
                    fig["load"] = load()
                    results.setdefault(model, {}).setdefault(kind, {}).setdefault(backend, {})[str(b)] = fig
                    say(f"  {kind:8s} {backend:12s} batch {b:2d}: prompts {fig['prompt_tokens']:6d} tok, prefill "
                        f"{fig['prefill_tokens_per_s']:7.1f} tok/s, decode {fig['decode_tokens_per_s']:7.2f} tok/s "
                        f"({fig['decode_steps_per_s']:.2f} steps/s, {fig['bandwidth_share']:.0%} of the bandwidth bound "
                        f"{bound:.1f} steps/s); load {fig['load']}")
        for p in policies.values():
            p.close()
    first = results[models[0]]
    summary: dict[str, Any] = {"copy_gb_per_s": round(bw, 2), "new_tokens": args.new_tokens, "batches": batches}
    try:
        kind = "designer" if "designer" in first else next(iter(first))
        llama = first[kind]["llamacpp"]
        summary["bandwidth_share"] = llama[str(min(batches))]["bandwidth_share"]
        b4 = "4" if "4" in llama else str(max(batches))
        summary["speedup_decode_b4"] = round(
            llama[b4]["decode_tokens_per_s"] / first[kind]["transformers"][b4]["decode_tokens_per_s"], 2)
        summary["speedup_prefill_b4"] = round(
            llama[b4]["prefill_tokens_per_s"] / first[kind]["transformers"][b4]["prefill_tokens_per_s"], 2)
    except KeyError:
        pass
    out = {**summary, "models": models, "results": results, "load_end": load(),
           "date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} CPUs", "provenance": started}
    line = json.dumps(out)
    if args.out:
        Path(args.out).write_text(line + "\n")
    tmp.cleanup()
    if args.report and not args.smoke:
        say(f"results page {write_results('inference', out, render)}")
    print(line)


def render(r: dict[str, Any]) -> str:
    """The results page's body: the summary, then one table per model and prompt kind."""
    lines = [
        f"Memory copy bandwidth {r['copy_gb_per_s']} GB/s; {r['new_tokens']} new tokens per row (end of sequence "
        "ignored), every cache emptied first; prefill = prompt tokens / time until every prompt was processed, "
        "decode = new tokens / the rest.",
        "",
        f"- `speedup_decode_b4` (llama.cpp decode tokens/s over transformers' at batch 4, designer prompts, "
        f"{r['models'][0]}): **{r.get('speedup_decode_b4', 'n/a')}** (goal >= 5)",
        f"- `speedup_prefill_b4`: {r.get('speedup_prefill_b4', 'n/a')}",
        f"- `bandwidth_share` (llama.cpp decode steps/s at batch {min(r['batches'])} over the copy-bandwidth bound): "
        f"{r.get('bandwidth_share', 'n/a')}",
        f"- load average at the end: {r.get('load_end')}",
        "",
    ]
    for model, kinds in r["results"].items():
        for kind, backends in kinds.items():
            lines += [f"## {model}, {kind} prompts", "",
                      "| backend | batch | prompt tokens | prefill tok/s | decode tok/s | decode steps/s | share of bound | load |",
                      "|---|---|---|---|---|---|---|---|"]
            for backend, by_batch in backends.items():
                for b, f in sorted(by_batch.items(), key=lambda kv: int(kv[0])):
                    lines.append(f"| {backend} | {b} | {f['prompt_tokens']} | {f['prefill_tokens_per_s']} | {f['decode_tokens_per_s']} "
                                 f"| {f['decode_steps_per_s']} | {f['bandwidth_share']} | {f.get('load')} |")
            lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
