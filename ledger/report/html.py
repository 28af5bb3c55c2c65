"""`ledger report --html`: one self-contained page, drawn in the browser from the reports'
JSON documents (each one exactly what `ledger report --json` prints for its query).

The page holds the document as inert JSON (`<script type="application/json">`), Plotly's
JavaScript (the optional `ledger[html]` extra) and a small script that builds the charts and
tables from the document. Nothing is fetched at view time (a Content-Security-Policy forbids
it), and every string from the data reaches the page as text, never as markup.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from ledger.errors import LedgerError
from ledger.report.aggregate import Report, ReportQuery
from ledger.report.kinds import EVALUATION_KINDS

INSTALL_HINT = "pip install 'ledger[html]'"
TOP = 20  # the most expensive runs and sessions listed
# kinds with about a row per run: without --limit the page lists the most expensive ones,
# so that its size follows the groups shown, never the number of runs
PER_RUN_KINDS = ("run", "session", "subject", "task")
PAGE_LIMIT = 100


def plotly_js() -> str:
    """Plotly's JavaScript, to be inlined; a clear error when the extra is not installed."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise LedgerError("the HTML report needs the Plotly charting library, which is not installed",
                          f"install it: {INSTALL_HINT}") from None
    return only_traces(get_plotlyjs(), PAGE_TRACES)


# the trace types the page draws (scatter is Plotly's core, always there)
PAGE_TRACES = ("bar",)


def only_traces(js: str, keep: tuple[str, ...]) -> str:
    """Plotly's bundle registering only the trace types `keep` at start-up.

    The Python package ships the full bundle (4.8 MB, 47 trace types and components), and
    registering every one of them is most of its start-up in the browser (measured in
    Chromium: ~60 % of the script's time; parsing the text is the rest). Its modules are
    lazy (esbuild: a module's code runs when first required), and the bundle's entry point
    requires them all in one `register([...])` call: that list is cut to the modules of the
    traces in `keep`. Found from the bundle's own text (each trace module declares
    `moduleType:"trace",name:"..."`); any doubt, e.g. another Plotly's bundle, and the bundle
    is returned whole, as it was."""
    import re

    call = list(re.finditer(r"\.register\(\[((?:[A-Za-z0-9_$]+\(\),)*[A-Za-z0-9_$]+\(\))\]\)", js))
    if len(call) != 1:
        return js
    listed = [name[:-2] for name in call[0].group(1).split(",")]
    module_def = re.compile(r"var ([A-Za-z0-9_$]+)=[A-Za-z0-9_$]+\(\(")
    wanted = set()
    for trace in keep:
        declared = f'moduleType:"trace",name:"{trace}"'
        at = js.find(declared)
        if at < 0 or js.find(declared, at + 1) >= 0:
            return js
        # the module declaring it: the last module definition before the declaration
        defs = list(module_def.finditer(js, max(0, at - 100_000), at))
        if not defs:
            return js
        wanted.add(defs[-1].group(1))
    # each listed module re-exports a trace module: `var NAME=W((a,b)=>{"use strict";b.exports=MOD()})`
    wrapper = re.compile(r'=[A-Za-z0-9_$]+\(\(([A-Za-z0-9_$]+),([A-Za-z0-9_$]+)\)=>\{"use strict";\2\.exports=([A-Za-z0-9_$]+)\(\)\}\)')
    targets: dict[str, str] = {}
    for m in re.finditer("var (" + "|".join(re.escape(n) for n in listed) + ")(?==)", js):
        w = wrapper.match(js, m.end())
        if w is not None:
            targets[m.group(1)] = w.group(3)
    kept = [name for name in listed if targets.get(name) in wanted]
    if len(kept) != len(keep):
        return js
    return js[:call[0].start(1)] + ",".join(f"{name}()" for name in kept) + js[call[0].end(1):]


