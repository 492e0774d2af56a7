"""Helpers for the engine loop tests: checking a run's event chains, and a scripted designer."""

from __future__ import annotations

from collections import Counter
from typing import Any

from spade_engine.events.log import EventLog
from spade_engine.policy.protocol import Sample
from spade_engine.policy.request_context import DesignContext


class ScriptedDesigner:
    """A Policy (a fake: it stands in for a model whose output the test must choose) that writes
    ``first`` when asked for a new environment and ``repair`` when asked for a repair, a fixed
    hint and a fixed action otherwise; it records every request."""

    kind = "scripted"
    context_window: int | None = None  # the Policy protocol's declared members
    on_progress = None
    trainable = False
    version = "v0"

    def __init__(self, first: str, repair: str, *, hint: str = "Read the observation.", action: str = "\\boxed{show 1}",
                 preamble: str = ""):
        self.first, self.repair, self.hint, self.action, self.preamble = first, repair, hint, action, preamble
        self.requests: list[Any] = []

    def generate(self, requests):
        out = []
        for r in requests:
            self.requests.append(r)
            if r.role == "designer":
                code = self.repair if (isinstance(r.context, DesignContext) and r.context.repair is not None) else self.first
                out.append(Sample(text=f"{self.preamble}```python\n{code}```\n"))
            else:
                out.append(Sample(text=self.hint if r.role == "hinter" else self.action))
        return out

    def load_version(self, version, checkpoint, *, adapter=None):
        pass

    def describe(self):
        return {"kind": self.kind}

    def tokenize(self, text):
        return None

    def close(self):
        pass


def records_by_type(log: EventLog) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for rec in log.read():
        out.setdefault(rec.envelope.type, []).append(rec.envelope)
    return out


def run_scripted(cfg: Any, policy: Any, run_id: str, data: Any) -> tuple[dict[str, list[Any]], dict[str, Any], dict[str, Any]]:
    """Run ``cfg`` with ``policy`` to its ``max_envs`` bound as a new run ``run_id`` under ``data``;
    return its events by type and the proposals and verdicts by env id (payloads)."""
    from spade_engine.events.store import open_event_log
    from spade_engine.runs.engine import open_engine

    with open_engine(cfg, run_id=run_id, data_dir=data, create=True, policy=policy) as opened:
        assert opened.engine.run() == "max_envs"
    log = open_event_log(run_id, data_dir=data)
    try:
        by_type = records_by_type(log)
    finally:
        log.close()
    props = {e.payload["env_id"]: e.payload for e in by_type["EnvironmentProposed"]}
    verdicts = {e.payload["env_id"]: e.payload for e in by_type["EnvironmentValidated"]}
    return by_type, props, verdicts


