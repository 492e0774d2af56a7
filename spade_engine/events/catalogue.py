"""The event catalogue: every event type the engine records, with its versioned payload schema.

Payloads are frozen :class:`msgspec.Struct` values. Each type has a ``TYPE`` name and a
``VERSION``; old versions are upcast on read through :data:`UPCASTERS`. Large blobs (token ids of
long episodes, checkpoints) are stored as content-addressed files and referenced by
:class:`BlobRef`; everything the engine, the projections and the trainer need is otherwise inline.

Data flow (the stage table is :mod:`spade_engine.engine.pipeline`)::

    RunStarted
    EnvironmentProposed -> EnvironmentValidated -> HintWritten -> RolloutCompleted x (plain + hinted)
                        -> RegretEstimated (round 0) [-> RolloutCompleted x plain -> RegretEstimated (round r)]
                        -> (trainer) PolicyUpdated -> PolicyLoaded (each process serving the new version)
    EnvironmentReplayed (level replay of an archived environment) -> RolloutCompleted -> RegretEstimated
    RunStopped
    (eval) EvaluationCompleted                  one per task of a held-out suite, per policy version
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

import msgspec

from .errors import FutureSchemaVersion, MalformedEvent, UnknownEventType

__all__ = [
    "EventPayload",
    "BlobRef",
    "DocumentRef",
    "Generation",
    "ValidationCheck",
    "Turn",
    "GarbageProbe",
    "WrongAnswerReplay",
    "RunStarted",
    "EnvironmentProposed",
    "EnvironmentValidated",
    "HintWritten",
    "RolloutCompleted",
    "RegretEstimated",
    "EnvironmentReplayed",
    "PolicyUpdated",
    "PolicyLoaded",
    "RunStopped",
    "EvaluationCompleted",
    "EVENT_TYPES",
    "END_REASONS",
    "UPCASTERS",
    "V1_VALIDATION_SEEDS",
    "V1_PROBE_ACTIONS",
    "register_upcaster",
    "decode_payload",
    "payload_to_builtins",
]


class EventPayload(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=False):
    """Base class of all payloads. ``TYPE`` and ``VERSION`` identify the schema."""

    TYPE: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1
    #: The envelope key for this event: the name of the payload field holding the environment
    #: id, or ``None`` for run-level events (keyed by run id).
    KEY_FIELD: ClassVar[str | None] = None


# ----------------------------------------------------------------------------------------------
# Value types used inside payloads


class BlobRef(msgspec.Struct, frozen=True, kw_only=True):
    """A content-addressed file: ``uri`` is ``cas://sha256/<hex>`` (or any URL), ``sha256`` its
    hex digest, ``size`` bytes, ``media_type`` e.g. ``application/json``."""

    uri: str
    sha256: str
    size: int
    media_type: str = "application/octet-stream"


class DocumentRef(msgspec.Struct, frozen=True, kw_only=True):
    """A corpus document used to ground an environment: where it came from and its digest."""

    source: str
    doc_id: str
    sha256: str
    title: str = ""
    domain: str = ""


class Generation(msgspec.Struct, frozen=True, kw_only=True):
    """One sampled completion, as the trainer needs it.

    ``prompt_token_ids`` and ``completion_token_ids`` are the tokens the policy saw and produced;
    ``logprobs`` holds the behaviour policy's log-probability of each completion token (same
    length as ``completion_token_ids``). Procedural policies produce no tokens: lists are empty.
    When the lists are large a producer may offload them to ``ref`` (a JSON blob with the same
    three fields) and leave the inline lists empty.
    """

    prompt_token_ids: list[int] = msgspec.field(default_factory=list)
    completion_token_ids: list[int] = msgspec.field(default_factory=list)
    logprobs: list[float] = msgspec.field(default_factory=list)
    ref: BlobRef | None = None
    finish_reason: str = ""


class ValidationCheck(msgspec.Struct, frozen=True, kw_only=True):
    """One ordered validator check: its name, outcome, a human detail and the time it took."""

    name: str
    passed: bool
    detail: str = ""
    seconds: float = 0.0


class GarbageProbe(msgspec.Struct, frozen=True, kw_only=True):
    """A play-time probe of an environment with garbage actions: one episode in a sandbox session
    opened exactly like a play's, reset with ``seed`` (the seed of plain play 0), stepping the
    seeded garbage ``actions`` until it ends (``rewards`` per step). ``error`` says why it ended
    abnormally. An environment whose garbage episode wins is trivial (see RegretEstimated)."""

    seed: int
    actions: list[str]
    rewards: list[float]
    terminated: bool = False
    truncated: bool = False
    error: str | None = None


class WrongAnswerReplay(msgspec.Struct, frozen=True, kw_only=True):
    """A won play of an environment's first round replayed with a deliberately wrong final answer
    (RolloutCompleted v5): a fresh sandbox session opened like a play's, reset with the play's
    ``seed``, stepping the play's actions with the last one (turn ``turn``, 1-based) replaced by
    ``answer``, the same answer with every letter and digit changed
    (:func:`spade_engine.sandbox.probes.wrong_answer`: same shape, other value; recorded cut to
    its start). ``rewards`` per step, and how the replay ended; ``error`` says why it ended
    abnormally. When such replays win as well, the outcome does not depend on the answer (see
    RegretEstimated v5)."""

    seed: int
    turn: int
    answer: str
    rewards: list[float]
    terminated: bool = False
    truncated: bool = False
    error: str | None = None


class Turn(msgspec.Struct, frozen=True, kw_only=True):
    """One agent turn in an episode: what the agent saw and did, and what the env answered.

    ``observation_ref``/``action_ref`` (RolloutCompleted v4): when the text was longer than the
    engine keeps inline, the whole text is this blob (UTF-8, ``text/plain``) and ``observation``/
    ``action`` hold its start, ending with ``...[truncated N characters]``."""

    observation: str
    action: str
    reward: float
    terminated: bool = False
    truncated: bool = False
    generation: Generation | None = None
    step_seconds: float = 0.0
    observation_ref: BlobRef | None = None
    action_ref: BlobRef | None = None


# ----------------------------------------------------------------------------------------------
# Events


class RunStarted(EventPayload, frozen=True, kw_only=True):
    """A run (or a resumption of it) started. The full config is recorded so a run can be
    reproduced; ``parent_run_id`` links a curriculum replay/retrain to the run it replays."""

    TYPE: ClassVar[str] = "RunStarted"
    config: dict[str, Any]
    engine_version: str
    seed: int
    backend: str = "sqlite"
    policy: dict[str, Any] = msgspec.field(default_factory=dict)
    resumed: bool = False
    parent_run_id: str | None = None
    sandbox_layers: dict[str, bool] = msgspec.field(default_factory=dict)
    host: str = ""


class EnvironmentProposed(EventPayload, frozen=True, kw_only=True):
    """The designer wrote an environment.

    ``attempt`` is 0 for a first proposal and n for the n-th repair; ``repair_of`` names the
    env_id of the failed candidate it repairs. ``parents`` are the memory examples shown to the
    designer (lineage). ``generation`` carries the designer's tokens and behaviour log-probs for
    the trainer. ``completion`` is the designer's reply: when the engine started that reply (the
    puzzle format's reply prefix), it begins with the prefix, whose tokens are the end of
    ``generation.prompt_token_ids``, not completion tokens. ``designer_format`` is the designer
    format the prompt was written in (``loop.designer_format``: ``standalone``, ``scaffold``,
    ``puzzle``; a repair keeps its original's), which a repair's advice follows; ``None`` where
    no format of the engine's wrote the prompt (a seed, a fixed environment source, a prompt
    builder of a benchmark's own) and in v1 events, which did not record it.
    """

    TYPE: ClassVar[str] = "EnvironmentProposed"
    VERSION: ClassVar[int] = 2
    KEY_FIELD: ClassVar[str | None] = "env_id"
    env_id: str
    skill: str
    difficulty: float
    code: str
    code_sha256: str
    policy_version: str
    document: DocumentRef | None = None
    parents: list[str] = msgspec.field(default_factory=list)
    avoid: list[str] = msgspec.field(default_factory=list)
    attempt: int = 0
    repair_of: str | None = None
    prompt: str = ""
    completion: str = ""
    generation: Generation | None = None
    designer: str = ""
    designer_format: str | None = None


class EnvironmentValidated(EventPayload, frozen=True, kw_only=True):
    """The sandboxed validator's verdict, plus the novelty decision against the memory.

    ``error_kind`` is from the fixed taxonomy (``syntax``, ``contract``, ``timeout``, ``memory``,
    ``crash``, ``nondeterministic``, ``unsolvable``, ``trivial``, ``forbidden``, ``duplicate``...).
    The embedding used for the novelty decision is recorded (``embedding_b64``: little-endian
    float32, base64) so replay never re-runs the embedding model. ``validation_seeds`` and
    ``probe_actions`` are the reset seeds and probe actions the validator drew for this
    environment from the run's seed (v2; v1 validations used the fixed :data:`V1_VALIDATION_SEEDS`
    and :data:`V1_PROBE_ACTIONS`).
    """

    TYPE: ClassVar[str] = "EnvironmentValidated"
    VERSION: ClassVar[int] = 2
    KEY_FIELD: ClassVar[str | None] = "env_id"
    env_id: str
    valid: bool
    error_kind: str | None = None
    failed_check: str | None = None
    checks: list[ValidationCheck] = msgspec.field(default_factory=list)
    class_name: str | None = None
    contract: Literal["spade", "gymnasium"] | None = None
    has_solution: bool = False
    novel: bool | None = None
    novelty: float | None = None
    novelty_threshold: float | None = None
    nearest_env_id: str | None = None
    embedding_model: str | None = None
    embedding_b64: str | None = None
    accepted: bool = False
    seconds: float = 0.0
    sandbox_layers: dict[str, bool] = msgspec.field(default_factory=dict)
    validation_seeds: list[int] = msgspec.field(default_factory=list)
    probe_actions: list[str] = msgspec.field(default_factory=list)


class HintWritten(EventPayload, frozen=True, kw_only=True):
    """The policy read the environment source and wrote a privileged hint (strategy and answer
    format, never the answer). It is appended to the first observation of hinted plays.

    ``garbage_probe`` (v2) is the play-time garbage probe run by the same stage before the plays
    (``None`` when none was run, as in v1), at plain play 0's seed. ``garbage_probes`` (v3) are the
    same probe at the seeds of the other plays of the first round (plays 1..k-1, plain and hinted
    share seeds): an environment whose outcome does not depend on the action (a seeded coin flip)
    wins some of them. v2 events are upcast with none."""

    TYPE: ClassVar[str] = "HintWritten"
    VERSION: ClassVar[int] = 3
    KEY_FIELD: ClassVar[str | None] = "env_id"
    env_id: str
    hint: str
    policy_version: str
    generation: Generation | None = None
    garbage_probe: GarbageProbe | None = None
    garbage_probes: list[GarbageProbe] = msgspec.field(default_factory=list)


#: why a play ended (``RolloutCompleted.end_reason``): the environment terminated or truncated
#: itself; the runner's turn budget ran out; the agent's reply was cut by its token limit (the
#: episode ends with reward 0, as in the SPADE release); the conversation no longer fits the
#: model's context window; a step timed out; the sandbox crashed; another error
END_REASONS = (
    "terminated", "truncated", "turn_limit", "agent_length", "context", "step_timeout", "sandbox_crash", "error",
)


class RolloutCompleted(EventPayload, frozen=True, kw_only=True):
    """One play of an environment, with everything the trainer needs.

    ``episode_reward`` (:func:`spade_engine.engine.regret.episode_reward`): the last step's reward clipped to [-1, 1] if the episode
    terminated, else 0. ``turns`` hold observations, actions, per-turn rewards and each turn's
    :class:`Generation` (token ids, behaviour log-probs, finish reason). ``step_timeout`` marks a
    step() that hit the sandbox's wall-clock limit; ``error`` says why a play ended abnormally.

    v2: ``round`` is 0 for an environment's first plays, r for its r-th repeated round
    (``loop.rounds``) or a level-replay round (:class:`EnvironmentReplayed`); ``index`` counts
    plays within a round. v1 events are upcast with ``round = 0``.
    v3: ``end_reason`` (one of :data:`END_REASONS`) says why the play ended at all; v2 events are
    upcast with a reason read from what they recorded.
    v4: events are small by construction (:mod:`spade_engine.engine.offload`): a long observation
    or action is a blob (``Turn.observation_ref``/``action_ref``, its start inline) and a
    generation with many token ids is one (``Generation.ref``, which v3 already allowed); v3
    events hold everything inline and read as they are.
    v5: ``wrong_answer`` is the replay of a won play of the first round with a deliberately wrong
    final answer (:class:`WrongAnswerReplay`), ``None`` for every other play (lost, later rounds)
    and in v4 events, which ran none.
    """

    TYPE: ClassVar[str] = "RolloutCompleted"
    VERSION: ClassVar[int] = 5
    KEY_FIELD: ClassVar[str | None] = "env_id"
    env_id: str
    play_id: str
    hinted: bool
    seed: int
    policy_version: str
    episode_reward: float
    turns: list[Turn] = msgspec.field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    step_timeout: bool = False
    error: str | None = None
    seconds: float = 0.0
    index: int = 0
    round: int = 0
    end_reason: str = ""
    wrong_answer: WrongAnswerReplay | None = None


class RegretEstimated(EventPayload, frozen=True, kw_only=True):
    """The plays of one round of an environment are in: the regret estimate and the designer's reward.

    ``plain_rewards``/``hinted_rewards`` and the win rates are this round's plays. ``regret`` =
    max(0, mean(hinted) - mean(plain)) of the latest round with hinted plays (matched timing: both
    measured in that round); ``win_rate_smoothed`` is the win signal (``win_signal``) of the plain
    plays of the last ``loop.rounds`` rounds pooled, and the band and plateau use it. ``designer_reward`` is the value of
    ``reward_variant`` (``blend`` by default) before the trainer's baseline; the trainer uses it
    only where ``designer_final`` (the environment's last designed round; replays never).
    ``baseline`` is the skill's slow EMA of smoothed win signals after this estimate
    (``learning_potential``'s baseline) and ``baseline_prev`` the event id of the estimate it
    continued (``None`` for a skill's first), so replay recomputes it exactly. ``rollout_ids``
    are the event ids of every play it was computed from.

    ``trivial``: a play-time garbage probe (HintWritten.garbage_probe, and from v4 on any of
    HintWritten.garbage_probes) won, so the environment rewards garbage after passing validation
    (or its outcome does not depend on the action at all); its ``designer_reward`` is then 0.
    ``garbage_reward`` is the first probe's episode reward (``None`` without a probe).

    v2 adds ``round``, ``win_rate_smoothed``, ``designer_final``, ``replay``, ``baseline``,
    ``baseline_prev``, ``trivial`` and ``garbage_reward``; v1 events are upcast as the only (final)
    round of their environment, not trivial.

    v3 adds ``win_signal`` (``reward.win_signal``: what ``win_rate_smoothed``, the band, the
    plateau and ``baseline`` measure: ``solved_share``, the share of solved plain plays, or
    ``mean_reward``, their mean episode reward with a play whose environment failed in a step
    counted -1), ``value`` (the value ``V`` the round's plain plays are compared with: the
    environment's previous smoothed win signal, for a first round its skill's slow EMA before it,
    for a skill's first environment the round's mean) and ``pvl`` (the positive value loss
    ``mean_k max(x_k - V, 0)`` of the round's plain play values, the level-replay ``pvl`` score);
    v2 events are upcast with ``solved_share`` (the only signal then) and no ``value``/``pvl``
    (level replay then scores ``pvl`` against the round's own mean, as v2 engines did).

    v4 adds ``garbage_episodes`` (how many play-time garbage episodes the environment had: one
    per seed of its first round's plays) and ``garbage_wins`` (how many of them won; ``trivial``
    is ``garbage_wins > 0``); v3 events are upcast from their single probe (one episode, won when
    ``trivial``).

    v5 adds ``wrong_answer_replays`` (how many of the plays it names carry a
    :class:`WrongAnswerReplay`: the won plays of the first round, replayed with a deliberately
    wrong final answer) and ``wrong_answer_wins`` (how many of those replays won as well). When
    more than half of them won, the outcome does not depend on the answer
    (:func:`spade_engine.engine.garbage.answer_ignored`): the environment is ``trivial`` and its
    designer reward is 0, as for a garbage win; ``trivial`` is ``garbage_wins > 0`` or that. v4
    events are upcast with no replays.
    """

    TYPE: ClassVar[str] = "RegretEstimated"
    VERSION: ClassVar[int] = 5
    KEY_FIELD: ClassVar[str | None] = "env_id"
    env_id: str
    skill: str
    plain_rewards: list[float]
    hinted_rewards: list[float]
    win_rate_plain: float
    win_rate_hinted: float
    regret: float
    designer_reward: float
    reward_variant: str = "blend"
    step_timeouts: int = 0
    policy_version: str = ""
    rollout_ids: list[str] = msgspec.field(default_factory=list)
    trivial: bool = False
    garbage_reward: float | None = None
    round: int = 0
    win_rate_smoothed: float | None = None
    designer_final: bool = True
    replay: bool = False
    baseline: float | None = None
    baseline_prev: str | None = None
    win_signal: str = "solved_share"
    value: float | None = None
    pvl: float | None = None
    garbage_episodes: int = 0
    garbage_wins: int = 0
    wrong_answer_replays: int = 0
    wrong_answer_wins: int = 0


class EnvironmentReplayed(EventPayload, frozen=True, kw_only=True):
    """Prioritised level replay chose an archived environment for the next curriculum slot.

    The choice is a pure function of the events before ``basis`` (a cursor: partition -> next
    offset), the run seed and ``slot`` (the curriculum position: new environments and replays
    together), so ``replay`` and a resumed run recompute it exactly
    (:mod:`spade_engine.engine.level_replay`). ``round`` is the environment's round these plays
    are. The score parts: ``score`` (``score_kind``: ``regret`` or ``pvl``, the positive value
    loss of its latest round), its ``rank`` among ``candidates`` environments (tied scores share
    the mean of their ranks), its ``staleness``
    (slots since it was last played), the rank weight ``score_weight`` and staleness weight
    ``staleness_weight`` they give, and ``probability``, the mixture
    (1 - rho) * score_weight + rho * staleness_weight it was drawn with; ``draw`` is the uniform
    draw that decided to replay (below ``replay.p``), ``reason`` a one-line account.
    """

    TYPE: ClassVar[str] = "EnvironmentReplayed"
    KEY_FIELD: ClassVar[str | None] = "env_id"
    env_id: str
    round: int
    slot: int
    score: float
    score_kind: str
    rank: float
    staleness: int
    score_weight: float
    staleness_weight: float
    probability: float
    candidates: int
    draw: float
    reason: str = ""
    basis: dict[str, int] = msgspec.field(default_factory=dict)
    policy_version: str = ""


class PolicyUpdated(EventPayload, frozen=True, kw_only=True):
    """The trainer wrote a new policy version (a safetensors checkpoint in the blob store).

    ``consumed`` maps each partition to the next offset after the last event this update used
    (the trainer's resume point); ``metrics`` are the update's losses and statistics;
    ``optimizer`` references the optimizer state and ``env_ids`` the groups consumed.
    ``adapter`` (v2), from a LoRA trainer: the adapter alone (safetensors, PEFT names), relative
    to the run's base weights, which is what an inference engine holding the base model (llama.cpp)
    loads to serve this version; v1 events are upcast with none. ``checkpoint`` (the merged
    weights) is None for the base weights, and for a LoRA version recorded as its adapter alone
    (``trainer.merged_weights = false``, the default under a llama.cpp policy).
    """

    TYPE: ClassVar[str] = "PolicyUpdated"
    VERSION: ClassVar[int] = 2
    version: str
    parent_version: str | None
    checkpoint: BlobRef | None
    step: int
    consumed: dict[str, int] = msgspec.field(default_factory=dict)
    metrics: dict[str, float] = msgspec.field(default_factory=dict)
    roles: list[str] = msgspec.field(default_factory=lambda: ["agent", "designer"])
    base_model: str = ""
    #: the optimizer state after this update (safetensors), so a restarted trainer resumes exactly
    optimizer: BlobRef | None = None
    #: the groups this update consumed (trained or skipped), in order: the environment id for an
    #: environment's first round, ``<env_id>@r<N>`` for its round N (repeated and replay rounds)
    env_ids: list[str] = msgspec.field(default_factory=list)
    #: the LoRA adapter of this version (v2), or ``None`` (a full fine-tune, or a v1 event)
    adapter: BlobRef | None = None


class PolicyLoaded(EventPayload, frozen=True, kw_only=True):
    """A process playing the run's policy switched to a version the trainer published (the engine
    before its next environment, a rollout worker before its next play): how the version was
    served and how long the switch took.

    ``served_as``: ``adapter`` (the LoRA adapter on the base weights, as llama.cpp serves it),
    ``checkpoint`` (merged weights copied in) or ``base`` (v0); ``seconds``: checking the blobs'
    digests, converting and loading; ``policy_kind``: the backend; ``producer_role``: who loaded it.
    """

    TYPE: ClassVar[str] = "PolicyLoaded"
    version: str
    seconds: float
    served_as: Literal["adapter", "checkpoint", "base"] = "checkpoint"
    policy_kind: str = ""
    producer_role: str = "engine"


class RunStopped(EventPayload, frozen=True, kw_only=True):
    """The run stopped (cleanly: max environments reached, interrupted, or failed)."""

    TYPE: ClassVar[str] = "RunStopped"
    reason: Literal["completed", "max_envs", "interrupted", "error"]
    detail: str = ""
    counts: dict[str, int] = msgspec.field(default_factory=dict)


class EvaluationCompleted(EventPayload, frozen=True, kw_only=True):
    """One task of a held-out evaluation suite was scored for one policy version.

    ``suite`` is ``reasoning-gym`` or ``archive:<run_id>``; ``task`` a reasoning-gym task name or,
    for an archive, a skill. ``items`` items were each answered ``k`` times (``temperature`` 0 =
    greedy, ``k`` = 1); ``correct`` counts answers scored 1.0 by the task's own verifier
    (reasoning-gym's ``score_answer``, or episode reward 1.0 for an archived environment) out of
    ``items * k``, so ``accuracy`` is avg@k; ``mean_score`` averages the raw scores (partial
    credit included). ``ci_low``/``ci_high`` is the 95% interval named by ``ci_method``.
    ``item_seeds`` are the seeds the items were generated with (one per item) or, for an
    archive, the reset seeds of each item's ``k`` plays (item-major), all in the evaluation seed
    range named by ``seed_rule`` (never used by training sources); ``item_correct`` holds the
    correct answers per item (paired comparisons between versions) and ``item_ids`` the items
    (``task/seed``, or env ids). ``scoring_errors`` counts answers whose verifier raised, or
    archive plays that ended abnormally (step timeout, sandbox crash). ``checkpoint_sha256`` is
    ``None`` for base weights (the adapter's for a version recorded as its LoRA adapter alone). Keyed by run id; ``evaluation_id`` groups the tasks of one run of
    ``spade-engine eval``.
    """

    TYPE: ClassVar[str] = "EvaluationCompleted"
    evaluation_id: str
    suite: str
    task: str
    items: int
    seed: int
    k: int
    temperature: float
    greedy: bool
    correct: int
    accuracy: float
    ci_low: float
    ci_high: float
    policy_version: str
    checkpoint_sha256: str | None
    model: str
    item_seeds: list[int]
    mean_score: float = 0.0
    ci_method: str = "wilson-95"
    item_correct: list[int] = msgspec.field(default_factory=list)
    item_ids: list[str] = msgspec.field(default_factory=list)
    seed_rule: str = ""
    policy_run_id: str | None = None
    generator: str = ""
    task_config: dict[str, Any] = msgspec.field(default_factory=dict)
    prompt_version: str = ""
    max_new_tokens: int | None = None
    scoring_errors: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


EVENT_TYPES: dict[str, type[EventPayload]] = {
    cls.TYPE: cls
    for cls in (
        RunStarted,
        EnvironmentProposed,
        EnvironmentValidated,
        HintWritten,
        RolloutCompleted,
        RegretEstimated,
        EnvironmentReplayed,
        PolicyUpdated,
        PolicyLoaded,
        RunStopped,
        EvaluationCompleted,
    )
}

# ----------------------------------------------------------------------------------------------
# Upcasting: (type, from_version) -> function turning a payload dict of that version into the
# next version. Chains are applied until the current VERSION is reached.

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def register_upcaster(event_type: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Decorator registering an upcaster from ``from_version`` to ``from_version + 1``."""

    def deco(fn: Upcaster) -> Upcaster:
        UPCASTERS[(event_type, from_version)] = fn
        return fn

    return deco


#: the fixed reset seeds and probe actions every validation used before EnvironmentValidated v2
V1_VALIDATION_SEEDS: tuple[int, ...] = (11, 23)
V1_PROBE_ACTIONS: tuple[str, ...] = (
    "",
    "garbage",
    "\\boxed{}",
    "\\boxed{__spade_probe__}",
    "\\boxed{",
    "}}}{{{ \\boxed{\\boxed{}}",
    "x" * 4000,
    "\u00fc\u00f1\u00ee\u00e7\u00f8d\u00e9 \U0001f642 \\boxed{\u2603}",
)


@register_upcaster("EnvironmentValidated", 1)
def _validated_v1_to_v2(p: dict[str, Any]) -> dict[str, Any]:
    """v1 validations drew nothing: they all used the fixed seeds and probes (none at all when
    the validator never ran, for a completion without code)."""
    ran = p.get("failed_check") != "extract" and p.get("error_kind") != "no_code"
    p.setdefault("validation_seeds", list(V1_VALIDATION_SEEDS) if ran else [])
    p.setdefault("probe_actions", list(V1_PROBE_ACTIONS) if ran else [])
    return p


@register_upcaster("EnvironmentProposed", 1)
def _proposed_v1_to_v2(p: dict[str, Any]) -> dict[str, Any]:
    """v1 proposals did not record their designer format (a repair reads it from the prompt)."""
    p.setdefault("designer_format", None)
    return p


@register_upcaster("HintWritten", 1)
def _hint_v1_to_v2(p: dict[str, Any]) -> dict[str, Any]:
    """v1 stages ran no garbage probe."""
    p.setdefault("garbage_probe", None)
    return p


@register_upcaster("PolicyUpdated", 1)
def _policy_updated_v1_to_v2(p: dict[str, Any]) -> dict[str, Any]:
    """v1 trainers wrote no adapter blob (LoRA versions held merged weights only)."""
    p.setdefault("adapter", None)
    return p


@register_upcaster("HintWritten", 2)
def _hint_v2_to_v3(p: dict[str, Any]) -> dict[str, Any]:
    """v2 stages probed at plain play 0's seed only."""
    p.setdefault("garbage_probes", [])
    return p


def upcast(event_type: str, version: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Apply registered upcasters until ``payload`` reaches the type's current version."""
    cls = EVENT_TYPES.get(event_type)
    if cls is None:
        raise UnknownEventType(f"unknown event type {event_type!r}")
    if version > cls.VERSION:
        raise FutureSchemaVersion(
            f"{event_type} schema version {version} is newer than this engine reads ({cls.VERSION})"
        )
    while version < cls.VERSION:
        fn = UPCASTERS.get((event_type, version))
        if fn is None:
            raise MalformedEvent(f"no upcaster for {event_type} v{version} -> v{version + 1}")
        payload = fn(dict(payload))
        version += 1
    return payload


@register_upcaster("RolloutCompleted", 1)
def _rollout_v1_to_v2(payload: dict[str, Any]) -> dict[str, Any]:
    """v1 plays were all of an environment's first (only) round."""
    payload.setdefault("round", 0)
    return payload


@register_upcaster("RegretEstimated", 1)
def _regret_v1_to_v2(payload: dict[str, Any]) -> dict[str, Any]:
    """A v1 estimate was its environment's only round: final, not a replay, smoothed = plain, and
    not found trivial (v1 ran no garbage probe). v1's ``learning_potential`` was ``4p(1 - p)``, now the ``outcome_variance`` variant."""
    if payload.get("reward_variant") == "learning_potential":
        payload["reward_variant"] = "outcome_variance"
    payload.setdefault("round", 0)
    payload.setdefault("win_rate_smoothed", payload.get("win_rate_plain"))
    payload.setdefault("designer_final", True)
    payload.setdefault("replay", False)
    payload.setdefault("trivial", False)  # v1 ran no garbage probe
    payload.setdefault("garbage_reward", None)
    return payload


@register_upcaster("RegretEstimated", 2)
def _regret_v2_to_v3(payload: dict[str, Any]) -> dict[str, Any]:
    """v2 estimates measured the share of solved plays and recorded no value or pvl."""
    payload.setdefault("win_signal", "solved_share")
    payload.setdefault("value", None)
    payload.setdefault("pvl", None)
    return payload


@register_upcaster("RegretEstimated", 3)
def _regret_v3_to_v4(payload: dict[str, Any]) -> dict[str, Any]:
    """v3 estimates read one garbage probe at most: one episode when it ran, won when trivial."""
    payload.setdefault("garbage_episodes", 0 if payload.get("garbage_reward") is None else 1)
    payload.setdefault("garbage_wins", 1 if payload.get("trivial") else 0)
    return payload


# v4 estimates read no wrong-answer replays (v4 engines ran none)
register_upcaster("RegretEstimated", 4)(lambda p: {"wrong_answer_replays": 0, "wrong_answer_wins": 0, **p})

@register_upcaster("RolloutCompleted", 2)
def _rollout_v2_to_v3(payload: dict[str, Any]) -> dict[str, Any]:
    """v2 -> v3: ``end_reason`` from what v2 recorded (a play cut by the runner's turn limit was
    recorded as truncated, so it reads as ``truncated``)."""
    error = payload.get("error") or ""
    if payload.get("terminated"):
        reason = "terminated"
    elif payload.get("step_timeout"):
        reason = "step_timeout"
    elif error.startswith("sandbox crash"):
        reason = "sandbox_crash"
    elif error:
        reason = "error"
    else:
        reason = "truncated"
    payload["end_reason"] = reason
    return payload


@register_upcaster("RolloutCompleted", 3)
def _rollout_v3_to_v4(payload: dict[str, Any]) -> dict[str, Any]:
    """v3 plays hold every text inline: no blob references."""
    return payload


# v4 engines replayed no play with a wrong answer
register_upcaster("RolloutCompleted", 4)(lambda p: {"wrong_answer": None, **p})


_decoders: dict[str, msgspec.json.Decoder] = {}


def decode_payload(event_type: str, version: int, payload: dict[str, Any]) -> EventPayload:
    """Typed payload from a recorded payload dict (upcast first when older)."""
    cls = EVENT_TYPES.get(event_type)
    if cls is None:
        raise UnknownEventType(f"unknown event type {event_type!r}")
    payload = upcast(event_type, version, payload)
    try:
        return msgspec.convert(payload, cls, strict=False)
    except msgspec.ValidationError as exc:
        raise MalformedEvent(f"{event_type} v{version}: {exc}") from None


def payload_to_builtins(payload: EventPayload) -> dict[str, Any]:
    """The payload as JSON builtins (what is stored in the envelope)."""
    return msgspec.to_builtins(payload)
