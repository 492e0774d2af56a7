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

from .config import EngineConfig, load_config
from .errors import ConfigError
from .events.errors import EventError
from .events.log import EventLog

__all__ = ["recorded_config", "recorded_config_or_default", "with_local_sandbox"]

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

