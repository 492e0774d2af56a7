"""Running a policy on held-out tasks and turning the tallies into ``EvaluationCompleted`` events.

:func:`evaluate` takes any :class:`~spade_engine.policy.protocol.Policy` and the tasks of
:mod:`.suites`:

* **reasoning-gym** items are single-turn: the question is the user message after
  :data:`EVAL_SYSTEM_PROMPT` (or another of :data:`EVAL_PROMPTS`); requests for every item and sample of every such task are sent in
  batches of ``batch_size``; each reply's answer (:func:`~.scoring.extract_answer`) is scored by
  the task's own verifier. Each request carries ``context["eval"]`` (suite, task, index, item
  seed, sample, and the item's oracle ``answer``): LLM backends ignore it, scripted test
  policies read it.
* **archive** items are played through the sandbox pool with the engine's episode runner
  (:func:`~spade_engine.engine.rollouts.play_episodes`): ``k`` plain plays per environment, the
  first reset with the item's evaluation seed and the others with seeds derived from it
  (:func:`play_seeds`), at most ``concurrency`` at once (one generate call per turn across
  them); an episode reward of 1.0 is a solve.

Greedy decoding is ``temperature`` 0 with ``k`` 1; avg@k samples ``k`` answers per item at the
given temperature (sample ``j`` of an item asks for seed ``derive_seed(item_seed, "sample", j)``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..policy.protocol import Policy, PolicyRequest, Sample
from ..policy.request_context import EvalItemFacts, PlayContext
from ..engine.rollouts import AGENT_SYSTEM_PROMPT, PlaySpec, play_episodes
from ..envsources.rgpool import INSTRUCTION as POOL_INSTRUCTION
from ..engine.seeds import derive_seed
from ..errors import SpadeError
from ..events.catalogue import EvaluationCompleted
from .scoring import CI_METHOD, TaskScore, extract_answer, score_reasoning_gym
from .seeds import SEED_RULE, eval_seed
from .suites import EvalTask

__all__ = [
    "EVAL_PROMPTS",
    "EVAL_SYSTEM_PROMPT",
    "EVAL_USER_SUFFIXES",
    "eval_messages",
    "PROMPT_VERSION",
    "EvalSettings",
    "PolicyInfo",
    "TaskResult",
    "EvaluationError",
    "evaluate",
    "policy_info",
    "play_seeds",
]

#: The system prompts of reasoning-gym items by name (``eval --prompt``), recorded with each result
#: as ``prompt_version``: changes to a prompt or the answer extraction get a new name. ``boxed-v1``
#: (the first, the default) puts a placeholder inside the braces; ``boxed-v2`` asks for an empty box
#: in the wording Qwen models are tuned on, as the agent's prompt does. Measured with the 0.5B
#: (greedy, 384 tokens, 18 items of syllogism, letter_counting, basic_arithmetic) v2 scored 0/18
#: against v1's 2/18 with 52% more tokens, so v1 stays the default (and past results comparable).
EVAL_PROMPTS = {
    "boxed-v1": (
        "Solve the problem. Think briefly, then give only your final answer wrapped as "
        "\\boxed{<answer>}. Follow the answer format the problem asks for."
    ),
    "boxed-v2": (
        "Please reason step by step, and put your final answer within \\boxed{}. Follow the answer "
        "format the problem asks for."
    ),
    # asks exactly as the agent is asked when it plays an item of a fixed pool (``--env-source
    # reasoning-gym:...``): its system prompt, the question followed by the pool's instruction
    # (EVAL_USER_SUFFIXES). A learning run that trains on pool items is evaluated in the form it
    # trained on (``bench/learning.py``); only the items differ (the evaluation seed range)
    "agent-v1": AGENT_SYSTEM_PROMPT,
    # the agent's system prompt and the bare question: what two arms trained on different user
    # messages share (``bench/selfplay_vs_fixed.py``: a designer's puzzle ends "Please reason step
    # by step...", a pool item ends with the pool's instruction), so neither is asked its own way
    "agent-plain-v1": AGENT_SYSTEM_PROMPT,
}
#: what follows the question in the user message, by prompt name (none for the others)
EVAL_USER_SUFFIXES = {"agent-v1": "\n\n" + POOL_INSTRUCTION}
#: the default prompt's name
PROMPT_VERSION = "boxed-v1"
EVAL_SYSTEM_PROMPT = EVAL_PROMPTS[PROMPT_VERSION]


def eval_messages(prompt: str, question: str) -> list[dict[str, str]]:
    """The chat messages of one reasoning-gym item under the named prompt (:data:`EVAL_PROMPTS`)."""
    return [
        {"role": "system", "content": EVAL_PROMPTS[prompt]},
        {"role": "user", "content": question.rstrip() + EVAL_USER_SUFFIXES[prompt] if prompt in EVAL_USER_SUFFIXES else question},
    ]

Progress = Callable[[str, int, int], None]
"""``(suite/task, items done, items in task)`` after each batch (reasoning-gym) or environment (archive)."""


class EvaluationError(SpadeError):
    """The policy or the sandbox could not complete an evaluation."""


@dataclass(frozen=True)
class EvalSettings:
    """How answers are sampled: ``k`` per item at ``temperature`` (0 = greedy), in batches."""

    k: int = 1
    temperature: float = 0.0
    max_new_tokens: int | None = None
    batch_size: int = 16
    #: the name of the system prompt of reasoning-gym items (:data:`EVAL_PROMPTS`)
    prompt: str = PROMPT_VERSION

    def __post_init__(self) -> None:
        if self.prompt not in EVAL_PROMPTS:
            raise EvaluationError(f"unknown evaluation prompt {self.prompt!r}: one of {', '.join(EVAL_PROMPTS)}")
        if self.k < 1:
            raise EvaluationError(f"samples per item must be at least 1, not {self.k}")
        if self.temperature < 0:
            raise EvaluationError(f"temperature must be >= 0, not {self.temperature}")
        if self.k > 1 and self.temperature == 0:
            raise EvaluationError("avg@k with k > 1 needs sampling: give a temperature > 0 (greedy answers repeat)")
        if self.batch_size < 1:
            raise EvaluationError(f"batch size must be at least 1, not {self.batch_size}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class PolicyInfo:
    """What is recorded about the evaluated policy."""

    version: str
    model: str
    checkpoint_sha256: str | None = None
    run_id: str | None = None


def policy_info(policy: Policy, *, checkpoint_sha256: str | None = None, run_id: str | None = None) -> PolicyInfo:
    desc = {}
    try:
        desc = dict(policy.describe())
    except Exception:  # noqa: BLE001 - describe() is informational
        pass
    model = str(desc.get("model") or desc.get("kind") or policy.kind)
    return PolicyInfo(version=str(policy.version), model=model, checkpoint_sha256=checkpoint_sha256, run_id=run_id)


@dataclass
class TaskResult:
    """One task's tallies, ready to become an :class:`EvaluationCompleted`."""

    task: EvalTask
    score: TaskScore
    seconds: float = 0.0
    #: the seeds used, when not one per item (archive: each item's k play seeds, item-major)
    seeds: list[int] | None = None

    def event(self, *, evaluation_id: str, policy: PolicyInfo, settings: EvalSettings) -> EvaluationCompleted:
        lo, hi = self.score.interval()
        return EvaluationCompleted(
            evaluation_id=evaluation_id,
            suite=self.task.suite,
            task=self.task.task,
            items=self.score.items,
            seed=self.task.seed,
            k=settings.k,
            temperature=float(settings.temperature),
            greedy=settings.greedy,
            correct=self.score.correct,
            accuracy=round(self.score.accuracy, 12),
            ci_low=round(lo, 12),
            ci_high=round(hi, 12),
            policy_version=policy.version,
            checkpoint_sha256=policy.checkpoint_sha256,
            model=policy.model,
            item_seeds=list(self.seeds) if self.seeds is not None else [it.seed for it in self.task.items],
            mean_score=round(self.score.mean_score, 12),
            ci_method=CI_METHOD,
            item_correct=list(self.score.item_correct),
            item_ids=[it.item_id for it in self.task.items],
            seed_rule=SEED_RULE,
            policy_run_id=policy.run_id,
            generator=self.task.generator,
            task_config=dict(self.task.config),
            prompt_version=settings.prompt,
            max_new_tokens=settings.max_new_tokens,
            scoring_errors=self.score.scoring_errors,
            completion_tokens=self.score.completion_tokens,
            seconds=round(self.seconds, 3),
        )


