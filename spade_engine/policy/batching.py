"""One model call for several threads: the batching broker behind ``loop.concurrent_envs``.

A real model decodes many sequences for little more than the cost of one (llama.cpp's 0.5B here:
68 tokens/s for one sequence, 167 for sixteen), but an environment's plays give it only as many
as the environment has plays. With ``loop.concurrent_envs`` > 1 the engine runs the hints and
plays of several environments in threads; each thread's ``generate`` goes to a
:class:`BatchingPolicy`, which waits until every thread still working has asked (or finished),
sends all their requests in one call to the real policy, and hands each thread its own samples.
Requests keep their own settings (token limits, temperatures, seeds, stop strings): a backend
treats each row on its own, so a row's sample does not depend on what it was batched with
beyond the backend's own arithmetic.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from .protocol import GenerationProgress, Policy, PolicyRequest, Sample

__all__ = ["BatchingPolicy"]


class BatchingPolicy:
    """Merges concurrent ``generate`` calls of ``parties`` threads into single calls of ``policy``.

    Each thread calls :meth:`generate` any number of times and :meth:`leave` when it is done (in
    a ``finally``), so the others stop waiting for it. The other members of the Policy protocol
    are the wrapped policy's.
    """

    def __init__(self, policy: Policy, parties: int):
        self._policy = policy
        self._active = parties
        self._cond = threading.Condition()
        self._waiting: list[tuple[int, list[PolicyRequest]]] = []
        self._results: dict[int, list[Sample] | BaseException] = {}
        self._next_ticket = 0
        self._busy = False
        #: generate calls made to the wrapped policy, and the rows of each (for tests and logs)
        self.calls: list[int] = []

    # -- the wrapped policy's members -------------------------------------------------------------

    @property
    def kind(self) -> str:
        return self._policy.kind

    @property
    def trainable(self) -> bool:
        return self._policy.trainable

    @property
    def version(self) -> str:
        return self._policy.version

    @property
    def context_window(self) -> int | None:
        return self._policy.context_window

    @property
    def on_progress(self) -> Callable[[GenerationProgress], None] | None:
        return self._policy.on_progress

    @on_progress.setter
    def on_progress(self, sink: Callable[[GenerationProgress], None] | None) -> None:
        self._policy.on_progress = sink

    def load_version(self, version: str, checkpoint: str | None, *, adapter: str | None = None) -> None:
        self._policy.load_version(version, checkpoint, adapter=adapter)

    def describe(self) -> dict[str, Any]:
        return self._policy.describe()

    def tokenize(self, text: str) -> list[int] | None:
        return self._policy.tokenize(text)

    def close(self) -> None:
        self._policy.close()

    # -- merging -----------------------------------------------------------------------------------

    def leave(self) -> None:
        """This thread will not call :meth:`generate` again."""
        with self._cond:
            self._active -= 1
            self._cond.notify_all()

    def generate(self, requests: Sequence[PolicyRequest]) -> list[Sample]:
        with self._cond:
            ticket = self._next_ticket
            self._next_ticket += 1
            self._waiting.append((ticket, list(requests)))
            self._cond.notify_all()
            while ticket not in self._results:
                if not self._busy and self._waiting and len(self._waiting) >= self._active:
                    self._run_batch()  # everyone still working has asked: this thread sends the call
                    continue
                self._cond.wait(timeout=1.0)
            result = self._results.pop(ticket)
        if isinstance(result, BaseException):
            raise result
        return result

    def _run_batch(self) -> None:
        """Send every waiting request in one call (called with the lock held; released meanwhile)."""
        batch, self._waiting = self._waiting, []
        self._busy = True
        merged = [r for _, reqs in batch for r in reqs]
        self._cond.release()
        try:
            try:
                samples: list[Sample] | BaseException = list(self._policy.generate(merged)) if merged else []
            except BaseException as exc:  # every waiting thread learns of the failure
                samples = exc
        finally:
            self._cond.acquire()
        self._busy = False
        self.calls.append(len(merged))
        at = 0
        for ticket, reqs in batch:
            if isinstance(samples, BaseException):
                self._results[ticket] = samples
            else:
                self._results[ticket] = samples[at: at + len(reqs)]
            at += len(reqs)
        self._cond.notify_all()
