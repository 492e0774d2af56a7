"""The Environment Designer role: prompts, code extraction, lineage, and repair prompts.

The prompt follows the facts of the public SPADE release's corpus-grounded, interactive
multi-turn contract (actions as ``\\boxed{...}`` commands that change a hidden state, partial
rewards for progress, robustness rules, self-verification), hardened with what small models get
wrong here: a list of what not to do (the f-string ``\\boxed{n}`` NameError, ``from random import
re``, bare ints from ``solution()``, copying the example), the run's turn budget, and complete
example environments (the seed archive's, then the memory's) instead of a skeleton with ``...``
bodies. Its parts are ordered from the most shared to the most specific (contract and rules,
examples, document, task), so a backend's prefix cache reuses the shared part.

The examples shown become the proposal's lineage (``parents``, ``avoid``). A failed validation,
a truncated completion or a near-copy is sent back with :func:`repair_messages` (the contract,
document and task again, the rejected code, then the verdict with targeted advice), a bounded
number of times; each repair is its own environment id and chain.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..archive.examples import MemoryExamples
from .skills import SKILLS, Skill, skill_info

__all__ = [
    "SKILLS",
    "Skill",
    "CodeExample",
    "difficulty_label",
    "designer_messages",
    "PromptFormat",
    "compose_messages",
    "repair_messages",
    "repair_feedback",
    "extract_code",
    "declared_difficulty",
    "novelty_text",
    "contract_text",
    "DESIGNER_SYSTEM_PROMPT",
    "CONTRACT_OPENING",
    "PUZZLE_OPENING",
    "ADVICE",
    "SHARED_ADVICE",
]


@dataclass(frozen=True)
class CodeExample:
    """A complete environment shown to the designer (a seed or an archived environment)."""

    env_id: str
    code: str
    skill: str = ""
    note: str = ""


def difficulty_label(d: float) -> str:
    """``easy`` / ``medium`` / ``hard`` for a difficulty in [0, 1]."""
    return "easy" if d < 1 / 3 else ("medium" if d < 2 / 3 else "hard")


DESIGNER_SYSTEM_PROMPT = (
    "You are an expert Python programmer and game designer. You write executable, interactive, "
    "multi-turn text environments that train a reasoning agent. You are rewarded when the agent "
    "solves your environment about half of the time and a privileged hint helps it a lot."
)

#: how every contract of this engine starts (a repair recognises the engine's own prompts by it)
CONTRACT_OPENING = "Write an INTERACTIVE, MULTI-TURN Python environment (a text game) for a reasoning agent"
#: how a puzzle's contract starts (``designer_puzzle.py``): a one-answer game
PUZZLE_OPENING = "Write a ONE-ANSWER PUZZLE as a Python environment for a reasoning agent"

_CONTRACT = CONTRACT_OPENING + r""".

HOW THE AGENT PLAYS
- Every turn the agent replies with ONE action wrapped as \boxed{<action>}, for example \boxed{show 2}
  or \boxed{move north}. step(action) receives the agent's whole reply as a string; read the command
  with m = re.search(r"\\boxed\{([^{}]*)\}", str(action)).
- The command changes the environment's state, and step() returns a NEW observation that shows the result.
- TURN BUDGET: episodes are capped at __BUDGET__ turns. After constructing your class the engine sets
  self.max_turns = min(your max_turns, __BUDGET__). solution() must win in fewer turns than that.

WHAT MAKES A GOOD ENVIRONMENT
- HIDDEN STATE: reset(seed) draws hidden values with rng = random.Random(seed); the agent uncovers them by
  acting (queries, probes, moves). The first observation states the goal, the rules and the available
  actions, never the hidden values or the answer.
- Several steps: the goal needs a sequence of actions; no single lucky action wins.
- PARTIAL REWARD: a small reward (0.01 to 0.2) for real progress (new information, a correct sub-result);
  reward 1.0 with terminated=True only when the goal is reached; 0.0 with terminated=True for a final wrong
  answer; truncated=True once self.turn_count >= self.max_turns.
- Every observation shows the current state, what the last action did and the actions available, and
  reminds the agent to reply with \boxed{...}.

THE CLASS
- One class whose name ends in Env, with a one-line docstring saying what the agent must do.
- def __init__(self, max_turns=12): set self.max_turns, self.turn_count = 0 and every attribute step() uses,
  then call self.reset().
- def reset(self, seed=None) -> tuple[str, dict]: returns (observation, {}); rng = random.Random(seed);
  self.turn_count = 0; new hidden state; it returns the first observation and never calls self.reset() itself.
