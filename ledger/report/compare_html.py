"""`ledger report compare --html PATH`: the comparison as one self-contained page.

The page holds the comparison document (exactly what `ledger report compare --json`
prints) as inert JSON, Vega-Lite's JavaScript (ledger.report.html.vega_js: the `ledger[html]`
extra), and a small script that draws from the document: per arm the ok rate with its
Wilson interval and the median cost with its bootstrap interval (a point and a rule from
low to high), the paired difference in ok rate and ratio of median costs with their
intervals against the line of no difference, the verdict line, the arms' table and every
excluded run. Nothing is fetched at view time (a Content-Security-Policy forbids it); every
string from the data reaches the page as text.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any


def render_compare(doc: dict[str, Any], js: str | None = None, generated_at: datetime | None = None) -> str:
    from ledger.report.html import inert_json, vega_js

    when = (generated_at or datetime.now(timezone.utc)).astimezone(timezone.utc)
    page_doc = {"generated_at": when.isoformat(timespec="seconds").replace("+00:00", "Z"), "compare": doc}
    data = inert_json(page_doc)
    head, tail = _TEMPLATE.replace("/*DATA*/", data).replace("/*APP*/", _APP).split("/*VEGA*/")
    return head + (vega_js() if js is None else js) + tail


def write_compare(doc: dict[str, Any], path: str | Path, js: str | None = None) -> Path:
    """Write the page atomically; a missing `ledger[html]` extra is an error before anything is written."""
    from ledger.report.html import vega_js, write_atomically

    page_js = vega_js() if js is None else js
    return write_atomically(path, lambda: render_compare(doc, page_js),
                            "choose a writable path: ledger report compare --html PATH")


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:; font-src data:">
<meta name="color-scheme" content="light dark">
<title>ledger report compare</title>
<style>
:root { --bg: #ffffff; --fg: #1d2330; --muted: #5d6675; --line: #d8dce3; --warn: #8a4b00; }
@media (prefers-color-scheme: dark) { :root { --bg: #14171c; --fg: #e3e6eb; --muted: #9aa3b0; --line: #343a44; --warn: #f0b35a; } }
body { margin: 0 auto; max-width: 1100px; padding: 1rem 1.5rem 3rem; background: var(--bg); color: var(--fg);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin: 1.6rem 0 0.4rem; }
.meta, .note { color: var(--muted); } #verdict { font-size: 1.1rem; font-weight: 600; }
.charts { display: flex; flex-wrap: wrap; gap: 1rem; } .chart { flex: 1 1 420px; min-height: 240px; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 0.25rem 0.5rem; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th:first-child, td:first-child, .text { text-align: left; } th { color: var(--muted); }
.excluded { color: var(--warn); }
</style>
</head>
<body>
<h1>ledger report compare</h1>
<p id="made" class="meta"></p>
<p id="verdict"></p>
<p id="paired" class="meta"></p>
<section class="charts">
  <div><h2>ok rate <span class="note">(95% Wilson interval)</span></h2><div id="ok-chart" class="chart"></div></div>
  <div><h2>median cost, USD <span class="note">(95% bootstrap interval)</span></h2><div id="cost-chart" class="chart"></div></div>
</section>
<section class="charts">
  <div><h2>paired: ok rate difference, pp</h2><div id="diff-chart" class="chart"></div></div>
  <div><h2>paired: median cost ratio</h2><div id="ratio-chart" class="chart"></div></div>
</section>
<h2>Arms</h2>
<table id="arms"></table>
<h2>Runs that cannot count</h2>
<table id="excluded"></table>
<script type="application/json" id="ledger-data">/*DATA*/</script>
<script>/*APP*/</script>
<script type="module">/*VEGA*/</script>
<script type="module">ledgerCompareCharts();</script>
</body>
</html>
"""

