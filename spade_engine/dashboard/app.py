"""The dashboard web app (FastAPI): a static page, a JSON API over the run's projections and a
server-sent-event stream of what changes.

``create_app(data_dir, run_id, token=None)`` builds the app for one run; its lifespan starts the
:class:`~spade_engine.dashboard.state.LiveState` follower and stops it on shutdown. With a
``token`` every request (page, API, static files and the SSE stream) must carry it, as
``Authorization: Bearer <token>``, ``X-Spade-Token: <token>`` or ``?token=<token>``; the page
passes it on to the requests it makes.

Every request must also name an allowed host in its Host header (loopback names by default, see
:func:`~spade_engine.dashboard.security.allowed_hosts`; others get 400), every response carries the
headers of :mod:`~spade_engine.dashboard.security` (CSP without inline scripts, no framing, no
sniffing, no referrer), and JSON responses escape U+2028/U+2029/U+0085.

The page's routes: ``/`` (the dashboard; ``/#/env/<env_id>`` opens the environment browser on one
environment) and ``/env/<env_id>`` (a redirect there).
"""

from __future__ import annotations

import asyncio
import gc
import hmac
import html
import json
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from collections.abc import Sequence
from typing import Any, Optional
from urllib.parse import parse_qs, quote

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from ..archive.difficulty import DEFAULT_WINDOW
from ..events.store import DataDir, open_event_log, resolve_run
from .curves import evaluation_curves, training_curves
from .security import SafeJSONResponse, SecurityHeadersMiddleware, allowed_hosts as default_allowed_hosts
from .sse import Hub, format_sse
from .state import LiveState
from .views import RunView, highlight_css

__all__ = ["create_app", "plotly_js_path", "TokenMiddleware", "STATIC_DIR"]

STATIC_DIR = Path(__file__).resolve().parent / "static"


def plotly_js_path() -> Path:
    """plotly.min.js as shipped inside the ``plotly`` Python package (served offline)."""
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


def _token_of(scope: dict[str, Any]) -> str | None:
    for name, value in scope.get("headers") or []:
        if name == b"authorization":
            text = value.decode("latin-1")
            if text.lower().startswith("bearer "):
                return text[7:].strip()
        elif name == b"x-spade-token":
            return value.decode("latin-1").strip()
    qs = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    vals = qs.get("token")
    return vals[0] if vals else None


class TokenMiddleware:
    """Refuse (401) every HTTP request that does not carry the dashboard token."""

    def __init__(self, app: Any, token: str):
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = _token_of(scope)
            if given is None or not hmac.compare_digest(given.encode(), self.token):
                body = json.dumps({"detail": "missing or wrong dashboard token"}).encode()
                await send({
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b"Bearer")],
                })
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _open_run_state(
    data_dir: str | Path, run_id: str | None, *, backend: str, bootstrap: str | None, state_dir: str | Path | None,
    poll_interval_s: float, window: int,
) -> tuple[str, Any, RunView, Hub, LiveState]:
    """Open what the dashboard serves: the run's log (read-only), its projections and the live state."""
    root = Path(data_dir)
    run = resolve_run(run_id, data_dir=root, backend=backend, bootstrap=bootstrap)
    log = open_event_log(run, data_dir=root, backend=backend, bootstrap=bootstrap, read_only=True)
    sdir = Path(state_dir) if state_dir else DataDir(root).run_dir(run) / "dashboard"
    view = RunView(log, sdir, window=window)
    hub = Hub()
    live = LiveState(log, view, hub, poll_interval_s=poll_interval_s, window=window)
    return run, log, view, hub, live


def create_app(
    data_dir: str | Path,
    run_id: str | None,
    token: str | None = None,
    *,
    backend: str = "sqlite",
    bootstrap: str | None = None,
    state_dir: str | Path | None = None,
    poll_interval_s: float = 0.02,
    window: int = DEFAULT_WINDOW,
    server_process: bool = False,
    allowed_hosts: Sequence[str] | None = None,
) -> FastAPI:
    """The dashboard app for ``run_id`` (``None``: the latest run) in ``data_dir``.

    ``window``: environments per rolling mean (and per window of the windowed series) unless a
    request asks for another. ``allowed_hosts``: the Host-header allow list (default: loopback
    names only). The projections' snapshots live in ``state_dir`` (default ``<run dir>/dashboard``).
    ``server_process``: this process only serves the dashboard, so the app may tune the
    process-wide garbage collector and thread switch interval for a low SSE lag.
    """
    if window < 1:
        raise ValueError("window must be >= 1")
    run, log, view, hub, live = _open_run_state(data_dir, run_id, backend=backend, bootstrap=bootstrap,
                                                state_dir=state_dir, poll_interval_s=poll_interval_s, window=window)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        await asyncio.to_thread(live.series_rows)  # the charts' rows, ready for the first page
        await asyncio.to_thread(live.curves)
        if server_process:
            # Snapshots of a big run are millions of long-lived objects: move them out of the
            # garbage collector's sight, so its full collections (which hold the GIL for hundreds
            # of milliseconds) do not stall the tail thread; switch threads every 1 ms so it
            # never queues long behind the projector for the GIL.
            gc.collect()
            gc.freeze()
            sys.setswitchinterval(0.001)
        live.start()
        try:
            yield
        finally:
            await asyncio.to_thread(live.stop)
            view.close()
            log.close()

    app = FastAPI(title=f"spade-engine dashboard: {run}", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None, default_response_class=SafeJSONResponse)
    app.state.live = live
    app.state.view = view
    app.state.run_id = run

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> Response:
        return SafeJSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, exc: RequestValidationError) -> Response:
        return SafeJSONResponse({"detail": jsonable_encoder(exc.errors())}, status_code=422)

    _page_routes(app, run=run, token=token, window=window)
    _api_routes(app, run=run, live=live, view=view, hub=hub)
    _secure(app, token=token, allowed_hosts=allowed_hosts)
    return app


