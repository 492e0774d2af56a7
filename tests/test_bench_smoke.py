"""Every benchmark in bench/ runs end to end at its smallest size and prints, as its last line,
the JSON keys its issue names.

These tests keep the benchmarks from rotting between the runs that measure (a GPU session has
minutes, not hours, to find a broken script). They never look at the figures: timings belong in
the benchmarks' own output, not in pass/fail tests. Each script starts what it needs itself (a
Kafka broker from the cached jars, a sandbox pool, headless Chromium).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.bench, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent

CASES = {
    "eventlog": (["--n", "5000", "--batch", "500"],
                 ["append_events_per_s", "read_events_per_s", "baseline_append_events_per_s", "append_ratio"]),
    "kafka": (["--n", "2000", "--batch", "500", "--e2e-n", "200", "--loop-n", "30", "--run-envs", "3", "--run-seeds", "1"],
              ["produce_events_per_s", "baseline_produce_events_per_s", "produce_ratio", "consume_events_per_s",
               "e2e_p50_ms", "e2e_p99_ms", "loop_events_per_s", "sqlite_loop_events_per_s", "loop_ratio",
               "two_reads_loop_events_per_s", "one_read_speedup", "run_ratio"]),
    "sandbox": (["--reps", "1", "--invalid-reps", "2", "--baseline-reps", "1", "--steps", "50"],
                ["validate_p50_ms", "invalid_validate_p50_ms", "baseline_validate_p50_ms", "validate_speedup", "step_roundtrip_p50_ms"]),
    "memory": (["--sizes", "2000", "--events", "5000", "--queries", "30", "--baseline-queries", "10"],
               ["query_p50_ms_2000", "baseline_query_p50_ms_2000", "query_speedup_2000", "recall_at_1_2000",
                "replay_events_per_s", "replay_events_per_s_sequential", "baseline_read_events_per_s"]),
    "curriculum": (["--quick"], ["frontier_share_off", "frontier_share_on", "frontier_share_delta", "regret_off", "regret_on",
                                 "regret_delta", "replays", "designer_used_share_before", "designer_used_share_after",
                                 "designer_used_delta", "designer_ratio_groups", "designer_used_ratio",
                                 "designer_used_before_12", "designer_used_after_12", "designer_candidates_12"]),
    "loop": (["--quick"], ["envs_per_min", "plays_per_min", "sandbox_share", "frontier_share", "frontier_share_fixed"]),
    "novelty": (["--n", "16"], ["novel_share", "novel_share_of_proposals", "accepted_share", "s_per_env", "sandbox_share",
                                "embedding_share"]),
    "dashboard": (["--n", "5000", "--seconds", "2", "--rate", "200"], ["initial_load_s_1m", "sse_lag_p99_ms"]),
    "scale": (["--n", "6", "--repeat", "1", "--partitions", "4", "--no-novelty"],
              ["validations_per_s_1", "validations_per_s_2", "scale_ratio"]),
    "designer": (["--model", "tiny:1", "--n", "2", "--batch", "2", "--max-new-tokens", "24", "--compare-tokens", "4"],
                 ["valid_first_try", "valid_after_repair", "accepted", "designer_tokens_per_s", "sampler_tokens_per_s",
                  "generate_tokens_per_s"]),
    "agent": (["--model", "tiny:1", "--n", "2", "--max-new-tokens", "8"],
              ["solved_share", "mean_reward", "boxed_share", "tag_share", "placeholder_share",
               "agent_tokens_per_s", "delta_solved_share", "delta_boxed_share"]),
    "selfplay_vs_fixed": (["--smoke"], ["delta_a_c", "delta_b_c", "delta_a_b", "arm_a_trained_tokens", "arm_b_trained_tokens",
                                        "arm_d_trained_tokens", "arm_a_updates", "arm_b_updates", "arm_d_updates", "minutes",
                                        "load_average_start"]),
    "learning": (["--smoke"], ["heldout_gain", "random_reward_gain", "real_minus_random", "items", "trained_tokens",
                               "random_trained_tokens", "minutes"]),
    "step_size": (["--smoke"], ["recorded_lr", "grad_norm_recorded", "grad_norm_replayed", "kl_recorded_lr", "samples"]),
    "inference": (["--smoke"], ["speedup_decode_b4", "speedup_prefill_b4", "bandwidth_share", "copy_gb_per_s"]),
    "llamacpp_variants": (["--smoke"], ["fetched_decode_b4", "best_decode_b4", "best_over_fetched_b4", "threads2_over_1_bmax"]),
    "startup": (["--reps", "1"], ["version_s", "help_s", "status_help_s", "start_help_s", "baseline_python_s",
                                   "baseline_all_imports_s", "help_speedup"]),
    "gpu": (["--smoke"], ["rollout_tokens_per_s", "baseline_rollout_tokens_per_s", "rollout_speedup",
                          "train_tokens_per_s", "train_mfu", "baseline_train_mfu"]),
}


#: the proof-of-learning benchmarks: their runs are ordinary event logs that ``replay --verify`` passes
VERIFIED_RUNS = {"learning", "selfplay_vs_fixed"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_benchmark_runs_and_reports_its_keys(name: str, tmp_path: Path) -> None:
    args, keys = CASES[name]
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    data = tmp_path / "data"
    if name in VERIFIED_RUNS:
        args = [*args, "--data-dir", str(data)]
    res = subprocess.run([sys.executable, str(ROOT / "bench" / f"{name}.py"), *args], capture_output=True, text=True,
                         cwd=str(ROOT), env=env, timeout=540)
    assert res.returncode == 0, f"bench/{name}.py failed:\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    last = res.stdout.strip().splitlines()[-1]
    result = json.loads(last)
    missing = [k for k in keys if k not in result]
    assert not missing, f"bench/{name}.py's last line lacks {missing}: {last}"
    assert all(isinstance(result[k], (int, float)) for k in keys), last
    for text in (res.stdout, res.stderr):  # no library progress bars (tqdm, Hugging Face) leak out
        assert "\r" not in text and "it/s]" not in text and "%|" not in text, f"bench/{name}.py printed a progress bar"
    if name in VERIFIED_RUNS:
        runs = sorted(p.name for p in (data / "runs").iterdir() if p.is_dir())
        assert len(runs) >= 2, runs  # at least a trained arm and its control
        for run in runs:
            check = subprocess.run([sys.executable, "-m", "spade_engine.cli", "replay", "--verify", "-d", str(data), run],
                                   capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=300)
            assert check.returncode == 0 and "live projections equal the replay" in check.stdout, (
                f"replay --verify on {run}:\n{check.stdout[-1500:]}\n{check.stderr[-1500:]}")
        if name == "selfplay_vs_fixed":  # every arm is asked as none trains: the agent's system prompt, the bare question
            from spade_engine.events.store import open_event_log

            assert result["eval_prompt"] == "agent-plain-v1"
            for run in runs:
                log = open_event_log(run, data_dir=data)
                try:
                    asked = {r.envelope.payload["prompt_version"] for r in log.read() if r.envelope.type == "EvaluationCompleted"}
                finally:
                    log.close()
                assert asked == {"agent-plain-v1"}, (run, asked)


@pytest.mark.parametrize("name", ["designer", "agent"])
def test_model_benchmarks_take_what_start_takes(name: str, tmp_path: Path) -> None:
    """`--model` of the model benchmarks resolves like `start --model` (a catalogue name, a
    directory, a .gguf file): here a tiny GGUF file written by the test, converted into the cache
    (a bench once passed the spec to from_pretrained as it was, so a catalogue name failed); the
    designer bench also picks the backend as start does (llama.cpp for a GGUF file on a CPU,
    which needs only the file's tokenizer in the cache)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from models_support import write_tiny_gguf

    gguf = tmp_path / "tiny.gguf"
    write_tiny_gguf(gguf, arch="qwen2")
    args = {"designer": ["--n", "1", "--batch", "1", "--max-new-tokens", "8", "--compare-tokens", "2", "--arms", "current"],
            "agent": ["--n", "1", "--max-new-tokens", "4"]}[name]
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), SPADE_MODEL_CACHE=str(tmp_path / "cache"))
    res = subprocess.run([sys.executable, str(ROOT / "bench" / f"{name}.py"), "--model", str(gguf), *args],
                         capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=540)
    assert res.returncode == 0, f"bench/{name}.py failed:\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    result = json.loads(res.stdout.strip().splitlines()[-1])
    if name == "designer" and result["policy"] == "llamacpp":
        assert list((tmp_path / "cache" / "tokenizers").glob("*/hf/tokenizer_config.json"))  # extracted once, into the cache
    else:
        assert list((tmp_path / "cache" / "local").glob("*/hf/config.json"))  # converted once, into the cache


