"""`spade-engine events import` against hostile and broken files: every run of the file or none,
conflicting event ids named, a size cap per event, one clear line (never a traceback) for every
malformed input. Each case is checked against the logs' counts before and after."""

from __future__ import annotations

import json

import msgspec
import pytest
from typer.testing import CliRunner

from factories import run_events
from spade_engine.cli import app
from spade_engine.events import SqliteEventLog
from spade_engine.events.store import DataDir, open_event_log

A, B, OLD = "run-20260401-000000-aaaaaa", "run-20260401-000000-bbbbbb", "run-20260301-000000-cccccc"


def _cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env=env or {}, catch_exceptions=False)


def counts(root) -> dict[str, int]:
    """Events per run in the data directory (the state every case compares before and after)."""
    out = {}
    for run_id in DataDir(root).runs():
        log = open_event_log(run_id, data_dir=root)
        out[run_id] = sum(log.count_by_type().values())
        log.close()
    return out


def lines(events) -> list[bytes]:
    return [e.to_json() for e in events]


def write(path, items) -> str:
    path.write_bytes(b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in items))
    return str(path)


@pytest.fixture
def root(tmp_path):
    """A data directory holding one run (OLD, 9 events)."""
    root = tmp_path / "data"
    log = open_event_log(OLD, data_dir=root, create=True)
    log.append(run_events(OLD, 1, k=2))
    log.close()
    return root


def _fails(res, needle: str) -> str:
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and needle in errors[0], res.stderr
    return errors[0]


def test_every_run_or_none(root, tmp_path):
    before = counts(root)
    good_a = lines(run_events(A, 1))
    bad_b = json.loads(run_events(B, 1)[1].to_json())
    bad_b["payload"] = {"env_id": 3}  # a later line of another run does not decode
    more_old = lines(run_events(OLD, 1))
    f = write(tmp_path / "f.jsonl", [*good_a, *more_old, json.dumps(bad_b)])
    _fails(_cli("events", "import", f, "-d", str(root)), f"line {len(good_a) + len(more_old) + 1}: EnvironmentProposed")
    assert counts(root) == before  # run A was not created, OLD got nothing
    assert not (root / "runs" / A).exists()
    # the same file without the bad line: both runs, all their events
    f = write(tmp_path / "g.jsonl", [*good_a, *lines(run_events(B, 2))])
    res = _cli("events", "import", f, "-d", str(root))
    assert res.exit_code == 0, res.output
    assert counts(root) == {**before, A: len(good_a), B: len(run_events(B, 2))}
    assert f"run {A} (new run): {len(good_a)} new events" in res.stderr


def test_a_failed_write_removes_the_runs_the_import_created(root, tmp_path, monkeypatch):
    before = counts(root)
    real = SqliteEventLog.append_raw

    def failing(self, items):
        if self.run_id == B:
            raise OSError(28, "No space left on device")
        return real(self, items)

    monkeypatch.setattr(SqliteEventLog, "append_raw", failing)
    f = write(tmp_path / "f.jsonl", [*lines(run_events(A, 1)), *lines(run_events(B, 1))])
    err = _fails(_cli("events", "import", f, "-d", str(root)), f"importing into run {B} failed")
    assert f"the runs this import created were removed ({A}, {B})" in err and "nothing was imported" in err
    assert counts(root) == before and not (root / "runs" / A).exists() and not (root / "runs" / B).exists()


def test_an_event_id_twice_with_other_content_names_both_lines(root, tmp_path):
    before = counts(root)
    events = lines(run_events(A, 1))
    changed = json.loads(events[2])
    changed["producer"] = "someone else"
    f = write(tmp_path / "f.jsonl", [*events, json.dumps(changed)])
    eid = changed["event_id"]
    _fails(_cli("events", "import", f, "-d", str(root)),
           f"line {len(events) + 1}: event_id {eid} is also on line 3, with different content")
    assert counts(root) == before
    # the same line twice is one event
    f = write(tmp_path / "same.jsonl", [*events, events[2]])
    res = _cli("events", "import", f, "-d", str(root))
    assert res.exit_code == 0 and counts(root)[A] == len(events)
    assert "1 line(s) repeat an earlier line exactly" in res.stderr


