"""The designer formats table (``engine/designer_formats.py``): each format's prompt is recognised
as that format (a repair picks its advice by it), and only the puzzle starts the reply itself."""

from __future__ import annotations

import pytest

from spade_engine.config import load_config
from spade_engine.engine.designer_formats import FORMATS, designer_format, format_of_prompt
from spade_engine.engine.designer_puzzle import PUZZLE_ADVICE, SETUP_PLAN
from spade_engine.engine.stages import prompt_builder


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_formats_prompt_is_recognised_as_that_format(name: str) -> None:
    fmt = designer_format(name)
    assert fmt.name == name
    user = fmt.messages(skill="arithmetic", difficulty=0.5, document_text="DOC")[-1]["content"]
    assert format_of_prompt(user) is fmt
    cfg = load_config(overrides={"loop.designer_format": name}, environ={})
    assert prompt_builder(cfg.loop) is fmt.messages


def test_only_the_puzzle_writes_the_start_of_the_reply_and_reduces_the_code() -> None:
    puzzle = designer_format("puzzle")
    assert [n for n, f in FORMATS.items() if f.reply_prefix is not None] == ["puzzle"]
    assert puzzle.reply_prefix("mod_arith").endswith("class ModArithPuzzleEnv(TextGame):\n    def setup(self, rng):\n" + SETUP_PLAN)
    assert "\n```" in puzzle.stops and puzzle.advice is PUZZLE_ADVICE
    code = "class AEnv(TextGame):\n    def setup(self, rng):\n        self.answer = 1\n        return 'q'\n\n    def step(self, a):\n        return 0\n"
    assert "def step" not in puzzle.normalize(code) and designer_format("scaffold").normalize(code) == code
    assert format_of_prompt("no mark at all").name == "standalone"
    with pytest.raises(ValueError, match="unknown designer format 'haiku'"):
        designer_format("haiku")


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_method_signature_in_a_prompt_is_valid_python(name: str) -> None:
    """Small models copy a prompt's method signatures into their code: the 1.5B wrote
    ``def solution(self) -> list of str:`` in 9 of 16 proposals (a syntax error) when the contract
    described the method in that pseudo-Python. Every ``def`` header a prompt shows must compile."""
    import ast
    import re

    system, user = FORMATS[name].messages(skill="arithmetic", difficulty=0.5, document_text="DOC")
    text = system["content"] + "\n" + user["content"]
    headers = re.findall(r"^\s*-?\s*(def \w+\(.*?\)(?: -> [^:]+)?:)", text, flags=re.M)
    assert headers, "the prompt names the methods to write"
    for header in headers:
        ast.parse(header + " ...")  # raises SyntaxError on a header a model would copy into broken code
    assert "list of str" not in text
