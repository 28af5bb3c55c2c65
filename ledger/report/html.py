"""`ledger report --html`: one self-contained page, drawn in the browser from the reports'
JSON documents (each one exactly what `ledger report --json` prints for its query).

The page holds the document as inert JSON (`<script type="application/json">`), the
JavaScript of Vega-Lite (Vega, Vega-Lite and vega-embed, from the optional `ledger[html]`
extra) and a small script that builds the tables and the charts' specifications from the
document. Nothing is fetched at view time (a Content-Security-Policy forbids it), and every
string from the data reaches the page as text, never as markup.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from ledger.errors import LedgerError
from ledger.report.kinds import EVALUATION_KINDS
from ledger.report.query import Report, ReportQuery

INSTALL_HINT = "pip install 'ledger[html]'"
TOP = 20  # the most expensive runs and sessions listed
# kinds with about a row per run: without --limit the page lists the most expensive ones,
# so that its size follows the groups shown, never the number of runs
PER_RUN_KINDS = ("run", "session", "subject", "task")
PAGE_LIMIT = 100


def vega_js() -> str:
    """Vega, Vega-Lite and vega-embed as one script, to be inlined; a clear error when the
    extra is not installed.

    vl-convert-python ships the libraries and bundles them on request (1.5-2.5 s in a fresh
    process, most of a page's writing time), so the bundle is kept in the cache directory,
    one file per installed vl-convert (its version and its library file's size and mtime:
    an upgrade or a reinstall is a new bundle). Any trouble with the cache and the bundle is
    made again, in memory."""
    try:
        import vl_convert
    except ImportError:
        raise LedgerError("the HTML report needs the Vega-Lite charting library (vl-convert-python), "
                          "which is not installed", f"install it: {INSTALL_HINT}") from None
    import contextlib
    import hashlib
    import os

    from ledger.price_rates import cache_dir

    try:
        st = os.stat(getattr(vl_convert, "vl_convert", vl_convert).__file__)  # its native library
        identity = f"{getattr(vl_convert, '__version__', '?')}|{st.st_size}|{st.st_mtime_ns}"
    except (AttributeError, OSError, TypeError):
        identity = None
    cached = None
    if identity is not None:
        cached = Path(cache_dir()) / f"vega-{hashlib.sha256(identity.encode()).hexdigest()[:16]}.js"
        try:
            return cached.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            pass
    js = vl_convert.javascript_bundle()
    if cached is not None:
        tmp = cached.with_name(f".{cached.name}.tmp{os.getpid()}")
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(js, encoding="utf-8")
            os.replace(tmp, cached)
        except OSError:  # a read-only cache: the page is still written
            with contextlib.suppress(OSError):
                tmp.unlink()
    return js


def write_report(home: str | Path, db: str | None, q: ReportQuery, path: str | Path,
                 notify: Callable[[str], None] = lambda _msg: None, resync: bool = False,
                 named: bool = True) -> tuple[Report, Path]:
    """`ledger report ... --html PATH`: the page's reports (one snapshot), written to `path`.
    Returns the report itself (its warnings are the CLI's) and the page's path."""
    from ledger.report.service import build_reports

    js = vega_js()  # a missing extra is said before any work
    queries = page_queries(q)
    reports = dict(zip(queries, build_reports(home, db, list(queries.values()), notify=notify, resync=resync,
                                                      named=named)))
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


def inert_json(doc: dict[str, Any]) -> str:
    """`doc` as JSON to sit inside <script>: no `<` may end the element early (a key like
    `</script>`). (This page's and `report compare --html`'s.)"""
    import orjson

    return (orjson.dumps(doc).decode().replace("&", "\\u0026").replace("<", "\\u003c")
            .replace(">", "\\u003e"))


def render_page(doc: dict[str, Any], js: str | None = None) -> str:
    """The page's HTML for `doc` (see page_document)."""
    data = inert_json(doc)
    page = _TEMPLATE.replace("/*STYLE*/", _STYLE)
    head, tail = page.replace("/*DATA*/", data).replace("/*APP*/", _APP).split("/*VEGA*/")
    return head + (vega_js() if js is None else js) + tail


def write_atomically(path: str | Path, text_of: Callable[[], str], hint: str) -> Path:
    """Write `text_of()` to `path` atomically (a reader never sees half a page); an OSError
    is a LedgerError with `hint`. (This page's and `report compare --html`'s.)"""
    import os

    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text_of(), encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise LedgerError(f"cannot write {target}: {exc.strerror or exc}", hint) from None
    return target


def write_page(path: str | Path, doc: dict[str, Any], js: str | None = None) -> Path:
    """Write the page atomically (a reader never sees half a page)."""
    return write_atomically(path, lambda: render_page(doc, js), "choose a writable path: ledger report --html PATH")


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:; font-src data:">
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
    <p class="legend-note">Bars: the known cost of each model. Faded with a dashed outline: a lower
    bound (part of the cost is unknown). Markers: the group's total and its basis (&#9651; partial,
    &#10005; unknown).</p>
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
<script type="module">/*VEGA*/</script>
<script type="module">ledgerCharts();</script>
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
.chart { width: 100%; min-height: 380px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 0.25rem 0.5rem; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th:first-child, td:first-child, .text { text-align: left; }
td.id { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.9em; }
th { color: var(--muted); font-weight: 600; }
.basis-partial, .basis-unknown { color: var(--warn); }
.empty { color: var(--muted); }
/* the charts' tooltips (vega-tooltip's "custom" theme: the page's colours) */
#vg-tooltip-element.custom-theme { background: var(--card); color: var(--fg); border: 1px solid var(--line);
  font-variant-numeric: tabular-nums; }
#vg-tooltip-element.custom-theme td.key { color: var(--muted); }
@media print {
  :root { --bg: #ffffff; --fg: #000000; --muted: #444444; --line: #bbbbbb; --card: #ffffff; --warn: #7a3e00;
          --grid: rgba(0,0,0,0.12); }
  body { max-width: none; padding: 0; font-size: 11px; }
  section, .chart, tr { break-inside: avoid; }
  .chart canvas { max-width: 100% !important; height: auto !important; }  /* the picture, to the paper's width */
  .scroll { overflow: visible; }
  th, td { white-space: normal; }
}
"""

# The page's script: reads the JSON document and builds everything from it. Strings from the
# data go into the DOM with textContent, and into the charts as data (Vega draws them as
# text; its tooltips escape them), never into an expression or markup.
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
  function costLine(d) {  // the tooltip's "cost" line
    if (d.cost_basis === "unknown") return "unknown";
    if (d.cost_basis === "not_applicable") return "n/a (plain commands)";
    let s = cost(d) + " (" + d.cost_basis;
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
  // ---- charts: one bar per group and model (the --breakdown rows), stacked, drawn by
  // Vega-Lite once its script (a module: run after the page is parsed) is there; the header,
  // the totals and the tables show before
  window.ledgerCharts = async function () {
    const css = getComputedStyle(document.documentElement);
    const screen = () => ({fg: css.getPropertyValue("--fg").trim(), grid: css.getPropertyValue("--grid").trim()});
    const PAPER = {fg: "#000000", grid: "rgba(0,0,0,0.12)"};  // paper is white whatever the screen's scheme
    const keys = R.rows.map((r) => label(r.key));
    const K = KEY[R.report];
    // the models, the most expensive first: the stacks' order (bottom up) and the legend's
    const models = [];
    const seen = new Map();
    for (const r of R.rows) for (const m of r.models || []) {
      const name = label(m.model);
      if (!seen.has(name)) { seen.set(name, 0); models.push(name); }
      seen.set(name, seen.get(name) + (m.cost_usd_known || 0));
    }
    models.sort((a, b) => seen.get(b) - seen.get(a));
    const rank = new Map(models.map((m, i) => [m, i]));
    // a bar per bucket and model whose figure is known, stacked here (base y0, top y1: the
    // figure itself is `value`); `tip` makes its tooltip's lines when it is shown (formatting
    // every bar's figures up front took longer than drawing them)
    function stacks(value, tip, lower) {
      const out = [];
      R.rows.forEach((r, i) => {
        const cells = (r.models || []).slice().sort((a, b) => rank.get(label(a.model)) - rank.get(label(b.model)));
        let base = 0;
        for (const m of cells) {
          const v = value(m);
          if (v === null || v === undefined) continue;
          out.push({key: keys[i], model: label(m.model), value: v, y0: base, y1: base + v, lower: lower(m), cell: m, tip});
          base += v;
        }
      });
      return out;
    }
    const barTip = (d) => ({model: d.model, [K]: d.key, runs: int(d.cell.runs)});
    const costBars = stacks((m) => m.cost_usd_known,
      (d) => Object.assign(barTip(d), {cost: costLine(d.cell), tokens: tokens(d.cell)}),
      (m) => m.cost_basis === "partial");
    const tokenBars = stacks((m) => m.total_tokens, (d) => Object.assign(barTip(d), {tokens: tokens(d.cell),
      input: int(d.cell.input_tokens), output: int(d.cell.output_tokens), "cache read": int(d.cell.cache_read_tokens),
      "cache write": int(d.cell.cache_write_tokens), reasoning: int(d.cell.reasoning_tokens)}), () => false);
    // each group's total: a marker whose shape is its basis (a lower bound, unknown: never a silent 0)
    const SHAPE = {partial: "triangle-up", unknown: "M-1,-1L1,1M-1,1L1,-1"};
    const totals = R.rows.map((r, i) => ({key: keys[i], value: r.cost_usd_known === null ? 0 : r.cost_usd_known,
      basis: r.cost_basis, shape: SHAPE[r.cost_basis] || "stroke", cell: r,
      tip: (d) => ({[K]: d.key, runs: int(d.cell.runs), cost: costLine(d.cell)})}));

    // every bucket keeps its place on the axis, in the report's order; a long axis is labelled
    // at about 30 of them (the tooltips name each bar)
    const step = Math.ceil(keys.length / 30);
    const axis = {labelAngle: TIME && step === 1 ? 0 : -30, labelLimit: 180, labelOverlap: true};
    if (step > 1) axis.values = keys.filter((_, i) => i % step === 0);
    const x = {field: "key", type: "ordinal", title: K, scale: {domain: keys}, axis};
    // a model has one colour in both charts; a chart's legend names the models it has a bar of
    const color = (values) => {
      const drawn = new Set(values.map((d) => d.model));
      return {field: "model", type: "nominal", scale: {domain: models},
              legend: {title: null, orient: "bottom", direction: "horizontal", labelLimit: 300,
                       values: models.filter((m) => drawn.has(m))}};
    };
    const bars = (name, values, ytitle) => ({
      name, data: {values}, mark: {type: "bar", tooltip: {expr: "datum"}},
      encoding: {x, color: color(values), y: {field: "y1", type: "quantitative", title: ytitle}, y2: {field: "y0"},
                 // a lower bound: faded, with a dashed outline
                 fillOpacity: {condition: {test: "datum.lower", value: 0.45}, value: 1},
                 stroke: {condition: {test: "datum.lower", value: "#7f7f7f"}, value: null},
                 strokeDash: {condition: {test: "datum.lower", value: [4, 2]}, value: [1, 0]}}});
    const look = screen();
    const chart = (layers) => ({
      width: "container", height: 300, background: "transparent", autosize: {type: "fit-x", contains: "padding"},
      params: [{name: "fg", value: look.fg}, {name: "grid", value: look.grid}],
      config: {font: getComputedStyle(document.body).fontFamily, view: {stroke: null},
               axis: {labelColor: {expr: "fg"}, titleColor: {expr: "fg"}, domainColor: {expr: "fg"},
                      tickColor: {expr: "fg"}, gridColor: {expr: "grid"}},
               legend: {labelColor: {expr: "fg"}, titleColor: {expr: "fg"}}},
      layer: layers});
    const markers = {
      name: "cost_totals", data: {values: totals},
      // grey: seen on light, dark and paper
      mark: {type: "point", filled: false, size: 110, strokeWidth: 2, color: "#7f7f7f", tooltip: {expr: "datum"}},
      encoding: {x, y: {field: "value", type: "quantitative", title: "USD (known)"},
                 shape: {field: "shape", type: "nominal", scale: null}}};
    // (a layer without data is left out: Vega warns about the extent of nothing)
    const charts = [
      ["cost-chart", [costBars.length && bars("cost_bars", costBars, "USD (known)"), totals.length && markers]],
      ["tokens-chart", [tokenBars.length && bars("tokens_bars", tokenBars, "tokens")]],
    ].map(([id, layers]) => [id, layers.filter(Boolean)]);
    // a bar's or marker's tooltip (vega-tooltip shows it): the lines its datum's `tip` makes,
    // as text (vega-tooltip's sanitize escapes it)
    const formatTooltip = (d, sanitize) => "<table>" + Object.entries(d.tip(d)).map(([k, v]) =>
      '<tr><td class="key">' + sanitize(k) + '</td><td class="value">' + sanitize(v) + "</td></tr>").join("") + "</table>";
    const views = window.ledgerViews = {}, compiled = window.ledgerVega = {};
    // the charts follow the reader's colour scheme, and paper's colours when printed
    const recolour = (c) => { for (const v of Object.values(views)) v.signal("fg", c.fg).signal("grid", c.grid).runAsync(); };
    matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => recolour(screen()));
    window.addEventListener("beforeprint", () => recolour(PAPER));
    window.addEventListener("afterprint", () => recolour(screen()));
    // one chart per task, the first (cost) painted before the next is drawn: a chart of a
    // year of days by model is thousands of bars (scripts/bench_report.py --html marks each)
    for (let i = 0; i < charts.length; i++) {
      const [id, layers] = charts[i];
      if (!layers.length) {  // nothing to draw: said so
        const p = document.createElement("p"); p.className = "empty";
        p.textContent = R.rows.length ? "no known figure" : "no runs";
        const el = document.getElementById(id);
        el.replaceChildren(p);
        el.style.minHeight = "0";
        performance.mark("ledger-drawn-" + id);
        continue;
      }
      if (i) await new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)));
      // canvas: a year of days by model drawn as SVG took 20-60 % more time (docs/benchmarks.md);
      // printed, the picture is scaled to the paper's width
      const out = await vegaEmbed("#" + id, chart(layers), {mode: "vega-lite", renderer: "canvas", actions: false,
                                                   tooltip: {theme: "custom", formatTooltip}});
      views[id] = out.view;
      compiled[id] = out.vgSpec;  // (what Vega runs: its expressions hold no string from the data)
      performance.mark("ledger-drawn-" + id);
    }
    document.body.dataset.ready = "1";
  };
})();
"""
