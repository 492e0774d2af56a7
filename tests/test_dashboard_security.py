"""Dashboard hardening over real HTTP (httpx against uvicorn): the Host-header allow list (DNS
rebinding), the security headers on every kind of response, a page without inline scripts, and
JSON without raw Unicode line separators (U+2028/U+2029/U+0085), in API responses, errors and the
SSE stream."""

from __future__ import annotations

import json
import re
import socket
import time
from html.parser import HTMLParser

import httpx
import pytest
from dashboard_support import RUN_ID, Served, audit_run, proposed, scored, started, validated, write_run
from typer.testing import CliRunner

from spade_engine.cli import app as cli_app
from spade_engine.dashboard.app import create_app
from spade_engine.dashboard.security import allowed_hosts, escape_line_separators, js_safe_json
from spade_engine.events import HintWritten, SqliteEventLog, make_envelope
from spade_engine.events.store import DataDir

SEPARATORS = "\u2028\u2029\u0085"
RAW = (b"\xe2\x80\xa8", b"\xe2\x80\xa9", b"\xc2\x85")  # their UTF-8


@pytest.fixture()
def data_dir(tmp_path):
    write_run(tmp_path / "data", audit_run())
    return tmp_path / "data"


def _wait(fn, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_host_header_allow_list(data_dir):
    with Served(create_app(data_dir, None)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        port = srv.port
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "LOCALHOST", "127.0.0.1"):
            assert c.get("api/summary", headers={"Host": host}).status_code == 200, host
        # a rebinding page's requests name the attacker's host: refused, whatever the path
        for host in (f"attacker.example:{port}", "attacker.example", "127.0.0.1.attacker.example", "[::2]", "0.0.0.0",
                     "localhost.", "not a host"):
            for path in ("", "api/summary", "api/envs/env-a", "static/app.js", "api/stream", "env/env-a"):
                r = c.get(path, headers={"Host": host})
                assert r.status_code == 400, (host, path, r.status_code)
                assert "env-a" not in r.text and "run-" not in r.text
    extra = allowed_hosts("127.0.0.1", ["dash.example", "*.lab.example"])
    with Served(create_app(data_dir, None, allowed_hosts=extra)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        assert c.get("api/summary", headers={"Host": "dash.example"}).status_code == 200
        assert c.get("api/summary", headers={"Host": "gpu3.lab.example:8765"}).status_code == 200
        assert c.get("api/summary", headers={"Host": "lab.example.evil"}).status_code == 400
        assert c.get("api/summary").status_code == 200  # 127.0.0.1 still


def test_host_check_comes_before_the_token(data_dir):
    with Served(create_app(data_dir, None, token="tok")) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        assert c.get("api/summary", params={"token": "tok"}, headers={"Host": "evil.example"}).status_code == 400
        assert c.get("api/summary", headers={"Host": "localhost"}).status_code == 401
        assert c.get("api/summary", params={"token": "tok"}, headers={"Host": "localhost"}).status_code == 200


def test_allowed_hosts_defaults_and_cli_option(data_dir):
    assert allowed_hosts() == ["127.0.0.1", "localhost", "[::1]"]
    assert allowed_hosts("192.168.1.4", ["a.example, *.b.example", "A.example"]) == [
        "127.0.0.1", "localhost", "[::1]", "192.168.1.4", "a.example", "*.b.example"]
    assert allowed_hosts("fe80::1")[-1] == "[fe80::1]"
    wildcard = allowed_hosts("0.0.0.0")
    assert socket.gethostname().lower() in wildcard and "0.0.0.0" not in wildcard
    runner = CliRunner()
    res = runner.invoke(cli_app, ["dashboard", "--data-dir", str(data_dir), "--allow-host", "a*.example"])
    assert res.exit_code == 2 and "--allow-host" in res.output and "Traceback" not in res.output
    res = runner.invoke(cli_app, ["dashboard", "--data-dir", str(data_dir), "--window", "0"])
    assert res.exit_code == 2 and "--window" in res.output and "Traceback" not in res.output


def _check_headers(r: httpx.Response, what: str) -> None:
    csp = r.headers.get("content-security-policy", "")
    directives = {d.split()[0]: d.split()[1:] for d in (p.strip() for p in csp.split(";")) if d}
    assert directives.get("script-src") == ["'self'"], (what, csp)  # no inline scripts, no eval
    assert directives.get("default-src") == ["'none'"] and directives.get("frame-ancestors") == ["'none'"], what
    assert directives.get("object-src") is None or directives["object-src"] == ["'none'"]
    assert directives.get("base-uri") == ["'none'"], what
    assert r.headers.get("x-frame-options") == "DENY", what
    assert r.headers.get("x-content-type-options") == "nosniff", what
    assert r.headers.get("referrer-policy") == "no-referrer", what


def test_security_headers_on_every_response(data_dir):
    with Served(create_app(data_dir, None, token="tok")) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        auth = {"token": "tok"}
        for path in ("", "api/summary", "api/series", "api/training", "api/envs/env-a", "static/app.js", "static/app.css",
                     "static/plotly.min.js", "static/highlight.css", "api/envs/nope", "static/nope.js"):
            r = c.get(path, params=auth)
            assert r.status_code in (200, 404), path
            _check_headers(r, path)
        _check_headers(c.get("env/env-a", params=auth, follow_redirects=False), "redirect")
        _check_headers(c.get("api/series", params={**auth, "window": "0"}), "422")
        _check_headers(c.get("api/summary"), "401")
        _check_headers(c.get("api/summary", params=auth, headers={"Host": "evil.example"}), "400")
        with c.stream("GET", "api/stream", params=auth) as r:
            assert r.status_code == 200
            _check_headers(r, "sse")
        assert c.get("static/app.js", params=auth).headers["content-type"].startswith("text/javascript")


class _Scripts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts: list[tuple[dict, str]] = []
        self.handlers: list[str] = []
        self._in: dict | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.handlers += [k for k in a if k.startswith("on")]
        self.handlers += [k for k, v in a.items() if (v or "").strip().lower().startswith("javascript:")]
        if tag == "script":
            self._in = a
            self.scripts.append((a, ""))

    def handle_data(self, data):
        if self._in is not None:
            a, text = self.scripts[-1]
            self.scripts[-1] = (a, text + data)

    def handle_endtag(self, tag):
        if tag == "script":
            self._in = None


def test_page_has_no_inline_script_and_every_script_is_a_static_file(data_dir):
    with Served(create_app(data_dir, None)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        page = c.get("").text
        parser = _Scripts()
        parser.feed(page)
        assert [a.get("src") for a, _ in parser.scripts] == ["static/plotly.min.js", "static/app.js"]
        assert all(not text.strip() for _, text in parser.scripts) and not parser.handlers
        js = c.get("static/app.js").text
        assert ".innerHTML" in js and len(re.findall(r"\.innerHTML\s*=", js)) == 1  # only pygments' escaped code
        assert "code.innerHTML = e.code_html" in js and "insertAdjacentHTML" not in js and "eval(" not in js


def _hostile_run(data_dir):
    text = f"line{SEPARATORS}break"
    ev = [started(), proposed("env-x"), validated("env-x"), *scored("env-x", [1, 0], [1, 1], 0.5)]
    ev[3] = make_envelope(HintWritten(env_id="env-x", hint=text, policy_version="v0"), run_id=RUN_ID, producer="test")
    write_run(data_dir, ev)
    return text


def _no_raw_separators(body: bytes, what: str) -> None:
    for raw in RAW:
        assert raw not in body, (what, raw)


def test_json_escapes_unicode_line_separators(tmp_path):
    data_dir = tmp_path / "data"
    text = _hostile_run(data_dir)
    with Served(create_app(data_dir, None)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        assert _wait(lambda: c.get("api/summary").json()["verdicts"].get("accepted") == 1)
        r = c.get("api/envs/env-x")
        _no_raw_separators(r.content, "env")
        assert r.content.count(b"\\u2028") >= 1 and b"\\u0085" in r.content
        assert r.json()["hint"] == text  # the same value once decoded
        feed = c.get("api/feed")
        _no_raw_separators(feed.content, "feed")
        assert any("line" in (i["summary"] or "") and "break" in i["summary"] for i in feed.json() if i["type"] == "HintWritten")
        # the value split on every line break a consumer might use is still one JSON document
        assert len(r.content.decode().splitlines()) == 1 and len(feed.content.decode().splitlines()) == 1
        missing = c.get("api/envs/" + "a\u2028b")
        assert missing.status_code == 404
        _no_raw_separators(missing.content, "404")
        bad = c.get("api/series", params={"window": "1\u20292"})
        assert bad.status_code == 422
        _no_raw_separators(bad.content, "422")
        # the SSE stream: an event appended now reaches the stream without raw separators
        with c.stream("GET", "api/stream") as s:
            lines = s.iter_raw()
            log = SqliteEventLog(DataDir(data_dir).log_path(RUN_ID), RUN_ID)
            log.append([make_envelope(HintWritten(env_id="env-x", hint=f"again{SEPARATORS}", policy_version="v0"),
                                      run_id=RUN_ID, producer="test")])
            log.close()
            buf = b""
            for chunk in lines:
                buf += chunk
                if b"again" in buf and buf.endswith(b"\n\n"):
                    break
            _no_raw_separators(buf, "sse")
            data = [json.loads(line[6:]) for line in buf.decode().split("\n") if line.startswith("data: [")]
            assert any("again" in (i["summary"] or "") for items in data for i in items)


def test_js_safe_json_helpers():
    assert escape_line_separators('"a\u2028b\u2029c\u0085d"') == '"a\\u2028b\\u2029c\\u0085d"'
    body = js_safe_json({"k": f"x{SEPARATORS}y", "é": 1})
    _no_raw_separators(body, "helper")
    assert json.loads(body) == {"k": f"x{SEPARATORS}y", "é": 1} and "é".encode() in body  # other text stays UTF-8
