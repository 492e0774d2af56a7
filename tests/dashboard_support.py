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


def audit_run(config: dict | None = None) -> list[Envelope]:
    """Six environments (windows of 2 in this order; environment index 0-5):

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

    then PolicyUpdated v1 (loss 0.25) and RunStopped. ``config``: the RunStarted config.
    """
    ev = [started(config)]
    ev += six_environments()
    ev.append(make_envelope(PolicyUpdated(version="v1", parent_version="v0", checkpoint=None, step=1,
                                          metrics={"loss": 0.25}), run_id=RUN_ID, producer="trainer"))
    ev.append(make_envelope(RunStopped(reason="completed"), run_id=RUN_ID, producer="test"))
    return ev


def started(config: dict | None = None) -> Envelope:
    return make_envelope(RunStarted(config=config or {"seed": 0}, engine_version="test", seed=0), run_id=RUN_ID,
                         producer="test")


def six_environments() -> list[Envelope]:
    """The environments of :func:`audit_run`."""
    ev: list[Envelope] = []
    ev += [proposed("env-a"), validated("env-a"), *scored("env-a", [1, 0], [1, 1], 0.9)]
    ev += [proposed("env-b"), validated("env-b"), *scored("env-b", [1, 0, 0, 0], [1, 1, 1, 1], 0.3)]
    ev += [proposed("env-c", code="class Broken(:\n"),
           validated("env-c", valid=False, accepted=False, error_kind="syntax", failed_check="parse", novelty=None, novel=None)]
    ev += [proposed("env-d"), validated("env-d"), *scored("env-d", [1, 1], [1, 1], 0.1)]
    ev += [proposed("env-e"), validated("env-e", accepted=False, novel=False, novelty=0.01, nearest="env-a")]
    ev += [proposed("env-f", skill="logic", parents=["env-a"], repair_of="env-c", attempt=1), validated("env-f"),
           *scored("env-f", [1, 0], [1, 1], 0.8, skill="logic")]
    return ev


#: PolicyUpdated metrics of :func:`training_run`, by step (v1 records no kl)
TRAINING = [
    {"loss": 0.9, "grad_norm": 2.0, "clip_fraction": 0.3, "agent_reward_mean": 0.2, "tokens": 100.0},
    {"loss": 0.6, "grad_norm": 1.5, "kl": 0.01, "clip_fraction": 0.2, "agent_reward_mean": 0.4, "tokens": 120.0},
    {"loss": 0.5, "grad_norm": 1.2, "kl": 0.02, "clip_fraction": 0.1, "agent_reward_mean": 0.5, "tokens": 90.0},
    {"loss": 0.3, "grad_norm": 1.0, "kl": 0.015, "clip_fraction": 0.1, "agent_reward_mean": 0.7, "tokens": 110.0},
]
#: further counters every update records (so some metrics are beyond the page's headline set)
EXTRA_METRICS = ("groups", "groups_used", "samples", "seconds", "tokens_per_s", "untokenized", "zero_variance_groups")


def policy_updates(metrics: list[dict[str, float]], *, first_step: int = 1) -> list[Envelope]:
    """PolicyUpdated v1, v2, ... at steps 1, 2, ... with the given metrics."""
    out = []
    for k, m in enumerate(metrics):
        step = first_step + k
        out.append(make_envelope(PolicyUpdated(version=f"v{step}", parent_version=f"v{step - 1}", checkpoint=None,
                                               step=step, metrics=m), run_id=RUN_ID, producer="trainer"))
    return out


def training_run(config: dict | None = None) -> list[Envelope]:
    """:func:`audit_run`'s environments, then the four updates of :data:`TRAINING` (each with the
    :data:`EXTRA_METRICS` too, value = step), then RunStopped."""
    metrics = [{**m, **{k: float(i + 1) for k in EXTRA_METRICS}} for i, m in enumerate(TRAINING)]
    return [started(config), *six_environments(), *policy_updates(metrics),
            make_envelope(RunStopped(reason="completed"), run_id=RUN_ID, producer="test")]