_APP = r"""
"use strict";
(function () {
  const page = JSON.parse(document.getElementById("ledger-data").textContent);
  const C = page.compare;
  const set = (id, text) => { document.getElementById(id).textContent = text; };
  const dash = "\u2014";
  const pct = (v) => v === null || v === undefined ? dash : (v * 100).toFixed(1) + "%";
  const usd = (v) => v === null || v === undefined ? dash : "$" + v.toFixed(6).replace(/0+$/, "").replace(/\.$/, "");
  const ci = (c, f) => c ? f(c[0]) + " \u2013 " + f(c[1]) : dash;
  set("made", "made " + page.generated_at + " \u00b7 arms by " + C.by + " \u00b7 tasks by " +
      (C.task_by || "first subject") + " \u00b7 " + C.intervals.bootstrap_resamples + " bootstrap resamples, seed " +
      C.intervals.seed);
  const P = C.paired;
  set("verdict", P ? P.verdict : (C.rows.length > 2 ? "name two arms (A B) to pair them" : "nothing to pair"));
  if (P && P.tasks) set("paired", P.b + " over " + P.a + ", paired over " + P.tasks + " task(s): ok rate " +
      (P.ok_rate_diff * 100).toFixed(1) + " pp (" + ci(P.ok_rate_diff_ci, (v) => (v * 100).toFixed(1)) +
      "), median cost \u00d7" + (P.median_cost_ratio === null ? dash : P.median_cost_ratio.toFixed(3)) +
      " (" + ci(P.median_cost_ratio_ci, (v) => v.toFixed(3)) + ")");

  function table(id, rows, columns) {
    const t = document.getElementById(id);
    if (!rows.length) { const c = t.insertRow().insertCell(); c.textContent = "none"; c.className = "note"; return; }
    const head = t.createTHead().insertRow();
    for (const [name] of columns) { const th = document.createElement("th"); th.textContent = name; head.append(th); }
    const body = t.createTBody();
    for (const r of rows) {
      const tr = body.insertRow();
      for (const [, get, cls] of columns) { const td = tr.insertCell(); td.textContent = get(r); if (cls) td.className = cls; }
    }
  }
  table("arms", C.rows, [["arm", (r) => String(r.key), "text"], ["runs", (r) => r.runs], ["tasks", (r) => r.tasks],
    ["ok", (r) => pct(r.ok_rate)], ["95% CI", (r) => ci(r.ok_rate_ci, pct)], ["median cost", (r) => usd(r.median_cost_usd)],
    ["95% CI", (r) => ci(r.median_cost_ci, usd)], ["cost per solved task", (r) => usd(r.cost_per_ok_usd)],
    ["median time", (r) => r.median_duration_ms === null ? dash : (r.median_duration_ms / 1000).toFixed(1) + "s"],
    ["tokens", (r) => r.tokens === null ? dash : r.tokens], ["tool errors", (r) => pct(r.tool_error_rate)],
    ["pass@k", (r) => r.k ? "k=" + r.k + " " + pct(r.pass_at_k) : dash], ["pass^k", (r) => r.k ? pct(r.pass_hat_k) : dash],
    ["excluded", (r) => r.excluded, "excluded"]]);
  table("excluded", C.excluded_runs, [["run", (e) => e.run_id, "text"], ["arm", (e) => String(e.key), "text"],
    ["task", (e) => e.task === null ? dash : e.task, "text"], ["why", (e) => e.reason, "text"]]);

  // an interval chart: a point per arm (or for the pair) and a rule from low to high
  function intervals(values, title, ref) {
    const layers = [
      {mark: {type: "rule", strokeWidth: 2}, encoding: {y: {field: "label", type: "nominal", title: null},
        x: {field: "low", type: "quantitative", title, scale: {zero: false}}, x2: {field: "high"}}},
      {mark: {type: "point", filled: true, size: 90, tooltip: {content: "data"}}, encoding: {
        y: {field: "label", type: "nominal"}, x: {field: "value", type: "quantitative"}}},
    ];
    if (ref !== undefined) layers.push({data: {values: [{ref}]}, mark: {type: "rule", strokeDash: [4, 3], color: "#7f7f7f"},
      encoding: {x: {field: "ref", type: "quantitative"}}});
    return {width: "container", height: Math.max(60, 40 * values.length), background: "transparent",
            data: {values}, layer: layers, config: {view: {stroke: null}}};
  }
  window.ledgerCompareCharts = async function () {
    const views = window.ledgerViews = {};
    const arm = (r, v, c) => ({label: String(r.key), value: v, low: c ? c[0] : v, high: c ? c[1] : v});
    const charts = {
      "ok-chart": intervals(C.rows.filter((r) => r.ok_rate !== null).map((r) => arm(r, r.ok_rate, r.ok_rate_ci)), "ok rate"),
      "cost-chart": intervals(C.rows.filter((r) => r.median_cost_usd !== null).map((r) => arm(r, r.median_cost_usd, r.median_cost_ci)), "USD"),
    };
    if (P && P.tasks && P.ok_rate_diff !== null) charts["diff-chart"] = intervals([{label: P.b + " \u2212 " + P.a,
      value: P.ok_rate_diff * 100, low: P.ok_rate_diff_ci[0] * 100, high: P.ok_rate_diff_ci[1] * 100}], "pp", 0);
    if (P && P.tasks && P.median_cost_ratio !== null) charts["ratio-chart"] = intervals([{label: P.b + " / " + P.a,
      value: P.median_cost_ratio, low: P.median_cost_ratio_ci[0], high: P.median_cost_ratio_ci[1]}], "ratio", 1);
    for (const id of ["ok-chart", "cost-chart", "diff-chart", "ratio-chart"]) {
      const el = document.getElementById(id);
      if (!charts[id] || !charts[id].data.values.length) { el.textContent = "nothing to draw"; el.className = "note"; continue; }
      const out = await vegaEmbed("#" + id, charts[id], {mode: "vega-lite", renderer: "svg", actions: false});
      views[id] = out.view;
    }
    document.body.dataset.ready = "1";
  };
})();
"""
