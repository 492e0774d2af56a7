"""The red-team round of issue 31, one test per class of finding, each with hostile environments
written for this project and the verdict a correct engine gives:

1. the audit hook left behind: sub-interpreters (``_testcapi``, a C module under a dotted name,
   the import system's loader called directly), the cached ``_ctypes``, the loader's frame, a
   forged guard (patched modules, builtins, tables), a reply forged on the pipe, arguments whose
   methods lie, frames and tracers that would lead to the hook: all ``forbidden`` (or ``valid``
   where the attack finds nothing to take), and the forbidden C modules' files are not there even
   with the hook off;
2. limits per task: no process creation in a task (raw fork, posix_spawn, clone), no memfd, a
   cgroup per task whose OOM kill is a ``memory`` verdict, and nothing left after the pool;
3. one task breaking the next: state left on descriptors and on the zygote (non-blocking mode,
   signal owner, F_SETSIG, pipe size, priority, affinity), in the task's process (umask, working
   directory, environment, signal mask and dispositions, rlimits, a thread, a full pipe, a note in
   /tmp) or in its reply pipe (the start of a frame) reaches no other task;
4. one large event: wide tables for 25 turns, escape-heavy observations, an echo of every action,
   through the engine's loop on SQLite: the run and its resume go on, every event under the limit;
5. verdicts on the trusted side: gymnasium's check runs in the engine, ``parse`` is refused once
   environment code ran in a task, and solution() is replayed in a fresh process;
6. rewards that do not depend on the action: a deliberately wrong answer of the solution's shape
   must lose (the play-time part is in ``test_designer_reward_gaming.py``);
7. observations and source made to make the engine's patterns backtrack: validated, hinted,
   played and estimated in bounded time (the parsers one by one: ``test_bounded_regex.py``);
9. what the sandbox shows of the host: uptime, RAM, disk, mounts, devices, processes, load, host
   name; what stays visible is documented;
LOW. a 32-bit system call in a thread, a lone surrogate, a worker whose first command fails.

Programs that run in the default pool are in ``tests/redteam/`` (so ``test_redteam.py`` runs them
too); those that need the audit hook off, several tasks in a row or another pool are in
``tests/redteam/round3/``. Every test asserts that nothing escaped.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import msgspec
import pytest
from sandbox_support import ENVS, REDTEAM, fast_config, marker_files, sandbox_processes, wait_no_sandbox_processes

from spade_engine.sandbox import SandboxCrash, SandboxError, SandboxPool
from spade_engine.sandbox.validator import Validator

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox's OS layers need root (CI and this machine run as root)"),
]

ROUND3 = REDTEAM / "round3"
GOOD = (ENVS / "arithmetic_env.py").read_text()


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
    p = SandboxPool(fast_config(uid_base=2_000_000_200))
    yield p
    p.close()
    assert wait_no_sandbox_processes(p) == []


@pytest.fixture(scope="module")
def bare(canary):
    """The OS layers alone (audit hook off)."""
    p = SandboxPool(fast_config(uid_base=2_000_000_205, step_timeout_s=10.0), audit_hook=False)
    yield p
    p.close()
    assert wait_no_sandbox_processes(p) == []


@pytest.fixture(scope="module")
def validator(pool):
    return Validator(pool, turn_limit=8)


def nothing_escaped(pool: SandboxPool, canary: subprocess.Popen) -> None:
    assert canary.poll() is None, "the engine's process group was hit"
    assert marker_files() == [], "a file was written outside the sandbox"
    deadline = time.monotonic() + 5
    while len(sandbox_processes(pool)) > pool.config.workers and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(sandbox_processes(pool)) <= pool.config.workers, "a process outlived its task"


def crash_in_session(pool: SandboxPool, path: Path) -> SandboxCrash:
    """Open a session on ``path`` (sessions run no static screen: the OS layers alone) and return
    the SandboxCrash its reset() ends with."""
    with pytest.raises(SandboxCrash) as exc:
        with pool.open_session(path.read_text()) as s:
            s.reset(seed=0)
    return exc.value


def check(v: Validator, path: Path, *words: str):
    r = v.validate(path.read_text())
    assert verdict(r) in expected(path), f"{path.name}: {verdict(r)} at {r.failed_check}: {r.detail}"
    for w in words:
        assert w in r.detail, (path.name, r.detail)
    return r


# ----------------------------------------------------------------------------------------------
# 1. the audit hook left behind


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("subinterp_testcapi.py", "import _testcapi"),
        ("subinterp_dotted_name.py", "spade_pkg._xxsubinterpreters"),
        ("subinterp_imp_direct.py", "spade.load_extension"),
        ("ctypes_from_the_cache.py", "extension module _ctypes"),
        ("loader_generator_frame.py", "a frame of the extension loader"),
        ("forge_guard_patches.py", "write to /etc/spade_redteam_forged"),
        ("forge_reply_on_the_pipe.py", "forged"),
        ("str_subclass_import.py", "not a str"),
        ("trace_the_io_thread.py", "sys._current_frames"),
        ("hook_runs_my_code.py", ""),
        ("frames_reach_the_hook.py", ""),
    ],
)
def test_the_hook_cannot_be_left_behind_or_forged(validator, pool, canary, name, why):
    check(validator, REDTEAM / name, why)
    nothing_escaped(pool, canary)
    assert validator.validate(GOOD).valid


def test_the_forbidden_c_modules_are_not_there_even_with_the_hook_off(bare, canary):
    """The files of the modules that make sub-interpreters (or reach raw memory for tests) are
    covered by /dev/null in the sandbox's root: with the hook off they still cannot be loaded."""
    body = (
        "import importlib, json\nclass ProbeEnv:\n    def reset(self, seed=None):\n        out = {}\n"
        "        for name in ('_testcapi', '_testinternalcapi', '_xxsubinterpreters', '_ctypes_test', 'xxlimited'):\n"
        "            try:\n                importlib.import_module(name)\n                out[name] = 'loaded'\n"
        "            except ImportError as e:\n                out[name] = 'ImportError'\n"
        "        import os, stat, sys, importlib.machinery as m\n"
        "        files = [os.path.join(d, '_testcapi' + x) for d in sys.path for x in m.EXTENSION_SUFFIXES]\n"
        "        out['files'] = sorted({stat.S_ISCHR(os.stat(f).st_mode) for f in files if os.path.exists(f)})\n"
        "        return json.dumps(out), {}\n    def step(self, action):\n        return 'x', 0.0, True, False, {}\n"
    )
    with bare.open_session(body) as s:
        seen = json.loads(s.reset(seed=0)[0])
    files = seen.pop("files")
    assert set(seen.values()) == {"ImportError"}, seen
    assert files == [True]  # the file is there, as the null device
    assert "forbidden extension modules covered" in bare.layer_details["minimal_root"]
    nothing_escaped(bare, canary)


