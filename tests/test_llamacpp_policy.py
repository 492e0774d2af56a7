"""The llama.cpp policy backend on tiny real GGUF files (qwen2 and llama, random weights written
with the ``gguf`` package): the same tokens and log-probs as the transformers model they hold,
continuous batching and prefix reuse, stop strings and finish reasons, LoRA adapters served after
a sync, and one clear error for a missing or broken build.

The backend needs llama-cpp-python, built by ``scripts/setup.sh --system`` (CI) or
``spade-engine models install-llamacpp``. Without it these tests are skipped with that
instruction, except in CI (``CI`` set), where a missing build fails them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from models_support import write_tiny_gguf
from spade_engine.policy.hf import PolicyLoadError
from spade_engine.policy.protocol import PolicyRequest


def _lib():
    from spade_engine.policy.llamacpp_lib import LlamaCppUnavailable, load_llama_cpp

    try:
        return load_llama_cpp()
    except LlamaCppUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"llama-cpp-python must be installed in CI (scripts/setup.sh --system): {exc}")
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def lib():
    return _lib()


def _tiny(tmp_path_factory, arch: str):
    from spade_engine.models.cache import ModelCache
    from spade_engine.models.resolve import gguf_tokenizer_dir

    root = tmp_path_factory.mktemp(f"tiny-{arch}")
    path = root / f"tiny-{arch}.gguf"
    model = write_tiny_gguf(path, arch=arch, seed=3)
    tok_dir = gguf_tokenizer_dir(path, ModelCache(root / "cache"))
    return path, tok_dir, model


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory, lib):
    return _tiny(tmp_path_factory, "qwen2")


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory, lib):
    return _tiny(tmp_path_factory, "llama")


def _policy(found, **kw):
    from spade_engine.policy.llamacpp_policy import LlamaCppPolicy

    path, tok_dir, _ = found
    kw.setdefault("parallel", 4)
    kw.setdefault("context_per_sequence", 256)
    kw.setdefault("threads", 1)
    return LlamaCppPolicy.from_gguf(path, tok_dir, model_name=path.name, **kw)


def _ask(text: str, **kw) -> PolicyRequest:
    return PolicyRequest(role="agent", messages=[{"role": "user", "content": text}], **kw)


def _score(model, prompt: list[int], completion: list[int], temperature: float = 1.0) -> torch.Tensor:
    """The transformers model's log-probs of ``completion`` after ``prompt`` (the trainer's scoring)."""
    from spade_engine.trainer.scoring import token_logprobs

    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        lp = token_logprobs(model, ids, temperature=temperature)[0]
    return lp[len(prompt) - 1: len(prompt) - 1 + len(completion)]


def _greedy(model, prompt: list[int], n: int, eos: set[int]) -> list[int]:
    ids = list(prompt)
    out = []
    with torch.no_grad():
        for _ in range(n):
            nxt = int(model(torch.tensor([ids])).logits[0, -1].argmax())
            out.append(nxt)
            if nxt in eos:
                break
            ids.append(nxt)
    return out


def test_samples_are_the_transformers_models_tokens_and_log_probs(tiny_qwen):
    """Greedy completions equal the torch model's greedy tokens; sampled ones (temperature 0.8)
    carry log-probs the trainer's scoring reproduces (f32 weights: the two sides agree closely)."""
    path, tok_dir, model = tiny_qwen
    policy = _policy(tiny_qwen)
    try:
        greedy = policy.generate([_ask("the cat", temperature=0.0, max_new_tokens=24)])[0]
        eos = {policy.tokenizer.convert_tokens_to_ids("<|im_end|>"), policy.tokenizer.convert_tokens_to_ids("<|endoftext|>")}
        assert greedy.completion_token_ids == _greedy(model, greedy.prompt_token_ids, 24, eos)
        assert greedy.finish_reason in ("stop", "length") and len(greedy.logprobs) == len(greedy.completion_token_ids)
        sampled = policy.generate([_ask(f"in the {i}", temperature=0.8, seed=i, max_new_tokens=20) for i in range(6)])
        gaps = []
        for s in sampled:
            mine = _score(model, s.prompt_token_ids, s.completion_token_ids, temperature=0.8)
            gaps.append((mine - torch.tensor(s.logprobs)).abs())
        gap = torch.cat(gaps)
        assert gap.numel() > 60 and float(gap.max()) < 1e-2 and float(gap.mean()) < 2e-3, gap  # f16 KV cache
        # the prompt ids are the chat template's, as the transformers backend renders them
        from spade_engine.policy.transformers_policy import render_messages

        assert sampled[0].prompt_token_ids == render_messages(policy.tokenizer, [{"role": "user", "content": "in the 0"}])
    finally:
        policy.close()


