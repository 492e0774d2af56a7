"""The fold skeleton of the archive's projections (issue 33, item 4): which records a reader
decodes, which handler applies them, and the skip rules, the same for the archive, the memory and
the difficulty series."""

from __future__ import annotations

import msgspec
import pytest

from factories import env_chain
from spade_engine.archive.difficulty import DifficultySeries
from spade_engine.archive.memory import EnvironmentMemory
from spade_engine.archive.projection import ArchiveProjection
from spade_engine.archive.reader import LogReader
from spade_engine.archive.records import Skipped
from spade_engine.events.catalogue import EnvironmentProposed, EnvironmentValidated, HintWritten
from spade_engine.events.log import Record

RUN = "run-reader-abcdef"


class _Reader(LogReader):
    """A reader of proposals and verdicts whose verdict handler fails for env ids ending in 'x'."""

    WANTED = frozenset({"EnvironmentProposed", "EnvironmentValidated"})

    def __init__(self) -> None:
        self._skipped = Skipped()
        self.proposed: list[str] = []
        self.validated: list[str] = []
        self.changes = 0

    def _proposed(self, record: Record, event: EnvironmentProposed) -> None:
        self.proposed.append(event.env_id)

    def _validated(self, record: Record, event: EnvironmentValidated) -> None:
        if event.env_id.endswith("x"):
            raise KeyError(event.env_id)
        self.validated.append(event.env_id)

    HANDLERS = {EnvironmentProposed: _proposed, EnvironmentValidated: _validated}

    def skipped_changed(self) -> None:
        self.changes += 1


def _records(envelopes) -> list[Record]:
    return [Record(0, i, env, env.to_json()) for i, env in enumerate(envelopes)]


def _bad(envelopes) -> list:
    """An unknown type, a newer version of a wanted type and a malformed wanted event."""
    proposed = next(e for e in envelopes if e.type == "EnvironmentProposed")
    return [
        msgspec.structs.replace(proposed, event_id="bad-type", type="EnvironmentDreamed"),
        msgspec.structs.replace(proposed, event_id="bad-future", schema_version=99),
        msgspec.structs.replace(proposed, event_id="bad-payload", payload={"env_id": 3}),
    ]


def test_handlers_apply_their_types_and_the_rest_is_passed_over_or_counted_once():
    chain = env_chain(RUN, "abcdef-e00001") + env_chain(RUN, "abcdef-e0000x")
    records = _records(chain + _bad(chain))
    reader = _Reader()
    for rec in records + records:  # everything delivered twice
        reader.apply(rec)
    assert reader.proposed == ["abcdef-e00001", "abcdef-e0000x"] * 2  # handlers decide idempotence
    assert reader.validated == ["abcdef-e00001"] * 2
    assert reader.skipped == {
        "error EnvironmentValidated: KeyError": 1,
        "future version EnvironmentProposed v99": 1,
        "malformed EnvironmentProposed": 1,
        "unknown type EnvironmentDreamed": 1,
    }
    assert reader.changes == 4  # told once per skipped event, not per delivery


def test_a_wanted_type_without_a_handler_changes_nothing(monkeypatch):
    reader = _Reader()
    monkeypatch.setattr(_Reader, "WANTED", frozenset({"HintWritten"}))
    hint = next(e for e in env_chain(RUN, "abcdef-e00001") if e.type == HintWritten.TYPE)
    reader.apply(_records([hint])[0])
    assert (reader.proposed, reader.validated, reader.skipped, reader.changes) == ([], [], {}, 0)


@pytest.mark.parametrize("make, own", [
    (lambda tmp: ArchiveProjection.open(tmp / "archive.sqlite"), {}),
    # the factories' verdict carries no embedding: the memory's own reason, counted the same way
    (lambda tmp: EnvironmentMemory(tmp / "memory"), {"accepted without recorded embedding": 1}),
    (lambda tmp: DifficultySeries(tmp / "difficulty.json"), {}),
], ids=["archive", "memory", "difficulty"])
def test_the_projections_share_the_skip_rules(tmp_path, make, own):
    chain = env_chain(RUN, "abcdef-e00001")
    records = _records(chain + _bad(chain))
    projection = make(tmp_path)
    assert isinstance(projection, LogReader)
    for rec in records + records:
        projection.apply(rec)
    projection.flush({0: len(records)})
    assert projection.skipped == {
        "future version EnvironmentProposed v99": 1,
        "malformed EnvironmentProposed": 1,
        "unknown type EnvironmentDreamed": 1,
        **own,
    }
    reopened = make(tmp_path)  # the skip record is kept with the state
    assert reopened.skipped == projection.skipped and reopened.position() == {0: len(records)}


def test_the_run_state_shares_the_skip_rules_and_dedupes_on_event_id():
    """The engine's run state is a reader too (issue 33, item 4): the same skip reasons, counted
    once per event id, and each event applied once however often it is delivered, whether read
    from the log or folded from the engine's own append."""
    from spade_engine.engine.state import RunState

    chain = env_chain(RUN, "abcdef-e00001")
    records = _records(chain + _bad(chain))
    state = RunState(run_id=RUN)
    assert isinstance(state, LogReader)
    own = [state.add_envelope(env) for env in chain]  # appended by this process, not read yet
    assert all(own)
    assert [state.fold(rec) for rec in records] == [False] * len(records)  # known already, or skipped
    assert [state.fold(rec) for rec in records] == [False] * len(records)  # behind the cursor now
    assert state.cursor == {0: len(records)} and state.seen == {e.event_id for e in chain + _bad(chain)}
    st = state.env("abcdef-e00001")
    assert st.proposed is not None and st.validated is not None and st.accepted
    assert state.skipped == {
        "future version EnvironmentProposed v99": 1,
        "malformed EnvironmentProposed": 1,
        "unknown type EnvironmentDreamed": 1,
    }
    fresh = RunState(run_id=RUN)
    assert [fresh.fold(rec) for rec in records] == [True] * len(chain) + [False] * 3
    assert fresh.stats() == state.stats()
