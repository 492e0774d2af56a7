"""Issue 31, class 6 at play time: environments whose outcome does not depend on what the agent
does earn no designer reward.

The validator's part (a deliberately wrong answer must lose) is in ``test_redteam_round3.py``.
Here the hint stage's garbage probes run at the seed of every play of the first round, with
garbage of varied shapes; any win makes the environment ``trivial`` (designer reward 0), and the
pure regret stage recomputes it exactly from the recorded probes (``replay --verify``). Each won
play of the first round is also replayed with a deliberately wrong final answer of its shape: an
environment that pays for the shape of an answer, not its value (``tests/redteam/round3/``:
a coin flip on small integers, any small integer, any short word), wins those replays and earns
nothing, while an honest one keeps its reward.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec
import pytest
from sandbox_support import ENVS, REDTEAM, fast_config

from spade_engine.config import load_config
from spade_engine.engine.corpus import Corpus
from spade_engine.engine.garbage import answer_ignored, replay_won
from spade_engine.engine.pipeline import env_id_for, output_event_id
from spade_engine.engine.regret_replay import verify_regrets
from spade_engine.engine.rollouts import PlaySpec
from spade_engine.engine.rounds import round_play_specs
from spade_engine.engine.rounds import estimate_round
from spade_engine.engine.stages import StageContext, estimate_regret, play, validate, write_hint
from spade_engine.events import make_envelope
from spade_engine.events.catalogue import (
    EnvironmentProposed, GarbageProbe, RolloutCompleted, WrongAnswerReplay, decode_payload,
)
from spade_engine.events.sqlite.log import SqliteEventLog
from spade_engine.events.store import new_run_id
from spade_engine.policy.procedural import ProceduralPolicy
from spade_engine.policy.protocol import PolicyRequest, Sample
from spade_engine.sandbox import SandboxCrash, SandboxError, SandboxPool, StepTimeout
from spade_engine.sandbox.probes import garbage_actions
from spade_engine.sandbox.validator import Validator

ROUND3 = REDTEAM / "round3"


def _play(i: int, hinted: bool, reward: float) -> tuple[str, RolloutCompleted]:
    p = RolloutCompleted(env_id="e", play_id=f"e/{'h' if hinted else 'p'}{i}", hinted=hinted, seed=i, policy_version="v",
                         episode_reward=reward, terminated=True, index=i, end_reason="terminated")
    return f"{'h' if hinted else 'p'}{i}", p


def _probe(seed: int, won: bool) -> GarbageProbe:
    return GarbageProbe(seed=seed, actions=["\\boxed{x}"], rewards=[1.0 if won else 0.0], terminated=True)


PROPOSED = EnvironmentProposed(env_id="e", skill="s", difficulty=0.5, code="", code_sha256="", policy_version="v")


def test_a_coin_flip_in_the_band_earns_nothing_once_garbage_wins_at_its_seeds():
    """The issue's case: plain win rate 0.5 (in the band) and no regret gave 0.6. With the probes
    at the plays' seeds winning where the coin says heads, it is trivial: designer reward 0."""
    cfg = load_config(overrides={"loop.plays_per_env": 4})
    plays = [_play(i, h, 1.0 if i % 2 == 0 else 0.0) for h in (False, True) for i in range(4)]
    honest = estimate_round(PROPOSED, plays, cfg.reward, cfg.loop, round_=0, replay=False, prev=None, probe=_probe(0, False),
                            more_probes=[_probe(i, False) for i in range(1, 4)])
    assert honest.designer_reward == pytest.approx(0.6) and not honest.trivial  # what the coin flip used to earn
    assert (honest.garbage_episodes, honest.garbage_wins) == (4, 0)
    coin = estimate_round(PROPOSED, plays, cfg.reward, cfg.loop, round_=0, replay=False, prev=None, probe=_probe(0, True),
                          more_probes=[_probe(i, i % 2 == 0) for i in range(1, 4)])
    assert coin.trivial and coin.designer_reward == 0.0 and (coin.garbage_episodes, coin.garbage_wins) == (4, 2)
    late = estimate_round(PROPOSED, plays, cfg.reward, cfg.loop, round_=0, replay=False, prev=None, probe=_probe(0, False),
                          more_probes=[_probe(1, False), _probe(2, True)])
    assert late.trivial and late.designer_reward == 0.0  # a win at any seed, not only plain play 0's


