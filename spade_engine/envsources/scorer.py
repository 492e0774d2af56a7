"""The answer scorer embedded in every wrapped reasoning-gym environment (standard library only).

The sandbox runs model-written and generated code with the standard library and gymnasium; it
is never asked to import reasoning-gym (a large third-party package with its own dependencies),
so a wrapped item cannot call the task's verifier. Instead the generated environment carries the
item's expected answer and these functions, whose source is copied verbatim into the code
(:data:`EMBEDDED_SOURCE`), so the engine process and the sandbox grade with the same code:

* :func:`extract_answer`: the content of the last ``\\boxed{...}`` (nested braces allowed, as the
  engine's :func:`~spade_engine.engine.rollouts.parse_boxed`), else of the last
  ``<answer>...</answer>`` (reasoning-gym's own convention), else ``None``, exactly what held-out
  evaluation extracts (:func:`spade_engine.evaluation.scoring.extract_answer`);
* :func:`normalise`: Unicode NFKC, one layer of ``$...$`` or ``\\text{...}`` removed,
  ``\\frac{a}{b}`` written ``a/b``, runs of white space collapsed, a trailing full stop dropped.
  Case is kept (several tasks are case-sensitive, e.g. word sorting by Unicode order);
* :func:`answers_match`: equal after normalisation; or, when the expected answer is a number,
  the same number (``2.50`` = ``2.5`` = ``25e-1``; an integer answer needs an integer, so ``8.0``
  does not answer ``8``); or, for a comma-separated expected answer, the same items in the same
  order whatever the spacing.

What this loses against the task's own verifier (``dataset.score_answer``): partial credit (the
reward is 1 or 0), numeric tolerances (``power_function`` accepts 3 significant figures, this
scorer wants the exact digits), answers with several valid forms (an unsimplified but equal
expression, any valid path or assignment of a puzzle, a set in any order) and task-specific
parsing (``knights_knaves`` reads names and roles in any order). Such answers score 0 in
training although the verifier would accept them; it never works the other way for the checks
:func:`~spade_engine.envsources.rgpool.scorer_agreement` runs (the oracle answer and the answers
of other items of the task). Held-out evaluation always uses the task's own verifier, on the
trusted side.
"""

from __future__ import annotations

import inspect
import re
import unicodedata
from fractions import Fraction

__all__ = ["SCORER_VERSION", "extract_answer", "normalise", "as_number", "answers_match", "EMBEDDED_SOURCE"]

#: recorded in every generated environment: changes to these functions get a new name (v2: v1's
#: results, with the answer extracted in linear time)
SCORER_VERSION = "normalised-match-v2"

# Every pattern here runs in linear time, on answers (model text) in the sandbox and on the
# datasets' answers in the engine's process (rgpool): _BOXED_RE is a literal and a run of white
# space ending at the brace; _NUMBER_RE, _INTEGER_RE and _GROUPED_RE are only used with fullmatch
# and have one way to match each character (a digit run is followed by a non-digit or the end);
# _FRAC_RE's starts are "frac" literals, its white-space runs and brace-free contents are disjoint
# between starts; _TEXT_RE is only used with fullmatch (one start; ".*" backs off to the last
# brace). The unclosed-tag and unclosed-box cases that made the former patterns quadratic are
# parsed by hand (extract_answer).
_BOXED_RE = re.compile(r"\\boxed\s*\{")
_BRACE_RE = re.compile(r"[{}]")
_NUMBER_RE = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
_INTEGER_RE = re.compile(r"[-+]?\d+")
_GROUPED_RE = re.compile(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?")
_FRAC_RE = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_TEXT_RE = re.compile(r"\\text\s*\{(.*)\}", re.S)


def extract_answer(text):
    """The last ``\\boxed{...}`` content (the complete one that starts last), else the last
    ``<answer>`` tag's content (what ``re.findall(r"<answer>\\s?(.*?)\\s?</answer>", text,
    re.S)[-1].strip()`` gives), else None; in linear time, each brace paired once with a stack."""
    text = str(text)
    opens = {m.end() - 1 for m in _BOXED_RE.finditer(text)}
    stack = []
    best, last = -1, None
    for m in _BRACE_RE.finditer(text) if opens else ():
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            start = stack.pop()
            if start in opens and start > best:
                best, last = start, text[start + 1 : m.start()].strip()
    if last is not None:
        return last
    tag, i = None, 0
    while True:
        j = text.find("<answer>", i)
        k = text.find("</answer>", j + 8) if j >= 0 else -1
        if k < 0:
            return tag.strip() if tag is not None else None
        tag, i = text[j + 8 : k], k + 9


def normalise(text):
    """The answer text compared by :func:`answers_match` (see the module docstring)."""
    t = unicodedata.normalize("NFKC", str(text)).strip()
    for _ in range(3):
        if len(t) >= 2 and t[0] == "$" and t[-1] == "$":
            t = t[1:-1].strip()
        m = _TEXT_RE.fullmatch(t)
        if m:
            t = m.group(1).strip()
    t = _FRAC_RE.sub(lambda m: m.group(1).strip() + "/" + m.group(2).strip(), t)
    t = re.sub(r"\s+", " ", t).strip()
    while t.endswith("."):
        t = t[:-1].rstrip()
    return t


def as_number(text):
    """The exact value of a plain decimal number (``-1,234.5``, ``2e3``), else None."""
    s = str(text).replace(" ", "")
    if _GROUPED_RE.fullmatch(s):
        s = s.replace(",", "")
    if not _NUMBER_RE.fullmatch(s):
        return None
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


def answers_match(guess, expected):
    """Whether ``guess`` answers ``expected`` (both texts; see the module docstring)."""
    g, e = normalise(guess), normalise(expected)
    if g == e:
        return True
    want = as_number(e)
    if want is not None:
        got = as_number(g)
        if got is None:
            return False
        if _INTEGER_RE.fullmatch(e.replace(",", "")) and not _INTEGER_RE.fullmatch(g.replace(",", "").replace(" ", "")):
            return False
        return got == want
    if "," in e:
        return [x.strip() for x in g.split(",")] == [x.strip() for x in e.split(",")]
    return False


def _embedded_source() -> str:
    names = ("_BOXED_RE", "_BRACE_RE", "_NUMBER_RE", "_INTEGER_RE", "_GROUPED_RE", "_FRAC_RE", "_TEXT_RE")
    consts = "\n".join(f"{n} = re.compile({globals()[n].pattern!r}{', re.S' if globals()[n].flags & re.S else ''})" for n in names)
    funcs = "\n\n".join(inspect.getsource(f) for f in (extract_answer, normalise, as_number, answers_match))
    return f"{consts}\n\n\n{funcs}"


#: the scorer as it is written into each generated environment
EMBEDDED_SOURCE = _embedded_source()