def write_report(home: str | Path, db: str | None, q: ReportQuery, path: str | Path,
                 notify: Callable[[str], None] = lambda _msg: None, resync: bool = False) -> tuple[Report, Path]:
    """`ledger report ... --html PATH`: the page's reports (one snapshot), written to `path`.
    Returns the report itself (its warnings are the CLI's) and the page's path."""
    from ledger.report.service import build_reports

    js = plotly_js()  # a missing extra is said before any work
    queries = page_queries(q)
    reports = dict(zip(queries, build_reports(home, db, list(queries.values()), notify=notify, resync=resync)))
    return reports["report"], write_page(path, page_document(reports), js)


def page_queries(q: ReportQuery) -> dict[str, ReportQuery]:
    """The reports a page shows, each with the query's range, zone, filters and cost mode:
    the report itself with per-model rows (the stacks), the most expensive runs and sessions,
    and the evaluation view by skill (unless the report is an evaluation view itself)."""
    limit = PAGE_LIMIT if q.limit is None and q.kind in PER_RUN_KINDS else q.limit
    out = {"report": dataclasses.replace(q, breakdown=True, limit=limit)}
    same = {f: getattr(q, f) for f in ("zone", "zone_name", "since", "until", "week_start", "filters", "cost")}
    out["runs"] = ReportQuery(kind="run", limit=TOP, **same)
    out["sessions"] = ReportQuery(kind="session", limit=TOP, **same)
    if q.kind not in EVALUATION_KINDS:
        out["evaluation"] = ReportQuery(kind="skill", **same)
    return out


def page_document(reports: dict[str, Report], generated_at: datetime | None = None) -> dict[str, Any]:
    """The page's data: each report's `--json` document, and when it was made."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ledger_version = version("ledger")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        ledger_version = None
    when = (generated_at or datetime.now(timezone.utc)).astimezone(timezone.utc)
    doc: dict[str, Any] = {"generated_at": when.isoformat(timespec="seconds").replace("+00:00", "Z"),
                           "ledger_version": ledger_version}
    doc.update((name, rep.to_dict()) for name, rep in reports.items())
    return doc


def render_page(doc: dict[str, Any], js: str | None = None) -> str:
    """The page's HTML for `doc` (see page_document)."""
    import orjson

    # inert JSON inside <script>: no `<` may end the element early (a key like `</script>`)
    data = (orjson.dumps(doc).decode().replace("&", "\\u0026").replace("<", "\\u003c")
            .replace(">", "\\u003e"))
    page = _TEMPLATE.replace("/*STYLE*/", _STYLE)
    head, tail = page.replace("/*DATA*/", data).replace("/*APP*/", _APP).split("/*PLOTLY*/")
    return head + (plotly_js() if js is None else js) + tail


