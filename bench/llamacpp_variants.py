"""What limits llama.cpp's batched decoding on this machine: the catalogue GGUF against variants.

``bench/inference.py`` measures llama.cpp against transformers. This script asks why llama.cpp's
decode tokens/s stop growing with the batch: it decodes the same prompts (the designer's and the
agent's, as there) with the same engine (``policy.kind = "llamacpp"``) for each variant:

* ``fetched``: the catalogue GGUF as fetched, the engine's settings (threads sized to the free CPUs);
* ``threads1``: the same, one decoding thread (if two threads decode nearly twice as fast at the
  largest batch, decoding is bound by arithmetic, not by reading the weights);
* ``q8_0`` and ``q4_0``: the GGUF requantised by llama.cpp (``llama_model_quantize``) to Q8_0 and
  Q4_0;
* ``flash_attn_off``, ``flash_attn_on``: the context's flash attention forced (the engine leaves
  llama.cpp's default, auto);
* ``kv_q8_0``: flash attention on and the KV cache stored as Q8_0 (half the bytes read per step).

The last three set llama.cpp context parameters the engine does not expose: this script sets them
by wrapping ``llama_init_from_model`` for that variant only. Nothing here changes the engine.

Prints a line per measurement and, as its LAST line, one JSON object: per variant, kind and batch
the prefill and decode tokens/s; ``decode_b4`` and ``decode_bmax`` per variant (designer prompts);
``fetched_decode_b4``, ``best_variant``, ``best_decode_b4`` and ``best_over_fetched_b4`` (the best
variant's batch-4 decode over the fetched file's);
``threads2_over_1_bmax`` (the fetched file's decode at the largest batch, two threads over one).

    python3 bench/llamacpp_variants.py                     # the 0.5B, batches 1,4,16, ~17 minutes
    python3 bench/llamacpp_variants.py --model qwen2.5-coder-1.5b-instruct
    python3 bench/llamacpp_variants.py --smoke             # a tiny random GGUF, seconds (CI; kv_q8_0 left out)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from inference import agent_prompts, build_policies, designer_prompts, load, run_llamacpp, smoke_gguf  # noqa: E402

#: variant -> (GGUF type to requantise to or None, engine threads or None, context parameters to set)
VARIANTS: dict[str, tuple[str | None, int | None, dict[str, int]]] = {
    "fetched": (None, None, {}),
    "threads1": (None, 1, {}),
    "q8_0": ("Q8_0", None, {}),
    "q4_0": ("Q4_0", None, {}),
    "flash_attn_off": (None, None, {"flash_attn_type": 0}),
    "flash_attn_on": (None, None, {"flash_attn_type": 1}),
    "kv_q8_0": (None, None, {"flash_attn_type": 1, "type_k": 8, "type_v": 8}),  # 8: GGML_TYPE_Q8_0
}


def requantise(src: Path, dst: Path, gguf_type: str) -> float:
    """``src`` requantised to ``gguf_type`` at ``dst`` by llama.cpp; the seconds it took."""
    from spade_engine.policy.llamacpp_lib import load_llama_cpp

    lib = load_llama_cpp()
    params = lib.llama_model_quantize_default_params()
    params.ftype = getattr(lib, f"LLAMA_FTYPE_MOSTLY_{gguf_type}")
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    t = time.perf_counter()
    rc = lib.llama_model_quantize(str(src).encode(), str(dst).encode(), params)
    if rc != 0:
        raise SystemExit(f"llama_model_quantize to {gguf_type} failed (code {rc})")
    return time.perf_counter() - t


@contextlib.contextmanager
def context_params(values: dict[str, int]) -> Iterator[None]:
    """Contexts created inside set ``values`` on llama.cpp's context parameters."""
    from spade_engine.policy.llamacpp_lib import load_llama_cpp

    lib = load_llama_cpp()
    original = lib.llama_init_from_model

    def init(model: Any, params: Any) -> Any:
        for key, value in values.items():
            setattr(params, key, value)
        return original(model, params)

    lib.llama_init_from_model = init
    try:
        yield
    finally:
        lib.llama_init_from_model = original


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct", help="catalogue model")
    ap.add_argument("--batches", default="1,4,16", help="batch sizes")
    ap.add_argument("--new-tokens", type=int, default=48, help="new tokens per row")
    ap.add_argument("--variants", default=",".join(VARIANTS), help="which variants, in order")
    ap.add_argument("--smoke", action="store_true",
                    help="a tiny random GGUF, batches 1,2, 4 new tokens, every variant but kv_q8_0 (its 16-wide heads do not "
                         "divide into Q8_0 blocks of 32): checks the script")
    from results_page import add_report_options, finish, provenance, report_from

    add_report_options(ap, "llamacpp-variants")
    args = ap.parse_args()

    if report_from(args.report_from, "llamacpp-variants", "llamacpp_variants", render):
        return

    started = provenance()
    say = lambda line: print(line, flush=True)  # noqa: E731
    batches = [int(b) for b in args.batches.split(",")]
    tmp = tempfile.TemporaryDirectory(prefix="bench-llamacpp-variants-")
    work = Path(tmp.name)
    if args.smoke:
        fetched = smoke_gguf(work)
        batches, args.new_tokens = [1, 2], 4
        args.variants = ",".join(v for v in args.variants.split(",") if v != "kv_q8_0")
    else:
        from spade_engine.models.resolve import resolve_gguf_spec

        fetched = resolve_gguf_spec(args.model).gguf
    say(f"{args.model if not args.smoke else 'tiny'}: {fetched} ({fetched.stat().st_size / 1e6:.0f} MB); "
        f"{os.cpu_count()} CPUs; load {load()}")
    results: dict[str, Any] = {}
    prompts: dict[str, list[list[int]]] = {}
    for name in [v for v in args.variants.split(",") if v]:
        gguf_type, threads, params = VARIANTS[name]
        path = fetched
        if gguf_type is not None:
            path = work / f"{name}.gguf"
            secs = requantise(fetched, path, gguf_type)
            say(f"{name}: requantised to {gguf_type} in {secs:.0f}s ({path.stat().st_size / 1e6:.0f} MB)")
        with context_params(params):
            policy = build_policies(str(path), ["llamacpp"], parallel=max(batches), smoke=None)["llamacpp"]
        if threads is not None:
            policy.engine.set_threads(threads)
        try:
            if not prompts:
                from spade_engine.policy.protocol import PolicyRequest

                texts = {"designer": designer_prompts(policy, max(batches)), "agent": agent_prompts(max(batches))}
                prompts = {kind: [policy.render(PolicyRequest(role=kind, messages=m)) for m in msgs] for kind, msgs in texts.items()}
            for kind, rows in prompts.items():
                run_llamacpp(policy, rows[:2], 2)  # warm-up: first-call allocations out of the figures
                for b in batches:
                    fig = run_llamacpp(policy, rows[:b], args.new_tokens)
                    fig["load"] = load()
                    results.setdefault(name, {}).setdefault(kind, {})[str(b)] = fig
                    say(f"  {name:15s} {kind:8s} batch {b:2d}: prefill {fig['prefill_tokens_per_s']:7.1f} tok/s, "
                        f"decode {fig['decode_tokens_per_s']:7.2f} tok/s; load {fig['load']}")
        finally:
            policy.close()
    b4, bmax = ("4" if "4" in [str(b) for b in batches] else str(max(batches))), str(max(batches))
    decode = {name: {"decode_b4": r["designer"][b4]["decode_tokens_per_s"], "decode_bmax": r["designer"][bmax]["decode_tokens_per_s"]}
              for name, r in results.items()}
    summary: dict[str, Any] = {"model": "tiny" if args.smoke else args.model, "batches": batches, "new_tokens": args.new_tokens,
                               "decode": decode}
    if "fetched" in decode:
        best = max(decode, key=lambda n: decode[n]["decode_b4"])
        summary["best_variant"] = best
        summary["fetched_decode_b4"] = decode["fetched"]["decode_b4"]
        summary["best_decode_b4"] = decode[best]["decode_b4"]
        summary["best_over_fetched_b4"] = round(decode[best]["decode_b4"] / decode["fetched"]["decode_b4"], 2)
        if "threads1" in decode:
            summary["threads2_over_1_bmax"] = round(decode["fetched"]["decode_bmax"] / decode["threads1"]["decode_bmax"], 2)
    tmp.cleanup()
    out = {**summary, "results": results, "load_end": load(), "date": time.strftime("%Y-%m-%d"),
           "machine": f"{os.cpu_count()} CPUs", "provenance": started}
    finish(out, "llamacpp-variants", render, report=args.report and not args.smoke)


def render(r: dict[str, Any]) -> str:
    """The results page's body: the summary, then decode and prefill tokens/s per variant."""
    lines = [
        f"Model `{r['model']}` through the engine's llama.cpp backend; {r['new_tokens']} new tokens per row (end of "
        "sequence ignored), every cache emptied first. See the script's docstring for the variants.",
        "",
        f"- best variant at batch 4 (designer prompts): `{r.get('best_variant')}`, "
        f"{r.get('best_over_fetched_b4')}x the fetched file's decode tokens/s",
        f"- two decoding threads over one, fetched file, batch {max(r['batches'])}: {r.get('threads2_over_1_bmax')}x",
        f"- load average at the end: {r.get('load_end')}",
        "",
    ]
    for kind in ("designer", "agent"):
        lines += [f"## {kind} prompts", "", "| variant | " + " | ".join(f"b{b} prefill / decode tok/s" for b in r["batches"]) + " |",
                  "|---|" + "---|" * len(r["batches"])]
        for name, kinds in r["results"].items():
            cells = [f"{kinds[kind][str(b)]['prefill_tokens_per_s']} / **{kinds[kind][str(b)]['decode_tokens_per_s']}**"
                     for b in r["batches"]]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
