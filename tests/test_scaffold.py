"""The scaffold (issue 17): a designer may write only a game on the engine's TextGame base class
(setup, act, plan); the recorded code carries the base inlined and runs in the sandbox like any
environment; the scaffold prompt shows the seeds written as games without the base; a rejected
game is repaired with advice about its own methods."""

from __future__ import annotations


import pytest

from engine_support import ScriptedDesigner, run_scripted
from sandbox_support import fast_config
from spade_engine.config import load_config
from spade_engine.engine.designer_scaffold import SCAFFOLD_MARK, scaffold_designer_messages
from spade_engine.engine.seed_archive import load_seed_envs
from spade_engine.engine.stages import code_lines, copied_share
from spade_engine.sandbox import SandboxPool
from spade_engine.sandbox.scaffold import BASE_SOURCE, BEGIN, code_format, inline, is_scaffolded, strip, subclasses_base
from spade_engine.sandbox.validator import Validator
from spade_engine.policy.request_context import DesignContext

GAME = '''import random
import re


class PebbleCountEnv(TextGame):
    """Weigh two hidden piles of pebbles and answer how many pebbles there are."""

    max_turns = 6

    def setup(self, rng):
        self.piles = [rng.randint(2, 9), rng.randint(2, 9)]
        self.weighed = set()
        return "Two piles of pebbles. Commands: weigh 1, weigh 2, answer N (the total)."

    def act(self, command):
        words = command.split()
        if len(words) == 2 and words[0] == "weigh" and words[1] in ("1", "2"):
            k = int(words[1]) - 1
            reward = 0.0 if k in self.weighed else 0.05
            self.weighed.add(k)
            return f"Pile {k + 1} has {self.piles[k]} pebbles.", reward, False
        if len(words) == 2 and words[0] == "answer":
            if words[1] == str(sum(self.piles)):
                return "Correct.", 1.0, True
            return "Wrong.", 0.0, True
        return "Unknown command. Use weigh 1, weigh 2 or answer N."

    def plan(self):
        return ["weigh 1", "weigh 2", f"answer {sum(self.piles)}"]
'''


def test_inline_puts_the_base_before_the_game_and_strip_takes_it_out() -> None:
    assert subclasses_base(GAME) and not is_scaffolded(GAME)
    code = inline(GAME)
    assert is_scaffolded(code) and BASE_SOURCE in code
    assert code.index(BEGIN) > code.index("import re") and code.index(BEGIN) < code.index("class PebbleCountEnv")
    assert inline(code) == code  # already inlined: unchanged
    assert strip(code).strip() == GAME.strip()
    compile(code, "<game>", "exec")
    # code without a subclass, or with a TextGame of its own, is left alone
    plain = "class AEnv:\n    pass\n"
    own = "class TextGame:\n    pass\n\n\nclass BEnv(TextGame):\n    pass\n"
    assert inline(plain) == plain and inline(own) == own
    # the shared base is not counted as copied logic between two different games
    other = inline(GAME.replace("PebbleCountEnv", "OtherEnv").replace("sum(self.piles)", "max(self.piles)"))
    assert code_lines(code) == code_lines(GAME)
    assert copied_share(inline(load_seed_envs("bundled")[0].code), code) < 0.3 and copied_share(other, code) > 0.8


@pytest.mark.sandbox
def test_a_game_validates_in_the_sandbox_with_the_base_doing_the_contract() -> None:
    cfg = load_config()
    code = inline(GAME)
    with SandboxPool(fast_config()) as pool:
        report = Validator(pool, turn_limit=cfg.loop.turn_limit).validate(code)
        assert report.valid, (report.failed_check, report.detail)
        assert report.class_name == "PebbleCountEnv"
        with pool.open_session(code, max_turns=4) as s:
            obs, info = s.reset(seed=5)
            assert obs.startswith("Two piles") and obs.endswith("put your one action within \\boxed{}.") and info == {}
            actions = s.solution()
            assert actions[0] == "\\boxed{weigh 1}" and actions[-1].startswith("\\boxed{answer ")
            # no \boxed{}: the base answers, the game is not called, the turn counts
            assert s.step("I think it is 7")[:4] == (
                "No action found: put your one action within \\boxed{}.", 0.0, False, False)
            # a bare string from act() is (text, 0.0, not done); commands are trimmed and spaced once
            assert s.step("\\boxed{  dance  }")[:4] == ("Unknown command. Use weigh 1, weigh 2 or answer N.", 0.0, False, False)
            assert s.step("I weigh: \\boxed{weigh 2} no, \\boxed{weigh   1}")[1] == 0.05  # the last \\boxed{} counts
            # the turn budget (4 here, the game's own 6 capped) truncates the episode
            assert s.step("\\boxed{weigh 1}")[2:4] == (False, True)
        with pool.open_session(code) as s:
            s.reset(seed=5)
            rewards = [s.step(a)[1] for a in s.solution()]
        assert rewards == [0.05, 0.05, 1.0]


@pytest.mark.sandbox
def test_a_broken_game_is_rejected_with_what_act_must_return() -> None:
    bad = inline(GAME.replace('return "Unknown command. Use weigh 1, weigh 2 or answer N."', "return None"))
    with SandboxPool(fast_config()) as pool:
        report = Validator(pool, turn_limit=25).validate(bad)
    assert not report.valid and "act() must return (text, reward, done), got NoneType" in report.detail


