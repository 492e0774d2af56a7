"""The difficulty audit: a run's log replayed into fresh projections (optionally only up to an
offset or a time), summarised as a self-contained HTML report (plotly.js inlined), CSV tables
of the difficulty series and the environment table (text cells that a spreadsheet would read as a
formula are escaped with a leading ``'``), and a terminal summary.

Everything comes from the projections (:func:`~spade_engine.archive.replay.replay_run` into a
temporary directory, read through :class:`~spade_engine.dashboard.views.RunView`); the same log
gives the same files byte for byte except the one ``Generated`` line of the HTML report.
"""

from __future__ import annotations

import csv
import html
import io
import json
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..archive.difficulty import DEFAULT_WINDOW
from ..archive.replay import replay_run
from ..recorded import recorded_config_or_default
from ..events.log import Cursor, EventLog
from .curves import evaluation_curves, version_steps
from .evaluations import evaluation_row
from .security import spreadsheet_safe
from .views import METRICS, RunView

__all__ = ["Audit", "build_audit", "write_audit", "print_summary", "frontier_bucket", "BUCKETS", "EVAL_COLUMNS"]

#: frontier-band occupancy buckets (plain win rate), hardest first; the band itself comes from
#: the run's ``reward.band_low``/``band_high``, the outer limits are the memory's negatives
TOO_HARD, TOO_EASY = 0.15, 0.85
BUCKETS = ("too hard", "below band", "in band", "above band", "too easy")

DIFFICULTY_COLUMNS = (
    "window", "skill", "first_env", "last_env", "start", "end", "environments", "validated", "valid", "accepted",
    "estimated", "validation_pass_rate", "acceptance_rate", "novelty", "win_rate_plain", "win_rate_hinted",
    "regret", "designer_reward",
)
ENV_COLUMNS = (
    "env_id", "skill", "verdict", "valid", "error_kind", "failed_check", "attempt", "repair_of", "parents",
    "difficulty", "novel", "novelty", "nearest_env_id", "plays_plain", "plays_hinted", "win_rate_plain",
    "win_rate_hinted", "regret", "designer_reward", "frontier", "policy_version", "agent_policy_version",
    "document_source", "document_id", "code_sha256", "class_name", "proposed_at", "partition", "first_offset",
    "last_offset",
)
EVAL_COLUMNS = (
    "evaluation_id", "suite", "task", "policy_version", "step", "items", "k", "temperature", "greedy", "correct",
    "accuracy", "ci_low", "ci_high", "mean_score", "scoring_errors", "completion_tokens", "checkpoint_sha256", "model",
    "seed", "producer", "occurred_at", "partition", "offset",
)


def frontier_bucket(win_rate: float | None, band: tuple[float, float]) -> str | None:
    """Which occupancy bucket a plain win rate falls in (``None`` when not estimated)."""
    if win_rate is None:
        return None
    lo, hi = band
    if win_rate <= TOO_HARD:
        return "too hard"
    if win_rate >= TOO_EASY:
        return "too easy"
    if win_rate < lo:
        return "below band"
    if win_rate > hi:
        return "above band"
    return "in band"


@dataclass
class Audit:
    """Everything the report shows, as plain data."""

    run_id: str
    until: int | str | None
    events: int
    cursor: Cursor
    counts: dict[str, int]
    band: tuple[float, float]
    window: int
    series: list[dict[str, Any]]
    envs: list[dict[str, Any]]
    verdicts: dict[str, int]
    rejections: list[dict[str, Any]]
    frontier: list[dict[str, Any]]
    top_regret: list[dict[str, Any]]
    policies: list[dict[str, Any]]
    skipped: dict[str, dict[str, int]] = field(default_factory=dict)
    #: EvaluationCompleted rows (:mod:`.evaluations`), in log order
    evaluations: list[dict[str, Any]] = field(default_factory=list)


