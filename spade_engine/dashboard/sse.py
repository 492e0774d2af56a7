"""Server-sent events: the hub that fans messages out from the follower thread to every
connected browser, and the SSE wire format.

The follower thread calls :meth:`Hub.publish` (thread-safe); each client is an asyncio queue on
the server's event loop, filled with ``loop.call_soon_threadsafe``. A message is encoded once for
all clients. A client that falls ``max_queue`` messages behind is sent ``resync`` (it reloads its
state over HTTP) instead of being allowed to grow memory without bound.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

__all__ = ["Hub", "Subscription", "format_sse"]

_CLOSE = object()


def format_sse(event: str, data: Any) -> bytes:
    """One SSE message: ``event: <name>`` and the JSON ``data`` on a single line."""
    body = json.dumps(data, separators=(",", ":"), default=str)
    return f"event: {event}\ndata: {body}\n\n".encode()


class Subscription:
    """One connected client: a bounded queue of encoded messages on the server's loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, max_queue: int):
        self.loop = loop
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.max_queue = max_queue
        self.overflowed = False

    def _put(self, item: Any) -> None:  # runs on the loop
        if item is _CLOSE:
            self.queue.put_nowait(item)
            return
        if self.overflowed:
            return
        if self.queue.qsize() >= self.max_queue:
            self.overflowed = True
            while not self.queue.empty():
                self.queue.get_nowait()
            self.queue.put_nowait(format_sse("resync", {}))
            return
        self.queue.put_nowait(item)

    async def messages(self, *, keepalive_s: float = 15.0, is_closed: Callable[[], Any] | None = None) -> AsyncIterator[bytes]:
        """Encoded messages until the hub closes; a comment line every ``keepalive_s`` when idle."""
        while True:
            try:
                item = await asyncio.wait_for(self.queue.get(), timeout=keepalive_s)
            except asyncio.TimeoutError:
                if is_closed is not None and await is_closed():
                    return
                yield b": keepalive\n\n"
                continue
            if item is _CLOSE:
                return
            if self.overflowed and self.queue.empty():
                self.overflowed = False
            yield item


class Hub:
    """Fan-out of SSE messages from any thread to every subscribed client."""

    def __init__(self, *, max_queue: int = 2000):
        self.max_queue = max_queue
        self._subs: set[Subscription] = set()
        self._lock = threading.Lock()
        self._closed = False

    def subscribe(self, loop: asyncio.AbstractEventLoop | None = None) -> Subscription:
        sub = Subscription(loop or asyncio.get_running_loop(), self.max_queue)
        with self._lock:
            if self._closed:
                sub.queue.put_nowait(_CLOSE)
            else:
                self._subs.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            self._subs.discard(sub)

    @property
    def clients(self) -> int:
        with self._lock:
            return len(self._subs)

    def publish(self, event: str, data: Any) -> None:
        """Send ``data`` as SSE ``event`` to every client (callable from any thread)."""
        with self._lock:
            subs = list(self._subs)
        if not subs:
            return
        msg = format_sse(event, data)
        for sub in subs:
            try:
                sub.loop.call_soon_threadsafe(sub._put, msg)
            except RuntimeError:  # the loop is closed: the client is gone
                self.unsubscribe(sub)

    def close(self) -> None:
        """End every client's stream (server shutdown)."""
        with self._lock:
            subs, self._subs = list(self._subs), set()
            self._closed = True
        for sub in subs:
            try:
                sub.loop.call_soon_threadsafe(sub._put, _CLOSE)
            except RuntimeError:
                pass