def test_seeds_decide_completions_and_batching_does_not(tiny_qwen):
    """A request's seed fixes its completion whatever shares its batch; more requests than
    parallel sequences all complete (continuous batching), in order."""
    one = _policy(tiny_qwen, parallel=1)
    many = _policy(tiny_qwen, parallel=3)
    try:
        reqs = [_ask(f"he {i % 3}", temperature=1.0, seed=100 + i, max_new_tokens=12 + i) for i in range(7)]
        alone = [one.generate([r])[0] for r in reqs]
        together = many.generate(reqs)
        assert [s.completion_token_ids for s in together] == [s.completion_token_ids for s in alone]
        assert [len(s.completion_token_ids) <= 12 + i for i, s in enumerate(together)] == [True] * 7
        other = many.generate([_ask("he 0", temperature=1.0, seed=999, max_new_tokens=12)])[0]
        assert other.completion_token_ids != together[0].completion_token_ids or len(other.completion_token_ids) < 3
    finally:
        one.close()
        many.close()


def test_prompts_that_extend_earlier_ones_reuse_their_cached_prefix(tiny_qwen):
    """An agent's next turn (the earlier prompt + reply + a new message) is prefilled only from
    where it differs, and gives the tokens a fresh engine gives."""
    policy = _policy(tiny_qwen)
    fresh = _policy(tiny_qwen)
    try:
        first = policy.generate([_ask("the then", temperature=0.0, max_new_tokens=10)])[0]
        follow = PolicyRequest(role="agent", temperature=0.0, max_new_tokens=10, messages=[
            {"role": "user", "content": "the then"}, {"role": "assistant", "content": first.text},
            {"role": "user", "content": "in he"}])
        engine = policy.engine
        seen = []
        real = engine._generate

        def spy(requests, *a):
            out = real(requests, *a)
            seen.extend(r.reused_prompt_tokens for r in out)
            return out

        engine._generate = spy
        again = policy.generate([follow])[0]
        assert seen and seen[0] >= len(first.prompt_token_ids), seen
        assert again.completion_token_ids == fresh.generate([follow])[0].completion_token_ids
    finally:
        policy.close()
        fresh.close()


def test_stop_strings_limits_and_the_context_window(tiny_qwen):
    policy = _policy(tiny_qwen, context_per_sequence=256)
    try:
        free = policy.generate([_ask("the", temperature=0.0, max_new_tokens=40)])[0]
        assert len(free.text) > 4
        stop = free.text[2:4]
        cut = policy.generate([_ask("the", temperature=0.0, max_new_tokens=40, stop=(stop,))])[0]
        assert cut.finish_reason == "stop_string" and stop not in cut.text and free.text.startswith(cut.text)
        assert len(cut.logprobs) == len(cut.completion_token_ids) < len(free.completion_token_ids)
        short = policy.generate([_ask("the", temperature=0.0, max_new_tokens=3)])[0]
        assert short.finish_reason in ("length", "stop") and len(short.completion_token_ids) <= 3
        long_prompt = "the " * 250  # leaves less than min_new_tokens of the 256-token window
        assert len(policy.tokenize(long_prompt)) > 256 - 64
        full = policy.generate([_ask(long_prompt, max_new_tokens=40)])[0]
        assert full.finish_reason == "context" and full.completion_token_ids == []
        capped = policy.generate([_ask("the " * 60, temperature=0.0, max_new_tokens=200)])[0]
        assert len(capped.prompt_token_ids) + len(capped.completion_token_ids) <= 256
        assert capped.finish_reason in ("context", "stop")
    finally:
        policy.close()


