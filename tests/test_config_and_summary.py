"""What a new user meets first in the config and the run summary: the band the summary names is
the run's own, an inverted band is refused, config errors are one readable line with a "did you
mean", and ``start --set KEY=VALUE`` sets one value without a TOML file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dashboard_support import RUN_ID, chart_run, write_run
from typer.testing import CliRunner

from spade_engine.cli import app
from spade_engine.config import load_config, resolve_config
from spade_engine.engine.state import RunState
from spade_engine.errors import ConfigError
from spade_engine.events.sqlite.log import SqliteEventLog
from spade_engine.events.store import DataDir
from spade_engine.runs.cli import progress_line, stats_rows

ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def _cli(*args: str, env: dict | None = None):
    return CliRunner().invoke(app, list(args), env={**ENV, **(env or {})})


def _run_with_band(tmp_path: Path, low: float, high: float) -> Path:
    data = tmp_path / "data"
    write_run(data, chart_run(12, config={"seed": 0, "reward": {"band_low": low, "band_high": high}}))
    return data


@pytest.mark.parametrize("band", [(0.25, 0.65), (0.3, 0.7)])
def test_status_names_the_band_the_run_recorded(tmp_path, band):
    data = _run_with_band(tmp_path, *band)
    res = _cli("status", "-d", str(data))
    assert res.exit_code == 0, res.output
    rows = dict(line.split("\t", 1) for line in res.stdout.splitlines() if "\t" in line)
    assert f"in band [{band[0]:g}, {band[1]:g}]: " in rows["regret"], rows["regret"]
    assert "[0.4, 0.6]" not in res.stdout
    as_json = json.loads(_cli("status", "-d", str(data), "--json").stdout)
    assert as_json["band"] == list(band)
    # the share is the one of that band, and the live progress line names it too
    log = SqliteEventLog(DataDir(data).log_path(RUN_ID), RUN_ID)
    try:
        state = RunState.from_log(log)
    finally:
        log.close()
    stats = state.stats()
    wide = state.stats((0.0, 1.0))
    assert wide["band_share"] == 1.0 and wide["band"] == [0.0, 1.0]
    assert f"in band [{band[0]:g}, {band[1]:g}]" in progress_line(stats, 3.0, 24)
    assert dict(stats_rows(wide))["regret"].endswith("in band [0, 1]: 100%")


def test_an_inverted_band_is_refused_everywhere(tmp_path):
    with pytest.raises(ConfigError, match=r"band is inverted: band_low 0.7 is above band_high 0.3"):
        load_config(overrides={"reward.band_low": 0.7, "reward.band_high": 0.3})
    cfg = tmp_path / "inverted.toml"
    cfg.write_text("[reward]\nband_low = 0.7\nband_high = 0.3\n")
    with pytest.raises(ConfigError, match="inverted"):
        load_config(cfg)
    with pytest.raises(ConfigError, match="inverted"):
        load_config(environ={"SPADE_REWARD__BAND_LOW": "0.8"})  # above the default band_high 0.6
    with pytest.raises(ConfigError, match="less than or equal to 1"):
        load_config(overrides={"reward.band_high": 1.5})
    assert load_config(overrides={"reward.band_low": 0.5, "reward.band_high": 0.5}).reward.band_low == 0.5
    data = tmp_path / "data"
    res = _cli("start", "-d", str(data), "--set", "reward.band_low=0.7", "--set", "reward.band_high=0.3")
    assert res.exit_code == 2 and "band is inverted" in res.output
    assert not DataDir(data).known_runs(), "a refused config leaves no run behind"


def test_config_errors_are_one_line_and_suggest_the_key(tmp_path):
    cfg = tmp_path / "typo.toml"
    cfg.write_text("[loop]\nmax_env = 3\n[reward]\nband_lo = 0.1\n[lop]\nx = 1\n")
    res = _cli("config", "show", "--config", str(cfg))
    assert res.exit_code == 2
    errors = [line for line in res.output.splitlines() if line]
    assert len(errors) == 1 and errors[0].startswith("error: invalid configuration"), res.output
    assert "\\n" not in errors[0], "no literal backslash-n in the message"
    assert "loop.max_env: unknown key (did you mean loop.max_envs?)" in errors[0]
    assert "reward.band_lo: unknown key (did you mean reward.band_low" in errors[0]
    assert "lop: unknown key (did you mean loop" in errors[0]
    res = _cli("config", "show", env={"SPADE_POLICY__PROCEDURAL__AGENT_SKIL": "0.5"})
    assert res.exit_code == 2 and "did you mean policy.procedural.agent_skill?" in res.output
    res = _cli("config", "show", "--set", "policy.generation.agent.temprature=0.3")
    assert res.exit_code == 2 and "did you mean policy.generation.agent.temperature?" in res.output
    res = _cli("config", "show", "--set", "loop.max_envs=many")
    assert res.exit_code == 2 and "loop.max_envs: Input should be a valid integer" in res.output


def test_config_show_set_matches_what_start_set_records():
    resolved = resolve_config(overrides={"reward.band_low": 0.3, "loop.max_envs": 5})
    assert resolved.config.reward.band_low == 0.3 and resolved.source("reward.band_low") == "flag"


@pytest.mark.sandbox
def test_start_set_key_value_configures_a_new_run(tmp_path):
    data = tmp_path / "data"
    res = _cli("start", "-d", str(data), "--max-envs", "1", "--plays", "2", "--seed", "3",
               "--set", "reward.band_low=0.3", "--set", "reward.band_high=0.8", "--set", "loop.max_envs=7",
               "--set", 'memory.novelty_threshold=0.05')
    assert res.exit_code == 0, res.output
    shown = _cli("config", "show", "--run", DataDir(data).known_runs()[-1], "-d", str(data), "--json")
    values = {k: v["value"] for k, v in json.loads(shown.stdout).items()}
    assert (values["reward.band_low"], values["reward.band_high"], values["memory.novelty_threshold"]) == (0.3, 0.8, 0.05)
    assert values["loop.max_envs"] == 1, "--max-envs wins over --set loop.max_envs"
    status = _cli("status", "-d", str(data))
    assert "in band [0.3, 0.8]" in status.stdout
    bad = _cli("start", "-d", str(data), "--new", "--set", "reward.band_low")
    assert bad.exit_code == 2 and "--set expects KEY=VALUE" in bad.output


def test_one_rule_configures_a_run_new_or_resumed(tmp_path) -> None:
    """recorded.run_config_for: a resumed run keeps its recorded config but for [sandbox], with the
    running-run flags on top; a new run is configured from defaults < file < flags < new-run flags,
    a flag not given (None) overriding nothing, a fixed source's implied settings added."""
    from spade_engine.config import load_config
    from spade_engine.envsources.spec import source_of
    from spade_engine.runs.run_config import run_config_for

    toml = tmp_path / "c.toml"
    toml.write_text("seed = 7\n[loop]\nmax_envs = 9\n[sandbox]\nworkers = 3\n")
    new = run_config_for(None, config_file=toml, flags={"loop.max_envs": None, "reward.band_low": 0.3},
                         new_run_flags={"seed": None, "loop.env_source": "rg:gcd?size=4"})
    assert (new.seed, new.loop.max_envs, new.reward.band_low, new.sandbox.workers) == (7, 9, 0.3, 3)
    assert source_of(new.loop).size == 4 and (new.loop.max_repairs, new.memory.novelty_threshold) == (0, 0.0)
    flagged = run_config_for(None, config_file=toml, flags={"seed": 1}, new_run_flags={"seed": 2})
    assert flagged.seed == 2  # a new-run flag wins over a general one (--seed over --set seed=...)
    recorded = load_config(overrides={"seed": 5, "loop.max_envs": 40, "sandbox.workers": 8}, environ={})
    resumed = run_config_for(recorded, config_file=toml, flags={"loop.max_envs": 60}, new_run_flags={"seed": 9})
    assert (resumed.seed, resumed.loop.max_envs, resumed.sandbox.workers) == (5, 60, 3)  # sandbox: this machine's