def test_older_events_upcast_to_one_probe():
    hint = decode_payload("HintWritten", 2, {"env_id": "e", "hint": "h", "policy_version": "v",
                                             "garbage_probe": {"seed": 1, "actions": [], "rewards": []}})
    assert hint.garbage_probes == []
    v3 = {"env_id": "e", "skill": "s", "plain_rewards": [1.0], "hinted_rewards": [1.0], "win_rate_plain": 1.0,
          "win_rate_hinted": 1.0, "regret": 0.0, "designer_reward": 0.0, "trivial": True, "garbage_reward": 1.0}
    ev = decode_payload("RegretEstimated", 3, v3)
    assert (ev.garbage_episodes, ev.garbage_wins) == (1, 1)
    none = decode_payload("RegretEstimated", 3, {**v3, "trivial": False, "garbage_reward": None})
    assert (none.garbage_episodes, none.garbage_wins) == (0, 0)


class Scripted(ProceduralPolicy):
    """The procedural simulation answering every request (hint or action) with ``agent(request)``."""

    def __init__(self, agent: Callable[[PolicyRequest], str]):
        super().__init__()
        self.agent = agent

    def generate(self, requests: Sequence[PolicyRequest]) -> list[Sample]:
        return [Sample(text=self.agent(r)) for r in requests]


def _proposal(run_id: str, index: int, code: str, version: str) -> EnvironmentProposed:
    return EnvironmentProposed(
        env_id=env_id_for(run_id, index), skill="arithmetic", difficulty=0.5, code=code,
        code_sha256=hashlib.sha256(code.encode()).hexdigest(), policy_version=version, designer="redteam",
    )


@pytest.fixture(scope="module")
def pool():
    p = SandboxPool(fast_config(uid_base=2_000_000_230))
    yield p
    p.close()


def _run(tmp_path: Path, pool: SandboxPool, code: str, *, plays: int = 4,
         agent: Callable[[PolicyRequest], str] = lambda request: "\\boxed{1}", need_win: bool = False):
    """Validate, hint (with its garbage probes), play (``agent`` answers each request; by default
    always \\boxed{1}) and estimate one environment through the engine's own stages; returns
    (validated, hint, plays, regret, log), or None when the validator already rejected it at every
    run seed tried (with ``need_win``, also when no play was won at any)."""
    for seed in range(12):
        run_id = new_run_id()
        cfg = load_config(overrides={"seed": seed, "loop.plays_per_env": plays, "loop.max_repairs": 0})
        cfg = cfg.model_copy(update={"sandbox": pool.config})
        policy = Scripted(agent)
        ctx = StageContext(
            run_id=run_id, cfg=cfg, policy=policy, corpus=Corpus.from_paths([]), validator=Validator(pool, turn_limit=cfg.loop.turn_limit),
            pool=pool, sandbox_layers=dict(pool.layers), step_errors=((StepTimeout,), (SandboxCrash, SandboxError)),
        )
        prop = _proposal(run_id, 0, code, policy.version)
        validated = validate(ctx, prop)
        if not validated.valid:
            continue
        hint = write_hint(ctx, prop)
        specs = play_specs_of(cfg.seed, prop.env_id, plays)
        played = play(ctx, prop, hint, specs, on_done=lambda payload: None)
        if need_win and not any(p.episode_reward >= 1.0 for p in played):
            continue
        log = SqliteEventLog(tmp_path / f"events-{run_id}.sqlite", run_id)
        ids = []
        for payload in (prop, validated, hint, *played):
            env = make_envelope(payload, run_id=run_id, producer="t", event_id=output_event_id(run_id, payload))
            log.append([env])
            ids.append(env.event_id)
        regret = estimate_regret(prop, list(zip(ids[3:], played)), cfg.reward, hint.garbage_probe, hint.garbage_probes)
        log.append([make_envelope(regret, run_id=run_id, producer="t", event_id=output_event_id(run_id, regret))])
        return validated, hint, played, regret, log
    return None


def play_specs_of(seed: int, env_id: str, k: int) -> list[PlaySpec]:
    return round_play_specs(seed, env_id, 0, plain=k, hinted=k)


@pytest.mark.sandbox
@pytest.mark.parametrize("name", ["coin_flip_no_solution.py", "shape_cheat_no_solution.py"])
def test_outcomes_that_ignore_the_action_earn_no_designer_reward(tmp_path, pool, name):
    out = _run(tmp_path, pool, (REDTEAM / name).read_text())
    assert out is not None, "the validator rejected it at every seed (then it earns nothing either)"
    validated, hint, played, regret, log = out
    try:
        assert len(hint.garbage_probes) == 3 and regret.garbage_episodes == 4
        won = [p.episode_reward >= 1.0 for p in played if not p.hinted]
        if name.startswith("coin"):  # garbage wins exactly where the agent's fixed answer did
            assert regret.garbage_wins == sum(won) and regret.trivial == any(won)
        else:
            assert regret.trivial and regret.garbage_wins >= 1
        assert regret.designer_reward == 0.0
        assert verify_regrets(log) == []  # recomputed exactly from the recorded probes
    finally:
        log.close()


