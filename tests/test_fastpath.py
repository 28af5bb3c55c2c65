"""`ledger report` and `ledger import` parsed without Typer (ledger/cli/fastpath.py, issue 15:
a warm report 10x faster than ccusage): the real command's output, errors and exit codes are
those of the Typer path, option for option; what it does not parse goes to Typer unchanged."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import claudehistory
from conftest import REPO
from ledger.cli.app import app
from ledger.cli.report_cmd import report
from ledger.cli.fastpath import parse


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    base = tmp_path_factory.mktemp("fast")
    claudehistory.generate(base / "claude", sessions=6, seed=3)
    env = {**os.environ, "LEDGER_HOME": str(base / "home"), "PYTHONPATH": str(REPO), "COLUMNS": "160"}
    env.pop("LEDGER_DB", None)
    subprocess.run([sys.executable, "-m", "ledger", "import", "claude", "--from", str(base / "claude")],
                   env=env, check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "ledger", "index"], env=env, check=True, capture_output=True)
    return env


CASES = [
    ["daily", "--tz", "UTC", "--json"],
    ["--tz=UTC", "model", "--json"],
    ["daily", "--tz", "UTC", "--source", "claude-log", "--source", "record", "--csv"],
    ["session", "--tz", "UTC", "--limit", "2", "--order", "asc", "--breakdown"],
    ["weekly", "--tz", "Europe/Paris", "--since", "2026-01-01", "--until", "20260131", "--cost", "estimated"],
    ["daily", "--tz", "UTC"],
    # issue 29: --project on every kind (a glob that matches nothing: the hint on stderr)
    ["session", "--tz", "UTC", "--project", "gamma", "--project", "/home/dev/b*"],
    ["daily", "--project", "nothing-here", "--json"], ["project", "--project=alpha"],
    # usage mistakes: found by the command (said here) or only parsed by Typer (handed over)
    ["daily", "--since", "2026-13-01"],
    ["--json", "--csv"],
    ["nope"],
    ["daily", "--limit", "-1"],
    ["daily", "--limit", "x"],
    ["--tz"],
    ["daily", "model"],
    ["daily", "--bogus"],
    ["daily", "--json=1"],
]


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(a) or "-")
def test_the_real_command_answers_as_the_typer_path(imported, args, monkeypatch):
    real = subprocess.run([sys.executable, "-m", "ledger", "report", *args], env=imported, capture_output=True)
    for k in ("LEDGER_HOME", "COLUMNS"):
        monkeypatch.setenv(k, imported[k])
    res = CliRunner().invoke(app, ["report", *args])
    assert (real.returncode, real.stdout.decode(), real.stderr.decode()) == (
        res.exit_code, res.stdout, res.stderr)
    assert b"Traceback" not in real.stderr


IMPORT_CASES = [
    ["claude", "--from", "{cfg}", "--json"],
    ["claude", "--from={cfg}"],
    ["nope"],
    ["all", "--from", "{cfg}"],
    ["claude", "--from", "{cfg}/missing"],
    ["claude", "--from", "{cfg}", "--bogus"],
    ["claude", "--from"],
]


@pytest.mark.parametrize("args", IMPORT_CASES, ids=lambda a: " ".join(a))
def test_the_real_import_answers_as_the_typer_path(tmp_path, args, monkeypatch):
    cfg = tmp_path / "claude"
    claudehistory.generate(cfg, sessions=3, seed=5)
    argv = [a.replace("{cfg}", str(cfg)) for a in args]
    env = {**os.environ, "LEDGER_HOME": str(tmp_path / "h1"), "PYTHONPATH": str(REPO), "COLUMNS": "160"}
    env.pop("LEDGER_DB", None)
    real = subprocess.run([sys.executable, "-m", "ledger", "import", *argv], env=env, capture_output=True)
    monkeypatch.setenv("LEDGER_HOME", str(tmp_path / "h2"))
    monkeypatch.setenv("COLUMNS", "160")
    res = CliRunner().invoke(app, ["import", *argv])
    same = (real.returncode, real.stdout.decode().replace("/h1", "/h2"), real.stderr.decode().replace("/h1", "/h2"))
    assert same == (res.exit_code, res.stdout, res.stderr)
    assert b"Traceback" not in real.stderr


def test_typer_is_skipped_for_plain_forms_only(imported, tmp_path):
    def modules(*args: str) -> str:
        p = subprocess.run([sys.executable, "-X", "importtime", "-m", "ledger", *args], env=imported,
                           capture_output=True)
        return p.stderr.decode()

    assert "pydantic" not in modules("report", "daily", "--tz", "UTC", "--json")  # (Typer's setup imports it)
    assert "pydantic" in modules("report", "daily", "--help")
    assert "pydantic" not in modules("import", "claude", "--from", str(tmp_path))
    assert "pydantic" in modules("import", "claude", "--from", str(tmp_path), "--bogus")


def test_parse_reads_the_commands_own_declarations():
    fn = report.__wrapped__
    assert parse(["model", "--tz=UTC", "--json", "--source", "a", "--source", "b", "--limit", "3", "--home", "h"],
                 fn) == {"kind": "model", "tz": "UTC", "json_": True, "source": ["a", "b"], "limit": 3,
                         "home": __import__("pathlib").Path("h")}
    for argv in (["--help"], ["-h"], ["--tz"], ["--tz", "-05:00"], ["a", "b"], ["--limit", "-1"], ["--json=yes"],
                 ["--"], ["-"], ["--no-json"]):
        assert parse(argv, fn) is None, argv
