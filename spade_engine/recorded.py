"""The configuration a run recorded about itself: the ``config`` of its first ``RunStarted``.

Every command that needs a run's config (resume, workers, trainer, archive, replay, dashboard,
audit, retrain) reads it through :func:`recorded_config`, so they all agree: a run that has no
``RunStarted`` yet has no recorded config (``None``), and a recorded config this engine cannot
read is always an error, never silently replaced by defaults.

One section is never taken from a log: ``[sandbox]``. It decides what runs before isolation
(``preload_modules`` are imported by every worker as root, before the namespaces and the uid
drop) and how strong the isolation is (``require_isolation``, limits, uids), and a log may have
been imported from anywhere. Whatever resumes a run, attaches a worker to it or replays it uses
:func:`with_local_sandbox`: this machine's sandbox config (defaults < the ``--config`` file <
``SPADE_SANDBOX__*`` environment), never the recorded one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config import EngineConfig, load_config
from .errors import ConfigError
from .events.errors import EventError
from .events.log import EventLog

__all__ = ["recorded_config", "recorded_config_or_default", "with_local_sandbox", "run_config_for"]

_MARK = b'"type":"RunStarted"'


def recorded_config(log: EventLog) -> EngineConfig | None:
    """The config recorded by the run's first RunStarted; ``None`` when there is none yet.

    Raises :class:`~spade_engine.errors.ConfigError` when the recorded config (or the RunStarted
    event itself) cannot be read by this engine.
    """
    for rec in log.read():
        if _MARK not in rec.raw:  # canonical JSON: cheap filter before decoding
            continue
        try:
            envelope = rec.envelope
            if envelope.type != "RunStarted":
                continue
            started = envelope.event()
            data = started.config
            if isinstance(data, dict) and data.get("seed") is None:
                # the run's seed is the one it recorded (a config written without one, by hand or by
                # a tool, must not make a resumed run draw another)
                data = {**data, "seed": started.seed}
        except EventError as exc:
            raise ConfigError(f"run {log.run_id}: its RunStarted event is unreadable: {exc}") from None
        try:
            return EngineConfig.model_validate(data)
        except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError, or a foreign shape
            raise ConfigError(f"run {log.run_id}: recorded config is not readable by this engine: {exc}") from None
    return None


def recorded_config_or_default(log: EventLog) -> EngineConfig:
    """:func:`recorded_config`, or the defaults for a run that has not recorded one yet."""
    cfg = recorded_config(log)
    return EngineConfig() if cfg is None else cfg


def with_local_sandbox(cfg: EngineConfig, config_file: Path | None = None) -> EngineConfig:
    """``cfg`` (a recorded config) with this machine's ``[sandbox]`` section instead of the
    recorded one (see the module docstring)."""
    return cfg.model_copy(update={"sandbox": load_config(config_file).sandbox})


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
        from .envsources import fixed_source_overrides

        cfg = cfg.with_overrides(fixed_source_overrides(cfg.loop.source))
    return cfg

