"""`ledger runs`, `show` and `index` parsed without Typer too (ledger/cli/fastpath.py, issue 10:
the readers of an up-to-date index within 1.5x of `ledger --help`): the real command answers
as the Typer path does, option for option, usage mistakes included; what the fast parser does
not read goes to Typer unchanged."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import REPO
from indexhelpers import make_run
from ledger.cli.app import app


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    h = tmp_path_factory.mktemp("reads") / "home"
    runs = [make_run(h, subjects=(f"task:{i}",), harness="codex" if i % 2 else "claude") for i in range(4)]
    make_run(h, outcome=None)
    env = {**os.environ, "LEDGER_HOME": str(h), "PYTHONPATH": str(REPO), "COLUMNS": "160"}
    env.pop("LEDGER_DB", None)
    subprocess.run([sys.executable, "-m", "ledger", "index"], env=env, check=True, capture_output=True)
    return env, runs[0].name


CASES = [
    ["runs"], ["runs", "--json", "--all"], ["runs", "--csv", "--harness", "cl*", "--harness", "codex"],
    ["runs", "--all", "--limit", "2", "--since", "7d"], ["runs", "--outcome=running", "--json"],
    ["runs", "--all", "--project", "*", "--json"], ["runs", "--project", "nope"],
    ["show", "RUN"], ["show", "RUN", "--json"], ["show", "RUN", "--events"], ["show", "RUN"[:3]],
    ["index"], ["index", "--json"],
    # usage mistakes: found by the command (said here) or only parsed by Typer (handed over)
    ["runs", "--since", "yesterdayish"], ["runs", "--json", "--csv"], ["runs", "--limit", "-1"],
    ["runs", "--limit", "x"], ["runs", "--bogus"], ["runs", "extra"], ["show"], ["show", "nope"],
    ["show", "RUN", "RUN"], ["index", "--lock-timeout", "5"], ["index", "--json=1"],
    # issue 28: sql and --version without Typer too
    ["sql", "select 1"], ["sql", "--json", "select run_id, harness from runs_v order by run_id"],
    ["sql", "--csv", "--timeout", "2.5", "select count(*) as n from runs_v"], ["sql", "--timeout=0", "select 2"],
    ["sql", "--timeout", "1e1", "select 3"], ["sql", "--timeout", "-1", "select 4"], ["sql", "--timeout", "x", "q"],
    ["sql", "--", "-- a note\nselect 5"], ["sql", "select 6", "extra"], ["sql", "--json", "--csv", "select 7"],
    ["sql", "delete from runs_v"], ["sql", "select nope"], ["sql", "--bogus", "select 8"], ["sql"],
    ["--version"], ["--version", "runs"],
]


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(a))
def test_the_real_command_answers_as_the_typer_path(home, args, monkeypatch):
    env, run = home
    argv = [a.replace("RUN", run) for a in args]
    real = subprocess.run([sys.executable, "-m", "ledger", *argv], env=env, capture_output=True)
    for k in ("LEDGER_HOME", "COLUMNS"):
        monkeypatch.setenv(k, env[k])
    res = CliRunner().invoke(app, argv)

    def steady(text: str) -> str:  # (the pass's own duration)
        import re

        return re.sub(r'in \d+\.\d\ds|"seconds": [0-9.]+', "", text)

    assert (real.returncode, steady(real.stdout.decode()), steady(real.stderr.decode())) == (
        res.exit_code, steady(res.stdout), steady(res.stderr))
    assert b"Traceback" not in real.stderr


def test_typer_is_skipped_for_plain_forms_only(home):
    env, run = home

    def modules(*args: str) -> str:
        p = subprocess.run([sys.executable, "-X", "importtime", "-m", "ledger", *args], env=env, capture_output=True)
        return p.stderr.decode()

    for args in (("runs", "--json"), ("show", run), ("index",)):
        assert "pydantic" not in modules(*args), args  # (Typer's setup imports it)
    assert "pydantic" not in modules("sql", "select 1")
    assert "typer" not in modules("--version")
    assert "pydantic" in modules("runs", "--help")
    assert "pydantic" in modules("index", "--home", env["LEDGER_HOME"])  # (a list of paths: Typer's)


def test_an_option_from_the_environment_is_left_to_typer(home, monkeypatch):
    # `--role` reads $LEDGER_SQL_ROLE when it is not given (Click's envvar): the fast parser
    # answers only a command line that does not need it
    from ledger.cli.fastpath import parse
    from ledger.cli.sql_cmd import sql

    monkeypatch.delenv("LEDGER_SQL_ROLE", raising=False)
    assert parse(["select 1"], sql.__wrapped__) == {"query": "select 1"}
    assert parse(["--role", "r", "select 1"], sql.__wrapped__) == {"role": "r", "query": "select 1"}
    assert parse(["--timeout", "2.5", "select 1"], sql.__wrapped__) == {"timeout": 2.5, "query": "select 1"}
    assert parse(["--timeout", "2.5e0", "select 1"], sql.__wrapped__) is None
    monkeypatch.setenv("LEDGER_SQL_ROLE", "")
    assert parse(["select 1"], sql.__wrapped__) is None
    assert parse(["--role", "r", "select 1"], sql.__wrapped__) == {"role": "r", "query": "select 1"}


@pytest.mark.parametrize("columns", ["44", "80"])
@pytest.mark.parametrize("args", [["sql", "select run_id, harness, 'a long text cell to cut' as note from runs_v"],
                                  ["runs", "--all"], ["sql", "select 1 where 0"]], ids=lambda a: " ".join(a))
def test_a_table_to_a_pipe_is_what_richs_console_writes(home, args, columns, monkeypatch):
    # issue 28: print_table writes the table's text itself when standard output takes no styles
    # (ledger.tables.plain_stdout); under the test runner (a swapped stream) Rich's console does
    env, _run = home
    env = {**env, "COLUMNS": columns}
    real = subprocess.run([sys.executable, "-m", "ledger", *args], env=env, capture_output=True)
    for k in ("LEDGER_HOME", "COLUMNS"):
        monkeypatch.setenv(k, env[k])
    res = CliRunner().invoke(app, args)
    assert (real.returncode, real.stdout.decode(), real.stderr.decode()) == (res.exit_code, res.stdout, res.stderr)
