"""EnvironmentMemory: the FAISS novelty memory of accepted environments (a projection).

It holds, for each accepted environment, the embedding recorded in its ``EnvironmentValidated``
event (never recomputed: the model is not run here) and what the designer should know about it
(skill, code, win rates, regret, designer reward). It answers:

* ``novelty(vec)``: 1 - max cosine similarity to what is stored, and the nearest environment;
* ``examples(skill, query_vec)``: nearest neighbours, frontier examples (high regret, plain win
  rate in the band) and negative examples (too easy or too hard) for designer prompts.

Search is exact (``IndexFlatIP`` on unit vectors) up to ``MemoryConfig.approximate_above``
entries, and approximate past it (``IndexIVFFlat``, inner product, sqrt(n) lists of which
``max(nprobe, nlist/16)`` are searched), retrained when the memory doubles. Snapshot layout in ``<run dir>/memory/``: ``vectors.f32``
(append-only raw float32 rows), ``entries.json`` (metadata), ``index.faiss`` (a cache of the
index, rewritten when the memory grew by 10%), and ``state.json`` (cursor, skipped, count),
written last: what is beyond its count is ignored.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import faiss
import msgspec
import numpy as np

from ..config import MemoryConfig
from ..events.catalogue import EnvironmentProposed, EnvironmentValidated, RegretEstimated
from ..events.log import Cursor, Record
from .embedder import DIMENSION, EmbeddingError
from .examples import MemoryExamples
from .novelty import novelty_of
from .reader import LogReader
from .records import Skipped

__all__ = ["EnvironmentMemory", "MemoryExamples", "encode_embedding", "decode_embedding", "MEMORY_DIRNAME"]

MEMORY_DIRNAME = "memory"
VECTORS_FILENAME = "vectors.f32"
_FORMAT = 1
_META_FIELDS = ("win_rate_plain", "win_rate_hinted", "regret", "designer_reward")


def _band_rate(entry: dict) -> float:
    """The win rate the frontier band is judged on: the smoothed one where recorded."""
    w = entry.get("win_rate_smoothed")
    return float(entry["win_rate_plain"] if w is None else w)


_CPUS = max(1, faiss.omp_get_max_threads())  # honours OMP_NUM_THREADS
_omp_current = [_CPUS]


def _omp_threads(n: int) -> None:
    """Set FAISS's OpenMP thread count, only when it changes (resizing the pool is costly)."""
    if _omp_current[0] != n:
        faiss.omp_set_num_threads(n)
        _omp_current[0] = n


def encode_embedding(vec: np.ndarray) -> str:
    """Base64 of the vector as little-endian float32 (what ``embedding_b64`` records)."""
    arr = np.ascontiguousarray(np.asarray(vec, dtype="<f4").reshape(-1))
    return base64.b64encode(arr.tobytes()).decode("ascii")


def decode_embedding(text: str, dim: int | None = DIMENSION) -> np.ndarray:
    """The float32 vector recorded by :func:`encode_embedding` (checked against ``dim``)."""
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise EmbeddingError(f"embedding is not base64: {exc}") from None
    if len(raw) % 4:
        raise EmbeddingError(f"embedding has {len(raw)} bytes, not a float32 vector")
    vec = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if dim is not None and vec.shape[0] != dim:
        raise EmbeddingError(f"embedding has dimension {vec.shape[0]}, expected {dim}")
    if not np.all(np.isfinite(vec)):
        raise EmbeddingError("embedding holds non-finite values")
    return vec


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


