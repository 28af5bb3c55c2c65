"""Notes that tell the truth (issue 34), each checked by its exact text: a reader that finds an
import at work says its figures may be incomplete; `homes list --home STORE` reads the
store's index; a damaged store is named with what is wrong; `ledger index` counts the
imported sessions it indexed."""

from __future__ import annotations

import fcntl
import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import claudehistory
from indexhelpers import make_run
from ledger.cli.app import app
from ledger.home import read_home_uid

IMPORT_NOTE = "note: an import is running: figures may be incomplete"


def cli(*args: str, code: int = 0):
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == code, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    return res


@pytest.fixture
def imported(tmp_path):
    home = tmp_path / "home"
    claudehistory.generate(tmp_path / "claude", sessions=3, seed=5)
    cli("import", "claude", "--from", str(tmp_path / "claude"), "--home", str(home))
    return home


@pytest.mark.parametrize("argv", [["report", "--json"], ["runs", "--json"], ["report", "model"]])
def test_a_reader_says_an_import_is_running(imported, argv):
    assert IMPORT_NOTE not in cli(*argv, "--home", str(imported)).stderr
    # an import holds the home's sources/.lock while it archives (ledger.sources.archive._Lock)
    fd = os.open(imported / "sources" / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        res = cli(*argv, "--home", str(imported))
    finally:
        os.close(fd)
    assert res.stderr.splitlines().count(IMPORT_NOTE) == 1, res.stderr
    assert res.stdout  # (it still answers, from what is archived)
    assert IMPORT_NOTE not in cli(*argv, "--home", str(imported)).stderr


def _pushed(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "home"
    for _ in range(3):
        make_run(home)
    claudehistory.generate(tmp_path / "claude", sessions=2, seed=9)
    cli("import", "claude", "--from", str(tmp_path / "claude"), "--home", str(home))
    store = tmp_path / "store"
    cli("push", "--home", str(home), "--to", str(store))
    return home, store


def test_homes_list_of_a_store_reads_the_store_index(tmp_path):
    home, store = _pushed(tmp_path)
    cli("index", "--home", str(store))
    doc = json.loads(cli("homes", "list", "--home", str(store), "--json").stdout)
    assert [h["home_id"] for h in doc] == [read_home_uid(home)]
    assert [h["runs"] for h in doc] == [json.loads(cli("report", "--home", str(store), "--json").stdout)
                                        ["totals"]["runs"]]
    cur = cli("db", "current", "--home", str(store)).stdout  # (db reads the same index)
    assert cur.endswith("(the newest revision this ledger knows)\n")


def test_a_damaged_store_is_named_with_what_is_wrong(tmp_path):
    home, store = _pushed(tmp_path)
    dest = store / "homes" / read_home_uid(home)
    damaged = sorted(dest.glob("runs/*/*/manifest.json"))[:2] + sorted((dest / "sources").rglob("*.zst"))[:1]
    for p in damaged:
        os.chmod(p, 0o600)
        p.write_bytes(b"x" + p.read_bytes()[1:])  # (the store's copy changed; the home's is as pushed)
    res = cli("push", "--home", str(home), "--to", str(store), "--full", code=1)
    lines = res.stderr.splitlines()
    assert f"Error: the record store {dest} is damaged: 3 of its copies are not what was pushed (changed in the " \
           "store after it was pushed; each listed above); nothing was overwritten" in lines, res.stderr
    assert f"Hint: restore {dest} from a backup, or move it aside and push again" in lines
    listed = [line for line in lines if line.startswith("conflict: ")]
    assert len(listed) == 3 and all(line.endswith(": the store's copy changed after it was pushed (the home's "
                                                  "file is as the last push verified it)") for line in listed)
    assert "files of the home differ" not in res.stderr
    # a file the home changed is still the home's conflict
    manifest = sorted(home.glob("runs/*/*/manifest.json"))[-1]
    os.chmod(manifest, 0o600)
    manifest.write_bytes(manifest.read_bytes().replace(b'"harness"', b'"harness" ', 1))
    res = cli("push", "--home", str(home), "--to", str(store), "--full", "--json", code=1)
    sides = sorted(c["side"] for c in json.loads(res.stdout)["conflicts"])
    assert sides == ["home", "store", "store", "store"]
    assert re.search(r"^Error: 1 file of the home differs from the store's copies; the record store .* is damaged: "
                     r"3 of its copies", res.stderr, re.M), res.stderr


def test_index_counts_the_imported_sessions_it_indexed(imported):
    sessions = len(json.loads(cli("runs", "--all", "--source", "claude-log", "--json", "--home", str(imported)).stdout))
    assert sessions > 3  # (subagents are sessions of their own)
    res = cli("index", "--rebuild", "--home", str(imported))
    assert re.fullmatch(rf"indexed: 0 new, 0 updated, 0 unchanged, 0 skipped; imported sessions: {sessions} new, "
                        r"0 updated in \d+\.\d\ds \(rebuilt\)", res.stderr.strip()), res.stderr
    doc = json.loads(cli("index", "--rebuild", "--json", "--home", str(imported)).stdout)
    assert (doc["sessions_new"], doc["sessions_updated"]) == (sessions, 0)
    assert cli("index", "--home", str(imported)).stderr.strip().startswith("indexed: 0 new, 0 updated, 0 unchanged, 0 skipped in ")