# ----------------------------------------------------------------------------------------------
# 2. limits per task


@pytest.mark.parametrize("name", ["fork_raw_syscall.py", "vfork_via_ctypes.py", "clone_a_process.py"])
def test_a_task_is_one_process_whatever_primitive_it_reaches(bare, canary, name):
    """With the hook off (so no audit event can stop it), every way to a new process kills the task."""
    exc = crash_in_session(bare, ROUND3 / name)
    assert exc.kind in expected(ROUND3 / name) and "seccomp" in str(exc), str(exc)
    nothing_escaped(bare, canary)


def test_memfd_is_refused_and_the_task_cgroup_counts_the_task(pool, canary):
    with pool.open_session((ROUND3 / "memfd_hoard.py").read_text()) as s:
        obs, _ = s.reset(seed=1)
        task = s.task
    assert obs.startswith("memfd refused: 1.")  # EPERM
    assert pool.layers["cgroup"], pool.layer_details["cgroup"]
    usage = task.usage  # read from the task's own cgroup once it ended
    assert usage is not None and usage.oom_kills == 0
    assert usage.memory_peak_bytes is not None and usage.memory_peak_bytes < 200 << 20
    assert usage.pids_peak is None or usage.pids_peak <= 3  # the task and its I/O thread
    nothing_escaped(pool, canary)


def test_an_oom_kill_in_the_task_cgroup_is_a_memory_verdict(canary):
    """A task whose resident memory passes its cgroup's limit (set below the address-space limit
    here, to reach it) is killed by the kernel; the engine reads the OOM kill from the cgroup."""
    with SandboxPool(fast_config(workers=1, uid_base=2_000_000_210, memory_mb=512)) as p:
        assert p.cgroups is not None and p.cgroups.available
        p.cgroups.memory_bytes = 160 << 20
        r = check(Validator(p, turn_limit=4), ROUND3 / "resident_hog.py", "cgroup limit of 160 MiB")
        assert r.failed_check == "reset"
        assert Validator(p, turn_limit=4).validate(GOOD).valid
        roots = list(p.cgroups.roots.values())
        nothing_escaped(p, canary)
    assert roots and not any(r.exists() for r in roots), "the pool's cgroups outlived it"


