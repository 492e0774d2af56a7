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


def _max(n: int) -> msgspec.Meta:
    """The size limit of a string or list field: ``Annotated[str, _max(n)]``."""
    return msgspec.Meta(max_length=n)


#: why a worker could not send a value (``{"bad": why}``)
_BadText = Annotated[str, _max(limits.MAX_BAD_CHARS)]
#: a class, method or base name from the environment's code
_Name = Annotated[str, _max(limits.MAX_NAME_CHARS)]


class _Strict(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    pass


# -- wire values: {"v": value} or {"bad": why} --------------------------------------------------------


class TextWire(_Strict):
    v: Annotated[str, msgspec.Meta(max_length=limits.MAX_OBS_CHARS)] | None = None
    bad: _BadText | None = None


class RewardWire(_Strict):
    v: float | None = None
    bad: _BadText | None = None


class FlagWire(_Strict):
    v: bool | None = None
    bad: _BadText | None = None


class InfoWire(_Strict):
    v: dict[str, Any] | None = None  # sizes re-checked by limits.info_problem
    bad: _BadText | None = None


# -- per-command data ------------------------------------------------------------------------------


class SyntaxErrorInfo(_Strict):
    msg: Annotated[str, _max(500)]
    lineno: int | None = None
    offset: int | None = None
    text: Annotated[str, _max(200)] = ""


class ClassInfo(_Strict):
    name: _Name
    lineno: int
    bases: Annotated[list[_Name], _max(limits.MAX_BASES)] = []
    methods: Annotated[list[_Name], _max(limits.MAX_METHODS)] = []


class Finding(_Strict):
    lineno: int | None
    what: Annotated[str, _max(limits.MAX_NAME_CHARS + 50)]


class ParseData(_Strict):
    syntax_error: SyntaxErrorInfo | None = None
    classes: Annotated[list[ClassInfo], _max(limits.MAX_CLASSES)] = []
    forbidden: Annotated[list[Finding], _max(limits.MAX_FINDINGS)] = []
    #: calls that could hide a puzzle's answer behind a pseudo-random function (see worker._hidden_draws)
    hidden_draws: Annotated[list[Finding], _max(limits.MAX_FINDINGS)] = []


class LoadData(_Strict):
    class_name: _Name
    contract: Literal["spade", "gymnasium"]
    has_solution: bool


class SpaceInfo(_Strict):
    """A gymnasium Text space as declared (the engine rebuilds it to run gymnasium's checker)."""

    max_length: Annotated[int, msgspec.Meta(ge=0, le=2**31)]
    min_length: Annotated[int, msgspec.Meta(ge=0, le=2**31)] = 0
    charset: Annotated[str, _max(limits.MAX_CHARSET_CHARS)] | None = None


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
    actions: Annotated[list[Annotated[str, _max(limits.MAX_ACTION_CHARS)]], _max(limits.MAX_SOLUTION_ACTIONS)] | None = None
    bad: _BadText = ""


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
    fp: Annotated[str, _max(64)]
    beat: int


class ErrorInfo(_Strict):
    kind: Annotated[str, _max(40)]
    message: Annotated[str, _max(limits.MAX_ERROR_CHARS)]
    traceback: Annotated[str, _max(limits.MAX_TRACEBACK_CHARS)] = ""


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
    event: Annotated[str, _max(limits.MAX_EVENT_CHARS)]
    detail: _BadText = ""


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
