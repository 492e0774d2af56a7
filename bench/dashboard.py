"""Dashboard benchmark: initial page load on a 1M-event run, and append -> SSE lag at 1k events/s.

1. writes a synthetic run of ``--n`` events (default 1,000,000: environment chains of
   proposal, validation, hint, 4 plain + 4 hinted plays, regret; 4 skills; some rejections and
   repairs; a policy update every 500 environments) into a temporary data directory;
2. baseline: rebuilds the dashboard's projections from offset 0 (what a dashboard without
   incremental snapshots would have to do before its first full render) and times it;
3. starts `spade-engine dashboard` as a separate process, and times the first full page render
   on the API side: the page, its static files and every API call the page makes on load
   (summary, feed, series, rejections, policies, skills, the first page of environments);
4. appends events at ``--rate`` per second for ``--seconds`` while an SSE client measures the lag
   between an event's creation (``occurred_at``, taken just before the append) and its arrival.

Last line: JSON with ``initial_load_s_1m``, ``sse_lag_p99_ms`` (targets: < 2 s, < 500 ms), the
baseline ``replay_from_zero_s`` and the ratio against it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from spade_engine.textout import quiet_libraries  # noqa: E402

quiet_libraries()  # no tqdm or Hugging Face progress bars in the benchmark's output

from spade_engine.events import (  # noqa: E402
    EnvironmentProposed,
    EnvironmentValidated,
    HintWritten,
    PolicyUpdated,
    RegretEstimated,
    RolloutCompleted,
    RunStarted,
    SqliteEventLog,
    Turn,
    ValidationCheck,
    make_envelope,
)
from spade_engine.events.store import DataDir  # noqa: E402

RUN_ID = "run-20260101-000000-bench0"
SKILLS = ("arithmetic", "logic", "strings", "graphs")
CODE = '''class CountEnv:
    """Count the items and answer with \\\\boxed{n}."""
    def __init__(self):
        self.target = {n}
    def reset(self, seed=None):
        return "count to {n}", {{}}
    def step(self, action):
        ok = action.strip() == "\\\\boxed{{{n}}}"
        return "done", 1.0 if ok else 0.0, True, False, {{}}
    def solution(self):
        return ["\\\\boxed{{{n}}}"]
'''


def env_events(i: int, k: int = 4) -> list:
    """The chain of environment ``i``; about 1 in 8 is rejected, 1 in 16 repairs an earlier one."""
    env_id = f"env-{i:07d}"
    skill = SKILLS[i % len(SKILLS)]
    code = CODE.format(n=i % 97)
    rejected = i % 8 == 5
    repair_of = f"env-{i - 3:07d}" if i % 16 == 8 and i >= 3 else None
    out = [make_envelope(EnvironmentProposed(
        env_id=env_id, skill=skill, difficulty=(i % 10) / 10, code=code,
        code_sha256=hashlib.sha256(code.encode()).hexdigest(), policy_version=f"v{i // 500}",
        parents=[f"env-{i - 7:07d}"] if i >= 7 else [], repair_of=repair_of, attempt=1 if repair_of else 0,
    ), run_id=RUN_ID, producer="bench")]
    checks = [ValidationCheck(name=n, passed=True, detail="ok", seconds=0.001) for n in ("parse", "contract", "solution_replay")]
    if rejected:
        checks[2] = ValidationCheck(name="solution_replay", passed=False, detail="solution reward 0.0", seconds=0.01)
    out.append(make_envelope(EnvironmentValidated(
        env_id=env_id, valid=not rejected, accepted=not rejected, error_kind="unsolvable" if rejected else None,
        failed_check="solution_replay" if rejected else None, checks=checks, class_name="CountEnv", contract="spade",
        novel=True, novelty=0.1 + (i % 50) / 100, nearest_env_id=f"env-{max(0, i - 1):07d}",
    ), run_id=RUN_ID, producer="bench"))
    if rejected:
        return out
    out.append(make_envelope(HintWritten(env_id=env_id, hint="count, then answer in \\boxed{}", policy_version="v0"),
                             run_id=RUN_ID, producer="bench"))
    p_win = 0.2 + 0.6 * ((i * 7919) % 100) / 100
    plain, hinted = [], []
    for flag in (False, True):
        for j in range(k):
            won = ((i * 31 + j * 17) % 100) / 100 < (p_win + (0.25 if flag else 0.0))
            r = 1.0 if won else 0.0
            (hinted if flag else plain).append(r)
            out.append(make_envelope(RolloutCompleted(
                env_id=env_id, play_id=f"{env_id}-{int(flag)}-{j}", hinted=flag, seed=j, policy_version="v0",
                episode_reward=r, terminated=True, index=j,
                turns=[Turn(observation="count", action="\\boxed{3}", reward=r, terminated=True)],
            ), run_id=RUN_ID, producer="bench"))
    wp, wh = sum(plain) / k, sum(hinted) / k
    out.append(make_envelope(RegretEstimated(
        env_id=env_id, skill=skill, plain_rewards=plain, hinted_rewards=hinted, win_rate_plain=wp,
        win_rate_hinted=wh, regret=max(0.0, wh - wp), designer_reward=round(0.4 * min(1.0, max(0.0, wh - wp) / 0.15), 6),
    ), run_id=RUN_ID, producer="bench"))
    if i % 500 == 499:
        out.append(make_envelope(PolicyUpdated(version=f"v{i // 500 + 1}", parent_version=f"v{i // 500}", checkpoint=None,
                                               step=i // 500 + 1, metrics={"loss": 1.0 / (i + 1)}),
                                 run_id=RUN_ID, producer="bench"))
    return out


def write_run(data: Path, n: int) -> tuple[int, int]:
    log = SqliteEventLog(DataDir(data).log_path(RUN_ID), RUN_ID)
    batch = [make_envelope(RunStarted(config={"seed": 0}, engine_version="bench", seed=0), run_id=RUN_ID, producer="bench")]
    total, i = 0, 0
    while total + len(batch) < n:
        batch.extend(env_events(i))
        i += 1
        if len(batch) >= 20_000:
            total += log.append(batch)
            batch = []
    batch = batch[: n - total]
    total += log.append(batch)
    log.close()
    return total, i


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="events in the synthetic run")
    ap.add_argument("--rate", type=float, default=1000.0, help="append rate (events/s) for the SSE lag")
    ap.add_argument("--seconds", type=float, default=15.0, help="how long to append")
    ap.add_argument("--keep", action="store_true", help="keep the temporary data directory")
    ap.add_argument("--reuse", type=Path, help="a directory kept with --keep: skip writing the run and the baseline")
    args = ap.parse_args()

    tmp = args.reuse or Path(tempfile.mkdtemp(prefix="spade-bench-dashboard-"))
    data = tmp / "data"
    proc = None
    replay_s = float("nan")
    try:
        if args.reuse:
            log = SqliteEventLog(DataDir(data).log_path(RUN_ID), RUN_ID)
            n = log.end_cursor()[0]
            envs = 10_000_000 + n  # fresh env ids for the live appends
            log.close()
            print(f"reusing {n} events in {data}", flush=True)
        else:
            t = time.perf_counter()
            n, envs = write_run(data, args.n)
            print(f"wrote {n} events ({envs} environments) in {time.perf_counter() - t:.1f}s", flush=True)

        if not args.reuse:
            # baseline: rebuild the dashboard's projections from offset 0 (its snapshot for later)
            from spade_engine.dashboard.state import LiveState
            from spade_engine.dashboard.views import RunView

            log = SqliteEventLog(DataDir(data).log_path(RUN_ID), RUN_ID)
            t = time.perf_counter()
            view = RunView(log, DataDir(data).run_dir(RUN_ID) / "dashboard")
            live = LiveState(log, view, poll_interval_s=0.0)
            while live.step():
                pass
            view.flush(live.cursor)
            replay_s = time.perf_counter() - t
            view.close()
            log.close()
            print(f"baseline: projections rebuilt from offset 0 in {replay_s:.1f}s ({n / replay_s:,.0f} events/s)", flush=True)

        port = free_port()
        env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
        t_start = time.perf_counter()
        errors = tempfile.TemporaryFile()  # not a pipe: an undrained pipe would block the server
        proc = subprocess.Popen(
            [sys.executable, "-m", "spade_engine.cli", "dashboard", RUN_ID, "--data-dir", str(data), "--port", str(port)],
            env=env, cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=errors,
        )
        base = f"http://127.0.0.1:{port}/"
        client = httpx.Client(base_url=base, timeout=60)
        while True:
            try:
                client.get("static/app.css")
                break
            except httpx.TransportError:
                if proc.poll() is not None:
                    errors.seek(0)
                    raise SystemExit(f"dashboard exited: {errors.read().decode()[-2000:]}")
                time.sleep(0.05)
        start_s = time.perf_counter() - t_start
        print(f"dashboard process ready in {start_s:.2f}s", flush=True)

        # first full page render, API side: the page, its files, every call the page makes on load
        t = time.perf_counter()
        sizes = {}
        for path in ("", "static/app.css", "static/highlight.css", "static/plotly.min.js", "static/app.js",
                     "api/summary", "api/feed", "api/series", "api/rejections", "api/policies", "api/skills",
                     "api/envs?limit=50&offset=0&sort=offset"):
            r = client.get(path)
            r.raise_for_status()
            sizes[path or "/"] = len(r.content)
        load_s = time.perf_counter() - t
        summary = client.get("api/summary").json()
        first_env = client.get("api/envs?limit=1").json()["rows"][0]["env_id"]
        t = time.perf_counter()
        client.get(f"api/envs/{first_env}").raise_for_status()
        env_detail_ms = (time.perf_counter() - t) * 1000
        print(f"initial load: {load_s:.3f}s for {len(sizes)} requests, {sum(sizes.values()) / 1e6:.1f} MB "
              f"(applied {summary['applied']} of {n} events, caught_up={summary['caught_up']}); "
              f"environment detail {env_detail_ms:.0f} ms", flush=True)

        # SSE lag at --rate events/s
        lags: list[float] = []
        received = threading.Event()
        stop = threading.Event()
        ready = threading.Event()
        expected = int(args.rate * args.seconds)

        def listen() -> None:
            with httpx.Client(base_url=base, timeout=None) as c, c.stream("GET", "api/stream") as resp:
                event = None
                for line in resp.iter_lines():
                    now = time.time()
                    if line.startswith("event: "):
                        event = line[7:]
                        if event == "hello":
                            ready.set()
                    elif line.startswith("data: ") and event == "events":
                        for item in json.loads(line[6:]):
                            if item["producer"] == "bench-live":
                                t0 = datetime.fromisoformat(item["occurred_at"].replace("Z", "+00:00")).timestamp()
                                lags.append((now - t0) * 1000)
                        if len(lags) >= expected:
                            received.set()
                    if stop.is_set():
                        return

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        ready.wait(30)
        log = SqliteEventLog(DataDir(data).log_path(RUN_ID), RUN_ID)
        tick = 0.01
        per_tick = max(1, int(args.rate * tick))
        sent, i = 0, envs
        pending: list = []
        t0 = time.perf_counter()
        while sent < expected:
            if len(pending) < per_tick:
                pending.extend(env_events(i))
                i += 1
            due = int((time.perf_counter() - t0) * args.rate)
            if due > sent:
                m = min(due - sent, expected - sent, len(pending))
                batch = [make_envelope(_payload(e), run_id=RUN_ID, producer="bench-live") for e in pending[:m]]
                del pending[:m]
                log.append(batch)
                sent += m
            else:
                time.sleep(tick / 2)
        append_s = time.perf_counter() - t0
        log.close()
        received.wait(30)
        stop.set()
        lags.sort()

        def pct(q: float) -> float:
            return round(lags[min(len(lags) - 1, int(q * len(lags)))], 1) if lags else float("nan")

        print(f"SSE: appended {sent} events in {append_s:.1f}s ({sent / append_s:,.0f}/s); received {len(lags)}; "
              f"lag p50 {pct(0.5)} ms, p99 {pct(0.99)} ms, max {round(lags[-1], 1) if lags else 'nan'} ms", flush=True)
        result = {
            "events": n,
            "initial_load_s_1m": round(load_s, 3),
            "sse_lag_p99_ms": pct(0.99),
            "sse_lag_p50_ms": pct(0.5),
            "sse_events_received": len(lags),
            "sse_events_sent": sent,
            "append_rate_per_s": round(sent / append_s, 1),
            "dashboard_ready_s": round(start_s, 2),
            "env_detail_ms": round(env_detail_ms, 1),
            "baseline_replay_from_zero_s": round(replay_s, 2),
            "initial_load_speedup_vs_replay": round(replay_s / load_s, 1) if replay_s == replay_s else None,
            "targets_met": load_s < 2.0 and pct(0.99) < 500,
        }
        print(json.dumps(result))
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(90)  # it writes its final snapshots before exiting
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if not args.keep and not args.reuse:
            shutil.rmtree(tmp, ignore_errors=True)


def _payload(envelope):
    """A fresh typed payload for re-enveloping (new id and time, just before the append)."""
    return envelope.event()


if __name__ == "__main__":
    main()
