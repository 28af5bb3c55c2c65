"""`ledger report compare`: two arms (or more) over the same tasks, with intervals.

The runs come from the view `compare_runs_v` (migration 0011_arms): one row per run that can
be in a comparison, with its verdict (the index's, ledger.records.verdict: never re-judged
here), its `auto` cost (the report's), and `excluded`, why it cannot count (running,
abandoned, cancelled, evidence gaps, unverified, unknown cost: that view is the one place
the rule is written). Excluded runs are counted per arm and listed, never dropped in
silence.

- An arm is a run's key under `--by`: `arm` (manifest `arm`, `ledger run --arm`), `skill`,
  or a subject kind (the value of the run's first subject `KIND:VALUE`). A run without one
  is in no arm (counted as `unkeyed_runs`).
- A task is the view's `task` (the run's first subject, else for a repeated trial its
  repeat's parent run), or with `--task-by KIND` the run's first subject of that kind. A run
  without a task counts in its arm and pairs with nothing.

Per arm (counted runs only): runs, tasks, ok rate with its Wilson 95% interval, median cost,
duration and tokens with bootstrap intervals (over the arm's runs), cost per solved task (the
cost of every counted run, failed ones included, over the ok runs), tool error rate, and
with repeats the mean pass@k / pass^k over its tasks.

Paired (arm B over arm A, over the tasks both ran): per task each arm's ok rate (ok trials /
trials) and median cost; `ok_rate_diff` = mean over tasks of B's ok rate minus A's,
`median_cost_ratio` = the median over tasks of B's task costs over A's; both with a paired
bootstrap over tasks (ledger.report.stats, fixed seed). The verdict line says what the
intervals say.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ledger.errors import LedgerError
from ledger.report import stats

BY_BUILTIN = ("arm", "skill")
EXCLUSION_REASONS = ("running", "abandoned", "cancelled", "evidence-gaps", "unverified", "unknown-cost")
COST_DIGITS = 6
RATE_DIGITS = 4


@dataclass(frozen=True)
class CompareQuery:
    by: str = "arm"                      # arm | skill | a subject kind
    task_by: str | None = None           # None: compare_runs_v's task; else a subject kind
    arms: tuple[str, str] | None = None  # A (the baseline) and B


@dataclass
class CRun:
    run_id: str
    key: str | None
    task: str | None
    ok: bool | None
    cost: float | None
    duration_ms: int | None
    tokens: int | None
    tool_calls: int
    tool_errors: int
    excluded: str | None
    trial: int | None


def _kind(selector: str) -> tuple[str, str]:
    kind, _, value = selector.partition(":")
    return kind, value


def read_runs(c: Any, q: CompareQuery) -> list[CRun]:
    """The runs of compare_runs_v, keyed by q.by and q.task_by (a run seen through two homes
    of a team index is one run)."""
    rows = c.rows("SELECT run_id, arm, skill, task, ok, cost_usd, duration_ms, tokens, tool_calls, tool_errors, "
                  "excluded, trial FROM compare_runs_v ORDER BY created_at, run_id")
    subjects: dict[str, list[str]] = {}
    if q.by not in BY_BUILTIN or q.task_by is not None:
        for rid, sel in c.rows("SELECT run_id, selector FROM subjects ORDER BY home_id, run_id, position"):
            subjects.setdefault(rid, []).append(sel)
    out: list[CRun] = []
    seen: set[str] = set()
    for rid, arm, skill, task, ok, cost, dur, tokens, calls, errs, excluded, trial in rows:
        if rid in seen:
            continue
        seen.add(rid)
        if q.by == "arm":
            key = arm
        elif q.by == "skill":
            key = skill
        else:
            key = next((_kind(s)[1] for s in subjects.get(rid, ()) if _kind(s)[0] == q.by), None)
        if q.task_by is not None:
            task = next((s for s in subjects.get(rid, ()) if _kind(s)[0] == q.task_by), None)
        out.append(CRun(rid, key, task, None if ok is None else bool(ok), None if cost is None else float(cost),
                        dur, tokens, calls or 0, errs or 0, excluded, trial))
    return out


def _r(v: float | None, digits: int) -> float | None:
    return None if v is None else round(v, digits)


def _ci(iv: tuple[float, float] | None, digits: int) -> list[float] | None:
    return None if iv is None else [round(iv[0], digits), round(iv[1], digits)]


def _cells(runs: Sequence[CRun]) -> dict[str, list[CRun]]:
    cells: dict[str, list[CRun]] = {}
    for r in runs:
        if r.task is not None:
            cells.setdefault(r.task, []).append(r)
    return cells


def arm_row(key: str, counted: list[CRun], excluded: list[CRun], k: int | None) -> dict[str, Any]:
    n = len(counted)
    ok = sum(1 for r in counted if r.ok)
    costs = [r.cost for r in counted if r.cost is not None]
    durations = [float(r.duration_ms) for r in counted if r.duration_ms is not None]
    tokens = [float(r.tokens) for r in counted if r.tokens is not None]
    calls = sum(r.tool_calls for r in counted)
    errors = sum(r.tool_errors for r in counted)
    total = sum(costs) if len(costs) == n and n else None  # (every counted run's cost is known)
    by_reason: dict[str, int] = {}
    for r in excluded:
        by_reason[r.excluded or "?"] = by_reason.get(r.excluded or "?", 0) + 1
    cells = _cells(counted)
    passes = [(stats.pass_at_k(len(rs), sum(1 for r in rs if r.ok), k),
               stats.pass_hat_k(len(rs), sum(1 for r in rs if r.ok), k)) for rs in cells.values()] if k else []
    at = [p for p, _ in passes if p is not None]
    hat = [h for _, h in passes if h is not None]
    med_d = stats.median(durations)
    med_t = stats.median(tokens)
    return {
        "key": key, "runs": n, "tasks": len(cells), "ok_runs": ok,
        "ok_rate": _r(ok / n if n else None, RATE_DIGITS), "ok_rate_ci": _ci(stats.wilson(ok, n), RATE_DIGITS),
        "median_cost_usd": _r(stats.median(costs), COST_DIGITS),
        "median_cost_ci": _ci(stats.bootstrap_ci(costs), COST_DIGITS),
        "median_duration_ms": None if med_d is None else round(med_d),
        "median_duration_ci": _ci(stats.bootstrap_ci(durations), 0),
        "cost_usd": _r(total, COST_DIGITS),
        "cost_per_ok_usd": _r(total / ok if total is not None and ok else None, COST_DIGITS),
        "tokens": int(sum(tokens)) if tokens else None,
        "median_tokens": None if med_t is None else round(med_t),
        "tool_calls": calls, "tool_errors": errors,
        "tool_error_rate": _r(errors / calls if calls else None, RATE_DIGITS),
        "k": k if at else None,
        "pass_at_k": _r(stats.mean(at), RATE_DIGITS), "pass_hat_k": _r(stats.mean(hat), RATE_DIGITS),
        "excluded": len(excluded), "excluded_by": dict(sorted(by_reason.items())),
    }


def _task_figures(rs: list[CRun]) -> tuple[float, float | None]:
    ok_rate = sum(1 for r in rs if r.ok) / len(rs)
    return ok_rate, stats.median([r.cost for r in rs if r.cost is not None])


def paired(a: str, b: str, runs_a: list[CRun], runs_b: list[CRun]) -> dict[str, Any]:
    ca, cb = _cells(runs_a), _cells(runs_b)
    common = sorted(set(ca) & set(cb))
    units = [(_task_figures(ca[t]), _task_figures(cb[t])) for t in common]

    def diff(us: Sequence[Any]) -> float | None:
        return stats.mean([ub[0] - ua[0] for ua, ub in us])

    def ratio(us: Sequence[Any]) -> float | None:
        ma = stats.median([ua[1] for ua, _ in us if ua[1] is not None])
        mb = stats.median([ub[1] for _, ub in us if ub[1] is not None])
        return None if ma is None or mb is None or ma == 0 else mb / ma

    d, r = diff(units), ratio(units)
    d_ci, r_ci = stats.paired_bootstrap(units, [diff, ratio]) if units else (None, None)
    out = {"a": a, "b": b, "tasks": len(common),
           "ok_rate_diff": _r(d, RATE_DIGITS), "ok_rate_diff_ci": _ci(d_ci, RATE_DIGITS),
           "median_cost_ratio": _r(r, RATE_DIGITS), "median_cost_ratio_ci": _ci(r_ci, RATE_DIGITS)}
    out["verdict"] = verdict_line(out)
    return out


def _pct(v: float) -> str:
    """A signed whole percentage, with a real minus sign."""
    n = round(v)
    return ("−" if n < 0 else "+") + str(abs(n)) if n else "0"


def verdict_line(p: dict[str, Any]) -> str:
    """One line: "b costs 31% less (95% CI 12–47%); ok rate unchanged (−5 to +9 pp)". A
    difference is claimed only when its 95% interval excludes no difference."""
    b = p["b"]
    if not p["tasks"]:
        return f"no task that both {p['a']} and {b} ran: nothing to pair"
    r, rci = p["median_cost_ratio"], p["median_cost_ratio_ci"]
    if r is None or rci is None:
        cost = "cost not comparable (a median cost of 0 or none)"
    elif rci[1] < 1:
        cost = f"{b} costs {round((1 - r) * 100)}% less (95% CI {round((1 - rci[1]) * 100)}–{round((1 - rci[0]) * 100)}%)"
    elif rci[0] > 1:
        cost = f"{b} costs {round((r - 1) * 100)}% more (95% CI {round((rci[0] - 1) * 100)}–{round((rci[1] - 1) * 100)}%)"
    else:
        cost = f"{b}'s cost unchanged ({_pct((rci[0] - 1) * 100)} to {_pct((rci[1] - 1) * 100)}%)"
    d, dci = p["ok_rate_diff"], p["ok_rate_diff_ci"]
    if d is None or dci is None:
        ok = "ok rate not comparable"
    elif dci[0] > 0:
        ok = f"ok rate up {round(d * 100)} pp (95% CI {_pct(dci[0] * 100)} to {_pct(dci[1] * 100)} pp)"
    elif dci[1] < 0:
        ok = f"ok rate down {round(-d * 100)} pp (95% CI {_pct(dci[0] * 100)} to {_pct(dci[1] * 100)} pp)"
    else:
        ok = f"ok rate unchanged ({_pct(dci[0] * 100)} to {_pct(dci[1] * 100)} pp)"
    return f"{cost}; {ok} over {p['tasks']} task{'s' if p['tasks'] != 1 else ''}"


def compare(runs: Sequence[CRun], q: CompareQuery) -> dict[str, Any]:
    """The comparison document (the `--json` shape) of runs read by read_runs."""
    keyed = [r for r in runs if r.key is not None]
    keys = sorted({r.key for r in keyed})  # type: ignore[type-var]
    if q.arms is not None:
        missing = [a for a in q.arms if a not in keys]
        if missing:
            known = ", ".join(keys) if keys else "none"
            raise LedgerError(f"no runs of {q.by} {' or '.join(repr(m) for m in missing)} (known: {known})",
                              hint=f"record them with `ledger run --{'arm' if q.by == 'arm' else 'skill'} NAME ...`, "
                                   "or pick another grouping with `ledger report compare --by`")
        keys = list(q.arms)
    counted = {k: [r for r in keyed if r.key == k and r.excluded is None] for k in keys}
    excluded = {k: [r for r in keyed if r.key == k and r.excluded is not None] for k in keys}
    sizes = [len(rs) for k in keys for rs in _cells(counted[k]).values() if len(rs) >= 2]
    k_trials = min(sizes) if sizes else None
    rows = [arm_row(k, counted[k], excluded[k], k_trials) for k in keys]
    pair = None
    if len(keys) == 2:
        pair = paired(keys[0], keys[1], counted[keys[0]], counted[keys[1]])
    tasks = []
    for key in keys:
        for task, rs in sorted(_cells(counted[key]).items()):
            ok = sum(1 for r in rs if r.ok)
            tasks.append({"task": task, "key": key, "runs": len(rs), "ok_runs": ok, "k": k_trials,
                          "pass_at_k": _r(stats.pass_at_k(len(rs), ok, k_trials), RATE_DIGITS) if k_trials else None,
                          "pass_hat_k": _r(stats.pass_hat_k(len(rs), ok, k_trials), RATE_DIGITS) if k_trials else None})
    listed = [{"run_id": r.run_id, "key": r.key, "task": r.task, "reason": r.excluded}
              for k in keys for r in excluded[k]]
    return {"by": q.by, "task_by": q.task_by, "rows": rows, "paired": pair, "tasks": tasks,
            "excluded_runs": listed, "excluded": len(listed),
            "unkeyed_runs": len(runs) - len(keyed),
            "intervals": {"level": 0.95, "bootstrap_resamples": stats.RESAMPLES, "seed": stats.SEED}}


def compare_report(c: Any, q: CompareQuery) -> dict[str, Any]:
    return compare(read_runs(c, q), q)
