"""Tool counts of imported Codex threads in the index (issue 15): `tool_uses` rows equal the
synthetic history's truth (tests/codexhistory.py: each call once, under the thread that made
it, whatever the fork copies and repeats), with the results the rollouts state (ok / error /
semantic-error, the rest unknown), and `runs.tool_calls` / `tool_ok` / `tool_errors` are their
sums, on SQLite and PostgreSQL; an index whose Codex state was folded before tool calls were
counted reads the archive again, once."""

from __future__ import annotations

import importlib
import json
import sqlite3
from typing import Any

import orjson
from typer.testing import CliRunner

import codexhistory
from ledger.cli.app import app
from ledger.index import logclients, logfeed

runner = CliRunner()
TOOLS_SQL = ("SELECT run_id, tool_name, uses, ok, errors, semantic_errors, unknown FROM tool_uses_v "
             "WHERE run_id LIKE 'codex-%' ORDER BY run_id, tool_name")


def cli(*args: str) -> Any:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return res


def tool_rows(*db: str) -> list[dict[str, Any]]:
    return json.loads(cli("sql", *db, TOOLS_SQL, "--json").stdout)


def by_run(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        out.setdefault(r["run_id"], {})[r["tool_name"]] = r["uses"]
    return out


def test_codex_tool_uses_equal_the_ground_truth(home, tmp_path, db_url):
    h = codexhistory.generate(tmp_path / "codex", threads=10, seed=3)
    cli("import", "codex", "--from", str(tmp_path / "codex"))
    rows = tool_rows("--db", db_url)
    assert by_run(rows) == {f"codex-{tid}": tools for tid, tools in h.tools.items()}
    # the hazards were there: the files hold far more call lines than calls
    lines = sum(d.count(b'"type":"response_item"') for d in h.files.values())
    calls = sum(r["uses"] for r in rows)
    assert calls == sum(sum(t.values()) for t in h.tools.values()) and lines > 1.3 * calls
    # results: the ones the rollouts state, each call's once; the rest unknown (not 0, not ok)
    got = {(r["run_id"], r["tool_name"]): [r["ok"], r["errors"], r["semantic_errors"], r["unknown"]] for r in rows}
    want = {}
    for tid, tools in h.tools.items():
        for name, n in tools.items():
            ok, err, sem = h.results.get(tid, {}).get(name, [0, 0, 0])
            want[(f"codex-{tid}", name)] = [ok, err, sem, n - ok - err - sem]
    assert got == want
    totals = [sum(v[i] for v in want.values()) for i in range(4)]
    assert all(totals), totals  # every kind of result is there, and unknown ones too
    runs = json.loads(cli("sql", "--db", db_url, "SELECT run_id, tool_calls, tool_ok, tool_errors, "
                          "tool_semantic_errors, tool_unknown FROM runs_v WHERE run_id LIKE 'codex-%'",
                          "--json").stdout)
    per_run: dict[str, list[int]] = {}
    for (rid, _), v in want.items():
        acc = per_run.setdefault(rid, [0, 0, 0, 0, 0])
        acc[0] += sum(v)
        for i in range(4):
            acc[i + 1] += v[i]
    assert {r["run_id"]: [r["tool_calls"], r["tool_ok"], r["tool_errors"], r["tool_semantic_errors"],
                          r["tool_unknown"]] for r in runs if r["tool_calls"]} == per_run


def test_state_versions_agree_with_the_reducers():
    for client in logclients.CLIENTS:
        module = importlib.import_module(f"ledger.sources.{client}_usage")
        assert logclients.state_v(client) == module.STATE_VERSION, client


def _fold_as_version_1(index: str) -> None:
    """Make the home's index look like one written before Codex tool calls were counted: a
    version-1 reducer state (no calls), no rv in the source state, no tool_uses rows."""
    con = sqlite3.connect(index)
    with con:
        (outer,) = con.execute("SELECT state FROM log_state WHERE source = 'codex-log'").fetchone()
        (red,) = con.execute("SELECT state FROM log_state WHERE source = 'codex-log/reducer'").fetchone()
        outer, red = orjson.loads(outer), orjson.loads(red)
        assert outer["rv"] == 5 and red["v"] == 5 and red["calls"] and red["results"]  # (4: issue 25, 5: seed 2525)
        del outer["rv"]
        del red["calls"]
        del red["results"]
        red["v"] = 1
        for f in red["files"].values():
            del f[6:]  # (the version-1 cursor)
        for levels in red["chains"].values():
            for e in levels.values():
                del e[5]  # (a version-1 level has no thread start)
        con.execute("UPDATE log_state SET state = ? WHERE source = 'codex-log'", (orjson.dumps(outer).decode(),))
        con.execute("UPDATE log_state SET state = ? WHERE source = 'codex-log/reducer'", (orjson.dumps(red).decode(),))
        con.execute("DELETE FROM tool_uses WHERE run_id LIKE 'codex-%'")
    con.close()


def test_an_index_folded_before_tool_calls_reads_the_archive_again_once(home, tmp_path, monkeypatch):
    h = codexhistory.generate(tmp_path / "codex", threads=6, seed=4)
    cli("import", "codex", "--from", str(tmp_path / "codex"))
    want = {f"codex-{tid}": tools for tid, tools in h.tools.items()}
    assert by_run(tool_rows()) == want
    report = json.loads(cli("report", "daily", "--tz", "UTC", "--json").stdout)
    _fold_as_version_1(str(home / "index.sqlite"))

    read: list[int] = []
    real_feed = logfeed.feed_file

    def counting(usage, key, path, start, end, zstd):
        got = real_feed(usage, key, path, start, end, zstd)
        read.append(got[1] if got else 0)
        return got

    monkeypatch.setattr(logfeed, "feed_file", counting)
    archive = home / "sources" / "codex"
    size = sum(p.stat().st_size for p in archive.rglob("*.zst"))
    # nothing changed in the archive, only the version says to re-read: the next reader does
    # (the freshness check compares the state's version too: never an answer from the old one)
    assert by_run(tool_rows()) == want
    assert sum(read) == size  # the whole archive, from its first byte
    assert json.loads(cli("report", "daily", "--tz", "UTC", "--json").stdout) == report
    read.clear()
    cli("index")
    assert read == []  # once