def _window_of(view: RunView, size: int) -> dict[str, int]:
    # the same ordering DifficultySeries.rows() windows by: (proposal time, env_id)
    order = sorted(view.difficulty.envs.items(), key=lambda kv: (kv[1]["t"], kv[0]))
    return {env_id: i // size for i, (env_id, _) in enumerate(order)}


def build_audit(log: EventLog, *, until: int | str | None = None, window: int = DEFAULT_WINDOW, top: int = 10) -> Audit:
    """Replay ``log`` (up to ``until``) into fresh projections and gather the audit."""
    config = recorded_config_or_default(log)
    with tempfile.TemporaryDirectory(prefix="spade-audit-") as tmp:
        result = replay_run(log, Path(tmp) / "p", config, until=until, window=window)
        view = RunView(log, Path(tmp) / "p", window=window)
        try:
            band = view.band
            envs = view.all_envs()
            for e in envs:
                e["frontier"] = frontier_bucket(e.get("win_rate_plain"), band)
            series = view.difficulty.rows()
            counts: dict[str, int] = {}
            evaluations: list[dict[str, Any]] = []
            for rec in _replayed(log, result.cursor):
                counts[rec.envelope.type] = counts.get(rec.envelope.type, 0) + 1
                row = evaluation_row(rec)
                if row is not None:
                    evaluations.append(row)
            wins = _window_of(view, window)
            occ: dict[tuple[int, str], dict[str, int]] = {}
            for e in envs:
                b = e["frontier"]
                if b is None or e["env_id"] not in wins:
                    continue
                for sk in ("*", e["skill"] or "?"):
                    cell = occ.setdefault((wins[e["env_id"]], sk), dict.fromkeys(BUCKETS, 0))
                    cell[b] += 1
            frontier = []
            for (w, sk), cell in sorted(occ.items(), key=lambda kv: (kv[0][0], kv[0][1] != "*", kv[0][1])):
                n = sum(cell.values())
                frontier.append({"window": w, "skill": sk, "estimated": n, **cell,
                                 "in_band_share": round(cell["in band"] / n, 12) if n else None})
            scored = [e for e in envs if e.get("regret") is not None]
            scored.sort(key=lambda e: (-e["regret"], -(e.get("designer_reward") or 0.0), e["env_id"]))
            top_rows = []
            for e in scored[:top]:
                detail = view.env(e["env_id"]) or {}
                lineage = detail.get("lineage", {})
                top_rows.append({
                    **{k: e.get(k) for k in ("env_id", "skill", "win_rate_plain", "win_rate_hinted", "regret",
                                             "designer_reward", "novelty", "attempt", "repair_of")},
                    "parents": [p["env_id"] for p in lineage.get("parents", [])],
                    "repair_chain": [p["env_id"] for p in lineage.get("repair_chain", [])],
                    "used_by": [p["env_id"] for p in lineage.get("children", [])],
                })
            return Audit(
                run_id=log.run_id, until=until, events=result.events, cursor=dict(result.cursor),
                counts=dict(sorted(counts.items())), band=band, window=window, series=series, envs=envs,
                verdicts=view.verdicts(), rejections=view.rejections(), frontier=frontier, top_regret=top_rows,
                policies=view.policies(), skipped={k: v for k, v in result.skipped.items() if v},
                evaluations=_with_steps(evaluations, view.policies()),
            )
        finally:
            view.close()


def _with_steps(rows: list[dict[str, Any]], policies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Evaluation rows with the trainer step of their policy version (None: not a version of the run)."""
    steps = version_steps(policies)
    return [{**r, "step": steps.get(str(r.get("policy_version")))} for r in rows]


def _replayed(log: EventLog, cursor: Cursor):
    """The records the replay applied (those before its final cursor)."""
    for rec in log.read({}):
        if rec.offset >= cursor.get(rec.partition, 0):
            continue
        yield rec


# -- files ---------------------------------------------------------------------------------------


def _cell(v: Any) -> str:
    """One CSV cell: numbers as written, text that a spreadsheet would read as a formula escaped."""
    if v is None:
        return ""
    if isinstance(v, str):
        return spreadsheet_safe(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(round(v, 12))
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True, separators=(",", ":"))
    return str(v)


def _csv(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    buf = io.StringIO()
    # RFC 4180 line ends: with "\r\n" as the terminator the writer also quotes a cell holding a
    # lone carriage return, which would otherwise end the row for readers
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in columns])
    return buf.getvalue()


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v) or "–"
    return str(v)


def _table(rows: list[dict[str, Any]], cols: list[tuple[str, str]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(label)}</th>" for _, label in cols)
    body = []
    for r in rows:
        cells = "".join(f"<td>{html.escape(_fmt(r.get(k)))}</td>" for k, _ in cols)
        body.append(f"<tr>{cells}</tr>")
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _figures(a: Audit) -> list[tuple[str, Any]]:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    figs = []
    skills = sorted({r["skill"] for r in a.series})
    names = list(METRICS)
    fig = make_subplots(rows=2, cols=3, subplot_titles=[METRICS[m] for m in names])
    palette = ["#111827", "#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04"]
    for si, sk in enumerate(skills):
        rows = [r for r in a.series if r["skill"] == sk]
        for mi, m in enumerate(names):
            fig.add_trace(go.Scatter(
                x=[r["window"] for r in rows], y=[r[m] for r in rows], mode="lines+markers",
                name="all skills" if sk == "*" else sk, legendgroup=sk, showlegend=mi == 0,
                line={"color": palette[si % len(palette)], "width": 3 if sk == "*" else 1.5},
            ), row=mi // 3 + 1, col=mi % 3 + 1)
    fig.update_layout(height=560, margin={"l": 40, "r": 10, "t": 40, "b": 30}, template="plotly_white")
    n_windows = len({r["window"] for r in a.series})
    fig.update_xaxes(dtick=max(1, -(-n_windows // 10)))
    figs.append(("fig-difficulty", fig))

    occ = [r for r in a.frontier if r["skill"] == "*"]
    fig = go.Figure()
    colors = {"too hard": "#7f1d1d", "below band": "#f87171", "in band": "#16a34a", "above band": "#60a5fa", "too easy": "#1e3a8a"}
    for b in BUCKETS:
        fig.add_trace(go.Bar(x=[r["window"] for r in occ], y=[r[b] for r in occ], name=b, marker_color=colors[b]))
    fig.update_layout(barmode="stack", height=320, title="frontier-band occupancy per window (plain win rate)",
                      xaxis_title="window", yaxis_title="environments", template="plotly_white",
                      xaxis={"dtick": max(1, -(-len(occ) // 10))},
                      margin={"l": 40, "r": 10, "t": 40, "b": 30})
    figs.append(("fig-frontier", fig))

    if a.rejections:
        labels = [f"{r['error_kind'] or '?'} / {r['failed_check'] or '?'}" for r in a.rejections]
        fig = go.Figure(go.Bar(x=[r["count"] for r in a.rejections], y=labels, orientation="h", marker_color="#b91c1c"))
        fig.update_layout(height=max(200, 28 * len(labels) + 80), title="rejection reasons", template="plotly_white",
                          yaxis={"autorange": "reversed"}, margin={"l": 200, "r": 10, "t": 40, "b": 30})
        figs.append(("fig-rejections", fig))

    curves = evaluation_curves(a.evaluations, a.policies)
    if curves["tasks"]:
        fig = go.Figure()
        for i, t in enumerate(curves["tasks"]):
            fig.add_trace(go.Scatter(
                x=t["x"], y=t["y"], mode="lines+markers", name=t["label"], text=t["versions"],
                error_y={"type": "data", "symmetric": False, "array": [h - y for h, y in zip(t["ci_high"], t["y"])],
                         "arrayminus": [y - lo for y, lo in zip(t["y"], t["ci_low"])]},
                line={"color": palette[(i + 1) % len(palette)]},
                hovertemplate="%{text} (step %{x}): %{y:.3f}<extra>%{fullData.name}</extra>",
            ))
        fig.update_layout(height=340, title="held-out accuracy per task vs policy version (95% interval)",
                          xaxis_title="policy version (trainer step)", yaxis_title="accuracy", yaxis={"range": [-0.04, 1.04]},
                          template="plotly_white", margin={"l": 40, "r": 10, "t": 40, "b": 30})
        figs.append(("fig-evaluations", fig))

    scored = [e for e in a.envs if e.get("regret") is not None]
    if scored:
        fig = go.Figure(go.Scatter(
            x=[e["win_rate_plain"] for e in scored], y=[e["regret"] for e in scored], mode="markers",
            text=[e["env_id"] for e in scored], marker={"size": 7, "color": [e.get("designer_reward") for e in scored],
                                                        "colorscale": "Viridis", "showscale": True,
                                                        "colorbar": {"title": "designer reward"}},
        ))
        fig.add_vrect(x0=a.band[0], x1=a.band[1], fillcolor="#16a34a", opacity=0.1, line_width=0)
        fig.update_layout(height=360, title="regret vs plain win rate (band shaded)", xaxis_title="win rate (plain)",
                          yaxis_title="regret", template="plotly_white", margin={"l": 40, "r": 10, "t": 40, "b": 30})
        figs.append(("fig-regret", fig))
    return figs


_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330;max-width:1300px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #e3e6eb;padding-bottom:4px}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0}th,td{border-bottom:1px solid #e3e6eb;padding:3px 8px;text-align:left}
th{color:#6b7280;font-weight:500}.muted{color:#6b7280}.kv td:first-child{color:#6b7280}"""


def render_html(a: Audit, generated_at: str) -> str:
    """The report page (plotly.js inlined, so it opens offline)."""
    import plotly.io as pio

    from .app import plotly_js_path

    by_id: dict[str, str] = {}
    for div_id, fig in _figures(a):
        by_id[div_id] = pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id,
                                    config={"displaylogo": False, "responsive": True})
    until = "whole log" if a.until is None else f"until {a.until}"
    summary_rows = [
        {"k": "run", "v": a.run_id}, {"k": "events replayed", "v": f"{a.events} ({until})"},
        {"k": "environments", "v": ", ".join(f"{k} {v}" for k, v in a.verdicts.items()) or "none"},
        {"k": "events by type", "v": ", ".join(f"{k} {v}" for k, v in a.counts.items())},
        {"k": "frontier band", "v": f"plain win rate in [{a.band[0]}, {a.band[1]}]"},
        {"k": "window", "v": f"{a.window} environments"},
    ]
    if a.skipped:
        summary_rows.append({"k": "skipped events", "v": json.dumps(a.skipped, sort_keys=True)})
    diff_cols = [("window", "window"), ("skill", "skill"), ("environments", "envs"), ("validated", "validated"),
                 ("validation_pass_rate", "pass rate"), ("acceptance_rate", "accept rate"), ("novelty", "novelty"),
                 ("win_rate_plain", "win plain"), ("win_rate_hinted", "win hinted"), ("regret", "regret"),
                 ("designer_reward", "designer reward")]
    occ_cols = [("window", "window"), ("skill", "skill"), ("estimated", "estimated"), *[(b, b) for b in BUCKETS],
                ("in_band_share", "in band share")]
    top_cols = [("env_id", "env"), ("skill", "skill"), ("regret", "regret"), ("win_rate_plain", "win plain"),
                ("win_rate_hinted", "win hinted"), ("designer_reward", "designer reward"), ("parents", "memory examples"),
                ("repair_chain", "repair of"), ("used_by", "used as example by")]
    eval_cols = [("suite", "suite"), ("task", "task"), ("policy_version", "version"), ("step", "step"), ("items", "items"),
                 ("k", "k"), ("accuracy", "accuracy"), ("ci_low", "95% low"), ("ci_high", "95% high"),
                 ("mean_score", "mean score"), ("model", "model"), ("producer", "by")]
    pol_cols = [("version", "version"), ("parent_version", "parent"), ("step", "step"), ("occurred_at", "at"),
                ("checkpoint_sha256", "checkpoint sha256"), ("metrics", "metrics")]
    pols = [{**p, "metrics": ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                       for k, v in sorted((p.get("metrics") or {}).items()))} for p in a.policies]
    body = f"""<h1>spade-engine audit · {html.escape(a.run_id)}</h1>
<p class="muted" id="generated">Generated {html.escape(generated_at)}</p>
{_table([{"k": r["k"], "v": r["v"]} for r in summary_rows], [("k", ""), ("v", "")], "kv")}
<h2>Difficulty evolution</h2>{by_id["fig-difficulty"]}
{_table(a.series, diff_cols)}
<h2>Frontier-band occupancy</h2>{by_id["fig-frontier"]}
{_table(a.frontier, occ_cols)}
<h2>Rejection reasons</h2>{by_id.get("fig-rejections", '<p class="muted">no rejected environments</p>')}
{_table(a.rejections, [("error_kind", "error kind"), ("failed_check", "failed check"), ("count", "environments")])}
<h2>Top-regret environments and their lineage</h2>{by_id.get("fig-regret", "")}
{_table(a.top_regret, top_cols)}
<h2>Policy versions</h2>
{_table(pols, pol_cols) if pols else '<p class="muted">no policy updates</p>'}
<h2>Held-out evaluation</h2>{by_id.get("fig-evaluations", "")}
{_table(a.evaluations, eval_cols) if a.evaluations else '<p class="muted">no EvaluationCompleted events</p>'}
<p class="muted">Tables: difficulty.csv (the series), environments.csv (every environment), evaluations.csv (every held-out result).</p>"""
    js = plotly_js_path().read_text(encoding="utf-8")
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>audit {html.escape(a.run_id)}</title>'
            f"<style>{_CSS}</style><script>{js}</script></head><body>\n{body}\n</body></html>\n")


