"""The dashboard's chart series over HTTP: per-environment points at their environment index with
rolling means (the window from the app or the request), the frontier band from the run's config,
training curves from PolicyUpdated metrics against policy version, the repair links of the
environment table, and the shareable environment address. Expected numbers are worked out by
hand from dashboard_support.audit_run (environment index: env-a 0, env-b 1, ..., env-f 5)."""

from __future__ import annotations

import time

import httpx
import numpy as np
import pytest
from dashboard_support import EXTRA_METRICS, TRAINING, Served, audit_run, training_run, write_run

from spade_engine.dashboard.app import create_app
from spade_engine.dashboard.curves import env_curves, rolling_mean, thin, training_curves, training_metric_order


def _wait_caught_up(c: httpx.Client, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        s = c.get("api/summary").json()
        if (s["caught_up"] and s["stopped"]) or time.monotonic() > deadline:
            return s
        time.sleep(0.05)


def test_series_puts_each_environment_at_its_index_with_rolling_means(tmp_path):
    write_run(tmp_path / "data", audit_run())
    with Served(create_app(tmp_path / "data", None, window=2)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        summary = _wait_caught_up(c)
        s = c.get("api/series").json()
        assert (s["x"], s["environments"], s["window"]) == ("environment index", 6, 2)
        assert s["band"] == [0.4, 0.6]  # the config's defaults: {"seed": 0} sets no band
        win = s["groups"]["*"]["win_rate_plain"]  # a 0.5, b 0.25, d 1.0, f 0.5 (c, e never played)
        assert win["x"] == [0, 1, 3, 5] and win["ids"] == ["env-a", "env-b", "env-d", "env-f"]
        assert win["y"] == pytest.approx([0.5, 0.25, 1.0, 0.5])
        assert win["mean"] == pytest.approx([0.5, 0.375, 0.625, 0.75])
        # validation: a, b valid, c a syntax error, d, e (duplicate, but valid), f valid
        val = s["groups"]["*"]["validation_pass_rate"]
        assert val["x"] == [0, 1, 2, 3, 4, 5] and val["y"] == [1, 1, 0, 1, 1, 1]
        assert val["mean"] == pytest.approx([1, 1, 0.5, 0.5, 1, 1])
        nov = s["groups"]["*"]["novelty"]  # env-c has none; env-e 0.01
        assert nov["x"] == [0, 1, 3, 4, 5] and nov["mean"] == pytest.approx([0.42, 0.42, 0.42, 0.215, 0.215])
        # per skill: the skill's own last two values, x still the run-wide environment index
        math = s["groups"]["math"]["regret"]  # a 0.5, b 0.75, d 0.0
        assert math["x"] == [0, 1, 3] and math["mean"] == pytest.approx([0.5, 0.625, 0.375])
        logic = s["groups"]["logic"]["designer_reward"]
        assert (logic["x"], logic["mean"]) == ([5], [0.8])
        assert s["groups"]["logic"]["win_rate_plain"]["n"] == 1 and not s["thinned"]
        assert s["latest"]["*"]["win_rate_plain"] == pytest.approx(0.75)
        # the counters show the same newest rolling means
        assert summary["window"] == 2 and summary["latest"]["regret"] == pytest.approx((0.0 + 0.5) / 2)

        # a request may ask for another window: the last three values
        w3 = c.get("api/series", params={"window": 3}).json()
        assert w3["window"] == 3
        assert w3["groups"]["*"]["win_rate_plain"]["mean"] == pytest.approx([0.5, 0.375, 7 / 12, 7 / 12])
        assert w3["groups"]["*"]["designer_reward"]["mean"] == pytest.approx([0.9, 0.6, 1.3 / 3, 1.2 / 3])
        for bad in (0, -1, "x"):
            assert c.get("api/series", params={"window": bad}).status_code == 422


def test_band_comes_from_the_runs_reward_config(tmp_path):
    write_run(tmp_path / "data", audit_run({"seed": 0, "reward": {"band_low": 0.25, "band_high": 0.65}}))
    with Served(create_app(tmp_path / "data", None)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        _wait_caught_up(c)
        s = c.get("api/series").json()
        assert s["band"] == [0.25, 0.65]
        assert s["window"] == 10  # the default: each mean is over everything so far in this short run
        assert s["groups"]["*"]["win_rate_plain"]["mean"] == pytest.approx([0.5, 0.375, 1.75 / 3, 2.25 / 4])


def test_training_curves_from_policy_updated_metrics(tmp_path):
    write_run(tmp_path / "data", training_run())
    with Served(create_app(tmp_path / "data", None, window=2)) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        _wait_caught_up(c)
        t = c.get("api/training").json()
        assert (t["x"], t["versions"], t["updates"], t["window"]) == ([1, 2, 3, 4], ["v1", "v2", "v3", "v4"], 4, 2)
        assert t["x_label"] == "policy version (step)"
        by = {m["name"]: m for m in t["metrics"]}
        assert set(by) == {"loss", "grad_norm", "kl", "clip_fraction", "agent_reward_mean", "tokens", *EXTRA_METRICS}
        assert by["loss"]["y"] == pytest.approx([m["loss"] for m in TRAINING])
        assert by["loss"]["mean"] == pytest.approx([0.9, 0.75, 0.55, 0.4])
        assert by["grad_norm"]["mean"] == pytest.approx([2.0, 1.75, 1.35, 1.1])
        # v1 recorded no kl: no point there, and the mean only counts recorded values
        assert by["kl"]["y"][0] is None and by["kl"]["y"][1:] == pytest.approx([0.01, 0.02, 0.015])
        assert by["kl"]["mean"][0] is None and by["kl"]["mean"][1:] == pytest.approx([0.01, 0.015, 0.0175])
        assert by["kl"]["n"] == 3 and by["loss"]["n"] == 4
        # losses and statistics first (the page shows these), counters after
        names = [m["name"] for m in t["metrics"]]
        assert names[:5] == ["loss", "kl", "grad_norm", "clip_fraction", "agent_reward_mean"]
        assert [m["name"] for m in t["metrics"] if m["headline"]] == names[:5]
        assert c.get("api/training", params={"window": 4}).json()["metrics"][0]["mean"] == pytest.approx(
            [0.9, 0.75, 2.0 / 3, 2.3 / 4])


def test_env_table_links_rejected_environments_to_their_repairs_and_env_urls_redirect(tmp_path):
    write_run(tmp_path / "data", audit_run())
    with Served(create_app(tmp_path / "data", None, token="tok")) as srv, \
            httpx.Client(base_url=srv.url, timeout=10, headers={"X-Spade-Token": "tok"}) as c:
        _wait_caught_up(c)
        rows = {r["env_id"]: r for r in c.get("api/envs").json()["rows"]}
        assert rows["env-c"]["repaired_by"] == "env-f" and rows["env-c"]["verdict"] == "rejected"
        assert rows["env-f"]["repair_of"] == "env-c" and rows["env-f"]["repaired_by"] is None
        assert rows["env-e"]["repaired_by"] is None
        c_detail = c.get("api/envs/env-c").json()
        assert [(r["env_id"], r["verdict"]) for r in c_detail["lineage"]["repairs"]] == [("env-f", "accepted")]
        f_detail = c.get("api/envs/env-f").json()
        assert [(r["env_id"], r["error_kind"]) for r in f_detail["lineage"]["repair_chain"]] == [("env-c", "syntax")]
        # /env/<id> opens the dashboard on that environment (the page keeps the token)
        r = c.get("env/env-c", follow_redirects=False)
        assert r.status_code == 307 and r.headers["location"] == "../?token=tok#/env/env-c"
        page = c.get("env/env-c", follow_redirects=True)
        assert page.status_code == 200 and 'src="static/app.js?token=tok"' in page.text
        assert c.get("env/a%20b%3F", follow_redirects=False).headers["location"] == "../?token=tok#/env/a%20b%3F"
        assert c.get("env/a/b%2Fc", follow_redirects=False).headers["location"] == "../../../?token=tok#/env/a%2Fb%2Fc"


def test_rolling_mean_and_thinning_keep_every_plotted_value_exact():
    values = np.array([1.0, 0.0, 0.0, 1.0, 1.0])
    assert rolling_mean(values, 1).tolist() == values.tolist()
    assert rolling_mean(values, 2).tolist() == [1.0, 0.5, 0.0, 0.5, 1.0]
    assert rolling_mean(values, 9).tolist() == pytest.approx([1.0, 0.5, 1 / 3, 0.5, 0.6])
    with pytest.raises(ValueError):
        rolling_mean(values, 0)
    assert thin(5, 10).tolist() == [0, 1, 2, 3, 4]
    assert thin(10, 4).tolist() == [0, 3, 6, 9]  # the newest always kept
    assert thin(11, 4).tolist() == [1, 4, 7, 10]

    # 1,000 environments, thinned to 50 points: each kept point is exactly the unthinned one
    envs = {f"e{i:04d}": {"skill": "s", "t": f"2026-01-01T00:00:{i:07.3f}Z", "valid": i % 3 != 0,
                          "win_rate_plain": (i % 7) / 6} for i in range(1000)}
    full = env_curves(envs, 25, max_points=10_000)["groups"]["*"]["win_rate_plain"]
    small = env_curves(envs, 25, max_points=50)
    thinned = small["groups"]["*"]["win_rate_plain"]
    assert small["thinned"] and len(thinned["x"]) == 50 and thinned["n"] == 1000 and thinned["x"][-1] == 999
    at = {x: k for k, x in enumerate(full["x"])}
    assert thinned["mean"] == [full["mean"][at[x]] for x in thinned["x"]]
    assert thinned["mean"][-1] == pytest.approx(np.mean([(i % 7) / 6 for i in range(975, 1000)]))
    val = small["groups"]["*"]["validation_pass_rate"]
    assert small["latest"]["*"]["validation_pass_rate"] == pytest.approx(np.mean([i % 3 != 0 for i in range(975, 1000)]))
    assert val["n"] == 1000


def test_training_metric_order_and_curves_without_updates():
    order, headline = training_metric_order(["tokens", "grad_norm", "adv_std", "loss", "kl_to_ref", "zeta"])
    assert order == ["loss", "grad_norm", "adv_std", "kl_to_ref", "tokens", "zeta"] and headline == 4
    order, headline = training_metric_order([f"m{i:02d}" for i in range(12)])  # none known: the first 10
    assert headline == 10 and order[0] == "m00"
    empty = training_curves([], 5)
    assert (empty["x"], empty["metrics"], empty["updates"]) == ([], [], 0)


def test_the_mean_band_is_the_95_percent_interval_of_the_rolling_mean():
    from spade_engine.dashboard.curves import rolling_interval

    values = np.array([0.2, 0.6, 1.0, 0.4])
    lo, hi = rolling_interval(values, 3)
    # by hand: a single value has no spread; then mean ± 1.96 s / sqrt(n), s the sample deviation
    assert (lo[0], hi[0]) == (0.2, 0.2)
    s2 = np.std([0.2, 0.6], ddof=1)
    assert (lo[1], hi[1]) == pytest.approx((0.4 - 1.96 * s2 / np.sqrt(2), 0.4 + 1.96 * s2 / np.sqrt(2)))
    s3 = np.std([0.6, 1.0, 0.4], ddof=1)
    assert (lo[3], hi[3]) == pytest.approx((2 / 3 - 1.96 * s3 / np.sqrt(3), 2 / 3 + 1.96 * s3 / np.sqrt(3)))
    # the series carries it, kept within [0, 1] for rates
    envs = {f"e{i}": {"skill": "s", "t": f"2026-01-01T00:00:0{i}Z", "valid": True, "win_rate_plain": float(i % 2),
                      "regret": 0.5 * (i % 2) - 0.2} for i in range(6)}
    curves = env_curves(envs, 4)["groups"]["*"]
    win, regret = curves["win_rate_plain"], curves["regret"]
    assert min(win["lo"]) >= 0.0 and max(win["hi"]) <= 1.0 and win["lo"][1] == 0.0
    assert min(regret["lo"]) < -0.2, "regret is not clipped to [0, 1]"
    assert all(lo <= m <= hi for lo, m, hi in zip(win["lo"], win["mean"], win["hi"]))
