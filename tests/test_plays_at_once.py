"""Sandbox round trips at once (``engine/at_once.py``): the plays of a group open, step, close and
go through their after-play check at the same time, yet hand their plays over in play order; and a
simulated run records the same plays whether its sandbox calls run at once or one at a time.

The sessions in the first tests are stand-ins (a barrier that only opens when both plays are in
the same call at once), because what is tested is the runner's scheduling, not an environment.
"""

from __future__ import annotations

import json
import threading
import time

import msgspec
import pytest

from spade_engine.config import load_config
from spade_engine.engine.at_once import at_once
from spade_engine.engine.rollouts import PlaySpec, play_episodes
from spade_engine.events.catalogue import RolloutCompleted
from spade_engine.events.store import new_run_id
from spade_engine.policy.protocol import PolicyRequest, Sample
from spade_engine.runs.engine import open_engine


class _BarrierSession:
    """reset() and step() wait at a two-party barrier: a second play must be in the same call at
    the same time, else the barrier breaks (after 5 s) and the play ends with that error."""

    def __init__(self, barrier: threading.Barrier, delays: dict[int, float]) -> None:
        self.barrier, self.delays, self.seed = barrier, delays, -1

    def __enter__(self) -> "_BarrierSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.barrier.wait()

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        self.seed = int(seed or 0)
        self.barrier.wait()
        return f"seed {self.seed}: say 7", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        self.barrier.wait()
        time.sleep(self.delays.get(self.seed, 0.0))  # play 0 answers last
        return "done", 1.0 if action == "\\boxed{7}" else 0.0, True, False, {}


def _generate(requests: list[PolicyRequest]) -> list[Sample]:
    return [Sample(text="\\boxed{7}", finish_reason="stop") for _ in requests]


def test_the_plays_of_a_group_run_their_sandbox_calls_at_once_and_are_handed_over_in_order() -> None:
    barrier = threading.Barrier(2, timeout=5)
    specs = [PlaySpec(index=0, hinted=False, seed=10), PlaySpec(index=1, hinted=False, seed=11)]
    done: list[str] = []
    in_after = threading.Barrier(2, timeout=5)

    def after(payload: RolloutCompleted) -> RolloutCompleted:
        in_after.wait()  # both after-play checks run at the same time
        return payload

    plays = play_episodes(
        env_id="abcdef-e00000", specs=specs, open_session=lambda: _BarrierSession(barrier, {10: 0.3}),
        generate=_generate, policy_version="v0", hint=None, turn_limit=3, concurrency=2,
        on_done=lambda p, _s: done.append(p.play_id), after_play=after,
    )
    assert [p.error for p in plays] == [None, None]  # no barrier broke: open, step and close ran at once
    assert [p.episode_reward for p in plays] == [1.0, 1.0]
    assert done == ["abcdef-e00000/p0", "abcdef-e00000/p1"] == [p.play_id for p in plays]  # play 0 finished last


def test_after_play_gives_what_is_handed_on_and_its_time_counts_as_the_plays_sandbox_time() -> None:
    barrier = threading.Barrier(1)
    seen: list[tuple[str, float]] = []

    def after(payload: RolloutCompleted) -> RolloutCompleted:
        time.sleep(0.2)
        return msgspec.structs.replace(payload, error="checked")

    (play,) = play_episodes(
        env_id="abcdef-e00000", specs=[PlaySpec(index=0, hinted=True, seed=1)], open_session=lambda: _BarrierSession(barrier, {}),
        generate=_generate, policy_version="v0", hint="say 7", turn_limit=3,
        on_done=lambda p, s: seen.append((p.error or "", s)), after_play=after,
    )
    assert play.error == "checked" and seen[0][0] == "checked"
    assert seen[0][1] >= 0.2


def test_at_once_keeps_the_order_of_its_calls_and_raises_after_all_have_run() -> None:
    finished: list[int] = []

    def call(i: int, delay: float) -> int:
        time.sleep(delay)
        finished.append(i)
        if i == 1:
            raise ValueError("call 1")
        return i * 10

    assert at_once([lambda: call(0, 0.2), lambda: call(2, 0.0)], 2) == [0, 20]
    assert finished == [2, 0]
    finished.clear()
    with pytest.raises(ValueError, match="call 1"):
        at_once([lambda: call(0, 0.0), lambda: call(1, 0.0), lambda: call(3, 0.2)], 3)
    assert sorted(finished) == [0, 1, 3]  # the slow call still ran to its end
    assert at_once([lambda: call(4, 0.0), lambda: call(5, 0.0)], 1) == [40, 50] and finished[-2:] == [4, 5]


_VOLATILE = {"run_id", "seconds", "step_seconds", "occurred_at", "event_id", "causation_id", "correlation_id", "rollout_ids", "baseline_prev"}


def _canonical(x: object) -> object:
    if isinstance(x, dict):
        return {k: _canonical(v) for k, v in x.items() if k not in _VOLATILE}
    if isinstance(x, list):
        return [_canonical(v) for v in x]
    return x


def _recorded(tmp_path, workers: int) -> list[str]:
    cfg = load_config(overrides={"seed": 3, "loop.max_envs": 8, "loop.plays_per_env": 4, "sandbox.workers": workers}, environ={})
    run_id = new_run_id()
    with open_engine(cfg, run_id=run_id, data_dir=tmp_path / str(workers), create=True, projections=False) as opened:
        opened.engine.run()
        records = list(opened.engine.log.read())
    out = []
    for rec in records:
        if rec.envelope.type in ("RunStarted", "RunStopped"):
            continue
        body = json.loads(rec.raw)
        out.append(json.dumps(_canonical(body), sort_keys=True).replace(run_id, "RUN").replace(run_id[-6:], "RUN"))
    return sorted(out)


@pytest.mark.sandbox
def test_a_simulated_run_records_the_same_plays_at_once_and_one_at_a_time(tmp_path) -> None:
    at_once_run, one_at_a_time = _recorded(tmp_path, 2), _recorded(tmp_path, 1)
    assert len(at_once_run) > 40
    assert at_once_run == one_at_a_time
