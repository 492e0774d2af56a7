"""Wording of the procedural designer's environments, drawn from the grounding document.

The designer (a SIMULATION, not an LLM) grounds each environment on a corpus document: its
content words name the class and the objects of the task, one of its sentences opens the module
docstring and another the first observation (the theme). Everything here is a pure function of
the document and a seeded ``random.Random``.
"""

from __future__ import annotations

import random
import re  # linear patterns only (one character class or a white-space run each), over corpus documents

__all__ = ["sentences", "content_words", "safe_text", "theme_line", "class_name", "STOPWORDS"]

STOPWORDS = frozenset(
    """a about above after again against all also an and any are as at be because been before being below
    between both but by can could did do does doing down during each every few for from further had has have
    having he her here hers him his how if in into is it its itself just keeps last least leave leaves less
    like made make makes many may more most much must my next no nor not now of off on once one only or other
    our out over own same say says she should so some such than that the their them then there these they
    this those through to too two under until up upon very was way we were what when where which while who
    whom why will with within without would you your used uses using called given gives find finds found
    first second third whole part parts number numbers value values step steps example instance kind kinds
    rule rules""".split()
)


def safe_text(text: str, limit: int = 240) -> str:
    """One line, no backslashes or triple quotes, at most ``limit`` characters (cut at a word)."""
    t = re.sub(r"\s+", " ", text.replace("\\", "/").replace('"""', "'''")).strip()
    return t if len(t) <= limit else t[:limit].rsplit(" ", 1)[0] + " ..."


def sentences(doc_text: str) -> tuple[str, ...]:
    """The document's sentences (split after . ! ? followed by a space)."""
    parts = re.split(r"(?<=[.!?])\s+", doc_text.strip()) if doc_text.strip() else []
    return tuple(s.strip() for s in parts if len(s.strip()) > 12)


def content_words(title: str, doc_text: str) -> tuple[str, ...]:
    """Distinct content words of the title and text (letters only, 4-14 characters, not stop
    words), title words first, then by first appearance."""
    seen: dict[str, None] = {}
    for w in re.findall(r"[A-Za-z]+", f"{title} {doc_text}"):
        lw = w.lower()
        if 4 <= len(lw) <= 14 and lw not in STOPWORDS:
            seen.setdefault(lw, None)
    return tuple(seen)


_THEME_LEADS = ("Theme", "Setting", "Context", "Background", "Scenario", "Inspiration")


def theme_line(title: str, scenario: str, rng: random.Random) -> str:
    """A digit-free one-line theme: a lead word, the scenario and the document's title."""
    lead = rng.choice(_THEME_LEADS)
    text = f"{lead}: {scenario} ({title})" if title else f"{lead}: {scenario}"
    text = re.sub(r"[0-9{}\\\[\]`]", "", text)
    return safe_text(text, 200)


def class_name(words: tuple[str, ...], nouns: tuple[str, ...], rng: random.Random) -> str:
    """``<DocumentWord><Noun>Env`` (a family noun alone when the document gives no word)."""
    noun = rng.choice(nouns)
    pool = [w for w in words[:10] if w.isalpha()]
    word = rng.choice(pool).capitalize() if pool and rng.random() < 0.85 else ""
    return f"{word}{noun}Env"