# ----------------------------------------------------------------------------------------------
# 3. one task breaking the next


def test_state_left_on_descriptors_and_the_zygote_reaches_no_other_task(canary):
    with SandboxPool(fast_config(workers=1, uid_base=2_000_000_215)) as p:
        v = Validator(p, turn_limit=4)
        first_pid = p.worker_pids()
        with p.open_session((ROUND3 / "read_state_left.py").read_text()) as s:
            before = json.loads(s.reset(seed=0)[0])
        leave = ROUND3 / "leave_state_behind.py"
        for _ in range(2):
            check(v, leave)
            with p.open_session(leave.read_text()) as s:
                s.reset(seed=1)
        with p.open_session((ROUND3 / "read_state_left.py").read_text()) as s:
            after = json.loads(s.reset(seed=0)[0])
        assert after == before  # the same clean slate
        assert sorted(map(int, after["fds"])) == sorted(map(int, before["fds"])) and len(after["fds"]) == 5
        for fd, entry in after["fds"].items():
            assert not entry["nonblock"] and not entry["async"] and entry["owner"] == 0 and entry["sig"] == 0, (fd, entry)
        assert v.validate(GOOD).valid  # the innocent environment after it
        assert p.worker_pids() == first_pid  # and no worker died or was replaced
        nothing_escaped(p, canary)


@pytest.mark.parametrize("name", ["leave_process_state.py", "leave_bytes_in_the_reply_pipe.py"])
def test_state_left_in_the_task_process_reaches_no_other_task(canary, name):
    """A task changes what a process owns (umask, working directory, environment, signal mask and
    dispositions, lower rlimits, a thread left running, a full pipe, a note in /tmp) or leaves
    the start of a frame in its reply pipe: the next task on the same worker starts from the same
    clean slate, and an innocent environment after it validates."""
    with SandboxPool(fast_config(workers=1, uid_base=2_000_000_232)) as p:
        v = Validator(p, turn_limit=4)
        reader = (ROUND3 / "read_process_state.py").read_text()
        with p.open_session(reader) as s:
            before = json.loads(s.reset(seed=0)[0])
        assert before["threads"] == 1 and before["blocked"] == [] and before["tmp"] == [] and before["cwd_is_tmp"]
        assert not any(before["pending"].values())  # nothing waiting on any descriptor
        attack = ROUND3 / name
        for _ in range(2):
            check(v, attack)
            try:
                with p.open_session(attack.read_text()) as s:
                    s.reset(seed=1)
                    s.step("\\boxed{1}")
            except SandboxError as exc:  # the frame left in the pipe ends that task (its own verdict)
                assert name == "leave_bytes_in_the_reply_pipe.py", exc
        with p.open_session(reader) as s:
            after = json.loads(s.reset(seed=0)[0])
        assert after == before
        assert v.validate(GOOD).valid  # the innocent environment after it
        nothing_escaped(p, canary)


# ----------------------------------------------------------------------------------------------
# 4. one large event