def check_chains(log: EventLog, *, k: int, max_repairs: int) -> dict[str, Any]:
    """Assert every environment's event chain is complete and duplicate-free; return a summary."""
    envs: dict[str, dict[str, Any]] = {}
    ids: dict[str, str] = {}
    stage_keys: Counter = Counter()
    for rec in log.read():
        e = rec.envelope
        p = e.payload
        ids[e.event_id] = e.type
        if e.type in ("RunStarted", "RunStopped", "PolicyUpdated"):
            continue
        d = envs.setdefault(p["env_id"], {"plays": {}, "later": {}})
        round_ = p.get("round", 0)
        if e.type == "RolloutCompleted":
            key = (p["hinted"], p["index"])
            stage_keys[(p["env_id"], e.type, round_, key)] += 1
            if round_ == 0:
                d["plays"][key] = e
            else:
                d["later"].setdefault(("plays", round_), {})[key] = e
        elif round_ or e.type == "EnvironmentReplayed":  # later rounds (check_rounds checks them)
            stage_keys[(p["env_id"], e.type, round_)] += 1
            d["later"][(e.type, round_)] = e
        else:
            stage_keys[(p["env_id"], e.type)] += 1
            d[e.type] = e
    dup = [k_ for k_, n in stage_keys.items() if n > 1]
    assert not dup, f"duplicated stage outputs: {dup[:5]}"
    summary = Counter()
    for env_id, d in envs.items():
        prop = d.get("EnvironmentProposed")
        assert prop is not None, f"{env_id}: events without a proposal"
        val = d.get("EnvironmentValidated")
        assert val is not None, f"{env_id}: never validated"
        assert val.causation_id == prop.event_id
        vp = val.payload
        if not vp["valid"]:
            summary["invalid"] += 1
            assert vp["error_kind"] and vp["failed_check"], f"{env_id}: invalid without a reason"
            assert "HintWritten" not in d and not d["plays"]
            repairs = [x for x, y in envs.items() if y.get("EnvironmentProposed") and y["EnvironmentProposed"].payload.get("repair_of") == env_id]
            if prop.payload.get("attempt", 0) < max_repairs:
                assert len(repairs) == 1, f"{env_id}: expected one repair, got {repairs}"
            else:
                assert not repairs
            continue
        summary["valid"] += 1
        if not vp["accepted"]:
            summary["duplicate"] += 1
            assert "HintWritten" not in d
            continue
        summary["accepted"] += 1
        hint = d.get("HintWritten")
        assert hint is not None and hint.causation_id == val.event_id and hint.payload["hint"]
        assert sorted(d["plays"]) == sorted((h, i) for h in (False, True) for i in range(k)), env_id
        for play in d["plays"].values():
            assert play.causation_id == hint.event_id
            assert play.payload["turns"], f"{env_id}: a play without turns"
        reg = d.get("RegretEstimated")
        assert reg is not None, f"{env_id}: no regret"
        if not d["later"]:
            assert sorted(reg.payload["rollout_ids"]) == sorted(p.event_id for p in d["plays"].values())
    summary["envs"] = len(envs)
    summary["roots"] = sum(1 for d in envs.values() if d["EnvironmentProposed"].payload.get("attempt", 0) == 0)
    summary["repairs"] = summary["envs"] - summary["roots"]
    return dict(summary)


def check_rounds(log: EventLog, *, plain: int, hinted: int, rounds: int, replay_hinted: bool = True) -> dict[str, Any]:
    """Assert every accepted environment has all its rounds: designed rounds 0..rounds-1 (plain
    plays each, hinted ones in round 0) and each replay round (plain, plus hinted with
    ``replay_hinted``), each with exactly one estimate naming that round's plays, whose plays follow
    from the hint, the previous round's estimate or the replay choice. Returns counts."""
    by_env: dict[str, dict[str, Any]] = {}
    for rec in log.read():
        e = rec.envelope
        if e.type not in ("EnvironmentValidated", "HintWritten", "RolloutCompleted", "RegretEstimated", "EnvironmentReplayed"):
            continue
        p = e.payload
        d = by_env.setdefault(p["env_id"], {"plays": {}, "estimates": {}, "replays": {}})
        r = p.get("round", 0)
        if e.type == "EnvironmentValidated":
            d["accepted"] = p["accepted"]
        elif e.type == "HintWritten":
            d["hint"] = e.event_id
        elif e.type == "RolloutCompleted":
            d["plays"].setdefault(r, []).append(e)
        elif e.type == "RegretEstimated":
            assert r not in d["estimates"], f"{p['env_id']}: two estimates of round {r}"
            d["estimates"][r] = e
        else:
            assert r not in d["replays"], f"{p['env_id']}: two replays of round {r}"
            d["replays"][r] = e
    counts = Counter()
    for env_id, d in by_env.items():
        if not d.get("accepted"):
            continue
        counts["accepted"] += 1
        due = list(range(rounds)) + sorted(d["replays"])
        assert sorted(d["estimates"]) == due, f"{env_id}: estimated rounds {sorted(d['estimates'])} != {due}"
        for r in due:
            plays = d["plays"].get(r, [])
            replay = r in d["replays"]
            want_h = hinted if r == 0 else (hinted if replay and replay_hinted else 0)
            assert sum(1 for x in plays if not x.payload["hinted"]) == plain, (env_id, r)
            assert sum(1 for x in plays if x.payload["hinted"]) == want_h, (env_id, r)
            cause = d["hint"] if r == 0 else (d["replays"][r].event_id if replay else d["estimates"][r - 1].event_id)
            assert all(x.causation_id == cause for x in plays), (env_id, r)
            est = d["estimates"][r].payload
            assert {x.event_id for x in plays if not x.payload["hinted"]} <= set(est["rollout_ids"]), (env_id, r)
            assert est["replay"] == replay and est["designer_final"] == (not replay and r == rounds - 1)
            counts["rounds"] += 1
            counts["replays"] += int(replay)
    return dict(counts)
