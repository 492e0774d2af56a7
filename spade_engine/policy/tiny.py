"""Tiny randomly initialised causal LMs with a local byte-level tokenizer, for tests and smoke runs.

Nothing is downloaded: the tokenizer is built with the ``tokenizers`` library as a pure
byte-level vocabulary (the 256 byte symbols of GPT-2's byte-level alphabet, no merges) plus three
special tokens, so it encodes and decodes *any* text, code included, losslessly. The model is a
Qwen2 architecture built from a config (``hidden=32``, ``layers=2`` by default) with weights drawn
from a seeded generator, so ``build_tiny_model(seed=s)`` always returns the same weights.

Use :func:`build_tiny_model` directly, or ``TransformersPolicy.from_tiny(...)``; the trainer and
the CLI accept the model spec ``"tiny"`` / ``"tiny:SEED"`` (see :func:`parse_tiny_spec`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_tiny_tokenizer", "build_tiny_model", "parse_tiny_spec", "TINY_SPECIALS"]

TINY_SPECIALS = ("<|pad|>", "<|bos|>", "<|eos|>")


def build_tiny_tokenizer() -> Any:
    """A :class:`~transformers.PreTrainedTokenizerFast` over bytes: ids 0-255 are the bytes' symbols
    (GPT-2 byte-level alphabet), 256-258 are ``<|pad|>``, ``<|bos|>``, ``<|eos|>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    # order by byte value so token id == byte value (handy in tests and logs)
    byte_to_sym = _bytes_to_unicode()
    vocab = {byte_to_sym[b]: b for b in range(256)}
    assert set(vocab) == set(alphabet)
    for i, tok in enumerate(TINY_SPECIALS):
        vocab[tok] = 256 + i
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(TINY_SPECIALS))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<|pad|>",
        bos_token="<|bos|>",
        eos_token="<|eos|>",
        padding_side="left",
    )
    return fast


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode symbol map (what ByteLevel uses)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def build_tiny_model(
    seed: int = 0,
    vocab: int | None = None,
    hidden: int = 32,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate: int | None = None,
    max_positions: int = 32768,
    dtype: Any = None,
) -> tuple[Any, Any]:
    """A seeded random Qwen2 causal LM and the byte-level tokenizer.

    ``vocab`` defaults to the tokenizer's size (259); a larger value pads the embedding table.
    Returns ``(model, tokenizer)``; the model is in eval mode on CPU.
    """
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = build_tiny_tokenizer()
    n_vocab = len(tokenizer)
    if vocab is not None:
        if vocab < n_vocab:
            raise ValueError(f"vocab={vocab} is smaller than the tiny tokenizer's {n_vocab} tokens")
        n_vocab = vocab
    config = Qwen2Config(
        vocab_size=n_vocab,
        hidden_size=hidden,
        intermediate_size=intermediate or hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        use_cache=True,
    )
    config._attn_implementation = "sdpa"
    with _seeded(seed):
        model = Qwen2ForCausalLM(config)
    if dtype is not None:
        model = model.to(dtype)
    model.eval()
    model.name_or_path = f"tiny:{seed}"
    return model, tokenizer


class _seeded:
    """Fork torch's global RNG, seed it, restore it on exit (model init uses the global RNG)."""

    def __init__(self, seed: int):
        self.seed = seed

    def __enter__(self) -> None:
        import torch

        self._ctx = torch.random.fork_rng(devices=[])
        self._ctx.__enter__()
        torch.manual_seed(self.seed)

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(*exc)


def parse_tiny_spec(spec: str) -> dict[str, int] | None:
    """``"tiny"`` -> ``{"seed": 0}``; ``"tiny:3"`` -> ``{"seed": 3}``; anything else -> ``None``.

    Extra sizes may follow as ``tiny:SEED:HIDDEN:LAYERS``.
    """
    if spec != "tiny" and not spec.startswith("tiny:"):
        return None
    parts = spec.split(":")[1:]
    keys = ("seed", "hidden", "layers")
    try:
        return {k: int(v) for k, v in zip(keys, parts)} or {"seed": 0}
    except ValueError:
        raise ValueError(f"bad tiny model spec {spec!r} (expected tiny[:SEED[:HIDDEN[:LAYERS]]])") from None
