// spade-engine dashboard: loads state over the JSON API, then follows the SSE stream.
"use strict";
const QS = document.body.dataset.qs || "";
const TOKEN = new URLSearchParams(QS).get("token");
const METRICS = ["win_rate_plain", "win_rate_hinted", "regret", "designer_reward", "validation_pass_rate", "novelty"];
const COUNTERS = [
  ["events", "events"], ["EnvironmentProposed", "proposed"], ["accepted", "accepted"], ["rejected", "rejected"],
  ["RolloutCompleted", "plays"], ["RegretEstimated", "scored"], ["PolicyUpdated", "policy versions"],
  ["events_per_s", "events / s"], ["latest_regret", "regret (last window)"], ["latest_win", "win plain (last window)"],
];
const S = { version: -1, seriesAt: 0, pendingRefresh: null, lastOffset: -1, envPage: 0, envLimit: 50, selected: null, series: null };

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
  for (const [k, v] of Object.entries(attrs || {})) { if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v); }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k === null || k === undefined ? "" : String(k)));
  return e;
}
const fmt = (x, d = 3) => (x === null || x === undefined) ? "–" : (typeof x === "number" ? (Number.isInteger(x) ? String(x) : x.toFixed(d)) : String(x));
const esc = (s) => String(s);

// ---- counters ------------------------------------------------------------------------------
function renderSummary(s) {
  const vals = Object.assign({}, s.counts, {
    events: s.events, accepted: (s.verdicts || {}).accepted || 0, rejected: (s.verdicts || {}).rejected || 0,
    events_per_s: s.events_per_s, latest_regret: (s.latest_window || {}).regret, latest_win: (s.latest_window || {}).win_rate_plain,
  });
  const box = document.getElementById("counters");
  box.replaceChildren(...COUNTERS.map(([k, label]) => el("div", { class: "counter", id: "counter-" + k },
    el("div", { class: "v" }, fmt(vals[k] === undefined ? 0 : vals[k], 3)), el("div", { class: "k" }, label))));
  const st = document.getElementById("status");
  if (s.error) { st.textContent = "error: " + s.error; st.className = "badge down"; }
  else if (!s.caught_up) { st.textContent = `catching up ${s.applied} / ${s.log_end_at_start}`; st.className = "badge catching"; }
  else if (s.stopped) { st.textContent = "run stopped · " + s.events + " events"; st.className = "badge stopped"; }
  else { st.textContent = "live · " + s.events + " events"; st.className = "badge live"; }
  if (s.version !== S.version) { S.version = s.version; scheduleRefresh(); }
}

// ---- charts --------------------------------------------------------------------------------
const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];
function renderSeries(data) {
  S.series = data;
  const only = document.getElementById("skill-filter").value;
  const skills = [...new Set(data.rows.map((r) => r.skill))].filter((s) => s !== "*").sort();
  const sel = document.getElementById("skill-filter");
  const have = new Set([...sel.options].map((o) => o.value));
  for (const s of skills) if (!have.has(s)) sel.append(el("option", { value: s }, s));
  document.getElementById("series-note").textContent = `windows of ${data.window} environments · frontier band [${data.band.join(", ")}]`;
  const groups = only ? [only] : ["*", ...skills];
  const nWindows = new Set(data.rows.map((r) => r.window)).size;
  for (const m of METRICS) {
    const traces = groups.map((g, i) => {
      const rows = data.rows.filter((r) => r.skill === g);
      return { x: rows.map((r) => r.window), y: rows.map((r) => r[m]), name: g === "*" ? "all" : g, mode: "lines+markers",
        line: { width: g === "*" ? 3 : 1.5, color: g === "*" ? "#111827" : PALETTE[i % PALETTE.length] }, marker: { size: 4 }, connectgaps: false };
    });
    const layout = { title: { text: data.metrics[m] || m, font: { size: 13 } }, margin: { l: 40, r: 8, t: 30, b: 30 },
      xaxis: { title: { text: "window", font: { size: 11 } }, dtick: Math.max(1, Math.ceil(nWindows / 10)) }, yaxis: { rangemode: "tozero" }, showlegend: m === METRICS[0],
      legend: { orientation: "h", y: -0.25, font: { size: 10 } }, paper_bgcolor: "#fff", plot_bgcolor: "#fff" };
    Plotly.react("chart-" + m, traces, layout, { displayModeBar: false, responsive: true });
  }
}

// ---- live feed -----------------------------------------------------------------------------
function feedRow(e, isNew) {
  return el("div", { class: "ev" + (isNew ? " new" : ""), "data-offset": e.offset, "data-type": e.type },
    el("span", { class: "o" }, e.partition + ":" + e.offset), el("span", { class: "muted" }, (e.occurred_at || "").slice(11, 23)),
    el("span", { class: "t t-" + e.type }, e.type), el("span", { class: "k", title: e.key }, e.key), el("span", { class: "s", title: e.summary }, e.summary));
}
function addFeed(items, isNew) {
  const box = document.getElementById("feed");
  const fresh = items.filter((e) => !box.querySelector(`[data-offset="${e.offset}"][data-type="${e.type}"]`) );
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
      el("td", { class: "mono" }, Object.entries(p.metrics || {}).map(([k, v]) => k + "=" + fmt(v, 4)).join("  ")))));
}

