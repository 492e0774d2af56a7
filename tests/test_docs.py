"""The documentation is tested: the site builds in strict mode with its generated references, and
the shell commands the README and the docs show run here, or say in the page why they cannot.

Directives (docs/about-docs.md): every fenced ``bash``/``sh``/``shell``/``console`` block in
README.md, CONTRIBUTING.md and docs/ is preceded by one of

* ``<!-- docs-test: run [timeout=S] [rc=N] [expect="TEXT"] [assume=PATH] -->``: run it (blocks of
  one page in order, in one fresh working directory whose top-level entries link to the
  repository's, with this interpreter's ``spade-engine`` and ``python3`` first on PATH); a
  ``python`` block with ``run`` runs with this interpreter;
* ``<!-- docs-test: skip REASON -->``: not run, for the reason written in the page;
* ``<!-- docs-test: file NAME -->``: written to NAME in the working directory (a shell block is
  also checked with ``bash -n``).

The site is built with the real MkDocs (the ``docs`` extra, part of the dev extras CI installs);
the commands run the real engine on its embedded default (SQLite log, procedural simulation), no
model and no service.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docs]

ROOT = Path(__file__).resolve().parent.parent
SHELL = {"bash", "sh", "shell", "console"}
RUN_OPTIONS = {"timeout", "rc", "expect", "assume"}
#: repository entries a page's working directory does not link to: its own data goes there, and
#: the package is the installed one (a link would put it under /tmp, where the sandbox refuses it)
NOT_LINKED = {"spade-data", "site", "build", "dist", "test-artifacts", "spade_engine"}
_DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(\w[\w-]*)\s*(.*?)\s*-->\s*$")
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([\w+-]*)[^`]*$")


@dataclass
class Block:
    """One fenced code block of a page, with the directive before it (if any)."""

    page: str
    line: int
    lang: str
    code: str
    kind: str | None = None  # run, skip, file
    argument: str = ""
    options: dict[str, str] = field(default_factory=dict)

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md, CONTRIBUTING.md and every Markdown page under docs/ (the hook's folder excepted)."""
    docs = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_hooks" not in p.parts)
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *docs]


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a page, each with the directive on the last non-blank line before it."""
    lines = path.read_text().splitlines()
    out: list[Block] = []
    last_text = ""
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            if lines[i].strip():
                last_text = lines[i]
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        block = Block(page=str(path.relative_to(ROOT)), line=start + 1, lang=lang, code="\n".join(body) + "\n")
        d = _DIRECTIVE.match(last_text)
        if d:
            block.kind, block.argument = d.group(1), d.group(2)
            if block.kind == "run":
                block.options = dict(opt.split("=", 1) if "=" in opt else (opt, "") for opt in shlex.split(block.argument))
        out.append(block)
        last_text = ""
        i += 1
    return out


def _need_mkdocs() -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        pytest.fail("MkDocs is not installed: install the docs extra (pip install -e '.[docs]'; the dev extras include it)")


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=config.parent)


# -- the site ---------------------------------------------------------------------------------------


def test_the_site_builds_in_strict_mode_with_its_generated_references(tmp_path: Path) -> None:
    _need_mkdocs()
    from pydantic import BaseModel

    from spade_engine.cli import _Commands
    from spade_engine.config import EngineConfig
    from spade_engine.events.catalogue import EVENT_TYPES
    from spade_engine.policy.registry import backend_names

    site = tmp_path / "site"
    res = _build(ROOT / "mkdocs.yml", site)
    assert res.returncode == 0, f"mkdocs build --strict failed:\n{res.stdout[-3000:]}\n{res.stderr[-6000:]}"
    assert "WARNING" not in res.stderr, res.stderr[-3000:]

    cli = (site / "reference" / "cli" / "index.html").read_text()
    for name in _Commands.lazy:  # every command, and the options of one of them
        assert f'id="cli-{name}"' in cli, f"reference/cli lacks {name}"
    assert 'id="cli-events-tail"' in cli and "--max-envs" in cli and "--progress-every" in cli

    config = (site / "reference" / "config" / "index.html").read_text()

    def keys(model: type[BaseModel], prefix: str) -> list[str]:
        out = []
        for name, f in model.model_fields.items():
            if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
                out += keys(f.annotation, f"{prefix}{name}.")
            else:
                out.append(name)
        return out

    for key in keys(EngineConfig, ""):
        assert f"<code>{key}</code>" in config, f"reference/config lacks the key {key}"
    for backend in backend_names():
        assert f'id="policy-{backend}"' in config, f"reference/config lacks [policy.{backend}]"

    events = (site / "reference" / "events" / "index.html").read_text()
    for name, cls in EVENT_TYPES.items():
        assert f'id="{name.lower()}"' in events, f"reference/events lacks {name}"
        assert f"Schema version <strong>{cls.VERSION}</strong>" in events

    api = (site / "reference" / "api" / "index.html").read_text()
    assert "spade_engine.config.EngineConfig" in api and "open_event_log" in api

    results = (site / "results" / "index.html").read_text()
    for page in sorted((ROOT / "docs" / "results").glob("*.md")):
        assert f'href="{page.stem}/"' in results, f"the results index does not link {page.name}"
        assert (site / "results" / page.stem / "index.html").exists()
    for data in sorted((ROOT / "bench" / "results").glob("*.json")):
        assert f'href="bench/{data.stem}/"' in results, f"the results index does not list {data.name}"
    assert "<code>bench/results_page.py</code>" in results


def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    """The build above can fail: a copy of the docs with one broken link does not build."""
    _need_mkdocs()
    config = _site_copy(tmp_path)
    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text() + "\nSee [a page that does not exist](guides/no-such-page.md).\n")
    res = _build(config, tmp_path / "site")
    assert res.returncode != 0
    assert "no-such-page.md" in res.stderr, res.stderr[-3000:]


def _site_copy(tmp_path: Path) -> Path:
    """A copy of the docs and mkdocs.yml in ``tmp_path`` (the package and bench/ linked), to build
    with changes; returns the copy's mkdocs.yml."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    for name in ("spade_engine", "bench"):  # what the hook and mkdocstrings read
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path / "mkdocs.yml"


