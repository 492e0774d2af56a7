"""The red-team round of issue 15, one test per class of finding, each with hostile environments
written for this project (tests/redteam/*.py, tests/redteam/timing/*.py and a few sources built
here), their expected verdicts and an assertion that nothing escaped:

1. deadlines: absolute, enforced by the engine; a batch of hostile environments validates within
   the sum of its limits; a step that overruns is a step timeout;
2. poison replies: a verdict for that environment only; nothing raises out of the validator, a
   run goes on, `validate` keeps every other file's verdict;
3. the audit hook disarmed from inside: since round 3 no frame leads to it (the walks these
   programs make find nothing and the hook stops what follows); the seccomp filter stops what the
   hook would (a Unix socket included: only socketpairs are left), and an isolated pool without
   the filter refuses to start unless sandbox.allow_without_seccomp;
4. one task affecting the next: a fresh /tmp per task, recycling after errors, distinct uids;
5. limits living in the untrusted process: the engine re-checks sizes before recording;
6. host files: only the Python installation and the sandbox modules are visible, /proc is empty
   and the host name is the sandbox's own; a Python or checkout under /tmp is refused;
7. a predictable validator: seeds and probes drawn per run and recorded; garbage that wins in a
   play marks the environment trivial after the fact;
8. an imported run's sandbox config (preload_modules) is not trusted on resume.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import msgspec
import pytest
from sandbox_support import ENVS, REDTEAM, fast_config, marker_files, sandbox_processes, wait_no_sandbox_processes
from typer.testing import CliRunner

from spade_engine.cli import app
from spade_engine.config import EngineConfig, SandboxConfig, load_config
from spade_engine.engine.bounds import bound_rollout, bound_validated
from spade_engine.engine.corpus import Corpus
from spade_engine.engine.loop import Engine
from spade_engine.engine.pipeline import env_id_for, output_event_id
from spade_engine.engine.regret_replay import recompute_regrets, verify_regrets
from spade_engine.engine.rollouts import PlaySpec, play_episodes
from spade_engine.engine.stages import StageContext, estimate_regret, play, play_specs, validate, validation_seed, write_hint
from spade_engine.engine.state import RunState
from spade_engine.events import make_envelope
from spade_engine.events.catalogue import (
    V1_PROBE_ACTIONS,
    EnvironmentProposed,
    EnvironmentValidated,
    RolloutCompleted,
    Turn,
    ValidationCheck,
)
from spade_engine.events.codec import encode_envelope
from spade_engine.events.sqlite.log import SqliteEventLog
from spade_engine.events.store import new_run_id
from spade_engine.policy.protocol import Sample
from spade_engine.policy.registry import make_policy
from spade_engine.recorded import with_local_sandbox
from spade_engine.sandbox import SandboxCrash, SandboxError, SandboxLayers, SandboxPool, StepTimeout
from spade_engine.sandbox.limits import MAX_ACTION_CHARS, MAX_OBS_CHARS, marker
from spade_engine.sandbox.probes import probe_actions, validation_seeds
from spade_engine.sandbox.validator import ErrorKind, Validator

pytestmark = pytest.mark.sandbox

TIMING = sorted((REDTEAM / "timing").glob("*.py"))
SAY = '''
import random
class SayEnv:
    def reset(self, seed=None):
        self.n = random.Random(seed).randint(1, 9)
        return "Say %d as \\\\boxed{n}." % self.n, {}
    def step(self, action):
        ok = action.strip() == "\\\\boxed{%d}" % self.n
        return ("ok" if ok else "no"), (1.0 if ok else 0.0), True, False, {}
    def solution(self):
        return ["\\\\boxed{%d}" % self.n]
'''


def expected(path: Path) -> set[str]:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect:"), path
    return {v.strip() for v in first.split(":", 1)[1].split("|")}


def verdict(report) -> str:
    return "valid" if report.valid else str(report.error_kind)


@pytest.fixture(scope="module")
def canary():
    """A child in the engine's own process group: killing the group would kill it."""
    proc = subprocess.Popen(["sleep", "3600"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def pool(canary):
    p = SandboxPool(fast_config(uid_base=2_000_000_100))
    yield p
    p.close()
    assert wait_no_sandbox_processes(p) == []


@pytest.fixture(scope="module")
def validator(pool):
    return Validator(pool, turn_limit=8)


def assert_nothing_escaped(pool: SandboxPool, canary: subprocess.Popen, env_before: dict[str, str] | None = None) -> None:
    assert canary.poll() is None, "the engine's process group was hit"
    if env_before is not None:
        assert dict(os.environ) == env_before
    assert marker_files() == [], "a file was written outside the sandbox"
    deadline = time.monotonic() + 5
    while len(sandbox_processes(pool)) > pool.config.workers and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(sandbox_processes(pool)) <= pool.config.workers, "a process outlived its task"


def say_policy(text: str = "\\boxed{1}"):
    """A stand-in agent: every reply is ``text``."""
    return lambda requests: [Sample(text=text) for _ in requests]


def one_play(pool: SandboxPool, source: str, *, seed: int = 3, turn_limit: int = 3) -> RolloutCompleted:
    plays = play_episodes(
        env_id="e", specs=[PlaySpec(index=0, hinted=False, seed=seed)],
        open_session=lambda: pool.open_session(source), generate=say_policy(), policy_version="v0", hint=None,
        turn_limit=turn_limit, timeout_errors=(StepTimeout,), crash_errors=(SandboxCrash, SandboxError),
    )
    assert len(plays) == 1
    return plays[0]


# ----------------------------------------------------------------------------------------------
# 1. deadlines


def test_a_batch_of_timing_attacks_validates_within_the_sum_of_its_limits(canary):
    """Forged forbidden frames, frames dripped byte by byte, reply spam, calls kept just under
    the step limit, an endless import: each ends by its own deadline (or at once), so the batch
    is done within the sum of its validation limits. A deadline bound, not a speed target."""
    cfg = fast_config(uid_base=2_000_000_110, step_timeout_s=1.0, import_timeout_s=2.0, validate_timeout_s=6.0)
    assert len(TIMING) >= 5
    with SandboxPool(cfg) as p:
        v = Validator(p, turn_limit=8)
        t0 = time.monotonic()
        with ThreadPoolExecutor(cfg.workers) as ex:
            reports = list(ex.map(lambda path: v.validate(path.read_text()), TIMING))
        elapsed = time.monotonic() - t0
        for path, r in zip(TIMING, reports):
            assert verdict(r) in expected(path), f"{path.name}: {verdict(r)} at {r.failed_check}: {r.detail}"
            # the checks themselves (not waiting for a respawned worker) end by the validation's deadline
            assert sum(c.seconds for c in r.checks) <= cfg.validate_timeout_s + 2.0, (path.name, r.checks)
        assert elapsed <= len(TIMING) * cfg.validate_timeout_s, f"{elapsed:.1f}s for {len(TIMING)} validations"
        forged = {p.name: r for p, r in zip(TIMING, reports)}["forged_forbidden_spam.py"]
        assert "spam" in forged.detail  # killed at its first forged frame, which names the event
        assert_nothing_escaped(p, canary)
        assert v.validate((ENVS / "arithmetic_env.py").read_text()).valid


def test_a_step_that_overruns_is_a_step_timeout_and_a_forged_frame_ends_it_at_once(canary):
    drip = SAY.replace(
        "    def step(self, action):\n",
        "    def step(self, action):\n"
        "        import os, struct, threading, time\n"
        "        def drip():\n"
        "            for b in struct.pack('>I', 900) + b'{':\n"
        "                for fd in range(3, 64):\n"
        "                    try: os.write(fd, bytes([b]))\n"
        "                    except OSError: pass\n"
        "                time.sleep(0.2)\n"
        "        threading.Thread(target=drip, daemon=True).start()\n"
        "        time.sleep(30)\n",
    )
    forged = SAY.replace(
        "    def step(self, action):\n",
        "    def step(self, action):\n"
        "        import json, os, struct, time\n"
        "        data = json.dumps({'op': 'forbidden', 'event': 'forged'}).encode()\n"
        "        for fd in range(3, 64):\n"
        "            try: os.write(fd, struct.pack('>I', len(data)) + data)\n"
        "            except OSError: pass\n"
        "        time.sleep(30)\n",
    )
    cfg = fast_config(uid_base=2_000_000_115, step_timeout_s=1.0)
    with SandboxPool(cfg) as p:
        late = one_play(p, drip)
        assert late.step_timeout and late.error.startswith("step timeout"), late.error
        assert late.turns[-1].step_seconds <= cfg.step_timeout_s + 3.0  # the deadline held against the dripping
        cut = one_play(p, forged)
        assert not cut.step_timeout and "forbidden: forged" in cut.error
        assert cut.turns[-1].step_seconds < cfg.step_timeout_s  # no waiting for more frames
        assert_nothing_escaped(p, canary)


# ----------------------------------------------------------------------------------------------
# 2. poison replies


POISON = ["poison_reply_new.py", "poison_reply_solution.py", "poison_error_markup.py", "lift_observation_limit.py"]


def test_poison_replies_are_verdicts_for_their_environment_only(validator, pool, canary):
    env_before = dict(os.environ)
    for name in POISON:
        r = validator.validate((REDTEAM / name).read_text())  # never raises
        assert verdict(r) in expected(REDTEAM / name), (name, r.detail)
        if verdict(r) == "sandbox":
            assert "does not fit the schema" in r.detail  # the reason is the verdict's detail
    # an environment that poisons only its plays: the play ends with a sandbox error, nothing raises
    src = (REDTEAM / "poison_in_plays.py").read_text()
    assert validator.validate(src).valid
    played = one_play(pool, src)
    assert played.error and "does not fit the schema" in played.error and not played.step_timeout
    assert_nothing_escaped(pool, canary, env_before)


def test_validate_keeps_every_files_verdict_and_prints_hostile_text_as_data(tmp_path):
    toml = tmp_path / "spade.toml"
    toml.write_text("[sandbox]\nworkers = 2\nstep_timeout_s = 2.0\nimport_timeout_s = 4.0\nvalidate_timeout_s = 20.0\n"
                    "memory_mb = 384\ncpu_s = 8\nuid_base = 2000000120\n")
    files = [ENVS / "arithmetic_env.py", *(REDTEAM / n for n in POISON), ENVS / "guess_number_env.py"]
    text = CliRunner().invoke(app, ["validate", *map(str, files), "-c", str(toml), "--seed", "7"])
    assert text.exit_code == 1, text.output
    assert "Traceback" not in text.output
    lines = [line for line in text.stdout.splitlines() if line.startswith(("valid", "invalid"))]
    assert len(lines) == len(files)
    assert lines[0].startswith("valid") and lines[-1].startswith("valid")
    assert all(line.startswith("invalid") for line in lines[1:-1])
    markup = next(line for line in lines if "poison_error_markup" in line)
    assert "[/bold] [link=file:///etc/passwd]click[/link]" in markup and "\\x1b[31m" in markup  # data, not markup
    js = CliRunner().invoke(app, ["validate", *map(str, files), "-c", str(toml), "--json", "--seed", "7"])
    reports = [json.loads(line) for line in js.stdout.splitlines() if line.startswith("{")]
    assert [r["path"] for r in reports] == [str(f) for f in files]
    assert {r["path"].rsplit("/", 1)[1]: r["error_kind"] for r in reports} == {
        "arithmetic_env.py": None, "poison_reply_new.py": "sandbox", "poison_reply_solution.py": "sandbox",
        "poison_error_markup.py": "crash", "lift_observation_limit.py": "sandbox", "guess_number_env.py": None,
    }
    again = CliRunner().invoke(app, ["validate", str(files[0]), "-c", str(toml), "--json", "--seed", "7"])
    first = json.loads(next(line for line in again.stdout.splitlines() if line.startswith("{")))
    assert first["validation_seeds"] == reports[0]["validation_seeds"]  # --seed makes the draws reproducible


def _proposal(run_id: str, index: int, code: str, version: str) -> EnvironmentProposed:
    import hashlib

    return EnvironmentProposed(
        env_id=env_id_for(run_id, index), skill="arithmetic", difficulty=0.5, code=code,
        code_sha256=hashlib.sha256(code.encode()).hexdigest(), policy_version=version, designer="redteam",
    )


def _stage_context(tmp_path: Path, pool: SandboxPool, *, seed: int = 5, plays: int = 1, max_envs: int = 3):
    run_id = new_run_id()
    log = SqliteEventLog(tmp_path / f"events-{run_id}.sqlite", run_id)
    cfg = load_config(overrides={"seed": seed, "loop.max_envs": max_envs, "loop.plays_per_env": plays, "loop.max_repairs": 0})
    cfg = cfg.model_copy(update={"sandbox": pool.config})
    policy = make_policy(cfg.policy)
    ctx = StageContext(
        run_id=run_id, cfg=cfg, policy=policy, corpus=Corpus.from_paths([]), validator=Validator(pool, turn_limit=cfg.loop.turn_limit),
        pool=pool, sandbox_layers=dict(pool.layers), step_errors=((StepTimeout,), (SandboxCrash, SandboxError)),
    )
    return log, cfg, ctx


def test_a_run_with_poisoned_environments_goes_on(tmp_path, pool, canary):
    """The engine's own loop: poison at validation and in plays are verdicts and play errors;
    the run ends normally (no RunStopped(error)) and every environment has its verdict."""
    codes = [(REDTEAM / n).read_text() for n in ("poison_reply_new.py", "poison_in_plays.py", "lift_solution_limits.py")]
    log, cfg, ctx = _stage_context(tmp_path, pool, max_envs=len(codes))
    try:
        engine = Engine(log=log, cfg=cfg, ctx=ctx)
        engine.proposer = lambda eng, index: _proposal(eng.run_id, index, codes[index], ctx.policy.version)
        assert engine.run() == "max_envs"
        state = RunState.from_log(log)
        kinds = {st.env_id: (st.validated.error_kind if st.validated else None) for st in state.proposed()}
        assert sorted(kinds.values(), key=str) == sorted(["sandbox", None, "sandbox"], key=str)
        played = [p for st in state.proposed() for _, p in st.plays.values()]
        assert played and all("does not fit the schema" in (p.error or "") for p in played)
        stopped = [rec.envelope.payload for rec in log.read() if rec.envelope.type == "RunStopped"]
        assert [s["reason"] for s in stopped] == ["max_envs"]
    finally:
        log.close()
    assert_nothing_escaped(pool, canary)


# ----------------------------------------------------------------------------------------------
# 3. the audit hook disarmed from inside


@pytest.mark.parametrize(
    ("name", "expect", "why"),
    [
        # since round 3 (issue 31) the walk these programs make no longer reaches the hook (it and its
        # fingerprint live in the task's I/O thread), so the hook stops what they do next; with the hook
        # off, test_sandbox_isolation shows the kernel filter stopping the same acts
        ("disarm_hook_then_exec.py", "forbidden", "os.exec"),
        ("disarm_hook_then_socket.py", "forbidden", "socket"),
        ("disarm_hook_then_userns.py", "forbidden", "ctypes"),
        ("disarm_hook_quietly.py", "valid", ""),
        ("replace_hook_code.py", "forbidden", "__code__"),
        ("gc_hunt_for_hook.py", "forbidden", "gc.get_objects"),
    ],
)
def test_a_disarm_attempt_finds_no_way_to_the_hook(validator, pool, canary, name, expect, why):
    env_before = dict(os.environ)
    r = validator.validate((REDTEAM / name).read_text())
    assert verdict(r) == expect and why in r.detail, (name, r.detail)
    assert pool.layers["seccomp"] and pool.layers["audit_hook"]
    assert_nothing_escaped(pool, canary, env_before)
    assert validator.validate((ENVS / "arithmetic_env.py").read_text()).valid


def test_the_kernel_filter_leaves_only_unix_socketpairs(canary):
    """With the audit hook off, a task cannot make a Unix socket to connect anywhere (by path or
    abstract name): socket(AF_UNIX) fails with EACCES; socketpair() within the task works, and a
    user lookup (the C library tries nscd's socket) fails quietly instead of killing the task."""
    import errno

    with SandboxPool(fast_config(workers=1, uid_base=2_000_000_123), audit_hook=False) as bare:
        assert bare.layers["seccomp"] and not bare.layers["audit_hook"]
        with bare.open_session((REDTEAM / "unix_socket_connect.py").read_text()) as s:
            obs, _ = s.reset(seed=0)
        seen = json.loads(obs)
        for path in ("/tmp/.X11-unix/X0", "/dev/log", "/var/run/nscd/socket", "\0spade-redteam"):
            assert seen[path] == ["socket", errno.EACCES], (path, seen[path])
        assert seen["socketpair"] == "x" and seen["getpwuid"] == "KeyError"
        assert_nothing_escaped(bare, canary)


def test_require_isolation_refuses_a_pool_without_the_kernel_filter():
    layers = SandboxLayers.of({name: True for name in SandboxLayers.of({})})
    layers["seccomp"] = False
    assert layers.missing() == ["seccomp"]
    cfg = fast_config(workers=1, uid_base=2_000_000_125, require_isolation=True)
    from spade_engine.sandbox import IsolationError

    with pytest.raises(IsolationError, match="seccomp"):
        SandboxPool(cfg, isolate=False)  # no layer at all, the kernel filter among them


def test_an_isolated_pool_without_the_kernel_filter_is_refused_unless_allowed(monkeypatch, canary):
    """The seccomp layer fails closed: with the binding hidden inside the worker (everything else
    in place), the pool refuses to start, naming the packages and the opt-out; with the opt-out it
    runs, reporting the layer missing."""
    from spade_engine.sandbox import IsolationError

    monkeypatch.setenv("SPADE_SANDBOX_NO_SECCOMP_BINDING", "1")
    cfg = fast_config(workers=1, uid_base=2_000_000_127)
    assert cfg.allow_without_seccomp is False  # the default
    with pytest.raises(IsolationError) as refused:
        SandboxPool(cfg)
    msg = str(refused.value)
    assert "seccomp" in msg and "python3-seccomp" in msg and "pyseccomp" in msg and "libseccomp2" in msg
    assert "sandbox.allow_without_seccomp = true" in msg and "no libseccomp binding" in msg
    assert wait_no_sandbox_processes(cfg) == []
    with SandboxPool(cfg.model_copy(update={"allow_without_seccomp": True})) as p:
        assert p.layers["seccomp"] is False and p.missing_layers == ["seccomp"]  # only the kernel filter is gone
        assert "SPADE_SANDBOX_NO_SECCOMP_BINDING" in p.layer_details["seccomp"]
        v = Validator(p, turn_limit=8)
        assert v.validate((ENVS / "arithmetic_env.py").read_text()).valid
        r = v.validate((REDTEAM / "os_system.py").read_text())
        assert verdict(r) == "forbidden"  # the audit hook still holds
        assert_nothing_escaped(p, canary)
    monkeypatch.delenv("SPADE_SANDBOX_NO_SECCOMP_BINDING")
    with SandboxPool(cfg) as p:  # the binding back: the default pool has its filter
        assert p.layers["seccomp"] and "seccomp" not in p.missing_layers


def test_start_refuses_without_the_kernel_filter_and_warns_when_allowed(tmp_path, monkeypatch):
    """`start` says why it cannot run (no traceback), and with the opt-out it warns, as `validate` does."""
    monkeypatch.setenv("SPADE_SANDBOX_NO_SECCOMP_BINDING", "1")
    args = ["start", "--seed", "1", "--max-envs", "1", "--plays", "1", "-d", str(tmp_path), "--no-progress"]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code != 0 and "allow_without_seccomp" in refused.output, refused.output
    assert "Traceback" not in refused.output
    monkeypatch.setenv("SPADE_SANDBOX__ALLOW_WITHOUT_SECCOMP", "1")
    ran = CliRunner().invoke(app, [*args[:1], "--new", *args[1:]])
    assert ran.exit_code == 0, ran.output
    assert "sandbox layers missing: seccomp" in ran.output


# ----------------------------------------------------------------------------------------------
# 4. one task affecting the next


def test_tasks_get_a_fresh_tmp_and_errors_recycle_the_worker(canary):
    with SandboxPool(fast_config(workers=1, uid_base=2_000_000_130)) as p:
        v = Validator(p, turn_limit=8)
        note = (REDTEAM / "tmp_leave_note.py").read_text()
        first_pid = p.worker_pids()
        assert v.validate(note).valid and v.validate(note).valid  # the second would find the first's note
        assert p.worker_pids() == first_pid  # valid environments share the worker, never its /tmp
        assert v.validate((REDTEAM / "tmp_fill.py").read_text()).valid
        needs_space = SAY.replace("        self.n =", "        open('/tmp/space', 'wb').write(b'x' * (8 << 20))\n        self.n =")
        assert v.validate(needs_space).valid  # the filled /tmp is gone
        with p.open_session(SAY.replace("return \"Say", "import os\n        assert not os.listdir('/tmp')\n        return \"Say")) as s:
            s.reset(seed=1)  # the session's task starts with an empty /tmp as well
        before = p.recycled
        with p.open_session(SAY.replace("ok = action", "raise ValueError('boom')\n        ok = action")) as s:
            s.reset(seed=1)
            with pytest.raises(SandboxError):
                s.step("x")
        assert p.recycled == before + 1  # an environment error: the worker is not reused
        assert v.validate(SAY.replace("(1.0 if ok else 0.0)", "5.0")).error_kind == "contract"
        assert p.recycled == before + 2  # nor after its code broke the contract
        # the global random state: two resets collide with probability 1e-9, not 1/9 as with randint(1, 9)
        global_rng = SAY.replace("random.Random(seed).randint(1, 9)", "random.randint(1, 10**9)")
        assert v.validate(global_rng).error_kind == "nondeterministic"
        assert v.validate("class Helper:\n    pass\n").error_kind == "contract"  # no code of it ran (env_class)
        assert p.recycled == before + 2  # verdicts on code that ran without error keep the worker
        assert_nothing_escaped(p, canary)


def test_pools_never_share_uids_or_process_limits(canary):
    cfg = fast_config(workers=1, uid_base=2_000_000_140, max_processes=24)
    threads = SAY.replace(
        "        self.n =",
        "        import threading, time\n"
        "        ts = [threading.Thread(target=time.sleep, args=(2,), daemon=True) for _ in range(6)]\n"
        "        for t in ts: t.start()\n"
        "        self.n =",
    )
    with SandboxPool(cfg) as a, SandboxPool(cfg) as b:  # the same uid_base
        assert set(a.uids).isdisjoint(b.uids)
        with a.open_session((REDTEAM / "nproc_hog.py").read_text()) as hog:
            _, info = hog.reset(seed=1)
            # pool a's uid is at its process limit (the zygote and the task's main thread count too)
            assert cfg.max_processes - 4 <= info["threads"] < cfg.max_processes
            with b.open_session(threads) as s:
                s.reset(seed=1)  # pool b's tasks still start threads
        assert_nothing_escaped(a, canary)
        assert_nothing_escaped(b, canary)


# ----------------------------------------------------------------------------------------------
# 5. limits re-checked by the engine


def test_the_engine_rechecks_sizes_before_recording(validator, pool, canary):
    for name, kind in (("lift_observation_limit.py", "sandbox"), ("lift_solution_limits.py", "sandbox"), ("lift_info_limit.py", "contract")):
        r = validator.validate((REDTEAM / name).read_text())
        assert verdict(r) == kind, (name, r.detail)
        assert len(json.dumps(r.to_dict())) < 100_000
    huge_steps = SAY.replace("import random", "import random, __main__\n__main__._TaskRunner._text = lambda self, x: {'v': x}").replace(
        'return ("ok" if ok else "no")', 'return ("B" * 1_000_000)'
    ).replace("True, False, {}", "False, False, {}")
    played = one_play(pool, huge_steps)
    assert "does not fit the schema" in played.error
    assert len(encode_envelope(make_envelope(played, run_id="r", producer="t"))) < 20_000  # nothing of the 1 MB recorded
    assert_nothing_escaped(pool, canary)


def test_recorded_texts_are_bounded_with_a_marker():
    big = RolloutCompleted(
        env_id="e", play_id="e/p0", hinted=False, seed=1, policy_version="v", episode_reward=1.0,
        turns=[Turn(observation="o" * (MAX_OBS_CHARS + 5000), action="a" * (MAX_ACTION_CHARS * 2), reward=1.0, terminated=True)],
        terminated=True, error="e" * 10_000,
    )
    cut = bound_rollout(big)
    t = cut.turns[0]
    assert len(t.observation) <= MAX_OBS_CHARS and t.observation.endswith("characters]") and marker(1)[:14] in t.observation
    assert len(t.action) <= MAX_ACTION_CHARS and len(cut.error) <= 2000
    assert (t.reward, cut.episode_reward, cut.terminated) == (1.0, 1.0, True)  # numbers never change
    small = bound_rollout(cut)
    assert small is cut  # within the limits: untouched
    verdict = bound_validated(EnvironmentValidated(
        env_id="e", valid=False, checks=[ValidationCheck(name="step", passed=False, detail="d" * 50_000)] * 40,
        class_name="C" * 500, probe_actions=["a" * 10_000]))
    assert len(verdict.checks) == 32 and len(verdict.checks[0].detail) <= 2000 and len(verdict.class_name or "") <= 200
    assert len(verdict.probe_actions[0]) < 10_000 and verdict.valid is False


# ----------------------------------------------------------------------------------------------
# 6. host files


#: host-wide /proc files and the per-process ones that show the host (the mount table)
HOST_PROC = (
    "/proc/sys/kernel/hostname", "/proc/sys/kernel/random/boot_id", "/proc/version", "/proc/meminfo", "/proc/uptime",
    "/proc/net/dev", "/proc/stat", "/proc/loadavg", "/proc/cpuinfo", "/proc/self/mountinfo", "/proc/self/mounts",
    "/proc/self/mountstats", "/proc/self/net/dev", "/proc/self/cgroup", "/proc/1/mountinfo", "/proc/cmdline",
    "/proc/kallsyms",
)


def test_the_sandbox_sees_only_the_python_installation_and_its_modules(tmp_path, canary):
    """With the audit hook off, the file system itself shows nothing of the host: no checkout, no
    data, and no /proc at all (its host-wide files and the mount table are not there), and the
    host name is the sandbox's own."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    secret = f"spade-host-secret-{uuid.uuid4().hex}"
    (data_dir / "events.sqlite").write_text(secret)
    repo = Path(__file__).resolve().parent.parent
    probe = textwrap.dedent(
        f"""
        import ctypes, json, os, socket, sys
        def seen(p):
            try:
                return sorted(os.listdir(p)) if os.path.isdir(p) else open(p).read(4000)
            except OSError as e:
                return type(e).__name__
        def sysinfo():
            buf = ctypes.create_string_buffer(256)  # struct sysinfo: uptime, loads, memory
            libc = ctypes.CDLL(None, use_errno=True)
            return [libc.sysinfo(buf), ctypes.get_errno(), buf.raw[:64].hex()]
        class ProbeEnv:
            def reset(self, seed=None):
                paths = ["/", "/root", "/home", "/sys", "/etc", "/proc", {str(data_dir)!r},
                         {str(data_dir / 'events.sqlite')!r}, {str(repo / 'pyproject.toml')!r}, {str(repo / 'tests')!r},
                         {str(repo / 'spade_engine')!r}, {str(repo / 'spade_engine' / 'sandbox')!r}, sys.prefix,
                         *{list(HOST_PROC)!r}]
                out = {{p: seen(p) for p in paths}}
                out["uname"] = list(os.uname())
                out["gethostname"] = socket.gethostname()
                out["sysinfo"] = sysinfo()
                return json.dumps(out), {{}}
            def step(self, action):
                return "x", 0.0, True, False, {{}}
        """
    )
    with SandboxPool(fast_config(workers=1, uid_base=2_000_000_150), audit_hook=False) as bare:
        assert bare.layers["minimal_root"] and "pivot_root" in bare.layer_details["minimal_root"]
        assert bare.layers["hidden_proc"] and bare.layers["uts_namespace"]
        with bare.open_session(probe) as s:
            obs, _ = s.reset(seed=0)
        seen = json.loads(obs)
        assert secret not in obs
        # nothing of /proc: every host entry is missing, the directory is empty
        assert seen["/proc"] == []
        for p in HOST_PROC:
            assert seen[p] == "FileNotFoundError", (p, seen[p][:300])
        host = os.uname()
        assert seen["uname"][1] == seen["gethostname"] == "sandbox" != host.nodename  # its own UTS namespace
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        version = Path("/proc/version").read_text().strip()
        mem_total = next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
        root_mount = next(line for line in Path("/proc/self/mounts").read_text().splitlines() if line.split()[1] == "/")
        for host_text in (boot_id, version, mem_total, root_mount, f"'{host.nodename}'", f'"{host.nodename}"'):
            assert host_text not in obs, host_text
        assert seen["sysinfo"][:2] == [-1, 1]  # sysinfo(2) (uptime, load, memory): EPERM from the kernel filter
        # The root holds the system's library folders plus the first component of each path the
        # sandbox binds read-only: the Python installation and the checkout's sandbox modules
        # (a CI clone lives in /check, a user's in /home or /work).
        from spade_engine.sandbox.rootfs import needed_dirs

        bound = {Path(p).parts[1] for p in [*needed_dirs(), str(repo.resolve())] if len(Path(p).parts) > 1}
        assert set(seen["/"]) <= {"dev", "proc", "tmp", "usr", "root", "lib", "lib64", "lib32", "libx32"} | bound
        assert {"etc", "sys", "var", "bin", "boot"}.isdisjoint(seen["/"])
        for p in ("/home", "/sys", "/etc", str(data_dir), str(data_dir / "events.sqlite"), str(repo / "pyproject.toml"), str(repo / "tests")):
            assert seen[p] in ("FileNotFoundError", "PermissionError"), (p, seen[p])
        assert seen[str(repo / "spade_engine")] == ["sandbox"]  # only the sandbox modules of the checkout
        assert "worker.py" in seen[str(repo / "spade_engine" / "sandbox")]
        assert isinstance(seen[sys.prefix], list) and seen[sys.prefix]  # the Python installation is there
        assert ".bashrc" not in seen["/root"]
        assert_nothing_escaped(bare, canary)


def test_a_python_or_checkout_under_tmp_is_refused(tmp_path, monkeypatch, canary):
    """Every task gets a fresh tmpfs on /tmp, which would hide a virtual environment or checkout
    that lives there: the pool says so instead of starting a sandbox that cannot see its Python."""
    import shutil

    import spade_engine.sandbox.pool as pool_module
    from spade_engine.sandbox import IsolationError

    assert str(tmp_path).startswith("/tmp/")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    cfg = fast_config(workers=1, uid_base=2_000_000_155)
    with pytest.raises(IsolationError, match="lies under /tmp") as refused:
        SandboxPool(cfg, python=str(venv / "bin" / "python"))
    assert str(venv) in str(refused.value) and "Move the checkout or virtual environment out of /tmp" in str(refused.value)
    checkout = tmp_path / "checkout" / "spade_engine" / "sandbox"
    shutil.copytree(Path(pool_module.__file__).parent, checkout, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(pool_module, "WORKER_SCRIPT", checkout / "worker.py")
    with pytest.raises(IsolationError, match="lies under /tmp") as refused:
        SandboxPool(cfg)
    assert str(checkout) in str(refused.value)
    assert wait_no_sandbox_processes(cfg) == []
    with SandboxPool(cfg, isolate=False, python=str(venv / "bin" / "python")) as plain:  # no private /tmp: nothing hidden
        with plain.open_session(SAY) as s:
            assert s.reset(seed=1)[0].startswith("Say")
    assert canary.poll() is None


# ----------------------------------------------------------------------------------------------
# 7. a predictable validator


def test_validation_inputs_are_drawn_per_run_and_recorded(validator):
    r = validator.validate((REDTEAM / "cheats_on_known_seeds.py").read_text(), seed=validation_seed(5, "abc123-e00000"))
    assert verdict(r) == "trivial"
    assert r.seeds != [11, 23] and r.probes != list(V1_PROBE_ACTIONS)
    s = validation_seed(5, "abc123-e00000")
    assert list(validation_seeds(s)) == r.seeds and list(probe_actions(s)) == r.probes  # replay draws the same
    assert validation_seed(5, "zzz999-e00000") == s  # the run suffix is not part of the key
    assert validation_seed(6, "abc123-e00000") != s  # another run seed, other draws
    assert probe_actions(s) != probe_actions(validation_seed(5, "abc123-e00001"))


def test_garbage_that_wins_in_a_play_marks_the_environment_trivial(tmp_path, pool, canary):
    log, cfg, ctx = _stage_context(tmp_path, pool, plays=1)
    try:
        cheat = _proposal(ctx.run_id, 0, (REDTEAM / "cheats_in_plays_only.py").read_text(), ctx.policy.version)
        honest = _proposal(ctx.run_id, 1, (ENVS / "guess_number_env.py").read_text(), ctx.policy.version)
        for prop in (cheat, honest):
            validated = validate(ctx, prop)
            assert validated.valid and validated.validation_seeds == list(validation_seeds(validation_seed(cfg.seed, prop.env_id)))
            assert validated.probe_actions == list(probe_actions(validation_seed(cfg.seed, prop.env_id)))
            hint = write_hint(ctx, prop)
            plays = play(ctx, prop, hint, [PlaySpec(index=0, hinted=False, seed=11), PlaySpec(index=0, hinted=True, seed=11)],
                         on_done=lambda payload: None)
            ids = []
            for payload in (prop, validated, hint, *plays):
                env = make_envelope(payload, run_id=log.run_id, producer="t", event_id=output_event_id(log.run_id, payload))
                log.append([env])
                ids.append(env.event_id)
            regret = estimate_regret(prop, list(zip(ids[3:], plays)), cfg.reward, hint.garbage_probe)
            log.append([make_envelope(regret, run_id=log.run_id, producer="t", event_id=output_event_id(log.run_id, regret))])
            probe = hint.garbage_probe
            assert probe is not None and probe.actions and probe.seed == play_specs(cfg.seed, prop.env_id, 1)[0].seed
            if prop is cheat:
                assert probe.terminated and probe.rewards[-1] == 1.0
                assert regret.trivial and regret.designer_reward == 0.0 and regret.garbage_reward == 1.0
            else:
                assert not regret.trivial and regret.garbage_reward is not None and regret.garbage_reward < 1.0
        assert verify_regrets(log) == []  # recomputed from the recorded probe and plays: exact
        assert [again.trivial for _, again in recompute_regrets(log)] == [True, False]
    finally:
        log.close()
    assert_nothing_escaped(pool, canary)


def test_old_events_upcast_to_the_fixed_inputs_and_no_probe():
    from spade_engine.events.catalogue import decode_payload

    v1 = {"env_id": "e", "valid": True, "checks": [{"name": "parse", "passed": True}]}
    ev = decode_payload("EnvironmentValidated", 1, v1)
    assert ev.validation_seeds == [11, 23] and ev.probe_actions == list(V1_PROBE_ACTIONS)
    no_code = decode_payload("EnvironmentValidated", 1, {"env_id": "e", "valid": False, "error_kind": "no_code", "failed_check": "extract"})
    assert no_code.validation_seeds == [] and no_code.probe_actions == []
    hint = decode_payload("HintWritten", 1, {"env_id": "e", "hint": "h", "policy_version": "v"})
    assert hint.garbage_probe is None
    regret = decode_payload("RegretEstimated", 1, {
        "env_id": "e", "skill": "s", "plain_rewards": [1.0], "hinted_rewards": [1.0], "win_rate_plain": 1.0,
        "win_rate_hinted": 1.0, "regret": 0.0, "designer_reward": 0.2,
    })
    assert (regret.trivial, regret.garbage_reward, regret.designer_reward) == (False, None, 0.2)
    assert msgspec.to_builtins(ev)["validation_seeds"] == [11, 23]


# ----------------------------------------------------------------------------------------------
# 8. an imported run's sandbox config on resume


def test_resume_uses_the_local_sandbox_config_not_the_recorded_one(tmp_path, monkeypatch):
    recorded = EngineConfig().model_copy(update={"sandbox": SandboxConfig(preload_modules=["spade_redteam_evil"], require_isolation=False)})
    local = tmp_path / "local.toml"
    local.write_text("[sandbox]\nrequire_isolation = true\nworkers = 3\n")
    cfg = with_local_sandbox(recorded, local)
    assert cfg.sandbox.preload_modules == [] and cfg.sandbox.require_isolation and cfg.sandbox.workers == 3
    assert with_local_sandbox(recorded).sandbox == SandboxConfig()  # no file: the defaults, still not the log's
    monkeypatch.setenv("SPADE_SANDBOX__WORKERS", "5")
    assert with_local_sandbox(recorded).sandbox.workers == 5  # this machine's environment counts
    monkeypatch.delenv("SPADE_SANDBOX__WORKERS")

    # `start --run`: the config the engine is opened with (a run whose RunStarted recorded the evil preload)
    from spade_engine.events.catalogue import RunStarted

    root = tmp_path / "data"
    run_id = new_run_id()
    (root / "runs" / run_id).mkdir(parents=True)
    log = SqliteEventLog(root / "runs" / run_id / "events.sqlite", run_id)
    log.append([make_envelope(RunStarted(config=recorded.model_dump(mode="json"), engine_version="0", seed=0), run_id=run_id, producer="t")])
    log.close()
    seen: list[EngineConfig] = []

    class Opened(Exception):
        pass

    def fake_open_engine(cfg, **kw):
        seen.append(cfg)
        raise Opened

    monkeypatch.setattr("spade_engine.runs.engine.open_engine", fake_open_engine)
    result = CliRunner().invoke(app, ["start", "--run", run_id, "-d", str(root), "--no-progress"])
    assert isinstance(result.exception, Opened), result.output
    assert seen and seen[0].sandbox.preload_modules == [] and seen[0].seed == 0

    from spade_engine.runs.worker_cli import _local

    assert _local(recorded, None, 2).sandbox.preload_modules == []
    assert _local(recorded, None, 2).sandbox.workers == 2