def test_closing_stops_a_generation_running_in_another_thread(tiny_qwen):
    """An interrupted run closes its policy while an environment's thread is still generating:
    close() stops that generation at its next step (the thread gets a LlamaCppError) instead of
    waiting for all of it (it used to hang until every row reached its limit)."""
    import threading
    import time

    from spade_engine.policy.llamacpp_engine import LlamaCppError, SeqRequest

    policy = _policy(tiny_qwen, context_per_sequence=256)
    engine = policy.engine
    started, outcome = threading.Event(), []

    def slow(i: int, tokens: list[int]) -> bool:  # about 0.05 s a step: 200 steps take 10 s
        started.set()
        time.sleep(0.05)
        return False

    def generate() -> None:
        try:
            engine.generate([SeqRequest(prompt=[1, 2, 3], max_new_tokens=200, temperature=0.0)], stop_check=slow,
                            ignore_eog=True)
            outcome.append("finished")
        except LlamaCppError as exc:
            outcome.append(str(exc))

    worker = threading.Thread(target=generate, daemon=True)
    worker.start()
    assert started.wait(30)
    t0 = time.perf_counter()
    policy.close()
    closed_in = time.perf_counter() - t0
    worker.join(30)
    assert closed_in < 2.0, closed_in
    assert outcome == ["the llama.cpp engine was closed during generation"]
    with pytest.raises(LlamaCppError, match="closed"):
        engine.generate([SeqRequest(prompt=[1, 2], max_new_tokens=2)])


def _lora_model(model, seed: int):
    from peft import LoraConfig, get_peft_model

    import copy

    peft_model = get_peft_model(copy.deepcopy(model), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return peft_model.eval()


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_a_synced_lora_adapter_is_what_is_served(arch, tmp_path, request):
    """After load_version with a trainer's adapter, greedy output is the adapted torch model's
    (and not the base model's), log-probs agree with the adapted model, and v0 goes back to the
    base weights. llama's q/k rows are permuted in GGUF: the adapter's are too."""
    from spade_engine.policy.lora_adapter import save_adapter_file

    found = request.getfixturevalue("tiny_qwen" if arch == "qwen2" else "tiny_llama")
    base_model = found[2]
    adapted = _lora_model(base_model, seed=7)
    adapter = tmp_path / "adapter.safetensors"
    save_adapter_file(adapted, adapter)
    policy = _policy(found)
    try:
        ask = _ask("the then in", temperature=0.0, max_new_tokens=16)
        before = policy.generate([ask])[0]
        eos = {policy.tokenizer.convert_tokens_to_ids("<|im_end|>")}
        policy.load_version("v1", None, adapter=str(adapter))
        assert policy.version == "v1" and policy.last_sync_s is not None and policy.last_sync_s > 0
        after = policy.generate([ask])[0]
        assert after.completion_token_ids == _greedy(adapted, after.prompt_token_ids, 16, eos)
        assert after.completion_token_ids != before.completion_token_ids
        gap = (_score(adapted, after.prompt_token_ids, after.completion_token_ids) - torch.tensor(after.logprobs)).abs()
        assert float(gap.max()) < 1e-2 and float(gap.mean()) < 2e-3, gap  # f16 KV cache: not bitwise
        policy.load_version("v0", None)
        assert policy.generate([ask])[0].completion_token_ids == before.completion_token_ids
        with pytest.raises(PolicyLoadError, match="trainer.lora"):
            policy.load_version("v2", str(tmp_path / "merged.safetensors"))
        bad = tmp_path / "bad.safetensors"
        bad.write_bytes(b"not a safetensors file")
        with pytest.raises(PolicyLoadError, match="cannot serve v3"):
            policy.load_version("v3", None, adapter=str(bad))
        assert policy.version == "v0"  # a failed switch leaves the served weights as they were
    finally:
        policy.close()


def _run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=120)


