// harness LLM live dashboard: polls llm/api/live once a second and renders it. No dependencies.
"use strict";

const $ = (id) => document.getElementById(id);
const DASH = "–";

function fmt(v, digits = 1) {
  if (v === null || v === undefined || Number.isNaN(v)) return DASH;
  return Number(v).toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}
function fmtMs(v) { return v === null || v === undefined ? DASH : fmt(v, v < 10 ? 2 : 1); }
function fmtS(v) { return v === null || v === undefined ? DASH : fmt(v / 1000, 2); }
function int(v) { return v === null || v === undefined ? DASH : Number(v).toLocaleString("en-US"); }
function clock(s) {
  if (s === null || s === undefined) return "";
  s = Math.max(0, Math.floor(s));
  const m = Math.floor(s / 60), r = s % 60;
  return `${m}:${String(r).padStart(2, "0")}`;
}
function esc(t) { return String(t).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c])); }
function setValue(id, text, unit) { $(id).innerHTML = esc(text) + (unit && text !== DASH ? `<span class="unit">${unit}</span>` : ""); }

const STATE_LABEL = {
  idle: "idle", starting: "starting", warmup: "warming up", measuring: "measuring",
  draining: "draining", finishing: "writing results", finished: "finished", error: "error",
};

function render(v) {
  const state = v.state || "idle";
  const pill = $("state");
  pill.className = "pill " + state;
  pill.textContent = STATE_LABEL[state] || state;
  $("scenario").textContent = v.scenario || (v.scenario_path ? v.scenario_path : "no scenario");
  const target = v.target || v.host || "";
  $("target").textContent = target ? `→ ${target}${v.model ? "  ·  " + v.model : ""}${v.simulated ? "  (simulated engine)" : ""}` : "";
  const dur = v.duration_s;
  $("clock").textContent = v.run ? `${clock(v.elapsed_s)}${dur ? " / " + clock(dur) : ""}  ·  ${v.workers || 0} load process${v.workers === 1 ? "" : "es"}` : "";

  $("idle").hidden = !!v.run || state === "error";
  const err = $("error");
  err.hidden = !(v.error && v.error.length);
  if (!err.hidden) err.innerHTML = "<b>The run could not go on.</b> " + v.error.map(esc).join("<br>");

  const done = $("done");
  if (v.final) {
    const f = v.final;
    let html = `<span class="big">Finished (${esc(f.status)}):</span> ${int(f.completed)} requests in ${fmt(f.window_s, 1)} s · `
      + `${fmt(f.rps, 2)} req/s · ${fmt(f.tok_s, 0)} output tokens/s`;
    if (v.report_url) html += `<a class="button" href="${esc(v.report_url)}" target="_blank">Open report</a>`;
    else if (v.report === "writing") html += ` · writing the report …`;
    else if (v.report && v.report.startsWith("failed")) html += ` · report ${esc(v.report)}`;
    if (v.summary_url) html += ` · <a href="${esc(v.summary_url)}" target="_blank">summary.json</a>`;
    html += `<div class="path">${esc(v.run_dir)}</div>`;
    done.innerHTML = html;
    done.hidden = false;
    const w = $("warnings");
    w.hidden = !f.warnings.length;
    if (f.warnings.length) w.innerHTML = "<b>Validity warnings</b><ul>" + f.warnings.map((x) => `<li>${esc(x)}</li>`).join("") + "</ul>";
  } else {
    done.hidden = true;
    $("warnings").hidden = true;
  }

  const rows = v.classes || [];
  const all = rows.length ? rows[rows.length - 1] : null;
  const final = v.final;
  setValue("k-rps", all ? fmt(all.rps, 2) : DASH);
  setValue("k-tok", all ? fmt(all.tok_s, 0) : DASH);
  document.querySelectorAll(".rates-over").forEach((el) => { el.textContent = v.rates_over || "last 10 s"; });
  const metrics = v.metrics || [];
  addMetricCards(metrics);
  for (const m of metrics) setValue(`k-${m.key}`, all && all[m.key] ? fmtMs(all[m.key].p99) : DASH, m.unit.startsWith("ms") ? "ms" : m.unit);
  $("k-req").innerHTML = all ? `${int(all.requests)}<span class="unit">/ ${int(all.failed)}</span>` : DASH;
  const p = v.progress || {};
  $("k-flight").innerHTML = v.run ? `${int(p.in_flight || 0)}<span class="unit">/ ${int(v.users)}</span>` : DASH;

  const e = v.engine || {};
  const note = $("e-note");
  if (!v.run) { note.hidden = true; }
  else if (!e.enabled) { note.hidden = false; note.textContent = "Engine telemetry is off for this run."; }
  else if (!e.ok) { note.hidden = false; note.textContent = e.error ? `Engine telemetry: ${e.error}` : "Engine telemetry: waiting for the first scrape …"; }
  else if (e.over) { note.hidden = false; note.textContent = `Engine values ${e.over}, from summary.json.`; }
  else { note.hidden = false; note.textContent = `Engine metrics from ${e.profile || "?"} /metrics, scraped every second.`; }
  setValue("e-kv", e.kv_usage === null || e.kv_usage === undefined ? DASH : fmt(100 * e.kv_usage, 1), "%");
  $("e-kv-bar").style.width = e.kv_usage ? `${Math.min(100, 100 * e.kv_usage)}%` : "0";
  setValue("e-run", int(e.running));
  setValue("e-wait", int(e.waiting));
  setValue("e-pre", int(e.preemptions));
  setValue("e-hit", e.prefix_hit_rate === null || e.prefix_hit_rate === undefined ? DASH : fmt(100 * e.prefix_hit_rate, 1), "%");

  classHeader(metrics);
  const tb = $("classes").querySelector("tbody");
  tb.innerHTML = rows.map((c, i) => {
    const total = i === rows.length - 1;
    const rps = c.rps, tok = c.tok_s;
    const cells = [
      `<td>${esc(c.name)}</td>`, `<td>${int(c.requests)}</td>`, `<td class="${c.failed ? "bad" : ""}">${int(c.failed)}</td>`,
      `<td>${fmt(rps, 2)}</td>`, `<td>${fmt(tok, 0)}</td>`,
      ...metrics.flatMap((m) => STATS.map((k, j) => `<td class="${j === 0 ? "sep" : ""}">${fmtMs((c[m.key] || {})[k])}</td>`)),
      `<td class="sep">${fmtS(c.e2e.p50)}</td>`, `<td>${fmtS(c.e2e.p99)}</td>`,
    ];
    return `<tr class="${total ? "total" : ""}">${cells.join("")}</tr>`;
  }).join("") || `<tr><td colspan="${7 + STATS.length * metrics.length}" class="na">No finished request in the measured window yet.</td></tr>`;

  const errs = Object.entries(v.errors || {});
  $("errors-panel").hidden = !errs.length;
  $("errors").querySelector("tbody").innerHTML = errs.map(([k, n]) => `<tr><td>${esc(k)}</td><td class="bad">${int(n)}</td></tr>`).join("");

  const s = v.series || {};
  const metricCharts = v.charts || [];
  addMetricCharts(metricCharts);
  for (const c of metricCharts) chart($(`c-${c.key}`), s.t, [s[`${c.key}_p50`], s[`${c.key}_p99`]], {});
  chart($("c-tok"), s.t, [s.tok_s, null, s.users], { right: [2] });
  chart($("c-eng"), s.t, [(s.kv || []).map((x) => (x === null || x === undefined ? null : 100 * x)), s.waiting, s.running],
        { right: [1, 2], leftMax: 100 });
  $("foot").textContent = v.run ? `Run ${v.run} · files: ${v.run_dir}` : "";
}