def test_an_event_id_already_in_the_log_with_other_content(root, tmp_path):
    before = counts(root)
    stored = lines(run_events(OLD, 0))  # a new RunStarted/RunStopped pair for OLD...
    log = open_event_log(OLD, data_dir=root)
    first = next(iter(log.read()))
    log.close()
    changed = json.loads(first.raw)
    changed["payload"]["seed"] = 99  # ...and OLD's recorded RunStarted with another seed
    f = write(tmp_path / "f.jsonl", [*stored, json.dumps(changed), *lines(run_events(A, 1))])
    _fails(_cli("events", "import", f, "-d", str(root)),
           f"line 3: event_id {changed['event_id']} is already in run {OLD} with different content; nothing was imported")
    assert counts(root) == before
    # --skip-invalid: that line becomes a dead letter, the rest is imported
    res = _cli("events", "import", f, "--skip-invalid", "-d", str(root))
    assert res.exit_code == 0, res.output
    assert counts(root) == {OLD: before[OLD] + 2, A: len(run_events(A, 1))}
    log = open_event_log(OLD, data_dir=root)
    assert [d.reason for d in log.dead_letters()] == [
        f"import line 3: event_id {changed['event_id']} is already in run {OLD} with different content"
    ]
    log.close()


def test_a_size_cap_per_event(root, tmp_path):
    before = counts(root)
    big = json.loads(run_events(A, 0)[0].to_json())
    from spade_engine.events.sizes import MAX_EVENT_BYTES

    big["payload"]["config"] = {"blob": "x" * (MAX_EVENT_BYTES + 1024)}  # over what any backend stores (64 MiB)
    f = write(tmp_path / "big.jsonl", [json.dumps(big), *lines(run_events(A, 1))[1:]])
    _fails(_cli("events", "import", f, "-d", str(root)), "line 1: event of 67,1")
    assert counts(root) == before
    small = write(tmp_path / "small.jsonl", lines(run_events(A, 1)))
    err = _fails(_cli("events", "import", small, "-d", str(root), "--max-event-bytes", "600"), "over the limit of 600 bytes")
    assert "(--max-event-bytes)" in err
    _fails(_cli("events", "import", small, "-d", str(root), env={"SPADE_IMPORT_MAX_EVENT_BYTES": "600"}), "limit of 600 bytes")
    assert counts(root) == before
    assert _cli("events", "import", small, "-d", str(root), "--max-event-bytes", "100000").exit_code == 0
    assert counts(root)[A] == len(run_events(A, 1))


def _envelope(**changes) -> bytes:
    env = run_events(A, 0)[0]
    return msgspec.structs.replace(env, **changes).to_json()


