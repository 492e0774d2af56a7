"""GGUF -> plain transformers directory (safetensors weights, tokenizer, chat template).

transformers reads GGUF files with the ``gguf`` package and dequantises every tensor. The model
it returns is marked as GGUF-quantised and ``save_pretrained`` refuses it, so a fresh model is
built from its config (without the quantisation entry) and given its state dict; that one saves
as an ordinary checkpoint that reloads in seconds. Two corrections are made on the way:

- the tokenizer's special tokens are set from the ids transformers read from the GGUF metadata
  (``tokenizer.ggml.*_token_id``, in the model config): its llama GGUF tokenizer converter swaps
  bos and eos, which would leave a chat model without its end-of-turn token;
- the generation config gets the same eos, bos and pad ids.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .errors import ConversionError
from .progress import NullProgress, Progress, Stage

__all__ = ["convert_gguf", "ConvertInfo", "DTYPES", "GGUF_MAGIC", "check_gguf_magic"]

DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16",
          "fp32": "float32", "float32": "float32"}
GGUF_MAGIC = b"GGUF"
SPECIAL_ROLES = ("bos", "eos", "pad", "unk")


def check_gguf_magic(path: Path) -> None:
    """A ConversionError unless ``path`` is a readable file that starts with the GGUF magic."""
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise ConversionError(f"cannot read {path}: {exc.strerror or exc}") from None
    if magic != GGUF_MAGIC:
        raise ConversionError(f"{path} is not a GGUF file (it does not start with {GGUF_MAGIC!r})")


@dataclass
class ConvertInfo:
    """What a conversion produced (recorded in the cache manifest)."""

    arch: str
    gguf_name: str
    dtype: str
    num_parameters: int
    has_chat_template: bool
    special_tokens: dict[str, str]
    eos_token_ids: list[int]
    tensor_types: dict[str, int]
    context_length: int | None
    seconds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No tqdm bars or warnings from transformers while we report progress ourselves, and
    anything libraries print (DeepSpeed logs its accelerator to stdout when transformers imports
    it) goes to stderr, so a command's stdout (a path, JSON) stays parseable."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    level = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def _tensor_progress(stage: Stage, types: Counter) -> Iterator[None]:
    """Count the tensors transformers dequantises (the longest step) on ``stage``, by type.

    transformers wraps that loop in ``tqdm`` from its GGUF module; for the duration of the load
    that name is replaced by a counter. If a transformers version lacks it, nothing is counted.
    """
    try:
        from transformers import modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:  # pragma: no cover
        yield
        return
    original = getattr(gguf_utils, "tqdm", None)
    if original is None:  # pragma: no cover
        yield
        return

    def counting(iterable: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        if hasattr(iterable, "__len__"):
            stage.set_total(len(iterable))
        for item in iterable:
            yield item
            kind = getattr(getattr(item, "tensor_type", None), "name", None)
            if kind:
                types[kind] += 1
            stage.advance(1)

    gguf_utils.tqdm = counting
    try:
        yield
    finally:
        gguf_utils.tqdm = original


def _special_tokens(tok: Any, config: Any) -> dict[str, tuple[int, str]]:
    """role -> (id, text) for the special token ids the GGUF declares (via the model config)."""
    out = {}
    size = len(tok)
    for role in SPECIAL_ROLES:
        tid = getattr(config, f"{role}_token_id", None)
        if isinstance(tid, int) and 0 <= tid < size:
            out[role] = (tid, tok.convert_ids_to_tokens(tid))
    return out


def convert_gguf(
    gguf_path: Path,
    out_dir: Path,
    *,
    dtype: str = "bfloat16",
    progress: Progress | None = None,
) -> ConvertInfo:
    """Write a transformers directory for the GGUF at ``gguf_path`` into ``out_dir`` (created)."""
    if dtype not in DTYPES:
        raise ConversionError(f"unknown dtype {dtype!r} (expected bf16, fp16 or fp32)")
    gguf_path = Path(gguf_path)
    check_gguf_magic(gguf_path)
    progress = progress or NullProgress()
    seconds: dict[str, float] = {}
    with progress.stage("convert", total=4) as st:
        st.note("importing transformers")
        with contextlib.redirect_stdout(sys.stderr):
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

        dt = getattr(torch, DTYPES[dtype])
        with _quiet_transformers():
            t = time.monotonic()
            st.note("loading the tokenizer")
            try:
                tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
            except Exception as exc:  # transformers raises many kinds for unsupported files
                raise ConversionError(f"{gguf_path.name}: transformers cannot read its tokenizer: {exc}") from None
            seconds["tokenizer_s"] = time.monotonic() - t
            st.advance(1, note="dequantising tensors")

            t = time.monotonic()
            types: Counter = Counter()
            try:
                with progress.stage("dequantise") as tensors, _tensor_progress(tensors, types):
                    qmodel = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name, dtype=dt)
            except Exception as exc:
                raise ConversionError(f"{gguf_path.name}: transformers cannot load its weights: {exc}") from None
            seconds["dequantise_s"] = time.monotonic() - t
            st.advance(1, note="rebuilding a plain model")

            t = time.monotonic()
            config = qmodel.config
            if hasattr(config, "quantization_config"):
                delattr(config, "quantization_config")
            gguf_name = str(getattr(config, "_model_name_or_path", "") or "")  # GGUF general.name
            special = _special_tokens(tok, config)
            for role, (_tid, text) in special.items():
                if getattr(tok, f"{role}_token", None) != text:
                    setattr(tok, f"{role}_token", text)
            model = AutoModelForCausalLM.from_config(config, dtype=dt)
            result = model.load_state_dict(qmodel.state_dict(), strict=False)
            del qmodel
            gc.collect()
            if result.missing_keys or result.unexpected_keys:
                raise ConversionError(
                    f"{gguf_path.name}: weights do not fit the model built from its config "
                    f"(missing {list(result.missing_keys)[:5]}, unexpected {list(result.unexpected_keys)[:5]})"
                )
            eos_ids = [special["eos"][0]] if "eos" in special else []
            gen = model.generation_config
            if eos_ids:
                gen.eos_token_id = eos_ids[0]
            for role in ("bos", "pad"):
                if role in special:
                    setattr(gen, f"{role}_token_id", special[role][0])
            seconds["rebuild_s"] = time.monotonic() - t
            st.advance(1, note="saving safetensors and tokenizer")

            t = time.monotonic()
            out_dir.mkdir(parents=True, exist_ok=True)
            model.save_pretrained(str(out_dir))
            tok.save_pretrained(str(out_dir))
            seconds["save_s"] = time.monotonic() - t
            st.advance(1, note="saved")
        info = ConvertInfo(
            arch=str(config.model_type),
            gguf_name=gguf_name,
            dtype=DTYPES[dtype],
            num_parameters=int(model.num_parameters()),
            has_chat_template=bool(getattr(tok, "chat_template", None)),
            special_tokens={role: text for role, (_tid, text) in special.items()},
            eos_token_ids=eos_ids,
            tensor_types=dict(sorted(types.items())),
            context_length=getattr(config, "max_position_embeddings", None),
            seconds={k: round(v, 2) for k, v in seconds.items()},
        )
        del model
        gc.collect()
    return info
