"""The turn budget (issue 17): the sandbox constructs an environment, then caps its own max_turns at
the budget (the release's respect_game_max_turns); `episode_ends` checks min(designed, budget);
long-horizon environments (own max_turns 30 and 40) pass under the default config; one that
ignores the cap is still ended by the runner. Also: common stdlib names need no import."""

from __future__ import annotations

import pytest

from sandbox_support import fast_config
from spade_engine.config import load_config
from spade_engine.engine.rollouts import PlaySpec, play_episodes
from spade_engine.engine.seed_archive import BUNDLED_DIR
from spade_engine.policy.protocol import Sample
from spade_engine.sandbox import SandboxPool
from spade_engine.sandbox.validator import Validator

pytestmark = pytest.mark.sandbox

BUDGET = load_config().loop.turn_limit  # the default budget

IGNORES_CAP = '''
import re


class StubbornEnv:
    """Counts to its own hard-coded limit of 60 turns, whatever max_turns says."""

    def __init__(self, max_turns=40):
        self.max_turns = max_turns
        self.turn_count = 0
        self.reset()

    def reset(self, seed=None):
        self.turn_count = 0
        return "Say \\\\boxed{done} to win.", {}

    def step(self, action):
        self.turn_count += 1
        if "\\\\boxed{done}" in action:
            return "Won.", 1.0, True, False, {}
        return "Not yet.", 0.0, False, self.turn_count >= 60, {}

    def solution(self):
        return ["\\\\boxed{done}"]
'''

NEVER_TRUNCATES_AT_12 = IGNORES_CAP.replace("max_turns=40", "max_turns=12")

REQUIRES_MAX_TURNS = '''
class NeedsTurnsEnv:
    """Needs max_turns to be constructed; wins on \\\\boxed{go}."""

    def __init__(self, max_turns):
        self.max_turns = max_turns
        self.turn_count = 0

    def reset(self, seed=None):
        self.turn_count = 0
        return "Say \\\\boxed{go}.", {}

    def step(self, action):
        self.turn_count += 1
        if "\\\\boxed{go}" in action:
            return "Gone.", 1.0, True, False, {}
        return "Say \\\\boxed{go}.", 0.0, False, self.turn_count >= self.max_turns, {}

    def solution(self):
        return ["\\\\boxed{go}"]
'''

NO_IMPORTS = '''
class ForgetfulEnv:
    """Uses math, re, random, deque and Counter without importing them (the stdlib names are provided)."""

    def __init__(self, max_turns=6):
        self.max_turns = max_turns
        self.turn_count = 0
        self.queue = deque()
        self.reset()

    def reset(self, seed=None):
        rng = random.Random(seed)
        self.turn_count = 0
        self.target = int(math.sqrt(rng.randint(1, 50) ** 2))
        self.queue = deque([self.target])
        self.counts = Counter()
        return "Guess the number from 1 to 50 as \\\\boxed{n}.", {}

    def step(self, action):
        self.turn_count += 1
        m = re.search(r"\\\\boxed\\{(\\d+)\\}", action)
        self.counts[m.group(1) if m else ""] += 1
        if m and int(m.group(1)) == self.queue[0]:
            return "Right.", 1.0, True, False, {}
        return "No.", 0.0, False, self.turn_count >= self.max_turns, {}

    def solution(self):
        return ["\\\\boxed{" + str(self.target) + "}"]
'''


@pytest.fixture(scope="module")
def pool():
    p = SandboxPool(fast_config())
    yield p
    p.close()


@pytest.fixture(scope="module")
def validator(pool):
    return Validator(pool, turn_limit=BUDGET)


@pytest.mark.parametrize("name, designed", [("block_stacks.py", 30), ("maze_walk.py", 40)])
def test_long_horizon_environments_validate_under_the_default_budget(pool, validator, name, designed) -> None:
    code = (BUNDLED_DIR / name).read_text()
    assert f"max_turns={designed}" in code
    report = validator.validate(code)
    assert report.valid, report.detail
    checks = {c.name: c.detail for c in report.checks}
    assert f"max_turns {designed} capped at the budget {BUDGET}" in checks["import"]
    assert f"(limit {BUDGET})" in checks["episode_ends"]
    with pool.open_session(code, max_turns=BUDGET) as s:
        assert (s.designed_max_turns, s.max_turns) == (designed, BUDGET)
    # the same environment under the earlier default budget of 8 is capped there instead
    assert Validator(pool, turn_limit=8).validate(code).checks[3].detail.endswith("capped at the budget 8)")


def test_episode_ends_checks_min_of_designed_and_budget(validator) -> None:
    own12 = validator.validate(NEVER_TRUNCATES_AT_12)
    assert not own12.valid and own12.failed_check == "episode_ends"
    assert "its max_turns (12)" in own12.detail
    stubborn = validator.validate(IGNORES_CAP)
    assert not stubborn.valid and stubborn.failed_check == "episode_ends"
    assert f"the turn budget ({BUDGET})" in stubborn.detail


def test_an_environment_that_ignores_the_cap_is_ended_by_the_runner(pool) -> None:
    def generate(requests):
        return [Sample(text="I wait. \\boxed{wait}") for _ in requests]

    (play,) = play_episodes(
        env_id="x-e00000", specs=[PlaySpec(index=0, hinted=False, seed=1)],
        open_session=lambda: pool.open_session(IGNORES_CAP, max_turns=BUDGET), generate=generate,
        policy_version="v0", hint=None, turn_limit=BUDGET,
    )
    assert len(play.turns) == BUDGET and play.end_reason == "turn_limit"
    assert play.truncated and not play.terminated and play.episode_reward == 0.0


def test_a_class_that_requires_max_turns_gets_the_budget(pool, validator) -> None:
    report = validator.validate(REQUIRES_MAX_TURNS)
    assert report.valid, report.detail
    with pool.open_session(REQUIRES_MAX_TURNS, max_turns=BUDGET) as s:
        assert s.max_turns == BUDGET


def test_common_stdlib_names_need_no_import(validator) -> None:
    report = validator.validate(NO_IMPORTS)
    assert report.valid, report.detail
    # a common module asked of the wrong standard module resolves instead of failing the import
    wrong = "from random import re, randint\nfrom math import random, sqrt\n" + NO_IMPORTS
    report = validator.validate(wrong)
    assert report.valid, report.detail
    # the function random imported under the module's name still works as the module too
    both = NO_IMPORTS.replace("rng = random.Random(seed)", "rng = random.Random(seed)\n        _ = random() < 1.0")
    report = validator.validate("from random import random\n" + both)
    assert report.valid, report.detail
    # a star import binds random (the function) over the module: both uses still work
    report = validator.validate("from random import *\nfrom re import *\n" + both)
    assert report.valid, report.detail
    missing = "from random import no_such_name\n" + NO_IMPORTS
    report = validator.validate(missing)
    assert not report.valid and "cannot import name 'no_such_name'" in report.detail
