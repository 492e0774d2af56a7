"""Ferry a fetched catalogue model (and any extra files, e.g. wheels) to the lent device machine
in chunks small enough for one device call each, then rebuild it there.

The device machine reaches nothing outside itself, and one call carries at most 64 MiB (the
working tree included), so the 0.5B GGUF (491,400,064 bytes) cannot travel in one call. Here the
GGUF (and the ``--extra`` files, in order) are treated as one byte stream, hashed and cut into
chunks of ``--chunk-bytes`` (default: as many chunks as 60 MiB ones would make, but as even as whole
MiB allow, so each call stays further under the limit; the last chunk is the smallest and rides with
the bench call's wheels), one folder per chunk::

    .ferry/<name>/split.json            the manifest (stays here: marks the sending side)
    .ferry/<name>/chunkNN/part          chunk NN's bytes
    .ferry/<name>/chunkNN/manifest.json a copy of the manifest (so every chunk checks itself)

Each device call carries exactly one ``.ferry/<name>/chunkNN`` folder. There, ``receive`` checks
every chunk that arrived against its manifest (size and sha256) and moves it into the store,
``.ferry/store/<name>/`` by default (``$SPADE_FERRY_STORE`` to change it): an ignored folder in
the repository root, which the device tool keeps between the calls of one warm machine (its
``run`` notes: "ignored build outputs already there are kept between calls, except any that block
a copied path"; nothing is promised for folders outside the repository, such as ``/tmp``). A
chunk that fails its check is deleted and named, to be sent again. ``join`` then concatenates the
chunks in order, checks each file's size and sha256 and the whole stream's, checks the GGUF
against the catalogue's pins, and installs it in the model cache as that catalogue entry
(``<cache>/<name>/{<name>.gguf, hf/, manifest.json}``, converted by the same code as ``spade-engine
models fetch``), so ``--model <name>`` resolves. A GGUF whose name is not in the catalogue is
converted as a local file instead (``<cache>/local/<sha256>/hf``).

``split`` and ``receive`` use the standard library only (the device has no msgspec or pydantic
until the carried wheels are installed); ``join`` imports the engine.

    scripts/device_ferry.sh split qwen2.5-coder-0.5b-instruct --extra .ferry/wheels/*.whl   # here
    scripts/device_ferry.sh plan qwen2.5-coder-0.5b-instruct     # here: the device calls again
    scripts/device_ferry.sh receive                              # there, in every ferry call
    scripts/device_ferry.sh join qwen2.5-coder-0.5b-instruct     # there: prints the model directory
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

MiB = 1 << 20
DEFAULT_CHUNK = 60 * MiB
CALL_LIMIT = 64 * MiB  # the device tool: working tree + carried paths, per call
MARGIN = 1 * MiB  # left free under CALL_LIMIT (manifests, files added to the tree later)
CHUNK_ENV = "SPADE_FERRY_CHUNK_BYTES"
STORE_ENV = "SPADE_FERRY_STORE"
CACHE_ENV = "SPADE_MODEL_CACHE"
FERRY = ".ferry"
SPLIT_MANIFEST = "split.json"
CHUNK_MANIFEST = "manifest.json"
PART = "part"
READ = 8 * MiB
FORMAT = 1


class FerryError(Exception):
    """A refused chunk, a missing one, a mismatch: the message says which and what to do."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def chunk_dir_name(i: int) -> str:
    return f"chunk{i:02d}"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(READ):
            h.update(block)
    return h.hexdigest()


def store_root(root: Path) -> Path:
    env = os.environ.get(STORE_ENV)
    return Path(env).expanduser() if env else root / FERRY / "store"


def mib(n: int) -> str:
    return f"{n / MiB:.1f} MiB"


# -- here: split ---------------------------------------------------------------------------------


