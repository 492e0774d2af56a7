"""The comparison as a self-contained HTML page (plotly.js inlined, so it opens offline)."""

from __future__ import annotations

import html

from .summary import AccuracyComparison, Comparison

__all__ = ["render_html"]

_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2330;max-width:1200px}
h1{font-size:21px}h2{font-size:16px;margin-top:26px;border-bottom:1px solid #e3e6eb;padding-bottom:4px}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0}th,td{border-bottom:1px solid #e3e6eb;padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}th{color:#6b7280;font-weight:500}.muted{color:#6b7280}"""
COLORS = ("#2563eb", "#dc2626")


def _f(v: object, d: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{d}f}"
    return str(v)


def _rows(rows: list[list[object]], head: list[str]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_f(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _accuracy_figures(c: Comparison, acc: AccuracyComparison) -> list[tuple[str, object]]:
    """The accuracy bars and the per-task differences (runs compared on held-out items)."""
    import plotly.graph_objects as go

    labels = [t.label for t in acc.tasks] + ["mean over tasks"]
    out = []
    fig = go.Figure()
    for name, ys, color in (
        (f"A {c.a.run_id} ({acc.version_a})", [t.accuracy_a for t in acc.tasks] + [acc.macro_a], COLORS[0]),
        (f"B {c.b.run_id} ({acc.version_b})", [t.accuracy_b for t in acc.tasks] + [acc.macro_b], COLORS[1]),
    ):
        fig.add_trace(go.Bar(x=labels, y=ys, name=name, marker_color=color))
    fig.update_layout(barmode="group", height=360, title="held-out accuracy on common items", yaxis={"range": [0, 1]},
                      template="plotly_white", margin={"l": 40, "r": 10, "t": 40, "b": 60})
    out.append(("fig-accuracy", fig))

    fig = go.Figure(go.Scatter(
        x=[t.delta for t in acc.tasks], y=[t.label for t in acc.tasks], mode="markers", marker={"size": 9, "color": COLORS[1]},
        error_x={"type": "data", "symmetric": False, "array": [t.delta_high - t.delta for t in acc.tasks],
                 "arrayminus": [t.delta - t.delta_low for t in acc.tasks]}, name="B - A",
    ))
    fig.add_vline(x=0, line_width=1, line_color="#6b7280")
    fig.update_layout(height=max(220, 40 * len(acc.tasks) + 100), title="accuracy difference B - A per task (paired, 95% interval)",
                      template="plotly_white", margin={"l": 200, "r": 10, "t": 40, "b": 30}, showlegend=True)
    out.append(("fig-delta", fig))
    return out


def figures(c: Comparison) -> list[tuple[str, object]]:
    """(div id, plotly figure) of the accuracy (when compared), frontier and compute charts."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    out = [] if c.accuracy is None else _accuracy_figures(c, c.accuracy)
    fig = make_subplots(rows=1, cols=2, subplot_titles=["frontier-band occupancy (share of estimated environments)",
                                                        "compute (completion tokens)"])
    buckets = list(c.a.frontier.buckets)
    for i, (s, color) in enumerate(((c.a, COLORS[0]), (c.b, COLORS[1]))):
        n = max(1, s.frontier.estimated)
        fig.add_trace(go.Bar(x=buckets, y=[s.frontier.buckets[b] / n for b in buckets], name="AB"[i], marker_color=color,
                             legendgroup="AB"[i]), row=1, col=1)
        fig.add_trace(go.Bar(x=["agent", "hints", "designer", "evaluation"],
                             y=[s.compute.agent_tokens, s.compute.hint_tokens, s.compute.designer_tokens, s.compute.eval_tokens],
                             name="AB"[i], marker_color=color, legendgroup="AB"[i], showlegend=False), row=1, col=2)
    fig.update_layout(barmode="group", height=360, template="plotly_white", margin={"l": 40, "r": 10, "t": 40, "b": 40})
    out.append(("fig-frontier-compute", fig))
    return out


def render_html(c: Comparison) -> str:
    import plotly.io as pio

    from ..dashboard.app import plotly_js_path

    acc = c.accuracy
    charts = "".join(pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div,
                                 config={"displaylogo": False, "responsive": True}) for div, fig in figures(c))
    if acc is None:
        accuracy = f'<p class="muted">Not compared: {html.escape(c.accuracy_note or "no evaluations")}</p>'
    else:
        task_rows = [[t.label, t.items, t.accuracy_a, t.accuracy_b, t.delta, f"{t.delta_low:.3f} – {t.delta_high:.3f}",
                      t.a_only, t.b_only, t.mcnemar_p] for t in acc.tasks]
        task_rows.append(["mean over tasks", sum(t.items for t in acc.tasks), acc.macro_a, acc.macro_b,
                          (acc.macro_b or 0) - (acc.macro_a or 0), "", "", "", None])
        accuracy = (_rows(task_rows, ["task", "items", "A", "B", "B - A", "95% interval", "A only", "B only", "McNemar p"])
                    + f'<p class="muted">Tasks evaluated by one run only: A {html.escape(", ".join(acc.only_a) or "none")}; '
                    f'B {html.escape(", ".join(acc.only_b) or "none")}.</p>')
    fa, fb, ca, cb = c.a.frontier, c.b.frontier, c.a.compute, c.b.compute
    side = [
        ["policy", c.a.policy, c.b.policy], ["environment source", c.a.env_source, c.b.env_source],
        ["version compared", acc.version_a if acc else "–", acc.version_b if acc else "–"],
        ["environments (accepted)", f"{ca.environments} ({ca.accepted})", f"{cb.environments} ({cb.accepted})"],
        ["plays", ca.plays, cb.plays], ["policy updates", ca.updates, cb.updates],
        ["completion tokens (agent + hints + designer)", ca.completion_tokens, cb.completion_tokens],
        ["tokens trained on", ca.trained_tokens, cb.trained_tokens], ["evaluation tokens", ca.eval_tokens, cb.eval_tokens],
        [f"in frontier band [{fa.band[0]}, {fa.band[1]}] / [{fb.band[0]}, {fb.band[1]}]", fa.in_band_share, fb.in_band_share],
        ["estimated environments", fa.estimated, fb.estimated],
    ]
    js = plotly_js_path().read_text(encoding="utf-8")
    body = f"""<h1>spade-engine compare · A {html.escape(c.a.run_id)} vs B {html.escape(c.b.run_id)}</h1>
<h2>Runs</h2>{_rows(side, ["", "A", "B"])}
<h2>Held-out accuracy (paired on item ids)</h2>{accuracy}
{charts}"""
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>compare {html.escape(c.a.run_id)} '
            f'{html.escape(c.b.run_id)}</title><style>{_CSS}</style><script>{js}</script></head><body>\n{body}\n</body></html>\n')
