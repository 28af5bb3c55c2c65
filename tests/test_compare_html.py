"""`ledger report compare --html`: the comparison drawn with its intervals, opened in a real
headless Chromium (as tests/test_report_html.py does): the page draws exactly the intervals
`--json` prints, loads nothing from the network and shows hostile arm names as text."""

from __future__ import annotations

import json

import pytest

from reporthelpers import cli
from test_compare_report import COSTS, _run
from test_report_html import Opened, browser  # noqa: F401 - the fixture

HOSTILE = "<img src=x onerror=window.__pwned=1>"

_DRAWN = """(chart) => {
  const out = [];
  (function walk(mark) {
    for (const item of mark.items || []) {
      if (mark.marktype === "group") { for (const c of item.items || []) walk(c); continue; }
      const d = item.datum || {};
      if (typeof d.low === "number") out.push({type: mark.marktype, label: d.label, value: d.value, low: d.low, high: d.high});
    }
  })(window.ledgerViews[chart].scenegraph().root);
  return out;
}"""


@pytest.fixture
def ab_home(home):
    minute = 0
    names = {"a": "a", "b": HOSTILE}
    for arm, tasks in COSTS.items():
        for task, trials in tasks.items():
            for i, (ok, cost) in enumerate(trials, 1):
                minute += 1
                _run(home, names[arm], task, ok, cost, trial={"number": i, "of": 2}, minute=minute)
    _run(home, "a", "task:t1", True, None, model="acme-unpriced-9", minute=40)
    return home


def test_the_page_draws_the_intervals_of_the_json(ab_home, tmp_path, browser):  # noqa: F811
    res = cli("report", "compare", "a", HOSTILE, "--json")
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    page = tmp_path / "compare.html"
    res = cli("report", "compare", "a", HOSTILE, "--html", str(page))
    assert res.exit_code == 0, res.stderr
    assert res.stdout.strip() == str(page)
    opened = Opened(browser, page)
    assert not opened.refused and not [m for m in opened.console if m[0] in ("error", "pageerror")]
    assert opened.js("window.__pwned") is None
    assert opened.js("document.getElementById('verdict').textContent") == doc["paired"]["verdict"]
    rows = {r["key"]: r for r in doc["rows"]}
    for chart, value, interval in (("ok-chart", "ok_rate", "ok_rate_ci"), ("cost-chart", "median_cost_usd", "median_cost_ci")):
        drawn = opened.js(_DRAWN, chart)
        points = {d["label"]: d for d in drawn if d["type"] == "symbol"}
        rules = {d["label"]: d for d in drawn if d["type"] == "rule"}
        assert set(points) == set(rows) == set(rules)
        for key, r in rows.items():
            assert points[key]["value"] == r[value]
            assert [rules[key]["low"], rules[key]["high"]] == r[interval]
    p = doc["paired"]
    diff = [d for d in opened.js(_DRAWN, "diff-chart") if d["type"] == "rule"]
    assert [diff[0]["low"], diff[0]["high"]] == pytest.approx([v * 100 for v in p["ok_rate_diff_ci"]])
    ratio = [d for d in opened.js(_DRAWN, "ratio-chart") if d["type"] == "rule"]
    assert [ratio[0]["low"], ratio[0]["high"]] == p["median_cost_ratio_ci"]
    # the arms' table names the hostile arm as text, and the excluded run is listed
    assert HOSTILE in opened.js("document.getElementById('arms').textContent")
    assert doc["excluded_runs"][0]["run_id"] in opened.js("document.getElementById('excluded').textContent")


def test_html_cannot_go_with_json(ab_home, tmp_path):
    res = cli("report", "compare", "--html", str(tmp_path / "x.html"), "--json")
    assert res.exit_code == 2
