"""Content-addressed blob store: large artefacts (checkpoints, token traces) as files named by
their sha256, referenced from events by :class:`~spade_engine.events.catalogue.BlobRef`.

URIs have the form ``cas://sha256/<hex>`` and resolve against the store's root, so a run's
references stay valid when the data directory moves. Writes are atomic (temp file + rename) and
reads verify the digest.

:func:`restore_generation` is the reading side of the engine's offload
(:mod:`spade_engine.engine.offload`): a ``Generation`` whose token ids moved to a JSON blob, with
its ids read back.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from .errors import SpadeError
from .events.catalogue import BlobRef, Generation

__all__ = ["BlobStore", "BlobError", "restore_generation"]


class BlobError(SpadeError):
    """A blob is missing or its content does not match its digest."""


class BlobStore:
    """Files under ``root/sha256/<2 hex>/<64 hex>``."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def path_for(self, sha256: str) -> Path:
        return self.root / "sha256" / sha256[:2] / sha256

    def put_bytes(self, data: bytes, media_type: str = "application/octet-stream") -> BlobRef:
        digest = hashlib.sha256(data).hexdigest()
        path = self.path_for(digest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        return BlobRef(uri=f"cas://sha256/{digest}", sha256=digest, size=len(data), media_type=media_type)

    def put_file(self, src: str | Path, media_type: str = "application/octet-stream") -> BlobRef:
        h = hashlib.sha256()
        size = 0
        with open(src, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
                size += len(chunk)
        digest = h.hexdigest()
        path = self.path_for(digest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            os.close(fd)
            with open(src, "rb") as fin, open(tmp, "wb") as fout:
                for chunk in iter(lambda: fin.read(1 << 20), b""):
                    fout.write(chunk)
            os.replace(tmp, path)
        return BlobRef(uri=f"cas://sha256/{digest}", sha256=digest, size=size, media_type=media_type)

    def resolve(self, ref: BlobRef) -> Path:
        """Local path of ``ref``; raises :class:`BlobError` if it is missing."""
        if ref.uri.startswith("cas://sha256/"):
            path = self.path_for(ref.uri.rsplit("/", 1)[-1])
        elif ref.uri.startswith("file://"):
            path = Path(ref.uri[len("file://"):])
        else:
            raise BlobError(f"unsupported blob uri {ref.uri!r}")
        if not path.exists():
            raise BlobError(f"blob {ref.uri} is missing (looked in {path})")
        return path

    def verified(self, ref: BlobRef) -> Path:
        """Local path of ``ref`` after checking its sha256 (streamed); raises :class:`BlobError`
        if it is missing or corrupt."""
        path = self.resolve(ref)
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
        if h.hexdigest() != ref.sha256:
            raise BlobError(f"blob {ref.uri} is corrupt: sha256 does not match")
        return path

    def get_bytes(self, ref: BlobRef, *, verify: bool = True) -> bytes:
        data = self.resolve(ref).read_bytes()
        if verify and hashlib.sha256(data).hexdigest() != ref.sha256:
            raise BlobError(f"blob {ref.uri} is corrupt: sha256 does not match")
        return data


def restore_generation(gen: Generation | None, blobs: BlobStore | None) -> Generation | None:
    """``gen`` with its token ids and log-probs inline: as it is when they are inline already (or
    it has no blob), read from the JSON blob its ``ref`` names otherwise. ``None`` when ``gen`` is
    None, or its ids are in a blob and there is no store to read it from. Raises
    :class:`BlobError` for a missing or corrupt blob and ``ValueError`` for one that is not JSON."""
    if gen is None:
        return None
    if gen.ref is None or gen.completion_token_ids:
        return gen
    if blobs is None:
        return None
    data = json.loads(blobs.get_bytes(gen.ref))
    return Generation(
        prompt_token_ids=data.get("prompt_token_ids", []),
        completion_token_ids=data.get("completion_token_ids", []),
        logprobs=data.get("logprobs", []),
        finish_reason=gen.finish_reason,
    )