@pytest.mark.sandbox
def test_an_honest_environment_keeps_its_reward(tmp_path, pool):
    out = _run(tmp_path, pool, (ENVS / "guess_number_env.py").read_text())
    assert out is not None
    validated, hint, played, regret, log = out
    try:
        assert validated.valid and regret.garbage_episodes == 4 and regret.garbage_wins == 0 and not regret.trivial
        assert verify_regrets(log) == []
    finally:
        log.close()


# ----------------------------------------------------------------------------------------------
# the wrong-answer replays of won plays (an outcome paid for the shape of an answer, not its value)


def _replay(won: bool, *, turn: int = 1, ended_at: int | None = None, error: str | None = None) -> WrongAnswerReplay:
    n = turn if ended_at is None else ended_at
    return WrongAnswerReplay(seed=1, turn=turn, answer="\\boxed{7}", rewards=[0.0] * (n - 1) + [1.0 if won else 0.0],
                             terminated=True, error=error)


def test_an_outcome_that_a_wrong_answer_wins_as_often_is_trivial():
    assert replay_won(_replay(True)) and not replay_won(_replay(False))
    assert not replay_won(_replay(True, error="StepTimeout: 2s"))
    assert not replay_won(_replay(True, turn=3, ended_at=2))  # ended before the wrong answer was sent
    assert replay_won(_replay(True, turn=3))
    assert not answer_ignored([])
    assert answer_ignored([_replay(True)])
    assert not answer_ignored([_replay(True), _replay(False)])  # a fair game with several answers may take one
    assert answer_ignored([_replay(True), _replay(True), _replay(False)])
    cfg = load_config(overrides={"loop.plays_per_env": 4})
    plays = [_play(i, h, 1.0 if i % 2 == 0 else 0.0) for h in (False, True) for i in range(4)]
    blind = [(eid, msgspec.structs.replace(p, wrong_answer=_replay(True)) if p.episode_reward == 1.0 else p) for eid, p in plays]
    fair = [(eid, msgspec.structs.replace(p, wrong_answer=_replay(False)) if p.episode_reward == 1.0 else p) for eid, p in plays]
    no_probes = dict(probe=_probe(0, False), more_probes=[_probe(i, False) for i in range(1, 4)])
    est = estimate_round(PROPOSED, blind, cfg.reward, cfg.loop, round_=0, replay=False, prev=None, **no_probes)
    assert (est.wrong_answer_replays, est.wrong_answer_wins, est.garbage_wins) == (4, 4, 0)
    assert est.trivial and est.designer_reward == 0.0
    kept = estimate_round(PROPOSED, fair, cfg.reward, cfg.loop, round_=0, replay=False, prev=None, **no_probes)
    assert (kept.wrong_answer_replays, kept.wrong_answer_wins) == (4, 0)
    assert not kept.trivial and kept.designer_reward == pytest.approx(0.6)


def test_older_plays_and_estimates_upcast_without_replays():
    play = decode_payload("RolloutCompleted", 4, {"env_id": "e", "play_id": "e/p0", "hinted": False, "seed": 1,
                                                 "policy_version": "v", "episode_reward": 1.0})
    assert play.wrong_answer is None
    v4 = {"env_id": "e", "skill": "s", "plain_rewards": [1.0], "hinted_rewards": [1.0], "win_rate_plain": 1.0,
          "win_rate_hinted": 1.0, "regret": 0.0, "designer_reward": 0.0, "garbage_episodes": 4, "garbage_wins": 0}
    ev = decode_payload("RegretEstimated", 4, v4)
    assert (ev.wrong_answer_replays, ev.wrong_answer_wins, ev.trivial) == (0, 0, False)


