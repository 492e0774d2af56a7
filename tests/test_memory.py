"""The novelty memory: recorded embeddings only, exact/approximate search, examples, snapshots,
and novelty decisions with the real packaged embedding model."""

from __future__ import annotations

import numpy as np
import pytest
import faiss

from archive_support import chain, mixed_run, unit
from factories import run_events
from spade_engine.archive.embedder import Embedder, EmbeddingError
from spade_engine.archive.memory import EnvironmentMemory, decode_embedding, encode_embedding
from spade_engine.config import MemoryConfig
from spade_engine.consumers import EmbeddedRunner
from spade_engine.events import SqliteEventLog


@pytest.fixture
def log(tmp_path):
    lg = SqliteEventLog(tmp_path / "run" / "events.sqlite", "r1")
    yield lg
    lg.close()


@pytest.fixture
def no_model(monkeypatch):
    """Fail loudly if anything runs the embedding model (projections must not)."""

    def boom(self, texts):
        raise AssertionError("the memory projection ran the embedding model")

    monkeypatch.setattr(Embedder, "embed", boom)


def test_embedding_codec_round_trips_and_rejects_garbage():
    v = unit(np.random.default_rng(1))
    assert np.array_equal(decode_embedding(encode_embedding(v)), v)
    with pytest.raises(EmbeddingError, match="dimension 3"):
        decode_embedding(encode_embedding(np.ones(3, np.float32)))
    with pytest.raises(EmbeddingError, match="base64"):
        decode_embedding("not base64 !!")


def test_empty_memory_is_fully_novel(tmp_path):
    mem = EnvironmentMemory.open(tmp_path)
    assert mem.novelty(unit(np.random.default_rng(0))) == (1.0, None)
    assert mem.examples("math").frontier == []


def test_memory_folds_recorded_embeddings(log, tmp_path, no_model):
    rng = np.random.default_rng(0)
    vecs = [unit(rng) for _ in range(3)]
    events = run_events("r1", 0)[:1]
    for i, v in enumerate(vecs):
        events += chain("r1", f"env-{i}", vec=v, win_plain=[0.5, 1.0, 0.0][i], k=2)
    events += chain("r1", "env-rej", vec=unit(rng), accepted=False)
    log.append(events)
    mem = EnvironmentMemory.open(tmp_path, MemoryConfig())
    EmbeddedRunner(log, [mem]).catch_up()
    assert len(mem) == 3 and mem.get("env-rej") is None
    nov, nearest = mem.novelty(vecs[1])
    assert nearest == "env-1" and nov == pytest.approx(0.0, abs=1e-5)
    noisy = vecs[2] + 0.3 * unit(rng)
    nov, nearest = mem.novelty(noisy / np.linalg.norm(noisy))
    assert nearest == "env-2" and 0.0 < nov < 0.5
    e1 = mem.get("env-1")
    assert e1["win_rate_plain"] == 1.0 and e1["regret"] == 0.0 and e1["code"].startswith("class CountEnv")
    ex = mem.examples("math", query_vec=vecs[0], k=3)
    assert [e["env_id"] for e in ex.frontier] == ["env-0"]
    assert {(e["env_id"], e["reason"]) for e in ex.negatives} == {("env-1", "too easy"), ("env-2", "too hard")}
    assert ex.neighbours[0]["env_id"] == "env-0" and ex.neighbours[0]["similarity"] == pytest.approx(1.0, abs=1e-5)
    assert mem.examples("logic").frontier == []


def test_frontier_prefers_high_regret(tmp_path):
    mem = EnvironmentMemory(None, MemoryConfig())
    rng = np.random.default_rng(3)
    for i, (w, r) in enumerate([(0.5, 0.1), (0.45, 0.4), (0.55, 0.2), (0.9, 0.1)]):
        mem.add(f"e{i}", unit(rng), skill="math", win_rate_plain=w, regret=r)
    ex = mem.examples("math", k=2, band=(0.4, 0.6))
    assert [e["env_id"] for e in ex.frontier] == ["e1", "e2"]
    assert [e["env_id"] for e in ex.negatives] == ["e3"]


