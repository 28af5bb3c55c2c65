"""Imported agent sessions in the index and the reports (issue 15): `ledger import` + `ledger
report` equal the synthetic histories' ground truth per day and per model, on SQLite and
PostgreSQL; the archive, not the originals, is the evidence; only new bytes are read.

The truths come from the generators' own lists of API responses / model calls and charges
(tests/claudehistory.py, tests/codexhistory.py), never from reading the files back.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import claudehistory
import codexhistory
from ledger.cli.app import app
from ledger.index import logfeed
from ledger.pricing import estimate_cost
from ledger.sources.archiveformat import read_archive

runner = CliRunner()
TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")


def cli(*args: str) -> Any:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return res


def report(db: str, *args: str) -> dict[str, Any]:
    return json.loads(cli("report", *args, "--tz", "UTC", "--json", "--db", db).stdout)


def per_day_model(doc: dict[str, Any]) -> dict[tuple[str, str | None], dict[str, Any]]:
    out = {}
    for row in doc["rows"]:
        for m in row["models"]:
            out[(row["key"], m["model"])] = m
    return out


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 1e-9  # (JSON money has 10 decimals; sums are taken in another order)


def claude_estimates(h: claudehistory.History) -> dict[tuple[str, str], float | None]:
    """Per (day, model): every response priced on its own (a long-context tier is per request)."""
    out: dict[tuple[str, str], float | None] = {}
    for r in h.responses:
        k = (r.day, r.model)
        est, _ = estimate_cost("anthropic", r.model, r.counters)
        if k in out and out[k] is None or est is None:
            out[k] = None
        else:
            out[k] = out.get(k, 0.0) + est
    return out


@pytest.mark.parametrize("seed", [1, 4])
def test_claude_history_reports_equal_the_ground_truth(home, tmp_path, db_url, seed):
    h = claudehistory.generate(tmp_path / "claude", sessions=10, seed=seed)
    cli("import", "claude", "--from", str(tmp_path / "claude"))
    truth = h.truth(("day", "model"))
    estimates = claude_estimates(h)

    tokens = per_day_model(report(db_url, "daily", "--breakdown"))
    reported = per_day_model(report(db_url, "daily", "--breakdown", "--cost", "reported"))
    estimated = per_day_model(report(db_url, "daily", "--breakdown", "--cost", "estimated"))
    assert set(tokens) == set(truth)
    for key, want in truth.items():
        got = tokens[key]
        for c in TOKENS:
            assert got[c] == want[c], (key, c)
        assert close(estimated[key]["cost_usd"], estimates[key]), key
        # the client's own figures: each day is charged the cost-state deltas that reached a
        # new level that day plus 2.0.x per-response costs; a day the chain charged nothing is 0
        if key[1] == claudehistory.UNPRICED_MODEL:
            assert reported[key]["cost_usd_known"] is None, key  # hasUnknownModelCost: unknown, not 0
        else:
            assert close(reported[key]["cost_usd_known"] or 0.0, want["cost_usd"] or 0.0), key

    # per model over the whole history (the daily report's totals), and the same in `model`
    by_model = claudehistory_by_model(truth)
    totals = {m["model"]: m for m in report(db_url, "daily", "--breakdown")["totals"]["models"]}
    model_rows: dict[str, dict[str, int]] = {}
    for row in report(db_url, "model", "--breakdown")["rows"]:
        for m in row["models"]:
            acc = model_rows.setdefault(m["model"], dict.fromkeys(TOKENS, 0))
            for c in TOKENS:
                acc[c] += m[c] or 0
    for model, want in by_model.items():
        for c in TOKENS:
            assert totals[model][c] == want[c], (model, c)
            assert model_rows[model][c] == (want[c] or 0), (model, c)

    runs = json.loads(cli("runs", "--all", "--json", "--source", "claude-log", "--db", db_url).stdout)
    assert runs and all(r["source"] == "claude-log" and r["harness"] == "claude" for r in runs)
    assert all(r["id"].startswith("claude-") for r in runs)
    assert json.loads(cli("runs", "--all", "--json", "--source", "record", "--db", db_url).stdout) == []


def claudehistory_by_model(truth: dict[tuple, dict[str, Any]]) -> dict[str, dict[str, int | None]]:
    out: dict[str, dict[str, int | None]] = {}
    for (_, model), row in truth.items():
        acc = out.setdefault(model, dict.fromkeys(TOKENS))
        for c in TOKENS:
            if row[c] is not None:
                acc[c] = (acc[c] or 0) + row[c]
    return out


def test_codex_history_reports_equal_the_ground_truth(home, tmp_path, db_url):
    h = codexhistory.generate(tmp_path / "codex", threads=10, seed=3)
    cli("import", "codex", "--from", str(tmp_path / "codex"))
    truth = h.truth(("day", "model"))
    estimates: dict[tuple[str, str], float | None] = {}
    for c in h.calls:
        est, _ = estimate_cost("openai", c.model, c.counters)
        k = (c.day, c.model)
        estimates[k] = None if (est is None or (k in estimates and estimates[k] is None)) else estimates.get(k, 0.0) + est
    tokens = per_day_model(report(db_url, "daily", "--breakdown"))
    estimated = per_day_model(report(db_url, "daily", "--breakdown", "--cost", "estimated"))
    auto = per_day_model(report(db_url, "daily", "--breakdown"))
    assert set(tokens) == set(truth)
    for key, want in truth.items():
        for c in TOKENS:
            assert tokens[key][c] == want[c], (key, c)
        assert close(estimated[key]["cost_usd"], estimates[key]), key
        # rollouts carry no cost: the default (auto) cost is the estimate
        assert close(auto[key]["cost_usd"], estimates[key]), key
        assert auto[key]["cost_basis"] in ("estimated", "unknown"), key
    runs = json.loads(cli("runs", "--all", "--json", "--source", "codex-log", "--db", db_url).stdout)
    assert runs and all(r["harness"] == "codex" for r in runs)


def _snapshot(db: str) -> list[dict[str, Any]]:
    return [report(db, kind, "--breakdown") for kind in ("daily", "model")] + [
        report(db, "daily", "--cost", "reported"), report(db, "daily", "--cost", "estimated")]


def test_deleting_the_originals_or_the_index_changes_no_report(home, tmp_path):
    src = tmp_path / "claude"
    claudehistory.generate(src, sessions=8, seed=2)
    cli("import", "claude", "--from", str(src))
    db = f"sqlite:///{tmp_path / 'index.sqlite'}"
    before = _snapshot(db)
    assert before[0]["totals"]["input_tokens"]

    shutil.rmtree(src)  # Claude Code's cleanup (or the user) deleted the transcripts
    assert _snapshot(db) == before
    (tmp_path / "index.sqlite").unlink()  # the index is derived: rebuilt from the archive
    assert _snapshot(db) == before

    # the home's own index (the default), damaged: rebuilt from the records and the archive
    own = home / "index.sqlite"
    doc = json.loads(cli("report", "daily", "--breakdown", "--tz", "UTC", "--json").stdout)
    assert doc == before[0]
    data = bytearray(own.read_bytes())
    data[4096:8192] = b"\xff" * 4096  # a page of the file overwritten
    own.write_bytes(bytes(data))
    res = runner.invoke(app, ["index", "--full"])
    assert res.exit_code == 0, res.stderr
    assert json.loads(cli("report", "daily", "--breakdown", "--tz", "UTC", "--json").stdout) == before[0]


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def test_one_appended_response_is_read_alone_and_grows_the_totals_by_it(home, tmp_path, monkeypatch):
    src = tmp_path / "claude"
    h = claudehistory.generate(src, sessions=6, seed=5)
    cli("import", "claude", "--from", str(src))
    db = f"sqlite:///{tmp_path / 'index.sqlite'}"
    before = report(db, "daily", "--breakdown")

    # one new response in a session that is already imported, on a new day
    rel = next(r for r in h.files if "/subagents/" not in r and r not in h.torn_files)
    sid = Path(rel).stem
    new = _line({"type": "assistant", "timestamp": "2026-02-01T12:00:00.000Z", "sessionId": sid,
                 "isSidechain": False, "requestId": "req_appended", "cwd": "/home/dev/x",
                 "message": {"id": "msg_appended", "model": "claude-sonnet-4-5-20250929", "role": "assistant",
                             "usage": {"input_tokens": 7, "output_tokens": 11, "cache_read_input_tokens": 13,
                                       "cache_creation_input_tokens": 17}}})
    with open(src / rel, "ab") as f:
        f.write(new)
    arch = home / "sources" / "claude" / (rel + ".zst")  # zstd frames, one per import
    archived_before = arch.stat().st_size

    read: list[int] = []
    real_feed = logfeed.feed_file

    def counting(usage, key, path, start, end, zstd):
        got = real_feed(usage, key, path, start, end, zstd)
        read.append(got[1] if got else 0)
        return got

    monkeypatch.setattr(logfeed, "feed_file", counting)
    after = report(db, "daily", "--breakdown")  # the reader archives the new bytes, then indexes them
    frame = arch.stat().st_size - archived_before  # the reader archived the new line as one frame ...
    assert read_archive(arch, archived_before) == new
    assert read == [frame]  # ... and the index read that frame and nothing else
    day = next(r for r in after["rows"] if r["key"] == "2026-02-01")
    assert [(m["model"], m["input_tokens"], m["output_tokens"], m["cache_read_tokens"], m["cache_write_tokens"])
            for m in day["models"]] == [("claude-sonnet-4-5-20250929", 7, 11, 13, 17)]
    assert day["runs"] == 0  # the session started on another day: its usage, not a new run
    for c in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        assert after["totals"][c] == before["totals"][c] + {"input_tokens": 7, "output_tokens": 11,
                                                            "cache_read_tokens": 13, "cache_write_tokens": 17}[c]
    assert after["totals"]["runs"] == before["totals"]["runs"]

    read.clear()
    assert report(db, "daily", "--breakdown") == after  # nothing new: nothing read
    assert read == []


def test_a_rewritten_log_is_a_new_generation_and_nothing_is_lost(home, tmp_path):
    src = tmp_path / "claude"
    h = claudehistory.generate(src, sessions=6, seed=6)
    cli("import", "claude", "--from", str(src))
    db = f"sqlite:///{tmp_path / 'index.sqlite'}"
    before = report(db, "daily")
    rel = next(r for r in h.files if "/subagents/" not in r and r not in h.torn_files)
    sid = Path(rel).stem
    # the client rewrote the file (e.g. a cleanup): shorter, different bytes, one new response
    new = _line({"type": "assistant", "timestamp": "2026-01-20T08:00:00.000Z", "sessionId": sid,
                 "requestId": "req_rewritten", "message": {"id": "msg_rewritten", "model": "claude-haiku-4-5-20251001",
                                                           "usage": {"input_tokens": 5, "output_tokens": 6}}})
    (src / rel).write_bytes(new)
    after = report(db, "daily")
    assert after["totals"]["input_tokens"] == before["totals"]["input_tokens"] + 5
    assert after["totals"]["output_tokens"] == before["totals"]["output_tokens"] + 6
    runs = json.loads(cli("runs", "--all", "--json", "--source", "claude-log", "--db", db).stdout)
    (run,) = [r for r in runs if r["id"] == f"claude-{sid}"]
    assert run["evidence_gaps"] == 1  # the new generation is an evidence gap


def test_show_and_sql_see_an_imported_session(home, tmp_path):
    src = tmp_path / "claude"
    h = claudehistory.generate(src, sessions=3, seed=7)
    cli("import", "claude", "--from", str(src))
    db = f"sqlite:///{tmp_path / 'index.sqlite'}"
    runs = json.loads(cli("runs", "--all", "--json", "--db", db).stdout)
    rid = runs[0]["id"]
    shown = json.loads(cli("show", rid, "--json", "--db", db).stdout)
    assert shown["id"] == rid and shown["source"] == "claude-log"
    out = json.loads(cli("sql", "--json", "--db", db,
                         "SELECT source, count(*) AS n FROM runs_v GROUP BY source").stdout)
    assert out == [{"source": "claude-log", "n": len(runs)}]
    sessions = json.loads(cli("sql", "--json", "--db", db,
                              "SELECT row_id, source, linked_run_id FROM sessions_v ORDER BY row_id").stdout)
    assert [s["row_id"] for s in sessions] == sorted(r["id"] for r in runs)
    assert {s["linked_run_id"] for s in sessions} == {None}
    assert len({r.session_id for r in h.responses}) <= len(runs)


def test_a_hostile_session_id_gets_an_id_that_can_be_pasted(home, tmp_path):
    """Session ids come from the agent's log: shown verbatim (escaped), but a run id must be
    something a person can paste into `ledger show`."""
    evil = "\x1b[31mevil\n[bold]x[/bold] \u202e" + "A" * 300
    proj = tmp_path / "claude" / "projects" / "p"
    proj.mkdir(parents=True)
    (proj / "s.jsonl").write_bytes(_line({"type": "assistant", "sessionId": evil, "timestamp": "2026-01-01T00:00:01Z",
                                          "requestId": "r1", "message": {"id": "m1", "model": "claude-sonnet-4-5",
                                                                         "usage": {"input_tokens": 5, "output_tokens": 7}}}))
    cli("import", "claude", "--from", str(tmp_path / "claude"))
    db = f"sqlite:///{tmp_path / 'index.sqlite'}"
    (run,) = json.loads(cli("runs", "--all", "--json", "--db", db).stdout)
    assert run["id"].startswith("claude-x") and len(run["id"]) == len("claude-x") + 32 and run["id"].isprintable()
    shown = json.loads(cli("show", run["id"][:16], "--json", "--db", db).stdout)
    assert shown["provider_session_id"] == evil  # the agent's own id, verbatim
    table = cli("runs", "--all", "--db", db).stdout
    assert "\x1b" not in table


def test_the_same_sessions_imported_into_two_homes_are_counted_once(home, tmp_path, db_url, monkeypatch):
    """Issue 11: two homes (a laptop's, its synced copy, a second home on the same machine)
    importing the same client logs into one index: each session is counted once."""
    h = codexhistory.generate(tmp_path / "codex", threads=6, seed=5)
    truth = h.truth(("day", "model"))
    other = tmp_path / "second-home"
    cli("import", "codex", "--from", str(tmp_path / "codex"))
    monkeypatch.setenv("LEDGER_HOME", str(other))
    cli("import", "codex", "--from", str(tmp_path / "codex"))
    cli("index", "--home", str(home), "--home", str(other), "--db", db_url)
    tokens = per_day_model(report(db_url, "daily", "--breakdown", "--home", str(home)))
    assert set(tokens) == set(truth)
    for key, want in truth.items():
        for c in TOKENS:
            assert tokens[key][c] == want[c], (key, c)
    rows = json.loads(cli("sql", "SELECT home, count(*) AS n FROM runs_v GROUP BY home", "--json",
                          "--db", db_url).stdout)
    assert [r["home"] for r in rows] == [str(home)]  # the first home counts them all, the second none
