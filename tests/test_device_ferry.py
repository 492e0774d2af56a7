"""The ferry that takes a fetched model to the lent device machine in chunks (scripts/device_ferry.py),
and the device-side plumbing of scripts/device_bench.sh, on CPU with no real model.

A fake model cache is split with a small chunk size; the device calls are simulated by copying one
chunk folder at a time into a fresh "device" repository root and running ``receive`` there; a
tampered chunk is refused; ``join`` rebuilds byte-identical files, and for a real tiny GGUF installs
it as its catalogue entry (the same conversion as ``spade-engine models fetch``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "scripts"


def _load_ferry():
    spec = importlib.util.spec_from_file_location("device_ferry", SCRIPTS / "device_ferry.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["device_ferry"] = mod
    spec.loader.exec_module(mod)
    return mod


ferry = _load_ferry()


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fake_cache(root: Path, name: str, blob: bytes, *, manifest_sha: str | None = None) -> Path:
    """``<root>/<name>/<name>.gguf`` and a manifest like a fetch writes (its assembled pins)."""
    d = root / name
    d.mkdir(parents=True)
    (d / f"{name}.gguf").write_bytes(blob)
    (d / "manifest.json").write_text(json.dumps({"assembled": {
        "gguf_size": len(blob), "gguf_sha256": manifest_sha or hashlib.sha256(blob).hexdigest()}}))
    return root


def send(here: Path, device: Path, name: str, chunk: str) -> Path:
    """One device call's carry: the chunk folder, copied to the same path under the device root."""
    dst = device / ".ferry" / name / chunk
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(here / ".ferry" / name / chunk, dst)
    return dst


def receive_cli(device: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """``scripts/device_ferry.sh receive`` for the device root (the wrapper, in a subprocess)."""
    return subprocess.run(
        ["bash", str(SCRIPTS / "device_ferry.sh"), "--root", str(device), "receive"],
        capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})},
    )


@pytest.fixture
def split_blob(tmp_path, monkeypatch):
    """A 3 MB random "GGUF" and a 0.7 MB extra file, split into 1,000,000-byte chunks (chunk size from the environment)."""
    name = "fake-model"
    rng = __import__("random").Random(19)
    blob = b"GGUF" + rng.randbytes(3_000_000 - 4)
    extra = tmp_path / "extra_pkg-0.1-py3-none-any.whl"
    extra.write_bytes(rng.randbytes(700_000))
    cache = fake_cache(tmp_path / "cache", name, blob)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.setenv(ferry.CHUNK_ENV, "1000000")
    monkeypatch.delenv(ferry.STORE_ENV, raising=False)
    manifest = ferry.split(name, root=here, cache=cache, extras=[extra])
    return {"name": name, "blob": blob, "extra": extra, "here": here, "manifest": manifest, "cache": cache}


def test_split_cuts_numbered_chunk_folders_with_their_manifest(split_blob):
    s = split_blob
    m, here, name = s["manifest"], s["here"], s["name"]
    assert m["chunk_bytes"] == 1_000_000 and m["total_size"] == 3_700_000 and m["chunk_count"] == 4
    assert [c["size"] for c in m["chunks"]] == [1_000_000, 1_000_000, 1_000_000, 700_000]
    assert [f["name"] for f in m["files"]] == [f"{name}.gguf", s["extra"].name]
    assert m["files"][0] == {"name": f"{name}.gguf", "kind": "gguf", "offset": 0, "size": 3_000_000,
                             "sha256": hashlib.sha256(s["blob"]).hexdigest(), "catalogue": name}
    assert m["sha256"] == hashlib.sha256(s["blob"] + s["extra"].read_bytes()).hexdigest()
    stream = b""
    for c in m["chunks"]:
        d = here / ".ferry" / name / c["dir"]
        assert sorted(p.name for p in d.iterdir()) == ["manifest.json", "part"]
        assert sha(d / "part") == c["sha256"]
        assert json.loads((d / "manifest.json").read_text()) == m
        stream += (d / "part").read_bytes()
    assert stream == s["blob"] + s["extra"].read_bytes()
    assert json.loads((here / ".ferry" / name / "split.json").read_text()) == m

    lines = ferry.plan_lines(here, m)
    calls = [ln for ln in lines if ln.lstrip().startswith("call")]
    assert len(calls) == 5
    # the smallest chunk rides with the bench call and its wheels, then one ferry call per chunk
    assert 'bench-bg", carry=[".whl", ".ferry/fake-model/chunk03"]' in calls[0]
    assert all('device_bench.sh ferry", carry=[".ferry/fake-model/chunk0' in c for c in calls[1:-2])
    assert 'device_bench.sh real fake-model", carry=[".ferry/fake-model/chunk02"]' in calls[-2]
    assert "selfplay fake-model" in calls[-1]