def _engine_run(tmp_path: Path, pool: SandboxPool, sources: list[str], *, run_id: str, envs: int, plays: int = 2,
                skills: tuple[str, ...] = ("arithmetic",)):
    """Run the engine's own loop on a SQLite log, its designer replaced by ``sources`` (one per
    environment, in turn, of the ``skills`` in turn); return the stop reason."""
    import hashlib

    from spade_engine.blobs import BlobStore
    from spade_engine.config import load_config
    from spade_engine.engine.corpus import Corpus
    from spade_engine.engine.loop import Engine
    from spade_engine.engine.pipeline import env_id_for
    from spade_engine.engine.stages import StageContext
    from spade_engine.events.catalogue import EnvironmentProposed
    from spade_engine.events.sqlite.log import SqliteEventLog
    from spade_engine.policy.registry import make_policy
    from spade_engine.sandbox import StepTimeout

    log = SqliteEventLog(tmp_path / "events.sqlite", run_id)
    try:
        cfg = load_config(overrides={"seed": 3, "loop.max_envs": envs, "loop.plays_per_env": plays, "loop.max_repairs": 0})
        cfg = cfg.model_copy(update={"sandbox": pool.config})
        policy = make_policy(cfg.policy)
        ctx = StageContext(run_id=run_id, cfg=cfg, policy=policy, corpus=Corpus.from_paths([]),
                           validator=Validator(pool, turn_limit=cfg.loop.turn_limit), pool=pool,
                           sandbox_layers=dict(pool.layers), step_errors=((StepTimeout,), (SandboxCrash, SandboxError)))
        engine = Engine(log=log, cfg=cfg, ctx=ctx, blobs=BlobStore(tmp_path / "blobs"))

        def propose(eng, index):
            code = sources[index % len(sources)]
            return EnvironmentProposed(env_id=env_id_for(eng.run_id, index), skill=skills[index % len(skills)], difficulty=0.5, code=code,
                                       code_sha256=hashlib.sha256(code.encode()).hexdigest(), policy_version=policy.version)

        engine.proposer = propose
        return engine.run()
    finally:
        log.close()


def test_no_single_event_can_stop_a_run_on_sqlite(tmp_path, pool, canary):
    """44 kB tables for 25 turns, observations of escape-heavy characters just under the
    character limit, an observation echoing the agent's actions a hundredfold: the run goes on
    through every environment, a resume goes on too, and no event is over the engine's limit."""
    from spade_engine.blobs import BlobStore
    from spade_engine.events.sizes import ENGINE_EVENT_BYTES
    from spade_engine.events.sqlite.log import SqliteEventLog
    from spade_engine.events.store import new_run_id

    names = ["wide_turns.py", "escapes_in_every_turn.py", "echo_the_action.py"]
    sources = [(ROUND3 / n).read_text() for n in names]
    run_id = new_run_id()
    assert _engine_run(tmp_path, pool, sources, run_id=run_id, envs=3) == "max_envs"
    assert _engine_run(tmp_path, pool, sources, run_id=run_id, envs=4) == "max_envs"  # resumed: one more
    log = SqliteEventLog(tmp_path / "events.sqlite", run_id, create=False)
    try:
        records = list(log.read())
    finally:
        log.close()
    assert max(len(r.raw) for r in records) <= ENGINE_EVENT_BYTES + 4096
    validated = [r.envelope.event() for r in records if r.envelope.type == "EnvironmentValidated"]
    assert [v.valid for v in validated] == [True] * 4, [(v.failed_check, v.checks[-1].detail[:200]) for v in validated if not v.valid]
    plays = [r.envelope.event() for r in records if r.envelope.type == "RolloutCompleted"]
    assert len({p.env_id for p in plays}) == 4 and all(len(p.turns) >= 1 for p in plays)
    blobs = BlobStore(tmp_path / "blobs")
    whole = [blobs.get_bytes(t.observation_ref) for p in plays for t in p.turns if t.observation_ref is not None]
    heavy = [b.decode() for b in whole if "\U0001f642" in b.decode()]
    assert heavy and all(len(t) > 98_000 for t in heavy)  # the escape-heavy observations, whole in their blobs
    assert min(len(msgspec.json.encode(t)) for t in heavy) > 3 * 98_000  # as JSON inline: about 370 kB each
    assert sum(len(b) for b in whole) > 8 * ENGINE_EVENT_BYTES  # what the plays would have held inline
    stops = [r.envelope.payload["reason"] for r in records if r.envelope.type == "RunStopped"]
    assert stops == ["max_envs", "max_envs"]
    nothing_escaped(pool, canary)


# ----------------------------------------------------------------------------------------------
# 5. verdicts on the trusted side


@pytest.mark.parametrize(
    ("name", "check_name"),
    [
        ("forge_check_env_pass.py", "gymnasium_api"),
        ("forge_check_env_charset.py", "gymnasium_api"),
        ("solution_arms_the_win.py", "replay"),
        ("solution_arms_globally.py", "replay"),
    ],
)
def test_verdicts_are_computed_where_the_environment_never_ran(validator, pool, canary, name, check_name):
    r = check(validator, REDTEAM / name)
    assert r.failed_check == check_name
    nothing_escaped(pool, canary)