- def step(self, action: str) -> tuple[str, float, bool, bool, dict]: returns (observation, reward,
  terminated, truncated, {}); self.turn_count += 1 first; every path returns the 5-tuple.
- def solution(self) -> list[str]: the actions that win the episode just reset, each written "\\boxed{...}".

DO NOT (the most common reasons environments are rejected)
1. Braces in f-strings are code. Inside an f-string write the action format with doubled braces,
   f"\\boxed{{guess {n}}}", or put it in a plain string: "\\boxed{guess N}". A single-brace \boxed{...}
   inside an f-string crashes with NameError.
2. Imports: the code starts with exactly the lines import random and import re (and import math when
   needed). Never import a name out of a module (no from-import lines): importing re out of random, or
   random out of math, fails at once, and random.Random(seed) needs the module random.
3. solution() returns a LIST of action strings, for example ["\\boxed{show 1}", "\\boxed{answer 42}"],
   never a number or a single string.
4. Do not copy an example: a copy (same rules under a new name) is rejected as a duplicate. Write a new
   class name, new rules and a new theme.
5. Everything the class uses is defined inside it: constants as class attributes (WORDS = [...] in the
   class body, used as self.WORDS), helpers as methods. Define all of __init__, reset, step and solution.
6. No input(), print(), files, network, threads, numpy, or modules outside the standard library.
7. Never assign self.solution = ... (it hides the method): keep answers in self._answer.
8. Never reveal the answer in an observation, and never let an empty or garbage action win.

ROBUSTNESS
- A garbage or unknown action gets a helpful observation and reward 0.0; step() never raises.
- The same seed gives the same episode: use the rng of reset(), never the global random state.
- Never divide by a value that can be zero; keep numbers small; info is always {}.

SELF-CHECK before you answer
- Run reset(seed=0) in your head, then play solution(): does it end with reward 1.0 and terminated=True
  within the turn budget?
- Play two different action sequences: do the observations change with the actions?
- Does step("\\boxed{garbage}") return a helpful observation with reward 0.0?"""


def contract_text(turn_budget: int) -> str:
    """The contract, rules, do-not list and self-check, with the run's turn budget."""
    return _CONTRACT.replace("__BUDGET__", str(int(turn_budget)))


def _examples_text(
    code_examples: Sequence[CodeExample], ex: MemoryExamples, display: Callable[[str], str] = str
) -> str:
    """The examples part of a prompt; ``display`` turns an example's code into what is shown (the
    scaffold prompt strips the inlined base class)."""
    parts = []
    if code_examples:
        parts.append(
            "EXAMPLES of complete, valid environments. They show the format only: your environment must have a "
            "different class name, different rules and a different theme."
        )
        for e in code_examples:
            note = f" ({e.note})" if e.note else ""
            parts.append(f"EXAMPLE {e.env_id}{note}:\n```python\n{display(e.code).strip()}\n```")
    for e in ex.frontier:
        parts.append(
            f"ARCHIVED ENVIRONMENT {e.get('env_id')} (win rate {float(e.get('win_rate_plain', 0)):.2f}, regret "
            f"{float(e.get('regret', 0)):.2f}: at the agent's frontier; write something different that is as "
            f"well calibrated):\n```python\n{_clip_code(display(str(e.get('code', ''))))}\n```"
        )
    for e in ex.negatives:
        w = float(e.get("win_rate_plain", 0))
        why = "too easy" if w > 0.6 else "too hard"
        parts.append(
            f"NEGATIVE EXAMPLE {e.get('env_id')} (win rate {w:.2f}: {why}; do not repeat its mistake):\n"
            f"```python\n{_clip_code(display(str(e.get('code', ''))), 900)}\n```"
        )
    if ex.neighbours:
        names = "; ".join(f"{e.get('env_id')}: {_class_names(str(e.get('code', '')))}" for e in ex.neighbours)
        parts.append(f"ALREADY IN THE ARCHIVE (do not write near-copies of these): {names}")
    return "\n\n".join(parts)


def _clip_code(code: str, limit: int = 1800) -> str:
    return code if len(code) <= limit else code[:limit] + "\n# ... (truncated)"


def _class_names(code: str) -> str:
    names = re.findall(r"^class\s+(\w+)", code, flags=re.M)  # linear: a literal, a blank run, a word
    return ", ".join(names) or "(no class)"