// ---- environment browser -------------------------------------------------------------------
function envLink(id) { return el("a", { class: "env", onclick: () => openEnv(id) }, id); }
async function loadEnvs() {
  const params = { q: document.getElementById("env-search").value, verdict: document.getElementById("env-verdict").value,
    skill: document.getElementById("env-skill").value, sort: document.getElementById("env-sort").value,
    desc: document.getElementById("env-desc").checked, limit: S.envLimit, offset: S.envPage * S.envLimit };
  const data = await api("api/envs", params);
  document.getElementById("env-count").textContent = `${data.total} environments · page ${S.envPage + 1}`;
  document.querySelector("#env-table tbody").replaceChildren(...data.rows.map((r) =>
    el("tr", { "data-env-id": r.env_id, class: r.env_id === S.selected ? "sel" : "", onclick: () => openEnv(r.env_id) },
      el("td", { class: "mono" }, r.env_id), el("td", {}, r.skill), el("td", { class: "v-" + r.verdict }, r.verdict + (r.error_kind ? " (" + r.error_kind + ")" : "")),
      el("td", { class: "n" }, fmt(r.win_rate_plain, 2)), el("td", { class: "n" }, fmt(r.win_rate_hinted, 2)), el("td", { class: "n" }, fmt(r.regret)),
      el("td", { class: "n" }, fmt(r.designer_reward)), el("td", { class: "n" }, fmt(r.novelty)))));
}
function briefList(items, empty) {
  if (!items || !items.length) return el("p", { class: "muted" }, empty || "none");
  return el("ul", {}, ...items.map((b) => el("li", {}, envLink(b.env_id), " ", el("span", { class: "v-" + b.verdict }, b.verdict), b.relation ? " · " + b.relation : "",
    " · regret " + fmt(b.regret) + " · win " + fmt(b.win_rate_plain, 2) + (b.novelty !== undefined && b.novelty !== null ? " · novelty " + fmt(b.novelty) : ""))));
}
async function openEnv(id) {
  S.selected = id;
  for (const tr of document.querySelectorAll("#env-table tbody tr")) tr.classList.toggle("sel", tr.dataset.envId === id);
  const box = document.getElementById("env-detail");
  let e;
  try { e = await api("api/envs/" + encodeURIComponent(id)); } catch (err) { box.replaceChildren(el("p", { class: "fail" }, String(err))); return; }
  const code = el("div", { id: "env-code" }); code.innerHTML = e.code_html;  // pygments output: escaped server-side
  const kv = [["skill", e.skill], ["verdict", e.verdict + (e.error_kind ? " · " + e.error_kind : "") + (e.failed_check ? " · failed " + e.failed_check : "")],
    ["difficulty asked", fmt(e.difficulty, 2)], ["class", e.class_name], ["attempt", e.attempt], ["document", [e.document_source, e.document_title].filter(Boolean).join(" · ")],
    ["plays", `${e.plays_plain} plain + ${e.plays_hinted} hinted`], ["win rate", `${fmt(e.win_rate_plain, 2)} plain · ${fmt(e.win_rate_hinted, 2)} hinted`],
    ["regret", fmt(e.regret)], ["designer reward", fmt(e.designer_reward)], ["novelty", fmt(e.novelty)], ["policy", e.policy_version], ["offsets", `${e.first_offset} – ${e.last_offset}`]];
  box.replaceChildren(
    el("h3", { id: "env-title", class: "mono" }, e.env_id),
    el("div", { class: "kv" }, ...kv.flatMap(([k, v]) => [el("span", { class: "muted" }, k), el("span", {}, v === null || v === undefined ? "–" : v)])),
    el("h3", {}, "Hint"), e.hint ? el("div", { class: "hint", id: "env-hint" }, e.hint) : el("p", { class: "muted" }, "no hint"),
    el("h3", {}, "Validation checks"),
    e.checks.length ? el("table", { class: "grid", id: "env-checks" }, el("thead", {}, el("tr", {}, el("th", {}, "check"), el("th", {}, "result"), el("th", {}, "detail"), el("th", {}, "s"))),
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
}

// ---- refresh & stream ----------------------------------------------------------------------
async function refreshAll() {
  S.seriesAt = Date.now();
  const [series, rej, pol, skills] = await Promise.all([api("api/series"), api("api/rejections"), api("api/policies"), api("api/skills")]);
  renderSeries(series); renderRejections(rej); renderPolicies(pol);
  const sk = document.getElementById("env-skill"); const have = new Set([...sk.options].map((o) => o.value));
  for (const s of skills) if (!have.has(s)) sk.append(el("option", { value: s }, s));
  await loadEnvs();
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
for (const id of ["env-verdict", "env-skill", "env-sort", "env-desc"]) document.getElementById(id).addEventListener("change", () => { S.envPage = 0; loadEnvs(); });
document.getElementById("env-search").addEventListener("input", () => { S.envPage = 0; loadEnvs(); });
document.getElementById("env-prev").addEventListener("click", () => { if (S.envPage > 0) { S.envPage--; loadEnvs(); } });
document.getElementById("env-next").addEventListener("click", () => { S.envPage++; loadEnvs(); });
document.getElementById("skill-filter").addEventListener("change", () => S.series && renderSeries(S.series));
connect();