def test_parse_is_refused_once_environment_code_ran_in_the_task(pool):
    t = pool.task(timeout_s=20)
    try:
        parsed = t.call("parse", timeout=5, source=GOOD)
        assert parsed.forbidden == []
        t.call("load", timeout=5, source=GOOD, class_name="ArithmeticEnv")
        with pytest.raises(SandboxError, match="no environment code has run"):
            t.call("parse", timeout=5, source="import subprocess")
    finally:
        t.end()


# ----------------------------------------------------------------------------------------------
# 6. outcomes that do not depend on the action (the validator's part)


@pytest.mark.parametrize("name", ["wins_except_probe_shapes.py", "coin_flip_outcome.py"])
def test_a_deliberately_wrong_answer_must_lose(validator, pool, canary, name):
    r = check(validator, REDTEAM / name)
    assert not r.valid
    nothing_escaped(pool, canary)


# ----------------------------------------------------------------------------------------------
# 7. model text stalling the engine's own process


def test_observations_made_to_stall_the_parsers_are_answered_within_their_bounds(tmp_path, pool, canary):
    """Validation, the hint (the procedural hint writer reads the source), a play of every kind
    (the procedural agent's patterns over the observations, the reply's answer extraction) and
    the estimate of an environment whose observations and source are made to make the engine's
    patterns backtrack: done in bounded time (with the standard library's patterns one call took
    minutes to hours)."""
    from spade_engine.engine.hints import clean_hint
    from spade_engine.engine.rollouts import parse_boxed
    from spade_engine.envsources.scorer import extract_answer
    from spade_engine.evaluation.scoring import extract_answer as eval_extract_answer
    from spade_engine.events.store import new_run_id

    from spade_engine.policy.procedural.families import FAMILIES

    source = (ROUND3 / "stall_the_parsers.py").read_text()
    skills = tuple(sorted(FAMILIES))  # the procedural agent parses an observation with its skill's family
    t0 = time.perf_counter()
    assert _engine_run(tmp_path, pool, [source], run_id=new_run_id(), envs=len(skills), skills=skills) == "max_envs"
    took = time.perf_counter() - t0
    assert took < 30 * len(skills), took
    text = ("Known: " + "ab = 1.5 m/s" * 400 + " \\boxed{" * 3000 + " <answer>" * 3000 + " ```" + " \t" * 20000)
    t0 = time.perf_counter()
    for parse in (parse_boxed, extract_answer, eval_extract_answer, clean_hint):  # what a reply like it meets
        parse(text)
    assert time.perf_counter() - t0 < 2.0
    nothing_escaped(pool, canary)


# ----------------------------------------------------------------------------------------------
# 9. what the sandbox shows of the host


def test_the_host_uptime_ram_disk_and_mounts_are_hidden(bare, canary):
    import errno

    started = time.monotonic()
    with SandboxPool(fast_config(workers=1, uid_base=2_000_000_220), audit_hook=False) as p:
        age = time.monotonic() - started
        with p.open_session((ROUND3 / "host_facts.py").read_text()) as s:
            facts = json.loads(s.reset(seed=0)[0])
        age = time.monotonic() - started
        assert p.layers["time_namespace"]
        nothing_escaped(p, canary)
    # the clocks start with the worker (at 1-2 s: the offset is whole seconds)
    assert 0 <= facts["boottime"] <= age + 2.5 and 0 <= facts["monotonic"] <= age + 2.5
    assert facts["sysinfo"] == [-1, errno.EPERM]
    assert facts["phys_pages"] != os.sysconf("SC_PHYS_PAGES")  # glibc reads it from the failing sysinfo
    assert facts["statvfs_root"] == facts["statvfs_prefix"] == errno.EPERM
    assert facts["statmount"] == [-1, errno.ENOSYS] and facts["listmount"] == [-1, errno.ENOSYS]
    assert facts["release"] == os.uname().release  # documented: the kernel release stays visible
    assert facts["cpus"] >= 1  # documented: so does the CPU count


