"""The ``kafka`` event-log backend (registered in :mod:`spade_engine.events.backends`): ``log``
(:class:`~.log.KafkaEventLog`, one topic per run on an Apache Kafka broker), ``group`` (consumer
group membership for role workers) and ``topics`` (topic names, record headers, the admin client
and error wrapping they share).

Nothing is imported here, so the Kafka client is loaded only when the backend is used.
"""
