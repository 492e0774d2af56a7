// spade-engine dashboard: loads state over the JSON API, then follows the SSE stream.
// Text from the run (env ids, skills, hints, check details, metric names) only ever reaches the
// page as DOM text (el() below) or, inside charts, escaped for plotly's own markup (plotText).
"use strict";
const QS = document.body.dataset.qs || "";
const TOKEN = new URLSearchParams(QS).get("token");
const METRICS = ["win_rate_plain", "win_rate_hinted", "regret", "designer_reward", "validation_pass_rate", "novelty"];
const RATES = new Set(["win_rate_plain", "win_rate_hinted", "validation_pass_rate"]);
const COUNTERS = [
  ["events", "events"], ["EnvironmentProposed", "proposed"], ["accepted", "accepted"], ["rejected", "rejected"],
  ["RolloutCompleted", "plays"], ["RegretEstimated", "scored"], ["PolicyUpdated", "policy versions"],
  ["events_per_s", "events / s"], ["latest_regret", "regret (rolling)"], ["latest_win", "win plain (rolling)"],
];
const S = { version: -1, seriesAt: 0, pendingRefresh: null, envPage: 0, envLimit: 50, selected: null,
  series: null, training: null, evaluations: null, window: initialWindow() };

function initialWindow() {
  const asked = parseInt(new URLSearchParams(location.search).get("window"), 10);
  const dflt = parseInt(document.body.dataset.window, 10);
  return asked >= 1 ? asked : (dflt >= 1 ? dflt : 10);
}
function url(path, params) {
  const u = new URL(path, document.baseURI);
  for (const [k, v] of Object.entries(params || {})) if (v !== "" && v !== null && v !== undefined) u.searchParams.set(k, v);
  if (TOKEN) u.searchParams.set("token", TOKEN);
  return u.toString();
}
async function api(path, params) {
  const r = await fetch(url(path, params));
  if (!r.ok) throw new Error(path + ": " + r.status);
  return r.json();
}
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k === null || k === undefined ? "" : String(k)));
  return e;
}
const fmt = (x, d = 3) => (x === null || x === undefined) ? "–" : (typeof x === "number" ? (Number.isInteger(x) ? String(x) : x.toFixed(d)) : String(x));
// plotly renders a small HTML subset in names and hover text: entities keep run text literal
const plotText = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

// ---- routes: #/env/<env id> opens the environment browser on one environment -------------------
const envHash = (id) => "#/env/" + encodeURIComponent(id);
function envFromHash() {
  const m = /^#\/env\/(.+)$/.exec(location.hash);
  if (!m) return null;
  try { return decodeURIComponent(m[1]); } catch (err) { return null; }
}
function goEnv(id) {
  if (location.hash === envHash(id)) openEnv(id); else location.hash = envHash(id);
}
window.addEventListener("hashchange", () => { const id = envFromHash(); if (id !== null) openEnv(id, true); });

// ---- counters ------------------------------------------------------------------------------
function renderSummary(s) {
  S.summary = s;
  // the newest rolling means at the page's window (the summary's are at the server's default)
  const own = S.series && S.series.window === S.window && S.series.latest ? S.series.latest["*"] : null;
  const latest = own || s.latest || {};
  const win = own ? S.series.window : s.window;
  const vals = Object.assign({}, s.counts, {
    events: s.events, accepted: (s.verdicts || {}).accepted || 0, rejected: (s.verdicts || {}).rejected || 0,
    events_per_s: s.events_per_s, latest_regret: latest.regret, latest_win: latest.win_rate_plain,
  });
  const box = document.getElementById("counters");
  box.replaceChildren(...COUNTERS.map(([k, label]) => el("div", { class: "counter", id: "counter-" + k },
    el("div", { class: "v" }, fmt(vals[k] === undefined ? 0 : vals[k], 3)),
    el("div", { class: "k" }, label.replace("(rolling)", `(last ${win || "?"})`)))));
  const st = document.getElementById("status");
  if (s.error) { st.textContent = "error: " + s.error; st.className = "badge down"; }
  else if (!s.caught_up) { st.textContent = `catching up ${s.applied} / ${s.log_end_at_start}`; st.className = "badge catching"; }
  else if (s.stopped) { st.textContent = "run stopped · " + s.events + " events"; st.className = "badge stopped"; }
  else { st.textContent = "live · " + s.events + " events"; st.className = "badge live"; }
  if (s.version !== S.version) { S.version = s.version; scheduleRefresh(); }
}

