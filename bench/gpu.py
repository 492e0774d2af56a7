"""GPU benchmark of the policy backend (rollout generation) and the trainer (GRPO update).

Model: Qwen2-0.5B shape with random weights (hidden 896, 24 layers, 14 heads, 2 KV heads,
intermediate 4864, vocab 151936, tied embeddings), bf16 on one CUDA GPU (written for an H200).

Rollout: batch 256, prompt 256 tokens, 256 new tokens (sampled, temperature 1, no EOS so every
row generates all tokens), through :class:`BatchSampler` (static KV cache reused between calls,
decode step compiled with ``torch.compile(mode="reduce-overhead")`` = CUDA graphs, grouped-query
decode attention that never copies the cache, exponential-race sampling with behaviour log-probs)
against plain ``model.generate(do_sample=True)`` (dynamic cache, eager) on the same model, prompts
and sizes, in the same run.

Trainer: sequences of 2048 tokens, global batch ``--train-batch`` sequences per optimizer step,
through the trainer's own update (:func:`spade_engine.trainer.update.train_on_samples`: bf16
weights, regional ``torch.compile`` of the decoder layers, SDPA causal/flash attention, chunked
log-prob scoring that never holds the full vocabulary logits, fused AdamW) against a plain
PyTorch loop (fp32 weights + bf16 autocast, ``model(input_ids, labels=...)`` cross-entropy,
default AdamW) in the same run. MFU = 6 * params * tokens/s / 989e12 (H100/H200 dense bf16 peak).

``--smoke`` runs everything at tiny sizes on CPU (compile included) to prove the script end to
end. After each timed part, one more call runs under torch.profiler and the ops with the most
device time are printed (``--no-profile`` skips it), so that a figure that misses its target comes
back with the profile that explains it. The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()  # no tqdm or Hugging Face progress bars in the benchmark's output

import torch  # noqa: E402

PEAK_FLOPS = 989e12


def log(msg: str) -> None:
    print(msg, flush=True)


def build_model(args: argparse.Namespace, device: torch.device, dtype: torch.dtype):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        tie_word_embeddings=True,
        use_cache=True,
    )
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg)
    return model.to(dtype).eval()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def profile(label: str, fn, device: torch.device, rows: int = 18) -> list[dict]:
    """One more call of ``fn`` under torch.profiler; the ops that took the most device time, into
    the log (a table) and returned (``name``, ``device_ms``, ``self_device_ms``, ``calls``) for the JSON.

    Diagnostics only: this explains a figure that misses its target (where the time went), and a
    failure here never loses the figures already measured.
    """
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    cuda = device.type == "cuda"
    sort = "device_time_total" if cuda else "cpu_time_total"
    try:
        sync(device)
        t0 = time.perf_counter()
        with torch_profile(activities=activities) as prof:
            fn()
            sync(device)
        log(f"profile {label} ({time.perf_counter() - t0:.2f}s under the profiler), top {rows} by {sort}:")
        averages = prof.key_averages()
        log(averages.table(sort_by=sort, row_limit=rows, max_name_column_width=60))
        top = sorted(averages, key=lambda e: e.device_time_total if cuda else e.cpu_time_total, reverse=True)[:rows]
        return [{"name": e.key[:80], "device_ms": round((e.device_time_total if cuda else e.cpu_time_total) / 1e3, 3),
                 "self_device_ms": round((e.self_device_time_total if cuda else e.self_cpu_time_total) / 1e3, 3),
                 "calls": e.count} for e in top]
    except Exception:  # noqa: BLE001 - diagnostics only
        log(f"profile {label} failed:")
        traceback.print_exc(file=sys.stdout)
        return []


def parse_profile_tables(text: str) -> dict[str, list[dict]]:
    """The profile tables of a bench log (``profile <label> (...)`` then a torch.profiler table)
    as the rows :func:`profile` returns: for logs of runs whose JSON did not carry them yet."""
    out: dict[str, list[dict]] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("profile ") or "under the profiler" not in line:
            continue
        label = line[len("profile "):line.index(" (")].split(" (")[0]
        rows, header, seps = [], None, 0
        for row in lines[i + 1:]:
            if row.startswith("---"):
                seps += 1
                if seps == 3:
                    break
                continue
            if header is None:
                header = [h.strip() for h in row.split("  ") if h.strip()]
                continue
            parts = row.split()
            if len(parts) < len(header):
                continue
            values, name = parts[-(len(header) - 1):], " ".join(parts[:-(len(header) - 1)])
            cols = dict(zip(header[1:], values))
            rows.append({"name": name, "device_ms": _ms(cols.get("CUDA total", "0us")),
                         "self_device_ms": _ms(cols.get("Self CUDA", "0us")), "calls": int(cols.get("# of Calls", 0))})
        out[label] = rows
    return out


def _ms(value: str) -> float:
    for unit, scale in (("ms", 1.0), ("us", 1e-3), ("s", 1e3)):
        if value.endswith(unit):
            return round(float(value[: -len(unit)]) * scale, 3)
    return 0.0


def n_params(model) -> int:
    seen, total = set(), 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            total += p.numel()
    return total


# -- rollout ------------------------------------------------------------------------------------


def bench_rollout(model, args, device) -> dict:
    from transformers import GenerationConfig

    from spade_engine.policy.decoding import BatchSampler

    B, P, N = args.batch, args.prompt, args.new_tokens
    g = torch.Generator().manual_seed(1)
    prompts = torch.randint(0, args.vocab, (B, P), generator=g)
    out: dict = {}

    # baseline: plain model.generate()
    gen_cfg = GenerationConfig(
        do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=N, pad_token_id=0, eos_token_id=None
    )
    ids = prompts.to(device)
    attn = torch.ones_like(ids)
    with torch.inference_mode():
        warm = GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=4, pad_token_id=0,
                                eos_token_id=None)
        model.generate(ids, attention_mask=attn, generation_config=warm)
        sync(device)
        t0 = time.perf_counter()
        res = model.generate(ids, attention_mask=attn, generation_config=gen_cfg)
        sync(device)
        dt = time.perf_counter() - t0
    assert res.shape == (B, P + N), res.shape
    out["baseline_rollout_tokens_per_s"] = B * N / dt
    log(f"rollout baseline model.generate(): {B}x{N} tokens in {dt:.2f}s = {B * N / dt:,.0f} tok/s")
    del res
    gc.collect()

    # ours: BatchSampler with static cache (+ compile / CUDA graphs)
    plist = prompts.tolist()
    mode = "static+compile" if args.compile else "static"
    try:
        sampler = BatchSampler(model, pad_id=0, eos_ids=[], static_cache=True, compile=args.compile,
                               compile_mode="reduce-overhead" if device.type == "cuda" else None)
        t0 = time.perf_counter()
        sampler.sample(plist, max_new_tokens=N, temperature=1.0)  # warm-up: compile, capture graphs
        sync(device)
        log(f"rollout warm-up ({mode}) {time.perf_counter() - t0:.1f}s")
        try:  # did CUDA graphs apply? (inductor counts skips, e.g. for mutated or CPU inputs)
            from torch._dynamo.utils import counters

            graph_counts = {k: v for k, v in counters["inductor"].items() if "cudagraph" in k}
            log(f"inductor cudagraph counters: {graph_counts or 'none'}")
        except Exception:  # noqa: BLE001 - diagnostics only
            pass
    except Exception:  # noqa: BLE001 - report and fall back to the uncompiled static path
        traceback.print_exc()
        mode = "static (compile failed)"
        torch._dynamo.reset()
        sampler = BatchSampler(model, pad_id=0, eos_ids=[], static_cache=True, compile=False)
        sampler.sample(plist, max_new_tokens=N, temperature=1.0)
    times = []
    for _ in range(args.reps):
        gen = torch.Generator(device=device).manual_seed(len(times))
        sync(device)
        t0 = time.perf_counter()
        comps = sampler.sample(plist, max_new_tokens=N, temperature=1.0, generator=gen)
        sync(device)
        times.append(time.perf_counter() - t0)
    assert all(len(c.token_ids) == N and len(c.logprobs) == N for c in comps)
    dt = min(times)
    out["rollout_tokens_per_s"] = B * N / dt
    out["rollout_mode"] = mode
    out["rollout_speedup"] = out["rollout_tokens_per_s"] / out["baseline_rollout_tokens_per_s"]
    log(f"rollout ours ({mode}): {B}x{N} tokens in {dt:.3f}s = {B * N / dt:,.0f} tok/s "
        f"(runs {', '.join(f'{t:.3f}' for t in times)}s); speedup {out['rollout_speedup']:.1f}x")
    if args.profile:
        out["profile_rollout"] = profile("rollout (ours, one call)", lambda: sampler.sample(plist, max_new_tokens=N, temperature=1.0),
                                         device)
    return out


# -- training -----------------------------------------------------------------------------------


def bench_train_baseline(model, args, device, params: int) -> dict:
    """Plain loop: fp32 weights, bf16 autocast, HF cross-entropy loss, default AdamW."""
    m = model.float().train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-6)
    mb = args.baseline_micro_batch
    steps_mb = max(1, args.train_batch // mb)
    g = torch.Generator().manual_seed(2)
    data = torch.randint(0, args.vocab, (mb, args.seq), generator=g).to(device)
    amp = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")

    def step():
        for _ in range(steps_mb):
            with amp:
                loss = m(input_ids=data, labels=data).loss
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(args.train_steps):
        step()
    sync(device)
    dt = time.perf_counter() - t0
    tps = args.train_steps * steps_mb * mb * args.seq / dt
    mfu = 6 * params * tps / PEAK_FLOPS
    log(f"train baseline (fp32 weights + bf16 autocast, HF loss, AdamW): {tps:,.0f} tok/s, MFU {mfu:.3f}")
    del opt
    m.to(torch.bfloat16).eval()
    return {"baseline_train_tokens_per_s": tps, "baseline_train_mfu": mfu}


def bench_train_ours(model, args, device, params: int) -> dict:
    from spade_engine.config import TrainerConfig
    from spade_engine.trainer.batches import TrainSample
    from spade_engine.trainer.model import TrainModel
    from spade_engine.trainer.update import train_on_samples

    cfg = TrainerConfig(
        learning_rate=1e-6,
        precision="bf16" if device.type == "cuda" else "fp32",
        device=str(device),
        micro_batch_size=args.micro_batch,
        compile=args.compile,
        logits_chunk=args.logits_chunk,
        tis=True,
    )
    tm = TrainModel(model, cfg, device=device)
    g = torch.Generator().manual_seed(3)
    seqs = torch.randint(0, args.vocab, (args.train_batch, args.seq), generator=g).tolist()
    prompt = args.seq // 8
    samples = []
    for i, s in enumerate(seqs):
        samples.append(TrainSample(
            role="agent", env_id=f"e{i // 8}", prompt_ids=s[:prompt], completion_ids=s[prompt:],
            behaviour_logprobs=[-11.9] * (args.seq - prompt), advantage=(1.0 if i % 2 else -1.0), reward=float(i % 2),
            policy_version="v0", event_id=str(i),
        ))
    t0 = time.perf_counter()
    for _ in range(args.warmup):
        train_on_samples(tm, samples)
    sync(device)
    log(f"train warm-up (compile={args.compile}) {time.perf_counter() - t0:.1f}s")
    t0 = time.perf_counter()
    for _ in range(args.train_steps):
        metrics = train_on_samples(tm, samples)
    sync(device)
    dt = time.perf_counter() - t0
    tps = args.train_steps * args.train_batch * args.seq / dt
    mfu = 6 * params * tps / PEAK_FLOPS
    log(f"train ours (trainer update, {tm.precision}, compile={args.compile}, micro-batch {args.micro_batch}, "
        f"logits chunk {args.logits_chunk}): {tps:,.0f} tok/s, MFU {mfu:.3f}; loss {metrics['loss']:+.4f}")
    rows = profile("train (ours, one optimizer step)", lambda: train_on_samples(tm, samples), device) if args.profile else []
    del tm
    return {"train_tokens_per_s": tps, "train_mfu": mfu, **({"profile_train": rows} if rows else {})}


TARGETS = {"rollout_speedup": (10.0, 20.0), "train_mfu": (0.40, 0.45)}  # (target, goal)


def load_run(path: Path) -> dict:
    """A device run as committed under bench/results/: the bench's JSON plus ``provenance`` and
    ``conditions``; profile rows missing from the JSON are read from the ``.log`` beside it."""
    run = json.loads(path.read_text())
    log_path = path.with_suffix(".log")
    if log_path.exists() and ("profile_rollout" not in run or "profile_train" not in run):
        tables = parse_profile_tables(log_path.read_text())
        for key, label in (("profile_rollout", "rollout"), ("profile_train", "train")):
            if key not in run and label in tables:
                run[key] = tables[label]
    run["file"] = path.name
    return run


def _mark(value: float | None, key: str) -> str:
    if value is None:
        return "-"
    target, goal = TARGETS[key]
    verdict = "goal met" if value >= goal else ("target met" if value >= target else "below target")
    return f"{value:.3g} ({verdict})"


def render(data: dict) -> str:
    """The results page of one or more device runs (:func:`load_run`)."""
    out = [
        "bench/gpu.py on the lent GPU: the Qwen2-0.5B shape with random weights in bf16. Rollout: 256 prompts of 256 "
        "tokens, 256 sampled tokens each, the engine's BatchSampler against plain `model.generate()` in the same run. "
        "Training: 32 sequences of 2,048 tokens per optimizer step, the trainer's update against a plain PyTorch loop "
        "(fp32 weights, bf16 autocast, AdamW). MFU = 6 x parameters x tokens/s / 989 TFLOP/s. Targets (issue 34): "
        f"rollout speedup >= {TARGETS['rollout_speedup'][0]:g} (goal {TARGETS['rollout_speedup'][1]:g}), "
        f"MFU >= {TARGETS['train_mfu'][0]:.2f} (goal {TARGETS['train_mfu'][1]:.2f}).",
        "",
        "| run | commit | rollout tok/s | generate() tok/s | speedup | train tok/s | MFU | plain loop MFU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(data["runs"], 1):
        out.append(
            f"| {i} | `{r['provenance']['commit']}` | {r.get('rollout_tokens_per_s', 0):,.0f} | "
            f"{r.get('baseline_rollout_tokens_per_s', 0):,.0f} | {_mark(r.get('rollout_speedup'), 'rollout_speedup')} | "
            f"{r.get('train_tokens_per_s', 0):,.0f} | {_mark(r.get('train_mfu'), 'train_mfu')} | "
            f"{r.get('baseline_train_mfu', 0):.3f} |"
        )
    for i, r in enumerate(data["runs"], 1):
        out += ["", f"## Run {i}: `{r['provenance']['commit']}` ({r['file']})", "",
                f"{r['provenance']['machine']}. {r.get('conditions', '')}".strip()]
        for key, label in (("profile_rollout", "one rollout call"), ("profile_train", "one optimizer step")):
            rows = r.get(key) or []
            if not rows:
                continue
            out += ["", f"Where the device time went, {label} under torch.profiler (top 8 by device time, inclusive):", "",
                    "| op | device ms | self ms | calls |", "|---|---|---|---|"]
            for row in rows[:8]:
                name = row["name"].replace("|", "/")
                out.append(f"| `{name}` | {row['device_ms']:.1f} | {row['self_device_ms']:.1f} | {row['calls']} |")
    if data.get("notes"):
        out += ["", "## Reading", "", data["notes"]]
    return "\n".join(out) + "\n"


def report(paths: list[str], notes: str | None) -> None:
    """Write docs/results/<date>-gpu.{json,md} from committed device runs (the last run's provenance)."""
    from bench.results_page import write_results

    runs = [load_run(Path(p)) for p in paths]
    data = {"runs": runs, "provenance": runs[-1]["provenance"], **({"notes": notes} if notes else {})}
    print(write_results("gpu", data, render))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--report-from", nargs="+", metavar="RUN_JSON",
                    help="write the results page from device runs committed under bench/results/ (no GPU needed)")
    ap.add_argument("--notes", help="with --report-from: a file whose text goes under the page's Reading heading")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes on CPU: prove the script end to end")
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile")
    ap.add_argument("--skip-rollout", action="store_true")
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--no-profile", dest="profile", action="store_false",
                    help="skip the profile of one more rollout call and training step (printed before the JSON)")
    args = ap.parse_args()
    if args.report_from:
        report(args.report_from, Path(args.notes).read_text() if args.notes else None)
        return
    full = dict(hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864, vocab=151936,
                batch=256, prompt=256, new_tokens=256, reps=3,
                seq=2048, train_batch=32, micro_batch=8, baseline_micro_batch=4, logits_chunk=1024,
                warmup=2, train_steps=5)
    smoke = dict(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, vocab=512,
                 batch=4, prompt=16, new_tokens=16, reps=2,
                 seq=64, train_batch=4, micro_batch=2, baseline_micro_batch=2, logits_chunk=16,
                 warmup=1, train_steps=2)
    for k, v in (smoke if args.smoke else full).items():
        setattr(args, k, v)

    if args.smoke:
        device = torch.device("cpu")
    else:
        if not torch.cuda.is_available():
            sys.exit("bench/gpu.py needs a CUDA GPU (use --smoke for a CPU run of the script)")
        device = torch.device("cuda")
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    t_start = time.perf_counter()
    model = build_model(args, device, dtype)
    params = n_params(model)
    log(f"device {torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}; model {params / 1e6:.1f}M params "
        f"({args.layers} layers, hidden {args.hidden}, vocab {args.vocab}), {dtype}")
    result: dict = {"device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu", "params": params,
                    "smoke": bool(args.smoke)}
    if not args.skip_rollout:
        result.update(bench_rollout(model, args, device))
        torch._dynamo.reset()
    if not args.skip_train:
        result.update(bench_train_baseline(model, args, device, params))
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        result.update(bench_train_ours(model, args, device, params))
    result["seconds"] = time.perf_counter() - t_start
    keys = ["rollout_tokens_per_s", "baseline_rollout_tokens_per_s", "rollout_speedup", "train_tokens_per_s",
            "train_mfu", "baseline_train_mfu"]
    ordered = {k: round(result[k], 4) if isinstance(result.get(k), float) else result.get(k) for k in keys}
    ordered.update({k: v for k, v in result.items() if k not in ordered})
    print(json.dumps(ordered), flush=True)


if __name__ == "__main__":
    main()
