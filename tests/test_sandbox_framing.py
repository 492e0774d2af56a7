"""Length-prefixed JSON framing: round trips, partial reads, and refusal of garbage."""

from __future__ import annotations

import os
import struct

import pytest

from spade_engine.sandbox import framing


def test_round_trip_through_a_pipe_including_odd_text():
    r, w = os.pipe()
    obj = {"s": "\u00fc \U0001f642 \ud800 \\boxed{x}", "n": [1, 2.5, None, True], "d": {"k": "v"}}
    framing.write_frame(w, obj)
    os.close(w)
    assert framing.read_frame(r) == obj
    assert framing.read_frame(r) is None  # EOF
    os.close(r)


def test_buffer_reassembles_frames_split_anywhere():
    data = framing.encode({"a": 1}) + framing.encode({"b": "x" * 1000})
    buf = framing.FrameBuffer()
    got = []
    for i in range(0, len(data), 7):
        got.extend(buf.feed(data[i : i + 7]))
    assert got == [{"a": 1}, {"b": "x" * 1000}]
    assert buf.pending == 0


@pytest.mark.parametrize(
    "payload",
    [b"[1, 2]", b"not json", b"\xff\xfe", b"", b'{"a": 1} trailing', b"[" * 100_000],
)
def test_garbage_payloads_are_frame_errors(payload):
    buf = framing.FrameBuffer()
    with pytest.raises(framing.FrameError):
        buf.feed(struct.pack(">I", len(payload)) + payload)


def test_oversized_announcement_is_refused_before_reading_it():
    buf = framing.FrameBuffer(max_frame=1024)
    with pytest.raises(framing.FrameError, match="exceeds"):
        buf.feed(struct.pack(">I", 10**9))


def test_encode_refuses_nan_and_objects():
    with pytest.raises(ValueError):
        framing.encode({"r": float("nan")})
    with pytest.raises(TypeError):
        framing.encode({"o": object()})


def test_encoder_ignores_monkeypatched_json_and_builtins(monkeypatch):
    import builtins
    import json

    monkeypatch.setattr(json, "dumps", lambda *a, **k: "HACKED")
    frame = framing.encode({"ok": True})
    real = builtins.isinstance
    builtins.isinstance = lambda *a: True
    try:
        decoded = framing.decode(frame[4:])
    finally:
        builtins.isinstance = real
    assert frame[4:] == b'{"ok":true}'
    assert decoded == {"ok": True}
