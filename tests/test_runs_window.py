"""`ledger runs` without filters: the index returns the window's newest N runs (ties at the
N-th start included), the unterminated runs and the window's size (selection.pushed_limit,
queries.newest_candidates), and the one rule (ledger.records.selection.select) picks exactly
what it picks from every run: same runs, same order, same hidden count, on both backends."""

from __future__ import annotations

import os
from dataclasses import fields, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from indexhelpers import cli, json_stream, make_run

from ledger.index import queries, rawread
from ledger.records import publish_run
from ledger.records.ids import run_dir
from ledger.records.selection import RECENT_LIMIT, RunFilter, pushed_limit, select, window_cutoff
from ledger.views import indexed_selection, scan_records


def _text(d: datetime) -> str:
    return d.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _home(home: Path, now: datetime) -> dict[str, list[Path]]:
    """Runs around the edge a limit of 3..6 falls on: four started at the same microsecond
    (their ids order them), newer and older ones, unsettled runs inside and outside the
    window, runs just inside and just outside it, and two damaged records."""
    made: dict[str, list[Path]] = {}
    tie = _text(now - timedelta(hours=5))
    made["newer"] = [make_run(home, created_at=_text(now - timedelta(hours=h))) for h in (1, 2)]
    made["tie"] = [make_run(home, created_at=tie, subjects=(f"task:TIE-{i}",)) for i in range(4)]
    made["older"] = [make_run(home, created_at=_text(now - timedelta(days=d))) for d in (2, 3, 4)]
    made["running"] = [make_run(home, created_at=tie, outcome=None),
                       make_run(home, created_at=_text(now - timedelta(days=5)), outcome=None),
                       make_run(home, created_at="2020-01-02T03:04:05.123456Z", outcome=None)]
    cut = window_cutoff(now)
    made["edge"] = [make_run(home, created_at=_text(cut)),  # the window's first microsecond: in it
                    make_run(home, created_at=_text(cut - timedelta(microseconds=1)))]  # just before: out
    made["old"] = [make_run(home, created_at="2021-05-06T07:08:09.000001Z")]
    bad = make_run(home, created_at=_text(now - timedelta(hours=3)))
    with open(bad / "events.jsonl", "ab") as f:
        f.write(b"this is not json\n")
    m = publish_run(home, harness="command")
    (run_dir(home, m.run_id) / "manifest.json").write_bytes(b"garbage")
    return made


def _records(home: Path, now: datetime | None, f: RunFilter):
    snaps, _ = scan_records(Path(os.path.abspath(home)))
    return select(snaps, False, now, f)


@pytest.mark.parametrize("field", [x.name for x in fields(RunFilter) if x.name != "limit"])
def test_any_filter_but_the_limit_reads_every_candidate(field):
    """A filter or a range applies to runs the database did not return: only the window and
    the limit are pushed down (a new RunFilter field falls back to the whole window)."""
    assert pushed_limit(False, None) == pushed_limit(False, RunFilter()) == RECENT_LIMIT
    assert pushed_limit(False, RunFilter(limit=3)) == 3 and pushed_limit(False, RunFilter(limit=0)) == 0
    assert pushed_limit(True, RunFilter()) is None and pushed_limit(True, RunFilter(limit=3)) is None
    value = {"since": datetime(2020, 1, 1, tzinfo=timezone.utc), "until": datetime(2020, 1, 1, tzinfo=timezone.utc),
             "ranged": True}.get(field, ["x"])
    assert pushed_limit(False, replace(RunFilter(limit=3), **{field: value})) is None


def test_the_newest_runs_equal_the_rule_over_every_run(home, db_url):
    """For every limit (the edge inside the ties, on them, past them, past the window), the
    runs the index returns give the rule's answer over every candidate: same runs in the same
    order, same hidden count; the unsettled and unreadable runs kept whatever their age."""
    now = datetime.now(timezone.utc)
    made = _home(home, now)
    assert cli("index", "--db", db_url).exit_code == 0
    cut = window_cutoff(now).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with rawread.reading(db_url) as conn:
        hid = rawread.home_id(conn, os.path.abspath(home))
        every = queries.list_candidates(conn, hid, False, now)
        starts = sorted((s.started for s in every if s.started is not None and s.started >= cut), reverse=True)
        assert len(starts) == 12
        for top in range(0, 16):
            f = RunFilter(limit=top)
            want = select(every, False, now, f)
            cands, size = queries.newest_candidates(conn, hid, top, window_cutoff(now))
            got = select(cands, False, now, f, size)
            assert [(s.id, s.state) for s in got.runs] == [(s.id, s.state) for s in want.runs], top
            assert got.hidden == want.hidden and size == len(starts), top
            # what the index returned: the runs started at or after the top-th newest start
            # (all ties), every unsettled and unreadable run; never the rest of the window
            edge = None if top == 0 else starts[top - 1] if top <= len(starts) else cut
            assert sorted(s.id for s in cands) == sorted(
                s.id for s in every if s.state != "settled" or (edge is not None and (s.started or "") >= edge)), top
    ids = [s.id for s in want.runs]
    assert made["running"][2].name in ids and made["old"][0].name not in ids