def chart_run(n: int = 36, config: dict | None = None) -> list[Envelope]:
    """A short run to look at: ``n`` environments over three skills with a plain win rate that
    falls as the run goes on, every 7th one rejected (syntax) and repaired by the next, every
    11th a duplicate, a policy update every 6 environments; band [0.3, 0.7]."""
    ev = [started(config or {"seed": 0, "reward": {"band_low": 0.3, "band_high": 0.7}})]
    skills = ("math", "logic", "text")
    updates = []
    version = 0
    for i in range(n):
        env_id = f"env-{i:03d}"
        prev = f"env-{i - 1:03d}"
        repair = prev if i % 7 == 1 and i > 1 else None
        skill = skills[(i - 1) % 3] if repair else skills[i % 3]  # a repair keeps its skill
        ev.append(proposed(env_id, skill=skill, repair_of=repair, attempt=1 if repair else 0,
                           code="class Broken(:\n" if i % 7 == 0 and i else CODE))
        if i % 7 == 0 and i:
            ev.append(validated(env_id, valid=False, accepted=False, error_kind="syntax", failed_check="parse",
                                novelty=None, novel=None))
        elif i % 11 == 5:
            ev.append(validated(env_id, accepted=False, novel=False, novelty=0.02 + 0.001 * i, nearest="env-000"))
        else:
            ev.append(validated(env_id, novelty=round(0.25 + 0.5 * ((i * 37) % 10) / 10, 3)))
            p = max(0.0, min(1.0, 0.95 - 0.022 * i + 0.15 * (((i * 5) % 7) - 3) / 3))
            wins = round(4 * p)
            plain = [1.0] * wins + [0.0] * (4 - wins)
            hwins = min(4, wins + 1 + i % 2)
            hinted = [1.0] * hwins + [0.0] * (4 - hwins)
            reward = round(0.2 + 0.6 * (hwins - wins) / 4 + 0.1 * (i % 3), 3)
            ev += scored(env_id, plain, hinted, reward, skill=skill)
        if i % 6 == 5:
            version += 1
            updates.append(version)
            ev += policy_updates([{"loss": round(1.0 / (1 + 0.4 * version), 4), "grad_norm": round(2.5 - 0.3 * version, 3),
                                   "kl": round(0.004 * version, 4), "clip_fraction": round(0.25 - 0.03 * version, 3),
                                   "agent_reward_mean": round(0.3 + 0.05 * version, 3), "tokens": 1000.0 + 10 * version,
                                   "samples": 16.0}], first_step=version)
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


#: the skills of the procedural designer (what a new user's run shows): 16 of them
SIXTEEN_SKILLS = ("arithmetic", "ordering", "counting", "logic", "code_trace", "inventory", "scheduling", "geometry",
                  "units", "cipher", "graph_search", "probability", "text_edit", "sequence", "measurement", "deduction")


def many_skills_run(n: int = 320, skills: tuple[str, ...] = SIXTEEN_SKILLS) -> list[Envelope]:
    """A longer run over many skills (the first-week dashboard: 16 skills, hundreds of
    environments): skill i's plain win rate drifts from high to low at its own pace, a few
    rejections, band [0.4, 0.6]."""
    ev = [started({"seed": 0, "reward": {"band_low": 0.4, "band_high": 0.6}})]
    for i in range(n):
        env_id = f"env-{i:04d}"
        k = i % len(skills)
        skill = skills[k]
        ev.append(proposed(env_id, skill=skill))
        if i % 13 == 12:
            ev.append(validated(env_id, valid=False, accepted=False, error_kind="crash", failed_check="reset", novelty=None,
                                novel=None))
            continue
        ev.append(validated(env_id, novelty=round(0.2 + 0.6 * ((i * 37) % 10) / 10, 3)))
        p = max(0.0, min(1.0, 0.95 - (0.3 + 0.7 * k / len(skills)) * i / n + 0.12 * (((i * 7) % 5) - 2) / 2))
        wins = round(8 * p)
        plain = [1.0] * wins + [0.0] * (8 - wins)
        hwins = min(8, wins + 1 + i % 3)
        hinted = [1.0] * hwins + [0.0] * (8 - hwins)
        ev += scored(env_id, plain, hinted, round(0.1 + 0.7 * (hwins - wins) / 8, 3), skill=skill)
    ev.append(make_envelope(RunStopped(reason="completed"), run_id=RUN_ID, producer="test"))
    return ev
