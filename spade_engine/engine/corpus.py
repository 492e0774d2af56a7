"""The document corpus that grounds the designer: loading, seeded sampling, truncation, references.

Sources:

* ``*.txt``: one document per file;
* ``*.md``: one document per top-level section (``# Title``), or the whole file when it has none;
* ``*.jsonl``: one document per line, a JSON object with a ``text`` field (optional ``id``,
  ``title``, ``domain``);
* a directory: every such file in it, recursively, in sorted order.

With no paths, the small corpus bundled with the package (``corpus_data/*.jsonl``: short
documents on math, science, code, logic and tool use, written for this project) is used.

Sampling is a pure function of ``(seed, index)``, so a resumed run picks the same document for
the same environment. Every use is recorded as a :class:`~spade_engine.events.DocumentRef`
(source, id, sha256 of the full text).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import SpadeError
from ..events.catalogue import DocumentRef

__all__ = ["Document", "Corpus", "CorpusError", "load_documents", "bundled_corpus", "truncate_tokens"]

SUFFIXES = (".txt", ".md", ".jsonl")


class CorpusError(SpadeError):
    """A corpus path is missing, unreadable, or holds no usable document."""


@dataclass(frozen=True)
class Document:
    """One grounding document."""

    source: str
    doc_id: str
    text: str
    title: str = ""
    domain: str = ""

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def ref(self) -> DocumentRef:
        """The reference recorded in ``EnvironmentProposed.document``."""
        return DocumentRef(source=self.source, doc_id=self.doc_id, sha256=self.sha256, title=self.title, domain=self.domain)


def truncate_tokens(text: str, budget: int, tokenize: Callable[[str], Sequence[object]] | None = None) -> str:
    """``text`` cut to at most ``budget`` tokens.

    Without a tokenizer, tokens are whitespace-separated words (a conservative stand-in: LLM
    tokenizers give >= 1 token per word). With ``tokenize`` (e.g. a Hugging Face tokenizer's
    ``tokenize``), the cut is made at the last whole word that fits.
    """
    if budget <= 0:
        return ""
    words = list(re.finditer(r"\S+", text))
    if tokenize is None:
        if len(words) <= budget:
            return text.strip()
        return text[: words[budget - 1].end()].strip() + " ..."
    if len(tokenize(text)) <= budget:
        return text.strip()
    lo, hi = 0, len(words)
    while lo < hi:  # largest prefix of whole words within the budget
        mid = (lo + hi + 1) // 2
        if len(tokenize(text[: words[mid - 1].end()])) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return (text[: words[lo - 1].end()].strip() + " ...") if lo else ""


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CorpusError(f"corpus file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"cannot read corpus file {path}: {exc}") from None


def _jsonl_documents(path: Path, source: str, text: str) -> list[Document]:
    docs = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str) or not obj["text"].strip():
            raise CorpusError(f"{path}:{lineno}: expected a JSON object with a non-empty 'text' field")
        doc_id = str(obj.get("id", f"{path.stem}:{lineno}"))
        docs.append(
            Document(
                source=source,
                doc_id=doc_id,
                text=obj["text"].strip(),
                title=str(obj.get("title", "")),
                domain=str(obj.get("domain", "")),
            )
        )
    return docs


def _markdown_documents(path: Path, source: str, text: str) -> list[Document]:
    sections = re.split(r"(?m)^# +(.+?)\s*$", text)
    docs = []
    if len(sections) == 1:
        body = text.strip()
        return [Document(source=source, doc_id=path.stem, text=body, title=path.stem)] if body else []
    preamble = sections[0].strip()
    if preamble:
        docs.append(Document(source=source, doc_id=f"{path.stem}#0", text=preamble, title=path.stem))
    for i in range(1, len(sections), 2):
        title, body = sections[i].strip(), sections[i + 1].strip()
        if body:
            slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or str(i // 2 + 1)
            docs.append(Document(source=source, doc_id=f"{path.stem}#{slug}", text=body, title=title))
    return docs


def _file_documents(path: Path, source: str | None = None) -> list[Document]:
    source = source or str(path)
    text = _read_text(path)
    if path.suffix == ".jsonl":
        return _jsonl_documents(path, source, text)
    if path.suffix == ".md":
        return _markdown_documents(path, source, text)
    body = text.strip()
    return [Document(source=source, doc_id=path.stem, text=body, title=path.stem)] if body else []


def load_documents(paths: Iterable[str | Path]) -> list[Document]:
    """Documents from files and directories (see the module docstring for formats)."""
    docs: list[Document] = []
    for p in paths:
        path = Path(p).expanduser()
        if path.is_dir():
            files = sorted(f for f in path.rglob("*") if f.is_file() and f.suffix in SUFFIXES)
            if not files:
                raise CorpusError(f"corpus directory {path} has no .txt, .md or .jsonl files")
            for f in files:
                docs.extend(_file_documents(f))
        elif not path.exists():
            raise CorpusError(f"corpus path {path} does not exist")
        elif path.suffix not in SUFFIXES:
            raise CorpusError(f"corpus file {path}: unsupported type (expected .txt, .md or .jsonl)")
        else:
            docs.extend(_file_documents(path))
    return docs


def bundled_corpus() -> "Corpus":
    """The small default corpus shipped with the package."""
    root = resources.files("spade_engine.engine") / "corpus_data"
    docs: list[Document] = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".jsonl"):
            docs.extend(_jsonl_documents(Path(entry.name), f"bundled:{entry.name}", entry.read_text(encoding="utf-8")))
    return Corpus(docs)


class Corpus:
    """An ordered set of documents with deterministic sampling."""

    def __init__(self, documents: Sequence[Document]):
        if not documents:
            raise CorpusError("the corpus is empty")
        self.documents = list(documents)

    @classmethod
    def from_paths(cls, paths: Sequence[str | Path]) -> "Corpus":
        """The documents under ``paths``, or the bundled corpus when ``paths`` is empty."""
        if not paths:
            return bundled_corpus()
        return cls(load_documents(paths))

    def __len__(self) -> int:
        return len(self.documents)

    def domains(self) -> list[str]:
        return sorted({d.domain for d in self.documents if d.domain})

    def nth(self, seed: int, n: int, *, domain: str | None = None) -> Document:
        """The ``n``-th document of a seeded permutation of the (domain's) documents: consecutive
        ``n`` cycle through every document before any repeats."""
        pool = [d for d in self.documents if domain and d.domain == domain] or self.documents
        order = list(range(len(pool)))
        random.Random(f"corpus:{seed}:{domain or '*'}:{n // len(pool)}").shuffle(order)
        return pool[order[n % len(pool)]]

    def sample(self, seed: int, index: int, *, domain: str | None = None) -> Document:
        """The document for environment number ``index`` of a run with ``seed``.

        With ``domain``, documents of that domain are preferred (all documents when none has it).
        """
        pool = [d for d in self.documents if domain and d.domain == domain] or self.documents
        rng = random.Random(f"corpus:{seed}:{index}")
        return pool[rng.randrange(len(pool))]
