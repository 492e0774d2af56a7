"""The puzzle format (issue 17): the smallest game a designer may write, a TextGame subclass with
only setup(rng), which returns the question and sets self.answer. The base scores each reply
against the answer and answers it in solution(); the run records the game with the base
inlined, shows the bundled puzzles as its examples and repairs a broken one with puzzle advice."""

from __future__ import annotations

import re

import pytest

from engine_support import ScriptedDesigner, run_scripted
from sandbox_support import fast_config
from spade_engine.config import load_config
from spade_engine.engine.designer import PUZZLE_OPENING, CodeExample, repair_messages
from spade_engine.engine.designer_puzzle import PUZZLE_ADVICE, PUZZLE_MARK, SETUP_PLAN, puzzle_designer_messages, puzzle_reply_prefix
from spade_engine.engine.designer_scaffold import SCAFFOLD_MARK
from spade_engine.engine.seed_archive import load_seed_envs
from spade_engine.sandbox import SandboxPool
from spade_engine.sandbox.scaffold import BEGIN, code_format, inline, puzzle_only, strip
from spade_engine.sandbox.validator import Validator
from spade_engine.policy.request_context import DesignContext

PUZZLE = '''import random
import re


class ShelfBooksEnv(TextGame):
    """Count the books left on a shelf after some are lent out."""

    def setup(self, rng):
        shelves = [rng.randint(5, 12) for _ in range(3)]
        lent = rng.randint(1, 4)
        self.answer = sum(shelves) - lent
        return f"Three shelves hold {shelves[0]}, {shelves[1]} and {shelves[2]} books; {lent} are lent out. How many are left?"
'''

TEXT_PUZZLE = '''import random
import re


class CapitalEnv(TextGame):
    """Name the city."""

    tries = 2

    def setup(self, rng):
        self.answer = rng.choice(["Paris Nord", "Lyon"])
        return "Which station? (a text answer)"
'''


def test_code_format_tells_the_three_kinds_apart() -> None:
    seeds = load_seed_envs("bundled")
    kinds = {code_format(s.code) for s in seeds}
    assert kinds == {"standalone", "scaffold", "puzzle"}
    assert code_format(PUZZLE) == code_format(inline(PUZZLE)) == "puzzle"
    assert code_format("class FooEnv:\n    def act(self, c):\n        pass\n") == "standalone"
    puzzles = [s for s in seeds if code_format(s.code) == "puzzle"]
    assert len(puzzles) >= 8 and len({s.skill for s in puzzles}) >= 8


@pytest.mark.sandbox
def test_a_puzzle_validates_and_the_base_scores_each_reply_against_the_answer() -> None:
    code = inline(PUZZLE)
    with SandboxPool(fast_config()) as pool:
        report = Validator(pool, turn_limit=load_config().loop.turn_limit).validate(code)
        assert report.valid, (report.failed_check, report.detail)
        assert report.class_name == "ShelfBooksEnv"
        with pool.open_session(code) as s:
            obs, _ = s.reset(seed=4)
            assert obs.startswith("Three shelves") and obs.endswith("Please reason step by step, and put your final answer within \\boxed{}.")
            (answer,) = s.solution()
            value = int(answer.removeprefix("\\boxed{").removesuffix("}"))
            assert s.step(f"So the total is \\boxed{{{value}.0}}")[:4] == ("Correct.", 1.0, True, False)  # numbers as numbers
            s.reset(seed=4)
            assert s.step(f"\\boxed{{{value + 1}}}")[:4] == ("Wrong answer.", 0.0, True, False)  # one try by default
            s.reset(seed=4)
            assert s.step("the answer is 12")[1:3] == (0.0, True)  # no \\boxed{}: a wrong answer, not a free turn
            s.reset(seed=4)  # the 0.5B agent often answers in reasoning-gym's tags: read like the fixed pool's scorer
            assert s.step(f"<answer>1</answer> no, <answer> {value} </answer>")[:4] == ("Correct.", 1.0, True, False)
            s.reset(seed=4)
            assert s.step(f"<answer>{value}</answer> \\boxed{{{value + 1}}}")[1] == 0.0  # \\boxed{} comes first
        with pool.open_session(inline(TEXT_PUZZLE)) as s:
            s.reset(seed=1)
            truth = s.solution()[0].removeprefix("\\boxed{").removesuffix("}")
            assert s.step("\\boxed{Marseille}")[:4] == ("Wrong answer. 1 tries left.", 0.0, False, False)  # tries = 2
            assert s.step(f"\\boxed{{ {truth.upper()} }}")[1:3] == (1.0, True)  # case and spaces ignored


