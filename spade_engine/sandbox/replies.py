"""The strict schema of everything a sandbox worker sends, decoded in the engine with msgspec.

Nothing from a worker is used before it is decoded against these Structs: unknown fields,
missing fields, wrong types (``true`` for an int, a list for a string) and sizes over the
worker's own limits (:mod:`.limits`) are all refused. On the task's result pipe a frame is one of

* :class:`Ready` -- the task started (sent before any environment code runs), with the audit
  hook's :class:`Guard`;
* :class:`Reply` -- the answer to command ``seq``: ``ok`` with ``data`` (decoded by
  :func:`decode_data` against the Struct of the command's op, :data:`DATA_TYPES`) or an
  :class:`ErrorInfo`, and the hook's :class:`Guard` at that moment;
* :class:`Forbidden` -- the audit hook killed the task.

On the zygote's status pipe: :class:`Hello`, :class:`Forked`, :class:`TaskEnd`, :class:`StatusError`.

A frame that does not fit raises :class:`ReplyError` with the reason; the pool turns it into a
``sandbox`` verdict for that environment and recycles the worker (:mod:`.pool`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import msgspec

from . import limits

__all__ = [
    "ReplyError",
    "Guard",
    "ErrorInfo",
    "Ready",
    "Reply",
    "Forbidden",
    "TaskFrame",
    "Hello",
    "Forked",
    "TaskEnd",
    "StatusError",
    "StatusFrame",
    "TextWire",
    "RewardWire",
    "FlagWire",
    "InfoWire",
    "SyntaxErrorInfo",
    "ClassInfo",
    "Finding",
    "ParseData",
    "LoadData",
    "NewData",
    "ResetData",
    "StepData",
    "SolutionData",
    "SpaceInfo",
    "SpacesInfo",
    "Empty",
    "DATA_TYPES",
    "decode_task_frame",
    "decode_status_frame",
    "decode_data",
]


class ReplyError(Exception):
    """A frame from a worker that does not fit the schema (the reason is the message)."""


def _s(n: int) -> Any:
    return Annotated[str, msgspec.Meta(max_length=n)]


def _list(item: Any, n: int) -> Any:
    return Annotated[list[item], msgspec.Meta(max_length=n)]


class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    pass


# -- wire values: {"v": value} or {"bad": why} --------------------------------------------------------


class TextWire(_Strict):
    v: Annotated[str, msgspec.Meta(max_length=limits.MAX_OBS_CHARS)] | None = None
    bad: _s(limits.MAX_BAD_CHARS) | None = None  # type: ignore[valid-type]


class RewardWire(_Strict):
    v: float | None = None
    bad: _s(limits.MAX_BAD_CHARS) | None = None  # type: ignore[valid-type]


class FlagWire(_Strict):
    v: bool | None = None
    bad: _s(limits.MAX_BAD_CHARS) | None = None  # type: ignore[valid-type]


class InfoWire(_Strict):
    v: dict[str, Any] | None = None  # sizes re-checked by limits.info_problem
    bad: _s(limits.MAX_BAD_CHARS) | None = None  # type: ignore[valid-type]


# -- per-command data ------------------------------------------------------------------------------


class SyntaxErrorInfo(_Strict):
    msg: _s(500)  # type: ignore[valid-type]
    lineno: int | None = None
    offset: int | None = None
    text: _s(200) = ""  # type: ignore[valid-type]


class ClassInfo(_Strict):
    name: _s(limits.MAX_NAME_CHARS)  # type: ignore[valid-type]
    lineno: int
    bases: _list(_s(limits.MAX_NAME_CHARS), limits.MAX_BASES) = []  # type: ignore[valid-type]
    methods: _list(_s(limits.MAX_NAME_CHARS), limits.MAX_METHODS) = []  # type: ignore[valid-type]


class Finding(_Strict):
    lineno: int | None
    what: _s(limits.MAX_NAME_CHARS + 50)  # type: ignore[valid-type]


class ParseData(_Strict):
    syntax_error: SyntaxErrorInfo | None = None
    classes: _list(ClassInfo, limits.MAX_CLASSES) = []  # type: ignore[valid-type]
    forbidden: _list(Finding, limits.MAX_FINDINGS) = []  # type: ignore[valid-type]
    #: calls that could hide a puzzle's answer behind a pseudo-random function (see worker._hidden_draws)
    hidden_draws: _list(Finding, limits.MAX_FINDINGS) = []  # type: ignore[valid-type]


class LoadData(_Strict):
    class_name: _s(limits.MAX_NAME_CHARS)  # type: ignore[valid-type]
    contract: Literal["spade", "gymnasium"]
    has_solution: bool


class SpaceInfo(_Strict):
    """A gymnasium Text space as declared (the engine rebuilds it to run gymnasium's checker)."""

    max_length: Annotated[int, msgspec.Meta(ge=0, le=2**31)]
    min_length: Annotated[int, msgspec.Meta(ge=0, le=2**31)] = 0
    charset: _s(limits.MAX_CHARSET_CHARS) | None = None  # type: ignore[valid-type]


class SpacesInfo(_Strict):
    observation_space: SpaceInfo
    action_space: SpaceInfo


class NewData(_Strict):
    iid: Annotated[int, msgspec.Meta(ge=1)]
    #: the environment's own max_turns (a positive int, else None) and what it is after the budget's cap
    designed_max_turns: Annotated[int, msgspec.Meta(ge=1, le=2**31)] | None = None
    max_turns: Annotated[int, msgspec.Meta(ge=0, le=2**31)] | None = None
    #: a gymnasium-contract environment's declared spaces (None for the SPADE contract)
    spaces: SpacesInfo | None = None


class ResetData(_Strict):
    obs: TextWire
    info: InfoWire


class StepData(_Strict):
    obs: TextWire
    reward: RewardWire
    terminated: FlagWire
    truncated: FlagWire
    info: InfoWire


class SolutionData(_Strict):
    kind: Literal["none", "text", "actions", "bad"]
    text: Annotated[str, msgspec.Meta(max_length=limits.MAX_OBS_CHARS)] = ""
    actions: _list(_s(limits.MAX_ACTION_CHARS), limits.MAX_SOLUTION_ACTIONS) | None = None  # type: ignore[valid-type]
    bad: _s(limits.MAX_BAD_CHARS) = ""  # type: ignore[valid-type]


class Empty(_Strict):
    pass


#: the Struct each command's successful reply data must fit
DATA_TYPES: dict[str, type] = {
    "parse": ParseData,
    "load": LoadData,
    "new": NewData,
    "reset": ResetData,
    "step": StepData,
    "solution": SolutionData,
    "close": Empty,
    "end": Empty,
    "ping": Empty,
}

# -- frames of the task's result pipe ---------------------------------------------------------------


class Guard(_Strict):
    fp: _s(64)  # type: ignore[valid-type]
    beat: int


class ErrorInfo(_Strict):
    kind: _s(40)  # type: ignore[valid-type]
    message: _s(limits.MAX_ERROR_CHARS)  # type: ignore[valid-type]
    traceback: _s(limits.MAX_TRACEBACK_CHARS) = ""  # type: ignore[valid-type]


class Ready(_Strict, tag_field="op", tag="ready"):
    seq: Literal[0]
    guard: Guard


class Reply(_Strict, tag_field="op", tag="reply"):
    seq: int
    ok: bool
    guard: Guard
    data: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)  # empty when absent
    error: ErrorInfo | None = None