def test_a_results_page_written_by_a_benchmark_joins_the_site(tmp_path: Path) -> None:
    """bench/results_page.py's output (JSON, page, extra files) builds strictly and is indexed with
    its provenance."""
    _need_mkdocs()
    config = _site_copy(tmp_path)
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from results_page import write_results
    finally:
        sys.path.remove(str(ROOT / "bench"))

    def render(r: dict) -> str:
        stem = f"{r['provenance']['date']}-docstest"
        return f"accuracy {r['accuracy']:.2f}\n\n![curve]({stem}.png)\n"

    page = write_results("docstest", {"accuracy": 0.25}, render, argv=["bench/docstest.py", "--report"],
                         out=tmp_path / "docs" / "results", extra_files={".png": b"\x89PNG\r\n\x1a\n"})
    res = _build(config, tmp_path / "site")
    assert res.returncode == 0, res.stderr[-4000:]
    index = (tmp_path / "site" / "results" / "index.html").read_text()
    assert f'href="{page.stem}/"' in index and "bench/docstest.py --report" in index
    assert (tmp_path / "site" / "results" / page.stem / "index.html").exists()
    assert (tmp_path / "site" / "results" / f"{page.stem}.png").exists()


def test_the_readme_links_point_at_files_that_exist() -> None:
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [t for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert local, "the README links into the docs"
    missing = [t for t in local if not (ROOT / t.split("#", 1)[0]).exists()]
    assert not missing, f"README links to missing files: {missing}"
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200, "the README stays short: details go to docs/"


def test_ci_runs_the_readme_test_command() -> None:
    """`.ci/run` ends with the README's test command, and the README shows that command."""
    commands = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip() and not ln.strip().startswith("#")]
    readme = [b.code.strip() for b in blocks(ROOT / "README.md") if b.lang in SHELL]
    assert commands[-1] in readme, f".ci/run's last command {commands[-1]!r} is not one of the README's commands {readme}"


