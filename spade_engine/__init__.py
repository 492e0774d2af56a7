"""spade-engine: an event-sourced self-play curriculum engine for LLM agents (SPADE).

Subpackages: ``events`` (catalogue, codec, the EventLog protocol and its SQLite and Kafka
backends), ``sandbox`` (isolated workers for model-written code, the validator), ``policy`` (the
Policy protocol and its backends), ``engine`` (designer, stages, the stage table, the loop and the
distributed role workers), ``trainer`` (GRPO from the log), ``runs`` (assembling and driving runs:
start, workers, retrain), ``archive`` (SQL archive, FAISS memory, replay), ``consumers``
(projections and their runners), ``dashboard`` (FastAPI + SSE, audit).
"""

__version__ = "0.1.0"
