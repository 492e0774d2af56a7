"""spade-engine: an event-sourced self-play curriculum engine for LLM agents (SPADE).

Subpackages: ``events`` (catalogue, codec, the EventLog protocol and its SQLite and Kafka
backends), ``sandbox`` (isolated workers for model-written code, the validator), ``policy`` (the
Policy protocol and its backends), ``engine`` (designer, stages, the stage table, the loop and the
distributed role workers), ``trainer`` (GRPO from the log), ``runs`` (assembling and driving runs:
start, train, workers, retrain), ``archive`` (SQL archive, FAISS memory, replay), ``consumers``
(projections and their runners), ``dashboard`` (FastAPI + SSE, audit).

Bridges: :func:`make` (an archived environment as a sandboxed ``gymnasium.Env``, also
``gym.make("spade/Archived-v0", ...)`` after ``import spade_engine.gym``), ``spade-engine archive
export`` (Parquet / JSON Lines) and ``spade-engine metrics tensorboard``.
"""

__version__ = "0.1.0"


def make(run: str | None, env_id: str, **kwargs: object) -> object:
    """An archived environment of a run as a sandboxed ``gymnasium.Env`` (see :mod:`spade_engine.gym`)."""
    from .gym import make as _make

    return _make(run, env_id, **kwargs)


def _register_gym_if_loaded() -> None:
    """``gym.make("spade/Archived-v0")`` works after ``import gymnasium, spade_engine``; without
    gymnasium loaded, importing spade_engine does not load it (``import spade_engine.gym`` does)."""
    import sys

    if "gymnasium" in sys.modules:
        from . import gym  # noqa: F401  (registers on import)


_register_gym_if_loaded()