def test_every_shell_block_says_whether_it_runs() -> None:
    problems = []
    for page in pages():
        for b in blocks(page):
            if b.lang in SHELL and b.kind is None:
                problems.append(f"{b.where()}: a {b.lang} block without a <!-- docs-test: run|skip REASON|file NAME --> line before it")
            if b.kind not in (None, "run", "skip", "file"):
                problems.append(f"{b.where()}: unknown directive {b.kind!r}")
            if b.kind == "skip" and not b.argument:
                problems.append(f"{b.where()}: a skip says why")
            if b.kind == "file" and not re.fullmatch(r"[\w.-]+", b.argument):
                problems.append(f"{b.where()}: file needs a plain file name, not {b.argument!r}")
            if b.kind == "run" and (set(b.options) - RUN_OPTIONS or b.lang not in SHELL | {"python"}):
                problems.append(f"{b.where()}: run takes {sorted(RUN_OPTIONS)} on a shell or python block")
    assert not problems, "\n".join(problems)


# -- the commands -----------------------------------------------------------------------------------


def _runnable_pages() -> list[str]:
    return [str(p.relative_to(ROOT)) for p in pages() if any(b.kind in ("run", "file") for b in blocks(p))]


def _environment() -> dict[str, str]:
    """This interpreter's tools first on PATH; no SPADE_* setting from outside but the caches."""
    keep = {"SPADE_MODEL_CACHE", "SPADE_KAFKA_CACHE", "SPADE_WHEEL_CACHE"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPADE_") or k in keep}
    bins = [sysconfig.get_path("scripts"), str(Path(sys.executable).parent)]
    env["PATH"] = os.pathsep.join([*dict.fromkeys(bins), env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.mark.slow
@pytest.mark.parametrize("page", _runnable_pages())
def test_the_commands_of_a_page_run(page: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for entry in ROOT.iterdir():
        if not entry.name.startswith(".") and entry.name not in NOT_LINKED:
            (work / entry.name).symlink_to(entry)
    env = _environment()
    assert shutil.which("spade-engine", path=env["PATH"]), "spade-engine is not installed beside this interpreter"
    ran = 0
    for b in blocks(ROOT / page):
        if b.kind == "file":
            target = work / b.argument
            target.write_text(b.code)
            if b.lang in SHELL:
                check = subprocess.run(["bash", "-n", str(target)], capture_output=True, text=True, timeout=30)
                assert check.returncode == 0, f"{b.where()}: {b.argument} is not valid bash: {check.stderr}"
            continue
        if b.kind != "run":
            continue
        code = b.code
        if "assume" in b.options:
            assumed = b.options["assume"]
            assert os.access(ROOT / assumed, os.X_OK), f"{b.where()}: assumed command {assumed} is not an executable file"
            assert assumed in code, f"{b.where()}: the block does not use {assumed}"
            code = code.replace(assumed, "true")
        script = work / f".block-{b.line}.{'py' if b.lang == 'python' else 'sh'}"
        script.write_text(code)
        cmd = [sys.executable, str(script)] if b.lang == "python" else ["bash", "-e", "-o", "pipefail", str(script)]
        timeout = float(b.options.get("timeout", 180))
        try:
            res = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout,
                                 stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{b.where()}: still running after {timeout:.0f} s:\n{b.code}\n{(exc.stdout or '')[-2000:]}")
        output = res.stdout + res.stderr
        expected_rc = int(b.options.get("rc", 0))
        assert res.returncode == expected_rc, (
            f"{b.where()}: exit status {res.returncode}, expected {expected_rc}:\n{b.code}\n--- output ---\n{output[-4000:]}")
        if "expect" in b.options:
            assert b.options["expect"] in output, f"{b.where()}: output lacks {b.options['expect']!r}:\n{output[-3000:]}"
        assert "Traceback (most recent call last)" not in output, f"{b.where()}: a traceback:\n{output[-4000:]}"
        ran += 1
    assert ran or any(b.kind == "file" for b in blocks(ROOT / page))
