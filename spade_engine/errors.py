"""Error types shared across spade-engine.

Every error a user can cause (bad input, bad config, corrupt files) is a :class:`SpadeError`
with a message that names the thing at fault; the CLI prints it without a traceback.
"""

from __future__ import annotations


class SpadeError(Exception):
    """Base class for errors reported to users as a message, not a traceback."""


class ConfigError(SpadeError):
    """The configuration (file, environment or flags) is invalid."""
