"""The model-activity line of `start` (spade_engine/runs/progress.py): what the model is doing,
an ETA bounded by the token limit, and a likely ETA once batches of the same roles have finished."""

from __future__ import annotations

from spade_engine.policy.protocol import GenerationProgress
from spade_engine.runs.progress import ModelActivity


def _p(step: int, *, roles=("designer",) * 4, finished=0, elapsed=None, max_steps=1000) -> GenerationProgress:
    # 1 s of prefill, then 2 steps per second
    return GenerationProgress(roles=roles, rows=len(roles), finished=finished, step=step, max_steps=max_steps,
                              tokens=step * len(roles), prompt_tokens=100,
                              elapsed_s=1.0 + step / 2 if elapsed is None else elapsed, prefill_s=1.0)


def test_only_the_bound_before_any_batch_finished():
    a = ModelActivity()
    a.on_progress(_p(100))
    line = a.text()
    assert line.startswith("designer x4: step 100/1,000, 0 of 4 done, 400 new tokens at 8.0 tok/s")
    assert line.endswith("; ETA <= 7m30s to the token limit")  # (1000 - 100) steps at 2 steps/s


def test_a_likely_eta_from_finished_batches_of_the_same_roles():
    a = ModelActivity()
    for final in (300, 200, 400):  # three designer batches end (the stage moves on after each)
        a.on_progress(_p(final // 2))
        a.on_progress(_p(final, finished=4))
        a.on_activity("validating 4 environment(s) in the sandbox")
    a.on_progress(_p(50, roles=("agent",) * 2))  # another kind of batch: no history yet
    assert "ETA <= " in a.text() and "ETA ~" not in a.text()
    a.on_activity("")
    a.on_progress(_p(100))
    assert a.typical_steps(_p(100)) == 300  # the median of 300, 200, 400
    assert a.text().endswith("; ETA ~1m40s (past designer batches: ~300 steps), <= 7m30s to the token limit")
    a.on_progress(_p(350))  # past the typical length: only the bound is honest
    assert a.text().endswith("; ETA <= 5m25s to the token limit")


def test_a_new_batch_without_an_activity_between_still_counts_the_last_one():
    a = ModelActivity()
    a.on_progress(_p(120))
    a.on_progress(_p(10))  # the step went back: the previous batch ended at 120
    assert a.typical_steps(_p(10)) == 120
