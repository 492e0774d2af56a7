"""The config a command drives a run with, over the config the run recorded
(:mod:`spade_engine.recorded`), in one place: :func:`run_config_for` for ``start`` and the
workers (a recorded run keeps its config), :func:`train_config_for` for ``train`` (a ``--config``
file is the whole training recipe), :func:`eval_config_for` for ``eval`` (no run's config: only
``[sandbox]`` is read, for archive suites). Each takes ``[sandbox]`` from this machine, never from
a log."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config import EngineConfig, load_config
from ..envsources import fixed_source_overrides
from ..envsources.spec import source_of
from ..recorded import with_local_sandbox

__all__ = ["eval_config_for", "run_config_for", "train_config_for"]


def run_config_for(
    recorded: EngineConfig | None,
    *,
    config_file: Path | None = None,
    preset: str | None = None,
    flags: dict[str, Any] | None = None,
    new_run_flags: dict[str, Any] | None = None,
) -> EngineConfig:
    """The config a command drives a run with (``start``, a worker), by one rule.

    A run that recorded its config (``recorded``) keeps it, but for ``[sandbox]``, which is
    always this machine's (:func:`with_local_sandbox`), with ``flags`` on top (the few options
    that apply to a running run: ``--max-envs``, ``--plays``, the log's place). A run that has
    not (new, or killed before its ``RunStarted``) is configured like a new one: defaults <
    ``preset`` < ``config_file`` < ``SPADE_*`` < ``flags`` < ``new_run_flags``, plus what a fixed
    environment source implies (:func:`~spade_engine.envsources.fixed_source_overrides`). A
    ``None`` value is an option not given: it overrides nothing. The run seed is drawn later,
    where it is announced (:meth:`EngineConfig.with_run_seed`)."""
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    if recorded is not None:
        return with_local_sandbox(recorded, config_file).with_overrides(given)
    given.update({k: v for k, v in (new_run_flags or {}).items() if v is not None})
    cfg = load_config(config_file, overrides=given, preset=preset)
    if cfg.loop.env_source:  # a fixed source (a flag, a file, a preset or SPADE_LOOP__ENV_SOURCE): what it implies
        cfg = cfg.with_overrides(fixed_source_overrides(source_of(cfg.loop)))
    return cfg


def train_config_for(
    recorded: EngineConfig | None, *, config_file: Path | None = None, flags: Mapping[str, object] | None = None
) -> EngineConfig:
    """The config ``spade-engine train`` trains a run with.

    ``config_file``, when given, is the whole recipe (defaults < file < ``SPADE_*`` < ``flags``):
    training a recorded run again with other settings is what it is for. Else the run's recorded
    config, with this machine's ``[sandbox]`` (the periodic evaluation plays in the sandbox, and a
    log may come from anywhere: :func:`~spade_engine.recorded.with_local_sandbox`) and ``flags`` on
    top; a run that recorded none trains with the defaults and ``flags``. A ``None`` flag is an
    option not given."""
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    if config_file is None and recorded is not None:
        return with_local_sandbox(recorded).with_overrides(given)
    return load_config(config_file, overrides=given)


def eval_config_for(config_file: Path | None = None, *, workers: int | None = None) -> EngineConfig:
    """The config ``spade-engine eval`` plays archive suites with: defaults < ``config_file`` <
    ``SPADE_*`` < ``--workers`` (``sandbox.workers``). An evaluated run's recorded config is not
    read: the policy and its generation settings come from the eval's own options, and the
    sandbox is this machine's."""
    return load_config(config_file, overrides={"sandbox.workers": workers})