class Forbidden(_Strict, tag_field="op", tag="forbidden"):
    event: _s(limits.MAX_EVENT_CHARS)  # type: ignore[valid-type]
    detail: _s(limits.MAX_BAD_CHARS) = ""  # type: ignore[valid-type]


TaskFrame = Union[Ready, Reply, Forbidden]

# -- frames of the zygote's status pipe (trusted, but decoded just as strictly) -------------------------


class Hello(_Strict, tag_field="op", tag="hello"):
    layers: dict[str, bool]
    detail: dict[str, str]
    uid: int
    pid: int


class Forked(_Strict, tag_field="op", tag="forked"):
    pid: int
    pidns: bool


class TaskEnd(_Strict, tag_field="op", tag="task_end"):
    exit: int | None = None
    signal: int | None = None
    leftovers: int = 0
    error: str | None = None


class StatusError(_Strict, tag_field="op", tag="error"):
    detail: str


StatusFrame = Union[Hello, Forked, TaskEnd, StatusError]

_task_decoder = msgspec.json.Decoder(TaskFrame)
_status_decoder = msgspec.json.Decoder(StatusFrame)
_data_decoders = {op: msgspec.json.Decoder(t) for op, t in DATA_TYPES.items()}


def _why(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text[:300]


def decode_task_frame(payload: bytes) -> Ready | Reply | Forbidden:
    """A frame of the task's result pipe, or ReplyError."""
    try:
        return _task_decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, MemoryError) as exc:
        raise ReplyError(_why(exc)) from None


def decode_status_frame(payload: bytes) -> Hello | Forked | TaskEnd | StatusError:
    """A frame of the zygote's status pipe, or ReplyError."""
    try:
        return _status_decoder.decode(payload)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, MemoryError) as exc:
        raise ReplyError(_why(exc)) from None


def decode_data(op: str, reply: Reply) -> Any:
    """The data of a successful reply to ``op``, as the Struct of :data:`DATA_TYPES`."""
    dec = _data_decoders.get(op)
    if dec is None:
        raise ReplyError(f"no schema for replies to {op!r}")
    if not bytes(reply.data):
        raise ReplyError("a successful reply without data")
    try:
        return dec.decode(reply.data)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, MemoryError) as exc:
        raise ReplyError(_why(exc)) from None