#: what the 0.5B wrote around a puzzle's setup(): an import of the base and a step() of its own
NOISE = """from textgame import TextGame

"""
OWN_STEP = """
    def step(self, action):
        raise ValueError("Invalid action.")

    def _unused(self):
        return 2
"""


def test_puzzle_only_keeps_the_formats_part_and_drops_what_the_base_provides() -> None:
    code = NOISE + PUZZLE.replace("import random\nimport re\n", "") + OWN_STEP
    kept = puzzle_only(code)
    assert "def step" not in kept and "textgame" not in kept and "def _unused(self):" in kept
    assert kept.splitlines()[:3] == ["import random", "import re", "import math"]  # added when missing
    assert "self.answer = sum(shelves) - lent" in kept and '"""Count the books left' in kept
    assert puzzle_only(PUZZLE) == "import math\n" + PUZZLE  # nothing to drop: only the missing import added
    assert puzzle_only("class AEnv(TextGame):\n    def step(self, a):\n        return 1\n").count("def step") == 1  # no setup()
    assert puzzle_only("class AEnv(TextGame:\n") == "class AEnv(TextGame:\n"  # does not parse: unchanged
    future = puzzle_only("from __future__ import annotations\n" + PUZZLE)
    assert future.startswith("from __future__ import annotations\nimport math\n")  # __future__ stays first


@pytest.mark.sandbox
def test_a_puzzle_whose_question_does_not_decide_its_answer_is_unsolvable() -> None:
    drawn = PUZZLE.replace("self.answer = sum(shelves) - lent", "self.answer = rng.randint(100, 999)").replace(
        'return f"Three shelves hold {shelves[0]}, {shelves[1]} and {shelves[2]} books; {lent} are lent out. How many are left?"',
        'return "How many books are left on the shelves?"')
    with SandboxPool(fast_config()) as pool:
        validator = Validator(pool, turn_limit=25)
        report = validator.validate(inline(drawn))
        good = validator.validate(inline(PUZZLE))
    assert not report.valid and report.error_kind == "unsolvable" and report.failed_check == "solution"
    assert "the same question has two answers" in report.detail
    assert good.valid and "each with one answer, not shown in it" in next(c.detail for c in good.checks if c.name == "solution")


#: two puzzles the 0.5B wrote that the other checks pass: one fixed item, a question that is its answer
FIXED = '''import random
import re


class InventoryEnv(TextGame):
    """Inventory lookup."""
    def setup(self, rng):
        inventory = {"apple": 10, "banana": 5}
        self.answer = inventory["apple"]
        return "What is the quantity of apple?\\n" + "\\n".join(f"{k}: {v}" for k, v in inventory.items())
'''
ECHO = '''import random
import re


class CalendarAssistantEnv(TextGame):
    def setup(self, rng):
        self.answer = "The assistant is here, ready to help you. Day " + str(rng.randint(1, 9)) + "?"
        return self.answer
'''


#: the 0.5B's GraphEnv: the question shows one draw, the answer is another
HIDDEN_DRAW = '''import random
import re


class GraphEnv(TextGame):
    """Graph search: reach a goal through a map within a cost budget."""
    def setup(self, rng):
        self.values = rng.randint(1, 10**6)
        self.answer = rng.randint(1, 100)
        return f"Graph cost {self.values} dollars. What value makes the graph cost {self.values} dollars?"
'''


@pytest.mark.sandbox
def test_a_puzzle_whose_answer_is_a_draw_the_question_never_shows_is_unsolvable() -> None:
    # every seed asks a new question and no question repeats, so only the fork probe sees it
    with SandboxPool(fast_config()) as pool:
        report = Validator(pool, turn_limit=25).validate(inline(HIDDEN_DRAW), seed=0)  # fixed: a random seed repeats the draw 1 run in ~100
    assert (report.error_kind, report.failed_check) == ("unsolvable", "solution"), report.detail
    assert "the answer does not follow from the question: with random draw 2 onwards changed" in report.detail


#: the 0.5B's accepted "inventory" puzzle of 2026-12-02: a new question per seed, the answer 42
FIXED_ANSWER = '''import random
import re


class KeyValueEnv(TextGame):
    """Key-value store lookups."""
    def setup(self, rng):
        self.values = rng.randint(1, 100)
        self.question = f"Find the value of {self.values} using a Key-value store API."
        self.answer = self.compute_answer()
        return self.question

    def compute_answer(self):
        return 42
'''

