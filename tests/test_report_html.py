"""`ledger report --html`: the page opened in a real headless Chromium (Debian's `chromium`,
driven by playwright-python without its own browser download).

The page must draw the same numbers `ledger report --json` prints for the same query, load
nothing from the network, show hostile names verbatim, and print. Skipped when chromium or
playwright is missing, except under CI (CI=true), where that fails.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from datetime import date, timedelta
from pathlib import Path

import pytest

from reporthelpers import claude_stream, cli, make, report_json

HOSTILE_SKILL = "<script>window.__pwned=1</script>"
HOSTILE_SKILL_2 = "<img src=x onerror=window.__pwned=2>"
HOSTILE_MODEL = "mystery-<b>9</b>"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _require(available: bool, name: str) -> None:
    if available:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{name} is required under CI (.ci/run installs chromium; playwright is in the test extra)")
    pytest.skip(f"{name} is not installed")


@pytest.fixture(scope="module")
def browser():
    _require(os.access(CHROMIUM, os.X_OK), "chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _require(False, "playwright")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


class Opened:
    """A page opened from its file, with every console message and request recorded."""

    def __init__(self, browser, path: Path, **context) -> None:
        self.page = browser.new_page(**context)
        self.console: list[tuple[str, str]] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.console.append((m.type, m.text)))
        self.page.on("pageerror", lambda e: self.console.append(("pageerror", str(e))))
        self.page.on("request", lambda r: self.requests.append(r.url))
        t0 = time.perf_counter()
        self.page.goto(path.as_uri())
        self.page.wait_for_function("document.body.dataset.ready === '1'")
        self.seconds = time.perf_counter() - t0

    def js(self, expr: str):
        return self.page.evaluate(expr)

    def traces(self, chart: str) -> list[dict]:
        return self.js(f"document.getElementById('{chart}').data.map(t => ({{name: t.name, type: t.type, x: t.x, "
                       "y: t.y, hovertext: t.hovertext, symbol: t.marker && t.marker.symbol}))")

    def text(self, selector: str) -> str:
        return self.page.inner_text(selector)


def usd(v: float) -> str:
    """A cost as the page shows it: exact (the JSON's 10 decimals), no exponent."""
    return "$" + f"{v:.10f}".rstrip("0").rstrip(".")


@pytest.fixture
def runs(home):
    """Four days: a reported day with an unpriced model (partial), an estimated day, a day
    whose only run reported no usage (unknown)."""
    make(home, "2026-03-08T06:30:00Z", [claude_stream()], skill=HOSTILE_SKILL)
    make(home, "2026-03-08T07:30:00Z",
         [claude_stream(), {"provider": "anthropic", "model": HOSTILE_MODEL,
                            "counters": {"input_tokens": 10, "output_tokens": 5}}],
         outcome="failed", skill=HOSTILE_SKILL_2)
    make(home, "2026-03-09T12:00:00Z",
         [{"provider": "openai", "model": "gpt-5", "counters": {"input_tokens": 1000, "output_tokens": 200}}],
         harness="codex", model="gpt-5", skill="review")
    # an agent run that reported no usage: its cost is unknown (a plain command's would be
    # not applicable since issue 12, which is no test of "never a silent 0")
    make(home, "2026-03-10T12:00:00Z", [], harness="codex", model="gpt-5")
    return home


def write(tmp_path: Path, *args: str) -> Path:
    out = tmp_path / "report.html"
    res = cli("report", *args, "--html", str(out))
    assert res.exit_code == 0, (res.stdout, res.stderr)
    assert res.stdout.strip() == str(out)
    return out


def test_page_draws_the_json_in_a_real_browser(runs, tmp_path, browser):
    page_path = write(tmp_path, "daily", "--tz", "UTC")
    expected, _ = report_json("daily", "--tz", "UTC", "--breakdown")
    top_runs, _ = report_json("run", "--tz", "UTC", "--limit", "20")
    skills, _ = report_json("skill", "--tz", "UTC")
    o = Opened(browser, page_path, viewport={"width": 1280, "height": 800})

    # offline, quiet, and nothing injected
    assert o.console == []
    assert o.requests == [page_path.as_uri()]
    assert o.js("window.__pwned") is None
    assert o.js("document.scripts.length") == 4  # data, the page's script, Plotly, the call
    # Plotly started with only the trace types the page draws (html.only_traces)
    assert sorted(o.js("Object.keys(Plotly.PlotSchema.get().traces)")) == ["bar", "scatter"]
    # the charts were drawn one after the other, the cost chart first
    drawn = o.js("['cost-chart', 'tokens-chart'].map(id => performance.getEntriesByName('ledger-drawn-' + id)[0].startTime)")
    assert drawn[0] <= drawn[1]
    # the page's data is the JSON `ledger report --json` prints for the same queries
    doc = o.js("JSON.parse(document.getElementById('ledger-data').textContent)")
    assert doc["report"] == expected
    assert doc["runs"] == top_runs
    assert doc["evaluation"] == skills

    keys = [r["key"] for r in expected["rows"]]
    assert keys == ["2026-03-08", "2026-03-09", "2026-03-10"]
    models = {m["model"] for r in expected["rows"] for m in r["models"]}
    assert models == {"claude-sonnet-4-5", HOSTILE_MODEL, "gpt-5", None}
    cost, tokens = o.traces("cost-chart"), o.traces("tokens-chart")
    for chart, field in ((cost, "cost_usd_known"), (tokens, "total_tokens")):
        bars = [t for t in chart if t["type"] == "bar"]
        assert len(bars) == len(models)
        for t in bars:  # one bar per bucket and model: the model's figure of that bucket
            assert t["x"] == keys
            name = t["name"].replace("&lt;", "<").replace("&gt;", ">")
            cells = [next((m for m in r["models"] if (m["model"] or "(none)") == name), None)
                     for r in expected["rows"]]
            assert t["y"] == [m[field] if m else None for m in cells]
    # drawn: a bar per bucket and model, with a height where the figure is known
    heights = o.js("[...document.querySelectorAll('#cost-chart .trace.bars')].map(t => "
                   "[...t.querySelectorAll('.point path')].map(p => p.getBBox().height > 0))")
    assert [len(t) for t in heights] == [len(keys)] * len(models)
    assert sum(map(sum, heights)) == sum(1 for r in expected["rows"] for m in r["models"]
                                         if m["cost_usd_known"] is not None) == 2
    # the group totals and their basis: partial (a lower bound), estimated, unknown (never a silent 0)
    total = next(t for t in cost if t["name"] == "group total")
    assert [r["cost_basis"] for r in expected["rows"]] == ["partial", "estimated", "unknown"]
    assert total["symbol"] == ["triangle-up-open", "line-ew-open", "x-thin-open"]
    r0, r1 = expected["rows"][0], expected["rows"][1]
    assert total["hovertext"][0] == f"2026-03-08<br>runs: 2<br>cost: ≥{usd(r0['cost_usd_known'])} (partial: 1 of 2 unknown)"
    assert total["hovertext"][1] == f"2026-03-09<br>runs: 1<br>cost: {usd(r1['cost_usd'])} (estimated)"
    assert total["hovertext"][2] == "2026-03-10<br>runs: 1<br>cost: unknown"

    # the tooltip a person sees over the Claude bar of the 8th: the JSON's exact figures
    claude = next(m for m in r0["models"] if m["model"] == "claude-sonnet-4-5")
    assert claude["cost_usd"] == 0.005433 and claude["total_tokens"] == 6792
    i = next(i for i, t in enumerate(cost) if t["name"] == "claude-sonnet-4-5")
    box = o.page.locator(f"#cost-chart .trace.bars:nth-of-type({i + 1}) .point path").first.bounding_box()
    o.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)  # as a person does
    hover = o.page.wait_for_selector("#cost-chart .hoverlayer .hovertext").text_content()
    assert "claude-sonnet-4-5" in hover and "cost: $0.005433 (reported)" in hover and "tokens: 6,792" in hover
    # the legend names every model verbatim (a model name is never markup)
    legend = o.js("[...document.querySelectorAll('#cost-chart .legendtext')].map(e => e.textContent)")
    assert sorted(legend) == sorted(["claude-sonnet-4-5", HOSTILE_MODEL, "gpt-5", "(none)", "group total"])

    # tables: the basis of each group, the most expensive runs with their ids, the evaluation view
    groups = o.text("#groups")
    assert f"≥{usd(r0['cost_usd_known'])}\tpartial" in groups and "unknown\tunknown" in groups
    run_ids = o.js("[...document.querySelectorAll('#runs tbody tr td:first-child')].map(e => e.textContent)")
    assert run_ids == [r["key"] for r in top_runs["rows"]] and len(run_ids) == 4
    eval_keys = o.js("[...document.querySelectorAll('#evaluation tbody tr td:first-child')].map(e => e.textContent)")
    assert eval_keys == [r["key"] or "(none)" for r in skills["rows"]]
    assert HOSTILE_SKILL in eval_keys and HOSTILE_SKILL_2 in eval_keys
    head = o.js("[...document.querySelectorAll('#evaluation th')].map(e => e.textContent)")
    assert {"ok", "median cost", "median time", "failed", "interrupted", "abandoned", "unverified",
            "skill invoked"} <= set(head)
    # what produced it
    assert "time zone UTC" in o.text("#query")
    made = o.text("#made")
    assert doc["generated_at"] in made and "genai-prices 0.2.3" in made
    assert f"no price for model '{HOSTILE_MODEL}'" in o.text("#warnings")

    # a laptop's width: the page itself never scrolls sideways
    assert o.js("document.documentElement.scrollWidth") <= 1280
    shot = tmp_path / "report.png"
    o.page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get("LEDGER_REPORT_SCREENSHOT"):  # docs/img/report.png is made this way
        shutil.copy(shot, os.environ["LEDGER_REPORT_SCREENSHOT"])
    print(f"screenshot: {shot}")
    # printed: a PDF of the page
    o.page.emulate_media(media="print")
    pdf = o.page.pdf(format="A4")
    assert pdf.startswith(b"%PDF") and len(pdf) > 10_000
    assert o.console == []