def write_audit(a: Audit, out_dir: str | Path, *, generated_at: str | None = None) -> list[Path]:
    """Write ``report.html``, ``difficulty.csv`` and ``environments.csv`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stamp = generated_at or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    files = {
        "report.html": render_html(a, stamp),
        "difficulty.csv": _csv(a.series, DIFFICULTY_COLUMNS),
        "environments.csv": _csv(a.envs, ENV_COLUMNS),
        "evaluations.csv": _csv(a.evaluations, EVAL_COLUMNS),
    }
    written = []
    for name, text in files.items():
        path = out / name
        tmp = path.with_name(path.name + ".part")
        tmp.write_text(text, encoding="utf-8", newline="")
        tmp.replace(path)
        written.append(path)
    return written


def print_summary(a: Audit, console: Any = None, *, max_rows: int = 20) -> None:
    """The audit on stdout: tables on a terminal, ``# title`` + TSV blocks in a pipe or file.
    Skills, error kinds, checks and ids come from the log (model-written): they are printed as
    escaped text, never as markup."""
    from ..textout import aside, say, styled, table as print_table

    until = "whole log" if a.until is None else f"until {a.until}"
    say(styled(("audit of ", "bold"), (a.run_id, "bold"),
               (f" · {a.events} events ({until}) · " + ", ".join(f"{k} {v}" for k, v in a.verdicts.items()), None)))

    def table(title: str, rows: list[dict[str, Any]], cols: list[tuple[str, str]]) -> None:
        shown = rows[-max_rows:]
        print_table([label for _, label in cols], [[_fmt(r.get(k)) for k, _ in cols] for r in shown], title=title,
                    heading=True, console=console)
        if len(rows) > len(shown):
            aside(f"({len(rows) - len(shown)} earlier rows of {title} in the report)")

    table("difficulty by window and skill", a.series,
          [("window", "window"), ("skill", "skill"), ("environments", "envs"), ("validation_pass_rate", "pass rate"),
           ("novelty", "novelty"), ("win_rate_plain", "win plain"), ("win_rate_hinted", "win hinted"),
           ("regret", "regret"), ("designer_reward", "reward")])
    table("rejection reasons", a.rejections, [("error_kind", "error kind"), ("failed_check", "failed check"), ("count", "n")])
    table(f"frontier-band occupancy (band [{a.band[0]}, {a.band[1]}])", [r for r in a.frontier if r["skill"] == "*"],
          [("window", "window"), ("estimated", "estimated"), *[(b, b) for b in BUCKETS], ("in_band_share", "in band share")])
    table("top-regret environments", a.top_regret,
          [("env_id", "env"), ("skill", "skill"), ("regret", "regret"), ("win_rate_plain", "win plain"),
           ("designer_reward", "reward"), ("parents", "memory examples"), ("repair_chain", "repair of")])
    table("policy versions", a.policies, [("version", "version"), ("parent_version", "parent"), ("step", "step"), ("metrics", "metrics")])
    if a.evaluations:
        table("held-out evaluation", a.evaluations,
              [("suite", "suite"), ("task", "task"), ("policy_version", "version"), ("step", "step"), ("items", "items"),
               ("accuracy", "acc"), ("ci_low", "95% low"), ("ci_high", "95% high")])
