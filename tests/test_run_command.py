"""Issue 12: a run's command (redacted argv) and exit code, from the result event `ledger run`
writes, through the fold, the index (`runs.command`, `runs.exit_code`, `runs_v`; migration
0008 fills old rows) and the records path alike, to `ledger runs` (table, --json, --csv) and
`ledger show`. Runs are recorded by the real `ledger run` in a temporary home; every value
below is counted by hand."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from indexhelpers import cli, make_run, records_runs_json, records_show_json
from launchkit import ledger_cli
from ledger.index import db as dbmod
from ledger.records.fold import (
    COMMAND_MAX_ARGS, COMMAND_MAX_CHARS, command_of, command_text, exit_code_of, new_state,
)

SECRET = "sk-ant-api03-" + "abcdefghijklmnopqrstuvwxyz0123456789" * 2


# -- the fold ----------------------------------------------------------------------------

def test_the_fold_keeps_a_bounded_argv():
    assert (COMMAND_MAX_ARGS, COMMAND_MAX_CHARS) == (64, 4000)
    assert command_of(["sh", "-c", "exit 3"]) == (["sh", "-c", "exit 3"], False)
    assert command_of(["x"] * 64) == (["x"] * 64, False)
    assert command_of(["x"] * 65) == (["x"] * 64, True)  # the 65th argument is cut
    assert command_of(["a" * 3000, "b" * 3000, "c"]) == (["a" * 3000, "b" * 1000], True)
    assert command_of(["a" * 4001]) == (["a" * 4000], True)
    assert command_of(["a" * 4000]) == (["a" * 4000], False)
    assert command_of(["a" * 4000, "b"]) == (["a" * 4000], True)
    assert command_of(["a" * 4000, ""]) == (["a" * 4000, ""], False)  # (nothing is lost)
    assert command_of(["ünïcødé 🚀", "\x1b[31m"]) == (["ünïcødé 🚀", "\x1b[31m"], False)  # kept as recorded
    # anything but a non-empty list of str is no argv (an argv never holds a NUL)
    for bad in (None, "sh -c x", [], ["a", 1], ["a", None], [["a"]], {"0": "a"}, ["a\x00b"], ["x"] * 64 + [2],
                ["a", True]):
        assert command_of(bad) == (None, False), bad


def test_command_text_and_exit_code_from_the_folded_result():
    assert command_text({"command": ["sh", "-c", "exit 3"], "command_cut": False}) == "sh -c 'exit 3'"
    assert command_text({"command": ["printf", "%s\n", "it's"], "command_cut": False}) == "printf '%s\n' 'it'\"'\"'s'"
    assert command_text({"command": ["true", "a"], "command_cut": True}) == "true a \u2026"
    assert command_text({"outcome": "completed", "exit_code": 0}) is None  # a state folded before 0008
    assert command_text(None) is None and command_text(new_state()["result"]) is None
    assert [exit_code_of({"exit_code": v}) for v in (0, 3, 255, -2**31, 2**31 - 1)] == [0, 3, 255, -2**31, 2**31 - 1]
    for bad in (2**31, -2**31 - 1, True, "3", 3.0, None):
        assert exit_code_of({"exit_code": bad}) is None, bad
    assert exit_code_of(None) is None and exit_code_of({}) is None


# -- real runs ---------------------------------------------------------------------------

def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "LEDGER_HOME": str(home), **extra}
    env.pop("LEDGER_DB", None)
    return env


def _record(home: Path, *argv: str) -> tuple[int, str]:
    """`ledger run -- argv` in a real process; (its exit code, the run id)."""
    p = ledger_cli(["run", "--no-progress", "--json", "--", *argv], env=_env(home))
    return p.returncode, json.loads(p.stdout)["run_id"]  # (with --json a plain command's output goes to stderr)


# id -> (exit code, command) of the runs `_runs` records: counted by hand
def _runs(home: Path) -> dict[str, tuple[int | None, str | None]]:
    want = {}
    rc, rid = _record(home, "sh", "-c", "exit 3")
    assert rc == 3
    want[rid] = (3, "sh -c 'exit 3'")
    rc, rid = _record(home, "printf", "%s\\n", "a b", "it's")
    assert rc == 0
    want[rid] = (0, "printf '%s\\n' 'a b' 'it'\"'\"'s'")
    rc, rid = _record(home, "echo", f"TOKEN={SECRET}")  # redacted before it is written
    assert rc == 0
    want[rid] = (0, "echo 'TOKEN=[REDACTED]'")
    rc, rid = _record(home, "sh", "-c", "kill -TERM $$")  # killed by SIGTERM: 128 + 15
    assert rc == 143
    want[rid] = (143, "sh -c 'kill -TERM $$'")
    rc, rid = _record(home, str(home / "no-such-program"))
    assert rc == 127
    want[rid] = (127, str(home / "no-such-program"))
    rc, rid = _record(home, "true", *[f"a{i}" for i in range(1, 71)])  # 71 arguments: the first 64 kept
    assert rc == 0
    want[rid] = (0, "true " + " ".join(f"a{i}" for i in range(1, 64)) + " \u2026")
    running = make_run(home, outcome=None)  # no result event yet: neither is known
    want[running.name] = (None, None)
    return want


def test_runs_json_csv_sql_and_show_through_the_index_equal_the_records(home, db_url):
    want = _runs(home)
    res = cli("runs", "--json", "--all", "--db", db_url)
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert {r["id"]: (r["exit_code"], r["command"]) for r in got} == want
    assert res.stdout == records_runs_json(home)  # the index answers as the records do
    assert SECRET not in res.stdout
    rows = list(csv.DictReader(io.StringIO(cli("runs", "--csv", "--all", "--db", db_url).stdout)))
    assert {r["id"]: (r["exit_code"], r["command"]) for r in rows} == {
        k: ("" if c is None else str(c), cmd or "") for k, (c, cmd) in want.items()}
    q = cli("sql", "--db", db_url, "--json", "--", "SELECT run_id, exit_code, command FROM runs_v")
    assert q.exit_code == 0, q.output
    assert {r["run_id"]: (r["exit_code"], r["command"]) for r in json.loads(q.stdout)} == want
    for rid in want:
        run = next(home.glob(f"runs/*/{rid}"))
        shown = cli("show", rid, "--json", "--db", db_url)
        assert shown.stdout == records_show_json(run)
        assert (json.loads(shown.stdout)["exit_code"], json.loads(shown.stdout)["command"]) == want[rid]


def test_show_prints_the_command_and_exit_code(home):
    want = _runs(home)
    for rid, (code, command) in want.items():
        out = cli("show", rid[:12]).stdout
        lines = out.splitlines()
        assert f"exit_code: {'—' if code is None else code}" in lines
        assert f"command: {'—' if command is None else command}" in lines
        assert "None" not in out


def test_a_hostile_command_is_shown_escaped(home):
    rc, rid = _record(home, "printf", "\x1b[31mred\x1b[0m [bold]x[/bold] :x:\\n")
    assert rc == 0
    out = ledger_cli(["runs", "--all"], env=_env(home, COLUMNS="200")).stdout.decode()
    row = next(line for line in out.splitlines() if rid[:12] in line)
    assert "\x1b" not in out
    assert row.rstrip().endswith(r"printf '\x1b[31mred\x1b[0m [bold]x[/bold] :x:\n'")
    shown = ledger_cli(["show", rid[:12]], env=_env(home)).stdout.decode()
    assert r"command: printf '\x1b[31mred\x1b[0m [bold]x[/bold] :x:\n'" in shown.splitlines()


@pytest.mark.parametrize("width", [60, 80, 100, 120, 140, 160, 200])
def test_the_table_keeps_ids_and_exit_codes_whole_and_cuts_only_the_command(home, width):
    want = _runs(home)
    rc, rid = _record(home, "sh", "-c", "echo " + "x" * 150 + "; exit 42")  # longer than any terminal's room
    assert rc == 42
    want[rid] = (42, "sh -c 'echo " + "x" * 150 + "; exit 42'")
    p = ledger_cli(["runs", "--all"], env=_env(home, COLUMNS=str(width)))
    assert p.returncode == 0, p.stderr
    out, err = p.stdout.decode(), p.stderr.decode()
    lines = out.splitlines()
    assert all(len(line.rstrip()) <= width for line in lines), out
    header = next(line for line in lines if line.lstrip().startswith("id "))
    heads = re.split(r"\s{2,}", header.strip())
    hidden = re.search(r"\(narrow terminal: (.*) not shown", err)
    assert (hidden.group(1).split(", ") if hidden else []) == [h for h in (
        # (issue 34: the start time goes before the model, the token counts last)
        "gaps", "harness", "command", "exit", "subjects", "duration", "started (UTC)", "model", "in", "out")
        if h not in heads]
    for rid, (code, command) in want.items():
        row = next(line for line in lines if line.startswith(" " + rid[:12] + " ") or line.startswith(rid[:12] + " "))
        cells = re.split(r"\s{2,}", row.strip())
        assert cells[0] == rid[:12]  # the id prefix, whole: `ledger show` takes it
        if "exit" in heads:
            assert cells[heads.index("exit")] == ("—" if code is None else str(code))
        if "command" in heads:
            cell = row[header.index("command"):].rstrip()
            if command is None:
                assert cell == "—"
            elif cell != command:  # display text: cut with an ellipsis, never changed otherwise
                assert cell.endswith("…") and command.startswith(cell[:-1]) and len(cell) >= 12, (cell, command)
    if width >= 200:
        assert "command" in heads and "exit" in heads and not hidden
        row = next(line for line in lines if rid[:12] in line)
        assert row.rstrip().endswith("…")  # the long one is cut to fit, the table is not wider
    if width <= 100:
        assert "command" not in heads and "exit" not in heads


def test_ledger_runs_stays_off_sqlalchemy(home):
    """The table (and its fitting) on an up-to-date index: the driver only (issue 10)."""
    _record(home, "sh", "-c", "exit 3")
    env = _env(home, COLUMNS="200")
    assert ledger_cli(["index"], env=env).returncode == 0
    for args in (["runs"], ["runs", "--json"], ["runs", "--csv"]):
        p = subprocess.run([sys.executable, "-X", "importtime", "-m", "ledger", *args], env=env, capture_output=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr[-2000:]
        assert b"exit" in p.stdout  # (the table's column, the JSON's and CSV's exit_code)
        assert b"sqlalchemy" not in p.stderr, args


# -- migration 0008 ----------------------------------------------------------------------

def test_an_index_at_0007_is_upgraded_and_every_record_read_again(home, db_url):
    from alembic import command

    want = _runs(home)
    want.pop(next(k for k, v in want.items() if v == (None, None)))  # (settled runs only: no re-read needed otherwise)
    assert cli("index", "--db", db_url).exit_code == 0
    eng = dbmod.engine(db_url, mode="write")
    try:
        with eng.connect() as conn:
            with conn.begin():
                command.downgrade(dbmod.alembic_config(connection=conn), "0007_report_changes")
            with conn.begin():
                assert dbmod.current_revision(conn) == "0007_report_changes"
                cols = {c["name"] for c in sa.inspect(conn).get_columns("runs")}
                assert "command" not in cols and "exit_code" not in cols
                # the cursors as 0007 left them: fold states kept, the shards as the pass left them
                assert conn.execute(sa.text("SELECT count(*) FROM index_cursors WHERE fold_state IS NULL")).scalar() == 0
            with conn.begin():
                dbmod.upgrade(conn)
            with conn.begin():
                # the columns are there, the values not yet: the records must be read again
                rows = conn.execute(sa.text("SELECT run_id, command, exit_code FROM runs_v")).fetchall()
                assert len(rows) == 7 and all(r[1:] == (None, None) for r in rows)
                assert conn.execute(sa.text(
                    "SELECT count(*) FROM index_cursors WHERE fold_state IS NULL AND racy")).scalar() == 7
                assert conn.execute(sa.text("SELECT count(*) FROM index_shards WHERE sealed")).scalar() == 0
    finally:
        eng.dispose()
    res = cli("index", "--db", db_url, "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["rewritten"] == 0  # a re-read, not a rewrite
    q = cli("sql", "--db", db_url, "--json", "--", "SELECT run_id, exit_code, command FROM runs_v")
    got = {r["run_id"]: (r["exit_code"], r["command"]) for r in json.loads(q.stdout)}
    assert {k: got[k] for k in want} == want
    assert cli("runs", "--json", "--all", "--db", db_url).stdout == records_runs_json(home)