def test_the_scaffold_prompt_states_the_base_the_budget_and_shows_games_without_the_base() -> None:
    from spade_engine.engine.designer import CodeExample

    games = [s for s in load_seed_envs("bundled") if code_format(s.code) == "scaffold"]
    assert len(games) >= 6 and len({s.skill for s in games}) >= 6
    msgs = scaffold_designer_messages(
        skill="arithmetic", difficulty=0.5, document_text="DOC", turn_budget=17,
        code_examples=[CodeExample("run-s1", games[0].code, games[0].skill)],
    )
    user = msgs[-1]["content"]
    assert SCAFFOLD_MARK in user and "capped at 17 turns" in user and "def act(self, command)" not in user.split("EXAMPLE")[0]
    assert strip(games[0].code).strip() in user and BEGIN not in user
    assert user.index("EXAMPLE") < user.index("REFERENCE DOCUMENT") < user.index("TASK")


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_scaffold_run_records_inlined_games_shows_games_and_repairs_with_game_advice(tmp_path) -> None:
    # the designer writes a broken game first (plan() answers 0), the fixed one when asked for a repair
    broken = GAME.replace('f"answer {sum(self.piles)}"', '"answer 0"')
    policy = ScriptedDesigner(broken, GAME, hint="Weigh both piles.", action="\\boxed{weigh 1}", preamble="Here is the game.\n")
    cfg = load_config(overrides={
        "loop.seed_envs": "bundled", "loop.designer_format": "scaffold", "loop.max_envs": 1, "loop.plays_per_env": 1,
        "loop.max_repairs": 1, "sandbox.workers": 2,
    })
    by_type, props, verdicts = run_scripted(cfg, policy, "run-game-abcdef", tmp_path / "data")
    first, repair = props["abcdef-e00000"], props["abcdef-e00000-r1"]
    # recorded standalone: the base inlined, the completion as the model wrote it
    assert is_scaffolded(first["code"]) and BEGIN not in first["completion"]
    # the prompt is the scaffold's, its examples are seed games shown without the base
    assert SCAFFOLD_MARK in first["prompt"] and "(TextGame):" in first["prompt"].split("REFERENCE DOCUMENT")[0]
    assert BEGIN not in first["prompt"]
    seeds = {k: p for k, p in props.items() if p["designer"].startswith("seed:")}
    shown = [k for k, p in seeds.items() if strip(p["code"]).strip() in first["prompt"]]
    assert shown and all(is_scaffolded(seeds[k]["code"]) for k in shown)
    # the broken game fails when its solution is replayed in a fresh process, and the repair names plan(), not solution()
    assert not verdicts["abcdef-e00000"]["valid"] and verdicts["abcdef-e00000"]["failed_check"] == "replay"
    repair_req = next(r for r in policy.requests if r.role == "designer" and (isinstance(r.context, DesignContext) and r.context.repair is not None))
    feedback = repair_req.messages[-1]["content"].split("VERDICT", 1)[1]
    assert "plan()" in feedback and "reset()" not in feedback
    # ... and shows what each command of the replay got back, where plan() and act() disagree
    assert "replay: '\\\\boxed{weigh 1}' -> 'Pile 1 has" in feedback and "'\\\\boxed{answer 0}' -> 'Wrong.' (0)" in feedback
    assert repair["repair_of"] == "abcdef-e00000" and verdicts["abcdef-e00000-r1"]["accepted"]


def test_a_repair_quotes_the_game_lines_and_can_ask_for_a_new_attempt_without_the_code() -> None:
    from spade_engine.engine.designer import repair_messages
    from spade_engine.engine.designer_scaffold import SCAFFOLD_ADVICE
    from spade_engine.sandbox.scaffold import game_line_numbers

    code = inline(GAME)
    inlined = next(i for i, line in enumerate(code.splitlines(), 1) if "self.piles = [rng" in line)
    written = next(i for i, line in enumerate(GAME.splitlines(), 1) if "self.piles = [rng" in line)
    assert inlined != written
    assert game_line_numbers(code, f"boom (line {inlined} in setup: x)") == f"boom (line {written} in setup: x)"
    assert game_line_numbers(GAME, f"(line {inlined} in setup: x)") == f"(line {inlined} in setup: x)"
    assert game_line_numbers(code, f"line {inlined}: unexpected indent") == f"line {written}: unexpected indent"

    msgs = scaffold_designer_messages(skill="arithmetic", difficulty=0.5, document_text="DOC")
    completion = f"```python\n{GAME}```"
    detail = "import: new: AttributeError: 'PebbleCountEnv' object has no attribute 'piles' (line 11 in setup: x)"
    kw = dict(error_kind="crash", failed_check="import", detail=detail, advice=SCAFFOLD_ADVICE)
    shown = repair_messages(msgs, completion, **kw)[-1]["content"]
    assert "YOUR PREVIOUS ENVIRONMENT (rejected)" in shown and "class PebbleCountEnv" in shown
    assert "Set every attribute act() and plan() use in setup()" in shown
    fresh = repair_messages(msgs, completion, show_code=False, **kw)[-1]["content"]
    assert "class PebbleCountEnv" not in fresh and "A PREVIOUS ATTEMPT WAS REJECTED" in fresh
    assert detail in fresh and "Write a new, complete version" in fresh and "corrected code" not in fresh
