"""Length-prefixed JSON frames: the only thing that crosses a sandbox pipe (never pickle).

A frame is a 4-byte big-endian payload length followed by a UTF-8 JSON object. Both sides
refuse frames over :data:`MAX_FRAME`. The worker side uses the blocking helpers; the engine side
feeds whatever bytes arrive into a :class:`FrameBuffer` and decodes complete frames itself.

This module is imported by the untrusted worker too, so it uses only the standard library and no
relative imports.
"""

from __future__ import annotations

import os
import struct
from builtins import bytes, dict, isinstance, len, memoryview, min, type  # immune to monkeypatching
from json.decoder import JSONDecoder
from typing import Any

try:  # the C encoder, bound once: an environment patching json or builtins cannot change it
    from _json import encode_basestring_ascii as _c_ascii
    from _json import make_encoder as _c_make_encoder

    def _no_default(o: Any) -> Any:
        raise TypeError(f"{type(o).__name__} is not JSON serializable")

    _C_ENCODER = _c_make_encoder(None, _no_default, _c_ascii, None, ":", ",", False, False, False)

    def _dumps(obj: Any) -> str:
        return "".join(_C_ENCODER(obj, 0))

except ImportError:  # pragma: no cover - CPython always has _json
    from json import dumps as _json_dumps

    def _dumps(obj: Any) -> str:
        return _json_dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


_scan_once = JSONDecoder().scan_once  # the C scanner, bound once (json.loads is Python code)


def _loads(payload: bytes) -> Any:
    text = payload.decode("utf-8")
    obj, end = _scan_once(text, 0)
    if end != len(text):
        raise ValueError("trailing data after the JSON value")
    return obj

__all__ = ["MAX_FRAME", "FrameError", "encode", "decode", "FrameBuffer", "read_frame", "write_frame"]

MAX_FRAME = 8 << 20
_HEADER = struct.Struct(">I")


class FrameError(Exception):
    """Bad framing or a payload that is not a JSON object."""


def encode(obj: dict[str, Any]) -> bytes:
    """One frame (header + JSON) for ``obj``; ASCII-escaped so any Python str survives."""
    payload = _dumps(obj).encode("ascii")
    if len(payload) > MAX_FRAME:
        raise FrameError(f"frame of {len(payload)} bytes exceeds {MAX_FRAME}")
    return _HEADER.pack(len(payload)) + payload


def decode(payload: bytes) -> dict[str, Any]:
    """The JSON object in a frame payload (raises FrameError on anything else)."""
    try:
        obj = _loads(payload)
    except (ValueError, StopIteration, RecursionError, MemoryError) as exc:
        raise FrameError(f"frame is not JSON: {type(exc).__name__}") from None
    if not isinstance(obj, dict):
        raise FrameError(f"frame holds a {type(obj).__name__}, not an object")
    return obj


class FrameBuffer:
    """Accumulates bytes from a pipe and yields complete frames: decoded JSON objects, or with
    ``raw=True`` the payload bytes (the engine decodes those against a schema, see replies.py)."""

    def __init__(self, max_frame: int = MAX_FRAME, *, raw: bool = False) -> None:
        self._buf = bytearray()
        self._max = max_frame
        self._raw = raw

    def feed(self, data: bytes) -> list[Any]:
        self._buf += data
        out: list[Any] = []
        while len(self._buf) >= _HEADER.size:
            (n,) = _HEADER.unpack_from(self._buf)
            if n > self._max:
                raise FrameError(f"announced frame of {n} bytes exceeds {self._max}")
            if len(self._buf) < _HEADER.size + n:
                break
            payload = bytes(self._buf[_HEADER.size : _HEADER.size + n])
            del self._buf[: _HEADER.size + n]
            out.append(payload if self._raw else decode(payload))
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
