"""Issue 31, class 6 at play time: environments whose outcome does not depend on what the agent
does earn no designer reward.

The validator's part (a deliberately wrong answer must lose) is in ``test_redteam_round3.py``.
Here the hint stage's garbage probes run at the seed of every play of the first round, with
garbage of varied shapes; any win makes the environment ``trivial`` (designer reward 0), and the
pure regret stage recomputes it exactly from the recorded probes (``replay --verify``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import pytest
from sandbox_support import ENVS, REDTEAM, fast_config

from spade_engine.config import load_config
from spade_engine.engine.corpus import Corpus
from spade_engine.engine.pipeline import env_id_for, output_event_id
from spade_engine.engine.regret_replay import verify_regrets
from spade_engine.engine.rollouts import PlaySpec
from spade_engine.engine.rounds import round_play_specs
from spade_engine.engine.rounds import estimate_round
from spade_engine.engine.stages import StageContext, estimate_regret, play, validate, write_hint
from spade_engine.events import make_envelope
from spade_engine.events.catalogue import EnvironmentProposed, GarbageProbe, RolloutCompleted, decode_payload
from spade_engine.events.sqlite.log import SqliteEventLog
from spade_engine.events.store import new_run_id
from spade_engine.policy.procedural import ProceduralPolicy
from spade_engine.policy.protocol import PolicyRequest, Sample
from spade_engine.sandbox import SandboxCrash, SandboxError, SandboxPool, StepTimeout
from spade_engine.sandbox.validator import Validator


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


class AnswersOne(ProceduralPolicy):
    """The procedural simulation answering every request (hint or action) with ``\\boxed{1}``."""

    def generate(self, requests: Sequence[PolicyRequest]) -> list[Sample]:
        return [Sample(text="\\boxed{1}") for _ in requests]


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


def _run(tmp_path: Path, pool: SandboxPool, code: str, *, plays: int = 4):
    """Validate, hint (with its garbage probes), play (an agent that always answers \\boxed{1})
    and estimate one environment through the engine's own stages; returns (validated, hint,
    regret, log), or None when the validator already rejected it at every run seed tried."""
    for seed in range(12):
        run_id = new_run_id()
        cfg = load_config(overrides={"seed": seed, "loop.plays_per_env": plays, "loop.max_repairs": 0})
        cfg = cfg.model_copy(update={"sandbox": pool.config})
        policy = AnswersOne()
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
