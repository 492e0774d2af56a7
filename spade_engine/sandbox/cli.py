"""`spade-engine validate PATH... [--json]`: run the sandboxed validator on environment files.

Prints one verdict per file (``--json``: one JSON object per line with ``path``, ``valid``,
``error_kind``, ``failed_check``, ``checks`` and the other ``EnvironmentValidated`` fields, the
``validation_seed`` and the seeds and probe actions drawn from it; no raw U+2028, U+2029 or
U+0085 inside, so every object is exactly one line). Exit code 0 only if every file
is valid, 1 otherwise, 2 on bad input. Files are validated independently: a hostile file only ever
fails itself, and every file gets its verdict, whatever another one does. ``--seed`` makes the
drawn seeds and probes reproducible (file i uses a seed derived from it); without it they are
drawn afresh.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..cli_common import handle_errors
from ..config import load_config
from ..errors import SpadeError
from ..textout import json_text, note, say, styled
from . import SandboxPool
from .probes import random_seed, seed_for
from .validator import ValidationReport, Validator

__all__ = ["validate", "warn_missing_layers"]


def warn_missing_layers(pool: object) -> None:
    """Say which isolation layers the pool runs without (``validate``, ``start``, worker roles)."""
    missing = list(getattr(pool, "missing_layers", None) or [])
    if missing and getattr(pool, "isolate", True):
        note(styled(("warning:", "yellow"), f" sandbox layers missing: {', '.join(missing)}"))


def _expand(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted(q for q in p.glob("*.py") if q.is_file()))
        elif p.is_file():
            files.append(p)
        else:
            raise SpadeError(f"{p}: no such file or directory")
    if not files:
        raise SpadeError("no environment files to validate")
    return files


def _read(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpadeError(f"{p}: cannot read: {exc}") from None


@handle_errors
def validate(
    paths: Annotated[list[Path], typer.Argument(help="Environment source files (or directories of .py files).", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line instead of a table.")] = False,
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="TOML config file (sandbox and loop sections).", show_default=False)] = None,
    turn_limit: Annotated[Optional[int], typer.Option("--turn-limit", help="Episode turn limit (default: loop.turn_limit).", show_default=False)] = None,
    workers: Annotated[Optional[int], typer.Option("--workers", "-w", help="Sandbox workers (default: sandbox.workers).", show_default=False)] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show every check, not only the verdict.")] = False,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Draw the validators' reset seeds and probe actions from this seed (default: a fresh one).", show_default=False)] = None,
) -> None:
    """Validate model-written environment files in the sandbox and print a verdict per file."""
    cfg = load_config(config, overrides={"loop.turn_limit": turn_limit, "sandbox.workers": workers})
    files = _expand(paths)
    sources = [_read(p) for p in files]
    scfg = cfg.sandbox.model_copy(update={"workers": min(cfg.sandbox.workers, len(files))})
    with SandboxPool(scfg) as pool:
        warn_missing_layers(pool)
        validator = Validator(pool, turn_limit=cfg.loop.turn_limit)
        base = random_seed() if seed is None else seed

        def one(i: int) -> ValidationReport:
            try:
                return validator.validate(sources[i], seed=seed_for(base, "file", i))
            except Exception as exc:  # noqa: BLE001 - every file gets a verdict, whatever happens
                return _broken(exc)

        with ThreadPoolExecutor(max_workers=scfg.workers) as ex:
            reports = ex.map(one, range(len(files)))
            all_valid = True
            for path, report in zip(files, reports):
                all_valid &= report.valid
                _print(path, report, as_json, verbose)
    raise typer.Exit(0 if all_valid else 1)


def _broken(exc: BaseException) -> ValidationReport:
    """The verdict on a file whose validation itself failed (never the other files')."""
    from ..events.catalogue import ValidationCheck

    detail = f"{type(exc).__name__}: {exc}"[:2000]
    return ValidationReport(
        valid=False, error_kind="sandbox", failed_check="sandbox", checks=[ValidationCheck(name="sandbox", passed=False, detail=detail)]
    )


def _print(path: Path, r: ValidationReport, as_json: bool, verbose: bool) -> None:
    """One verdict line per file (and one line per check with --verbose). The detail, class name
    and check details come from the environment's own code: printed as escaped text, never markup,
    so an environment cannot forge a verdict line."""
    if as_json:
        sys.stdout.write(json_text({"path": str(path), **r.to_dict()}) + "\n")
        sys.stdout.flush()
        return
    if r.valid:
        say(styled(("valid", "green"), "   ", (path, None), "  ", (f"{r.class_name} ({r.contract}), {r.seconds * 1000:.0f} ms", "dim")))
    else:
        say(styled(("invalid", "red"), " ", (path, None), "  ", (r.error_kind, "bold"), " at ", (r.failed_check, "bold"), ": ",
                   (r.detail, None)))
    if verbose:
        for c in r.checks:
            mark = ("ok  ", "green") if c.passed else ("FAIL", "red")
            say(styled("    ", mark, " ", (f"{c.name:<14} {c.seconds * 1000:7.1f} ms  {c.detail}", None)))
