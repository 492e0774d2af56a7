"""The engine's last re-check before recording what came out of the sandbox.

Replies are already decoded against their schema (which carries the worker's size limits, see
:mod:`spade_engine.sandbox.limits`), but an event is the one thing that is kept forever, so the
texts of the two events built from sandbox output are bounded once more right before they are
appended: ``EnvironmentValidated`` (check details, class name, probe actions) and
``RolloutCompleted`` (each turn's observation and action, the error). A text over its limit is
cut and ends with ``...[truncated N characters]`` (:func:`~spade_engine.sandbox.limits.clip`);
numbers and flags are unchanged, so regret recomputed from the log is unaffected.
"""

from __future__ import annotations


import msgspec

from ..events.catalogue import EnvironmentValidated, RolloutCompleted
from ..sandbox.limits import MAX_ACTION_CHARS, MAX_DETAIL_CHARS, MAX_ERROR_CHARS, MAX_NAME_CHARS, MAX_OBS_CHARS, clip

__all__ = ["bound_validated", "bound_rollout", "MAX_CHECKS"]

MAX_CHECKS = 32  #: checks recorded per validation (the validator runs a dozen)


def bound_validated(verdict: EnvironmentValidated) -> EnvironmentValidated:
    """``verdict`` with every sandbox-derived text within its limit (checks, class name, probes)."""
    checks = [
        msgspec.structs.replace(c, name=clip(c.name, 64), detail=clip(c.detail, MAX_DETAIL_CHARS))
        for c in list(verdict.checks)[:MAX_CHECKS]
    ]
    return msgspec.structs.replace(
        verdict,
        checks=checks,
        class_name=clip(verdict.class_name, MAX_NAME_CHARS) if verdict.class_name is not None else None,
        probe_actions=[clip(a, MAX_ACTION_CHARS) for a in verdict.probe_actions],
    )


def bound_rollout(payload: RolloutCompleted) -> RolloutCompleted:
    """``payload`` with each turn's observation and action and the error within their limits
    (the same object when nothing is over)."""
    turns = []
    changed = False
    for t in payload.turns:
        obs, action = clip(t.observation, MAX_OBS_CHARS), clip(t.action, MAX_ACTION_CHARS)
        if obs is not t.observation or action is not t.action:
            t = msgspec.structs.replace(t, observation=obs, action=action)
            changed = True
        turns.append(t)
    error = clip(payload.error, MAX_ERROR_CHARS) if payload.error is not None else None
    if not changed and error is payload.error:
        return payload
    return msgspec.structs.replace(payload, turns=turns, error=error)
