"""The episode runner: plays one environment through a sandbox session with the agent policy.

An episode: ``reset(seed)`` in the sandbox; the first observation (with the privileged hint
appended for hinted plays) becomes the first user message; each turn the agent answers, the
``\\boxed{...}`` action is parsed from its reply and sent to ``step()``; the episode ends when the
environment terminates or truncates, at the turn budget, or when a step times out or the sandbox
crashes. Episode reward = last step reward clipped to [-1, 1] if terminated, else 0. An action is
cut to the sandbox's action limit before it is sent, and every recorded text is bounded
(:mod:`.bounds`) before the play is handed over for recording.

Two ends come from the agent's side, as in the SPADE release: a reply cut by the agent's token
limit (finish reason ``length``) is recorded as a turn but never sent to ``step()``, and the
episode ends unterminated (reward 0, ``end_reason="agent_length"``); a conversation that no
longer fits the model's context window (finish reason ``context``) ends the episode cleanly
(``end_reason="context"``; a reply the window cut is recorded like a cut one). Every play records
its :data:`~spade_engine.events.catalogue.END_REASONS` entry.

Plays of one environment run in lockstep (one batched ``generate`` per turn across the plays that
are still going), so batched LLM backends are used efficiently, and their sandbox calls (open and
reset, each turn's step, close, the after-play check) run at once on the pool's workers
(:mod:`.at_once`); plays are handed over in play order whichever finished first.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..events.catalogue import RolloutCompleted, Turn
from ..policy.protocol import PolicyRequest, Sample
from ..policy.request_context import PlayContext
from ..sandbox.limits import MAX_ACTION_CHARS
from .at_once import at_once
from .bounds import bound_rollout
from .regret import episode_reward

__all__ = [
    "AGENT_SYSTEM_PROMPT",
    "HINT_PREFIX",
    "parse_boxed",
    "to_action",
    "first_user_message",
    "Session",
    "PlaySpec",
    "play_episodes",
]

#: No placeholder inside the braces: with ``\\boxed{<action>}`` the 0.5B catalogue model wrote
#: ``<action>...</action>`` tags in 5 of 5 puzzle replies and with ``\\boxed{answer}`` it wrote the
#: word "answer" (``bench/agent.py`` measures it); the wording is the one Qwen models are tuned on.
AGENT_SYSTEM_PROMPT = (
    "You are playing an interactive text environment. Each turn you see an observation. Please "
    "reason step by step, and put your final answer or your one action within \\boxed{}. The "
    "environment only reads the last \\boxed{} in your reply."
)
HINT_PREFIX = "\n\nHint: "

#: linear: a literal, then a run of white space that ends at the brace (runs after different
#: ``\\boxed`` are disjoint)
_BOXED = re.compile(r"\\boxed\s*\{")
_BRACE = re.compile(r"[{}]")


def parse_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` in ``text`` (nested braces allowed), else ``None``.

    "Last" is the complete one that starts last (an inner box of the last outer one wins). One
    pass pairs every brace with a stack (a box's closing brace is the one that pairs with its
    opening brace), so the time is linear in the reply: counting depth forward from each box was
    quadratic on a reply of thousands of unclosed boxes (model text, in the engine's process)."""
    opens = {m.end() - 1 for m in _BOXED.finditer(text)}  # each box's opening brace
    if not opens:
        return None
    stack: list[int] = []
    best = -1
    last = None
    for m in _BRACE.finditer(text):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            start = stack.pop()
            if start in opens and start > best:
                best, last = start, text[start + 1 : m.start()].strip()
    return last


def to_action(reply: str) -> str:
    """The action sent to ``step()``: ``\\boxed{content}`` when the reply has one, else the raw
    reply (the environment decides what to do with it)."""
    content = parse_boxed(reply)
    return f"\\boxed{{{content}}}" if content is not None else reply.strip()


def first_user_message(observation: str, hint: str | None) -> str:
    """The first observation, with the privileged hint appended for hinted plays."""
    return observation + (HINT_PREFIX + hint if hint else "")


class Session(Protocol):
    """What the runner needs from a sandbox session (see ``SandboxPool.open_session``)."""

    def reset(self, seed: int | None = None) -> tuple[str, dict]: ...

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]: ...


SessionFactory = Callable[[], Any]
"""Returns a context manager yielding a :class:`Session` on the environment being played."""


