"""`ledger report compare [A B]`: arms over the same tasks, with intervals (issue 30).

Thin layer: parses options, calls ledger.report.compare through ledger.report.service.answer,
prints. `ledger report compare ...` reaches this command through LedgerGroup (typer_app).
"""

import sys
from pathlib import Path
from typing import Annotated, Any

from ledger.cli.common import CsvOpt, DbOpt, HomeOpt, JsonOpt, err, exclusive_formats, handle_errors, usage_error
from ledger.cli.params import Argument, Option

CSV_FIELDS = ("key", "runs", "tasks", "ok_runs", "ok_rate", "ok_rate_low", "ok_rate_high", "median_cost_usd",
              "median_cost_low", "median_cost_high", "median_duration_ms", "median_duration_low",
              "median_duration_high", "cost_usd", "cost_per_ok_usd", "tokens", "median_tokens", "tool_calls",
              "tool_errors", "tool_error_rate", "k", "pass_at_k", "pass_hat_k", "excluded")
EXCLUDED_SHOWN = 10


@handle_errors
def compare(
    arms: Annotated[list[str] | None, Argument(help="A B: the baseline arm and the arm compared with it (default: the two arms there are).", show_default=False)] = None,
    by: Annotated[str, Option("--by", help="What an arm is: arm (`ledger run --arm`), skill, or a subject kind (the value of KIND:VALUE).")] = "arm",
    task_by: Annotated[str | None, Option("--task-by", help="A subject kind that names the task (default: the run's first subject; a repeated trial's parent run).", show_default=False, metavar="KIND")] = None,
    strict: Annotated[bool, Option("--strict", help="Exit 1 when any run is excluded (unknown cost, evidence gaps, unverified, abandoned, cancelled, running).", metavar="")] = False,
    home: HomeOpt = None,
    db: DbOpt = None,
    json_: JsonOpt = False,
    csv_: CsvOpt = False,
    html: Annotated[Path | None, Option("--html", help="Write one self-contained HTML page with the intervals drawn (pip install 'ledger\\[html]').", show_default=False, metavar="PATH")] = None,
) -> None:
    """Compare arms over the same tasks: ok rate, cost, cost per solved task, with 95% intervals.

    Per arm: runs, tasks, ok rate (Wilson interval), median cost and duration (bootstrap
    intervals), cost per solved task (every trial's cost over the ok ones), tokens, tool
    error rate, pass@k / pass^k with repeats. Paired over the tasks both arms ran: the
    difference in ok rate and the ratio of median costs (B over A), with a paired bootstrap
    over tasks (fixed seed). Runs that cannot count are listed, never dropped. See
    docs/evaluation.md.
    """
    exclusive_formats(json_, csv_)
    if html is not None and (json_ or csv_):
        raise usage_error("--html cannot be used with --json or --csv", param_hint="--html")
    arms = list(arms or [])
    if len(arms) not in (0, 2):
        raise usage_error("name two arms, A and B (or none: the two arms there are)", param_hint="A B")
    if len(arms) == 2 and arms[0] == arms[1]:
        raise usage_error("A and B are the same arm", param_hint="A B")
    for name, value in (("--by", by), ("--task-by", task_by)):
        if value is not None and (not value or ":" in value):
            raise usage_error("expected arm, skill or a subject kind (the part before ':')", param_hint=name)
    from ledger.home import resolve_home
    from ledger.report.compare import CompareQuery, compare_report
    from ledger.report.service import answer

    q = CompareQuery(by=by, task_by=task_by, arms=(arms[0], arms[1]) if arms else None)
    js = None
    if html is not None:  # a missing `ledger[html]` extra is said before any work
        from ledger.report.html import vega_js

        js = vega_js()
    doc, skipped = answer(resolve_home(home), db, lambda c: compare_report(c, q), notify=err)
    doc["unreadable_runs"] = skipped
    for p in skipped[:5]:
        err(f"warning: unreadable record {p.get('path')}: in no arm")
    if html is not None:
        from ledger.report.compare_html import write_compare

        page = write_compare(doc, html, js)
        print(page)
    elif json_:
        from ledger.cli.common import print_json

        print_json(doc)
    elif csv_:
        from ledger.cli.common import print_csv

        print_csv([[_csv_value(r, f) for f in CSV_FIELDS] for r in doc["rows"]], CSV_FIELDS)
    else:
        _print_human(doc)
    if strict and doc["excluded"]:
        n = doc["excluded"]
        err(f"Error: {n} run{'s' if n != 1 else ''} excluded from the comparison (--strict)")
        err("Hint: see why with `ledger report compare --json` (excluded_runs) and `ledger show RUN`")
        raise SystemExit(1)