def test_a_results_page_written_later_from_a_runs_json_names_the_run_that_measured_it(tmp_path) -> None:
    """``bench/learning.py --report-from JSON`` writes the page of a run that ended earlier: the
    command and commit on the page are the run's own (recorded in its JSON), not the reporter's."""
    sys.path.insert(0, str(ROOT / "bench"))
    from results_page import write_results

    measured = {"command": "python3 bench/learning.py --lr 1e-4", "commit": "0123456789ab", "date": "2026-12-01",
                "machine": "2 CPUs"}
    page = write_results("learning-x", {"heldout_gain": 0.1, "provenance": measured}, lambda r: "figures", out=tmp_path)
    assert page.name == "2026-12-01-learning-x.md"
    text = page.read_text()
    assert "python3 bench/learning.py --lr 1e-4" in text and "0123456789ab" in text
    assert json.loads((tmp_path / "2026-12-01-learning-x.json").read_text())["provenance"] == measured
    fresh = write_results("other", {"heldout_gain": 0.1}, lambda r: "figures", argv=["bench/other.py"], out=tmp_path)
    assert "python3 bench/other.py" in fresh.read_text()
    from results_page import load_result

    assert load_result(tmp_path / "2026-12-01-learning-x.json", "learning")["heldout_gain"] == 0.1  # a results JSON
    log = tmp_path / "run.log"
    log.write_text('[12:00:00] progress\n{"heldout_gain": 0.2}\nsys:1: ResourceWarning\n')
    assert load_result(log, "learning") == {"heldout_gain": 0.2}  # the last JSON line of a benchmark's log
    log.write_text("[12:00:00] progress only\n")
    with pytest.raises(SystemExit, match="no JSON line of bench/learning.py"):
        load_result(log, "learning")
    dated = write_results("2026-12-01-learning-y", {"heldout_gain": 0.1, "provenance": measured}, lambda r: "", out=tmp_path)
    assert dated.name == "2026-12-01-learning-y.md"