def test_a_broken_build_is_one_clear_error():
    """A llama.cpp library that does not load (LLAMA_CPP_LIB_PATH pointing where there is none,
    as after a half-removed install) is one error naming the command that fixes it."""
    res = _run_python("""
        from spade_engine.policy.llamacpp_lib import LlamaCppUnavailable, load_llama_cpp
        try:
            load_llama_cpp()
        except LlamaCppUnavailable as exc:
            print("ERROR", exc)
    """, LLAMA_CPP_LIB_PATH="/nonexistent/llama-lib")
    from spade_engine.policy.llamacpp_lib import installed_version

    if installed_version() is None:
        assert "not installed" in res.stdout, res.stdout + res.stderr
    else:
        assert "ERROR llama-cpp-python is installed but its library does not load" in res.stdout, res.stdout + res.stderr
        assert "spade-engine models install-llamacpp --force" in res.stdout


#: the flags of the two CPUs this project's machines have had: an AMD EPYC without AVX-VNNI (where a
#: build made for the other stopped the test process with an illegal instruction, 2026-12-06) and
#: an Intel CPU with it (and AMX, which is never used)
_EPYC = frozenset("fpu sse2 avx avx2 fma f16c avx512f avx512bw avx512_vnni avx512_bf16 avx512vbmi".split())
_INTEL = _EPYC | {"avx_vnni", "amx_tile", "amx_int8", "amx_bf16"}


def test_a_build_uses_the_cpu_features_this_cpu_has_and_no_other():
    from spade_engine.policy.llamacpp_lib import cmake_args, cpu_flags, feature_tag

    assert cpu_flags("processor\t: 0\nflags\t\t: fpu avx avx2\nbugs\t\t: x\n") == {"fpu", "avx", "avx2"}
    assert cpu_flags("processor : 0\n") is None
    epyc, intel = cmake_args(_EPYC), cmake_args(_INTEL)
    assert "-DGGML_NATIVE=OFF" in epyc and "-DGGML_AVX512_BF16=ON" in epyc and "-DGGML_AVX_VNNI=OFF" in epyc
    assert "-DGGML_AVX_VNNI=ON" in intel and "AMX" not in intel
    assert "=ON" not in cmake_args(frozenset())  # an unknown CPU: a generic build
    # the wheel cache keeps one build per feature set: the two machines never share a wheel
    assert feature_tag(_EPYC) == "cpu-avx-avx2-fma-f16c-avx512-avx512_vnni-avx512_bf16"
    assert feature_tag(_INTEL) == feature_tag(_EPYC) + "-avx_vnni"
    assert feature_tag(frozenset()) == "cpu-generic"


def test_a_build_for_features_this_cpu_lacks_is_one_clear_error_not_an_illegal_instruction(monkeypatch):
    import spade_engine.policy.llamacpp_lib as lib

    info = "CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 1 | AVX512_VNNI = 1 | AVX_VNNI = 1 | OPENMP = 1 |"
    assert lib.unsupported_features(info, _EPYC) == ["AVX_VNNI"]
    assert lib.unsupported_features(info, _INTEL) == []
    assert lib.unsupported_features(info.replace("AVX_VNNI = 1", "AVX_VNNI = 0"), _EPYC) == []
    fake = type(sys)("llama_cpp")
    fake.__version__ = lib.PINNED_VERSION
    fake.llama_print_system_info = lambda: info.encode()
    monkeypatch.setitem(sys.modules, "llama_cpp", fake)
    monkeypatch.setattr(lib, "cpu_flags", lambda cpuinfo=None: _EPYC)
    with pytest.raises(lib.LlamaCppUnavailable, match="uses AVX_VNNI, which this CPU does not have") as err:
        lib.load_llama_cpp()
    assert "spade-engine models install-llamacpp --force" in str(err.value)
    monkeypatch.setattr(lib, "cpu_flags", lambda cpuinfo=None: _INTEL)
    assert lib.load_llama_cpp() is fake


def test_the_installed_build_runs_on_this_cpu():
    """What set-up installed (or replaced) uses no CPU feature this machine lacks."""
    from spade_engine.policy.llamacpp_lib import installed_unsupported_features, unsupported_features

    lib = _lib()
    assert unsupported_features(lib.llama_print_system_info().decode()) == []
    assert installed_unsupported_features() == []