@dataclass(frozen=True)
class PlaySpec:
    """One play to run: which index, hinted or not, which seed."""

    index: int
    hinted: bool
    seed: int


@dataclass
class _Episode:
    spec: PlaySpec
    cm: Any = None
    session: Any = None
    messages: list[dict[str, str]] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    last_obs: str = ""
    terminated: bool = False
    truncated: bool = False
    step_timeout: bool = False
    error: str | None = None
    end_reason: str = ""
    done: bool = False
    started: float = 0.0
    seconds: float = 0.0
    sandbox_seconds: float = 0.0


def _close(ep: _Episode) -> None:
    if ep.cm is not None:
        try:
            ep.cm.__exit__(None, None, None)
        except Exception:  # noqa: BLE001 - a broken session must not stop the other plays
            pass
        ep.cm = None


@dataclass(frozen=True)
class _Stepped:
    """What one ``step()`` call gave: (observation, reward, terminated, truncated), or the error
    it raised, and how long it took."""

    result: tuple[str, float, bool, bool] = ("", 0.0, False, False)
    error: Exception | None = None
    seconds: float = 0.0


def _after(after_play: Callable[[RolloutCompleted], RolloutCompleted], ep: _Episode, payload: RolloutCompleted) -> RolloutCompleted:
    """``after_play(payload)``, its time added to the play's sandbox seconds."""
    t0 = time.perf_counter()
    try:
        return after_play(payload)
    finally:
        ep.sandbox_seconds += time.perf_counter() - t0


def _step(ep: _Episode, action: str) -> _Stepped:
    t0 = time.perf_counter()
    try:
        obs, reward, term, trunc, _info = ep.session.step(action)
    except Exception as exc:  # noqa: BLE001 - recorded as the play's end
        return _Stepped(error=exc, seconds=time.perf_counter() - t0)
    return _Stepped(result=(obs, reward, term, trunc), seconds=time.perf_counter() - t0)


