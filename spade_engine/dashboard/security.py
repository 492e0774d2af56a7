"""What the dashboard and the audit do against hostile pages and hostile text.

* :func:`allowed_hosts`: the Host-header allow list (checked by Starlette's
  ``TrustedHostMiddleware``), so a page on another site cannot reach a loopback dashboard
  through DNS rebinding: loopback names, the bound address, and any host asked for.
* :class:`SecurityHeadersMiddleware`: a Content-Security-Policy without inline scripts,
  ``X-Frame-Options: DENY``, ``X-Content-Type-Options: nosniff``, ``Referrer-Policy:
  no-referrer`` (the token may be in the URL) and same-origin isolation, on every response
  (the 400 and 401 refusals included).
* :class:`SafeJSONResponse` / :func:`js_safe_json`: JSON with U+2028, U+2029 and U+0085 written
  as ``\\u`` escapes, so a consumer that splits on Unicode line breaks sees one document per
  response.
* :func:`spreadsheet_safe`: a text cell of a CSV file that a spreadsheet would read as a formula
  (it begins with ``= + - @``, a tab or a carriage return) gets a leading ``'``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from fastapi.responses import JSONResponse

__all__ = ["LOOPBACK_HOSTS", "allowed_hosts", "host_literal", "SECURITY_HEADERS", "CSP", "SecurityHeadersMiddleware",
           "SafeJSONResponse", "js_safe_json", "escape_line_separators", "spreadsheet_safe", "WILDCARD_BINDS"]

#: Host header values (without port) a loopback dashboard always answers
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "[::]"})

CSP = "; ".join((
    "default-src 'none'",
    "script-src 'self'",
    # plotly.js adds its own <style> element and sets style attributes while drawing
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
))

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


def host_literal(host: str) -> str:
    """``host`` as it appears in a Host header: IPv6 addresses in brackets, lower case."""
    h = host.strip().lower()
    if ":" in h and not h.startswith("["):
        return f"[{h}]"
    return h


def allowed_hosts(bind: str | None = None, extra: Iterable[str] = ()) -> list[str]:
    """The Host-header allow list: loopback names, ``bind`` (unless it is a wildcard address; then
    this machine's host names) and ``extra`` (``*.example.org`` patterns and ``*`` allowed)."""
    out = list(LOOPBACK_HOSTS)
    names: list[str] = []
    if bind is not None and bind.strip() in WILDCARD_BINDS:
        import socket

        names += [socket.gethostname(), socket.getfqdn()]
    elif bind:
        names.append(bind)
    for item in extra:
        names += [p for p in (s.strip() for s in item.split(",")) if p]
    for name in names:
        lit = host_literal(name)
        if lit and lit not in out:
            out.append(lit)
    return out


class SecurityHeadersMiddleware:
    """Add :data:`SECURITY_HEADERS` to every HTTP response (those already set are kept)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                have = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in SECURITY_HEADERS if k not in have]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


_SEPARATORS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"}


def escape_line_separators(text: str) -> str:
    """Write U+2028, U+2029 and U+0085 in JSON text as ``\\u`` escapes (same JSON value)."""
    if not any(c in text for c in _SEPARATORS):
        return text
    for c, e in _SEPARATORS.items():
        text = text.replace(c, e)
    return text


def js_safe_json(data: Any) -> bytes:
    """``data`` as compact UTF-8 JSON without raw Unicode line separators."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=str)
    return escape_line_separators(text).encode("utf-8")


class SafeJSONResponse(JSONResponse):
    """FastAPI's JSON response, with Unicode line separators escaped."""

    def render(self, content: Any) -> bytes:
        return js_safe_json(content)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str) -> str:
    """A CSV text cell that cannot start a formula: ``'`` before a leading ``= + - @``, tab or
    carriage return (the OWASP rule). Numbers are written by the caller and never pass here."""
    return "'" + text if text.startswith(_FORMULA_START) else text
