"""How big is one update? A run's first recorded update, replayed at several learning rates.

The learning runs of 2026-12-05 showed what an oversized step does to the 0.5B: one LoRA update at
learning rate 2e-4 lowered the log-probs of the negative-advantage answers it trained on by 0.10
nats a token and left the positive ones where they were; the next plays ran longer, more were cut
at the token limit, and the training reward fell from 0.35 to 0.03. The learning rate alone does
not say how far a step moves the policy (Adam's first step moves every weight by about the
learning rate, whatever the gradient's size), so this measures it.

For each learning rate: the events the run's first ``PolicyUpdated`` consumed (its ``consumed``
cursor) are copied into a scratch log, the engine's own trainer (the run's recorded ``[trainer]``
section, only ``learning_rate`` changed) makes that update again on the same groups, and the
update's ``policy_shift_kl``, ``logprob_shift_positive`` and ``logprob_shift_negative`` (the
trainer's ``shift_metrics``: the batch scored before and after the step) are printed. At the
run's own learning rate the replay's ``grad_norm`` should equal the recorded one: that checks the
replay trained on the same batch. The run itself is only read; the scratch log and the adapters
written go to a temporary directory.

Prints one line per learning rate, and as its LAST line one JSON object: ``run``,
``recorded_lr``, ``grad_norm_recorded`` and ``grad_norm_replayed`` (at the recorded learning rate
when it is among ``--lr``, else the first), ``kl_recorded_lr`` and ``rows`` (one per learning
rate). ``--report`` writes ``docs/results/<date>-step-size.{json,md}``.

    python3 bench/step_size.py -d DATA RUN --lr 2e-4,5e-5,2e-5,1e-5   # the 0.5B: about 2.5 min per rate
    python3 bench/step_size.py --smoke                                # a tiny model's run, seconds (CI)
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

from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()

from spade_engine.blobs import BlobStore  # noqa: E402
from spade_engine.events import PolicyUpdated, SqliteEventLog  # noqa: E402
from spade_engine.events.store import open_event_log  # noqa: E402
from spade_engine.recorded import recorded_config  # noqa: E402


_UPDATED = b'"type":"PolicyUpdated"'


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def first_update(log: Any) -> tuple[PolicyUpdated, list[Any]]:
    """The run's first PolicyUpdated and the records it consumed (every record below its
    ``consumed`` cursor, per partition; other partitions' records may come after it in read
    order). Only PolicyUpdated records are decoded here (canonical JSON: a cheap filter on the
    stored bytes first, as ``recorded.py`` does)."""
    records, update = [], None
    for rec in log.read():
        if _UPDATED in rec.raw and rec.envelope.type == "PolicyUpdated":
            update = update or rec.envelope.event()
            continue
        records.append(rec)
    if update is None:
        raise SystemExit(f"error: run {log.run_id} recorded no PolicyUpdated: nothing to replay")
    consumed = {int(p): int(o) for p, o in update.consumed.items()}
    return update, [r for r in records if r.offset < consumed.get(r.partition, 0)]


def link_blobs(src: Path, dst: Path) -> None:
    """``dst`` reads every blob of ``src`` (one symbolic link per file), and writes its own."""
    for path in (src / "sha256").glob("*/*"):
        target = dst / "sha256" / path.parent.name / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(path.resolve(), target)


def replay_at(lr: float, *, log: Any, records: list[Any], cfg: Any, base_model: str, data_dir: Path,
              scratch: Path) -> dict[str, float]:
    """One update of the engine's trainer on ``records`` at learning rate ``lr``; its metrics."""
    from spade_engine.trainer.loop import Trainer

    work = scratch / f"lr-{lr:g}"
    work.mkdir()
    copy = SqliteEventLog(work / "events.sqlite", log.run_id)
    copy.append_raw((r.envelope, r.raw) for r in records)
    blobs = BlobStore(work / "blobs")
    link_blobs(data_dir / "blobs", blobs.root)
    tcfg = cfg.trainer.model_copy(update={"learning_rate": lr, "shift_metrics": True})
    trainer = Trainer(copy, blobs=blobs, config=tcfg, base_model=base_model, data_dir=data_dir,
                      temperature=cfg.policy.generation.trained_temperatures(), merged_weights=False)
    published = trainer.run(max_updates=1)
    copy.close()
    if not published:
        raise SystemExit(f"error: the replay at learning rate {lr:g} made no update")
    return dict(published[0].metrics)