@pytest.mark.parametrize("limit", [None, "0", "1", "3", "4", "5", "6", "7", "12", "13", "40"])
def test_runs_json_and_title_equal_the_records_path(home, db_url, limit):
    """Byte for byte through the CLI, the title's `X of Y runs` too (the hidden count)."""
    now = datetime.now(timezone.utc)
    _home(home, now)
    args = [] if limit is None else ["--limit", limit]
    f = RunFilter(limit=None if limit is None else int(limit))
    want = _records(home, None, f)
    res = cli("runs", "--json", "--db", db_url, *args)
    assert res.exit_code == 0, res.output
    assert res.stdout == json_stream(s.to_dict() for s in want.runs).decode()
    res = cli("runs", "--db", db_url, *args)
    shown = len(want.runs)
    title = f"{shown:,} of {shown + want.hidden:,} runs" if want.hidden else f"{shown} run"
    assert title in res.stdout, (title, res.stdout[:300])


def test_the_window_edge_and_one_clock(home, db_url):
    """The index and the rule cut the window at the same microsecond (one `now` per command):
    a run started at now - 7 days is in it, one a microsecond earlier is not."""
    now = datetime(2026, 6, 1, 12, 0, 0, 250000, tzinfo=timezone.utc)
    made = {"in": make_run(home, created_at=_text(window_cutoff(now))),
            "out": make_run(home, created_at=_text(window_cutoff(now) - timedelta(microseconds=1)))}
    for h in range(3):
        make_run(home, created_at=_text(now - timedelta(hours=h)))
    for top in (1, 3, 4, 5, None):
        f = RunFilter(limit=top)
        want = _records(home, now, f)
        got = indexed_selection(home, db_url, False, lambda msg: None, now=now, filters=f)
        assert [s.id for s in got.runs] == [s.id for s in want.runs] and got.hidden == want.hidden, top
    assert made["in"].name in [s.id for s in got.runs] and made["out"].name not in [s.id for s in got.runs]
    assert got.hidden == 0


def test_a_default_runs_reads_only_the_newest(home, db_url, monkeypatch):
    """The pushdown is used: a default `ledger runs` never lists every candidate of the window
    (10,000 runs of a busy week cost their 50 newest), a filter still does."""
    now = datetime.now(timezone.utc)
    _home(home, now)

    real, calls = queries.list_candidates, []

    def every(*a, **k):
        calls.append(a)
        return real(*a, **k)

    assert cli("index", "--db", db_url).exit_code == 0
    monkeypatch.setattr(queries, "list_candidates", every)
    for args in ([], ["--limit", "3"], ["--limit", "0"], ["--csv"]):
        res = cli("runs", "--json", "--db", db_url, *args) if args != ["--csv"] else cli("runs", "--csv", "--db", db_url)
        assert res.exit_code == 0, (args, res.output)
    assert calls == []
    assert cli("runs", "--json", "--db", db_url, "--harness", "claude").exit_code == 0
    assert len(calls) == 1  # (a filter applies to runs the database would not return: every candidate)


def test_an_empty_window_counts_every_run_without_reading_them(home, db_url, monkeypatch):
    """`0 runs in the last 7 days (N in all: --all)`: without a filter, N is a count in the
    index (a dormant home of 10,000 old runs is not read to say so); with one, the rule's."""
    for d in (10, 20, 30):
        make_run(home, created_at=_text(datetime.now(timezone.utc) - timedelta(days=d)))
    make_run(home, created_at="2021-05-06T07:08:09.000001Z", harness="codex")
    assert cli("index", "--db", db_url).exit_code == 0
    real, calls = queries.list_candidates, []

    def every(*a, **k):
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(queries, "list_candidates", every)
    res = cli("runs", "--db", db_url)
    assert res.exit_code == 0 and "0 runs in the last 7 days (4 in all: --all)" in res.stdout, res.output
    assert calls == []
    res = cli("runs", "--db", db_url, "--harness", "codex")
    assert "0 runs in the last 7 days (1 in all: --all)" in res.stdout and len(calls) == 2
