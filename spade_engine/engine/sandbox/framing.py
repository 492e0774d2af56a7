"""Length-prefixed JSON frames: the only thing that crosses a sandbox pipe (never pickle).

A frame is a 4-byte big-endian payload length followed by a UTF-8 JSON object. Both sides
refuse frames over :data:`MAX_FRAME`. The worker side uses the blocking helpers; the engine side
feeds whatever bytes arrive into a :class:`FrameBuffer` and decodes complete frames itself.

This module is imported by the untrusted worker too, so it uses only the standard library and no
relative imports.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

__all__ = ["MAX_FRAME", "FrameError", "encode", "decode", "FrameBuffer", "read_frame", "write_frame"]

MAX_FRAME = 8 << 20
_HEADER = struct.Struct(">I")


class FrameError(Exception):
    """Bad framing or a payload that is not a JSON object."""


def encode(obj: dict[str, Any]) -> bytes:
    """One frame (header + JSON) for ``obj``; ASCII-escaped so any Python str survives."""
    payload = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")
    if len(payload) > MAX_FRAME:
        raise FrameError(f"frame of {len(payload)} bytes exceeds {MAX_FRAME}")
    return _HEADER.pack(len(payload)) + payload


def decode(payload: bytes) -> dict[str, Any]:
    """The JSON object in a frame payload (raises FrameError on anything else)."""
    try:
        obj = json.loads(payload)
    except (ValueError, RecursionError, MemoryError) as exc:
        raise FrameError(f"frame is not JSON: {type(exc).__name__}") from None
    if not isinstance(obj, dict):
        raise FrameError(f"frame holds a {type(obj).__name__}, not an object")
    return obj


class FrameBuffer:
    """Accumulates bytes from a pipe and yields complete decoded frames."""

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buf = bytearray()
        self._max = max_frame

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buf += data
        out: list[dict[str, Any]] = []
        while len(self._buf) >= _HEADER.size:
            (n,) = _HEADER.unpack_from(self._buf)
            if n > self._max:
                raise FrameError(f"announced frame of {n} bytes exceeds {self._max}")
            if len(self._buf) < _HEADER.size + n:
                break
            payload = bytes(self._buf[_HEADER.size : _HEADER.size + n])
            del self._buf[: _HEADER.size + n]
            out.append(decode(payload))
        return out

    @property
    def pending(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buf)


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        data = os.read(fd, min(n, 1 << 20))
        if not data:
            return None
        chunks.append(data)
        n -= len(data)
    return b"".join(chunks)


def read_frame(fd: int, max_frame: int = MAX_FRAME) -> dict[str, Any] | None:
    """Blocking read of one frame from ``fd``; ``None`` at end of file."""
    head = _read_exact(fd, _HEADER.size)
    if head is None:
        return None
    (n,) = _HEADER.unpack(head)
    if n > max_frame:
        raise FrameError(f"announced frame of {n} bytes exceeds {max_frame}")
    payload = _read_exact(fd, n)
    if payload is None:
        return None
    return decode(payload)


def write_frame(fd: int, obj: dict[str, Any]) -> None:
    """Blocking write of one frame to ``fd``."""
    data = memoryview(encode(obj))
    while data:
        n = os.write(fd, data)
        data = data[n:]