def test_the_hosts_devices_processes_load_and_name_are_hidden_and_the_rest_documented(bare, canary):
    with SandboxPool(fast_config(workers=1, uid_base=2_000_000_234), audit_hook=False) as p:
        with p.open_session((ROUND3 / "host_facts_more.py").read_text()) as s:
            facts = json.loads(s.reset(seed=0)[0])
        nothing_escaped(p, canary)
    # hidden: the device nodes but the five harmless ones, every process, /sys, the load average,
    # the host name, the engine's pids, and what other tasks used
    assert facts["dev"] == ["full", "null", "random", "urandom", "zero"]
    assert facts["proc"] == [] and facts["sys"].startswith("FileNotFoundError")
    assert facts["loadavg"].startswith("OSError")
    assert facts["nodename"] == "sandbox" != os.uname().nodename
    assert (facts["pid"], facts["ppid"]) == (2, 1)  # the task and its zygote, in the task's PID namespace
    assert facts["children"] == [0, 0.0, 0.0, 0]  # a task has no children, and sees none of another's
    assert facts["maxrss_kb"] < p.config.memory_mb * 1024  # its own use only
    # visible, and docs/sandbox.md says so
    u = os.uname()
    assert (facts["release"], facts["version"], facts["machine"]) == (u.release, u.version, u.machine)
    assert facts["affinity"] == sorted(os.sched_getaffinity(0))
    assert abs(facts["realtime"] - time.time()) < 60
    assert p.config.uid_base <= facts["uid"] < p.config.uid_base + 1000
    docs = (Path(__file__).resolve().parent.parent / "docs" / "sandbox.md").read_text()
    for visible in ("the kernel release, version and architecture (`uname`", "the CPUs (`sched_getaffinity`",
                    "the wall clock (`CLOCK_REALTIME`)", "its own resource use (`getrusage`", "its uid"):
        assert visible in docs, visible
    for hidden in ("`/dev` holds only `null`, `zero`, `full`, `random` and `urandom`", "the load average"):
        assert hidden in docs, hidden


# ----------------------------------------------------------------------------------------------
# LOW


def test_a_32bit_system_call_in_a_thread_kills_the_task(bare, canary):
    if os.uname().machine != "x86_64":
        pytest.skip("int 0x80 is x86_64's 32-bit entry")
    exc = crash_in_session(bare, ROUND3 / "thread_32bit_syscall.py")
    assert exc.kind == "forbidden" and "seccomp" in str(exc), str(exc)
    nothing_escaped(bare, canary)


@pytest.mark.parametrize(("name", "kind"), [("surrogate_in_exception.py", "crash"), ("surrogate_in_forbidden_path.py", "forbidden")])
def test_a_lone_surrogate_is_the_environments_fault(validator, name, kind):
    assert verdict(check(validator, REDTEAM / name)) == kind


def test_a_worker_whose_first_command_fails_goes_back_to_the_pool(monkeypatch, canary):
    """Fault injection (a broken control socket at the first command, which no real environment
    can cause on demand): the task fails as a sandbox error and the worker is replaced, not lost."""
    from spade_engine.sandbox import pool as pool_module

    with SandboxPool(fast_config(workers=1, uid_base=2_000_000_225)) as p:
        real = pool_module._Worker.begin_task
        calls = []

        def broken(self, request, fds):
            calls.append(1)
            if len(calls) == 1:
                raise BrokenPipeError(32, "Broken pipe")
            return real(self, request, fds)

        monkeypatch.setattr(pool_module._Worker, "begin_task", broken)
        with pytest.raises(SandboxCrash) as exc:
            p.task(timeout_s=10)
        assert exc.value.kind == "sandbox" and "not accepting tasks" in str(exc.value)
        assert len(p._idle) == p.config.workers  # back in the pool
        assert Validator(p, turn_limit=4).validate(GOOD).valid
        nothing_escaped(p, canary)


@pytest.mark.parametrize("name", ["puzzle_hidden_hash.py", "puzzle_hidden_rng.py"])
def test_a_puzzle_whose_answer_is_a_hidden_function_of_its_values_is_unsolvable(validator, name):
    """Caught before any play, by a static screen answered in a task where no environment code
    had run (a hand-written generator, e.g. an inline LCG, is not caught: docs/sandbox.md)."""
    from spade_engine.sandbox.scaffold import inline

    r = validator.validate(inline((ROUND3 / name).read_text()))
    assert verdict(r) in expected(ROUND3 / name) and r.failed_check == "solution", r.detail
    assert "a generator or hash of its own" in r.detail
    honest = inline((ROUND3 / name).read_text().replace("hash((a, b)) % 1000", "a * b").replace(
        "random.Random(a * 100 + b).randint(1, 1000)", "a * 100 + b"))
    assert validator.validate(honest).valid  # the same puzzle with a computable answer
