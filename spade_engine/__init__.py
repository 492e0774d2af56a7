"""spade-engine: an event-sourced self-play curriculum engine for LLM agents (SPADE).

Subpackages: ``events`` (catalogue, codec, logs), ``engine`` (designer, sandbox, rollouts, regret,
policies, loop), ``archive`` (SQL archive, FAISS memory), ``consumers`` (projections and their
runners), ``trainer`` (GRPO from the log), ``dashboard`` (FastAPI + SSE).
"""

__version__ = "0.1.0"