def test_dark_scheme_and_a_group_report(runs, tmp_path, browser):
    page_path = write(tmp_path, "skill", "--tz", "UTC")
    expected, _ = report_json("skill", "--tz", "UTC", "--breakdown")
    o = Opened(browser, page_path, color_scheme="dark", viewport={"width": 1280, "height": 800})
    assert o.console == [] and o.requests == [page_path.as_uri()]
    assert o.js("window.__pwned") is None
    assert o.js("getComputedStyle(document.body).backgroundColor") == "rgb(20, 23, 28)"
    doc = o.js("JSON.parse(document.getElementById('ledger-data').textContent)")
    assert doc["report"] == expected and "evaluation" not in doc  # the report is the evaluation view
    # a bar per skill; the hostile names are axis labels shown as text
    bars = [t for t in o.traces("cost-chart") if t["type"] == "bar"]
    keys = [r["key"] or "(none)" for r in expected["rows"]]
    assert all(len(t["x"]) == len(keys) for t in bars)
    ticks = o.js("[...document.querySelectorAll('#cost-chart .xtick text')].map(e => e.textContent)")
    assert sorted(ticks) == sorted(keys)
    assert HOSTILE_SKILL in o.text("#evaluation") and HOSTILE_SKILL_2 in o.text("#groups")
    # light text on the dark screen; printed, black on white paper
    assert o.js("document.getElementById('cost-chart').layout.font.color") == "#e3e6eb"
    o.page.emulate_media(media="print")
    o.js("window.dispatchEvent(new Event('beforeprint'))")
    assert o.js("document.getElementById('cost-chart').layout.font.color") == "#000000"
    assert o.js("getComputedStyle(document.body).backgroundColor") == "rgb(255, 255, 255)"
    assert o.console == []


