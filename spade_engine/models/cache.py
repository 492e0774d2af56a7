"""The model cache: where fetched and converted models live, and how they get there atomically.

Root: ``--cache DIR``, else ``$SPADE_MODEL_CACHE``, else the user-wide
``$XDG_CACHE_HOME/spade-engine/models`` (``~/.cache/spade-engine/models``), one cache for every
data directory, as the Hugging Face cache is. Models an earlier version fetched into
``<data dir>/models`` (the old default) are still found there (read only; a fetch writes to the
root). Layout::

    <root>/<name>/manifest.json      what was fetched, the pins checked, timings (written last)
    <root>/<name>/<name>.gguf        the assembled, verified GGUF
    <root>/<name>/hf/                plain transformers directory: from_pretrained() loads it
    <root>/local/<sha256>/...        the same for a local .gguf file, keyed by its sha256
    <root>/tokenizers/<sha256>/hf/   the tokenizer alone of a local .gguf file (llama.cpp runs
                                     the file itself and needs no converted weights)
    <root>/tmp/                      work in progress and per-model lock files

Everything is built in a fresh directory under ``tmp/`` and renamed into place only when it is
complete, so a failed or interrupted fetch never leaves a half-written model where a complete
one is expected. A lock file per model serialises concurrent fetches of the same model.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ..cachedirs import user_cache_dir
from ..events.store import resolve_data_dir

__all__ = ["ModelCache", "resolve_cache_root", "legacy_cache_root", "MANIFEST", "HF_DIR", "CACHE_ENV", "dir_size"]

CACHE_ENV = "SPADE_MODEL_CACHE"
MANIFEST = "manifest.json"
HF_DIR = "hf"


def resolve_cache_root(cache: str | Path | None = None, *, data_dir: str | Path | None = None) -> Path:
    """``cache`` (the ``--cache`` flag), else ``$SPADE_MODEL_CACHE``, else the user-wide
    ``$XDG_CACHE_HOME/spade-engine/models``. (``data_dir`` names the data directory whose old
    ``models`` folder :meth:`ModelCache.resolve` still reads.)"""
    if cache:
        return Path(cache).expanduser()
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    return user_cache_dir("models")


def legacy_cache_root(data_dir: str | Path | None = None) -> Path:
    """Where models were fetched before the cache was user-wide: ``<data dir>/models``."""
    return resolve_data_dir(data_dir) / "models"


def dir_size(path: Path) -> int:
    """Bytes of the regular files under ``path``."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


@dataclass(frozen=True)
class ModelCache:
    """One cache root (written), and older roots still read (``legacy``)."""

    root: Path
    legacy: tuple[Path, ...] = ()

    @classmethod
    def resolve(cls, cache: str | Path | None = None, *, data_dir: str | Path | None = None) -> "ModelCache":
        """The cache a command uses (:func:`resolve_cache_root`); without ``--cache`` and
        ``$SPADE_MODEL_CACHE`` it also reads the data directory's old ``models`` folder."""
        root = resolve_cache_root(cache, data_dir=data_dir)
        legacy: tuple[Path, ...] = ()
        if not cache and not os.environ.get(CACHE_ENV):
            old = legacy_cache_root(data_dir)
            if old.is_dir() and old.resolve() != root.resolve():
                legacy = (old,)
        return cls(root, legacy)

    # -- layout ----------------------------------------------------------------------------------

    @property
    def tmp_dir(self) -> Path:
        return self.root / "tmp"

    def entry_dir(self, name: str) -> Path:
        """Directory of catalogue model ``name`` (complete or not)."""
        return self.root / name

    def local_dir(self, sha256: str) -> Path:
        """Directory of the conversion of a local GGUF file with this sha256."""
        return self.root / "local" / sha256

    def tokenizer_dir(self, sha256: str) -> Path:
        """Directory of the tokenizer alone of a local GGUF file with this sha256."""
        return self.root / "tokenizers" / sha256

    def find_entry(self, name: str) -> Path:
        """Where catalogue model ``name`` is complete: the root, else an older root, else (not
        fetched) where a fetch would put it."""
        return self._find(Path(name))

    def find_local(self, sha256: str) -> Path:
        """Like :meth:`find_entry` for the conversion of a local GGUF file."""
        return self._find(Path("local") / sha256)

    def _find(self, rel: Path) -> Path:
        for root in (self.root, *self.legacy):
            if self.is_complete(root / rel):
                return root / rel
        return self.root / rel

    @staticmethod
    def model_dir(entry_dir: Path) -> Path:
        """The transformers directory inside an entry directory."""
        return entry_dir / HF_DIR

    @staticmethod
    def is_complete(entry_dir: Path) -> bool:
        return (entry_dir / MANIFEST).is_file() and (entry_dir / HF_DIR / "config.json").is_file()

    @staticmethod
    def manifest(entry_dir: Path) -> dict[str, Any] | None:
        try:
            return json.loads((entry_dir / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    # -- building --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _lock(self, key: str, on_wait: Callable[[], None] | None) -> Iterator[None]:
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        with open(self.tmp_dir / f"{key}.lock", "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait()
                fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _clear_stale(self, key: str) -> None:
        """Remove work directories a killed process left behind (we hold the key's lock)."""
        for p in self.tmp_dir.glob(f"{key}.*"):
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)

    def install(
        self,
        final: Path,
        build: Callable[[Path], None],
        *,
        key: str,
        force: bool = False,
        on_wait: Callable[[], None] | None = None,
        complete: Callable[[Path], bool] | None = None,
    ) -> bool:
        """Run ``build(work_dir)`` and rename the work directory to ``final``.

        Returns False (and builds nothing) when ``final`` is already complete (``complete``, by
        default :meth:`is_complete`) and not ``force``.
        On any failure, including KeyboardInterrupt, the work directory is removed and ``final``
        is left as it was.
        """
        with self._lock(key, on_wait):
            if (complete or self.is_complete)(final) and not force:
                return False
            self._clear_stale(key)
            work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=self.tmp_dir))
            try:
                build(work)
                _share(work)
                final.parent.mkdir(parents=True, exist_ok=True)
                old = None
                if final.exists():
                    old = Path(tempfile.mkdtemp(prefix=f"{key}.old-", dir=self.tmp_dir))
                    os.rename(final, old / "entry")
                os.rename(work, final)
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True)
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)
                raise
        return True


def _share(work: Path) -> None:
    """Give the finished tree the permissions the umask allows (mkdtemp and safetensors use 0600/0700)."""
    umask = os.umask(0)
    os.umask(umask)
    for p in [work, *work.rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~umask)


def write_manifest(entry_dir: Path, data: dict[str, Any]) -> None:
    """Write ``manifest.json`` (the last file of a build: its presence marks completeness)."""
    (entry_dir / MANIFEST).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
