"""The dashboard: a FastAPI app with server-sent events over a run's projections (``app``,
``views``, ``state``, ``sse``, ``cli``) and the static HTML audit report (``audit``)."""