#: a yes/no puzzle whose answers vary: not a fixed answer
PARITY = '''import random
import re


class ParityEnv(TextGame):
    """Is the sum even?"""
    def setup(self, rng):
        values = [rng.randint(1, 50) for _ in range(3)]
        self.answer = "yes" if sum(values) % 2 == 0 else "no"
        return f"Is the sum of {values[0]}, {values[1]} and {values[2]} even? Answer yes or no."
'''


@pytest.mark.sandbox
def test_a_puzzle_whose_every_question_has_the_same_answer_is_unsolvable() -> None:
    with SandboxPool(fast_config()) as pool:
        v = Validator(pool, turn_limit=25)
        fixed, parity = v.validate(inline(FIXED_ANSWER), seed=0), v.validate(inline(PARITY), seed=0)
    assert (fixed.error_kind, fixed.failed_check) == ("unsolvable", "solution"), fixed.detail
    assert re.search(r"all \d+ different questions over 32 seeds have the same answer \('42'\)", fixed.detail), fixed.detail
    assert parity.valid, parity.detail


#: the 1.5B's accepted ToolUsePuzzleEnv of 2026-12-07: five questions, whichever is drawn the answer is 10
FIVE_QUESTIONS_ONE_ANSWER = '''import random
import re


class ToolUseEnv(TextGame):
    """Use the right tool."""
    def setup(self, rng):
        questions = ["How many nails does the hammer drive?", "How many screws does the screwdriver turn?",
                     "How many cuts does the saw make?", "How many holes does the drill make?",
                     "How many boards does the clamp hold?"]
        self.answer = 10
        return rng.choice(questions)
'''

#: a sound puzzle with few questions: five, each with its own answer
FIVE_QUESTIONS = FIVE_QUESTIONS_ONE_ANSWER.replace("self.answer = 10\n        return rng.choice(questions)",
                                                   "i = rng.randrange(5)\n        self.answer = 10 + i\n        return questions[i]")


@pytest.mark.sandbox
def test_a_puzzle_with_few_questions_that_share_one_answer_is_unsolvable() -> None:
    """Fewer different questions than the first resets tell apart: more resets are drawn before
    the verdict, and five questions that all have one answer are a fixed answer."""
    with SandboxPool(fast_config()) as pool:
        v = Validator(pool, turn_limit=25)
        fixed, sound = v.validate(inline(FIVE_QUESTIONS_ONE_ANSWER), seed=0), v.validate(inline(FIVE_QUESTIONS), seed=0)
    assert (fixed.error_kind, fixed.failed_check) == ("unsolvable", "solution"), fixed.detail
    assert "all 5 different questions over 32 seeds have the same answer ('10')" in fixed.detail
    assert sound.valid, (sound.failed_check, sound.detail)


#: the 1.5B's accepted SortSwapsPuzzleEnv of 2026-12-07, in short: the question lists the sorted
#: values and the answer is that list
SHOWS_ITS_LIST = '''import random
import re


class SortedListEnv(TextGame):
    """Recover the order."""
    def setup(self, rng):
        values = sorted(rng.sample(range(1, 50), 4))
        self.answer = values
        return "After sorting, the list reads " + ", ".join(str(v) for v in values) + ". What was the list?"
'''


@pytest.mark.sandbox
def test_a_puzzle_whose_question_lists_its_answer_is_trivial() -> None:
    with SandboxPool(fast_config()) as pool:
        report = Validator(pool, turn_limit=25).validate(inline(SHOWS_ITS_LIST), seed=0)
    assert (report.error_kind, report.failed_check) == ("trivial", "solution"), report.detail
    assert "the question shows its own answer" in report.detail


def test_a_list_answer_is_shown_when_its_numbers_appear_in_order() -> None:
    from spade_engine.sandbox.validator import _shows

    assert _shows("The sorted list: 2, 5, 7. What was it?", "[2, 5, 7]")
    assert _shows("the numbers 2, 5 and 7", "(2, 5, 7)") and _shows("2; 5; 7", "2, 5, 7")
    assert not _shows("the numbers 7, 5, 2", "[2, 5, 7]")  # another order: the answer is worked out
    assert not _shows("the numbers 12, 5, 7", "[2, 5, 7]") and not _shows("2, 5, 7.5", "[2, 5, 7]")