def _csv_value(row: dict[str, Any], field: str) -> Any:
    for base, src in (("ok_rate", "ok_rate_ci"), ("median_cost", "median_cost_ci"),
                      ("median_duration", "median_duration_ci")):
        for i, end in enumerate(("_low", "_high")):
            if field == base + end:
                ci = row.get(src)
                return None if ci is None else ci[i]
    return row.get(field)


def _pct(v: Any) -> str:
    return "—" if v is None else f"{v * 100:.0f}%"


def _ci(ci: Any, fmt: Any) -> str:
    return "—" if ci is None else f"{fmt(ci[0])}–{fmt(ci[1])}"


def _usd(v: Any) -> str:
    return "—" if v is None else f"${v:.4f}" if v < 10 else f"${v:,.2f}"


def _secs(ms: Any) -> str:
    return "—" if ms is None else f"{ms / 1000:.1f}s"


def _print_human(doc: dict[str, Any]) -> None:
    from ledger.cli.common import print_table

    header = ["arm", "runs", "tasks", "ok", "95% CI", "median $", "95% CI", "$/ok", "excl", "median time",
              "tool err", "pass@k"]
    rows = []
    for r in doc["rows"]:
        passes = "—" if r["k"] is None else f"@{r['k']} {_pct(r['pass_at_k'])} ^{_pct(r['pass_hat_k'])}"
        rows.append([r["key"], r["runs"], r["tasks"], _pct(r["ok_rate"]), _ci(r["ok_rate_ci"], lambda v: f"{v * 100:.0f}"),
                     _usd(r["median_cost_usd"]), _ci(r["median_cost_ci"], lambda v: f"{v:.4f}"),
                     _usd(r["cost_per_ok_usd"]), r["excluded"], _secs(r["median_duration_ms"]),
                     _pct(r["tool_error_rate"]), passes])
    if not rows:
        err("no runs with an arm here: record them with `ledger run --arm NAME ...`, or group by "
            "--by skill / --by KIND")
        return
    print_table(rows, header, drop_first=(11, 10, 9))
    out = sys.stdout
    p = doc["paired"]
    if p is not None:
        def pp(v: float) -> str:
            n = round(v * 100)
            return ("−" if n < 0 else "+") + str(abs(n)) if n else "0"
        if p["tasks"]:
            d, dci, r, rci = p["ok_rate_diff"], p["ok_rate_diff_ci"], p["median_cost_ratio"], p["median_cost_ratio_ci"]
            out.write(f"paired over {p['tasks']} task{'s' if p['tasks'] != 1 else ''}: "
                      f"ok rate {pp(d)} pp ({pp(dci[0])} to {pp(dci[1])})"
                      + (f", median cost ×{r:.2f} ({rci[0]:.2f}–{rci[1]:.2f})" if r is not None and rci else "")
                      + "\n")
        out.write(p["verdict"] + "\n")
    elif len(doc["rows"]) > 2:
        out.write("name two arms (A B) to pair them\n")
    if doc["excluded"]:
        n = doc["excluded"]
        per = "; ".join(f"{r['key']}: " + ", ".join(f"{k} {v}" for k, v in r["excluded_by"].items())
                        for r in doc["rows"] if r["excluded"])
        out.write(f"excluded: {n} run{'s' if n != 1 else ''} ({per})\n")
        for e in doc["excluded_runs"][:EXCLUDED_SHOWN]:
            out.write(f"  {e['run_id'][:12]}  {e['key']}  {e['task'] or '—'}  {e['reason']}\n")
        if n > EXCLUDED_SHOWN:
            out.write(f"  … and {n - EXCLUDED_SHOWN} more (--json lists every one)\n")
    if doc["unkeyed_runs"]:
        n = doc["unkeyed_runs"]
        err(f"note: {n} run{'s have' if n != 1 else ' has'} no {doc['by']} and {'are' if n != 1 else 'is'} in no arm")
    out.flush()