def test_bad_embeddings_are_skipped_not_raised(log, tmp_path):
    rng = np.random.default_rng(0)
    good = chain("r1", "ok", vec=unit(rng))
    missing = chain("r1", "noemb", vec=None)
    short = chain("r1", "short", vec=np.ones(5, np.float32))
    log.append([*good, *missing, *short])
    mem = EnvironmentMemory.open(tmp_path)
    EmbeddedRunner(log, [mem]).catch_up()
    assert len(mem) == 1
    assert mem.skipped == {"accepted without recorded embedding": 1, "malformed embedding": 1}


def test_snapshot_restores_state_and_cursor(log, tmp_path):
    log.append(mixed_run("r1", 9))
    mem = EnvironmentMemory.open(tmp_path)
    EmbeddedRunner(log, [mem]).catch_up()
    again = EnvironmentMemory.open(tmp_path)
    assert again.position() == log.end_cursor()
    assert again.dump() == mem.dump()
    q = mem.vector("env-0003")
    assert again.novelty(q) == mem.novelty(q)
    assert (tmp_path / "memory" / "index.faiss").exists()


def _clustered(rng, n, centers):
    idx = rng.integers(0, len(centers), n)
    x = centers[idx] + 0.25 * rng.standard_normal((n, centers.shape[1])).astype(np.float32) / np.sqrt(centers.shape[1])
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_exact_below_threshold_approximate_above(tmp_path):
    rng = np.random.default_rng(7)
    centers = rng.standard_normal((20, 384)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    mem = EnvironmentMemory(tmp_path / "m", MemoryConfig(approximate_above=500, nprobe=4))
    first = _clustered(rng, 400, centers)
    mem.add_many([f"a{i}" for i in range(400)], first)
    mem.build_index()
    assert not mem.approximate and isinstance(mem._index, faiss.IndexFlatIP)
    more = _clustered(rng, 1600, centers)
    mem.add_many([f"b{i}" for i in range(1600)], more)
    mem.build_index()
    assert mem.approximate and isinstance(mem._index, faiss.IndexIVF)
    allv = np.vstack([first, more])
    queries = _clustered(rng, 100, centers)
    exact = (queries @ allv.T).argmax(axis=1)
    _, got = mem.search(queries, 1)
    recall = float(np.mean(got[:, 0] == exact))
    assert recall >= 0.9
    # a stored vector is found as its own nearest neighbour through the approximate index
    nov, nearest = mem.novelty(more[10])
    assert nearest == "b10" and nov == pytest.approx(0.0, abs=1e-5)
    # the approximate index is snapshotted and reloaded as such
    mem.flush({0: 1})
    again = EnvironmentMemory(tmp_path / "m", MemoryConfig(approximate_above=500, nprobe=4))
    assert again.approximate and isinstance(again._index, faiss.IndexIVF) and again._index.ntotal == 2000


@pytest.mark.slow
def test_novelty_with_the_real_embedding_model(log, tmp_path, monkeypatch):
    emb = Embedder()
    sort_a = "class SortEnv:\n    def reset(self, seed=None):\n        self.xs = [3, 1, 2]\n        return 'sort the list ' + str(self.xs), {}\n    def step(self, action):\n        ok = action == '\\\\boxed{1 2 3}'\n        return 'done', float(ok), True, False, {}\n"
    sort_b = sort_a.replace("[3, 1, 2]", "[9, 4, 7]").replace("1 2 3", "4 7 9")
    chess = "class KnightEnv:\n    def reset(self, seed=None):\n        return 'How many moves does a knight need from a1 to h8 on a chessboard?', {}\n    def step(self, action):\n        return 'done', float(action == '\\\\boxed{6}'), True, False, {}\n"
    vecs = emb.embed([sort_a, chess])
    assert vecs.shape == (2, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    events = chain("r1", "sort-a", vec=vecs[0], code=sort_a) + chain("r1", "chess", vec=vecs[1], code=chess, skill="games")
    log.append(events)
    probe = emb.embed([sort_b])[0]
    # from here on the model must not run: the memory uses the recorded embeddings
    monkeypatch.setattr(Embedder, "embed", lambda self, texts: (_ for _ in ()).throw(AssertionError("model ran")))
    mem = EnvironmentMemory.open(tmp_path, MemoryConfig(novelty_threshold=0.08))
    EmbeddedRunner(log, [mem]).catch_up()
    nov, nearest = mem.novelty(probe)
    assert nearest == "sort-a"
    assert not mem.is_novel(nov), f"a near-duplicate sort env should not be novel (novelty {nov:.3f})"
    nov_chess = 1.0 - float(probe @ vecs[1])
    assert nov_chess > 0.3 and mem.is_novel(nov_chess)
    ex = mem.examples(None, query_vec=probe, k=2)
    assert [n["env_id"] for n in ex.neighbours] == ["sort-a", "chess"]


def test_snapshot_survives_a_crash_between_vectors_and_state(tmp_path):
    rng = np.random.default_rng(5)
    mem = EnvironmentMemory(tmp_path / "m")
    first = np.stack([unit(rng) for _ in range(5)])
    mem.add_many([f"a{i}" for i in range(5)], first)
    mem.flush({0: 10})
    # a crashed flush: vectors appended, state.json never rewritten
    with open(tmp_path / "m" / "vectors.f32", "ab") as fh:
        fh.write(np.ones((3, 384), "<f4").tobytes())
    again = EnvironmentMemory(tmp_path / "m")
    assert len(again) == 5 and again.position() == {0: 10}
    more = np.stack([unit(rng) for _ in range(2)])
    again.add_many(["b0", "b1"], more)
    again.flush({0: 14})
    third = EnvironmentMemory(tmp_path / "m")
    assert len(third) == 7 and (tmp_path / "m" / "vectors.f32").stat().st_size == 7 * 384 * 4
    assert np.array_equal(third.vector("b1"), more[1]) and np.array_equal(third.vector("a4"), first[4])
    assert third.novelty(more[1])[1] == "b1" and third.novelty(first[0])[1] == "a0"


def test_a_stale_index_cache_is_completed_on_reopen(tmp_path):
    rng = np.random.default_rng(6)
    mem = EnvironmentMemory(tmp_path / "m")
    vecs = np.stack([unit(rng) for _ in range(21)])
    mem.add_many([f"e{i}" for i in range(20)], vecs[:20])
    mem.flush({0: 20})
    mem.add("e20", vecs[20])
    mem.flush({0: 21})  # +5%: the index file is not rewritten
    cached = faiss.read_index(str(tmp_path / "m" / "index.faiss"))
    assert cached.ntotal == 20
    again = EnvironmentMemory(tmp_path / "m")
    assert again._indexed == 20 and len(again) == 21
    assert again.novelty(vecs[20]) == (pytest.approx(0.0, abs=1e-5), "e20")


def _overshooting_unit_vector() -> np.ndarray:
    """A float32 unit vector whose inner product with itself (FAISS's and numpy's) comes out above
    1: the rounding that once made a second copy of an item 'novelty -0.000'."""
    rng = np.random.default_rng(0)
    for _ in range(2000):
        v = rng.standard_normal(384).astype(np.float32)
        v /= np.linalg.norm(v)
        index = faiss.IndexFlatIP(384)
        index.add(v[None])
        sim, _ = index.search(v[None], 1)
        if sim[0, 0] > 1.0 and float(np.dot(v, v)) > 1.0:
            return v
    raise AssertionError("no float32 unit vector overshoots 1 (the rounding this test needs)")


def test_novelty_never_goes_negative_and_threshold_zero_accepts_a_copy(log, tmp_path, no_model):
    from spade_engine.archive.novelty import novelty_of

    v = _overshooting_unit_vector()
    log.append(run_events("r1", 0)[:1] + chain("r1", "env-0", vec=v, k=2))
    mem = EnvironmentMemory.open(tmp_path, MemoryConfig(novelty_threshold=0.0))
    EmbeddedRunner(log, [mem]).catch_up()
    nov, nearest = mem.novelty(v)  # the same vector again: the pool's second pass over an item
    assert nearest == "env-0" and nov == 0.0 and not np.signbit(nov)
    assert mem.is_novel(nov), "a threshold of 0 accepts everything"
    assert f"{nov:.3f}" == "0.000"
    # the batch comparison the validation stage makes between proposals of one batch
    assert novelty_of(float(np.dot(v, v))) == 0.0
    assert novelty_of(-1.0000001) == 2.0 and novelty_of(0.25) == 0.75 and novelty_of(float("nan")) == 1.0