def test_split_refuses_a_gguf_that_differs_from_the_cache_manifest(tmp_path):
    cache = fake_cache(tmp_path / "cache", "fake-model", b"GGUF" + bytes(1000), manifest_sha="0" * 64)
    with pytest.raises(ferry.FerryError, match="cache manifest"):
        ferry.split("fake-model", root=tmp_path / "here", cache=cache, chunk_bytes=300)
    assert not (tmp_path / "here" / ".ferry" / "fake-model").exists()


def test_chunks_travel_one_call_at_a_time_and_join_identical(split_blob, tmp_path):
    s = split_blob
    here, name, m = s["here"], s["name"], s["manifest"]
    device = tmp_path / "device"
    device.mkdir()
    order = ["chunk03", "chunk00", "chunk01", "chunk02"]  # the plan's order: smallest first

    for k, chunk in enumerate(order[:2], 1):
        send(here, device, name, chunk)
        r = receive_cli(device)
        assert r.returncode == 0, r.stderr
        assert f"{name}: {k} of 4 chunks present" in r.stdout
        assert f"accepted {name}/{chunk}" in r.stderr
        assert not (device / ".ferry" / name / chunk).exists()  # moved into the store
        assert (device / ".ferry" / "store" / name / f"{chunk}.part").is_file()

    # a chunk damaged on the way is refused, deleted, and not counted
    bad = send(here, device, name, "chunk01")
    data = bytearray((bad / "part").read_bytes())
    data[12345] ^= 0x01
    (bad / "part").write_bytes(bytes(data))
    r = receive_cli(device)
    assert r.returncode == 3
    assert f"REFUSED {name}/chunk01" in r.stderr and "send this chunk again" in r.stderr
    assert f"{name}: 2 of 4 chunks present; missing chunk01, chunk02" in r.stdout
    assert not bad.exists() and not (device / ".ferry" / "store" / name / "chunk01.part").exists()

    # join before every chunk is there: refused, naming what is missing
    with pytest.raises(ferry.FerryError, match="2 of 4 chunks present; missing chunk01, chunk02"):
        ferry.join(device, name, install=False)

    for k, chunk in enumerate(["chunk01", "chunk02"], 3):
        send(here, device, name, chunk)
        r = receive_cli(device)
        assert r.returncode == 0 and f"{name}: {k} of 4 chunks present" in r.stdout
    assert "all present: join it" in r.stdout

    result = ferry.join(device, name, install=False)
    files = device / ".ferry" / "store" / name / "files"
    assert result["files_dir"] == str(files)
    assert sha(files / f"{name}.gguf") == hashlib.sha256(s["blob"]).hexdigest() == m["files"][0]["sha256"]
    assert (files / s["extra"].name).read_bytes() == s["extra"].read_bytes()
    assert not list(files.glob("*.partial"))
    # joining again reuses the checked files
    assert ferry.join(device, name, install=False)["files"] == result["files"]


def test_join_refuses_a_stored_chunk_changed_after_receive(split_blob, tmp_path):
    s = split_blob
    device = tmp_path / "device"
    for c in s["manifest"]["chunks"]:
        send(s["here"], device, s["name"], c["dir"])
    assert ferry.receive(device)["bundles"][s["name"]]["present"] == 4
    stored = device / ".ferry" / "store" / s["name"] / "chunk02.part"
    data = bytearray(stored.read_bytes())
    data[-1] ^= 0xFF
    stored.write_bytes(bytes(data))
    with pytest.raises(ferry.FerryError, match="stored chunk02 changed since receive .* send it again"):
        ferry.join(device, s["name"], install=False)
    assert not stored.exists()  # deleted, so the count says which chunk to send again
    assert not (device / ".ferry" / "store" / s["name"] / "files").exists()
    assert ferry.status(device)[s["name"]]["missing"] == ["chunk02"]