def play_episodes(
    *,
    concurrency: int | None = None,
    env_id: str,
    specs: Sequence[PlaySpec],
    open_session: SessionFactory,
    generate: Callable[[list[PolicyRequest]], list[Sample]],
    policy_version: str,
    hint: str | None,
    turn_limit: int,
    context: PlayContext | None = None,
    timeout_errors: tuple[type[BaseException], ...] = (),
    crash_errors: tuple[type[BaseException], ...] = (),
    on_done: Callable[[RolloutCompleted, float], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    settings: Mapping[str, Any] | None = None,
    system_prompt: str | None = None,
    after_play: Callable[[RolloutCompleted], RolloutCompleted] | None = None,
) -> list[RolloutCompleted]:
    """Run ``specs`` in lockstep and return one RolloutCompleted payload per finished play.

    ``context`` holds the environment's facts (skill, difficulty, an evaluation item) each turn's
    request carries, with the play's own (seed, hint, turn, observation) filled in.
    ``settings`` are the agent's generation settings, passed on every request
    (``max_new_tokens``, ``temperature``, ``top_p``, ``stop``, ``enable_thinking``).
    ``system_prompt`` replaces :data:`AGENT_SYSTEM_PROMPT` (``bench/agent.py`` compares prompts).

    At most ``concurrency`` sessions are open at once (groups run one after the other).

    ``after_play(payload)`` gives what is handed on for each finished play (the play stage
    replays won plays with a wrong answer there); plays that end in the same turn go through it
    at once. ``on_done(payload, sandbox_seconds)`` is then called for each, in play order (the
    loop appends it to the log right away); its sandbox seconds include ``after_play``'s time. If ``should_stop()`` turns true, plays not finished yet are
    abandoned (no event): a resumed run plays them again from the start.
    """
    if concurrency and len(specs) > concurrency:
        out: list[RolloutCompleted] = []
        for i in range(0, len(specs), concurrency):
            if should_stop():
                break
            out.extend(
                play_episodes(
                    env_id=env_id, specs=specs[i : i + concurrency], open_session=open_session, generate=generate,
                    policy_version=policy_version,
                    hint=hint, turn_limit=turn_limit, context=context, timeout_errors=timeout_errors,
                    crash_errors=crash_errors, on_done=on_done, should_stop=should_stop, settings=settings,
                    system_prompt=system_prompt, after_play=after_play,
                )
            )
        return out
    plays = _Lockstep(
        env_id=env_id, specs=specs, policy_version=policy_version, hint=hint,
        context=context if context is not None else PlayContext(skill="", difficulty=0.5),
        timeout_errors=timeout_errors, crash_errors=crash_errors, on_done=on_done, settings=dict(settings or {}),
        system_prompt=AGENT_SYSTEM_PROMPT if system_prompt is None else system_prompt, after_play=after_play,
    )
    try:
        plays.open_all(open_session)
        plays.flush()
        for turn in range(turn_limit):
            live = plays.live()
            if not live or should_stop():
                break
            plays.take_turns(live, generate(plays.requests(live, turn)))
            plays.flush()
        if not should_stop():
            plays.end_at_turn_limit()
            plays.flush()
    finally:
        plays.close()
    return plays.results


class _Lockstep:
    """The plays of one :func:`play_episodes` call: opening their sessions, the requests of a
    turn, what a reply does to its play, and each finished play's RolloutCompleted."""

    def __init__(
        self, *, env_id: str, specs: Sequence[PlaySpec], policy_version: str, hint: str | None, context: PlayContext,
        timeout_errors: tuple[type[BaseException], ...], crash_errors: tuple[type[BaseException], ...],
        on_done: Callable[[RolloutCompleted, float], None] | None, settings: dict[str, Any], system_prompt: str,
        after_play: Callable[[RolloutCompleted], RolloutCompleted] | None = None,
    ):
        self.env_id, self.policy_version, self.hint, self.context = env_id, policy_version, hint, context
        self.timeout_errors, self.crash_errors, self.on_done = timeout_errors, crash_errors, on_done
        self.settings, self.system_prompt = settings, system_prompt
        self.eps = [_Episode(spec=s) for s in specs]
        self.after_play = after_play
        self.results: list[RolloutCompleted] = []
        self.pending: list[_Episode] = []  # ended, not yet handed over (:meth:`flush`)

    def open_all(self, open_session: SessionFactory) -> None:
        """Open and reset every play, all at once (:func:`.at_once`); one that fails is finished
        with its error (in play order, here)."""

        def open_one(ep: _Episode) -> Exception | None:
            ep.started = t0 = time.perf_counter()
            try:
                ep.cm = open_session()
                ep.session = ep.cm.__enter__()
                obs, _info = ep.session.reset(seed=ep.spec.seed)
            except Exception as exc:  # noqa: BLE001
                return exc
            finally:
                ep.sandbox_seconds += time.perf_counter() - t0
            ep.last_obs = str(obs)
            return None

        errors = at_once([functools.partial(open_one, ep) for ep in self.eps], len(self.eps))
        for ep, exc in zip(self.eps, errors):
            if exc is not None:
                self.fail(ep, exc)
                continue
            ep.messages = [
                {"role": "system", "content": self.system_prompt},
                {"role": "user", "content": first_user_message(ep.last_obs, self.hint if ep.spec.hinted else None)},
            ]

    def live(self) -> list[_Episode]:
        return [ep for ep in self.eps if not ep.done]

    def requests(self, live: list[_Episode], turn: int) -> list[PolicyRequest]:
        """One agent request per live play: its conversation, its context and its seed."""
        return [
            PolicyRequest(
                role="agent",
                messages=list(ep.messages),
                context=dataclasses.replace(
                    self.context, env_id=self.env_id, play_seed=ep.spec.seed, hinted=ep.spec.hinted,
                    hint=self.hint if ep.spec.hinted else None, turn=turn, observation=ep.last_obs,
                ),
                seed=(ep.spec.seed * 1009 + turn) & 0x7FFFFFFF,
                **self.settings,
            )
            for ep in live
        ]

    def take_turns(self, live: list[_Episode], samples: Sequence[Sample]) -> None:
        """Send each reply's action to its play's environment, all at once (:func:`.at_once`),
        then record the turns in play order; a reply cut by the token limit or the window is
        recorded but not sent, and ends its play."""
        actions = [to_action(sample.text)[:MAX_ACTION_CHARS] for sample in samples]  # what is sent is what is recorded
        sent = [i for i, sample in enumerate(samples) if sample.finish_reason not in ("length", "context")]
        stepped = dict(zip(sent, at_once([functools.partial(_step, live[i], actions[i]) for i in sent], len(sent))))
        for i, (ep, sample) in enumerate(zip(live, samples)):
            if i in stepped:
                self.took_turn(ep, sample, actions[i], stepped[i])
            else:
                self.cut_turn(ep, sample, actions[i])

    def cut_turn(self, ep: _Episode, sample: Sample, action: str) -> None:
        """A reply cut by the token limit or the window: recorded (when there is one), not sent;
        the play ends."""
        if sample.completion_token_ids or sample.text:
            ep.turns.append(Turn(observation=ep.last_obs, action=action, reward=0.0, truncated=True, generation=sample.generation()))
        ep.truncated = True
        ep.end_reason = "agent_length" if sample.finish_reason == "length" else "context"
        self.finish(ep)

    def took_turn(self, ep: _Episode, sample: Sample, action: str, stepped: "_Stepped") -> None:
        """Record what ``step(action)`` did to the play (or the error that ends it)."""
        ep.sandbox_seconds += stepped.seconds
        if stepped.error is not None:
            ep.turns.append(
                Turn(observation=ep.last_obs, action=action, reward=0.0, generation=sample.generation(),
                     step_seconds=round(stepped.seconds, 6))
            )
            self.fail(ep, stepped.error)
            return
        obs, reward, term, trunc = stepped.result
        ep.turns.append(
            Turn(observation=ep.last_obs, action=action, reward=float(reward), terminated=bool(term),
                 truncated=bool(trunc), generation=sample.generation(), step_seconds=round(stepped.seconds, 6))
        )
        ep.last_obs = str(obs)
        ep.messages.append({"role": "assistant", "content": sample.text})
        ep.messages.append({"role": "user", "content": str(obs)})
        if term or trunc:
            ep.terminated, ep.truncated = bool(term), bool(trunc)
            self.finish(ep)

    def end_at_turn_limit(self) -> None:
        for ep in self.live():
            ep.truncated = True
            ep.end_reason = "turn_limit"
            self.finish(ep)

    def finish(self, ep: _Episode) -> None:
        """End the play; it is handed over at the next :meth:`flush` (with the others that end
        in the same step)."""
        ep.done = True
        self.pending.append(ep)

    def flush(self) -> None:
        """Hand over the plays ended since the last flush, in play order: close their sessions
        and run ``after_play`` on them, both at once (:func:`.at_once`), then build each one's
        RolloutCompleted (bounded), add it to the results and call ``on_done``."""
        ended, self.pending = self.pending, []
        if not ended:
            return
        at_once([functools.partial(_close, ep) for ep in ended], len(ended))
        payloads = []
        for ep in ended:
            ep.seconds = time.perf_counter() - ep.started
            payloads.append(bound_rollout(self.payload(ep)))  # the last re-check of what came out of the sandbox
        if self.after_play is not None:
            payloads = at_once([functools.partial(_after, self.after_play, ep, p) for ep, p in zip(ended, payloads)], len(ended))
        for ep, payload in zip(ended, payloads):
            self.results.append(payload)
            if self.on_done is not None:
                self.on_done(payload, ep.sandbox_seconds)

    def payload(self, ep: _Episode) -> RolloutCompleted:
        """The ended play's RolloutCompleted."""
        last = ep.turns[-1].reward if ep.turns else None
        return RolloutCompleted(
            env_id=self.env_id,
            play_id=f"{self.env_id}/{'h' if ep.spec.hinted else 'p'}{ep.spec.index}",
            hinted=ep.spec.hinted,
            seed=ep.spec.seed,
            policy_version=self.policy_version,
            episode_reward=episode_reward(last, ep.terminated),
            turns=ep.turns,
            terminated=ep.terminated,
            truncated=ep.truncated,
            step_timeout=ep.step_timeout,
            error=ep.error,
            seconds=round(ep.seconds, 6),
            index=ep.spec.index,
            end_reason=ep.end_reason or ("terminated" if ep.terminated else "truncated"),
        )

    def fail(self, ep: _Episode, exc: BaseException) -> None:
        """Finish the play with the error that ended it (a step timeout, a sandbox crash, other)."""
        if self.timeout_errors and isinstance(exc, self.timeout_errors):
            ep.step_timeout = True
            ep.error = f"step timeout: {exc}"
            ep.end_reason = "step_timeout"
        elif self.crash_errors and isinstance(exc, self.crash_errors):
            ep.error = f"sandbox crash: {exc}"
            ep.end_reason = "sandbox_crash"
        else:
            ep.error = f"{type(exc).__name__}: {exc}"
            ep.end_reason = "error"
        self.finish(ep)

    def close(self) -> None:
        for ep in self.eps:
            _close(ep)