def _task_text(skill: str, difficulty: float, info: Skill | None, topic: str, goal: str = "actions", ideas: bool = True) -> str:
    label = difficulty_label(difficulty)
    steps = 2 if label == "easy" else (3 if label == "medium" else 4)
    description = info.description if info else skill
    ideas = f" Ideas (pick one or invent your own): {'; '.join(info.ideas)}." if ideas and info and info.ideas else ""
    about = f" The environment must be about {topic}, a concept from the document." if topic else ""
    return (
        f"TASK\nTarget skill: {skill} ({description}). Difficulty: {label} ({difficulty:.2f} on a 0-1 scale): the "
        f"goal should need {steps}+ {goal}.{ideas}{about} Ground it in the document; never mention the document "
        "in the environment's text.\n\n"
        "Reply with the complete Python code in one ```python block, and nothing after the block."
    )


class PromptFormat:
    """The designer prompt of one format: its contract (with the run's turn budget), how an
    example's code is shown, what the task's goal needs (actions, or reasoning steps) and whether
    the task lists the skill's game ideas (interactive ones: not for a one-answer puzzle).
    Calling it gives the chat messages for one proposal (see :func:`compose_messages`)."""

    def __init__(
        self, contract: Callable[[int], str], *, display: Callable[[str], str] = str, goal: str = "actions", ideas: bool = True
    ) -> None:
        self.contract, self.display, self.goal, self.ideas = contract, display, goal, ideas

    def __call__(
        self,
        *,
        skill: str,
        difficulty: float,
        document_text: str,
        examples: MemoryExamples | None = None,
        code_examples: Sequence[CodeExample] = (),
        turn_budget: int = 25,
        topic: str = "",
    ) -> list[dict[str, str]]:
        return compose_messages(
            self.contract(turn_budget), skill=skill, difficulty=difficulty, document_text=document_text,
            examples=examples, code_examples=code_examples, topic=topic, display=self.display, goal=self.goal,
            ideas=self.ideas,
        )


#: the chat messages asking the designer for one standalone environment: contract and rules
#: (shared by every prompt of a run), examples, the document, the task
designer_messages = PromptFormat(contract_text)