MALFORMED = {
    "deep nesting": ("[" * 200_000 + "]" * 200_000).encode(),
    "deep payload": _envelope().replace(b'"payload":{', b'"payload":{"deep":' + b"[" * 200_000 + b"]" * 200_000 + b",", 1),
    "raw NUL bytes": b'{"event_id": "a\x00b"}',
    "NUL in the run id": _envelope(run_id="run\x00x"),
    "300-character run id": _envelope(run_id="r" * 300),
    "path in the run id": _envelope(run_id="../../etc"),
    "spaces in the event id": _envelope(event_id="an id"),
    "invalid UTF-8": b'{"event_id": "\xff\xfe"}',
    "a JSON array": b"[1, 2]",
    "a number": b"42",
    "an empty object": b"{}",
    "an unknown type": _envelope(type="Mystery"),
    "a future version": _envelope(schema_version=99),
}
REASONS = {
    "deep nesting": "nested too deeply", "deep payload": "nested too deeply", "raw NUL bytes": "not valid JSON",
    "NUL in the run id": "is not importable", "300-character run id": "(300 characters)' is not importable",
    "path in the run id": "is not importable", "spaces in the event id": "printable ASCII characters without spaces",
    "invalid UTF-8": "not valid JSON", "a JSON array": "must be a JSON object", "a number": "must be a JSON object",
    "an empty object": "lacks field(s)", "an unknown type": "unknown event type 'Mystery'",
    "a future version": "RunStarted",
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_input_is_one_clear_line(root, tmp_path, case):
    before = counts(root)
    f = write(tmp_path / "f.jsonl", [*lines(run_events(A, 1)), MALFORMED[case]])
    _fails(_cli("events", "import", f, "-d", str(root)), REASONS[case])
    assert counts(root) == before and not (root / "runs" / A).exists()
    # and it is a dead letter with --skip-invalid, the good lines imported
    res = _cli("events", "import", f, "--skip-invalid", "-d", str(root))
    assert res.exit_code == 0, res.output
    assert counts(root) == {**before, A: len(run_events(A, 1))}
    log = open_event_log(A, data_dir=root)
    (letter,) = log.dead_letters()
    log.close()
    assert REASONS[case] in letter.reason and len(letter.raw) <= 4096


def dead_letter_counts(root) -> dict[str, int]:
    out = {}
    for run_id in DataDir(root).runs():
        log = open_event_log(run_id, data_dir=root)
        out[run_id] = len(log.dead_letters())
        log.close()
    return out


def test_skip_invalid_keeps_each_dead_letter_in_the_run_it_names(root, tmp_path):
    """Each bad line is a dead letter of its own run only (a run the import writes, or an existing
    one); a line whose run id cannot be read, or that names a run the import does not write, is
    kept in the file's first run, saying so."""
    C = "run-20260401-000000-dddddd"
    before = counts(root)
    good_a, good_b = lines(run_events(A, 1)), lines(run_events(B, 1))
    bad_a = json.loads(good_a[1])
    bad_a["payload"] = {"env_id": 3}  # does not decode
    bad_old = json.loads(lines(run_events(OLD, 0))[0])
    bad_old["payload"] = {"seed": "x"}  # an existing run with no valid line in the file
    bad_c = json.loads(lines(run_events(C, 0))[0])
    bad_c["type"] = "Mystery"  # a run that neither exists nor gets a valid line
    oversized = b'{"run_id": "' + B.encode() + b'", "payload": {"blob": "' + b"x" * 200_000 + b'"}}'
    items = [
        *good_a, *good_b, json.dumps(bad_a), _envelope(type="Mystery").replace(A.encode(), B.encode()), b"not json",
        json.dumps(bad_old), json.dumps(bad_c), oversized,
    ]
    f = write(tmp_path / "f.jsonl", items)
    res = _cli("events", "import", f, "--skip-invalid", "--max-event-bytes", "100000", "-d", str(root))
    assert res.exit_code == 0, res.output
    assert "skipped 6 invalid line(s)" in res.stderr
    assert counts(root) == {**before, A: len(good_a), B: len(good_b)}
    assert dead_letter_counts(root) == {OLD: 1, A: 3, B: 2}  # 6 bad lines, each kept once
    log = open_event_log(A, data_dir=root)
    reasons = [d.reason for d in log.dead_letters()]
    log.close()
    n = len(good_a) + len(good_b)
    assert reasons[0].startswith(f"import line {n + 1}: ") and "kept in the file's first run" not in reasons[0]
    assert reasons[1].startswith(f"import line {n + 3}: ") and reasons[1].endswith("(kept in the file's first run: its run id cannot be read)")
    assert reasons[2].startswith(f"import line {n + 5}: ")
    assert reasons[2].endswith(f"(kept in the file's first run: it names run {C}, which this import does not write)")
    assert not (root / "runs" / C).exists()
    log = open_event_log(B, data_dir=root)
    assert [d.reason.split(":")[0] for d in log.dead_letters()] == [f"import line {n + 2}", f"import line {n + 6}"]
    log.close()
    log = open_event_log(OLD, data_dir=root)
    assert [d.reason.split(":")[0] for d in log.dead_letters()] == [f"import line {n + 4}"]
    log.close()


def test_missing_file_and_directory_are_clear(tmp_path):
    _fails(_cli("events", "import", str(tmp_path / "nope.jsonl"), "-d", str(tmp_path)), "does not exist")
    _fails(_cli("events", "import", str(tmp_path), "-d", str(tmp_path)), "is not a file")


def test_a_write_failing_on_a_later_existing_run_is_finished_by_importing_again(root, tmp_path, monkeypatch):
    log = open_event_log(B, data_dir=root, create=True)
    log.append(run_events(B, 0))
    log.close()
    before = counts(root)
    real = SqliteEventLog.append_raw
    monkeypatch.setattr(SqliteEventLog, "append_raw",
                        lambda self, items: (_ for _ in ()).throw(OSError(5, "I/O error")) if self.run_id == B else real(self, items))
    more_old, more_b, new_a = lines(run_events(OLD, 1)), lines(run_events(B, 1))[1:-1], lines(run_events(A, 1))
    f = write(tmp_path / "f.jsonl", [*more_old, *more_b, *new_a])
    err = _fails(_cli("events", "import", f, "-d", str(root)), f"importing into run {B} failed: OSError")
    # new runs are written first and removed again; the existing run written before B keeps its events
    assert f"the runs this import created were removed ({A})" in err
    assert f"runs {OLD} hold part of the file: import it again to finish" in err
    assert counts(root) == {**before, OLD: before[OLD] + len(more_old)}
    monkeypatch.setattr(SqliteEventLog, "append_raw", real)
    assert _cli("events", "import", f, "-d", str(root)).exit_code == 0
    assert counts(root) == {OLD: before[OLD] + len(more_old), B: before[B] + len(more_b), A: len(new_a)}