// ---- charts --------------------------------------------------------------------------------
const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];
const PLOT_CONFIG = { displayModeBar: false, responsive: true };
function baseLayout(xTitle, xRange) {
  return {
    margin: { l: 44, r: 10, t: 8, b: 40 }, height: 290, hovermode: "closest", showlegend: true,
    legend: { orientation: "h", x: 0, y: 1.0, yanchor: "bottom", font: { size: 10.5 }, bgcolor: "rgba(255,255,255,0)" },
    xaxis: { title: { text: xTitle, font: { size: 11 }, standoff: 6 }, range: xRange, zeroline: false, gridcolor: "#eef0f3", automargin: true },
    yaxis: { zeroline: false, gridcolor: "#eef0f3", automargin: true },
    paper_bgcolor: "#fff", plot_bgcolor: "#fff", font: { family: "system-ui, sans-serif", size: 11, color: "#1d2330" },
  };
}
function bindClicks(div) {
  if (div.dataset.clicks) return;
  div.dataset.clicks = "1";
  div.on("plotly_click", (ev) => { const p = ev.points && ev.points[0]; if (p && p.customdata) goEnv(p.customdata); });
}
function emptyNote(layout, text) {
  layout.annotations = [{ text: plotText(text), xref: "paper", yref: "paper", x: 0.5, y: 0.5, showarrow: false, font: { size: 12, color: "#6b7280" } }];
}
// distinct colours for skills (no two alike up to 18 skills, then they repeat): one per skill, by
// its rank among the run's skills, the same in every chart
const SKILL_COLORS = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#0fa3b1", "#f032e6", "#800000", "#000075",
  "#808000", "#ff6f91", "#00bfff", "#ff4500", "#ff1493", "#4b0082", "#2f4f4f", "#a52a2a", "#d4a600"];