def _generate(policy: Policy, requests: list[PolicyRequest]) -> list[Sample]:
    samples = policy.generate(requests)
    if len(samples) != len(requests):
        raise EvaluationError(f"the policy returned {len(samples)} samples for {len(requests)} requests")
    return samples


def _eval_context(task: EvalTask, index: int, seed: int, sample: int | None, answer: Any, *,
                  skill: str = "", difficulty: float | None = None) -> PlayContext:
    """The facts of an evaluation request: the item, and for an archived environment its skill and
    difficulty (a reasoning-gym item has no skill of the engine's)."""
    facts = EvalItemFacts(suite=task.suite, task=task.task, index=index, seed=seed, sample=sample, answer=answer)
    return PlayContext(skill=skill, difficulty=0.5 if difficulty is None else difficulty, eval=facts)


def _reasoning_gym(
    policy: Policy, tasks: Sequence[EvalTask], settings: EvalSettings, results: dict[int, TaskResult], progress: Progress,
    finished: Callable[[int], None] = lambda ti: None,
) -> None:
    jobs = [(ti, item, j) for ti, task in enumerate(tasks) for item in task.items for j in range(settings.k)]
    done_items: dict[int, set[int]] = {ti: set() for ti in range(len(tasks))}
    reported: set[int] = set()
    for ti, task in enumerate(tasks):
        if not task.items:
            reported.add(ti)
            finished(ti)
    for start in range(0, len(jobs), settings.batch_size):
        chunk = jobs[start : start + settings.batch_size]
        requests = [
            PolicyRequest(
                role="agent",
                messages=eval_messages(settings.prompt, item.question),
                context=_eval_context(tasks[ti], item.index, item.seed, j, item.answer),
                seed=derive_seed(item.seed, "sample", j),  # a sampling seed: no item is generated from it
                max_new_tokens=settings.max_new_tokens,
                temperature=settings.temperature,
            )
            for ti, item, j in chunk
        ]
        t0 = time.perf_counter()
        samples = _generate(policy, requests)
        dt = time.perf_counter() - t0
        per_task: dict[int, int] = {}
        for (ti, item, j), sample in zip(chunk, samples):
            task = tasks[ti]
            score, failed = score_reasoning_gym(task.dataset, extract_answer(sample.text), item.entry)
            results[ti].score.add(item.index, score, verifier_failed=failed, tokens=len(sample.completion_token_ids))
            per_task[ti] = per_task.get(ti, 0) + 1
            if j == settings.k - 1:
                done_items[ti].add(item.index)
        for ti, n in per_task.items():  # generation time shared by the tasks in the batch
            results[ti].seconds += dt * n / len(chunk)
            progress(tasks[ti].label, len(done_items[ti]), len(tasks[ti].items))
        for ti in per_task:
            if len(done_items[ti]) == len(tasks[ti].items) and ti not in reported:
                reported.add(ti)
                finished(ti)


