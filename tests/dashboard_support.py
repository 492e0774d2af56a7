"""Small hand-checkable runs for the dashboard and audit tests (every number is chosen so the
expected statistics can be worked out by hand; see test_audit.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from factories import CODE

from spade_engine.events import (
    EnvironmentProposed,
    EnvironmentValidated,
    HintWritten,
    PolicyUpdated,
    RegretEstimated,
    RolloutCompleted,
    RunStarted,
    RunStopped,
    SqliteEventLog,
    ValidationCheck,
    make_envelope,
)
from spade_engine.events.envelope import Envelope
from spade_engine.events.store import DataDir

RUN_ID = "run-20260101-000000-a1b2c3"


def proposed(env_id: str, *, skill: str = "math", parents: list[str] | None = None, repair_of: str | None = None,
             attempt: int = 0, code: str = CODE) -> Envelope:
    return make_envelope(
        EnvironmentProposed(env_id=env_id, skill=skill, difficulty=0.5, code=code,
                            code_sha256=hashlib.sha256(code.encode()).hexdigest(), policy_version="v0",
                            parents=parents or [], repair_of=repair_of, attempt=attempt),
        run_id=RUN_ID, producer="test")


def validated(env_id: str, *, valid: bool = True, accepted: bool = True, error_kind: str | None = None,
              failed_check: str | None = None, novelty: float | None = 0.42, novel: bool | None = True,
              nearest: str | None = None) -> Envelope:
    checks = [ValidationCheck(name="parse", passed=error_kind != "syntax", detail="ast.parse", seconds=0.002)]
    if error_kind != "syntax":
        checks.append(ValidationCheck(name="solution_replay", passed=valid, detail="solution reaches reward 1.0", seconds=0.01))
    return make_envelope(
        EnvironmentValidated(env_id=env_id, valid=valid, accepted=accepted, error_kind=error_kind,
                             failed_check=failed_check, checks=checks, class_name="CountEnv" if valid else None,
                             contract="spade" if valid else None, novel=novel, novelty=novelty, nearest_env_id=nearest),
        run_id=RUN_ID, producer="test")


def scored(env_id: str, plain: list[float], hinted: list[float], reward: float, *, skill: str = "math") -> list[Envelope]:
    out = [make_envelope(HintWritten(env_id=env_id, hint="count carefully, answer in \\boxed{}", policy_version="v0"),
                         run_id=RUN_ID, producer="test")]
    for flag, rewards in ((False, plain), (True, hinted)):
        for i, r in enumerate(rewards):
            out.append(make_envelope(
                RolloutCompleted(env_id=env_id, play_id=f"{env_id}-{int(flag)}-{i}", hinted=flag, seed=i,
                                 policy_version="v0", episode_reward=r, terminated=True, index=i),
                run_id=RUN_ID, producer="test"))
    wp, wh = sum(plain) / len(plain), sum(hinted) / len(hinted)
    out.append(make_envelope(
        RegretEstimated(env_id=env_id, skill=skill, plain_rewards=plain, hinted_rewards=hinted, win_rate_plain=wp,
                        win_rate_hinted=wh, regret=max(0.0, wh - wp), designer_reward=reward),
        run_id=RUN_ID, producer="test"))
    return out


def audit_run() -> list[Envelope]:
    """Six environments (windows of 2 in this order):

    ======  =====  ========================  =========  ==========  ======  ======
    env     skill  verdict                   win plain  win hinted  regret  reward
    ======  =====  ========================  =========  ==========  ======  ======
    env-a   math   accepted                  0.5        1.0         0.5     0.9
    env-b   math   accepted                  0.25       1.0         0.75    0.3
    env-c   math   rejected (syntax/parse)
    env-d   math   accepted                  1.0        1.0         0.0     0.1
    env-e   math   rejected (duplicate)      (novelty 0.01, nearest env-a)
    env-f   logic  accepted, repairs env-c   0.5        1.0         0.5     0.8
    ======  =====  ========================  =========  ==========  ======  ======

    then PolicyUpdated v1 (loss 0.25) and RunStopped.
    """
    ev = [make_envelope(RunStarted(config={"seed": 0}, engine_version="test", seed=0), run_id=RUN_ID, producer="test")]
    ev += [proposed("env-a"), validated("env-a"), *scored("env-a", [1, 0], [1, 1], 0.9)]
    ev += [proposed("env-b"), validated("env-b"), *scored("env-b", [1, 0, 0, 0], [1, 1, 1, 1], 0.3)]
    ev += [proposed("env-c", code="class Broken(:\n"),
           validated("env-c", valid=False, accepted=False, error_kind="syntax", failed_check="parse", novelty=None, novel=None)]
    ev += [proposed("env-d"), validated("env-d"), *scored("env-d", [1, 1], [1, 1], 0.1)]
    ev += [proposed("env-e"), validated("env-e", accepted=False, novel=False, novelty=0.01, nearest="env-a")]
    ev += [proposed("env-f", skill="logic", parents=["env-a"], repair_of="env-c", attempt=1), validated("env-f"),
           *scored("env-f", [1, 0], [1, 1], 0.8, skill="logic")]
    ev.append(make_envelope(PolicyUpdated(version="v1", parent_version="v0", checkpoint=None, step=1,
                                          metrics={"loss": 0.25}), run_id=RUN_ID, producer="trainer"))
    ev.append(make_envelope(RunStopped(reason="completed"), run_id=RUN_ID, producer="test"))
    return ev


def write_run(data_dir: Path, events: list[Envelope], run_id: str = RUN_ID) -> Path:
    """Append ``events`` to ``run_id``'s SQLite log in ``data_dir``; return the log path."""
    path = DataDir(data_dir).log_path(run_id)
    log = SqliteEventLog(path, run_id)
    try:
        log.append(events)
    finally:
        log.close()
    return path


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """A real uvicorn server running ``app`` in a thread on a free loopback port."""

    def __init__(self, app):
        import threading

        import uvicorn

        self.app = app
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    timeout_graceful_shutdown=1, lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, name="uvicorn-test", daemon=True)

    def __enter__(self) -> "Served":
        import time

        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.app.state.live.hub.close()  # end open SSE streams first, as `spade-engine dashboard` does
        self.server.should_exit = True
        self.thread.join(timeout=15)
        assert not self.thread.is_alive(), "uvicorn did not stop"
