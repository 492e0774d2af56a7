"""The hint writer role: the policy reads an environment's source and writes a privileged hint.

The hint gives the strategy and the answer format, never the answer; it is appended to the first
observation of hinted plays, and the difference between hinted and plain plays is the regret
that rewards the designer. :func:`clean_hint` strips wrappers models add and bounds the length.
"""

from __future__ import annotations

import json
import re

__all__ = ["HINT_SYSTEM_PROMPT", "hint_messages", "clean_hint", "MAX_HINT_CHARS"]

MAX_HINT_CHARS = 600

HINT_SYSTEM_PROMPT = (
    "You read the source code of a game to write a solving hint for a player who only sees text "
    "observations and replies with \\boxed{<action>}. Your hint is appended to the player's first "
    "observation.\n"
    "Write 1-3 sentences (under 100 words): the key strategy for this specific environment and the "
    "exact action format it expects. Refer only to what the player can see. Do NOT reveal the answer "
    "or any hidden value. Output only the hint text."
)


def hint_messages(code: str) -> list[dict[str, str]]:
    """Chat messages asking the policy for a hint on ``code``."""
    return [
        {"role": "system", "content": HINT_SYSTEM_PROMPT},
        {"role": "user", "content": f"Environment code:\n```python\n{code}\n```"},
    ]


def _first_fenced(t: str) -> str | None:
    """The stripped content of the first fenced block of ``t`` (a ``json`` tag dropped), or
    ``None``: what ``re.search(r"```(?:json)?\\s*\\n?(.*?)\\n?```", t, re.S).group(1).strip()``
    gives, in linear time (the pattern was quadratic on a fence followed by a long run of white
    space and no closing fence: model text, in the engine's process)."""
    start = t.find("```")
    end = t.find("```", start + 3) if start >= 0 else -1
    if end < 0:
        return None
    inner = t[start + 3 : end]
    return (inner[4:] if inner.startswith("json") else inner).strip()


def clean_hint(text: str) -> str:
    """The hint from a completion: JSON ``{"hint": ...}`` or code fences unwrapped, whitespace
    collapsed, cut to :data:`MAX_HINT_CHARS`."""
    t = text.strip()
    inner = _first_fenced(t)
    if inner is not None:
        try:
            data = json.loads(inner)
            if isinstance(data, dict) and isinstance(data.get("hint"), str):
                t = data["hint"]
            else:
                t = inner
        except json.JSONDecodeError:
            t = inner
    # both linear: anchored at the start (white space, a literal, white space), and one class
    t = re.sub(r"^(hint\s*:\s*)", "", t, flags=re.I)
    t = re.sub(r"\s+", " ", t).strip()
    if len(t) > MAX_HINT_CHARS:
        t = t[:MAX_HINT_CHARS].rsplit(" ", 1)[0] + " ..."
    return t
