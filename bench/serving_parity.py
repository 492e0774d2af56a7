"""Is the model llama.cpp serves after a sync the model the trainer trained? Read from a run's log.

A run with the llama.cpp policy plays with the base GGUF plus the LoRA adapter of the version it
serves, and records the log-prob of every token it sampled. This script takes plain plays of each
policy version from a run's log (``--plays`` per version, the first in the log) and scores their
completions with the trainer's weights: the dequantised GGUF in float32, with the adapter of
that version, of the version before it, and with none (``v0``). Per version it prints:

* ``served_gap``: mean |llama.cpp - trainer(same version)| nats per token: the serving error;
* ``prev_gap`` and ``base_gap``: the same against the version before and against ``v0``; a served
  adapter that is the trained one gives ``served_gap`` well below both once the update moved the
  model more than the kernels' noise;
* ``update_shift``: mean |trainer(version) - trainer(version before)|, how far the last update
  moved these tokens (the size the serving error is to be compared with);
* ``kl_to_prev``: mean of ``trainer(version) - trainer(version before)`` over tokens sampled from
  the version: an estimate of KL(version || version before) per token at the sampling temperature.

Ends with one JSON line. Needs the run's data directory (log and blobs) and the fetched model::

    python3 bench/serving_parity.py --data-dir DATA --run RUN_ID [--plays 12] [--temperature 0.7]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def version_number(version: str) -> int:
    return int(version.lstrip("v") or 0)


def collect(data: Path, run_id: str, per_version: int) -> tuple[dict[str, list[Any]], dict[str, Any], float | None]:
    """The first ``per_version`` plain plays' generations of each version, each version's
    PolicyUpdated, and the agent's sampling temperature the run recorded."""
    from spade_engine.blobs import BlobStore, restore_generation
    from spade_engine.events.catalogue import PolicyUpdated, RolloutCompleted, RunStarted
    from spade_engine.events.datadir import DataDir
    from spade_engine.events.store import open_event_log

    blobs = BlobStore(DataDir(data).blobs_dir)
    gens: dict[str, list[Any]] = {}
    updates: dict[str, Any] = {}
    temperature = None
    log = open_event_log(run_id, data_dir=data)
    try:
        for rec in log.read():
            if rec.envelope.type not in ("RunStarted", "PolicyUpdated", "RolloutCompleted"):
                continue
            ev = rec.envelope.event()
            if isinstance(ev, RunStarted) and temperature is None:
                agent = ev.config.get("policy", {}).get("generation", {}).get("agent", {})
                temperature = agent.get("temperature")
            elif isinstance(ev, PolicyUpdated):
                updates[ev.version] = ev
            elif isinstance(ev, RolloutCompleted) and not ev.hinted:
                got = gens.setdefault(ev.policy_version, [])
                if len(got) < per_version:
                    got.extend(g for g in (restore_generation(t.generation, blobs) for t in ev.turns)
                               if g is not None and g.completion_token_ids)
    finally:
        log.close()
    return gens, updates, temperature


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--run", required=True, help="the run id (a llama.cpp run with LoRA updates)")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    ap.add_argument("--plays", type=int, default=12, help="plain plays scored per policy version")
    ap.add_argument("--temperature", type=float, default=None, help="default: the agent's, from the run's RunStarted")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()

    import torch
    from peft import LoraConfig, get_peft_model

    from spade_engine.blobs import BlobStore
    from spade_engine.events.datadir import DataDir
    from spade_engine.policy.lora_adapter import load_adapter_into, read_adapter
    from spade_engine.policy.versions import update_paths
    from spade_engine.trainer.model import load_base_model
    from spade_engine.trainer.scoring import token_logprobs

    torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    gens, updates, run_temperature = collect(a.data_dir, a.run, a.plays)
    temperature = a.temperature if a.temperature is not None else (run_temperature if run_temperature is not None else 1.0)
    versions = sorted(gens, key=version_number)
    say(f"run {a.run}: plays of {', '.join(f'{v} ({len(gens[v])})' for v in versions)}; updates {sorted(updates, key=version_number)}; "
        f"temperature {temperature}")
    blobs = BlobStore(DataDir(a.data_dir).blobs_dir)
    adapters = {v: update_paths(ev, blobs)[1] for v, ev in updates.items()}
    if not adapters or any(p is None for p in adapters.values()):
        raise SystemExit(f"run {a.run} has no LoRA adapters to compare against (updates: {sorted(adapters)})")
    _, meta = read_adapter(next(iter(adapters.values())))
    base, _ = load_base_model(a.model, device=torch.device("cpu"))
    model = get_peft_model(base, LoraConfig(r=int(meta["r"]), lora_alpha=float(meta["alpha"]),
                                            target_modules=meta["target_modules"], lora_dropout=0.0)).eval()

    def score(version: str, gen_list: list[Any]) -> list[torch.Tensor]:
        out = []
        with torch.no_grad():
            if version == "v0":
                ctx: Any = model.disable_adapter()
            else:
                load_adapter_into(model, adapters[version])
                import contextlib
                ctx = contextlib.nullcontext()
            with ctx:
                for g in gen_list:
                    ids = torch.tensor([list(g.prompt_token_ids) + list(g.completion_token_ids)])
                    lp = token_logprobs(model, ids, temperature=temperature)[0]
                    n = len(g.prompt_token_ids)
                    out.append(lp[n - 1: n - 1 + len(g.completion_token_ids)].float())
        return out

    def mean_abs(xs: list[torch.Tensor], ys: list[torch.Tensor]) -> float:
        return round(float(torch.cat([(x - y).abs() for x, y in zip(xs, ys)]).mean()), 5)

    rows = []
    for v in versions:
        if v != "v0" and v not in adapters:
            say(f"{v}: no PolicyUpdated with an adapter in this run; skipped")
            continue
        k = version_number(v)
        prev = "v0" if k <= 1 else f"v{k - 1}"
        gl = gens[v]
        served = [torch.tensor(g.logprobs, dtype=torch.float32) for g in gl]
        own = score(v, gl)
        row: dict[str, Any] = {"version": v, "sequences": len(gl), "tokens": sum(len(x) for x in served),
                               "served_gap": mean_abs(served, own)}
        if v != "v0":
            before = score(prev, gl)
            row["prev"] = prev
            row["prev_gap"] = mean_abs(served, before)
            row["update_shift"] = mean_abs(own, before)
            row["kl_to_prev"] = round(float(torch.cat([x - y for x, y in zip(own, before)]).mean()), 5)
            if prev != "v0":
                row["base_gap"] = mean_abs(served, score("v0", gl))
        say(json.dumps(row))
        rows.append(row)
    print(json.dumps({"run": a.run, "temperature": temperature, "plays_per_version": a.plays, "versions": rows,
                      "minutes": round((time.perf_counter() - t0) / 60, 1)}))


if __name__ == "__main__":
    main()