@pytest.mark.sandbox
def test_a_puzzle_drawing_with_the_global_random_module_draws_from_the_episodes_rng() -> None:
    # what the 0.5B writes: random.randint instead of rng.randint (its SortSwapsPuzzleEnv was nondeterministic)
    global_draws = PUZZLE.replace("rng.randint", "random.randint")
    hidden = HIDDEN_DRAW.replace("self.answer = rng.randint", "self.answer = random.randint")
    with SandboxPool(fast_config()) as pool:
        validator = Validator(pool, turn_limit=25)
        report, leak = validator.validate(inline(global_draws)), validator.validate(inline(hidden))
        with pool.open_session(inline(global_draws)) as a, pool.open_session(inline(PUZZLE)) as b:
            assert a.reset(seed=11)[0] == b.reset(seed=11)[0]  # the same draws as with rng
            a.reset(seed=12)
            first = a.solution()
        with pool.open_session(inline(global_draws)) as c:
            c.reset(seed=12)
            assert c.solution() == first
    assert report.valid, (report.failed_check, report.detail)
    assert (leak.error_kind, leak.failed_check) == ("unsolvable", "solution"), leak.detail  # the fork probe sees them too


@pytest.mark.sandbox
def test_a_fixed_puzzle_one_that_shows_its_answer_and_one_without_an_answer_are_rejected() -> None:
    shown = PUZZLE.replace("How many are left?", "How many are left? ({sum(shelves) - lent})")
    none = PUZZLE.replace("self.answer = sum(shelves) - lent", "self.answer = None")  # the 0.5B's StackMachinePuzzleEnv
    with SandboxPool(fast_config()) as pool:
        validator = Validator(pool, turn_limit=25)
        fixed, echo, leak, unset = (validator.validate(inline(c)) for c in (FIXED, ECHO, shown, none))
    assert (unset.error_kind, unset.failed_check) == ("unsolvable", "solution"), unset.detail
    assert "self.answer is None" in unset.detail
    assert (fixed.error_kind, fixed.failed_check) == ("trivial", "solution") and "asks the same question" in fixed.detail
    for report in (echo, leak):
        assert (report.error_kind, report.failed_check) == ("trivial", "solution"), report.detail
        assert "the question shows its own answer" in report.detail


@pytest.mark.sandbox
def test_a_puzzle_without_an_answer_is_rejected_and_repaired_with_puzzle_advice() -> None:
    broken = PUZZLE.replace("self.answer = sum(shelves) - lent", "total = sum(shelves) - lent")
    with SandboxPool(fast_config()) as pool:
        report = Validator(pool, turn_limit=25).validate(inline(broken))
    assert not report.valid and report.error_kind == "crash", report.detail
    assert "setup(rng) must set self.answer" in report.detail  # said at reset, not as a step's AttributeError
    msgs = puzzle_designer_messages(skill="arithmetic", difficulty=0.5, document_text="DOC")
    fresh = repair_messages(
        msgs, f"```python\n{broken}```", error_kind=report.error_kind, failed_check=report.failed_check,
        detail=report.detail, advice=PUZZLE_ADVICE, show_code=False,
    )[-1]["content"]
    assert fresh.startswith(PUZZLE_OPENING) and "A PREVIOUS ATTEMPT WAS REJECTED" in fresh  # the compact repair
    assert "setup() must set self.answer" in fresh and "class ShelfBooksEnv" not in fresh