def test_a_missing_build_is_one_clear_error_from_start(tmp_path):
    """With llama_cpp unimportable (simulated: ``sys.modules["llama_cpp"] = None`` stands in for
    an uninstalled package, since uninstalling it would break the other tests), `start --policy
    llamacpp` prints one line naming the install command, no traceback, and records no run."""
    gguf = tmp_path / "m.gguf"
    write_tiny_gguf(gguf, arch="qwen2", seed=1)
    res = _run_python(f"""
        import sys
        sys.modules["llama_cpp"] = None
        import spade_engine.policy.llamacpp_lib as lib
        lib.ensure_installed = lambda **kw: None  # the package counts as installed; it does not import
        from spade_engine.cli import main
        sys.argv = ["spade-engine", "start", "--model", {str(gguf)!r}, "--policy", "llamacpp", "--max-envs", "1",
                    "--data-dir", {str(tmp_path / 'data')!r}, "--no-progress"]
        main()
    """, SPADE_MODEL_CACHE=str(tmp_path / "cache"))
    assert res.returncode != 0
    assert "Traceback" not in res.stderr, res.stderr
    assert "spade-engine models install-llamacpp" in res.stderr and "not installed" in res.stderr, res.stderr


def test_the_llamacpp_policy_needs_lora_to_train():
    from spade_engine.config import load_config
    from spade_engine.errors import ConfigError

    with pytest.raises(ConfigError, match="trainer.lora = true"):
        load_config(None, overrides={"policy.kind": "llamacpp", "policy.model": "x.gguf", "trainer.enabled": True})
    cfg = load_config(None, overrides={"policy.kind": "llamacpp", "policy.model": "x.gguf", "trainer.enabled": True,
                                       "trainer.lora": True})
    assert cfg.policy.llamacpp.parallel >= 1


def test_start_picks_llamacpp_for_gguf_models_on_a_cpu():
    from spade_engine.policy.choice import default_kind_for_model

    assert default_kind_for_model("qwen2.5-coder-0.5b-instruct", cuda=False) == "llamacpp"
    assert default_kind_for_model("/models/x.GGUF", cuda=False) == "llamacpp"
    assert default_kind_for_model("qwen2.5-coder-0.5b-instruct", cuda=True) == "transformers"
    assert default_kind_for_model("tiny:3", cuda=False) == "transformers"
    assert default_kind_for_model("/some/hf-directory", cuda=False) == "transformers"


def test_a_frozen_designer_model_writes_and_the_trained_one_plays(tmp_path, lib, monkeypatch):
    """``policy.designer_model``: designer requests go to the second model, every other role to
    the trained one; a weight update reaches the trained model only; training the designer role on
    the frozen model's tokens is refused."""
    from spade_engine.config import PolicyConfig, load_config
    from spade_engine.errors import ConfigError
    from spade_engine.policy.lora_adapter import save_adapter_file
    from spade_engine.policy.registry import make_policy

    agent_file, designer_file = tmp_path / "agent.gguf", tmp_path / "designer.gguf"
    agent_model = write_tiny_gguf(agent_file, arch="qwen2", seed=11)
    write_tiny_gguf(designer_file, arch="qwen2", seed=12)
    # monkeypatch restores the session's own cache (CI's, which later tests read)
    monkeypatch.setenv("SPADE_MODEL_CACHE", str(tmp_path / "cache"))
    small = {"llamacpp": {"parallel": 2, "context_per_sequence": 256, "threads": 1}}
    routed = make_policy(PolicyConfig.model_validate({"kind": "llamacpp", "model": str(agent_file),
                                                      "designer_model": str(designer_file), **small}))
    alone = {f: make_policy(PolicyConfig.model_validate({"kind": "llamacpp", "model": str(f), **small}))
             for f in (agent_file, designer_file)}
    try:
        reqs = [PolicyRequest(role=role, messages=[{"role": "user", "content": "the then"}], temperature=1.0, seed=5,
                              max_new_tokens=12) for role in ("designer", "agent", "hinter", "designer")]
        out = routed.generate(reqs)
        want = {f: alone[f].generate([reqs[0]])[0].completion_token_ids for f in alone}
        assert want[agent_file] != want[designer_file]
        assert [s.completion_token_ids for s in out] == [want[designer_file], want[agent_file], want[agent_file],
                                                         want[designer_file]]
        assert routed.describe()["designer"]["model"] == str(designer_file)
        adapter = tmp_path / "adapter.safetensors"
        save_adapter_file(_lora_model(agent_model, seed=3), adapter)
        routed.load_version("v1", None, adapter=str(adapter))
        again = routed.generate(reqs[:2])
        assert routed.version == "v1" and again[0].completion_token_ids == want[designer_file]
        assert again[1].completion_token_ids != want[agent_file]
    finally:
        routed.close()
        for p in alone.values():
            p.close()
    with pytest.raises(ConfigError, match="train_designer = false"):
        load_config(None, overrides={"policy.kind": "llamacpp", "policy.model": "a.gguf", "policy.designer_model": "b.gguf",
                                     "trainer.enabled": True, "trainer.lora": True}, environ={})


