"""Runs, not pieces (ledger.report.runcount): an imported session is one fact row per
15-minute slot and model, and every report counts it once per group it spent in.

Pinned by hand on one session across two days and three models (one unpriced), and checked
against the per-row rule as it was written before issue 28 (`reference_count_runs`: every
piece row read into Python) on a generated history, for every report kind, zone and option
that reaches the counting, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

import claudehistory
from ledger.report import aggregate, runcount
from ledger.report.accumulate import COST, COST_N, M_COST, M_COST_N, M_PART, M_ROWS, PART, PIECES, Agg, _num
from ledger.report.buckets import make_buckets
from ledger.report.factsql import FACTS, _cost_columns, _key_column, _none_if_empty, _rows, _select
from ledger.report.kinds import SLOT_SECONDS
from ledger.report.query import ReportQuery
from ledger.report.sqltext import Sql
from reporthelpers import claude_stream, cli, make, report_json

SESSION = "5e55a0b1-0d0e-4c1a-9a77-2d3f4e5a6b7c"
SONNET, OPUS, UNPRICED = claudehistory.MODELS[0], claudehistory.MODELS[1], claudehistory.UNPRICED_MODEL


def _line(**fields: Any) -> str:
    return json.dumps(fields, separators=(",", ":")) + "\n"


def _session_log(cfg: Path, responses: list[tuple[str, str]], started: str) -> None:
    """One Claude Code 2.1.x session (no cost lines: every cost is the estimate)."""
    out = [_line(parentUuid=None, isSidechain=False, type="user", uuid="u0", sessionId=SESSION, timestamp=started,
                 cwd="/home/u/work/proj", version="2.1.328", message={"role": "user", "content": "hi"})]
    for n, (at, model) in enumerate(responses, 1):
        out.append(_line(parentUuid=f"u{n - 1}", isSidechain=False, userType="external", cwd="/home/u/work/proj",
                         sessionId=SESSION, version="2.1.328", type="assistant", uuid=f"u{n}", timestamp=at,
                         requestRef=f"req_{n}",
                         message={"id": f"msg_{n}", "model": model, "role": "assistant", "stop_reason": "end_turn",
                                  "content": [{"type": "text", "text": "ok"}],
                                  "usage": {"input_tokens": 10 + n, "output_tokens": 5,
                                            "cache_read_input_tokens": 100}}))
    p = cfg / "projects" / "-home-u-work-proj" / f"{SESSION}.jsonl"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(out))


def _ok(*args: str) -> Any:
    res = cli(*args)
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return res


def test_a_session_across_two_days_and_three_models_is_one_run_a_day_and_a_model(db_url, home, tmp_path):
    # started 23:20 (its start row: a slot of its own), pieces in 7 more slots over two UTC
    # days: the unpriced model in one slot of the first, two of the second, the others' in
    # two slots of the second; a run record on the second day ("runs": the runs started)
    _session_log(tmp_path / "claude", [
        ("2026-03-01T23:40:00.000Z", SONNET), ("2026-03-01T23:50:00.000Z", UNPRICED),
        ("2026-03-02T00:10:00.000Z", OPUS), ("2026-03-02T00:20:00.000Z", SONNET),
        ("2026-03-02T00:40:00.000Z", SONNET), ("2026-03-02T00:50:00.000Z", UNPRICED),
        ("2026-03-02T01:05:00.000Z", UNPRICED),
    ], "2026-03-01T23:20:00.000Z")
    _ok("import", "claude", "--from", str(tmp_path / "claude"))
    make(home, "2026-03-02T10:00:00Z", [claude_stream()])
    daily, _ = report_json("daily", "--tz", "UTC", "--breakdown", "--db", db_url)
    pieces = json.loads(_ok("sql", "--json", "--db", db_url, "SELECT count(*) AS n FROM report_facts "
                            "WHERE source = 'claude-log' AND piece = 1").stdout)
    assert pieces == [{"n": 8}]  # (one per slot: counted as one run a day)
    rows = {r["key"]: r for r in daily["rows"]}
    assert list(rows) == ["2026-03-01", "2026-03-02"]
    assert [(r["runs"], r["unmeasured_cost_runs"]) for r in rows.values()] == [(1, 1), (1, 1)]
    assert (daily["totals"]["runs"], daily["totals"]["unmeasured_cost_runs"]) == (2, 1)
    models = {k: {m["model"]: (m["runs"], m["unmeasured_cost_runs"]) for m in r["models"]} for k, r in rows.items()}
    assert models["2026-03-01"] == {SONNET: (1, 0), UNPRICED: (1, 1)}
    assert models["2026-03-02"] == {SONNET: (1, 0), OPUS: (1, 0), UNPRICED: (1, 1), "claude-sonnet-4-5": (1, 0)}
    # New York: the whole session on its first local day, the record on the next
    ny, _ = report_json("daily", "--tz", "America/New_York", "--db", db_url)
    assert [(r["key"], r["runs"], r["unmeasured_cost_runs"]) for r in ny["rows"]] == [
        ("2026-03-01", 1, 1), ("2026-03-02", 1, 0)]
    for kind in ("weekly", "monthly", "session", "harness", "run", "model"):
        doc, _ = report_json(kind, "--tz", "UTC", "--db", db_url)
        assert (doc["totals"]["runs"], doc["totals"]["unmeasured_cost_runs"]) == (2, 1), kind
    model, _ = report_json("model", "--tz", "UTC", "--db", db_url)
    assert {r["key"]: r["runs"] for r in model["rows"]} == {SONNET: 1, OPUS: 1, UNPRICED: 1, "claude-sonnet-4-5": 1}


# --- the per-row rule before issue 28, the oracle of the SQL counting ------------------------

def reference_count_runs(c: Any, q: ReportQuery, conds: list[Sql], groups: dict[Any, Agg], totals: Agg) -> None:
    if not groups or not _rows(c, Sql("SELECT 1 FROM log_sessions LIMIT 1")):
        return
    f = FACTS
    run_cost, model_cost = _cost_columns(q)
    key = "NULL" if q.kind == "task" else (f"{f}.created_s" if q.is_time else _key_column(q, SLOT_SECONDS))
    cols = [key, f"{f}.model_key", f"{f}.home_id", f"{f}.run_id", f"{f}.piece",
            f"CASE WHEN {f}.piece = 1 AND {run_cost} IS NULL THEN 1 ELSE 0 END",
            f"CASE WHEN {model_cost} IS NULL THEN 1 ELSE 0 END"]
    source = f"log_sessions AS counted CROSS JOIN {f}"
    on = Sql(f"counted.linked_run_id IS NULL AND {f}.home_id = counted.home_id AND {f}.run_id = counted.row_id")
    rows = _rows(c, _select(cols, source, [on, *conds]))
    if not rows:
        return
    key_of: Any = None
    if q.is_time:
        lo, hi = min(int(r[0]) for r in rows), max(int(r[0]) for r in rows)
        key_of = make_buckets(datetime.fromtimestamp(lo, timezone.utc), datetime.fromtimestamp(hi, timezone.utc),
                              q.zone, q.kind, q.week_start).label_of_epoch
    elif q.kind == "task":
        from ledger.report.tasks import task_keys

        keys = task_keys(c)
    elif q.kind == "model":
        key_of = _none_if_empty
    seen: dict[Any, list[Any]] = {}
    for k, model, home, rid, piece, unknown_piece, unknown_row in rows:
        model = _none_if_empty(model)
        if q.kind == "task":
            k = keys.get((home, rid), rid)
        elif key_of is not None:
            k = key_of(int(k) if q.is_time else k)
        run = (home, rid)
        for g in ((k, True), (None, False)):
            acc = seen.setdefault(g, [0, 0, set(), set(), {}])
            acc[0] += piece
            acc[1] += unknown_piece
            if piece:
                acc[2].add(run)
            if unknown_piece:
                acc[3].add(run)
            m = acc[4].setdefault(model, [0, 0, set(), set()])
            m[0] += 1
            m[1] += unknown_row
            m[2].add(run)
            if unknown_row:
                m[3].add(run)
    for (k, grouped), acc in seen.items():
        if grouped and q.kind == "model":
            continue
        agg = groups.get(k) if grouped else totals
        if agg is not None:
            _reference_recount(agg, acc)


def _reference_recount(agg: Agg, acc: list[Any]) -> None:
    v = agg.v
    pieces, unknown = _num(v[PIECES]) or 0, (_num(v[PIECES]) or 0) - (_num(v[COST_N]) or 0)
    runs = pieces - acc[0] + len(acc[2])
    unmeasured = unknown - acc[1] + len(acc[3])
    v[PIECES], v[COST_N] = runs, runs - unmeasured
    if runs - unmeasured == 0 and v[COST] is not None:
        v[PART] = _num(v[COST]) + (_num(v[PART]) or 0)
        v[COST] = None
    for model, (rows, unknown_rows, used, unknown_runs) in acc[4].items():
        mv = agg.models.get(model)
        if mv is None:
            continue
        n, bad = _num(mv[M_ROWS]) or 0, (_num(mv[M_ROWS]) or 0) - (_num(mv[M_COST_N]) or 0)
        n2, bad2 = n - rows + len(used), bad - unknown_rows + len(unknown_runs)
        mv[M_ROWS], mv[M_COST_N] = n2, n2 - bad2
        if n2 - bad2 == 0 and mv[M_COST] is not None:
            mv[M_PART] = _num(mv[M_COST]) + (_num(mv[M_PART]) or 0)
            mv[M_COST] = None


OFF_GRID = timezone(timedelta(minutes=7))  # (a historical offset: buckets start inside a slot)
QUERIES = [
    dict(kind="daily"), dict(kind="daily", breakdown=True), dict(kind="daily", cost="reported"),
    dict(kind="daily", zone=ZoneInfo("America/New_York"), breakdown=True),
    dict(kind="daily", zone=ZoneInfo("Asia/Kathmandu")), dict(kind="daily", zone=OFF_GRID, breakdown=True),
    dict(kind="weekly", zone=ZoneInfo("America/Los_Angeles"), week_start="sunday"),
    dict(kind="weekly", breakdown=True), dict(kind="monthly", zone=ZoneInfo("Pacific/Chatham")),
    dict(kind="daily", since=date(2026, 1, 10), until=date(2026, 1, 11), breakdown=True),
    dict(kind="daily", filters={"model": ["claude-opus*"]}), dict(kind="daily", filters={"harness": ["claude"]}),
    dict(kind="run"), dict(kind="run", breakdown=True), dict(kind="run", limit=3), dict(kind="session"),
    dict(kind="session", breakdown=True), dict(kind="model"), dict(kind="model", breakdown=True),
    dict(kind="model", cost="estimated"), dict(kind="harness", breakdown=True), dict(kind="subject"),
    dict(kind="repo"), dict(kind="host", breakdown=True), dict(kind="home"), dict(kind="task"),
    dict(kind="task", breakdown=True), dict(kind="skill"),
]


@pytest.fixture
def generated(db_url, home, tmp_path):
    """A generated history (sessions across midnight, resumed days later, the unpriced model in
    several slots of one session: seed 12) beside run records of the same days, synced into
    `db_url`; its connection."""
    claudehistory.generate(tmp_path / "claude", sessions=14, seed=12)
    _ok("import", "claude", "--from", str(tmp_path / "claude"))
    for i, at in enumerate(("2026-01-09T23:59:00Z", "2026-01-10T00:01:00Z", "2026-01-11T12:00:00Z")):
        make(home, at, [claude_stream(model=OPUS if i % 2 else SONNET)], subjects=[f"task:T-{i % 2}"])
    _ok("report", "--db", db_url)  # (syncs the report's tables)
    _ok("report", "session", "--db", db_url)  # (and builds report_groups)
    if db_url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"))
        yield conn
        conn.close()
        return
    import sqlalchemy as sa

    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        yield conn
    engine.dispose()


def _answer(conn: Any, q: ReportQuery, counting: Any, monkeypatch: Any, source: str | None = None) -> Any:
    monkeypatch.setattr(aggregate, "_count_runs", counting)
    rep = aggregate.run_report(conn, q, source)
    return rep.rows, rep.totals


def _both(calls: list[Any]) -> Any:
    """_count_runs and the reference on copies of the same groups: the counts they leave (a
    group's pieces, runs and known runs, per model) must be the same, not only the rows
    printed from them."""
    import copy

    def counting(c: Any, q: ReportQuery, conds: list[Sql], groups: dict[Any, Agg], totals: Agg) -> None:
        want_groups, want_totals = copy.deepcopy(groups), copy.deepcopy(totals)
        reference_count_runs(c, q, conds, want_groups, want_totals)
        runcount._count_runs(c, q, conds, groups, totals)
        got = {k: ([_num(x) for x in a.v], {m: [_num(x) for x in mv] for m, mv in a.models.items()})
               for k, a in [*groups.items(), ("(totals)", totals)]}
        want = {k: ([_num(x) for x in a.v], {m: [_num(x) for x in mv] for m, mv in a.models.items()})
                for k, a in [*want_groups.items(), ("(totals)", want_totals)]}
        assert got == want, q.kind
        calls.append(q.kind)
    return counting


def test_the_sql_counting_answers_as_the_per_row_rule(generated, monkeypatch):
    counted, calls = 0, []
    for spec in QUERIES:
        q = ReportQuery(**spec)  # type: ignore[arg-type]
        want = _answer(generated, q, reference_count_runs, monkeypatch)
        assert _answer(generated, q, _both(calls), monkeypatch) == want, spec
        if not q.is_time and q.kind not in ("session", "skill"):
            assert _answer(generated, q, _both(calls), monkeypatch, "facts") == want, spec
        counted += _answer(generated, q, lambda *a: None, monkeypatch) != want
    assert counted == len(QUERIES)  # (in each, some group's pieces are not its runs: the rule is tested)
    assert len(calls) > len(QUERIES)


def test_a_run_id_holding_the_separator_is_read_row_by_row(generated, monkeypatch):
    # every run id holds "-": group_concat's lists do not split into their counts, and the
    # rows are read one by one (the same counts)
    read: list[str] = []
    monkeypatch.setattr(runcount, "SEP", "-")
    row_form = runcount._row_form
    monkeypatch.setattr(runcount, "_row_form", lambda *a, **k: read.append(a[3]) or row_form(*a, **k))
    for spec in (dict(kind="daily"), dict(kind="daily", breakdown=True), dict(kind="session", breakdown=True)):
        q = ReportQuery(**spec)  # type: ignore[arg-type]
        assert _answer(generated, q, _both([]), monkeypatch) == _answer(
            generated, q, reference_count_runs, monkeypatch), spec
    assert len(read) == 3