def compose_messages(
    contract: str,
    *,
    skill: str,
    difficulty: float,
    document_text: str,
    examples: MemoryExamples | None = None,
    code_examples: Sequence[CodeExample] = (),
    topic: str = "",
    display: Callable[[str], str] = str,
    goal: str = "actions",
    ideas: bool = True,
) -> list[dict[str, str]]:
    """System prompt + one user message of ``contract``, the examples (their code through
    ``display``), the document and the task (whose goal needs ``goal``: actions, or a puzzle's
    reasoning steps), in that order (the shared part first, for a prefix cache)."""
    parts = [contract]
    ex_text = _examples_text(code_examples, examples or MemoryExamples(), display=display)
    if ex_text:
        parts.append(ex_text)
    parts.append(f"REFERENCE DOCUMENT\n<REFERENCE_DOCUMENT>\n{document_text}\n</REFERENCE_DOCUMENT>")
    parts.append(_task_text(skill, difficulty, skill_info(skill), topic, goal, ideas))
    return [{"role": "system", "content": DESIGNER_SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]


#: (pattern in the failed check's detail, advice) for any environment, standalone or scaffolded
SHARED_ADVICE: tuple[tuple[str, str], ...] = (
    (r"NameError: name '[a-z_]\w*' is not defined",
     "A NameError is usually an f-string: inside f\"...\" the text {x} is evaluated as code, so "
     "f\"\\\\boxed{x}\" needs a variable x. Write the action format in a plain string, or double the braces: "
     "f\"\\\\boxed{{guess {n}}}\"."),
    (r"cannot import name|ImportError|ModuleNotFoundError|'builtin_function_or_method' object has no attribute",
     "Start the code with the lines import random and import re (import math if needed), with no from-import "
     "lines, and call random.Random(seed), re.search, math.sqrt through the modules."),
    (r"NameError: name '[A-Z_]+' is not defined|object has no attribute '[A-Z][A-Z0-9_]*'",
     "A constant the class uses is missing: define it inside the class as a class attribute and use it as self.NAME."),
    (r"probe action .* wins",
     "An empty or garbage action must never win: only the correct command may return reward 1.0."),
)

#: targeted hints for the most common failures of a standalone environment
ADVICE: tuple[tuple[str, str], ...] = (
    *SHARED_ADVICE[:3],
    (r"has no reset\(\) or step\(\)|has no reset\(\)|has no step\(\)",
     "The class must define all of __init__, reset, step and solution."),
    (r"solution\(\) returned|solution\(\) must return|gave no actions",
     "solution() must return a list of action strings, each written \"\\\\boxed{...}\", that wins the episode."),
    (r"did not end within",
     "step() must set truncated=True once self.turn_count >= self.max_turns, and increment self.turn_count first."),
    (r"not success|ended with reward",
     "Replaying solution() must reach reward 1.0 with terminated=True: compute the actions from the hidden state "
     "drawn in reset(), with the same command words step() understands."),
    (r"RecursionError",
     "reset() must not call self.reset() (only __init__ calls it), and no method may call itself without end."),
    *SHARED_ADVICE[3:],
    (r"different observations",
     "Use rng = random.Random(seed) in reset() for every random choice, never the global random module state."),
    (r"AttributeError: '(?!builtin_function_or_method)\w+' object has no attribute '(?![A-Z][A-Z0-9_]*')",
     "Initialise every attribute in __init__ before calling self.reset(), and do not name an attribute solution."),
    (r"must return \(observation, info\)|must return \(observation, reward",
     "reset() returns (observation, {}) and every path of step() returns (observation, reward, terminated, truncated, {})."),
)


def repair_feedback(*, error_kind: str | None, failed_check: str | None, detail: str, nearest: str | None = None,
                    max_new_tokens: int | None = None, advice: Sequence[tuple[str, str]] = ADVICE,
                    short_lines: int = 120, new_attempt: bool = False) -> str:
    """What the designer is told about a rejected environment (the verdict, then the first two
    matching entries of ``advice``; a truncated one is asked for under ``short_lines`` lines; with
    ``new_attempt`` a new version is asked for instead of a corrected one)."""
    detail = detail.strip()[:800]
    if error_kind == "duplicate":
        near = f" {nearest}" if nearest else " an environment already in the archive"
        return (
            f"Your environment is too close to{near} ({detail}): it is a near-copy. Write a DIFFERENT "
            "environment: a new class name, new rules, new hidden state and a new theme from the document. "
            "Reply with the complete code in one ```python block."
        )
    if error_kind == "truncated":
        limit = f" at {max_new_tokens} tokens" if max_new_tokens else ""
        return (
            f"Your reply was cut off{limit} before the code was complete ({detail}). Write a shorter environment "
            f"(under {short_lines} lines, no long comments, no explanation) in one ```python block."
        )
    hints = [text for pattern, text in advice if re.search(pattern, detail)]  # ADVICE's patterns: no nested quantifier, 800 characters
    out = (
        f"The environment failed validation (error: {error_kind or 'unknown'}, check: {failed_check or 'unknown'}): "
        f"{detail}"
    )
    if hints:
        out += "\n\nHow to fix it: " + " ".join(hints[:2])
    ask = "Write a new, complete version" if new_attempt else "Fix the problem and reply with the complete corrected code"
    return out + f"\n\n{ask} in one ```python block."


_EXAMPLES_HEAD = "\n\nEXAMPLES of complete, valid environments."
_DOC_HEAD = "\n\nREFERENCE DOCUMENT\n"


def repair_messages(
    messages: Sequence[Mapping[str, str]],
    completion: str,
    *,
    error_kind: str | None,
    failed_check: str | None,
    detail: str,
    nearest: str | None = None,
    max_new_tokens: int | None = None,
    advice: Sequence[tuple[str, str]] = ADVICE,
    short_lines: int = 120,
    show_code: bool = True,
) -> list[dict[str, str]]:
    """The request for a corrected environment, from the original ``messages`` (system + the
    designer prompt), the rejected ``completion`` and the verdict.

    For a prompt of this module the repair is compact: the contract, the document and the task
    again (not the examples, which small models copy), the rejected code, then the verdict and
    advice last, where the model reads them; a model shown its own reply as the previous turn
    tends to repeat it. With ``show_code`` false the rejected code is left out too and a new
    attempt is asked for, warned by the verdict (a small model shown its own code sends it back
    unchanged). Other prompts get the conversation so far plus the verdict."""
    fresh = not show_code and error_kind != "truncated"  # a new attempt, warned by the verdict on this one
    feedback = repair_feedback(
        error_kind=error_kind, failed_check=failed_check, detail=detail, nearest=nearest, max_new_tokens=max_new_tokens,
        advice=advice, short_lines=short_lines, new_attempt=fresh,
    )
    msgs = [dict(m) for m in messages]
    prompt = msgs[-1]["content"] if msgs else ""
    if not prompt.startswith((CONTRACT_OPENING, PUZZLE_OPENING)) or _DOC_HEAD not in prompt:
        return [*msgs, {"role": "assistant", "content": completion}, {"role": "user", "content": feedback}]
    head = prompt.split(_EXAMPLES_HEAD, 1)[0].split(_DOC_HEAD, 1)[0]
    tail = prompt.split(_DOC_HEAD, 1)[1]
    code = extract_code(completion) if error_kind != "truncated" and show_code else None
    rejected = f"\n\nYOUR PREVIOUS ENVIRONMENT (rejected):\n```python\n{code.strip()}\n```" if code else ""
    title = "A PREVIOUS ATTEMPT WAS REJECTED (do not repeat its mistake)" if fresh else "VERDICT"
    user = f"{head}{_DOC_HEAD}{tail}{rejected}\n\n{title}\n{feedback}"
    return [*msgs[:-1], {"role": "user", "content": user}]


# The fence patterns run over the designer's completion (model text, in the engine's process) in
# linear time: the blanks after a fence are one run (the tag, when there is one, then its own run:
# written ``[ \t]*([\w+-]*)[ \t]*`` an empty tag let two runs split the same blanks, quadratic on a
# fence followed by a long run of blanks); the body ends at the next fence or the end of the text.
_FENCE = re.compile(r"```[ \t]*(?:([A-Za-z0-9_+-]+)[ \t]*)?\n(.*?)```", re.S)
_OPEN_FENCE = re.compile(r"```[ \t]*(?:(?:python|py|python3)[ \t]*)?\n(.*)\Z", re.S)


def _strip_think(text: str) -> str:
    """``text`` without its ``<think>...</think>`` spans (what ``re.sub(r"<think>.*?</think>", "",
    text, flags=re.S)`` gives), in linear time: the pattern was quadratic on a completion of many
    unclosed ``<think>`` (model text, in the engine's process)."""
    out, i = [], 0
    while True:
        j = text.find("<think>", i)
        k = text.find("</think>", j + 7) if j >= 0 else -1
        if k < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        i = k + 8


def extract_code(completion: str) -> str | None:
    """The environment code in a completion, or ``None`` when there is none.

    Preference: the last fenced block tagged python (or untagged) that defines a class, then the
    last such block, then the whole completion if it looks like a module defining a class with a
    ``step`` method.
    """
    completion = _strip_think(completion)
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(completion)]
    py = [b for lang, b in blocks if lang in ("", "python", "py", "python3")]
    # linear: an indent run at a line start, then a literal (this and the two below)
    with_class = [b for b in py if re.search(r"^[ \t]*class\s+\w+", b, re.M)]
    for cand in (with_class, py):
        if cand:
            code = cand[-1].strip("\n")
            return code + "\n" if code.strip() else None
    if not blocks:  # an opening fence never closed (a stop string cut the closing one)
        m = _OPEN_FENCE.search(completion)
        if m and re.search(r"^[ \t]*class\s+\w+", m.group(1), re.M):
            return m.group(1).strip("\n") + "\n"
    if re.search(r"^class\s+\w+", completion, re.M) and "def step" in completion:
        return completion.strip("\n") + "\n"
    return None


def declared_difficulty(code: str) -> float | None:
    """The difficulty an environment declares in a ``# difficulty: 0.42`` comment, if any."""
    # linear: a literal after "#" at a line start; the number always matches once it has a digit
    m = re.search(r"^#\s*difficulty:\s*([0-9]*\.?[0-9]+)", code, re.M)
    if not m:
        return None
    try:
        v = float(m.group(1))
    except ValueError:
        return None
    return v if 0.0 <= v <= 1.0 else None


def novelty_text(code: str, limit: int = 1500) -> str:
    """The part of an environment's source its novelty embedding is computed from.

    The module docstring (what the environment is about) and the environment classes (names
    ending in ``Env``, else every class), without comments, so the embedding model's short
    context window sees the environment's description and logic rather than shared helper
    boilerplate; falls back to the whole source when it does not parse.
    """
    import ast

    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return code[:limit]
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    envs = [n for n in classes if n.name.endswith("Env")] or classes
    parts = [ast.get_source_segment(code, n) or "" for n in envs]
    text = "\n".join([ast.get_docstring(tree) or "", *(p for p in parts if p)]).strip() or code
    text = "\n".join(line for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))
    return text[:limit]