def test_gpu_results_page_reads_the_committed_device_runs() -> None:
    """bench/gpu.py --report-from: the H200 runs committed under bench/results/ (their profile
    tables read back from the logs beside them) render with each figure judged against its target."""
    sys.path.insert(0, str(ROOT))
    from bench import gpu

    runs = [gpu.load_run(ROOT / "bench" / "results" / f"2026-12-04-gpu-h200-{c}.json") for c in ("ee9e88f", "dae0bc8")]
    before = {r["name"]: r for r in runs[0]["profile_train"]}
    assert before["aten::logsumexp"]["device_ms"] == pytest.approx(265.94, abs=0.01) and before["aten::logsumexp"]["calls"] == 32
    assert any(r["name"] == "aten::linear" and r["calls"] == 43264 for r in runs[0]["profile_rollout"])
    page = gpu.render({"runs": runs})
    assert "2.81 (below target)" in page and "15.2 (target met)" in page and "0.363 (below target)" in page
    assert "| `aten::cumsum` | 95.4 | 95.4 | 261 |" in page


def test_learning_bench_runs_on_the_transformers_backend(tmp_path: Path) -> None:
    """bench/learning.py --backend transformers (the GPU path, here on the CPU with the built-in tiny
    model): both arms run, the control trains, and the runs replay as they were recorded."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    data = tmp_path / "data"
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "learning.py"), "--smoke", "--backend", "transformers",
                          "--data-dir", str(data)], capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=540)
    assert res.returncode == 0, f"{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    result = json.loads(res.stdout.strip().splitlines()[-1])
    assert result["backend"] == "transformers" and result["model"] == "tiny:0"
    assert result["arms"]["random"]["updates"] >= 1 and result["random_trained_tokens"] > 0
    for run in (result["arms"]["real"]["run_id"], result["arms"]["random"]["run_id"]):
        check = subprocess.run([sys.executable, "-m", "spade_engine.cli", "replay", "--verify", "-d", str(data), run],
                               capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=300)
        assert check.returncode == 0 and "live projections equal the replay" in check.stdout, check.stdout[-1500:]