def _default_cache(name: str) -> Path:
    """``$SPADE_MODEL_CACHE``, else ``~/.cache/spade-models`` when it holds ``name``, else the engine's default."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    home = Path("~/.cache/spade-models").expanduser()
    if (home / name).is_dir():
        return home
    try:
        from spade_engine.models.cache import resolve_cache_root

        return resolve_cache_root()
    except ImportError:
        return home


def _catalogue_entry(name: str, catalogue: str | None) -> Any:
    """The catalogue entry ``name`` (None when it is not listed or the engine cannot be imported)."""
    try:
        from spade_engine.models.catalogue import load_catalogue
    except ImportError as exc:
        log(f"note: cannot import the engine's catalogue ({exc}); the GGUF is checked against the cache manifest only")
        return None
    cat = load_catalogue(catalogue)
    return cat.get(name) if name in cat else None


def find_gguf(name: str, cache: Path, entry: Any) -> tuple[Path, dict[str, Any]]:
    """The fetched GGUF of ``name`` in ``cache`` and the cache manifest's record of it."""
    entry_dir = cache / name
    if entry is not None:
        gguf = entry_dir / entry.gguf_file
    else:
        found = sorted(entry_dir.glob("*.gguf"))
        if len(found) != 1:
            raise FerryError(f"{entry_dir}: expected one .gguf file, found {len(found)} (fetch it: spade-engine models fetch {name})")
        gguf = found[0]
    if not gguf.is_file():
        raise FerryError(f"{gguf} does not exist: fetch the model first (spade-engine models fetch {name}), "
                         f"or point --cache / ${CACHE_ENV} at the cache that holds it")
    try:
        manifest = json.loads((entry_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    return gguf, manifest.get("assembled", {}) if isinstance(manifest, dict) else {}


def tree_bytes(root: Path) -> int | None:
    """Bytes of what every device call sends besides its carry: tracked and untracked-not-ignored
    files (and a ``shared/`` folder inside the checkout). None outside a git checkout."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "-co", "--exclude-standard"],
                             check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    total = 0
    for rel in out.decode(errors="replace").split("\0"):
        p = root / rel
        if rel and p.is_file() and not p.is_symlink():
            total += p.stat().st_size
    shared = root / "shared"
    if shared.is_dir():
        total += sum(p.stat().st_size for p in shared.rglob("*") if p.is_file() and not p.is_symlink())
    return total


def split(
    name: str,
    *,
    root: Path,
    cache: Path | None = None,
    chunk_bytes: int | None = None,
    extras: list[Path] | None = None,
    catalogue: str | None = None,
) -> dict[str, Any]:
    """Cut the fetched GGUF of ``name`` (then ``extras``) into chunk folders under ``root/.ferry/name``."""
    cache = cache or _default_cache(name)
    entry = _catalogue_entry(name, catalogue)
    gguf, assembled = find_gguf(name, cache, entry)
    members: list[dict[str, Any]] = [{"name": gguf.name, "kind": "gguf", "catalogue": name, "path": gguf}]
    for extra in extras or []:
        extra = Path(extra)
        if not extra.is_file():
            raise FerryError(f"extra file {extra} does not exist")
        if any(m["name"] == extra.name for m in members):
            raise FerryError(f"two files named {extra.name}: the ferry keeps one folder of files")
        members.append({"name": extra.name, "kind": "wheel" if extra.name.endswith(".whl") else "file", "path": extra})

    chunk = int(chunk_bytes or os.environ.get(CHUNK_ENV) or 0)
    if chunk < 0:
        raise FerryError(f"chunk size must be positive, not {chunk}")
    if not chunk:  # as few chunks as 60 MiB ones, made as even as whole MiB allow: more room under the call limit
        total = sum(Path(m["path"]).stat().st_size for m in members)
        n = max(1, -(-total // DEFAULT_CHUNK))
        chunk = min(DEFAULT_CHUNK, -(-total // n // MiB) * MiB or DEFAULT_CHUNK)
    out_dir = root / FERRY / name
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    stream = hashlib.sha256()
    chunks: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    offset = 0
    cur: dict[str, Any] | None = None
    cur_fh = None
    cur_hash = None

    def close_chunk() -> None:
        nonlocal cur, cur_fh, cur_hash
        if cur is not None:
            cur_fh.close()
            cur["sha256"] = cur_hash.hexdigest()
            chunks.append(cur)
        cur, cur_fh, cur_hash = None, None, None

    try:
        for m in members:
            fh_hash = hashlib.sha256()
            start, size = offset, 0
            with open(m["path"], "rb") as src:
                while True:
                    if cur is None:
                        d = out_dir / chunk_dir_name(len(chunks))
                        d.mkdir()
                        cur = {"index": len(chunks), "dir": d.name, "offset": offset, "size": 0}
                        cur_fh = open(d / PART, "wb")
                        cur_hash = hashlib.sha256()
                    want = min(READ, chunk - cur["size"])
                    block = src.read(want)
                    if not block:
                        break
                    cur_fh.write(block)
                    for h in (stream, fh_hash, cur_hash):
                        h.update(block)
                    cur["size"] += len(block)
                    size += len(block)
                    offset += len(block)
                    if cur["size"] == chunk:
                        close_chunk()
            files.append({"name": m["name"], "kind": m["kind"], "offset": start, "size": size,
                          "sha256": fh_hash.hexdigest(), **({"catalogue": m["catalogue"]} if "catalogue" in m else {})})
        if cur is not None and cur["size"] == 0:  # opened by the last loop turn, nothing written
            cur_fh.close()
            shutil.rmtree(out_dir / cur["dir"])
            cur = None
        close_chunk()
    except BaseException:
        if cur_fh is not None:
            cur_fh.close()
        shutil.rmtree(out_dir, ignore_errors=True)
        raise

    gguf_rec = files[0]
    pins = []
    if entry is not None:
        pins.append(("catalogue", entry.gguf_size, entry.gguf_sha256))
    if assembled.get("gguf_sha256"):
        pins.append(("cache manifest", assembled.get("gguf_size"), assembled["gguf_sha256"]))
    for what, size, sha in pins:
        if (size is not None and size != gguf_rec["size"]) or sha != gguf_rec["sha256"]:
            shutil.rmtree(out_dir, ignore_errors=True)
            raise FerryError(f"{gguf}: {gguf_rec['size']} bytes, sha256 {gguf_rec['sha256']}, but the {what} says "
                             f"{size} bytes, sha256 {sha}; refused (fetch it again: spade-engine models fetch {name} --force)")

    manifest = {
        "format": FORMAT,
        "name": name,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "chunk_bytes": chunk,
        "total_size": offset,
        "sha256": stream.hexdigest(),
        "chunk_count": len(chunks),
        "files": files,
        "chunks": chunks,
    }
    text = json.dumps(manifest, indent=1) + "\n"
    for c in chunks:
        (out_dir / c["dir"] / CHUNK_MANIFEST).write_text(text, encoding="utf-8")
    (out_dir / SPLIT_MANIFEST).write_text(text, encoding="utf-8")
    return manifest


def load_split(root: Path, name: str) -> dict[str, Any]:
    path = root / FERRY / name / SPLIT_MANIFEST
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        raise FerryError(f"{path} does not exist: split the model first (scripts/device_ferry.sh split {name})") from None


def plan_lines(root: Path, manifest: dict[str, Any], *, with_bench: bool = True) -> list[str]:
    """The device calls that ferry ``manifest``'s chunks, smallest chunk first (it rides with the
    bench call's wheels), each with its carry and payload."""
    name = manifest["name"]
    tree = tree_bytes(root)
    whl = sum(p.stat().st_size for p in (root / ".whl").glob("*.whl")) if (root / ".whl").is_dir() else 0
    order = sorted(manifest["chunks"], key=lambda c: (c["size"], c["index"]))
    lines = [f"{name}: {manifest['total_size']:,} bytes ({mib(manifest['total_size'])}) in {manifest['chunk_count']} chunks "
             f"of at most {mib(manifest['chunk_bytes'])}; files: " + ", ".join(f["name"] for f in manifest["files"]),
             f"sha256 of the stream {manifest['sha256']}",
             "working tree sent with every call: " + ("unknown (not a git checkout)" if tree is None else mib(tree))]
    worst = 0
    for n, c in enumerate(order, 1):
        carry = [f"{FERRY}/{name}/{c['dir']}"]
        payload = c["size"]
        if n == 1 and with_bench:
            cmd, timeout = "scripts/device_bench.sh bench-bg", 180
            carry.insert(0, ".whl")
            payload += whl
        elif n == len(order):  # the last chunk's call goes on to join, convert and the designer bench
            cmd, timeout = f"scripts/device_bench.sh real {name}", 590
        else:
            cmd, timeout = "scripts/device_bench.sh ferry", 120
        total = payload + (tree or 0)
        worst = max(worst, total)
        lines.append(f"  call {n:2d}: run(command={json.dumps(cmd)}, carry={json.dumps(carry)}, timeout_s={timeout})"
                     f"   # {mib(total)} in all")
    if worst > CALL_LIMIT - MARGIN:
        lines.append(f"WARNING: a call would send {mib(worst)}, over the device tool's {mib(CALL_LIMIT)} less "
                     f"{mib(MARGIN)} margin: split again with a smaller --chunk-bytes")
    lines.append(f"  call {len(order) + 1:2d}: run(command=\"SELFPLAY_S=<budget_left_s - 120> scripts/device_bench.sh selfplay "
                 f"{name}\", timeout_s=<SELFPLAY_S + 90>)   # only if status says >= 4 min are left; then give_back")
    lines.append("  (scripts/device_plan.md: timings, what to drop when time runs short, what comes back)")
    return lines


# -- there: receive ------------------------------------------------------------------------------


def _chunk_entry(manifest: dict[str, Any], dirname: str) -> dict[str, Any] | None:
    for c in manifest.get("chunks", []):
        if c.get("dir") == dirname:
            return c
    return None


def _store_manifest(store: Path) -> dict[str, Any] | None:
    try:
        return json.loads((store / CHUNK_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def present_chunks(store: Path, manifest: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(present, missing) chunk folder names, by the size of each stored part."""
    present, missing = [], []
    for c in manifest["chunks"]:
        p = store / f"{c['dir']}.{PART}"
        (present if p.is_file() and p.stat().st_size == c["size"] else missing).append(c["dir"])
    return present, missing


def status(root: Path) -> dict[str, Any]:
    """name -> {"present": k, "chunks": n, "missing": [...]} for every bundle in the store."""
    out: dict[str, Any] = {}
    stores = store_root(root)
    if stores.is_dir():
        for store in sorted(p for p in stores.iterdir() if p.is_dir()):
            manifest = _store_manifest(store)
            if manifest is not None:
                present, missing = present_chunks(store, manifest)
                out[manifest["name"]] = {"present": len(present), "chunks": manifest["chunk_count"], "missing": missing}
    return out


def receive(root: Path, *, force: bool = False) -> dict[str, Any]:
    """Check and store every chunk folder that arrived under ``root/.ferry``; report per bundle.

    Returns ``{"accepted": [...], "refused": [...], "bundles": {name: {"present": k, "chunks": n,
    "missing": [...]}}}``. A refused chunk's folder is deleted (send it again).
    """
    ferry = root / FERRY
    stores = store_root(root)
    accepted: list[str] = []
    refused: list[str] = []
    for mpath in sorted(ferry.glob(f"*/chunk[0-9]*/{CHUNK_MANIFEST}")):
        cdir = mpath.parent
        bundle_dir = cdir.parent
        if (bundle_dir / SPLIT_MANIFEST).exists() and not force:
            raise FerryError(f"{bundle_dir} holds {SPLIT_MANIFEST}: this is the sending side (split's output); "
                             "receive runs on the device machine (--force to override)")
        label = f"{bundle_dir.name}/{cdir.name}"
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
            name = manifest["name"]
            entry = _chunk_entry(manifest, cdir.name)
        except (OSError, ValueError, KeyError) as exc:
            refused.append(label)
            log(f"REFUSED {label}: unreadable manifest ({exc}); send this chunk again")
            shutil.rmtree(cdir, ignore_errors=True)
            continue
        part = cdir / PART
        if entry is None or not part.is_file():
            refused.append(label)
            log(f"REFUSED {label}: {'not in its manifest' if entry is None else 'no part file'}; send this chunk again")
            shutil.rmtree(cdir, ignore_errors=True)
            continue
        size = part.stat().st_size
        digest = sha256_file(part)
        if size != entry["size"] or digest != entry["sha256"]:
            refused.append(label)
            log(f"REFUSED {label}: {size} bytes, sha256 {digest}; the manifest says {entry['size']} bytes, sha256 "
                f"{entry['sha256']}; deleted, send this chunk again")
            shutil.rmtree(cdir, ignore_errors=True)
            continue
        store = stores / name
        old = _store_manifest(store)
        if old is not None and old.get("sha256") != manifest["sha256"]:
            log(f"note: {label} belongs to a new split of {name} (stream sha256 {manifest['sha256'][:16]}..., the "
                f"stored chunks are of {str(old.get('sha256'))[:16]}...): the stored chunks are dropped")
            shutil.rmtree(store, ignore_errors=True)
        store.mkdir(parents=True, exist_ok=True)
        if old is None or old.get("sha256") != manifest["sha256"]:
            (store / CHUNK_MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        os.replace(part, store / f"{cdir.name}.{PART}")
        shutil.rmtree(cdir, ignore_errors=True)
        accepted.append(label)
        log(f"accepted {label}: {size:,} bytes, sha256 ok")
    return {"accepted": accepted, "refused": refused, "bundles": status(root), "store": str(stores)}


# -- there: join ---------------------------------------------------------------------------------


def join_files(root: Path, name: str) -> tuple[dict[str, Any], dict[str, Path]]:
    """Concatenate the stored chunks of ``name`` into its files (``<store>/<name>/files/``),
    checking every chunk, every file and the whole stream; returns the manifest and file paths.
    Already joined and checked files (a ``joined.json`` with the stream's sha256) are reused."""
    store = store_root(root) / name
    manifest = _store_manifest(store)
    if manifest is None:
        raise FerryError(f"nothing of {name} has arrived in {store} (run receive in the calls that carry its chunks)")
    present, missing = present_chunks(store, manifest)
    if missing:
        raise FerryError(f"{name}: {len(present)} of {manifest['chunk_count']} chunks present; missing "
                         f"{', '.join(missing)}: send them (carry .ferry/{name}/<chunk>) and run receive")
    files_dir = store / "files"
    done = store / "joined.json"
    paths = {f["name"]: files_dir / f["name"] for f in manifest["files"]}
    try:
        joined = json.loads(done.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        joined = None
    if joined and joined.get("sha256") == manifest["sha256"]:
        # the GGUF may since have been moved into the model cache: only the others must be here
        if all(p.is_file() and p.stat().st_size == f["size"] for f, p in zip(manifest["files"], paths.values())
               if f["kind"] != "gguf"):
            log(f"{name}: already joined and checked ({done})")
            return manifest, paths
    done.unlink(missing_ok=True)
    shutil.rmtree(files_dir, ignore_errors=True)
    t0 = time.monotonic()
    bad = []
    for c in manifest["chunks"]:  # every stored chunk again first, so a damaged one is named (and re-sent)
        part = store / f"{c['dir']}.{PART}"
        digest = sha256_file(part)
        if digest != c["sha256"]:
            part.unlink(missing_ok=True)
            bad.append(c["dir"])
            log(f"stored {c['dir']} has sha256 {digest}, the manifest says {c['sha256']}: deleted")
    if bad:
        raise FerryError(f"{name}: stored {', '.join(bad)} changed since receive (sha256 mismatch); deleted: "
                         f"send {'it' if len(bad) == 1 else 'them'} again (carry .ferry/{name}/<chunk>) and run receive")
    files_dir.mkdir(parents=True)
    stream = hashlib.sha256()
    files = list(manifest["files"])
    fi = 0
    f_left = files[0]["size"] if files else 0
    f_hash = hashlib.sha256()
    f_out = open(files_dir / (files[0]["name"] + ".partial"), "wb") if files else None

    def finish_file() -> None:
        nonlocal fi, f_left, f_hash, f_out
        f = files[fi]
        f_out.close()
        tmp = files_dir / (f["name"] + ".partial")
        if f_hash.hexdigest() != f["sha256"]:
            raise FerryError(f"{name}: file {f['name']} joined with sha256 {f_hash.hexdigest()}, the manifest says "
                             f"{f['sha256']}; refused")
        os.replace(tmp, paths[f["name"]])
        log(f"  {f['name']}: {f['size']:,} bytes, sha256 ok")
        fi += 1
        f_hash = hashlib.sha256()
        if fi < len(files):
            f_left = files[fi]["size"]
            f_out = open(files_dir / (files[fi]["name"] + ".partial"), "wb")
        else:
            f_out = None

    try:
        while files and f_left == 0:  # empty files
            finish_file()
        for c in manifest["chunks"]:
            part = store / f"{c['dir']}.{PART}"
            c_hash = hashlib.sha256()
            with open(part, "rb") as fh:
                while block := fh.read(READ):
                    c_hash.update(block)
                    stream.update(block)
                    view = memoryview(block)
                    while view:
                        if f_out is None:
                            raise FerryError(f"{name}: the chunks hold more bytes than the manifest's files; refused")
                        n = min(len(view), f_left)
                        f_out.write(view[:n])
                        f_hash.update(view[:n])
                        f_left -= n
                        view = view[n:]
                        while f_out is not None and f_left == 0:
                            finish_file()
            if c_hash.hexdigest() != c["sha256"]:
                part.unlink(missing_ok=True)
                raise FerryError(f"{name}: stored {c['dir']} has sha256 {c_hash.hexdigest()}, the manifest says "
                                 f"{c['sha256']}; deleted it: send it again (carry .ferry/{name}/{c['dir']}) and run receive")
        if f_out is not None or fi != len(files):
            raise FerryError(f"{name}: the chunks end before the manifest's files do; refused")
        if stream.hexdigest() != manifest["sha256"]:
            raise FerryError(f"{name}: the joined stream has sha256 {stream.hexdigest()}, the manifest says "
                             f"{manifest['sha256']}; refused")
    except BaseException:
        if f_out is not None:
            f_out.close()
        shutil.rmtree(files_dir, ignore_errors=True)
        raise
    done.write_text(json.dumps({"sha256": manifest["sha256"], "seconds": round(time.monotonic() - t0, 2)}) + "\n",
                    encoding="utf-8")
    log(f"{name}: joined {manifest['chunk_count']} chunks, {manifest['total_size']:,} bytes, stream sha256 ok "
        f"({time.monotonic() - t0:.1f}s)")
    return manifest, paths


def install_gguf(
    gguf: Path,
    record: dict[str, Any],
    manifest: dict[str, Any],
    *,
    cache: str | Path | None = None,
    catalogue: str | None = None,
    dtype: str = "bfloat16",
) -> Path:
    """Install the joined GGUF in the model cache and return its transformers directory: as its
    catalogue entry (checked against the pins; ``--model <name>`` then resolves) when its name is
    listed, else as a local GGUF (``<cache>/local/<sha256>/hf``)."""
    from spade_engine.models.assemble import check_assembled
    from spade_engine.models.cache import ModelCache, dir_size, write_manifest
    from spade_engine.models.catalogue import load_catalogue
    from spade_engine.models.convert import convert_gguf
    from spade_engine.models.fetch import tool_versions
    from spade_engine.models.resolve import convert_local_gguf

    store = ModelCache.resolve(cache)
    cat = load_catalogue(catalogue)
    cname = record.get("catalogue")
    if cname not in cat:
        log(f"{gguf.name}: {cname!r} is not in the catalogue ({cat.source}): converting it as a local GGUF")
        return convert_local_gguf(gguf, store, catalogue=cat, dtype=dtype)
    entry = cat.get(cname)
    final = store.entry_dir(entry.name)
    if ModelCache.is_complete(final):
        have = (ModelCache.manifest(final) or {}).get("assembled", {}).get("gguf_sha256")
        if have == record["sha256"]:
            log(f"{entry.name}: already installed in {final}")
            return ModelCache.model_dir(final)
    if not gguf.is_file():
        raise FerryError(f"{gguf} is gone (moved into a cache that is no longer complete?): run join again")
    check_assembled(entry, gguf, gguf.stat().st_size, record["sha256"])
    info: dict[str, Any] = {}

    def build(work: Path) -> None:
        t0 = time.monotonic()
        target = work / entry.gguf_file
        if gguf.stat().st_dev == work.stat().st_dev:
            os.link(gguf, target)  # no second copy of 470 MiB
        else:
            shutil.copyfile(gguf, target)
        conv = convert_gguf(target, ModelCache.model_dir(work), dtype=dtype)
        seconds = {"convert_s": round(time.monotonic() - t0, 2)}
        info.update(seconds)
        write_manifest(work, {
            "kind": "catalogue",
            "catalogue": entry.summary(),
            "assembled": {"gguf_file": entry.gguf_file, "gguf_size": record["size"], "gguf_sha256": record["sha256"],
                          "kept": True, "wheels": [],
                          "ferried": {"chunks": manifest["chunk_count"], "chunk_bytes": manifest["chunk_bytes"],
                                      "stream_sha256": manifest["sha256"], "split_at": manifest.get("created")}},
            "converted": conv.to_dict(),
            "seconds": seconds,
            "sizes": {"gguf": record["size"], "hf": dir_size(ModelCache.model_dir(work))},
            "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "versions": tool_versions(),
        })

    log(f"{entry.name}: converting into {final} (dtype {dtype})")
    store.install(final, build, key=f"model-{entry.name}", force=True)
    log(f"{entry.name}: installed ({info.get('convert_s', '?')}s)")
    return ModelCache.model_dir(final)


def join(root: Path, name: str, *, cache: str | Path | None = None, catalogue: str | None = None,
         dtype: str = "bfloat16", install: bool = True) -> dict[str, Any]:
    """Join ``name``'s chunks, then (``install``) install its GGUF; returns what is where."""
    manifest, paths = join_files(root, name)
    result: dict[str, Any] = {"name": name, "files": {k: str(v) for k, v in paths.items()},
                              "files_dir": str(store_root(root) / name / "files")}
    ggufs = [f for f in manifest["files"] if f["kind"] == "gguf"]
    if install and ggufs:
        result["model_dir"] = str(install_gguf(paths[ggufs[0]["name"]], ggufs[0], manifest, cache=cache,
                                               catalogue=catalogue, dtype=dtype))
    return result


# -- command line --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--root", type=Path, default=None, help="repository root (default: the one holding this script)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("split", help="here: cut the fetched model (and --extra files) into chunk folders")
    p.add_argument("name")
    p.add_argument("--cache", type=Path, default=None, help=f"model cache (default ${CACHE_ENV}, else ~/.cache/spade-models)")
    p.add_argument("--chunk-bytes", type=int, default=None, help=f"chunk size (default ${CHUNK_ENV}, else as few chunks as 60 MiB ones, as even as whole MiB allow)")
    p.add_argument("--extra", type=Path, action="append", default=[], help="another file to ferry after the GGUF (repeatable)")
    p.add_argument("--catalogue", default=None, help="catalogue file (default: the bundled one)")
    p = sub.add_parser("plan", help="here: print the device calls for a split model")
    p.add_argument("name")
    p = sub.add_parser("receive", help="there: check and store the chunks that arrived")
    p.add_argument("--force", action="store_true", help="also on the sending side (a folder with split.json)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON line")
    p = sub.add_parser("status", help="there: how many chunks of each bundle are stored")
    p = sub.add_parser("join", help="there: join the chunks, check them, install the model; prints its directory")
    p.add_argument("name")
    p.add_argument("--cache", default=None, help=f"model cache (default ${CACHE_ENV}, else <data dir>/models)")
    p.add_argument("--catalogue", default=None, help="catalogue file (default: the bundled one)")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--no-install", action="store_true", help="only join and check the files")
    args = ap.parse_args(argv)
    root = (args.root or repo_root()).resolve()
    try:
        if args.cmd == "split":
            manifest = split(args.name, root=root, cache=args.cache, chunk_bytes=args.chunk_bytes, extras=args.extra,
                             catalogue=args.catalogue)
            print("\n".join(plan_lines(root, manifest)))
        elif args.cmd == "plan":
            print("\n".join(plan_lines(root, load_split(root, args.name))))
        elif args.cmd in ("receive", "status"):
            report = receive(root, force=getattr(args, "force", False)) if args.cmd == "receive" else {
                "accepted": [], "refused": [], "bundles": status(root), "store": str(store_root(root))}
            if getattr(args, "json", False):
                print(json.dumps(report))
            else:
                if not report["bundles"]:
                    print(f"no chunks stored in {report['store']}")
                for name, b in report["bundles"].items():
                    tail = "all present: join it" if not b["missing"] else "missing " + ", ".join(b["missing"])
                    print(f"{name}: {b['present']} of {b['chunks']} chunks present; {tail}")
            return 3 if report["refused"] else 0
        elif args.cmd == "join":
            result = join(root, args.name, cache=args.cache, catalogue=args.catalogue, dtype=args.dtype,
                          install=not args.no_install)
            print(result.get("model_dir") or result["files_dir"])
    except Exception as exc:  # a refusal: one line, no traceback
        if not isinstance(exc, FerryError) and type(exc).__module__ != "spade_engine.models.errors":
            raise
        print(f"device_ferry: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
