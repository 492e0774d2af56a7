"""SandboxPool and sessions: isolation layers, multi-turn state, concurrency, timeouts, crashes,
recycling, and no worker left behind (even when the engine itself is killed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from sandbox_support import ENVS, fast_config, sandbox_processes, wait_no_sandbox_processes

from spade_engine.sandbox import (
    LAYERS,
    EnvError,
    IsolationError,
    PoolExhausted,
    SandboxCrash,
    SandboxError,
    SandboxPool,
    StepTimeout,
)

pytestmark = pytest.mark.sandbox

TARGET_SUM = (ENVS / "target_sum_env.py").read_text()
GUESS = (ENVS / "guess_number_env.py").read_text()

BLOCKING = textwrap.dedent(
    '''
    import time
    class BlockEnv:
        def reset(self, seed=None):
            return "hi", {}
        def step(self, action):
            if action == "hang":
                time.sleep(10**6)
            if action == "die":
                import os
                os._exit(3)
            if action == "raise":
                raise ValueError("bad move")
            if action == "nan":
                return "x", float("nan"), False, False, {}
            return "echo:" + action, 0.0, False, False, {"n": len(action)}
    '''
)


@pytest.fixture(scope="module")
def cfg():
    return fast_config(uid_base=2_000_000_010)


@pytest.fixture(scope="module")
def pool(cfg):
    p = SandboxPool(cfg)
    yield p
    p.close()
    assert wait_no_sandbox_processes(p) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="every layer needs root (CI and this machine run as root)")
def test_every_isolation_layer_is_active_as_root(pool):
    assert set(pool.layers) == set(LAYERS)
    assert all(pool.layers.values()), pool.layer_details
    assert pool.missing_layers == []


def test_missing_layers_are_reported_and_required_isolation_refuses(cfg):
    with SandboxPool(fast_config(workers=1, uid_base=2_000_000_020), isolate=False) as bare:
        assert bare.layers["uid_drop"] is False and bare.layers["net_namespace"] is False
        assert "audit_hook" in bare.missing_layers
    with pytest.raises(IsolationError, match="uid_drop"):
        SandboxPool(fast_config(workers=1, uid_base=2_000_000_020, require_isolation=True), isolate=False)
    assert wait_no_sandbox_processes(fast_config(workers=1, uid_base=2_000_000_020)) == []


def test_multi_turn_episode_keeps_its_state_between_turns(pool):
    with pool.open_session(TARGET_SUM) as s:
        assert (s.class_name, s.contract, s.has_solution) == ("TargetSumEnv", "spade", True)
        obs, info = s.reset(seed=7)
        target = int(obs.split("Reach exactly ")[1].split()[0])
        total = 0
        for _ in range(3):
            obs, reward, terminated, truncated, info = s.step("\\boxed{1}")
            total += 1
            assert info["total"] == total and not terminated
        actions = s.solution()
        assert len(actions) >= 1
        for a in actions:
            obs, reward, terminated, truncated, info = s.step(a)
        assert terminated and reward == 1.0 and info["total"] == target


def test_concurrent_sessions_from_threads_are_independent(pool):
    results = {}

    def play(seed):
        with pool.open_session(GUESS) as s:
            s.reset(seed=seed)
            sol = s.solution()
            results[seed] = (sol, s.step(sol[0])[1])

    threads = [threading.Thread(target=play, args=(seed,)) for seed in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(results) == list(range(6))
    assert all(reward == 1.0 for _, reward in results.values())


def test_open_session_waits_for_a_free_worker_then_times_out(pool, cfg):
    held = [pool.open_session(BLOCKING) for _ in range(cfg.workers)]
    try:
        t0 = time.monotonic()
        with pytest.raises(PoolExhausted):
            pool.open_session(BLOCKING, acquire_timeout_s=0.3)
        assert time.monotonic() - t0 >= 0.3
        released = []

        def release_soon():
            time.sleep(0.3)
            held[0].close()
            released.append(True)

        threading.Thread(target=release_soon).start()
        with pool.open_session(BLOCKING, acquire_timeout_s=30) as s:
            assert released == [True]
            s.reset(seed=0)
    finally:
        for s in held:
            s.close()


def test_step_timeout_kills_the_worker_and_the_pool_recovers(pool, cfg):
    before = set(pool.worker_pids())
    s = pool.open_session(BLOCKING, step_timeout_s=0.5)
    s.reset(seed=0)
    assert s.step("hello")[0] == "echo:hello"
    t0 = time.monotonic()
    with pytest.raises(StepTimeout) as exc:
        s.step("hang")
    assert time.monotonic() - t0 < 15  # the 0.5 s limit cut it short (loose bound: busy CI)
    assert exc.value.kind == "timeout"
    assert not s.alive
    with pytest.raises(SandboxCrash):
        s.step("hello")
    s.close()
    assert set(pool.worker_pids()) != before  # that worker was replaced
    with pool.open_session(BLOCKING) as s2:
        s2.reset(seed=0)
        assert s2.step("again")[0] == "echo:again"
    assert len(sandbox_processes(pool)) <= cfg.workers


def test_worker_death_is_a_crash_and_env_errors_keep_the_session(pool):
    with pool.open_session(BLOCKING) as s:
        s.reset(seed=0)
        with pytest.raises(EnvError) as raised:
            s.step("raise")
        assert raised.value.kind == "crash" and "ValueError: bad move" in str(raised.value)
        with pytest.raises(EnvError) as bad_reward:
            s.step("nan")
        assert bad_reward.value.kind == "contract" and "not finite" in str(bad_reward.value)
        assert s.step("still alive")[0] == "echo:still alive"
        with pytest.raises(SandboxCrash) as died:
            s.step("die")
        assert died.value.kind == "crash" and "exited with code 3" in str(died.value)
        assert not s.alive


def test_workers_are_recycled_after_max_tasks():
    cfg = fast_config(workers=1, max_tasks_per_worker=2, uid_base=2_000_000_030)
    with SandboxPool(cfg) as p:
        first = p.worker_pids()
        for _ in range(2):
            with p.open_session(BLOCKING) as s:
                s.reset(seed=0)
        second = p.worker_pids()
        assert second != first and p.recycled == 1
        with p.open_session(BLOCKING) as s:
            assert s.reset(seed=0)[0] == "hi"
    assert wait_no_sandbox_processes(p) == []


def test_syntax_errors_and_missing_classes_fail_open_session(pool):
    with pytest.raises(EnvError) as e1:
        pool.open_session("def broken(:\n")
    assert e1.value.kind == "syntax"
    with pytest.raises(EnvError) as e2:
        pool.open_session("class Helper:\n    pass\n")
    assert e2.value.kind == "contract"


def test_no_worker_survives_the_engine_being_killed(tmp_path):
    cfg = fast_config(workers=2, uid_base=2_000_000_040)
    script = tmp_path / "engine.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, time
            from spade_engine.config import SandboxConfig
            from spade_engine.sandbox import SandboxPool
            pool = SandboxPool(SandboxConfig(**{cfg.model_dump()!r}))
            s = pool.open_session({BLOCKING!r}, step_timeout_s=60)
            s.reset(seed=0)
            print("ready", flush=True)
            s.step("hang")
            """
        )
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.3)
        assert len(sandbox_processes(cfg)) >= 2  # zygotes, and the task hanging in step()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert wait_no_sandbox_processes(cfg, timeout=15) == []


def test_session_rejects_non_string_actions(pool):
    with pool.open_session(BLOCKING) as s:
        s.reset(seed=0)
        with pytest.raises(TypeError):
            s.step(42)  # type: ignore[arg-type]


def test_closed_pool_refuses_new_sessions(cfg):
    p = SandboxPool(fast_config(workers=1, uid_base=2_000_000_050))
    p.close()
    with pytest.raises(SandboxError):
        p.open_session(BLOCKING)


@pytest.mark.parametrize("name", sorted(p.name for p in ENVS.glob("*.py")))
def test_check_env_passes_on_the_engine_side_view_of_every_example(pool, name):
    """Both contracts, driven through one Gymnasium interface while the code runs sandboxed."""
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    with pool.open_session((ENVS / name).read_text()) as s:
        env = s.as_gymnasium()
        assert isinstance(env, gym.Env)
        check_env(env, skip_render_check=True, skip_close_check=True)
        obs, info = env.reset(seed=3)
        assert env.observation_space.contains(obs)