// The metric cards and the class table's percentile columns follow the server's `metrics` list
// (its metric table's "ui_table" entries); E2E closes the table, in seconds. Built once.
const STATS = ["p50", "p90", "p99"];
function addMetricCards(metrics) {
  let after = $("k-tok").parentElement;
  for (const m of metrics) {
    const have = $(`k-${m.key}`);
    if (have) { after = have.parentElement; continue; }
    const card = document.createElement("div");
    card.className = "card";
    card.innerHTML = `<div class="label">${esc(m.label)} p99 <span class="hint">${esc(m.unit)}</span></div><div class="value" id="k-${esc(m.key)}">–</div>`;
    after.after(card);
    after = card;
  }
}
function classHeader(metrics) {
  const head = $("classes").querySelector("thead");
  const key = metrics.map((m) => m.key).join(",");
  if (head.dataset.metrics === key) return;
  head.dataset.metrics = key;
  head.innerHTML = `<tr class="group"><th></th><th colspan="4">Throughput</th>`
    + metrics.map((m) => `<th colspan="${STATS.length}">${esc(m.label)} (${esc(m.unit)})</th>`).join("")
    + `<th colspan="2">E2E (s)</th></tr>`
    + `<tr><th class="l">Class</th><th>Requests</th><th>Failed</th><th>Req/s</th><th>Tok/s</th>`
    + metrics.map(() => STATS.map((k) => `<th>${k}</th>`).join("")).join("") + `<th>p50</th><th>p99</th></tr>`;
}