class EnvironmentMemory(LogReader):
    """Accepted environments with their embeddings, searchable by cosine similarity."""

    name = "memory"

    def __init__(self, directory: Path | None = None, config: MemoryConfig | None = None, *, dim: int = DIMENSION):
        self.directory = Path(directory) if directory is not None else None
        self.config = config or MemoryConfig()
        self.dim = dim
        self._vecs = np.zeros((0, dim), dtype=np.float32)
        self._n = 0
        self.entries: list[dict[str, Any]] = []
        self._row: dict[str, int] = {}
        self._pending: dict[str, dict[str, Any]] = {}
        self._index: Any = None
        self._indexed = 0
        self._trained_on = 0
        self._saved_cursor: Cursor = {}
        self._skipped = Skipped()
        self._dirty = False
        self._saved_n = 0
        self._index_saved: tuple[str, int] = ("", 0)
        if self.directory is not None:
            self._load()

    @classmethod
    def open(cls, run_dir: str | Path, config: MemoryConfig | None = None) -> "EnvironmentMemory":
        """The memory snapshot of a run (``<run_dir>/memory``), created empty when absent."""
        return cls(Path(run_dir) / MEMORY_DIRNAME, config)

    def __len__(self) -> int:
        return self._n

    @property
    def approximate(self) -> bool:
        """Whether searches go through the approximate (IVF) index."""
        return self._n > self.config.approximate_above

    # -- storing ---------------------------------------------------------------------------------

    def _reserve(self, extra: int) -> None:
        need = self._n + extra
        if need > self._vecs.shape[0]:
            cap = max(need, 2 * self._vecs.shape[0], 1024)
            grown = np.zeros((cap, self.dim), dtype=np.float32)
            grown[: self._n] = self._vecs[: self._n]
            self._vecs = grown

    def add(self, env_id: str, vec: np.ndarray, **meta: Any) -> bool:
        """Store one environment (no-op, returning ``False``, when already stored)."""
        if env_id in self._row:
            return False
        self.add_many([env_id], np.asarray(vec, dtype=np.float32).reshape(1, -1), [meta])
        return True

    def add_many(self, env_ids: list[str], vecs: np.ndarray, metas: list[dict[str, Any]] | None = None) -> None:
        """Store many new environments at once (ids must not be stored yet)."""
        vecs = np.ascontiguousarray(vecs, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[1] != self.dim:
            raise EmbeddingError(f"embeddings must have shape (n, {self.dim}), got {vecs.shape}")
        self._reserve(len(env_ids))
        self._vecs[self._n : self._n + len(env_ids)] = vecs
        for i, env_id in enumerate(env_ids):
            meta = dict(metas[i]) if metas else {}
            entry = {"env_id": env_id, "skill": meta.pop("skill", ""), "code": meta.pop("code", "")}
            for k in _META_FIELDS:
                entry[k] = meta.pop(k, None)
            entry.update(meta)
            self._row[env_id] = self._n + i
            self.entries.append(entry)
        self._n += len(env_ids)
        self._dirty = True

    # -- searching -------------------------------------------------------------------------------

    def _nlist(self) -> int:
        # sqrt(n) lists, and at least 39 training points per list (faiss' k-means minimum)
        return max(1, min(65536, int(math.sqrt(self._n)), self._n // 39))

    def _ensure_index(self) -> Any:
        n = self._n
        if self._indexed < n:
            _omp_threads(_CPUS)
        if n == 0:
            return None
        if n <= self.config.approximate_above:
            if self._index is None or isinstance(self._index, faiss.IndexIVF) or self._indexed > n:
                self._index = faiss.IndexFlatIP(self.dim)
                self._indexed = 0
        elif not isinstance(self._index, faiss.IndexIVF) or n > 2 * self._trained_on or self._indexed > n:
            quantizer = faiss.IndexFlatIP(self.dim)
            index = faiss.IndexIVFFlat(quantizer, self.dim, self._nlist(), faiss.METRIC_INNER_PRODUCT)
            index.cp.max_points_per_centroid = 64
            index.cp.niter = 10
            index.train(self._vecs[:n])
            self._index, self._indexed, self._trained_on = index, 0, n
        if isinstance(self._index, faiss.IndexIVF):
            # at least nlist/16 lists: recall@1 >= 0.95 on near-duplicates at 1M (bench/memory.py)
            self._index.nprobe = min(max(self.config.nprobe, self._index.nlist // 16), self._index.nlist)
        if self._indexed < n:
            self._index.add(self._vecs[self._indexed : n])
            self._indexed = n
        return self._index

    def build_index(self) -> None:
        """Build (or bring up to date) the search index now rather than at the first query."""
        self._ensure_index()

    def search(self, vecs: np.ndarray, k: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """(similarities, row numbers) of the ``k`` nearest stored vectors of each query row."""
        q = np.ascontiguousarray(np.asarray(vecs, dtype=np.float32).reshape(-1, self.dim))
        index = self._ensure_index()
        if index is None:
            return np.full((q.shape[0], k), -np.inf, dtype=np.float32), np.full((q.shape[0], k), -1)
        # a few queries: one OpenMP thread (thread wake-up and contention cost more than the
        # scan); batches and index building use every core (see _ensure_index)
        _omp_threads(1 if q.shape[0] < 16 else _CPUS)
        return index.search(q, min(k, self._n))

    def novelty(self, vec: np.ndarray) -> tuple[float, str | None]:
        """(1 - max cosine similarity, nearest env_id); ``(1.0, None)`` for an empty memory."""
        if self._n == 0:
            return 1.0, None
        sims, rows = self.search(vec, 1)
        if rows[0, 0] < 0:
            return 1.0, None
        return novelty_of(float(sims[0, 0])), self.entries[int(rows[0, 0])]["env_id"]

    def is_novel(self, novelty: float) -> bool:
        return novelty >= self.config.novelty_threshold

    def examples(
        self,
        skill: str | None,
        query_vec: np.ndarray | None = None,
        k: int = 3,
        band: tuple[float, float] = (0.4, 0.6),
        *,
        easy: float = 0.85,
        hard: float = 0.15,
    ) -> MemoryExamples:
        """Examples for a designer prompt about ``skill`` (``None`` = every skill)."""
        lo, hi = band
        pool = [e for e in self.entries if (skill is None or e["skill"] == skill)]
        rated = [e for e in pool if e.get("win_rate_plain") is not None]
        frontier = sorted(
            (e for e in rated if lo <= _band_rate(e) <= hi),
            key=lambda e: (-(e.get("regret") or 0.0), e["env_id"]),
        )[:k]
        negatives = []
        for e in rated:
            w = _band_rate(e)
            if w >= easy:
                negatives.append((w - easy, "too easy", e))
            elif w <= hard:
                negatives.append((hard - w, "too hard", e))
        negatives.sort(key=lambda t: (-t[0], t[2]["env_id"]))
        out = MemoryExamples(
            frontier=[dict(e) for e in frontier],
            negatives=[{**e, "reason": reason} for _, reason, e in negatives[:k]],
        )
        if query_vec is not None and self._n and k > 0:
            sims, rows = self.search(query_vec, k)
            out.neighbours = [
                {**self.entries[int(r)], "similarity": float(s)} for s, r in zip(sims[0], rows[0]) if r >= 0
            ]
        return out

    def get(self, env_id: str) -> dict[str, Any] | None:
        row = self._row.get(env_id)
        return None if row is None else dict(self.entries[row])

    def vector(self, env_id: str) -> np.ndarray | None:
        row = self._row.get(env_id)
        return None if row is None else self._vecs[row].copy()

    # -- Projection protocol ---------------------------------------------------------------------

    def position(self) -> Cursor:
        return dict(self._saved_cursor)

    def skipped_changed(self) -> None:
        self._dirty = True

    def _proposed(self, record: Record, event: EnvironmentProposed) -> None:
        if event.env_id not in self._row:
            self._pending[event.env_id] = {
                **self._pending.get(event.env_id, {}), "skill": event.skill, "code": event.code,
            }
            self._dirty = True

    def _regret(self, record: Record, event: RegretEstimated) -> None:
        stats = {
            "skill": event.skill, "win_rate_plain": event.win_rate_plain,
            "win_rate_hinted": event.win_rate_hinted, "regret": event.regret,
            "designer_reward": event.designer_reward,
        }
        if event.win_rate_smoothed is not None:  # the band uses the smoothed rate (several rounds)
            stats["win_rate_smoothed"] = event.win_rate_smoothed
        row = self._row.get(event.env_id)
        if row is not None:
            entry = self.entries[row]
            entry.update({k: v for k, v in stats.items() if k != "skill" or not entry["skill"]})
        else:
            self._pending[event.env_id] = {**self._pending.get(event.env_id, {}), **stats}
        self._dirty = True

    def _validated(self, record: Record, ev: EnvironmentValidated) -> None:
        if ev.env_id in self._row:
            return
        if not ev.accepted:
            if self._pending.pop(ev.env_id, None) is not None:
                self._dirty = True
            return
        if not ev.embedding_b64:
            self.skip(record, "accepted without recorded embedding")
            return
        try:
            vec = decode_embedding(ev.embedding_b64, self.dim)
        except EmbeddingError:
            self.skip(record, "malformed embedding")
            return
        meta = self._pending.pop(ev.env_id, {})
        meta.setdefault("skill", "")
        meta.setdefault("code", "")
        meta["novelty"] = ev.novelty
        self.add_many([ev.env_id], vec.reshape(1, -1), [meta])

    WANTED = frozenset({"EnvironmentProposed", "EnvironmentValidated", "RegretEstimated"})
    HANDLERS = {EnvironmentProposed: _proposed, EnvironmentValidated: _validated, RegretEstimated: _regret}

    # -- snapshot --------------------------------------------------------------------------------

    def flush(self, cursor: Mapping[int, int]) -> None:
        if self.directory is None:
            self._saved_cursor = {int(p): int(o) for p, o in cursor.items()}
            return
        cursor = {int(p): int(o) for p, o in cursor.items()}
        if not self._dirty and cursor == self._saved_cursor:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._dirty:
            self._write_vectors()
            body = {"entries": self.entries, "pending": self._pending}
            _atomic_write(self.directory / "entries.json", msgspec.json.encode(body, order="sorted"))
            index = self._ensure_index()
            # the index file is a cache (rebuilt from the vectors when absent or stale): rewrite
            # it when its kind changed or the memory grew by 10% since it was written
            if index is not None and (
                type(index).__name__ != self._index_saved[0] or index.ntotal >= 1.1 * self._index_saved[1]
            ):
                _atomic_write(self.directory / "index.faiss", faiss.serialize_index(index).tobytes())
                self._index_saved = (type(index).__name__, index.ntotal)
        state = {
            "format": _FORMAT,
            "cursor": {str(p): o for p, o in sorted(cursor.items())},
            "skipped": self._skipped.by_event,
            "count": self._n,
            "dim": self.dim,
            "embedding_model": self.config.embedding_model,
            "approximate": self.approximate,
        }
        _atomic_write(self.directory / "state.json", json.dumps(state, sort_keys=True).encode())
        self._saved_cursor = cursor
        self._dirty = False

    def _write_vectors(self) -> None:
        """Append the vectors added since the last snapshot to ``vectors.f32`` (raw little-endian
        float32 rows); a tail beyond the last snapshot (crash before ``state.json``) is cut."""
        path = self.directory / VECTORS_FILENAME
        row_bytes = self.dim * 4
        saved = self._saved_n if path.exists() and path.stat().st_size >= self._saved_n * row_bytes else 0
        with open(path, "r+b" if path.exists() else "wb") as fh:
            fh.truncate(saved * row_bytes)
            fh.seek(saved * row_bytes)
            fh.write(np.ascontiguousarray(self._vecs[saved : self._n], dtype="<f4").tobytes())
            fh.flush()
            os.fsync(fh.fileno())
        self._saved_n = self._n

    def _load(self) -> None:
        state_path = self.directory / "state.json"
        if not state_path.exists():
            return
        try:
            state = json.loads(state_path.read_text())
            n = int(state["count"])
            if int(state.get("dim", self.dim)) != self.dim:
                raise EmbeddingError(f"memory {self.directory} holds dimension {state['dim']}, expected {self.dim}")
            body = json.loads((self.directory / "entries.json").read_text()) if n or (self.directory / "entries.json").exists() else {}
            vecs = (
                np.fromfile(self.directory / VECTORS_FILENAME, dtype="<f4", count=n * self.dim).reshape(-1, self.dim)
                if n else np.zeros((0, self.dim), np.float32)
            )
        except (OSError, ValueError, KeyError) as exc:
            raise EmbeddingError(
                f"memory snapshot in {self.directory} is unreadable ({exc}); rebuild it with `spade-engine replay`"
            ) from None
        if vecs.shape[0] < n or len(body.get("entries", [])) < n:
            raise EmbeddingError(f"memory snapshot in {self.directory} is incomplete; rebuild it with `spade-engine replay`")
        self._vecs = np.ascontiguousarray(vecs[:n], dtype=np.float32)
        self._n = self._saved_n = n
        self.entries = list(body.get("entries", []))[:n]
        self._row = {e["env_id"]: i for i, e in enumerate(self.entries)}
        self._pending = dict(body.get("pending", {}))
        self._saved_cursor = {int(p): int(o) for p, o in state.get("cursor", {}).items()}
        self._skipped = Skipped(state.get("skipped", {}))
        index_path = self.directory / "index.faiss"
        if n and index_path.exists():
            try:
                index = faiss.deserialize_index(np.frombuffer(index_path.read_bytes(), dtype=np.uint8))
            except RuntimeError:
                index = None
            if index is not None and index.ntotal <= n and isinstance(index, faiss.IndexIVF) == self.approximate:
                # vectors added after the index was written are added at the first search
                self._index, self._indexed = index, index.ntotal
                self._trained_on = index.ntotal if isinstance(index, faiss.IndexIVF) else 0
                self._index_saved = (type(index).__name__, index.ntotal)

    def dump(self) -> dict[str, Any]:
        """Canonical content (for equality checks): entries with their recorded vectors, by id."""
        entries = []
        for env_id in sorted(self._row):
            e = dict(self.entries[self._row[env_id]])
            e["embedding"] = encode_embedding(self._vecs[self._row[env_id]])
            entries.append({k: (round(v, 12) if isinstance(v, float) else v) for k, v in sorted(e.items())})
        return {
            "state": {"cursor": {str(p): o for p, o in sorted(self._saved_cursor.items())}, "skipped": dict(self._skipped.by_event)},
            "entries": entries,
            "pending": {k: self._pending[k] for k in sorted(self._pending)},
        }
