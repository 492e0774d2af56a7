"""What the model is doing right now, as one line of the live progress panel of ``start``.

:class:`ModelActivity` collects the stage's activity ("designer: 4 proposal(s) in one batch",
"validating 4 environment(s) in the sandbox", ...) and the policy's per-batch generation
progress (:class:`~spade_engine.policy.protocol.GenerationProgress`: decoding step, rows done,
new tokens, tokens/s, prefill time) and renders them as plain text, e.g.::

    designer x4: step 312/16384, 1 of 4 done, 1,104 new tokens at 4.1 tok/s (prompts 11,902
    tokens, prefilled in 41s); ETA ~2m10s (past designer batches: ~420 steps), <= 1h05m to the
    token limit

The likely ETA comes from the batches of the same roles this run has finished (the median of
their decoding steps; a batch ends with its longest row), the bound from the token limit.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter, defaultdict
from typing import Any

from ..policy.protocol import GenerationProgress

__all__ = ["ModelActivity", "format_duration"]


def format_duration(seconds: float | None) -> str:
    """``42s``, ``3m05s``, ``1h05m``."""
    if seconds is None:
        return "?"
    s = int(max(0.0, seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class ModelActivity:
    """Thread-safe holder of the current activity and generation progress."""

    #: finished batches remembered per kind of batch (the median of these steps is the estimate)
    HISTORY = 16

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.activity = ""
        self.progress: GenerationProgress | None = None
        self.updated = 0.0
        self._steps: dict[str, list[int]] = defaultdict(list)  # decoding steps of finished batches, per kind

    @staticmethod
    def _kind(p: GenerationProgress) -> str:
        return ",".join(sorted(set(p.roles)))

    def _finish(self) -> None:
        """Remember the decoding steps of the batch in ``self.progress`` (lock held) if it ended."""
        p = self.progress
        if p is not None and p.step > 0:
            steps = self._steps[self._kind(p)]
            steps.append(p.step)
            del steps[: -self.HISTORY]

    def on_activity(self, text: str) -> None:
        with self._lock:
            self._finish()
            self.activity = text
            self.progress = None
            self.updated = time.monotonic()

    def on_progress(self, progress: GenerationProgress) -> None:
        with self._lock:
            old = self.progress
            if old is not None and (progress.step < old.step or progress.roles != old.roles):
                self._finish()  # a new batch began without a stage activity in between
            self.progress = progress
            self.updated = time.monotonic()

    def typical_steps(self, progress: GenerationProgress) -> int | None:
        """The median decoding steps of this run's finished batches of the same roles."""
        with self._lock:
            steps = list(self._steps.get(self._kind(progress), ()))
        return int(statistics.median(steps)) if steps else None

    def attach(self, ctx: Any) -> None:
        """Receive ``ctx``'s stage activity and, when its policy reports it, generation progress."""
        ctx.activity_sink.listener = self.on_activity
        ctx.policy.on_progress = self.on_progress

    def text(self) -> str:
        with self._lock:
            activity, p = self.activity, self.progress
        if p is None:
            return activity
        roles = Counter(p.roles)
        who = ", ".join(f"{r} x{n}" if n > 1 else r for r, n in roles.items())
        line = (
            f"{who}: step {p.step:,}/{p.max_steps:,}, {p.finished} of {p.rows} done, {p.tokens:,} new tokens "
            f"at {p.tokens_per_s:.1f} tok/s (prompts {p.prompt_tokens:,} tokens, prefilled in {format_duration(p.prefill_s)})"
        )
        if p.finished < p.rows:
            bound = f"<= {format_duration(p.eta_s)} to the token limit"
            typical = self.typical_steps(p)
            decode = p.elapsed_s - p.prefill_s
            if typical is not None and typical > p.step > 0 and decode > 0:
                likely = (typical - p.step) * decode / p.step
                line += f"; ETA ~{format_duration(likely)} (past {self._kind(p).replace(',', '+')} batches: ~{typical:,} steps), {bound}"
            else:
                line += f"; ETA {bound}"
        return line
