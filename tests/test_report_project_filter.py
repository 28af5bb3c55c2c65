"""`--project GLOB` on every report and on `ledger runs`, and session rows with their project
and last activity (issue 29). The project is ledger.records.project's (the worktree a record
names, else the cwd; an imported session's cwd), matched whole or by its last component.

The history: tests/blockfixture.py's Claude sessions (projects /work/proj0 and /work/proj1,
figures pinned against ccusage in tests/test_report_project.py), a few tests/codexhistory.py
threads (/home/dev/proj) and two run records (/src/app by worktree, /src/other by cwd).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import blockfixture
import codexhistory
from ledger.records import RunCapture
from ledger.records.project import last_component, matching, project_matches
from ledger.report.kinds import KINDS
from reporthelpers import CLAUDE_RESULT, claude_stream, cli

PROJ0_TOKENS = 49139  # /work/proj0 (tests/test_report_project.py: ccusage's daily --instances)


def _record(home: Path, *, worktree: str | None, cwd: str, at: str) -> None:
    cap = RunCapture(home, harness="claude", model="claude-sonnet-4-5", worktree=worktree, cwd=cwd, created_at=at)
    st = cap.usage_stream(provider="anthropic", model="claude-sonnet-4-5",
                          attempt_key=cap.start_attempt("anthropic", "claude-sonnet-4-5"), turn_key="t1")
    st.observe(dict(claude_stream()["counters"]), final_receipt=True)
    cap.settle("completed")


@pytest.fixture
def mixed(home, tmp_path, monkeypatch):
    blockfixture.write(tmp_path / "claude")
    codexhistory.generate(tmp_path / "codex", threads=3, seed=5)
    for client in ("claude", "codex"):
        res = cli("import", client, "--from", str(tmp_path / client))
        assert res.exit_code == 0, res.stderr
    _record(home, worktree="/src/app", cwd="/src/app/sub", at="2026-01-09T09:00:00Z")
    _record(home, worktree=None, cwd="/src/other", at="2026-01-09T10:00:00Z")
    monkeypatch.setenv("LEDGER_NOW", "2026-02-01T00:00:00Z")
    monkeypatch.setenv("COLUMNS", "80")
    return home


def _json(*args: str) -> dict:
    res = cli(*args, "--json")
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return json.loads(res.stdout)


def _projects() -> dict:
    return {r["project"]: r for r in _json("report", "project")["rows"]}


def test_the_match_is_the_whole_path_or_its_last_part_case_sensitive():
    assert project_matches("/home/me/src/myrepo", ["myrepo"])
    assert project_matches("/home/me/src/myrepo", ["/home/me/src/myrepo"])
    assert project_matches("/home/me/src/myrepo/", ["myrepo"])
    assert project_matches("/home/me/src/myrepo", ["/home/me/*"])  # (`*` crosses `/`)
    assert project_matches("/home/me/src/myrepo", ["my?epo", "nothing"])
    assert project_matches("C:\\Users\\me\\myrepo", ["myrepo"])
    assert not project_matches("/home/me/src/myrepo", ["MyRepo"])
    assert not project_matches("/home/me/src/myrepo", ["src"])
    assert not project_matches(None, ["*"])
    assert last_component("/") == "/"
    assert matching(["/a/x", None, "/b/x", "/a/x", "/c/y"], ["x"]) == ["/a/x", "/b/x"]


def test_every_report_kind_counts_only_the_projects_runs(mixed):
    projects = _projects()
    assert set(projects) == {"/work/proj0", "/work/proj1", "/home/dev/proj", "/src/app", "/src/other"}
    assert projects["/work/proj0"]["total_tokens"] == PROJ0_TOKENS
    for kind in KINDS:
        for args, want in ((["--project", "proj0"], ["/work/proj0"]),
                           (["--project", "/work/*"], ["/work/proj0", "/work/proj1"]),
                           (["--project", "proj1", "--project", "app"], ["/work/proj1", "/src/app"]),  # (OR)
                           (["--project", "/home/dev/proj"], ["/home/dev/proj"])):
            doc = _json("report", kind, *args)
            assert doc["query"]["filters"]["project"] == args[1::2]
            t = doc["totals"]
            assert t["total_tokens"] == sum(projects[p]["total_tokens"] for p in want), (kind, args)
            assert t["cost_usd_known"] == pytest.approx(sum(projects[p]["cost_usd_known"] for p in want)), (kind, args)
    # every project: every run (each has one here)
    assert _json("report", "daily", "--project", "*")["totals"] == _json("report", "daily")["totals"]
    one = _json("report", "run", "--project", "app")["rows"]
    assert len(one) == 1 and one[0]["total_tokens"] == 3396
    # records and imported sessions alike: the Codex threads' project by its cwd
    assert _json("report", "harness", "--project", "proj")["rows"][0]["key"] == "codex"
    # the HTML page reads the same query
    assert cli("report", "daily", "--project", "proj0", "--html", str(mixed.parent / "p.html")).exit_code == 0


def test_blocks_and_project_reports_take_project_too(mixed):
    projects = _projects()
    blocks = [b for b in _json("report", "blocks", "--project", "proj0")["blocks"] if not b["is_gap"]]
    assert sum(b["total_tokens"] for b in blocks) == PROJ0_TOKENS
    every = [b for b in _json("report", "blocks")["blocks"] if not b["is_gap"]]
    assert sum(b["total_tokens"] for b in every) > PROJ0_TOKENS
    rows = _json("report", "project", "--project", "/work/*")["rows"]
    assert [r["project"] for r in rows] == ["/work/proj0", "/work/proj1"]
    assert rows[0] == projects["/work/proj0"]
    csv = cli("report", "blocks", "--project", "proj1", "--csv").stdout.splitlines()
    assert len(csv) > 1 and all(",claude-" in line for line in csv[1:] if ",False,False," in line)


@pytest.mark.parametrize("argv", [["report", "daily"], ["report", "session"], ["report", "blocks"],
                                  ["report", "project"], ["runs", "--all"]], ids=" ".join)
@pytest.mark.parametrize("form", [[], ["--json"], ["--csv"]], ids=lambda f: f[0] if f else "table")
def test_a_glob_that_matches_nothing_says_how_to_see_the_projects(mixed, argv, form):
    if argv[0] == "runs" and form == ["--csv"]:
        form = []
    res = cli(*argv, "--project", "PROJ0", *form)  # (case-sensitive: no project is PROJ0)
    assert res.exit_code == 0, res.stderr
    assert "Hint: no runs matched --project 'PROJ0'; `ledger report project` lists the projects" in res.stderr
    if form == ["--json"] and argv[0] == "report" and argv[1] in ("daily", "session"):
        doc = json.loads(res.stdout)
        assert doc["rows"] == [] and doc["totals"]["runs"] == 0
    ok = cli(*argv, "--project", "proj0", *form)
    assert ok.exit_code == 0 and "Hint:" not in ok.stderr


def test_runs_lists_only_the_projects_runs_and_sessions(mixed):
    ids = {d["id"]: d for d in _json("runs", "--all", "--project", "app", "--project", "other")}
    assert sorted(d["source"] for d in ids.values()) == ["record", "record"]
    assert sorted(d["project"] for d in ids.values()) == ["/src/app", "/src/other"]  # (the worktree, else the cwd)
    sessions = _json("runs", "--all", "--project", "proj0")
    assert len(sessions) == 3 and {(d["source"], d["project"]) for d in sessions} == {("claude-log", "/work/proj0")}
    assert all(d["ended"] for d in sessions)  # (an imported session's last activity)
    codex = _json("runs", "--all", "--project", "/home/dev/*")
    assert codex and {d["source"] for d in codex} == {"codex-log"}
    table = cli("runs", "--all", "--project", "proj0")
    assert table.exit_code == 0 and table.stdout.count("claude-") == 3
    assert max(len(line) for line in table.stdout.splitlines()) <= 80


def test_session_rows_say_their_project_and_last_activity(mixed):
    doc = _json("report", "session")
    projects = _projects()
    by_project: dict = {}
    for r in doc["rows"]:
        assert set(r) >= {"key", "runs", "total_tokens", "cost_usd", "project", "last_activity"}
        by_project.setdefault(r["project"], []).append(r)
    # a project's last activity is its sessions' latest; its tokens their sum
    for proj in ("/work/proj0", "/work/proj1", "/home/dev/proj"):
        assert max(r["last_activity"] for r in by_project[proj]) == projects[proj]["last_activity"]
        assert sum(r["total_tokens"] for r in by_project[proj]) == projects[proj]["total_tokens"]
    # the session across midnight (23:59:30, last response 301 minutes later, 05:00:30): the
    # end of its last 15-minute slot
    assert "2026-01-13T05:15:00Z" in [r["last_activity"] for r in by_project["/work/proj0"]]
    # run records without a provider session: the `(none)` row holds both projects, and says the
    # latest's (a record's usage is in the slot it was created in: 10:00 -> 10:15)
    none = [r for r in doc["rows"] if r["key"] is None]
    assert [(r["project"], r["last_activity"]) for r in none] == [("/src/other", "2026-01-09T10:15:00Z")]
    # within the report's range: the last activity the range saw (the session across midnight
    # until its last slot of 01-12)
    ranged = _json("report", "session", "--project", "proj0", "--until", "2026-01-12", "--tz", "UTC")
    assert max(r["last_activity"] for r in ranged["rows"]) == "2026-01-13T00:00:00Z"
    csv = cli("report", "session", "--csv").stdout.splitlines()
    assert csv[0].endswith(",evidence_gaps,project,last_activity")
    assert any(line.endswith(",/work/proj0,2026-01-13T05:15:00Z") for line in csv[1:])


def test_the_session_table_shows_them_at_80_columns(mixed):
    res = cli("report", "session", "--project", "proj0", "--tz", "UTC")
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    head = next(line for line in lines if line.strip().startswith("session"))
    assert head.split()[:5] == ["session", "runs", "project", "last", "active"]
    assert "tokens" in head and "cost" in head
    assert any("proj0" in line and "2026-01-13 05:15" in line for line in lines)
    assert "narrow terminal" not in res.stderr


def test_postgresql_answers_as_sqlite(mixed, pg_url):
    def strip(doc):
        if isinstance(doc, dict):
            doc.pop("pricing", None)
            doc.pop("now", None)
        return doc

    for argv in (["report", "daily", "--project", "proj0", "--tz", "UTC"],
                 ["report", "session", "--project", "/work/*"], ["report", "model", "--project", "app"],
                 ["report", "blocks", "--project", "proj1"], ["report", "project", "--project", "proj*"],
                 ["runs", "--all", "--project", "proj0"]):
        lite, pg = strip(_json(*argv)), strip(_json(*argv, "--db", pg_url))
        assert pg == lite, argv
        at = argv.index("--project")
        assert pg != strip(_json(*argv[:at], *argv[at + 2:])), argv  # (the filter did filter)
