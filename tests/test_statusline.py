"""`ledger statusline` (issue 29): Claude Code's status line from the index.

The stdin documents are Claude Code 2.1.328's own (tests/data/statusline/, captured from the
real TUI in tmux against the loopback mock, paths shortened to /tmp/cap). The figures are
checked against `ledger report` on the same index; the process never fails on bad input.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

import cleanhistory
from conftest import REPO

DATA = Path(__file__).resolve().parent / "data" / "statusline"
NOW = "2026-03-02T12:30:00Z"


def _env(tmp_path: Path, **over: str) -> dict[str, str]:
    env = {**os.environ, "LEDGER_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO), "TZ": "UTC",
           "LEDGER_NOW": NOW, "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-settings"), **over}
    env.pop("LEDGER_DB", None)
    return env


def _run(env: dict[str, str], *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ledger", *args], input=stdin, env=env, capture_output=True,
                          timeout=120)


def _doc(transcript: Path, sid: str, **over) -> bytes:
    doc = json.loads((DATA / "claude-2.1.328-after-response.json").read_text())
    doc.update(session_id=sid, transcript_path=str(transcript), **over)
    return json.dumps(doc).encode()


def _history(root: Path) -> list[Path]:
    t = lambda *a: datetime(*a, tzinfo=timezone.utc)  # noqa: E731
    cleanhistory.write(root, [(t(2026, 3, 2, 10, 5), [0, 30, 70]), (t(2026, 3, 2, 11, 40), [0, 5]),
                              (t(2026, 3, 1, 20, 0), [0, 10])], seed=3)
    return sorted(root.glob("projects/*/*.jsonl"))


def _report(env, *args) -> dict:
    p = _run(env, "report", *args, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("stdin", [b"", b"{bad", b"[1, 2]", b"\xff\xfe", b"null", b'"text"'])
def test_a_bad_stdin_prints_a_placeholder_and_exits_0(tmp_path, stdin):
    p = _run(_env(tmp_path), "statusline", stdin=stdin)
    assert p.returncode == 0 and p.stdout == b"ledger: no status\n" and b"Traceback" not in p.stderr


def test_the_real_clients_documents_without_an_index_still_make_a_line(tmp_path):
    for name in ("claude-2.1.328-start.json", "claude-2.1.328-after-response.json"):
        p = _run(_env(tmp_path), "statusline", stdin=(DATA / name).read_bytes())
        assert p.returncode == 0, p.stderr
        line = p.stdout.decode().strip()
        assert line.startswith("Sonnet 4.5 | ") and "\n" not in line
    assert line.endswith("ctx 1%")


def test_the_figures_are_the_reports_and_the_transcript_is_archived_first(tmp_path):
    env = _env(tmp_path)
    files = _history(tmp_path / "claude")
    # the config dir was never imported: the status line archives it (and every later reader does)
    by_sid = {f.stem: f for f in files}
    p = _run(env, "statusline", stdin=_doc(files[0], files[0].stem))
    assert p.returncode == 0, p.stderr
    sessions = {r["key"]: r for r in _report(env, "session")["rows"]}
    assert set(sessions) == set(by_sid)
    for sid, f in by_sid.items():
        line = _run(env, "statusline", stdin=_doc(f, sid)).stdout.decode().strip()
        s = sessions[sid]
        assert f"session ${s['cost_usd']:.4f} reported" in line or f"session ${s['cost_usd']:.2f} reported" in line, line
    today = {r["key"]: r for r in _report(env, "daily", "--tz", "UTC")["rows"]}["2026-03-02"]
    block = _report(env, "blocks", "--active")["blocks"][0]
    assert block["start"] == "2026-03-02T10:00:00.000Z"
    from ledger.report.statusline import money

    line = _run(env, "statusline", stdin=_doc(files[0], files[0].stem)).stdout.decode().strip()
    assert f"| today {money(today['cost_usd'])} |" in line
    assert f"| block {money(block['cost_usd'])} {money(block['burn_rate']['cost_usd_per_hour'])}/h 2h30m left |" in line
    # a new response in the transcript: the next line counts it (the new bytes archived first)
    before = sessions[files[0].stem]["cost_usd"]
    lines = files[0].read_bytes().splitlines()
    extra = json.loads(lines[-1])
    extra["message"]["id"] = "msg_01newresponse0000000000"
    extra["requestId"] = "req_011newrequest000000000000"
    extra["timestamp"] = "2026-03-02T12:20:00.000Z"
    extra["costUSD"] = 0.5
    with open(files[0], "ab") as fh:
        fh.write(json.dumps(extra).encode() + b"\n")
    line = _run(env, "statusline", stdin=_doc(files[0], files[0].stem)).stdout.decode().strip()
    assert f"session {money(before + 0.5)} reported" in line, line


def test_rate_limits_are_shown_and_each_sample_kept(tmp_path):
    env = _env(tmp_path)
    files = _history(tmp_path / "claude")
    limits = {"five_hour": {"used_percentage": 42, "resets_at": 1772467200},   # 2026-03-02T16:00:00Z
              "seven_day": {"used_percentage": 7.5, "resets_at": "2026-03-05T00:00:00Z"}}
    for _ in range(2):
        p = _run(env, "statusline", stdin=_doc(files[0], files[0].stem, rate_limits=limits))
        assert p.returncode == 0, p.stderr
    line = p.stdout.decode()
    assert "| 5h 42% (resets 16:00) | 7d 7.5% (resets 00:00) |" in line
    kept = (tmp_path / "home" / "statusline" / "rate-limits.jsonl").read_text().splitlines()
    assert len(kept) == 1 and json.loads(kept[0])["rate_limits"] == limits  # (the same sample once)
    limits["five_hour"]["used_percentage"] = 43
    _run(env, "statusline", stdin=_doc(files[0], files[0].stem, rate_limits=limits))
    kept = (tmp_path / "home" / "statusline" / "rate-limits.jsonl").read_text().splitlines()
    assert [json.loads(k)["rate_limits"]["five_hour"]["used_percentage"] for k in kept] == [42, 43]
    assert json.loads(kept[1])["session_id"] == files[0].stem


def test_report_blocks_shows_the_samples_the_status_line_kept(tmp_path):
    env = _env(tmp_path)
    files = _history(tmp_path / "claude")
    assert _run(env, "statusline", stdin=_doc(files[0], files[0].stem, rate_limits={})).returncode == 0
    before = [b for b in _report(env, "blocks")["blocks"]]
    assert before and all(b["rate_limits"] is None for b in before)  # (no sample yet: unknown, never 0)
    for used, now in ((42, "2026-03-02T12:30:00Z"), (57.5, "2026-03-02T13:10:00Z"), (51, "2026-03-02T13:20:00Z")):
        limits = {"five_hour": {"used_percentage": used, "resets_at": 1772467200},   # 2026-03-02T16:00:00Z
                  "seven_day": {"used_percentage": 7.5, "resets_at": "2026-03-05T00:00:00Z"}}
        p = _run({**env, "LEDGER_NOW": now}, "statusline", stdin=_doc(files[0], files[0].stem, rate_limits=limits))
        assert p.returncode == 0, p.stderr
    env["LEDGER_NOW"] = "2026-03-02T13:30:00Z"
    blocks = {b["start"]: b for b in _report(env, "blocks")["blocks"]}
    assert blocks["2026-03-02T10:00:00.000Z"]["rate_limits"] == {
        "five_hour": {"max_used_percentage": 57.5, "resets_at": "2026-03-02T16:00:00.000Z", "samples": 3},
        "seven_day": {"max_used_percentage": 7.5, "resets_at": "2026-03-05T00:00:00.000Z", "samples": 3}}
    assert [b["rate_limits"] for k, b in blocks.items() if k != "2026-03-02T10:00:00.000Z"] == [None] * (len(blocks) - 1)
    table = _run({**env, "COLUMNS": "80"}, "report", "blocks").stdout.decode()
    assert "5h used" in table and "57.5%" in table and max(map(len, table.splitlines())) <= 80
    assert "  5h: 57.5% used at most, resets 2026-03-02 16:00 UTC" in table
    assert "  7d: 7.5% used at most, resets 2026-03-05 00:00 UTC" in table


def test_install_and_uninstall_show_the_change(tmp_path):
    env = _env(tmp_path)
    settings = Path(env["CLAUDE_CONFIG_DIR"]) / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"model": "opus", "statusLine": {"type": "command", "command": "old"}}))
    p = _run(env, "statusline", "--install")  # no terminal to confirm on: nothing written
    assert p.returncode == 1 and b"Hint:" in p.stderr and b"--yes" in p.stderr
    assert json.loads(settings.read_text())["statusLine"]["command"] == "old"
    p = _run(env, "statusline", "--install", "--yes")
    assert p.returncode == 0, p.stderr
    assert b'statusLine now: {"type": "command", "command": "old"}' in p.stdout
    s = json.loads(settings.read_text())
    assert s["model"] == "opus" and s["statusLine"]["type"] == "command"
    assert s["statusLine"]["command"].endswith("statusline")
    assert b"nothing to change" in _run(env, "statusline", "--install", "--yes").stdout
    p = _run(env, "statusline", "--uninstall", "--yes")
    assert p.returncode == 0 and json.loads(settings.read_text()) == {"model": "opus"}
    # no settings file yet: one is made
    env2 = _env(tmp_path, CLAUDE_CONFIG_DIR=str(tmp_path / "fresh"))
    assert _run(env2, "statusline", "--install", "--yes").returncode == 0
    assert "statusLine" in json.loads((tmp_path / "fresh" / "settings.json").read_text())


def test_the_status_line_imports_neither_sqlalchemy_nor_typer(tmp_path):
    env = _env(tmp_path)
    files = _history(tmp_path / "claude")
    doc = _doc(files[0], files[0].stem)
    assert _run(env, "statusline", stdin=doc).returncode == 0  # (cold: builds the index)
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "ledger", "statusline"], input=doc, env=env,
                       capture_output=True, timeout=120)
    assert p.returncode == 0 and p.stdout.startswith(b"Sonnet 4.5 | session $")
    imported = {line.split("|")[-1].strip().split(".")[0] for line in p.stderr.decode().splitlines() if "|" in line}
    assert "ledger" in imported and not imported & {"sqlalchemy", "typer", "click", "rich", "alembic"}


def _append_response(f: Path, n: int, cost: float) -> None:
    lines = f.read_bytes().splitlines()
    extra = json.loads(lines[-1])
    extra["message"]["id"] = f"msg_01appended{n:012d}"
    extra["requestId"] = f"req_011appended{n:012d}"
    extra["timestamp"] = "2026-03-02T12:20:00.000Z"
    extra["costUSD"] = cost
    with open(f, "ab") as fh:
        fh.write(json.dumps(extra).encode() + b"\n")


def test_a_line_brings_only_its_own_session_up_to_date_until_a_directory_changes(tmp_path):
    """The status line's refresh checks the transcript's own logs, not every imported one (a
    stat of each was half of a line's work on a 2,000-session history): another session's new
    bytes wait for its own line or the next reader; a changed directory (a new log) is the
    walk, which archives everything."""
    from ledger.report.statusline import money

    from test_fresh import age

    env = _env(tmp_path)
    files = _history(tmp_path / "claude")
    age(tmp_path / "claude")  # (quiet directories: the import keeps their listings, the quick file)
    mine, other = files[0], files[1]
    assert _run(env, "statusline", stdin=_doc(mine, mine.stem)).returncode == 0  # imports the config dir
    today = lambda: {r["key"]: r for r in _report(env, "daily", "--tz", "UTC")["rows"]}["2026-03-02"]["cost_usd"]  # noqa: E731
    sessions = {r["key"]: r["cost_usd"] for r in _report(env, "session")["rows"]}
    day = today()
    _append_response(mine, 1, 0.5)
    _append_response(other, 2, 0.25)
    line = _run(env, "statusline", stdin=_doc(mine, mine.stem)).stdout.decode().strip()
    assert f"session {money(sessions[mine.stem] + 0.5)} reported" in line, line
    assert f"| today {money(day + 0.5)} |" in line, line  # (the other session's bytes: not yet)
    assert abs(today() - (day + 0.75)) < 1e-9  # a reader brings every log up to date
    # a new log in the transcript's project directory: the line's refresh is the walk
    _append_response(other, 3, 0.125)
    (mine.parent / "00000000-0000-4000-8000-000000000000.jsonl").write_bytes(b"")
    line = _run(env, "statusline", stdin=_doc(mine, mine.stem)).stdout.decode().strip()
    assert f"| today {money(day + 0.875)} |" in line, line


def test_the_quick_check_of_one_log_says_walk_when_the_log_is_not_listed(tmp_path):
    from ledger.sources.archivesummary import ClientSummary
    from ledger.sources.quickfile import Quick

    root = tmp_path / "c"
    (root / "projects" / "p").mkdir(parents=True)
    log = root / "projects" / "p" / "s.jsonl"
    log.write_bytes(b"{}\n")
    st, dst = log.stat(), (root / "projects" / "p").stat()
    pst = (root / "projects").stat()
    ints = [1, 1, 0, -1, -1, st.st_size, pst.st_mtime_ns, dst.st_mtime_ns, st.st_mtime_ns,
            pst.st_ino, dst.st_ino, st.st_ino]
    from array import array

    paths = [os.fsencode(p) for p in (root / "projects", root / "projects" / "p", log)]
    q = Quick([str(root)], array("q", ints), paths)
    assert q.check(ClientSummary("claude"), [str(log)]) == []  # (as listed: nothing to archive)
    assert q.check(ClientSummary("claude"), [str(root / "projects" / "p" / "new.jsonl")]) is None
    with open(log, "ab") as fh:
        fh.write(b"{}\n")
    assert [f.path for f in q.check(ClientSummary("claude"), [str(log)])] == [str(log)]


def test_a_transcript_named_through_a_symlink_is_still_brought_up_to_date(tmp_path):
    """The config dir is imported by its real path; a transcript path through a symlink is
    not one the kept roots hold as written: the line's refresh is every log's, as a reader's."""
    from test_fresh import age

    from ledger.report.statusline import money

    env = _env(tmp_path)
    files = _history(tmp_path / "claude")
    age(tmp_path / "claude")
    (tmp_path / "link").symlink_to(tmp_path / "claude")
    mine = files[0]
    via = tmp_path / "link" / mine.relative_to(tmp_path / "claude")
    assert _run(env, "statusline", stdin=_doc(via, mine.stem)).returncode == 0
    before = {r["key"]: r["cost_usd"] for r in _report(env, "session")["rows"]}[mine.stem]
    _append_response(mine, 4, 0.5)
    line = _run(env, "statusline", stdin=_doc(via, mine.stem)).stdout.decode().strip()
    assert f"session {money(before + 0.5)} reported" in line, line


@pytest.mark.parametrize("now", ["2026-03-02T12:30:00Z", "2026-03-02T10:20:00Z", "2026-03-01T20:30:00Z",
                                 "2026-03-02T00:10:00Z", "2026-03-02T18:00:00Z", "2026-03-05T09:00:00Z"])
def test_one_scan_for_today_and_the_block_gives_the_figures_of_their_own_scans(tmp_path, now):
    """figures() sums today's and the active block's rows in one scan (each sum over its own
    rows in their order): float for float what the two scans of their own give."""
    import sqlite3
    from datetime import datetime

    from ledger.index.dbapi import Conn
    from ledger.report.blocks import active_totals
    from ledger.report.costs import pieces_cost_of, pieces_cost_sql
    from ledger.report.kinds import SLOT_SECONDS
    from ledger.report.statusline import day_bounds, figures

    env = _env(tmp_path)
    files = _history(tmp_path / "claude")
    assert _run(env, "statusline", stdin=_doc(files[0], files[0].stem)).returncode == 0
    assert _run(env, "report").returncode == 0
    con = sqlite3.connect(tmp_path / "home" / "index.sqlite")
    c = Conn(con, "sqlite")
    t = datetime.fromisoformat(now.replace("Z", "+00:00")).timestamp()
    got = figures(c, files[0].stem, t)
    start, end = day_bounds(t)
    today = pieces_cost_of(c.rows("SELECT " + pieces_cost_sql("run_cost_auto", "run_cost_auto_partial", "run_basis_auto")
                                  + " FROM report_facts WHERE piece = 1 AND slot >= ? AND slot < ?",
                                  (start // SLOT_SECONDS, -(-end // SLOT_SECONDS)))[0])
    assert got["today"] == today and got["block"] == active_totals(c, t)
    if now == "2026-03-02T12:30:00Z":  # (not vacuous: a block and a day with costs)
        assert got["block"]["cost_usd"] and today["cost_usd"]
    if now == "2026-03-02T00:10:00Z":  # (the block began the day before: its rows are not the day's)
        assert got["block"]["cost_usd"] and today["cost_usd"] and got["block"]["cost_usd"] != today["cost_usd"]
    con.close()


def test_the_quick_file_finds_one_logs_entries_in_its_bytes_as_in_its_list(tmp_path):
    """Quick._concerning on a loaded file (the paths' bytes, never split) picks what a scan of
    the path list picks: the log, the directories above it, what is below its session dir."""
    from array import array

    from ledger.sources.quickfile import Quick

    root = "/c"
    dirs = ["/c/projects", "/c/projects/a", "/c/projects/a/s1", "/c/projects/a/s1/subagents", "/c/projects/b"]
    logs = ["/c/projects/a/s1.jsonl", "/c/projects/a/s10.jsonl", "/c/projects/a/s1/subagents/x.jsonl",
            "/c/projects/b/s1.jsonl", "/c/projects/a/s2.jsonl"]
    entries = [(p, 1) for p in dirs] + [(p, 0) for p in logs]
    entries.sort(key=lambda e: e[0][::-1])  # (any order: the walk's is not sorted)
    n = len(entries)
    ints = array("q", [k for _, k in entries] + [-1] * n + [0] * n + [0] * n)
    q = Quick([root], ints, [os.fsencode(p) for p, _ in entries])
    q.save(tmp_path / "quick.bin")
    loaded = Quick.load(tmp_path / "quick.bin", [root])
    assert loaded is not None and loaded._paths is None

    def rule(only):  # (the scan of the list, as the check was first written)
        want = {os.fsencode(p) for p in only}
        below = tuple(p[:-6] + b"/" for p in want)
        above = {p[:i] for p in want for i in range(1, len(p)) if p[i] == 47}
        got = [(i, p) for i, (p, k) in enumerate((os.fsencode(p), k) for p, k in entries)
               if p in want or p.startswith(below) or (k and p in above)]
        return got if want <= {p for _, p in got} else None

    for only in (["/c/projects/a/s1.jsonl"], ["/c/projects/b/s1.jsonl"], ["/c/projects/a/s2.jsonl"],
                 ["/c/projects/a/s1.jsonl", "/c/projects/b/s1.jsonl"], ["/c/projects/a/s3.jsonl"]):
        assert loaded._concerning(only) == rule(only), only
        assert Quick.load(tmp_path / "quick.bin", [root])._concerning(only) == q._concerning(only)
    assert [p for _, p in loaded._concerning(["/c/projects/a/s1.jsonl"])] == sorted(
        [b"/c/projects", b"/c/projects/a", b"/c/projects/a/s1.jsonl", b"/c/projects/a/s1/subagents",
         b"/c/projects/a/s1/subagents/x.jsonl"], key=lambda p: [e[0] for e in entries].index(os.fsdecode(p)))
