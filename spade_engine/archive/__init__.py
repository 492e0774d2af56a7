"""The archive: projections of a run's log (SQL archive of environments and plays, FAISS novelty
memory, difficulty series), their replay from offset 0, and the ``archive``/``replay`` commands."""