def test_the_puzzle_prompt_shows_puzzles_without_the_base_and_asks_for_reasoning_steps() -> None:
    puzzle = next(s for s in load_seed_envs("bundled") if code_format(s.code) == "puzzle")
    msgs = puzzle_designer_messages(
        skill="sequence", difficulty=0.5, document_text="DOC",
        code_examples=[CodeExample("run-s1", puzzle.code, puzzle.skill)],
    )
    user = msgs[-1]["content"]
    assert user.startswith(PUZZLE_OPENING) and PUZZLE_MARK in user and SCAFFOLD_MARK not in user
    assert strip(puzzle.code).strip() in user and BEGIN not in user
    assert "self.answer" in user and "3+ reasoning steps" in user and "Ideas (" not in user  # the ideas are games
    assert user.index("EXAMPLE") < user.index("REFERENCE DOCUMENT") < user.index("TASK")


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_puzzle_run_shows_puzzles_accepts_the_repair_and_plays_it(tmp_path) -> None:
    broken = PUZZLE.replace("self.answer = sum(shelves) - lent", "total = sum(shelves) - lent")
    policy = ScriptedDesigner(broken + OWN_STEP, NOISE + PUZZLE + OWN_STEP, hint="Add the shelves, then subtract.",
                              action="\\boxed{3}")
    cfg = load_config(overrides={
        "loop.seed_envs": "bundled", "loop.designer_format": "puzzle", "loop.max_envs": 1, "loop.plays_per_env": 1,
        "loop.max_repairs": 1, "sandbox.workers": 2,
    })
    by_type, props, verdicts = run_scripted(cfg, policy, "run-puzzle-abcdef", tmp_path / "data")
    first = props["abcdef-e00000"]
    assert PUZZLE_MARK in first["prompt"] and BEGIN not in first["prompt"]
    seeds = {k: p for k, p in props.items() if p["designer"].startswith("seed:")}
    shown = [k for k, p in seeds.items() if strip(p["code"]).strip() in first["prompt"]]
    assert shown and all(code_format(seeds[k]["code"]) == "puzzle" for k in shown)  # only puzzles as examples
    assert verdicts["abcdef-e00000"]["error_kind"] == "crash"
    repair_req = next(r for r in policy.requests if r.role == "designer" and (isinstance(r.context, DesignContext) and r.context.repair is not None))
    assert repair_req.messages[-1]["role"] == "assistant"  # a repair's reply is started too
    assert "setup() must set self.answer" in repair_req.messages[-2]["content"]
    assert verdicts["abcdef-e00000-r1"]["accepted"] and code_format(props["abcdef-e00000-r1"]["code"]) == "puzzle"
    # recorded: the format's part only (its own step() and the base's import dropped); the completion as written
    assert "raise ValueError" not in props["abcdef-e00000-r1"]["code"] and "raise ValueError" in props["abcdef-e00000-r1"]["completion"]
    plays = [e.payload for e in by_type["RolloutCompleted"] if e.payload["env_id"] == "abcdef-e00000-r1"]
    assert plays and all(len(p["turns"]) == 1 and p["terminated"] for p in plays)  # one answer ends the play


BODY = """        shelves = [rng.randint(5, 12) for _ in range(3)]
        self.answer = sum(shelves)
        return f"Shelves of {shelves[0]}, {shelves[1]} and {shelves[2]} books: how many books in all?"
```
"""


class ContinuingDesigner(ScriptedDesigner):
    """A fake model (it stands in for one whose continuation the test must choose) that continues
    the engine's reply prefix with setup()'s body."""

    def generate(self, requests):
        out = super().generate(requests)
        for i, r in enumerate(requests):
            if r.role == "designer" and r.messages[-1]["role"] == "assistant":
                out[i] = type(out[i])(text=BODY)
        return out


@pytest.mark.sandbox
@pytest.mark.slow
def test_the_engine_starts_a_puzzle_reply_and_records_the_whole_reply(tmp_path) -> None:
    assert puzzle_reply_prefix("graph_path").endswith("class GraphPathPuzzleEnv(TextGame):\n    def setup(self, rng):\n" + SETUP_PLAN)
    assert SETUP_PLAN.startswith("        # ") and "self.answer" in SETUP_PLAN  # setup()'s steps, as a comment in its body
    assert "class Pattern_RecognitionPuzzleEnv" not in puzzle_reply_prefix("Pattern Recognition")
    assert "class PatternRecognitionPuzzleEnv(TextGame)" in puzzle_reply_prefix("Pattern Recognition")
    policy = ContinuingDesigner("unused", "unused", action="\\boxed{3}")
    cfg = load_config(overrides={
        "loop.seed_envs": "bundled", "loop.designer_format": "puzzle", "loop.max_envs": 1, "loop.plays_per_env": 1,
        "loop.max_repairs": 0, "sandbox.workers": 2,
    })
    by_type, props, verdicts = run_scripted(cfg, policy, "run-prefix-abcdef", tmp_path / "data")
    (req,) = [r for r in policy.requests if r.role == "designer"]
    first = props["abcdef-e00000"]
    prefix = puzzle_reply_prefix(first["skill"])
    assert req.messages[-1] == {"role": "assistant", "content": prefix}  # the reply the model continues
    assert "\n    def step(" in req.stop and "\n```" in req.stop  # ... and ends before the base's methods
    assert not any(stop.endswith("def ") for stop in req.stop)  # helper methods are the puzzle's own
    assert req.messages[-2]["content"] == first["prompt"]  # the recorded prompt is the user's turn
    assert first["completion"] == prefix + BODY  # the whole reply: the engine's start and the model's part
    assert verdicts["abcdef-e00000"]["accepted"], verdicts["abcdef-e00000"]["checks"]
    assert verdicts["abcdef-e00000"]["class_name"].endswith("PuzzleEnv")
