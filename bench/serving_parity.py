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

Ends with one JSON line (``versions``: the rows above; ``worst_served_gap`` and ``least_update_shift``
over the trained versions). Needs the run's data directory (log and blobs) and its model (the
run's ``policy.model``, fetched), no llama.cpp::

    python3 bench/serving_parity.py --data-dir DATA --run RUN_ID [--plays 12] [--report]
    python3 bench/serving_parity.py --smoke    # a tiny model's run (transformers, merged weights), seconds (CI)
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
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def version_number(version: str) -> int:
    """The step of ``vN`` (:func:`~spade_engine.trainer.checkpoints.version_step`), 0 for the base."""
    from spade_engine.trainer.checkpoints import version_step

    return version_step(version) or 0


def collect(data: Path, run_id: str, per_version: int) -> tuple[dict[str, list[Any]], dict[str, Any], Any]:
    """The generations of the first ``per_version`` plain plays of each version, each version's
    PolicyUpdated, and the run's recorded config (:func:`~spade_engine.recorded.recorded_config_or_default`)."""
    from spade_engine.blobs import BlobStore, restore_generation
    from spade_engine.events.catalogue import PolicyUpdated, RolloutCompleted
    from spade_engine.events.datadir import DataDir
    from spade_engine.events.store import open_event_log
    from spade_engine.recorded import recorded_config_or_default

    blobs = BlobStore(DataDir(data).blobs_dir)
    gens: dict[str, list[Any]] = {}
    plays: dict[str, int] = {}
    updates: dict[str, Any] = {}
    log = open_event_log(run_id, data_dir=data)
    try:
        config = recorded_config_or_default(log)  # reads up to the first RunStarted
        for rec in log.read():
            if rec.envelope.type not in ("PolicyUpdated", "RolloutCompleted"):
                continue
            ev = rec.envelope.event()
            if isinstance(ev, PolicyUpdated):
                updates[ev.version] = ev
            elif isinstance(ev, RolloutCompleted) and not ev.hinted and plays.get(ev.policy_version, 0) < per_version:
                plays[ev.policy_version] = plays.get(ev.policy_version, 0) + 1
                gens.setdefault(ev.policy_version, []).extend(
                    g for g in (restore_generation(t.generation, blobs) for t in ev.turns) if g is not None and g.completion_token_ids)
    finally:
        log.close()
    return gens, updates, config