def test_missing_plotly_is_an_error_with_the_install_hint(runs, tmp_path, monkeypatch):
    # the extra not installed: importing plotly fails
    monkeypatch.setitem(sys.modules, "plotly", None)
    monkeypatch.setitem(sys.modules, "plotly.offline", None)
    out = tmp_path / "report.html"
    res = cli("report", "--html", str(out))
    assert res.exit_code == 1
    assert res.stderr.splitlines() == [
        "Error: the HTML report needs the Plotly charting library, which is not installed",
        "Hint: install it: pip install 'ledger[html]'",
    ]
    assert not out.exists()
    assert not (runs / "index.sqlite").exists()  # said before any work


def test_html_options(runs, tmp_path, monkeypatch):
    for extra in ("--json", "--csv"):
        res = cli("report", "--html", str(tmp_path / "x.html"), extra)
        assert res.exit_code == 2 and "--html cannot be used with --json or --csv" in res.stderr
    res = cli("report", "--open")
    assert res.exit_code == 2 and "--open" in res.stderr
    opened = []
    import webbrowser

    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url))
    page_path = write(tmp_path, "monthly", "--open")
    assert opened == [page_path.resolve().as_uri()]
    res = cli("report", "--html", str(tmp_path / "missing-dir" / "x.html"))
    assert res.exit_code == 1 and res.stderr.startswith("Error: cannot write ")


