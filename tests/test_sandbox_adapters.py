"""Adapters: every example environment, adapted, passes gymnasium's own check_env.

The examples are this repository's own trusted files, so this test (alone) loads them in the test
process to run check_env directly; the validator runs the same check inside the sandbox."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from sandbox_support import ENVS

from spade_engine.sandbox.adapters import AnyText, SpadeEnvAdapter, adapt, boxed_actions, contract_of


def _load_class(path):
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return next(v for k, v in vars(mod).items() if isinstance(v, type) and k.endswith("Env") and v.__module__ == mod.__name__)


@pytest.mark.parametrize("path", sorted(ENVS.glob("*.py")), ids=lambda p: p.stem)
def test_check_env_passes_on_every_adapted_example(path):
    cls = _load_class(path)
    env = adapt(cls())
    assert isinstance(env, gym.Env)
    check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=5)
    assert env.observation_space.contains(obs) and isinstance(info, dict)
    obs, reward, terminated, truncated, info = env.step("garbage")
    assert isinstance(obs, str) and isinstance(terminated, bool) and isinstance(truncated, bool)


def test_contracts_are_told_apart():
    assert contract_of(_load_class(ENVS / "gym_parity_env.py")) == "gymnasium"
    assert contract_of(_load_class(ENVS / "arithmetic_env.py")) == "spade"
    assert isinstance(adapt(_load_class(ENVS / "arithmetic_env.py")()), SpadeEnvAdapter)


def test_gymnasium_env_without_text_spaces_is_rejected():
    class BoxEnv(gym.Env):
        observation_space = gym.spaces.Discrete(3)
        action_space = gym.spaces.Discrete(3)

    with pytest.raises(TypeError, match="observation_space must be a gymnasium.spaces.Text"):
        adapt(BoxEnv())


def test_any_text_accepts_every_character_but_limits_length():
    space = AnyText(10)
    assert space.contains("\u00fc \\boxed{}")
    assert not space.contains("x" * 11)
    assert not space.contains(b"bytes")
    assert space.contains(space.sample())


def test_boxed_actions_are_balanced_and_ordered():
    assert boxed_actions("a \\boxed{1} then \\boxed{\\frac{1}{2}} and \\boxed{") == ["\\boxed{1}", "\\boxed{\\frac{1}{2}}"]
    assert boxed_actions("no answer") == []