def smoke_run(data_dir: Path) -> str:
    """A tiny model's run: a round of plays by v0, one LoRA update (merged weights recorded), a
    round by v1 served through the transformers policy's ``load_version``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from trainer_driver import play_round

    from spade_engine.blobs import BlobStore
    from spade_engine.config import load_config
    from spade_engine.events import RunStarted, make_envelope
    from spade_engine.events.store import new_run_id, open_event_log
    from spade_engine.policy.transformers_policy import TransformersPolicy
    from spade_engine.policy.versions import load_policy_update
    from spade_engine.trainer.loop import Trainer

    cfg = load_config(overrides={
        "policy.kind": "transformers", "policy.model": "tiny:0", "trainer.enabled": True, "trainer.lora": True,
        "trainer.lora_r": 4, "trainer.lora_alpha": 8, "trainer.learning_rate": 5e-2, "trainer.device": "cpu",
        "trainer.precision": "fp32", "trainer.max_lag": 2,
        "policy.generation.agent.temperature": 1.0,  # what the tiny policy samples at (the requests name none)
    }, environ={})
    run_id = new_run_id()
    blobs = BlobStore(data_dir / "blobs")
    log = open_event_log(run_id, data_dir=data_dir, create=True)
    log.append([make_envelope(RunStarted(config=cfg.model_dump(mode="json"), engine_version="bench", seed=0),
                              run_id=run_id, producer="bench")])
    policy = TransformersPolicy.from_tiny(seed=0)
    play_round(policy, log, run_id, 0, max_new_tokens=6)
    (update,) = Trainer(log, blobs=blobs, config=cfg.trainer, base_model="tiny:0",
                        temperature=cfg.policy.generation.trained_temperatures(), merged_weights=True).run(max_updates=1)
    load_policy_update(policy, update, blobs)
    play_round(policy, log, run_id, 1, max_new_tokens=6)
    log.close()
    return run_id


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--run", default=None, help="the run id (a run with LoRA updates)")
    ap.add_argument("--model", default=None, help="the base model (default: the run's policy.model)")
    ap.add_argument("--plays", type=int, default=12, help="plain plays scored per policy version")
    ap.add_argument("--temperature", type=float, default=None, help="default: the agent's, from the run's RunStarted")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="record a tiny model's run first and check it")
    from results_page import add_report_options, finish, provenance, report_from

    add_report_options(ap, "serving-parity")
    a = ap.parse_args()

    if report_from(a.report_from, "serving-parity", "serving_parity", render):
        return

    measured = provenance()
    if a.smoke:
        import tempfile

        tmp = tempfile.TemporaryDirectory(prefix="spade-bench-parity-")
        a.data_dir = a.data_dir or Path(tmp.name)
        a.run = smoke_run(a.data_dir)
        say(f"smoke run {a.run} recorded")
    if a.run is None or a.data_dir is None:
        ap.error("give --run and --data-dir (or --smoke)")

    import contextlib

    import torch

    from spade_engine.blobs import BlobStore
    from spade_engine.events.datadir import DataDir
    from spade_engine.policy.lora_adapter import load_adapter_into
    from spade_engine.policy.versions import update_paths
    from spade_engine.trainer.model import TrainModel, load_base_model
    from spade_engine.trainer.scoring import token_logprobs

    torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    gens, updates, config = collect(a.data_dir, a.run, a.plays)
    temperature = a.temperature if a.temperature is not None else config.policy.generation.trained_temperatures()["agent"]
    model_spec = a.model or config.policy.model
    if not model_spec:
        raise SystemExit(f"run {a.run} records no policy.model: give --model")
    versions = sorted(gens, key=version_number)
    say(f"run {a.run} ({model_spec}): plays of {', '.join(f'{v} ({len(gens[v])})' for v in versions)}; updates {sorted(updates, key=version_number)}; "
        f"temperature {temperature}")
    blobs = BlobStore(DataDir(a.data_dir).blobs_dir)
    adapters = {v: update_paths(ev, blobs)[1] for v, ev in updates.items()}
    if not adapters or any(p is None for p in adapters.values()):
        raise SystemExit(f"run {a.run} has no LoRA adapters to compare against (updates: {sorted(adapters)})")
    base, _ = load_base_model(model_spec, device=torch.device("cpu"), data_dir=a.data_dir)
    # the run's own LoRA model (its rank, alpha and targets), in float32 and without a KL reference
    scoring_cfg = config.trainer.model_copy(update={"lora": True, "precision": "fp32", "device": "cpu", "kl_coef": 0.0,
                                                    "deepspeed_config": None, "compile": False, "gradient_checkpointing": False})
    model = TrainModel(base, scoring_cfg, device=torch.device("cpu")).model.eval()

    def score(version: str, gen_list: list[Any]) -> list[torch.Tensor]:
        out = []
        if version != "v0":
            load_adapter_into(model, adapters[version])
        with torch.no_grad(), (model.disable_adapter() if version == "v0" else contextlib.nullcontext()):
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
    trained = [r for r in rows if r["version"] != "v0"]
    result = {"run": a.run, "model": model_spec, "temperature": temperature, "plays_per_version": a.plays, "versions": rows,
              "worst_served_gap": max((r["served_gap"] for r in trained), default=None),
              "least_update_shift": min((r["update_shift"] for r in trained), default=None),
              "smoke": a.smoke, "minutes": round((time.perf_counter() - t0) / 60, 1), "provenance": measured}
    finish(result, "serving-parity", render, report=a.report and not a.smoke)


def render(r: dict[str, Any]) -> str:
    lines = [
        f"Run `{r['run']}` (model `{r['model']}`): the first {r['plays_per_version']} plain plays of each policy version, "
        f"their completions scored by the trainer's weights (the base model in float32, with each version's LoRA adapter) "
        f"at temperature {r['temperature']}, against the log-probs the serving policy recorded while playing. "
        "Mean absolute differences in nats per token.",
        "",
        "| version | sequences | tokens | served - trainer (same version) | served - trainer (version before) | "
        "served - trainer (v0) | the update's shift | KL to the version before |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def cell(row: dict[str, Any], key: str, fmt: str = ".4f") -> str:
        return format(row[key], fmt) if row.get(key) is not None else "-"

    for row in r["versions"]:
        base = row["served_gap"] if row["version"] == "v0" else (row["prev_gap"] if row.get("prev") == "v0" else row.get("base_gap"))
        lines.append(f"| {row['version']} | {row['sequences']} | {row['tokens']} | {row['served_gap']:.4f} | "
                     f"{cell(row, 'prev_gap')} | {'-' if base is None else format(base, '.4f')} | "
                     f"{cell(row, 'update_shift')} | {cell(row, 'kl_to_prev', '.5f')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