def test_the_page_lists_the_most_expensive_rows_of_a_per_run_report(runs, tmp_path, monkeypatch):
    from ledger.report import html

    monkeypatch.setattr(html, "PAGE_LIMIT", 2)
    page_path = write(tmp_path, "run", "--tz", "UTC")
    doc = _document(page_path)
    assert [r["key"] for r in doc["report"]["rows"]] == [r["key"] for r in report_json(
        "run", "--tz", "UTC", "--limit", "2", "--breakdown")[0]["rows"]]
    assert doc["report"]["totals"]["runs"] == 4  # the totals still cover every run
    # an explicit --limit is the user's
    doc = _document(write(tmp_path, "run", "--tz", "UTC", "--limit", "3"))
    assert len(doc["report"]["rows"]) == 3


def _document(page_path: Path) -> dict:
    text = page_path.read_text(encoding="utf-8")
    start = text.index('<script type="application/json" id="ledger-data">') + len(
        '<script type="application/json" id="ledger-data">')
    data = text[start:text.index("</script>", start)]
    assert "<" not in data  # nothing in the data can end its element
    return json.loads(data)


# --------------------------------------------------------------------------------------
# size and speed: a year of a million runs


def year_of_a_million_runs() -> dict:
    """The page's document for a million runs over a year: 365 days x 10 models, the top 20
    runs and sessions, 21 skills (the shape scripts/bench_report.py generates)."""
    models = [f"model-{i}" for i in range(10)]

    def row(key, runs: int, **extra) -> dict:
        d = {"key": key, "runs": runs, "input_tokens": runs * 1000, "output_tokens": runs * 200,
             "cache_read_tokens": runs * 5000, "cache_write_tokens": runs * 100, "reasoning_tokens": None,
             "total_tokens": runs * 6300, "unmeasured_usage_runs": 0, "cost_usd": round(runs * 0.0123456789, 10),
             "cost_basis": "mixed", "cost_usd_known": round(runs * 0.0123456789, 10), "unmeasured_cost_runs": 0,
             "failed": runs // 10, "interrupted": runs // 50, "abandoned": runs // 100, "unverified": runs // 100,
             "evidence_gaps": runs // 100}
        d.update(extra)
        return d

    def report(kind: str, rows: list) -> dict:
        q = {"tz": "UTC", "since": None, "until": None, "week_start": None, "filters": {}, "cost": "auto",
             "breakdown": kind == "daily", "order": "asc", "limit": None}
        return {"report": kind, "query": q, "rows": rows, "totals": row(None, 1_000_000),
                "pricing": {"cost": "auto", "price_data": "genai-prices 0.2.3", "unpriced": []},
                "unreadable_runs": 0, "unreadable": []}

    days = [(date(2026, 1, 1) + timedelta(d)).isoformat() for d in range(365)]
    per_model = [{k: v for k, v in row(None, 274, model=m).items() if k != "key"} for m in models]
    verdicts = {"median_cost_usd": 0.01, "median_duration_ms": 60000, "judged_runs": 40000, "ok_runs": 30000,
                "ok_rate": 0.75, "skill_expected_runs": 100, "skill_invoked_runs": 90, "skill_invoked_rate": 0.9,
                "tool_calls": 5, "tool_errors": 1, "tool_error_rate": 0.2}
    return {"generated_at": "2026-12-01T00:00:00Z", "ledger_version": "0.1.0",
            "report": report("daily", [row(d, 2740, models=per_model) for d in days]),
            "runs": report("run", [row(f"run_{i:032x}", 1, started="2026-05-05T00:00:00Z", harness="claude",
                                       model="model-0", outcome="completed", duration_ms=123456)
                                   for i in range(20)]),
            "sessions": report("session", [row(f"session-{i}", 3) for i in range(20)]),
            "evaluation": report("skill", [row(f"skill-{i}", 47619, **verdicts) for i in range(21)])}


def test_a_year_of_a_million_runs_is_written_fast_and_opens(tmp_path, browser):
    from ledger.report.html import plotly_js, write_page

    doc = year_of_a_million_runs()
    t0 = time.perf_counter()
    page_path = write_page(tmp_path / "year.html", doc)
    written = time.perf_counter() - t0
    assert written < 2.0
    # the page's size is Plotly plus the groups shown, whatever the number of runs
    data = len(json.dumps(doc, separators=(",", ":")))
    assert page_path.stat().st_size < len(plotly_js()) + data + 40_000
    o = Opened(browser, page_path, viewport={"width": 1280, "height": 800})
    assert o.console == [] and o.requests == [page_path.as_uri()]
    painted = o.js("performance.getEntriesByName('first-contentful-paint')[0].startTime") / 1000
    bars = o.js("document.querySelectorAll('#cost-chart .trace.bars .point path').length")
    assert bars == 365 * 10
    print(f"written {written:.3f} s, {page_path.stat().st_size:,} bytes; first paint {painted:.3f} s, "
          f"charts drawn {o.seconds:.3f} s")
    # the figures and tables show at once; the charts wait for Plotly's own start-up (most of
    # their time: docs/report.md); generous on a shared machine
    assert painted < 2.0
    assert o.seconds < 10.0


def test_plotly_registers_only_the_page_traces():
    """The full bundle of the Python package, its start-up list cut to the bar trace's module;
    a bundle this cannot read is inlined whole."""
    import re

    from plotly.offline import get_plotlyjs

    from ledger.report.html import only_traces, plotly_js

    full = get_plotlyjs()
    calls = [m.group(1).split(",") for m in re.finditer(r"\.register\(\[([^\]]*)\]\)", full)]
    kept = [m.group(1).split(",") for m in re.finditer(r"\.register\(\[([^\]]*)\]\)", plotly_js())]
    assert len(calls) == len(kept) == 1 and len(calls[0]) > 40 and len(kept[0]) == 1
    assert set(kept[0]) <= set(calls[0])
    assert len(plotly_js()) == len(full) - len(",".join(calls[0])) + len(kept[0][0])
    for odd in ("var Plotly={};", full.replace('moduleType:"trace",name:"bar"', 'moduleType:"trace",name:"barx"'),
                full + ";R.register([a(),b()])"):  # (two start-up lists: which one?)
        assert only_traces(odd, ("bar",)) == odd
    assert only_traces(full, ("bar", "no-such-trace")) == full
