"""``--model`` specs: a catalogue name, a local directory, a ``.gguf`` file, or a hub id.

:func:`resolve_model_spec` turns a spec into something ``from_pretrained`` loads:

- an existing directory: itself (local paths win, as in transformers);
- an existing ``.gguf`` file: converted once into ``<cache>/local/<sha256>/hf`` (keyed by the
  file's content, so a renamed or copied file is not converted again) and that directory;
- a catalogue name: its fetched directory; not fetched yet is an error naming the fetch command
  (fetching downloads hundreds of MB, so it is never started implicitly);
- anything else (a hub id, ``tiny``): returned unchanged.

:func:`resolve_gguf_spec` does the same for the llama.cpp backend, which runs the GGUF file itself:
a catalogue name or ``.gguf`` file becomes that file and a tokenizer directory (the fetched
conversion's, or the tokenizer alone extracted once from a local file).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from .cache import MANIFEST, ModelCache, dir_size, write_manifest
from .catalogue import Catalogue, load_catalogue
from .convert import convert_gguf
from .download import sha256_file
from .errors import ConversionError, ModelNotFetched
from .progress import NullProgress, Progress

__all__ = ["resolve_model_spec", "fetched_model_dir", "convert_local_gguf", "GgufModel", "resolve_gguf_spec", "gguf_tokenizer_dir"]


def fetched_model_dir(name: str, cache: ModelCache) -> Path:
    """The transformers directory of catalogue model ``name``; ModelNotFetched if absent."""
    entry_dir = cache.find_entry(name)
    if not ModelCache.is_complete(entry_dir):
        raise ModelNotFetched(
            f"model {name!r} is not fetched into {cache.root} (run `spade-engine models fetch {name}`)"
        )
    return ModelCache.model_dir(entry_dir)


def convert_local_gguf(
    path: Path,
    cache: ModelCache,
    *,
    catalogue: Catalogue | None = None,
    dtype: str = "bfloat16",
    progress: Progress | None = None,
    on_wait: Callable[[], None] | None = None,
) -> Path:
    """The transformers directory for the GGUF file at ``path``, converting it on first use."""
    progress = progress or NullProgress()
    with progress.stage(f"hash {path.name}") as st:
        digest = sha256_file(path)
        st.note(digest[:16])
    if catalogue is not None:  # the assembled GGUF of a fetched catalogue model is already converted
        for entry in catalogue:
            if entry.gguf_sha256 == digest and ModelCache.is_complete(cache.find_entry(entry.name)):
                return ModelCache.model_dir(cache.find_entry(entry.name))
    if ModelCache.is_complete(cache.find_local(digest)):
        return ModelCache.model_dir(cache.find_local(digest))
    final = cache.local_dir(digest)

    def build(work: Path) -> None:
        t = time.monotonic()
        info = convert_gguf(path, ModelCache.model_dir(work), dtype=dtype, progress=progress)
        write_manifest(work, {
            "kind": "local-gguf",
            "source": str(path.resolve()),
            "gguf_sha256": digest,
            "gguf_size": path.stat().st_size,
            "converted": info.to_dict(),
            "seconds": {"convert_s": round(time.monotonic() - t, 2)},
            "sizes": {"hf": dir_size(ModelCache.model_dir(work))},
            "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        })

    cache.install(final, build, key=f"gguf-{digest}", on_wait=on_wait)
    return ModelCache.model_dir(final)


def resolve_model_spec(
    spec: str,
    *,
    data_dir: str | Path | None = None,
    cache: str | Path | None = None,
    catalogue: Catalogue | None = None,
    dtype: str = "bfloat16",
    progress: Progress | None = None,
) -> str:
    """What ``from_pretrained`` should load for ``spec`` (see the module docstring)."""
    store = ModelCache.resolve(cache, data_dir=data_dir)
    path = Path(spec).expanduser()
    if path.is_dir():
        return str(path)
    if spec.lower().endswith(".gguf"):
        if not path.is_file():
            raise ConversionError(f"GGUF file {spec!r} does not exist")
        cat = catalogue if catalogue is not None else load_catalogue()
        return str(convert_local_gguf(path, store, catalogue=cat, dtype=dtype, progress=progress))
    cat = catalogue if catalogue is not None else load_catalogue()
    if spec in cat:
        return str(fetched_model_dir(spec, store))
    return spec


@dataclass(frozen=True)
class GgufModel:
    """A GGUF model file for llama.cpp and a directory ``AutoTokenizer`` loads its tokenizer
    from (the same token ids and chat template as the transformers side)."""

    gguf: Path
    tokenizer_dir: Path
    #: the catalogue entry it is, if any
    name: str | None = None


def _tokenizer_complete(entry_dir: Path) -> bool:
    return (entry_dir / MANIFEST).is_file() and (entry_dir / "hf" / "tokenizer_config.json").is_file()


def gguf_tokenizer_dir(path: Path, cache: ModelCache, *, digest: str | None = None) -> Path:
    """A tokenizer directory for the GGUF file at ``path``: its full conversion's when there is
    one, else its tokenizer alone, extracted once into ``<cache>/tokenizers/<sha256>``."""
    digest = digest or sha256_file(path)
    converted = cache.find_local(digest)
    if ModelCache.is_complete(converted):
        return ModelCache.model_dir(converted)
    final = cache.tokenizer_dir(digest)

    def build(work: Path) -> None:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        tok.save_pretrained(str(work / "hf"))
        write_manifest(work, {"kind": "gguf-tokenizer", "source": str(path.resolve()), "gguf_sha256": digest})

    cache.install(final, build, key=f"tok-{digest}", complete=_tokenizer_complete)
    return final / "hf"


def resolve_gguf_spec(
    spec: str,
    *,
    data_dir: str | Path | None = None,
    cache: str | Path | None = None,
    catalogue: Catalogue | None = None,
) -> GgufModel:
    """The GGUF file and tokenizer of a ``--model`` spec for llama.cpp: a catalogue name (fetched,
    else :class:`ModelNotFetched` naming the fetch command) or a ``.gguf`` file. A directory or hub
    id holds no GGUF file: :class:`ConversionError` says which backend loads it."""
    store = ModelCache.resolve(cache, data_dir=data_dir)
    path = Path(spec).expanduser()
    if spec.lower().endswith(".gguf"):
        if not path.is_file():
            raise ConversionError(f"GGUF file {spec!r} does not exist")
        cat = catalogue if catalogue is not None else load_catalogue()
        digest = sha256_file(path)
        for entry in cat:
            if entry.gguf_sha256 == digest and ModelCache.is_complete(store.find_entry(entry.name)):
                return GgufModel(gguf=path, tokenizer_dir=ModelCache.model_dir(store.find_entry(entry.name)), name=entry.name)
        return GgufModel(gguf=path, tokenizer_dir=gguf_tokenizer_dir(path, store, digest=digest))
    cat = catalogue if catalogue is not None else load_catalogue()
    if spec in cat:
        entry = cat.get(spec)
        hf = fetched_model_dir(spec, store)
        return GgufModel(gguf=store.find_entry(spec) / entry.gguf_file, tokenizer_dir=hf, name=spec)
    raise ConversionError(
        f"model {spec!r} is neither a catalogue name nor a .gguf file: the llamacpp policy runs GGUF models "
        "(policy.kind = \"transformers\" loads directories and hub ids)"
    )