def write_page(path: str | Path, doc: dict[str, Any], js: str | None = None) -> Path:
    """Write the page atomically (a reader never sees half a page)."""
    import os

    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(render_page(doc, js), encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise LedgerError(f"cannot write {target}: {exc.strerror or exc}",
                          "choose a writable path: ledger report --html PATH") from None
    return target


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; font-src data:">
<meta name="color-scheme" content="light dark">
<title>ledger report</title>
<style>/*STYLE*/</style>
</head>
<body>
<header>
  <h1 id="title">ledger report</h1>
  <p id="query" class="meta"></p>
  <p id="made" class="meta"></p>
  <ul id="warnings" class="warnings"></ul>
</header>
<main>
  <section id="summary" class="cards"></section>
  <section>
    <h2>Cost <span class="unit">USD</span></h2>
    <p class="legend-note">Bars: the known cost of each model. Hatched: a lower bound (part of the
    cost is unknown). Markers: the group's total and its basis (&#9650; partial, &#10005; unknown).</p>
    <div id="cost-chart" class="chart"></div>
  </section>
  <section>
    <h2>Tokens</h2>
    <div id="tokens-chart" class="chart"></div>
  </section>
  <section>
    <h2 id="groups-title">Groups</h2>
    <div class="scroll"><table id="groups"></table></div>
  </section>
  <section>
    <h2>Most expensive runs</h2>
    <div class="scroll"><table id="runs"></table></div>
  </section>
  <section>
    <h2>Most expensive sessions</h2>
    <div class="scroll"><table id="sessions"></table></div>
  </section>
  <section>
    <h2 id="evaluation-title">Evaluation</h2>
    <div class="scroll"><table id="evaluation"></table></div>
  </section>
</main>
<script type="application/json" id="ledger-data">/*DATA*/</script>
<script>/*APP*/</script>
<script>/*PLOTLY*/</script>
<script>ledgerCharts();</script>
</body>
</html>
"""

_STYLE = """
:root { --bg: #ffffff; --fg: #1d2330; --muted: #5d6675; --line: #d8dce3; --card: #f4f6f9;
        --warn: #8a4b00; --grid: rgba(0,0,0,0.10); }
@media (prefers-color-scheme: dark) {
  :root { --bg: #14171c; --fg: #e3e6eb; --muted: #9aa3b0; --line: #343a44; --card: #1d2128;
          --warn: #f0b35a; --grid: rgba(255,255,255,0.12); }
}
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1280px; padding: 1rem 1.5rem 3rem; background: var(--bg); color: var(--fg);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
h1 { font-size: 1.5rem; margin: 0.5rem 0; }
h2 { font-size: 1.15rem; margin: 1.6rem 0 0.4rem; }
.unit, .meta, .legend-note { color: var(--muted); font-weight: normal; }
.meta { margin: 0.15rem 0; }
.legend-note { margin: 0 0 0.3rem; font-size: 0.9em; }
.warnings { color: var(--warn); padding-left: 1.2rem; }
.cards { display: flex; flex-wrap: wrap; gap: 0.6rem; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 0.5rem 0.8rem;
        min-width: 9rem; }
.card b { display: block; font-size: 1.2rem; }
.card span { color: var(--muted); font-size: 0.85em; }
.chart { width: 100%; height: 380px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 0.25rem 0.5rem; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th:first-child, td:first-child, .text { text-align: left; }
td.id { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.9em; }
th { color: var(--muted); font-weight: 600; }
.basis-partial, .basis-unknown { color: var(--warn); }
.empty { color: var(--muted); }
@media print {
  :root { --bg: #ffffff; --fg: #000000; --muted: #444444; --line: #bbbbbb; --card: #ffffff; --warn: #7a3e00;
          --grid: rgba(0,0,0,0.12); }
  body { max-width: none; padding: 0; font-size: 11px; }
  section, .chart, tr { break-inside: avoid; }
  .modebar-container { display: none !important; }
  .scroll { overflow: visible; }
  th, td { white-space: normal; }
}
"""

# The page's script: reads the JSON document and builds everything from it. Strings from the
# data go into the DOM with textContent, and into Plotly (which reads a few HTML tags in its
# labels) through plotlyText, which escapes them.
_APP = r"""
"use strict";
(function () {
  const doc = JSON.parse(document.getElementById("ledger-data").textContent);
  const R = doc.report, Q = R.query;
  const EVAL = doc.evaluation || (["skill", "subject"].includes(R.report) ? R : null);
  const TIME = ["daily", "weekly", "monthly"].includes(R.report);
  const KEY = {daily: "date", weekly: "week of", monthly: "month", run: "run", session: "session",
               model: "model", harness: "harness", skill: "skill", subject: "subject", repo: "repo",
               host: "host", task: "task", home: "home"};

  const label = (k) => (k === null || k === undefined) ? "(none)" : String(k);
  const plotlyText = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const NF = new Intl.NumberFormat("en-US");  // one formatter: toLocaleString per figure is slow
  const int = (v) => (v === null || v === undefined) ? "\u2014" : NF.format(v);
  // costs are rounded to 10 decimals in the JSON: shown exactly, without exponents
  const usd = (v) => "$" + v.toFixed(10).replace(/0+$/, "").replace(/\.$/, "");
  const pct = (v) => (v === null || v === undefined) ? "\u2014" : (v * 100).toFixed(1) + "%";
  function ms(v) {  // a duration as `ledger report` prints it
    if (v === null || v === undefined) return "\u2014";
    const s = v / 1000, two = (n) => String(Math.floor(n)).padStart(2, "0");
    if (s < 60) return s.toFixed(1) + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + two(s % 60) + "s";
    return Math.floor(s / 3600) + "h" + two(s % 3600 / 60) + "m";
  }
  // a group's cost as the report states it: exact, a lower bound, or unknown (never $0)
  function cost(d) {
    if (d.cost_basis === "not_applicable") return "n/a";  // plain commands: no cost can exist
    if (d.cost_usd !== null && d.cost_usd !== undefined) return usd(d.cost_usd);
    if (d.cost_usd_known !== null && d.cost_usd_known !== undefined) return "\u2265" + usd(d.cost_usd_known);
    return "unknown";
  }
  function costLine(d) {
    if (d.cost_basis === "unknown") return "cost: unknown";
    if (d.cost_basis === "not_applicable") return "cost: n/a (plain commands)";
    let s = "cost: " + cost(d) + " (" + d.cost_basis;
    if (d.unmeasured_cost_runs) s += ": " + int(d.unmeasured_cost_runs) + " of " + int(d.runs) + " unknown";
    return s + ")";
  }
  // a token sum that leaves out runs without usage is a lower bound (`+`, as in the table)
  const tokens = (d) => int(d.total_tokens) + (d.unmeasured_usage_runs && d.total_tokens !== null ? "+" : "");

  // ---- header: what produced the page
  const set = (id, text) => { document.getElementById(id).textContent = text; };
  set("title", "ledger report " + R.report);
  document.title = "ledger report " + R.report + " \u00b7 " + doc.generated_at;
  const parts = ["time zone " + Q.tz, "from " + (Q.since || "the first run"), "to " + (Q.until || "the last run")];
  if (Q.week_start) parts.push("weeks start " + Q.week_start);
  for (const [name, values] of Object.entries(Q.filters)) parts.push("--" + name + " " + values.join(", "));
  parts.push("cost " + Q.cost);
  if (Q.limit !== null) parts.push("limit " + Q.limit);
  set("query", parts.join(" \u00b7 "));
  set("made", "made " + doc.generated_at + " by ledger " + (doc.ledger_version || "") + " \u00b7 prices: " +
      R.pricing.price_data);
  const warnings = document.getElementById("warnings");
  const warn = (text) => { const li = document.createElement("li"); li.textContent = text; warnings.append(li); };
  for (const u of R.pricing.unpriced || []) warn("cost unknown for " + int(u.runs) + " run(s): " + u.reason);
  if (R.unreadable_runs) warn(int(R.unreadable_runs) + " record(s) could not be read: in no figure (ledger verify lists them)");

  // ---- summary cards (the totals)
  const T = R.totals;
  const cards = [["runs", int(T.runs)], ["cost (" + T.cost_basis + ")", cost(T)], ["tokens", tokens(T)],
                 ["failed", int(T.failed)], ["interrupted", int(T.interrupted)], ["abandoned", int(T.abandoned)],
                 ["unverified", int(T.unverified)]];
  for (const [name, value] of cards) {
    const c = document.createElement("div"); c.className = "card";
    const b = document.createElement("b"); b.textContent = value;
    const s = document.createElement("span"); s.textContent = name;
    c.append(b, s); document.getElementById("summary").append(c);
  }

  // ---- tables
  function table(id, rows, columns) {
    const t = document.getElementById(id);
    if (!rows.length) { t.innerHTML = ""; const c = t.insertRow().insertCell(); c.className = "empty"; c.textContent = "no runs"; return; }
    const head = t.createTHead().insertRow();
    for (const [name, , cls] of columns) {
      const th = document.createElement("th"); th.textContent = name;
      if (cls === "text") th.className = "text";
      head.append(th);
    }
    const body = t.createTBody();
    for (const r of rows) {
      const tr = body.insertRow();
      for (const [, get, cls] of columns) {
        const td = tr.insertCell(); td.textContent = get(r);
        if (cls) td.className = typeof cls === "function" ? cls(r) : cls;
      }
    }
  }
  const basisClass = (r) => "basis-" + r.cost_basis;
  const costColumns = [["cost", cost, basisClass], ["basis", (r) => r.cost_basis, basisClass]];
  const outcomeColumns = [["failed", (r) => int(r.failed)], ["interrupted", (r) => int(r.interrupted)],
                          ["abandoned", (r) => int(r.abandoned)], ["unverified", (r) => int(r.unverified)]];
  set("groups-title", "Per " + KEY[R.report] + (R.query.limit !== null ? " (at most " + R.query.limit + ")" : ""));
  table("groups", R.rows, [[KEY[R.report], (r) => label(r.key), TIME ? "" : "id"], ["runs", (r) => int(r.runs)],
    ["tokens", tokens], ...costColumns, ...outcomeColumns]);
  table("runs", doc.runs.rows, [["run", (r) => label(r.key), "id"], ["started", (r) => label(r.started), "text"],
    ["harness", (r) => label(r.harness), "text"], ["model", (r) => label(r.model), "text"],
    ["outcome", (r) => label(r.outcome), "text"], ["duration", (r) => ms(r.duration_ms)], ["tokens", tokens],
    ...costColumns]);
  table("sessions", doc.sessions.rows, [["session", (r) => label(r.key), "id"], ["runs", (r) => int(r.runs)],
    ["tokens", tokens], ...costColumns, ...outcomeColumns]);
  if (EVAL) {
    set("evaluation-title", "Evaluation per " + EVAL.report);
    // the verdict fields a report has (an older index may lack some): shown when present
    const maybe = (field, name, fmt) => EVAL.rows.length && field in EVAL.rows[0] ? [[name, (r) => fmt(r[field])]] : [];
    table("evaluation", EVAL.rows, [[EVAL.report, (r) => label(r.key), "id"], ["runs", (r) => int(r.runs)],
      ...maybe("ok_rate", "ok", pct), ...maybe("judged_runs", "judged", int),
      ["median cost", (r) => r.median_cost_usd === null ? "unknown" : usd(r.median_cost_usd)],
      ["median time", (r) => ms(r.median_duration_ms)], ...outcomeColumns,
      ...maybe("skill_invoked_rate", "skill invoked", pct), ...maybe("tool_error_rate", "tool errors", pct),
      ...costColumns]);
  }
  // ---- charts: one bar per group, stacked by model (the --breakdown rows); drawn once
  // Plotly, which comes after this script, is loaded (the tables show before)
  window.ledgerCharts = function () {
    const css = getComputedStyle(document.documentElement);
    const theme = () => ({paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
                          font: {color: css.getPropertyValue("--fg").trim(), size: 12},
                          "xaxis.gridcolor": css.getPropertyValue("--grid").trim(),
                          "yaxis.gridcolor": css.getPropertyValue("--grid").trim()});
    const themed = (layout) => {  // the theme's "a.b" keys, nested for newPlot
      for (const [k, v] of Object.entries(theme())) {
        const [a, b] = k.split(".");
        if (b) layout[a][b] = v; else layout[a] = v;
      }
      return layout;
    };
    const xs = R.rows.map((r) => plotlyText(label(r.key)));
    const models = [];
    const seen = new Map();
    for (const r of R.rows) for (const m of r.models || []) {
      const name = label(m.model);
      if (!seen.has(name)) { seen.set(name, 0); models.push(name); }
      seen.set(name, seen.get(name) + (m.cost_usd_known || 0));
    }
    models.sort((a, b) => seen.get(b) - seen.get(a));
    function stacks(value, hover, pattern) {
      return models.map((name) => {
        const cells = R.rows.map((r) => (r.models || []).find((m) => label(m.model) === name) || null);
        const trace = {type: "bar", name: plotlyText(name), x: xs, y: cells.map((m) => m ? value(m) : null),
                       hovertext: cells.map((m, i) => m ? plotlyText(name) + "<br>" + plotlyText(label(R.rows[i].key)) +
                                                         "<br>" + hover(m) : ""),
                       hoverinfo: "text"};
        if (cells.some((m) => m && pattern && pattern(m))) {
          trace.marker = {pattern: {shape: cells.map((m) => m && pattern(m) ? "/" : "")}};
        }
        return trace;
      });
    }
    const SYMBOL = {partial: "triangle-up-open", unknown: "x-thin-open"};
    const costTraces = stacks((m) => m.cost_usd_known,
      (m) => "runs: " + int(m.runs) + "<br>" + costLine(m) + "<br>tokens: " + int(m.total_tokens),
      (m) => m.cost_basis === "partial");
    costTraces.push({type: "scatter", mode: "markers", name: "group total", x: xs,
      y: R.rows.map((r) => r.cost_usd_known === null ? 0 : r.cost_usd_known),
      marker: {symbol: R.rows.map((r) => SYMBOL[r.cost_basis] || "line-ew-open"), size: 11,
               color: "#7f7f7f", line: {width: 2}},  // grey: seen on light, dark and paper
      hovertext: R.rows.map((r) => plotlyText(label(r.key)) + "<br>runs: " + int(r.runs) + "<br>" + costLine(r)),
      hoverinfo: "text"});
    const tokenTraces = stacks((m) => m.total_tokens, (m) => "runs: " + int(m.runs) + "<br>tokens: " +
      int(m.total_tokens) + "<br>input " + int(m.input_tokens) + " \u00b7 output " + int(m.output_tokens) +
      "<br>cache read " + int(m.cache_read_tokens) + " \u00b7 cache write " + int(m.cache_write_tokens) +
      "<br>reasoning " + int(m.reasoning_tokens));
    const axis = {type: "category", automargin: true, title: {text: KEY[R.report]}};
    if (!TIME) axis.tickangle = -30;
    const layout = (ytitle) => ({barmode: "stack", margin: {t: 10, r: 10}, hovermode: "closest",
      legend: {orientation: "h", y: -0.25}, xaxis: Object.assign({}, axis),
      yaxis: {title: {text: ytitle}, rangemode: "tozero", automargin: true}});
    const config = {responsive: true, displaylogo: false};
    const charts = [["cost-chart", costTraces, "USD (known)"], ["tokens-chart", tokenTraces, "tokens"]];
    const drawn = () => charts.filter(([id]) => document.getElementById(id).data);
    // the charts follow the reader's colour scheme, and the paper width when printed
    matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => {
      for (const [id] of drawn()) Plotly.relayout(id, theme());
    });
    // (paper is white whatever the screen's scheme)
    const PAPER = {font: {color: "#000000", size: 12}, "xaxis.gridcolor": "rgba(0,0,0,0.12)",
                   "yaxis.gridcolor": "rgba(0,0,0,0.12)"};
    const redraw = (look) => () => { for (const [id] of drawn()) { Plotly.relayout(id, look()); Plotly.Plots.resize(id); } };
    window.addEventListener("beforeprint", redraw(() => PAPER));
    window.addEventListener("afterprint", redraw(theme));
    // one chart per task, the first (cost) painted before the next is drawn: a chart of a
    // year of days by model is thousands of bars (scripts/bench_report.py --html marks each)
    let next = 0;
    const draw = () => {
      const [id, traces, ytitle] = charts[next++];
      Plotly.newPlot(id, traces, themed(layout(ytitle)), config);
      performance.mark("ledger-drawn-" + id);
      if (next < charts.length) requestAnimationFrame(() => setTimeout(draw, 0));
      else document.body.dataset.ready = "1";
    };
    draw();
  };
})();
"""
