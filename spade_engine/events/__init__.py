"""Events: the envelope, the versioned event catalogue, the codec, and the event logs.

The log is the source of truth of a run; every other store is a projection of it.
"""

from .catalogue import (
    EVENT_TYPES,
    BlobRef,
    DocumentRef,
    EnvironmentProposed,
    EnvironmentReplayed,
    EnvironmentValidated,
    EventPayload,
    Generation,
    HintWritten,
    PolicyUpdated,
    RegretEstimated,
    RolloutCompleted,
    RunStarted,
    RunStopped,
    Turn,
    ValidationCheck,
    register_upcaster,
)
from .codec import decode_envelope, encode_envelope, make_envelope
from .schema import json_schemas
from .envelope import Envelope, new_event_id, utc_now
from .errors import (
    EventError,
    EventLogError,
    FutureSchemaVersion,
    MalformedEvent,
    RunNotFound,
    UnknownEventType,
)
from .log import Cursor, DeadLetter, EventLog, Record, advance
from .sqlite.log import SqliteEventLog
from .store import DataDir, new_run_id, open_event_log, resolve_data_dir, resolve_run

__all__ = [name for name in dir() if not name.startswith("_")]
