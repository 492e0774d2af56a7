"""Metrics of a run for outside tools: TensorBoard event files written from the log
(:mod:`.tensorboard`, ``spade-engine metrics tensorboard``)."""