const MEAN_COLOR = "#111827";
const BAND = { color: "#16a34a", opacity: 0.14 };
function skillColor(skills, skill) { return SKILL_COLORS[Math.max(0, skills.indexOf(skill)) % SKILL_COLORS.length]; }
function rgba(hex, a) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${a})`;
}
function frontierShape(lo, hi, legend) {
  return { type: "rect", name: "frontier band", showlegend: legend, xref: "paper", x0: 0, x1: 1,
    yref: "y", y0: lo, y1: hi, fillcolor: BAND.color, opacity: BAND.opacity, line: { width: 0 }, layer: "below", legendrank: 2000 };
}
// one group's curve as (mean band, dots, mean line): the band is the 95% interval of the mean
function groupTraces(c, label, color, dotColor, opts) {
  const band = { type: "scatter", mode: "lines", x: c.x.concat(c.x.slice().reverse()), y: c.hi.concat(c.lo.slice().reverse()),
    fill: "toself", fillcolor: rgba(color, 0.16), line: { width: 0 }, hoverinfo: "skip", name: opts.bandName, showlegend: opts.legend };
  const dots = { type: "scatter", mode: "markers", name: opts.dotsName, x: c.x, y: c.y, customdata: c.ids, text: c.ids.map(plotText),
    marker: { size: opts.dotSize || 5, color: dotColor, opacity: 0.5 }, showlegend: opts.legend,
    hovertemplate: "%{text}<br>env #%{x} · %{y:.3f}<extra></extra>" };
  const mean = { type: "scatter", mode: "lines", name: opts.meanName, x: c.x, y: c.mean, customdata: c.ids, showlegend: opts.legend,
    line: { width: opts.meanWidth || 2.5, color }, hovertemplate: plotText(label) + " mean at env #%{x}: %{y:.3f}<extra></extra>" };
  return [band, dots, mean];
}
function metricLayout(m, xRange, data) {
  const layout = baseLayout("environment index", xRange);
  // a short legend in one row above the plot: it never scrolls and never takes the plot's width
  Object.assign(layout.legend, { orientation: "h", x: 0, xanchor: "left", y: 1.02, yanchor: "bottom", font: { size: 10.5 } });
  layout.margin = { l: 44, r: 10, t: 30, b: 40 };
  if (RATES.has(m) || m === "novelty") layout.yaxis.range = [-0.04, 1.04];
  else layout.yaxis.rangemode = m === "regret" ? "tozero" : "normal";
  if (m === "win_rate_plain") layout.shapes = [frontierShape(data.band[0], data.band[1], true)];
  return layout;
}
function renderSeries(data) {
  S.series = data;
  if (S.summary) renderSummary(S.summary);
  const skills = Object.keys(data.groups).filter((s) => s !== "*").sort();
  const sel = document.getElementById("skill-filter");
  const have = new Set([...sel.options].map((o) => o.value));
  for (const s of skills) if (!have.has(s)) sel.append(el("option", { value: s }, s));
  const only = skills.includes(sel.value) ? sel.value : "";
  const [lo, hi] = data.band;
  document.getElementById("series-note").textContent =
    `${data.environments} environments · x = environment index · dots: each environment · line: mean of the last ${data.window}` +
    ` values, shaded: its 95% interval · green: frontier band [${lo}, ${hi}] on the plain win rate · click a dot to open its environment` +
    (data.thinned ? ` · thinned to ≤ ${data.max_points} points per line` : "");
  const n = data.environments;
  const pad = Math.max(0.5, n * 0.015);
  const xRange = [-pad, Math.max(n - 1, 1) + pad];
  for (const m of METRICS) {
    const all = (data.groups["*"] || {})[m];
    let traces = [];
    if (!only) {
      if (all && all.x.length) {
        traces = groupTraces(all, "all skills", MEAN_COLOR, "#94a3b8", { legend: true, bandName: "95% interval",
          dotsName: "each environment", meanName: `mean of last ${data.window}` });
      }
    } else {
      const c = (data.groups[only] || {})[m];
      const color = skillColor(skills, only);
      if (c && c.x.length) {
        traces = groupTraces(c, only, color, color, { legend: true, bandName: "95% interval", dotsName: "each",
          meanName: plotText(only) });
      }
      if (all && all.x.length) {  // the whole run's mean, for reference
        traces.push({ type: "scatter", mode: "lines", name: "all skills", x: all.x, y: all.mean, hoverinfo: "skip",
          line: { width: 1.2, color: "#6b7280", dash: "dot" } });
      }
    }
    const layout = metricLayout(m, xRange, data);
    if (!traces.length) emptyNote(layout, "no values yet");
    const div = document.getElementById("chart-" + m);
    Plotly.react(div, traces, layout, PLOT_CONFIG);
    bindClicks(div);
  }
  renderMultiples(data, skills, xRange);
}
// small multiples: the plain win rate of each skill in a chart of its own, same axes, its colour
function renderMultiples(data, skills, xRange) {
  const box = document.getElementById("skill-multiples");
  const [lo, hi] = data.band;
  document.getElementById("multiples-note").textContent = skills.length
    ? `${skills.length} skills · same axes as above · click a chart to show that skill in the charts above`
    : "no skills yet";
  while (box.children.length > skills.length) { Plotly.purge(box.lastChild.querySelector(".chart")); box.lastChild.remove(); }
  while (box.children.length < skills.length) {
    const i = box.children.length;
    const fig = el("figure", { class: "chart-box small", id: "multiple-" + i },
      el("figcaption", {}, el("span", { class: "swatch" }), el("span", { class: "name" }, "")), el("div", { class: "chart", id: "multiple-chart-" + i }));
    fig.addEventListener("click", () => {
      const sel = document.getElementById("skill-filter");
      sel.value = fig.dataset.skill;
      renderSeries(S.series);
      document.getElementById("difficulty").scrollIntoView({ block: "start" });
    });
    box.append(fig);
  }
  skills.forEach((skill, i) => {
    const fig = box.children[i];
    const color = skillColor(skills, skill);
    const c = (data.groups[skill] || {}).win_rate_plain;
    fig.dataset.skill = skill;
    fig.querySelector(".swatch").style.background = color;
    fig.querySelector(".name").textContent = `${skill} · ${c ? c.n : 0} estimated`;
    const traces = c && c.x.length ? groupTraces(c, skill, color, color, { legend: false, dotSize: 4, meanWidth: 2 }) : [];
    const layout = baseLayout("", xRange);
    Object.assign(layout, { height: 150, showlegend: false, margin: { l: 30, r: 6, t: 4, b: 20 } });
    layout.xaxis.title = { text: "" };
    layout.yaxis.range = [-0.04, 1.04];
    layout.yaxis.tickvals = [0, 0.5, 1];
    layout.shapes = [frontierShape(lo, hi, false)];
    if (!traces.length) emptyNote(layout, "not estimated yet");
    Plotly.react("multiple-chart-" + i, traces, layout, PLOT_CONFIG);
  });
}
function renderTraining(data) {
  S.training = data;
  const all = document.getElementById("training-all").checked;
  const box = document.getElementById("training-charts");
  const shown = data.metrics.filter((m) => all || m.headline);
  const hidden = data.metrics.length - shown.length;
  document.getElementById("training-note").textContent = data.updates
    ? `${data.updates} policy updates · x = policy version (trainer step) · dashed: mean of the last ${data.window} updates` +
      ` · ${data.metrics.length} metrics recorded` + (hidden > 0 ? ` (${hidden} more with “all metrics”)` : "")
    : "no policy updates yet (PolicyUpdated events carry the trainer's metrics)";
  document.getElementById("training-all-label").hidden = !data.metrics.some((m) => !m.headline);
  // one chart per metric shown, kept in order; ids by position, the metric name as text only
  const want = shown.map((m, i) => "train-" + i);
  while (box.children.length > want.length) { Plotly.purge(box.lastChild.querySelector(".chart")); box.lastChild.remove(); }
  while (box.children.length < want.length) {
    const i = box.children.length;
    box.append(el("figure", { class: "chart-box" }, el("figcaption", {}, ""), el("div", { class: "chart", id: want[i] })));
  }
  const ticks = data.x.length <= 16 ? { tickmode: "array", tickvals: data.x, ticktext: data.versions.map(plotText) } : {};
  const lo = data.x.length ? data.x[0] : 0, hi = data.x.length ? data.x[data.x.length - 1] : 1;
  const pad = Math.max(0.5, (hi - lo) * 0.03);
  shown.forEach((m, i) => {
    const fig = box.children[i];
    fig.dataset.metric = m.name;
    fig.querySelector("figcaption").textContent = m.name;
    const traces = [{ type: "scatter", mode: "lines+markers", name: "each update", x: data.x, y: m.y, customdata: data.versions.map(plotText),
      line: { width: 1.5, color: PALETTE[i % PALETTE.length] }, marker: { size: 6 }, connectgaps: true,
      hovertemplate: "%{customdata} (step %{x}): %{y:.4g}<extra></extra>" }];
    if (m.n >= 3) {
      traces.push({ type: "scatter", mode: "lines", name: `mean of last ${data.window}`, x: data.x, y: m.mean, connectgaps: true,
        line: { width: 2, color: "#111827", dash: "dash" }, hovertemplate: "mean at step %{x}: %{y:.4g}<extra></extra>" });
    }
    const layout = baseLayout("policy version (step)", [lo - pad, hi + pad]);
    layout.height = 230;
    Object.assign(layout.xaxis, ticks);
    Plotly.react(want[i], traces, layout, PLOT_CONFIG);
  });
}

function renderEvaluations(data) {
  S.evaluations = data;
  const tasks = data.tasks || [];
  const steps = tasks.flatMap((t) => t.x).concat(S.training ? S.training.x : []);
  document.getElementById("eval-note").textContent = data.points
    ? `${data.points} evaluation points on ${tasks.length} task(s) · x = policy version (trainer step; v0 = base weights at 0)` +
      ` · error bars: 95% interval` + (data.unplaced ? ` · ${data.unplaced} result(s) of versions this run never trained not shown` : "")
    : "no held-out evaluations yet (the trainer records EvaluationCompleted every eval.every updates; or run spade-engine eval --run)";
  const traces = tasks.map((t, i) => ({
    type: "scatter", mode: "lines+markers", name: plotText(t.label), x: t.x, y: t.y,
    customdata: t.versions.map((v, j) => [plotText(v), t.items[j], t.k[j], t.ci_low[j], t.ci_high[j]]),
    error_y: { type: "data", symmetric: false, array: t.ci_high.map((h, j) => h - t.y[j]), arrayminus: t.y.map((y, j) => y - t.ci_low[j]),
      thickness: 1, width: 3, color: PALETTE[i % PALETTE.length] },
    line: { width: 2, color: PALETTE[i % PALETTE.length] }, marker: { size: 7 },
    hovertemplate: plotText(t.label) + " · %{customdata[0]} (step %{x}): %{y:.3f} [%{customdata[3]:.3f}, %{customdata[4]:.3f}]" +
      " · %{customdata[1]} items × %{customdata[2]}<extra></extra>",
  }));
  const lo = steps.length ? Math.min(...steps) : 0, hi = steps.length ? Math.max(...steps) : 1;
  const pad = Math.max(0.5, (hi - lo) * 0.03);
  const layout = baseLayout("policy version (step)", [lo - pad, hi + pad]);
  // version names as ticks, as on the training charts (v0 = the base weights at step 0)
  const names = new Map([[0, "v0"]]);
  if (S.training) S.training.x.forEach((x, i) => names.set(x, S.training.versions[i]));
  tasks.forEach((t) => t.x.forEach((x, i) => names.set(x, t.versions[i])));
  const ticks = [...new Set(steps)].sort((a, b) => a - b);
  if (ticks.length <= 16) Object.assign(layout.xaxis, { tickmode: "array", tickvals: ticks, ticktext: ticks.map((x) => plotText(names.get(x))) });
  layout.yaxis.range = [-0.04, 1.04];
  layout.yaxis.title = { text: "accuracy", font: { size: 11 } };
  Object.assign(layout.legend, { orientation: "v", x: 1.02, xanchor: "left", y: 1, yanchor: "top" });
  if (!traces.length) emptyNote(layout, "no evaluations yet");
  Plotly.react("chart-evaluations", traces, layout, PLOT_CONFIG);
}

// ---- live feed -----------------------------------------------------------------------------
function feedRow(e, isNew) {
  return el("div", { class: "ev" + (isNew ? " new" : ""), "data-offset": e.offset, "data-type": e.type },
    el("span", { class: "o" }, e.partition + ":" + e.offset), el("span", { class: "muted" }, (e.occurred_at || "").slice(11, 23)),
    el("span", { class: "t t-" + e.type }, e.type), el("span", { class: "k", title: e.key }, e.key), el("span", { class: "s", title: e.summary }, e.summary));
}
function addFeed(items, isNew) {
  const box = document.getElementById("feed");
  const seen = new Set([...box.children].map((c) => c.dataset.offset + "/" + c.dataset.type));
  const fresh = items.filter((e) => !seen.has(e.offset + "/" + e.type));
  const frag = document.createDocumentFragment();
  for (const e of fresh.slice(-300).reverse()) frag.append(feedRow(e, isNew));
  box.prepend(frag);
  while (box.children.length > 300) box.lastChild.remove();
  document.getElementById("feed-note").textContent = `latest ${box.children.length} events, newest first`;
}

// ---- rejections, policies ------------------------------------------------------------------
function renderRejections(rows) {
  document.querySelector("#rejections tbody").replaceChildren(...rows.map((r) =>
    el("tr", {}, el("td", {}, r.error_kind || "–"), el("td", {}, r.failed_check || "–"), el("td", { class: "n" }, r.count))));
}
function renderPolicies(rows) {
  document.querySelector("#policies tbody").replaceChildren(...rows.map((p) =>
    el("tr", { "data-version": p.version }, el("td", { class: "mono" }, p.version), el("td", { class: "mono" }, p.parent_version || "–"),
      el("td", { class: "n" }, p.step), el("td", {}, (p.occurred_at || "").replace("T", " ").slice(0, 19)),
      el("td", { class: "mono", title: p.checkpoint_uri || "" }, (p.checkpoint_sha256 || "–").slice(0, 12)),
      el("td", { class: "mono small" }, Object.entries(p.metrics || {}).map(([k, v]) => k + "=" + fmt(v, 4)).join("  ")))));
}

// ---- environment browser -------------------------------------------------------------------
function envLink(id, attrs) {
  return el("a", Object.assign({ class: "env", href: envHash(id), onclick: (ev) => ev.stopPropagation() }, attrs || {}), id);
}
async function loadEnvs() {
  const params = { q: document.getElementById("env-search").value, verdict: document.getElementById("env-verdict").value,
    skill: document.getElementById("env-skill").value, sort: document.getElementById("env-sort").value,
    desc: document.getElementById("env-desc").checked, limit: S.envLimit, offset: S.envPage * S.envLimit };
  const data = await api("api/envs", params);
  const pages = Math.max(1, Math.ceil(data.total / S.envLimit));
  S.envPages = pages;
  document.getElementById("env-count").textContent = `${data.total} environments · page ${S.envPage + 1} of ${pages}`;
  const key = JSON.stringify(data.rows);
  if (key === S.envRowsKey) return;  // unchanged: keep the rows (and what the pointer is on)
  S.envRowsKey = key;
  document.querySelector("#env-table tbody").replaceChildren(...data.rows.map((r) =>
    el("tr", { "data-env-id": r.env_id, class: r.env_id === S.selected ? "sel" : "", onclick: () => goEnv(r.env_id) },
      el("td", {}, envLink(r.env_id)), el("td", {}, r.skill),
      el("td", { class: "v-" + r.verdict }, r.verdict + (r.error_kind ? " (" + r.error_kind + ")" : "")),
      el("td", { class: "small" }, ...(r.repaired_by ? ["repaired by ", envLink(r.repaired_by, { "data-rel": "repaired-by" })] : []),
        ...(r.repair_of ? [r.repaired_by ? " · " : "", "repair of ", envLink(r.repair_of, { "data-rel": "repair-of" })] : [])),
      el("td", { class: "n" }, fmt(r.win_rate_plain, 2)), el("td", { class: "n" }, fmt(r.win_rate_hinted, 2)), el("td", { class: "n" }, fmt(r.regret)),
      el("td", { class: "n" }, fmt(r.designer_reward)), el("td", { class: "n" }, fmt(r.novelty)))));
}
function briefList(items, empty) {
  if (!items || !items.length) return el("p", { class: "muted" }, empty || "none");
  return el("ul", {}, ...items.map((b) => el("li", {}, envLink(b.env_id), " ", el("span", { class: "v-" + b.verdict }, b.verdict),
    b.error_kind ? " (" + b.error_kind + ")" : "", b.relation ? " · " + b.relation : "",
    " · regret " + fmt(b.regret) + " · win " + fmt(b.win_rate_plain, 2) + (b.novelty !== undefined && b.novelty !== null ? " · novelty " + fmt(b.novelty) : ""))));
}
function repairBox(e) {
  const lines = [];
  if (e.verdict === "rejected") {
    const why = [e.error_kind, e.failed_check ? "failed check " + e.failed_check : ""].filter(Boolean).join(" · ");
    lines.push(el("div", { class: "fail" }, "Rejected" + (why ? ": " + why : "")));
    if (e.lineage.repairs.length) {
      lines.push(el("div", { id: "env-repaired-by" }, "Repaired by ", ...e.lineage.repairs.flatMap((r, i) =>
        [i ? ", " : "", envLink(r.env_id, { "data-rel": "repaired-by" }), " ", el("span", { class: "v-" + r.verdict }, "(" + r.verdict + ")")])));
    } else {
      lines.push(el("div", { class: "muted", id: "env-repaired-by" }, "no repair proposed"));
    }
  }
  if (e.repair_of) {
    const prev = e.lineage.repair_chain[0] || { env_id: e.repair_of, verdict: "unknown" };
    lines.push(el("div", { id: "env-repair-of" }, `Repair (attempt ${e.attempt}) of `, envLink(prev.env_id, { "data-rel": "repair-of" }), " ",
      el("span", { class: "v-" + prev.verdict }, "(" + prev.verdict + (prev.error_kind ? ": " + prev.error_kind : "") + ")")));
  }
  return lines.length ? el("div", { class: "repair-box v-box-" + e.verdict, id: "env-repair" }, ...lines) : "";
}
async function openEnv(id, scroll) {
  S.selected = id;
  for (const tr of document.querySelectorAll("#env-table tbody tr")) tr.classList.toggle("sel", tr.dataset.envId === id);
  const box = document.getElementById("env-detail");
  if (scroll) document.getElementById("environments").scrollIntoView({ block: "start" });
  let e;
  try { e = await api("api/envs/" + encodeURIComponent(id)); }
  catch (err) {
    // not (yet) in the archive: look again after each refresh while the dashboard catches up
    S.missingEnv = id;
    const catching = !S.summary || !S.summary.caught_up;
    box.replaceChildren(el("h3", { id: "env-title", class: "mono" }, id), el("p", { class: catching ? "muted" : "fail" },
      catching ? "not in the archive yet: the dashboard is still reading the log" : "no such environment in this run (" + String(err) + ")"));
    return;
  }
  if (S.selected !== id) return;  // another environment was opened meanwhile
  S.missingEnv = null;
  const code = el("div", { id: "env-code" }); code.innerHTML = e.code_html;  // pygments output: escaped server-side
  const kv = [["skill", e.skill], ["verdict", e.verdict + (e.error_kind ? " · " + e.error_kind : "") + (e.failed_check ? " · failed " + e.failed_check : "")],
    ["difficulty asked", fmt(e.difficulty, 2)], ["class", e.class_name], ["attempt", e.attempt], ["document", [e.document_source, e.document_title].filter(Boolean).join(" · ")],
    ["plays", `${e.plays_plain} plain + ${e.plays_hinted} hinted`], ["win rate", `${fmt(e.win_rate_plain, 2)} plain · ${fmt(e.win_rate_hinted, 2)} hinted`],
    ["regret", fmt(e.regret)], ["designer reward", fmt(e.designer_reward)], ["novelty", fmt(e.novelty)], ["policy", e.policy_version], ["offsets", `${e.first_offset} – ${e.last_offset}`]];
  box.replaceChildren(
    el("div", { class: "env-head" }, el("h3", { id: "env-title", class: "mono" }, e.env_id),
      el("a", { id: "env-permalink", class: "permalink", href: envHash(e.env_id), title: "shareable address of this environment" }, "link")),
    repairBox(e),
    el("div", { class: "kv" }, ...kv.flatMap(([k, v]) => [el("span", { class: "muted" }, k), el("span", {}, v === null || v === undefined ? "–" : v)])),
    el("h3", {}, "Hint"), e.hint ? el("div", { class: "hint", id: "env-hint" }, e.hint) : el("p", { class: "muted" }, "no hint"),
    el("h3", {}, "Validation checks"),
    e.checks.length ? el("table", { class: "grid", id: "env-checks" }, el("thead", {}, el("tr", {}, el("th", {}, "check"), el("th", {}, "result"), el("th", {}, "detail"), el("th", { class: "n" }, "s"))),
      el("tbody", {}, ...e.checks.map((c) => el("tr", {}, el("td", { class: "mono" }, c.name), el("td", { class: c.passed ? "pass" : "fail" }, c.passed ? "pass" : "FAIL"),
        el("td", {}, c.detail || ""), el("td", { class: "n" }, fmt(c.seconds, 3)))))) : el("p", { class: "muted" }, "not validated yet"),
    el("h3", {}, "Code"), code,
    el("h3", {}, "Plays"),
    e.plays.length ? el("table", { class: "grid", id: "env-plays" }, el("thead", {}, el("tr", {}, ...["play", "hinted", "seed", "policy", "reward", "turns", "end"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...e.plays.map((p) => el("tr", {}, el("td", { class: "mono" }, p.play_id), el("td", {}, p.hinted ? "hinted" : "plain"), el("td", { class: "n" }, p.seed),
        el("td", {}, p.policy_version), el("td", { class: "n" }, fmt(p.episode_reward, 2)), el("td", { class: "n" }, p.turns),
        el("td", {}, p.error ? "error: " + p.error : p.step_timeout ? "step timeout" : p.terminated ? "terminated" : p.truncated ? "truncated" : "–"))))) : el("p", { class: "muted" }, "no plays"),
    el("h3", {}, "Lineage"),
    el("div", {}, el("b", {}, "memory examples shown to the designer"), briefList(e.lineage.parents)),
    el("div", {}, el("b", {}, "repair of"), briefList(e.lineage.repair_chain)),
    el("div", {}, el("b", {}, "repaired by"), briefList(e.lineage.repairs)),
    el("div", {}, el("b", {}, "used as example by"), briefList(e.lineage.children)),
    el("h3", {}, "Nearest neighbours"), briefList(e.neighbours),
  );
  box.scrollTop = 0;
}

// ---- refresh & stream ----------------------------------------------------------------------
async function refreshCharts() {
  const [series, training, evaluations] = await Promise.all([api("api/series", { window: S.window }),
    api("api/training", { window: S.window }), api("api/evaluations")]);
  renderSeries(series); renderTraining(training); renderEvaluations(evaluations);
}
async function refreshAll() {
  S.seriesAt = Date.now();
  const [rej, pol, skills] = await Promise.all([api("api/rejections"), api("api/policies"), api("api/skills"), refreshCharts()]);
  renderRejections(rej); renderPolicies(pol);
  const sk = document.getElementById("env-skill"); const have = new Set([...sk.options].map((o) => o.value));
  for (const s of skills) if (!have.has(s)) sk.append(el("option", { value: s }, s));
  await loadEnvs();
  if (S.missingEnv !== null && S.missingEnv !== undefined && S.missingEnv === S.selected) await openEnv(S.missingEnv);
  document.body.dataset.loaded = String(S.version);
}
function scheduleRefresh() {
  if (S.pendingRefresh) return;
  const wait = Math.max(0, 2000 - (Date.now() - S.seriesAt));
  S.pendingRefresh = setTimeout(() => { S.pendingRefresh = null; refreshAll().catch(console.error); }, wait);
}
async function loadAll() {
  const [summary, feed] = await Promise.all([api("api/summary"), api("api/feed")]);
  document.getElementById("feed").replaceChildren();
  addFeed(feed, false);
  renderSummary(summary);
  await refreshAll();
}
function connect() {
  const es = new EventSource(url("api/stream"));
  es.addEventListener("hello", () => loadAll().catch(console.error));
  es.addEventListener("events", (m) => addFeed(JSON.parse(m.data), true));
  es.addEventListener("summary", (m) => renderSummary(JSON.parse(m.data)));
  es.addEventListener("resync", () => loadAll().catch(console.error));
  es.onerror = () => { const st = document.getElementById("status"); st.textContent = "reconnecting…"; st.className = "badge down"; };
}
function setWindow() {
  const v = parseInt(document.getElementById("window").value, 10);
  if (!(v >= 1) || v === S.window) return;
  S.window = v;
  const u = new URL(location.href); u.searchParams.set("window", String(v));
  history.replaceState(null, "", u.toString());
  refreshCharts().catch(console.error);
}
document.getElementById("window").value = String(S.window);
document.getElementById("window").addEventListener("change", setWindow);
for (const id of ["env-verdict", "env-skill", "env-sort", "env-desc"]) document.getElementById(id).addEventListener("change", () => { S.envPage = 0; loadEnvs(); });
document.getElementById("env-search").addEventListener("input", () => { S.envPage = 0; loadEnvs(); });
document.getElementById("env-prev").addEventListener("click", () => { if (S.envPage > 0) { S.envPage--; loadEnvs(); } });
document.getElementById("env-next").addEventListener("click", () => { if (S.envPage + 1 < (S.envPages || 1)) { S.envPage++; loadEnvs(); } });
document.getElementById("skill-filter").addEventListener("change", () => S.series && renderSeries(S.series));
document.getElementById("training-all").addEventListener("change", () => S.training && renderTraining(S.training));
connect();
if (envFromHash() !== null) openEnv(envFromHash(), true);
