"""Where evaluation results are recorded, and reading them back.

Each task's result is one ``EvaluationCompleted`` event (keyed by run id), appended to:

* the run given with ``--record-run RUN`` (it must exist), e.g. the run whose policy was
  evaluated, so its held-out accuracy sits in the same log as its training;
* otherwise, when the policy came from a run (``--run R --version V``), that run R;
* otherwise (a plain ``--model``), the data directory's dedicated evaluation log, the run
  :data:`EVALUATIONS_RUN` (``<data>/runs/evaluations/events.sqlite``), created on first use.
  It holds only evaluation events (no RunStarted), sorts before every ``run-...`` id so it is
  never "the latest run", and is never resumed by ``start``.

The events of one ``eval`` invocation are appended in one batch (idempotent on event id).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..events.catalogue import EvaluationCompleted
from ..events.codec import make_envelope
from ..events.log import EventLog
from ..events.store import EVALUATIONS_RUN, Backend, open_event_log

__all__ = ["EVALUATIONS_RUN", "PRODUCER", "open_evaluations_log", "record", "read_evaluations"]

PRODUCER = "eval"


def open_evaluations_log(data_dir: Path, *, backend: Backend = "sqlite", bootstrap: str | None = None) -> EventLog:
    """The dedicated evaluation log of ``data_dir`` (created when missing)."""
    return open_event_log(EVALUATIONS_RUN, data_dir=data_dir, backend=backend, bootstrap=bootstrap, create=True)


def record(log: EventLog, events: Sequence[EvaluationCompleted], *, producer: str = PRODUCER) -> list[str]:
    """Append ``events`` to ``log`` in one batch; return their event ids."""
    envelopes = [make_envelope(ev, run_id=log.run_id, producer=producer) for ev in events]
    log.append(envelopes)
    return [e.event_id for e in envelopes]


def read_evaluations(log: EventLog) -> list[EvaluationCompleted]:
    """Every readable ``EvaluationCompleted`` in ``log``, in log order (others are skipped)."""
    out: list[EvaluationCompleted] = []
    for rec in log.read():
        if rec.envelope.type != EvaluationCompleted.TYPE:
            continue
        try:
            ev = rec.envelope.event()
        except Exception:  # noqa: BLE001 - a reader never crashes on a bad event
            continue
        out.append(ev)
    return out