class _Sampling:
    """The policy with the evaluation's temperature, token budget and ``eval`` context applied to
    each request the episode runner makes."""

    def __init__(self, policy: Policy, settings: EvalSettings, eval_context: PlayContext):
        self._policy = policy
        self._settings = settings
        self._context = eval_context
        self.kind = policy.kind
        self.completion_tokens = 0

    @property
    def version(self) -> str:
        return self._policy.version

    def generate(self, requests: Sequence[PolicyRequest]) -> list[Sample]:
        reqs = [
            dataclasses.replace(
                r,
                # the play's own facts (seed, turn, observation) with the evaluation item's
                context=dataclasses.replace(r.context, eval=self._context.eval) if isinstance(r.context, PlayContext)
                else self._context,
                temperature=self._settings.temperature,
                max_new_tokens=self._settings.max_new_tokens if self._settings.max_new_tokens else r.max_new_tokens,
            )
            for r in requests
        ]
        samples = _generate(self._policy, reqs)
        self.completion_tokens += sum(len(s.completion_token_ids) for s in samples)
        return samples

    def load_version(self, version: str, checkpoint: str | None, *, adapter: str | None = None) -> None:  # pragma: no cover - protocol
        self._policy.load_version(version, checkpoint, adapter=adapter)

    def describe(self) -> dict[str, Any]:  # pragma: no cover - protocol
        return self._policy.describe()


