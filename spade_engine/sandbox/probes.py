"""Seeded validation inputs: the reset seeds and probe actions of one validation, and the garbage
actions of a play-time probe.

All of them are drawn from one integer seed, so a recorded run replays exactly (the engine derives
the seed from the run's seed and the environment's key and records what was drawn), while an
environment cannot know them in advance: it cannot behave only on the validator's seeds, nor
recognise its probe actions. (Version 1 of ``EnvironmentValidated`` used fixed inputs; the
catalogue keeps them for its upcaster.)
"""

from __future__ import annotations

import hashlib
import random
import secrets
import string

__all__ = [
    "seed_for",
    "random_seed",
    "validation_seeds",
    "probe_actions",
    "garbage_actions",
    "GARBAGE_SHAPES",
    "wrong_answer",
]

_UNICODE = "\u00fc\u00f1\u00ee\u00e7\u00f8\u00e9\u2603\u03bb\u4e2d\U0001f642\u0410\u05d0"


def seed_for(*parts: object) -> int:
    """A 31-bit seed from any parts (the same function as the engine's ``derive_seed``)."""
    h = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


def random_seed() -> int:
    """A fresh unpredictable 31-bit seed (for validations outside a run)."""
    return secrets.randbits(31)


def _word(rng: random.Random, lo: int = 5, hi: int = 12) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(lo, hi)))


def validation_seeds(seed: int) -> tuple[int, int]:
    """The two distinct reset seeds of one validation."""
    a = seed_for(seed, "reset", 0)
    b = seed_for(seed, "reset", 1)
    return (a, b if b != a else (a + 1) & 0x7FFFFFFF)


def probe_actions(seed: int) -> tuple[str, ...]:
    """The probe actions of one validation: the fixed malformed shapes (empty, unbalanced, nested)
    plus garbage whose content is drawn from ``seed`` (random words, a large number, a long
    string, unicode), so no environment can know the probes in advance."""
    rng = random.Random(seed_for(seed, "probes"))
    long_len = rng.randint(3000, 4000)
    return (
        "",
        _word(rng),
        "\\boxed{}",
        f"\\boxed{{{_word(rng)}}}",
        f"\\boxed{{{rng.randint(10**7, 10**9)}}}",
        "\\boxed{",
        "}}}{{{ \\boxed{\\boxed{}}",
        "".join(rng.choice(string.ascii_letters) for _ in range(long_len)),
        "".join(rng.choice(_UNICODE) for _ in range(6)) + f" \\boxed{{{rng.choice(_UNICODE)}{_word(rng, 2, 4)}}}",
    )


def _small_int(rng: random.Random) -> int:
    """A non-negative integer of 1 to 6 digits, the number of digits drawn first (so 0-9 are as
    likely as six-digit numbers)."""
    digits = rng.randint(1, 6)
    return rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10**digits - 1)


#: how many shapes :func:`garbage_actions` draws from
GARBAGE_SHAPES = 12


def garbage_actions(seed: int, n: int) -> list[str]:
    """``n`` garbage actions drawn from ``seed``, of varied shapes (so no environment can lose
    only on the shapes it expects), each action's shape drawn anew: boxed lower-case and
    mixed-case words, boxed large positive and negative numbers, decimals with many places, two
    words, a list of numbers, junk outside any box, and the shapes of a plausible answer: a
    small non-negative integer (1 to 6 digits) and a short plain word (2 to 4 letters), boxed or
    bare. The first kinds are far from anything a fair environment could accept by chance; the
    plausible ones can hit a fair answer only as often as a guess would, and an environment that
    pays only answers of that shape, whatever their value, is found by them (and by the
    wrong-answer replays of the plays it was won in, :mod:`spade_engine.engine.garbage`)."""
    rng = random.Random(seed_for(seed, "garbage"))
    out = []
    for i in range(n):
        kind = rng.randrange(GARBAGE_SHAPES)
        if kind == 0:
            out.append(f"\\boxed{{{_word(rng)}}}")
        elif kind == 1:
            out.append(f"\\boxed{{{rng.randint(10**7, 10**9)}}}")
        elif kind == 2:
            out.append(_word(rng) + " " + _word(rng))
        elif kind == 3:
            out.append(f"\\boxed{{{_word(rng).capitalize()}{_word(rng, 3, 6).upper()}}}")
        elif kind == 4:
            out.append(f"\\boxed{{-{rng.randint(10**6, 10**9)}}}")
        elif kind == 5:
            out.append(f"\\boxed{{{rng.randint(1000, 99999)}.{rng.randint(10**4, 10**6 - 1)}}}")
        elif kind == 6:
            out.append(f"\\boxed{{{_word(rng)} {_word(rng)}}}")
        elif kind == 7:
            out.append("\\boxed{[" + ", ".join(str(rng.randint(10**5, 10**7)) for _ in range(3)) + "]}")
        elif kind == 8:
            out.append(f"\\boxed{{{_small_int(rng)}}}")
        elif kind == 9:
            out.append(f"\\boxed{{{_word(rng, 2, 4)}}}")
        elif kind == 10:
            out.append(str(_small_int(rng)))
        else:
            out.append(_word(rng, 2, 4))
    return out


def wrong_answer(action: str, seed: int) -> str:
    """``action`` with its answer deliberately wrong but of exactly the same shape: a
    ``\\boxed{...}`` stays boxed, and every digit of the answer becomes another digit, every
    lower-case letter another lower-case letter, every upper-case letter another upper-case one
    (a number keeps its sign, length and decimal point, and gets no leading zero it did not
    have; other characters stay). Same shape, other value: no environment can tell it from a
    real answer by its form, so one whose episode is still won with it does not depend on the
    answer. An answer with no letter or digit gets one added."""
    rng = random.Random(seed_for(seed, "wrong"))
    text = action.strip()
    boxed = text.startswith("\\boxed{") and text.endswith("}")
    inner = text[len("\\boxed{") : -1] if boxed else text
    out = []
    for i, c in enumerate(inner):
        for alphabet in (string.digits, string.ascii_lowercase, string.ascii_uppercase):
            if c in alphabet:
                lead = alphabet is string.digits and c != "0" and not any(ch.isdigit() for ch in inner[:i])
                choices = [x for x in alphabet if x != c and not (lead and x == "0")]
                c = rng.choice(choices)
                break
        out.append(c)
    wrong = "".join(out)
    if wrong == inner:
        wrong = inner + rng.choice(string.ascii_lowercase)
    return f"\\boxed{{{wrong}}}" if boxed else wrong