def test_train_takes_the_recorded_config_with_this_machines_sandbox_or_a_whole_config_file(tmp_path) -> None:
    """runs.run_config.train_config_for: ``train`` on a recorded run keeps its config but never its
    [sandbox] (the periodic evaluation plays in the sandbox; a log may come from anywhere), flags
    on top; a --config file is the whole training recipe."""
    from spade_engine.config import load_config
    from spade_engine.runs.run_config import train_config_for

    recorded = load_config(overrides={"seed": 5, "trainer.learning_rate": 0.5, "sandbox.workers": 8,
                                      "sandbox.preload_modules": ["json"]}, environ={})
    cfg = train_config_for(recorded, flags={"trainer.batch_groups": 3, "trainer.device": None})
    assert (cfg.seed, cfg.trainer.learning_rate, cfg.trainer.batch_groups, cfg.trainer.device) == (5, 0.5, 3, "auto")
    assert cfg.sandbox == load_config().sandbox and cfg.sandbox.preload_modules != ["json"]
    toml = tmp_path / "t.toml"
    toml.write_text("[trainer]\nlearning_rate = 0.01\n")
    filed = train_config_for(recorded, config_file=toml, flags={"trainer.batch_groups": 3})
    assert (filed.seed, filed.trainer.learning_rate, filed.trainer.batch_groups) == (None, 0.01, 3)
    assert train_config_for(None, flags={"trainer.learning_rate": 0.2}).trainer.learning_rate == 0.2


def test_eval_takes_its_sandbox_from_this_machine_a_config_file_and_workers(tmp_path) -> None:
    """runs.run_config.eval_config_for: ``eval`` reads no run's config; its archive suites play
    in this machine's sandbox, a --config file and then --workers on top."""
    from spade_engine.config import load_config
    from spade_engine.runs.run_config import eval_config_for

    assert eval_config_for().sandbox == load_config().sandbox
    toml = tmp_path / "e.toml"
    toml.write_text("[sandbox]\nworkers = 3\nmemory_mb = 700\n")
    filed = eval_config_for(toml)
    assert (filed.sandbox.workers, filed.sandbox.memory_mb) == (3, 700)
    flagged = eval_config_for(toml, workers=5)
    assert (flagged.sandbox.workers, flagged.sandbox.memory_mb) == (5, 700)