def smoke_run(data_dir: Path) -> str:
    """A tiny model's run with one LoRA update, like a real run's log (tests/trainer_driver.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from trainer_driver import play_round

    from spade_engine.config import load_config
    from spade_engine.events import RunStarted, make_envelope
    from spade_engine.events.store import new_run_id
    from spade_engine.policy.transformers_policy import TransformersPolicy
    from spade_engine.trainer.loop import Trainer

    cfg = load_config(overrides={
        "policy.kind": "transformers", "policy.model": "tiny:0", "trainer.enabled": True, "trainer.lora": True,
        "trainer.lora_r": 4, "trainer.lora_alpha": 8, "trainer.learning_rate": 1e-2, "trainer.device": "cpu",
        "trainer.precision": "fp32", "trainer.max_lag": 2,
    }, environ={})
    run_id = new_run_id()
    log = open_event_log(run_id, data_dir=data_dir, create=True)
    log.append([make_envelope(RunStarted(config=cfg.model_dump(mode="json"), engine_version="bench", seed=0),
                              run_id=run_id, producer="bench")])
    play_round(TransformersPolicy.from_tiny(seed=0), log, run_id, 0)
    Trainer(log, blobs=BlobStore(data_dir / "blobs"), config=cfg.trainer, base_model="tiny:0",
            temperature=cfg.policy.generation.trained_temperatures(), merged_weights=True).run(max_updates=1)
    log.close()
    return run_id


def render(r: dict[str, Any]) -> str:
    lines = [
        f"Run `{r['run']}` (model `{r['base_model']}`), its first update replayed by the engine's trainer at each learning "
        f"rate on the same {int(r['samples'])} samples ({int(r['tokens'])} completion tokens). Recorded learning rate "
        f"{r['recorded_lr']:g}: recorded grad norm {r['grad_norm_recorded']:.4f}, replayed {r['grad_norm_replayed']:.4f}.",
    ]
    if abs(r["grad_norm_recorded"] - r["grad_norm_replayed"]) > 1e-6 * max(abs(r["grad_norm_recorded"]), 1.0):
        lines.append("The two differ: the run's LoRA adapters started from an unseeded random initialisation (a run "
                     "recorded before `trainer.lora_seed`), the replay's from seed 0, so every row trains the run's batch "
                     "from the same adapters, but not from the run's own.")
    lines += [
        "",
        "| learning rate | KL(before, after) per token | log-prob change, positive answers | negative answers | grad norm | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for row in r["rows"]:
        lines.append(f"| {row['lr']:g} | {row['policy_shift_kl']:.4f} | {row['logprob_shift_positive']:+.4f} | "
                     f"{row['logprob_shift_negative']:+.4f} | {row['grad_norm']:.4f} | {row['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", nargs="?", help="the run whose first update is replayed")
    ap.add_argument("-d", "--data-dir", type=Path, default=None, help="the run's data directory")
    ap.add_argument("--lr", default=None, help="comma-separated learning rates (default: the recorded one, /4, /10)")
    ap.add_argument("--smoke", action="store_true", help="record a tiny model's run first and replay it")
    ap.add_argument("--report", action="store_true", help="write docs/results/<date>-step-size.{json,md}")
    ap.add_argument("--report-from", type=Path, default=None, metavar="JSON",
                    help="write the results page of an earlier run from the JSON line it printed (nothing is run)")
    a = ap.parse_args()
    if a.report_from is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from results_page import load_result, write_results

        result = load_result(a.report_from, "step_size")
        say(f"results page {write_results('step-size', result, render)}")
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from results_page import provenance

    measured = provenance()  # the command and commit that measure, also when the page is written later
    tmp = tempfile.TemporaryDirectory(prefix="spade-bench-step-")
    data_dir = a.data_dir
    if a.smoke:
        data_dir = data_dir or Path(tmp.name) / "data"
        a.run = smoke_run(data_dir)
        say(f"smoke run {a.run} recorded")
    if a.run is None or data_dir is None:
        ap.error("give a RUN and its --data-dir (or --smoke)")
    log = open_event_log(a.run, data_dir=data_dir, read_only=True)
    cfg = recorded_config(log)
    if cfg is None:
        raise SystemExit(f"error: run {a.run} has no RunStarted config to take its trainer settings from")
    update, records = first_update(log)
    recorded_lr = float(update.metrics.get("learning_rate", cfg.trainer.learning_rate))
    lrs = [float(x) for x in a.lr.split(",")] if a.lr else [recorded_lr, recorded_lr / 4, recorded_lr / 10]
    say(f"run {a.run}: first update {update.version} consumed {len(records)} records "
        f"({int(update.metrics.get('samples', 0))} samples, {int(update.metrics.get('tokens', 0))} tokens) at learning rate "
        f"{recorded_lr:g}; replaying at {', '.join(f'{x:g}' for x in lrs)}")
    base_model = update.base_model or cfg.policy.model
    if base_model is None:
        raise SystemExit(f"error: run {a.run} names no base model (PolicyUpdated.base_model, policy.model)")
    scratch = Path(tmp.name) / "replays"
    scratch.mkdir()
    rows = []
    for lr in lrs:
        t0 = time.perf_counter()
        m = replay_at(lr, log=log, records=records, cfg=cfg, base_model=base_model,
                      data_dir=data_dir, scratch=scratch)
        row = {"lr": lr, "seconds": round(time.perf_counter() - t0, 1),
               **{k: m[k] for k in ("policy_shift_kl", "logprob_shift_positive", "logprob_shift_negative", "grad_norm",
                                    "samples", "tokens", "loss")}}
        rows.append(row)
        say(f"lr {lr:g}: KL {row['policy_shift_kl']:.4f}/token, positive answers {row['logprob_shift_positive']:+.4f}, "
            f"negative {row['logprob_shift_negative']:+.4f} nats/token (grad norm {row['grad_norm']:.4f}, {row['seconds']:.0f} s)")
    log.close()
    at = next((r for r in rows if abs(r["lr"] - recorded_lr) <= 1e-12 * max(recorded_lr, 1.0)), rows[0])
    result = {
        "run": a.run, "base_model": base_model, "recorded_lr": recorded_lr,
        "grad_norm_recorded": float(update.metrics.get("grad_norm", float("nan"))), "grad_norm_replayed": at["grad_norm"],
        "kl_recorded_lr": at["policy_shift_kl"], "samples": at["samples"], "tokens": at["tokens"], "rows": rows,
        "smoke": a.smoke, "provenance": measured,
    }
    if a.report:
        from results_page import write_results

        say(f"results page {write_results('step-size', result, render)}")
    print(json.dumps(result, sort_keys=True))
    tmp.cleanup()


if __name__ == "__main__":
    main()