def play_seeds(item_seed: int, k: int) -> list[int]:
    """Reset seeds of an archived environment's k plays: the item's seed, then derived ones (all
    evaluation seeds), so sampled plays differ even when they run in separate groups."""
    return [item_seed] + [eval_seed("play", item_seed, j) for j in range(1, k)]


def _archive(
    policy: Policy, task: EvalTask, settings: EvalSettings, result: TaskResult, progress: Progress, pool: Any,
    *, step_timeout_s: float | None, concurrency: int,
) -> None:
    from ..sandbox import SandboxCrash, SandboxError, StepTimeout

    for item in task.items:
        t0 = time.perf_counter()
        # the play index and reset seed are in the runner's own context (play_seed); no oracle answer
        sampler = _Sampling(policy, settings, _eval_context(task, item.index, item.seed, None, None))
        code = item.code

        def open_session(code: str = code) -> Any:
            # the environment's own max_turns capped at the turn limit, as in the run that made it
            return pool.open_session(code, step_timeout_s=step_timeout_s, max_turns=task.turn_limit)

        seeds = play_seeds(item.seed, settings.k)
        result.seeds = (result.seeds or []) + seeds
        plays = play_episodes(
            env_id=item.item_id,
            specs=[PlaySpec(index=j, hinted=False, seed=seeds[j]) for j in range(settings.k)],
            open_session=open_session,
            generate=sampler.generate,
            policy_version=sampler.version,
            hint=None,
            turn_limit=task.turn_limit,
            context=_eval_context(task, item.index, item.seed, None, None, skill=task.task, difficulty=item.difficulty),
            timeout_errors=(StepTimeout,),
            crash_errors=(SandboxCrash, SandboxError),
            concurrency=max(1, concurrency),
        )
        if len(plays) != settings.k:
            raise EvaluationError(f"{item.item_id}: {len(plays)} of {settings.k} plays finished")
        for play in plays:
            reward = float(play.episode_reward)
            result.score.add(item.index, min(1.0, max(0.0, reward)), verifier_failed=play.error is not None)
        result.score.completion_tokens += sampler.completion_tokens
        result.seconds += time.perf_counter() - t0
        progress(task.label, item.index + 1, len(task.items))


def evaluate(
    policy: Policy,
    tasks: Sequence[EvalTask],
    settings: EvalSettings,
    *,
    pool: Any = None,
    step_timeout_s: float | None = None,
    concurrency: int = 1,
    on_progress: Progress | None = None,
    on_task_done: Callable[[int, TaskResult], None] | None = None,
) -> list[TaskResult]:
    """Score ``policy`` on every task (in order); archive tasks need a sandbox ``pool``.
    ``on_task_done(index, result)`` is called the moment a task's last item is scored (so a
    caller can record it before the other tasks finish)."""
    progress: Progress = on_progress or (lambda task, done, total: None)
    done: Callable[[int, TaskResult], None] = on_task_done or (lambda i, r: None)
    results = {i: TaskResult(task=t, score=TaskScore(k=settings.k)) for i, t in enumerate(tasks)}
    for i, t in enumerate(tasks):  # every item has a row, even one whose samples all fail
        results[i].score.item_correct = [0] * len(t.items)
        results[i].score.item_score = [0.0] * len(t.items)
        progress(t.label, 0, len(t.items))
    rg = [i for i, t in enumerate(tasks) if t.dataset is not None]
    if rg:
        sub = {j: results[i] for j, i in enumerate(rg)}
        _reasoning_gym(policy, [tasks[i] for i in rg], settings, sub, progress, lambda j: done(rg[j], results[rg[j]]))
    for i, t in enumerate(tasks):
        if t.dataset is not None:
            continue
        if pool is None:
            raise EvaluationError(f"task {t.task} of {t.suite} plays environments and needs a sandbox pool")
        _archive(policy, t, settings, results[i], progress, pool, step_timeout_s=step_timeout_s, concurrency=concurrency)
        done(i, results[i])
    return [results[i] for i in range(len(tasks))]