// One chart panel per metric the server lists (its metric table's live charts), ahead of the
// fixed ones, added once: the page hard-codes no metric.
function addMetricCharts(charts) {
  const box = $("charts");
  let before = box.firstElementChild;
  for (const c of charts) {
    if ($(`c-${c.key}`)) { before = $(`c-${c.key}`).parentElement.nextElementSibling; continue; }
    const panel = document.createElement("div");
    panel.className = "panel chart";
    panel.innerHTML = `<h3>${esc(c.label)} <span class="hint">${esc(c.unit)}, last 10 s: <i class="sw a"></i>p50 <i class="sw b"></i>p99</span></h3>`
      + `<svg id="c-${esc(c.key)}"></svg>`;
    box.insertBefore(panel, before);
    before = panel.nextElementSibling;
  }
}

// A small line chart: series share the left axis, except those listed in opts.right (right axis).
function chart(svg, t, series, opts) {
  const right = new Set(opts.right || []);
  const W = svg.clientWidth || 600, H = svg.clientHeight || 190;
  const L = 44, R = right.size ? 40 : 12, T = 8, B = 20;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  if (!t || t.length < 2) {
    svg.innerHTML = `<text class="empty" x="${W / 2}" y="${H / 2}" text-anchor="middle">Waiting for data …</text>`;
    return;
  }
  const t0 = t[0], t1 = t[t.length - 1], span = Math.max(t1 - t0, 1);
  const x = (ti) => L + ((ti - t0) / span) * (W - L - R);
  const maxOf = (arr) => Math.max(0, ...(arr || []).filter((v) => v !== null && v !== undefined));
  const leftMax = opts.leftMax || niceMax(Math.max(...series.map((s, i) => (right.has(i) ? 0 : maxOf(s)))));
  const rightMax = right.size ? niceMax(Math.max(...series.map((s, i) => (right.has(i) ? maxOf(s) : 0)))) : 1;
  let out = `<line class="axis" x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}"/>`;
  for (let g = 0; g <= 4; g++) {
    const y = T + ((H - T - B) * g) / 4;
    out += `<line class="axis" x1="${L}" y1="${y}" x2="${W - R}" y2="${y}" stroke-dasharray="2 4"/>`;
    out += `<text x="${L - 6}" y="${y + 4}" text-anchor="end">${axisLabel(leftMax * (1 - g / 4))}</text>`;
    if (right.size) out += `<text x="${W - R + 6}" y="${y + 4}">${axisLabel(rightMax * (1 - g / 4))}</text>`;
  }
  out += `<text x="${L}" y="${H - 4}">${clock(0)}</text><text x="${W - R}" y="${H - 4}" text-anchor="end">${clock(t1 - t0)}</text>`;
  series.forEach((s, i) => {
    if (!s) return;
    const max = right.has(i) ? rightMax : leftMax;
    let d = "", pen = false;
    s.forEach((v, j) => {
      if (v === null || v === undefined) { pen = false; return; }
      const y = T + (H - T - B) * (1 - v / (max || 1));
      d += `${pen ? "L" : "M"}${x(t[j]).toFixed(1)},${y.toFixed(1)}`;
      pen = true;
    });
    out += `<path class="l${i}" d="${d}"/>`;
  });
  svg.innerHTML = out;
}
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}
function axisLabel(v) { return v >= 100 ? fmt(v, 0) : v >= 10 ? fmt(v, 1) : fmt(v, 2); }

async function tick() {
  try {
    const r = await fetch("llm/api/live", { cache: "no-store" });
    if (r.ok) render(await r.json());
  } catch (e) { /* the master may be restarting; try again */ }
  setTimeout(tick, 1000);
}
tick();