def _page_routes(app: FastAPI, *, run: str, token: str | None, window: int) -> None:
    """The page, shareable environment addresses and static files."""
    index_template = (STATIC_DIR / "index.html").read_text()
    page_qs = f"?token={quote(token)}" if token else ""

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request) -> HTMLResponse:
        page = (index_template.replace("__QS__", html.escape(page_qs)).replace("__RUN__", html.escape(run))
                .replace("__WINDOW__", str(int(window))))
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    @app.get("/env/{env_id:path}")
    def env_page(env_id: str) -> RedirectResponse:
        """A shareable address of one environment: the dashboard opened on it."""
        # relative (one level up per path segment), so it holds behind a proxy that mounts the
        # dashboard under a prefix
        up = "../" * (1 + env_id.count("/"))
        return RedirectResponse(up + page_qs + "#/env/" + quote(env_id, safe=""), status_code=307)

    @app.get("/static/plotly.min.js")
    def plotly_js() -> FileResponse:
        return FileResponse(plotly_js_path(), media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})

    @app.get("/static/highlight.css")
    def hl_css() -> Response:
        return Response(highlight_css(), media_type="text/css")

    @app.get("/static/{name}")
    def static(name: str) -> FileResponse:
        path = STATIC_DIR / name
        if name not in {p.name for p in STATIC_DIR.iterdir()} or name == "index.html":
            raise HTTPException(404, f"no static file {name!r}")
        media = {".js": "text/javascript", ".css": "text/css"}.get(path.suffix, "application/octet-stream")
        return FileResponse(path, media_type=media, headers={"Cache-Control": "no-cache"})


def _api_routes(app: FastAPI, *, run: str, live: LiveState, view: RunView, hub: Hub) -> None:
    """The JSON API the page reads, and the server-sent event stream."""

    def locked(fn, *args, **kwargs):
        with live.lock:
            return fn(*args, **kwargs)

    @app.get("/api/summary")
    def summary() -> dict[str, Any]:
        return live.summary()

    @app.get("/api/feed")
    def feed(after: Optional[int] = None) -> list[dict[str, Any]]:
        return live.recent(after)

    @app.get("/api/series")
    def series(window: Optional[int] = Query(None, ge=1, le=1_000_000)) -> dict[str, Any]:
        """Per-environment curves with rolling means of ``window`` environments (x: environment
        index), the frontier band, and the windowed rows (``rows``, windows of ``rows_window``)."""
        rows = live.series_rows()
        out = view.series(rows, live.window_size())
        out["rows_window"] = out.pop("window")
        out.update(live.curves(window), x="environment index")
        return out

    @app.get("/api/training")
    def training(window: Optional[int] = Query(None, ge=1, le=1_000_000)) -> dict[str, Any]:
        """Training curves from PolicyUpdated metrics (x: the policy version's step)."""
        return training_curves(view.policies(), window or live.window) | {"x_label": "policy version (step)"}

    @app.get("/api/evaluations")
    def evaluations() -> dict[str, Any]:
        """Held-out accuracy per task (EvaluationCompleted) against policy version (x: its step)."""
        rows, pols = locked(lambda: (view.evaluation_rows(), view.policies()))
        return evaluation_curves(rows, pols)

    @app.get("/api/rejections")
    def rejections() -> list[dict[str, Any]]:
        return view.rejections()

    @app.get("/api/skills")
    def skills() -> list[str]:
        return view.skills()

    @app.get("/api/policies")
    def policies() -> list[dict[str, Any]]:
        return view.policies()

    @app.get("/api/envs")
    def envs(
        verdict: Optional[str] = None,
        skill: Optional[str] = None,
        q: Optional[str] = None,
        sort: str = "offset",
        desc: bool = False,
        limit: int = Query(50, ge=1, le=500),
        offset: int = Query(0, ge=0),
    ) -> dict[str, Any]:
        return view.envs(verdict=verdict, skill=skill, q=q, sort=sort, desc=desc, limit=limit, offset=offset)

    @app.get("/api/envs/{env_id:path}")  # an env id may hold "/"
    def env(env_id: str) -> dict[str, Any]:
        found = locked(view.env, env_id)
        if found is None:
            raise HTTPException(404, f"no environment {env_id!r} in run {run}")
        return found

    @app.get("/api/stream")
    async def stream(request: Request) -> StreamingResponse:
        sub = hub.subscribe()
        hello = await asyncio.to_thread(live.summary)

        async def gen():
            try:
                yield b"retry: 1000\n\n"
                yield format_sse("hello", hello)
                async for msg in sub.messages(is_closed=request.is_disconnected):
                    yield msg
            finally:
                hub.unsubscribe(sub)

        return StreamingResponse(gen(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _secure(app: FastAPI, *, token: str | None, allowed_hosts: Sequence[str] | None) -> None:
    """The token check, the Host allow list and the security headers."""
    if token:
        app.add_middleware(TokenMiddleware, token=token)
    # added last = runs first: a bad Host is refused before the token is looked at, and every
    # response, refusals included, carries the security headers
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts or default_allowed_hosts()),
                       www_redirect=False)
    app.add_middleware(SecurityHeadersMiddleware)