def test_garbage_draws_small_integers_and_short_words_varied_per_seed():
    """The shapes of a plausible answer are among the garbage: boxed and bare small non-negative
    integers of every length from 1 to 6 digits, and boxed and bare words of 2 to 4 letters,
    with other values at other seeds (an environment that pays for one of these shapes was never
    paid by the garbage before)."""
    firsts = [garbage_actions(seed, 6) for seed in range(400)]
    every = [a for acts in firsts for a in acts]
    boxed_ints = [a for a in every if re.fullmatch(r"\\boxed\{\d{1,6}\}", a)]
    bare_ints = [a for a in every if re.fullmatch(r"\d{1,6}", a)]
    boxed_words = [a for a in every if re.fullmatch(r"\\boxed\{[a-z]{2,4}\}", a)]
    bare_words = [a for a in every if re.fullmatch(r"[a-z]{2,4}", a)]
    for found in (boxed_ints, bare_ints, boxed_words, bare_words):
        assert len(found) > 50 and len(set(found)) > 40, found[:5]
    assert {len(re.sub(r"\D", "", a)) for a in boxed_ints + bare_ints} == {1, 2, 3, 4, 5, 6}
    assert {a.lstrip("\\boxed{").rstrip("}") for a in boxed_ints} >= {"0", "1"} or len({a for a in boxed_ints if len(a) == 8}) > 3
    # the first action (all a one-turn game reads) takes each kind of shape at some seeds
    assert sum(1 for acts in firsts if re.fullmatch(r"(\\boxed\{)?\d{1,6}\}?", acts[0])) > 30
    assert sum(1 for acts in firsts if re.fullmatch(r"(\\boxed\{)?[a-z]{2,4}\}?", acts[0])) > 30
    assert garbage_actions(5, 6) == garbage_actions(5, 6)


def _won(played) -> list:
    return [p for p in played if p.episode_reward >= 1.0]


@pytest.mark.sandbox
@pytest.mark.parametrize(
    ("name", "answer"),
    [
        ("coin_flip_small_integers.py", "\\boxed{1}"),
        ("wins_on_any_small_integer.py", "\\boxed{1}"),
        ("wins_on_any_short_word.py", "\\boxed{cat}"),
    ],
)
def test_an_outcome_paid_for_the_shape_of_an_answer_earns_no_designer_reward(tmp_path, pool, name, answer):
    """The validator passes these (none has a solution() to replay, and no probe has the shape
    they pay for); the agent wins some plays. Each won play replayed with another answer of its
    shape wins again, so the environment is trivial: designer reward 0, recomputed exactly."""
    out = _run(tmp_path, pool, (ROUND3 / name).read_text(), agent=lambda request: answer, need_win=True)
    assert out is not None, "the validator rejected it at every seed, or no play was won (then it earns nothing either)"
    validated, hint, played, regret, log = out
    try:
        won = _won(played)
        assert [p.wrong_answer is not None for p in played] == [p in won for p in played]  # won plays only
        for p in won:
            assert p.wrong_answer.seed == p.seed and p.wrong_answer.answer != answer
            assert len(p.wrong_answer.answer) == len(answer)  # the same shape, another value
            assert replay_won(p.wrong_answer), p.wrong_answer
        assert (regret.wrong_answer_replays, regret.wrong_answer_wins) == (len(won), len(won))
        assert regret.trivial and regret.designer_reward == 0.0
        assert verify_regrets(log) == []  # recomputed exactly from the recorded plays
    finally:
        log.close()


def _arithmetic_agent(request: PolicyRequest) -> str:
    """Answers arithmetic_env's question right at even play seeds and wrong at odd ones."""
    if request.role != "agent":
        return "Compute it."  # the hint
    a, b, c = map(int, re.search(r"Compute (\d+) \+ (\d+) \* (\d+)", request.context.observation).groups())
    right = a + b * c
    return f"\\boxed{{{right if request.context.play_seed % 2 == 0 else right + 1}}}"


@pytest.mark.sandbox
def test_an_honest_environment_keeps_its_reward_after_the_wrong_answer_replays(tmp_path, pool):
    for k in range(8):  # a run seed whose plays are neither all won nor all lost (in the band)
        out = _run(tmp_path / str(k), pool, (ENVS / "arithmetic_env.py").read_text(), agent=_arithmetic_agent, need_win=True)
        assert out is not None
        validated, hint, played, regret, log = out
        if 0 < len(_won(played)) < len(played):
            break
        log.close()
    try:
        won = _won(played)
        assert [p.wrong_answer is not None for p in played] == [p in won for p in played]
        assert all(not replay_won(p.wrong_answer) for p in won)
        assert (regret.wrong_answer_replays, regret.wrong_answer_wins) == (len(won), 0)
        assert not regret.trivial and regret.garbage_wins == 0 and regret.designer_reward > 0.0
        assert verify_regrets(log) == []
    finally:
        log.close()
