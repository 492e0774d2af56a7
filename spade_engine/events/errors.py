"""Errors raised by the event catalogue, the codec and the event logs."""

from __future__ import annotations

from ..errors import SpadeError


class EventError(SpadeError):
    """Base class for event and event-log errors."""


class MalformedEvent(EventError):
    """Bytes or a mapping that are not a valid event envelope (bad JSON, missing fields...)."""


class UnknownEventType(EventError):
    """An event type this engine does not know. Consumers skip it with a warning."""


class FutureSchemaVersion(EventError):
    """An event written with a newer schema version than this engine reads."""


class EventLogError(EventError):
    """The event log cannot be opened or used (corrupt file, locked database, broker down)."""


class RunNotFound(EventError):
    """No run with the given id (or no run at all) in the data directory."""