def test_a_resumed_run_serves_the_adapter_of_its_last_policy_update(tmp_path, lib, monkeypatch):
    """A run whose log holds a PolicyUpdated with an adapter blob (as a killed run leaves it)
    serves that version when it resumes: the engine loads it before its next environment, records
    PolicyLoaded (served as an adapter, with the seconds it took) and proposes with it."""
    from spade_engine.blobs import BlobStore
    from spade_engine.config import load_config
    from spade_engine.events.catalogue import PolicyUpdated
    from spade_engine.events.codec import make_envelope
    from spade_engine.events.store import DataDir, new_run_id, open_event_log
    from spade_engine.policy.lora_adapter import ADAPTER_MEDIA_TYPE, save_adapter_file
    from spade_engine.runs.engine import open_engine

    gguf = tmp_path / "m.gguf"
    model = write_tiny_gguf(gguf, arch="qwen2", seed=4)
    monkeypatch.setenv("SPADE_MODEL_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "data"
    cfg = load_config(overrides={
        "seed": 1, "policy.kind": "llamacpp", "policy.model": str(gguf), "policy.llamacpp.parallel": 2,
        "policy.llamacpp.context_per_sequence": 8192, "policy.llamacpp.threads": 1,
        "policy.generation.designer.max_new_tokens": 16, "loop.max_envs": 1, "loop.max_repairs": 0,
        "loop.seed_envs": "none",
    }, environ={})
    run_id = new_run_id()
    with open_engine(cfg, run_id=run_id, data_dir=data, create=True, projections=False):
        pass  # the run exists, as a killed one would
    adapter = tmp_path / "adapter.safetensors"
    save_adapter_file(_lora_model(model, seed=2), adapter)
    ref = BlobStore(DataDir(data).blobs_dir).put_file(adapter, media_type=ADAPTER_MEDIA_TYPE)
    log = open_event_log(run_id, data_dir=data)
    try:
        log.append([make_envelope(PolicyUpdated(version="v1", parent_version="v0", checkpoint=None, step=1,
                                                adapter=ref, base_model=str(gguf)), run_id=run_id, producer="trainer")])
    finally:
        log.close()
    with open_engine(cfg, run_id=run_id, data_dir=data, create=False, projections=False) as opened:
        opened.engine.run()
        assert opened.engine.ctx.policy.version == "v1"
    log = open_event_log(run_id, data_dir=data)
    try:
        loaded = [r.envelope.event() for r in log.read() if r.envelope.type == "PolicyLoaded"]
        proposed = [r.envelope.event() for r in log.read() if r.envelope.type == "EnvironmentProposed"]
    finally:
        log.close()
    assert [(e.version, e.served_as, e.policy_kind) for e in loaded] == [("v1", "adapter", "llamacpp")]
    assert loaded[0].seconds > 0 and proposed and all(p.policy_version == "v1" for p in proposed)