def test_receive_refuses_to_run_on_the_sending_side(split_blob):
    with pytest.raises(ferry.FerryError, match="sending side"):
        ferry.receive(split_blob["here"])
    assert (split_blob["here"] / ".ferry" / split_blob["name"] / "chunk00" / "part").is_file()


def test_a_new_split_replaces_the_stored_chunks_of_an_old_one(split_blob, tmp_path, monkeypatch):
    s = split_blob
    device = tmp_path / "device"
    send(s["here"], device, s["name"], "chunk00")
    ferry.receive(device)
    (s["cache"] / s["name"] / "manifest.json").unlink()
    (s["cache"] / s["name"] / f"{s['name']}.gguf").write_bytes(b"GGUF" + bytes(2_500_000))
    ferry.split(s["name"], root=s["here"], cache=s["cache"])
    send(s["here"], device, s["name"], "chunk01")
    report = ferry.receive(device)
    assert report["bundles"][s["name"]] == {"present": 1, "chunks": 3, "missing": ["chunk00", "chunk02"]}


# -- a real tiny GGUF: join installs the catalogue entry -------------------------------------------


def test_join_installs_a_real_gguf_as_its_catalogue_entry(tmp_path, monkeypatch):
    import torch

    from models_support import catalogue_toml, split_into_wheels, tiny_entry, write_tiny_gguf
    from spade_engine.models import ModelCache, load_catalogue, resolve_model_spec

    name = "tiny-ferry-test"
    src = tmp_path / "src.gguf"
    ref = write_tiny_gguf(src, arch="qwen2")
    blob = src.read_bytes()
    parts = split_into_wheels(blob, tmp_path / "wheels", prefix="spade-test-ferry-part", version="1.0.0", n=1)
    cat_file = tmp_path / "catalogue.toml"
    cat_file.write_text(catalogue_toml([tiny_entry(name, blob, parts)]))
    cache = fake_cache(tmp_path / "cache", name, blob)
    extra = tmp_path / "tool-1.0-py3-none-any.whl"
    extra.write_bytes(os.urandom(50_000))
    here, device = tmp_path / "here", tmp_path / "device"
    monkeypatch.delenv(ferry.STORE_ENV, raising=False)
    chunk = 64 << 10
    m = ferry.split(name, root=here, cache=cache, chunk_bytes=chunk, extras=[extra], catalogue=str(cat_file))
    assert m["chunk_count"] == -(-(len(blob) + 50_000) // chunk) >= 3
    for c in sorted(m["chunks"], key=lambda c: c["size"]):
        send(here, device, name, c["dir"])
        assert not ferry.receive(device)["refused"]

    device_cache = tmp_path / "device-cache"
    monkeypatch.setenv("SPADE_MODEL_CACHE", str(device_cache))
    result = ferry.join(device, name, catalogue=str(cat_file), dtype="fp32")
    entry_dir = device_cache / name
    assert result["model_dir"] == str(entry_dir / "hf")
    assert ModelCache.is_complete(entry_dir)
    assert (entry_dir / f"{name}.gguf").read_bytes() == blob
    manifest = ModelCache.manifest(entry_dir)
    assert manifest["kind"] == "catalogue" and manifest["assembled"]["gguf_sha256"] == hashlib.sha256(blob).hexdigest()
    assert manifest["assembled"]["ferried"]["chunks"] == m["chunk_count"]
    assert (device / ".ferry" / "store" / name / "files" / extra.name).read_bytes() == extra.read_bytes()
    # --model NAME now resolves to it, and it holds the same weights
    cat = load_catalogue(cat_file)
    assert resolve_model_spec(name, cache=device_cache, catalogue=cat) == str(entry_dir / "hf")
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(entry_dir / "hf")
    ids = torch.tensor([[5, 6, 7, 100, 257]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, ref(ids).logits)
    # a second join finds it installed and converts nothing
    t = time.monotonic()
    assert ferry.join(device, name, catalogue=str(cat_file))["model_dir"] == str(entry_dir / "hf")
    assert time.monotonic() - t < 5


def test_join_refuses_a_gguf_that_differs_from_the_catalogue_pins(split_blob, tmp_path, monkeypatch):
    """The stream checks out, but the catalogue pins another GGUF: nothing is installed."""
    from models_support import catalogue_toml, tiny_entry

    s = split_blob
    device = tmp_path / "device"
    for c in s["manifest"]["chunks"]:
        send(s["here"], device, s["name"], c["dir"])
    ferry.receive(device)
    cat_file = tmp_path / "catalogue.toml"
    other = tiny_entry(s["name"], b"GGUF" + bytes(10), [{"package": "p-part1", "version": "1.0", "file": "p/x.bin"}])
    cat_file.write_text(catalogue_toml([other]))
    monkeypatch.setenv("SPADE_MODEL_CACHE", str(tmp_path / "device-cache"))
    rc = ferry.main(["--root", str(device), "join", s["name"], "--catalogue", str(cat_file)])
    assert rc == 3
    assert not (tmp_path / "device-cache" / s["name"]).exists()


# -- scripts/device_bench.sh on the device side, with a stub for bench/gpu.py ---------------------


STUB_BENCH = """\
import json, sys, time
print("stub bench", sys.argv[1:], flush=True)
time.sleep(1)
print(json.dumps({"rollout_tokens_per_s": 1.0, "args": sys.argv[1:]}))
"""


def test_device_bench_background_bench_and_ferry_calls(split_blob, tmp_path):
    """bench-bg stores the chunk it came with and starts the bench in its own session; each ferry
    call stores its chunk and returns the bench's state, then its JSON once it has finished."""
    s = split_blob
    device = tmp_path / "device"
    (device / "scripts").mkdir(parents=True)
    for f in ("device_bench.sh", "device_ferry.sh", "device_ferry.py"):
        shutil.copy(SCRIPTS / f, device / "scripts" / f)
    (device / "bench").mkdir()
    (device / "bench" / "stub.py").write_text(STUB_BENCH)
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "GPU_BENCH": "bench/stub.py", "BENCH_PEEK_S": "0", "PATH": os.environ["PATH"]}
    env.pop(ferry.STORE_ENV, None)

    def call(*args: str) -> subprocess.CompletedProcess:
        if out.exists():
            shutil.rmtree(out)  # $OUT is emptied before each device command
        return subprocess.run(["bash", "scripts/device_bench.sh", *args], cwd=device, capture_output=True, text=True,
                              timeout=120, env=env)

    send(s["here"], device, s["name"], "chunk03")
    r = call("bench-bg", "--smoke")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fake-model: 1 of 4 chunks present" in r.stdout
    assert "bench: started in the background (bench/stub.py --smoke)" in r.stdout
    assert (device / ".ferry" / "bench" / "src" / "bench" / "stub.py").is_file()  # runs from a snapshot
    assert not (device / ".ferry" / "bench" / "src" / ".ferry").exists()

    for k, chunk in enumerate(["chunk00", "chunk01", "chunk02"], 2):
        send(s["here"], device, s["name"], chunk)
        r = call("ferry")
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"fake-model: {k} of 4 chunks present" in r.stdout

    deadline = time.monotonic() + 60
    while not (device / ".ferry" / "bench" / "rc").exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    r = call("collect")
    assert "bench: finished, rc 0" in r.stdout, r.stdout + r.stderr
    assert json.loads((out / "gpu_bench.json").read_text()) == {"rollout_tokens_per_s": 1.0, "args": ["--smoke"]}
    assert "stub bench" in (out / "gpu_bench.log").read_text()
    assert (out / "gpu.txt").is_file()

    # a damaged chunk makes the ferry call fail, and says which chunk to send again
    shutil.rmtree(device / ".ferry" / "store" / s["name"])
    bad = send(s["here"], device, s["name"], "chunk02")
    (bad / "part").write_bytes(b"x" + (bad / "part").read_bytes()[1:])
    r = call("ferry")
    assert r.returncode == 3 and "REFUSED fake-model/chunk02" in r.stderr
