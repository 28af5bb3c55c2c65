"""`ledger report blocks` (issue 29): Claude's 5-hour billing windows from the report facts.

ccusage 20.0.24's `blocks --json` on a hazard-free history is committed as test data
(tests/blockfixture.py says how it was made); with CCUSAGE naming a ccusage binary the test
also runs it on the same files. The active block's burn rate and projection are worked out by
hand on run records with a frozen clock (LEDGER_NOW).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import blockfixture
from reporthelpers import claude_stream, cli, make

DATA = Path(__file__).resolve().parent / "data" / "ccusage" / "blocks-clean.json"


def _blocks(*args: str) -> dict:
    res = cli("report", "blocks", *args, "--json")
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return json.loads(res.stdout)


def _ours(b: dict) -> dict:
    return {"start": b["start"], "end": b["end"], "entries": b["entries"],
            "tokens": [b["input_tokens"], b["output_tokens"], b["cache_write_tokens"], b["cache_read_tokens"]],
            "total": b["total_tokens"], "cost": b["cost_usd"], "models": sorted(m["model"] for m in b["models"])}


def _theirs(b: dict) -> dict:
    t = b["tokenCounts"]
    return {"start": b["startTime"], "end": b["endTime"], "entries": b["entries"],
            "tokens": [t["inputTokens"], t["outputTokens"], t["cacheCreationInputTokens"], t["cacheReadInputTokens"]],
            "total": b["totalTokens"], "cost": b["costUSD"], "models": sorted(b["models"])}


def _compare(ours: list[dict], theirs: list[dict]) -> None:
    assert [_ours(b) for b in ours if not b["is_gap"]] == [_theirs(b) for b in theirs if not b["isGap"]]
    # gaps: ledger's spans the idle time from one block's end to the next block's start (the
    # index keeps no entry's second); ccusage's sit between the same two blocks
    blocks = [b for b in ours if not b["is_gap"]]
    gaps = [b for b in ours if b["is_gap"]]
    assert [(g["start"], g["end"]) for g in gaps] == [
        (a["end"], b["start"]) for a, b in zip(blocks, blocks[1:]) if a["end"] < b["start"]]
    starts = [b["start"] for b in blocks]
    for g in (b for b in theirs if b["isGap"]):
        i = sum(s < g["startTime"] for s in starts)
        assert 0 < i < len(starts) and any(blocks[i - 1]["end"] <= x["start"] and x["end"] <= blocks[i]["start"]
                                           for x in gaps), g


@pytest.fixture
def clean_home(home, tmp_path, monkeypatch):
    blockfixture.write(tmp_path / "claude")
    res = cli("import", "claude", "--from", str(tmp_path / "claude"))
    assert res.exit_code == 0, res.stderr
    monkeypatch.setenv("LEDGER_NOW", "2026-02-01T00:00:00Z")
    return tmp_path / "claude"


def test_blocks_equal_ccusage_on_a_hazard_free_history(clean_home):
    ours = _blocks()["blocks"]
    theirs = json.loads(DATA.read_text())["blocks"]
    _compare(ours, theirs)
    assert sum(not b["is_gap"] for b in ours) == 6 and sum(b["is_gap"] for b in ours) == 3
    # the last entry's 15-minute slot: the block's actual end to the slot
    for o, t in zip((b for b in ours if not b["is_gap"]), (b for b in theirs if not b["isGap"])):
        assert o["actual_end"] >= t["actualEndTime"] and o["sessions"] >= 1 and o["runs"] == 0
        assert o["cost_basis"] == "reported" and not o["is_active"]


@pytest.mark.skipif(not os.environ.get("CCUSAGE"), reason="CCUSAGE names no ccusage binary (the committed output is checked)")
def test_blocks_equal_a_live_ccusage(clean_home):
    out = subprocess.run([os.environ["CCUSAGE"], "blocks", "--json", "--offline"], capture_output=True, check=True,
                         env={**os.environ, "CLAUDE_CONFIG_DIR": str(clean_home)}).stdout
    _compare(_blocks()["blocks"], json.loads(out)["blocks"])


def test_blocks_csv_has_one_row_per_block(clean_home):
    res = cli("report", "blocks", "--csv")
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("start,end,actual_end,is_active,is_gap,runs,sessions,entries,")
    assert len(lines) == 1 + 9 and lines[1].startswith("2026-01-09T08:00:00.000Z,2026-01-09T13:00:00.000Z,")


def _records(home: Path) -> None:
    make(home, "2026-02-20T09:00:00Z", [claude_stream()])        # older than --recent's 3 days
    make(home, "2026-03-01T16:40:00Z", [claude_stream(), claude_stream()])  # a completed block: 2 entries
    make(home, "2026-03-02T10:05:00Z", [claude_stream()])        # the active block 10:00-15:00 ...
    make(home, "2026-03-02T11:20:00Z", [claude_stream()])        # ... 2 runs, 2 entries


def test_the_active_block_burn_rate_and_projection_by_hand(home, monkeypatch):
    _records(home)
    monkeypatch.setenv("LEDGER_NOW", "2026-03-02T12:30:00Z")
    doc = _blocks()
    blocks = [b for b in doc["blocks"] if not b["is_gap"]]
    assert [b["start"] for b in blocks] == ["2026-02-20T09:00:00.000Z", "2026-03-01T16:00:00.000Z",
                                            "2026-03-02T10:00:00.000Z"]
    act = blocks[-1]
    assert act["is_active"] and not any(b["is_active"] for b in blocks[:-1])
    assert (act["runs"], act["sessions"], act["entries"]) == (2, 0, 2)
    # one stream: 203 input + 43 output + 3000 cache read + 150 cache write = 3396 tokens, $0.0027165
    assert act["total_tokens"] == 2 * 3396 and act["cost_usd"] == pytest.approx(2 * 0.0027165)
    assert act["cost_basis"] == "reported"
    # elapsed 10:00 -> 12:30 = 2.5 h; 2.5 h left to 15:00
    rate = act["burn_rate"]
    assert rate["elapsed_minutes"] == 150
    assert rate["tokens_per_hour"] == pytest.approx(6792 / 2.5)
    assert rate["cost_usd_per_hour"] == pytest.approx(0.005433 / 2.5)
    proj = act["projection"]
    assert proj["remaining_minutes"] == 150
    assert proj["total_tokens"] == 13584 and proj["cost_usd"] == pytest.approx(0.010866)
    assert blocks[1]["entries"] == 2 and blocks[1]["burn_rate"] is None and blocks[1]["projection"] is None
    assert blocks[1]["actual_end"] == "2026-03-01T16:45:00.000Z"


def test_active_recent_and_token_limit(home, monkeypatch):
    _records(home)
    monkeypatch.setenv("LEDGER_NOW", "2026-03-02T12:30:00Z")
    assert [b["start"] for b in _blocks("--active")["blocks"]] == ["2026-03-02T10:00:00.000Z"]
    assert [b["start"] for b in _blocks("--recent")["blocks"] if not b["is_gap"]] == [
        "2026-03-01T16:00:00.000Z", "2026-03-02T10:00:00.000Z"]
    doc = _blocks("--token-limit", "max")
    assert doc["token_limit"] == 6792  # the largest completed block (the active one not counted)
    act = doc["blocks"][-1]
    assert act["token_limit"]["percent_used"] == pytest.approx(100.0)
    assert act["token_limit"]["status"] == "exceeds"  # projected 13584 > 6792
    limited = _blocks("--token-limit", "20000")["blocks"][-1]["token_limit"]
    assert limited["status"] == "ok" and limited["projected_percent"] == pytest.approx(67.92)
    # nothing active later on
    monkeypatch.setenv("LEDGER_NOW", "2026-03-02T15:00:00Z")
    assert _blocks("--active")["blocks"] == []
    res = cli("report", "blocks")
    assert res.exit_code == 0 and "ACTIVE" not in res.stdout and "2026-03-02 10:00" in res.stdout


def test_session_length(home, monkeypatch):
    _records(home)
    monkeypatch.setenv("LEDGER_NOW", "2026-03-02T12:30:00Z")
    blocks = [b for b in _blocks("--session-length", "1")["blocks"] if not b["is_gap"]]
    assert [b["start"] for b in blocks][-2:] == ["2026-03-02T10:00:00.000Z", "2026-03-02T11:00:00.000Z"]
    assert blocks[-1]["is_active"] is False  # 11:00-12:00 is over at 12:30


@pytest.mark.parametrize("args", [["--session-length", "0.1"], ["--session-length", "0"], ["--token-limit", "lots"],
                                  ["--token-limit", "-3"]])
def test_usage_mistakes(home, args):
    res = cli("report", "blocks", *args)
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_block_options_belong_to_blocks(home):
    res = cli("report", "daily", "--active")
    assert res.exit_code == 2 and "report blocks" in res.output


def test_blocks_equal_the_truth_on_the_hazard_history(home, tmp_path, monkeypatch):
    """Every duplication hazard (tests/claudehistory.py): each API response counted once, at
    its first appearance, in the block of its time (ccusage counts some of them twice)."""
    import claudehistory

    h = claudehistory.generate(tmp_path / "claude", sessions=12, seed=5)
    res = cli("import", "claude", "--from", str(tmp_path / "claude"))
    assert res.exit_code == 0, res.stderr
    monkeypatch.setenv("LEDGER_NOW", "2030-01-01T00:00:00Z")
    truth: list[dict] = []
    for r in sorted(h.responses, key=lambda r: r.time):
        t = r.time.timestamp()
        if not truth or t >= truth[-1]["end"]:
            start = t - t % 3600
            truth.append({"start": start, "end": start + 5 * 3600, "entries": 0, "tokens": [0, 0, 0, 0]})
        b = truth[-1]
        b["entries"] += 1
        for i, c in enumerate(("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")):
            b["tokens"][i] += r.counters[c] or 0
    from datetime import datetime, timezone

    def iso(s: float) -> str:
        return datetime.fromtimestamp(s, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")

    ours = [b for b in _blocks()["blocks"] if not b["is_gap"]]
    assert len(truth) > 3
    assert [(b["start"], b["end"], b["entries"], [b["input_tokens"], b["output_tokens"], b["cache_read_tokens"],
             b["cache_write_tokens"]]) for b in ours] == [
        (iso(b["start"]), iso(b["end"]), b["entries"], b["tokens"]) for b in truth]


def test_an_unknown_cost_makes_the_block_partial_never_zero(home, monkeypatch):
    make(home, "2026-03-02T10:05:00Z", [claude_stream()])
    make(home, "2026-03-02T10:35:00Z", [claude_stream(model="acme-proxy-model-1", final=False,
                                                      counters={"cost_usd": None})], model="acme-proxy-model-1")
    monkeypatch.setenv("LEDGER_NOW", "2026-03-02T11:00:00Z")
    b = _blocks()["blocks"][0]
    assert b["cost_usd"] is None and b["cost_basis"] == "partial"
    assert b["cost_usd_known"] == pytest.approx(0.0027165)
    assert b["burn_rate"]["cost_usd_per_hour"] == pytest.approx(0.0027165)  # (of the known part, basis partial)
    assert b["burn_rate"]["cost_basis"] == "partial"
    by_model = {m["model"]: m for m in b["models"]}
    assert by_model["acme-proxy-model-1"]["cost_basis"] == "unknown" and by_model["acme-proxy-model-1"]["cost_usd"] is None
    assert by_model["claude-sonnet-4-5"]["cost_basis"] == "reported"
    res = cli("report", "blocks")
    assert res.exit_code == 0 and ">=$0.00" in res.stdout


def _approx(v):
    """`v` with each float as pytest.approx (nested dicts compared key by key)."""
    if isinstance(v, dict):
        return {k: _approx(x) for k, x in v.items()}
    return pytest.approx(v, rel=1e-12) if isinstance(v, float) else v


def test_the_active_block_from_recent_entries_is_the_whole_historys(home, monkeypatch):
    """ledger.report.blocks.active_block (the status line's) reads back only to the last
    entry that starts a block whatever came before; the same block as from the whole history,
    also when activity never paused long enough within its first look-back (blocks chain)."""
    import sqlite3
    from datetime import datetime, timedelta, timezone

    from ledger.report.blocks import TOKENS, active_block, active_totals, blocks_doc, read_entries

    t0 = datetime(2026, 3, 1, 0, 40, tzinfo=timezone.utc)
    for k in range(17):  # every 110 minutes for 30 hours: never idle 5 hours
        make(home, (t0 + timedelta(minutes=110 * k)).strftime("%Y-%m-%dT%H:%M:%SZ"), [claude_stream()])
    make(home, "2026-03-03T09:10:00Z", [claude_stream()])  # after an idle day
    monkeypatch.setenv("LEDGER_NOW", "2026-03-04T00:00:00Z")
    assert cli("report", "blocks").exit_code == 0  # (index and facts synced)
    from ledger.index.rawread import wrap

    c = wrap(sqlite3.connect(home / "index.sqlite"))
    checked = 0
    for minutes in range(0, 60 * 60, 25):
        now = (t0 + timedelta(minutes=minutes)).timestamp()
        full = next((b for b in blocks_doc([e for e in read_entries(c) if e["slot"] * 900 <= now], now=now)["blocks"]
                     if b["is_active"]), None)
        assert active_block(c, now) == full, minutes
        # the status line's block (summed in SQL): the same bounds and figures as the report's
        totals = active_totals(c, now)
        want = None if full is None else {k: full[k] for k in totals}
        if sqlite3.sqlite_version_info < (3, 43):  # (SUM adds in order, as sum() does)
            assert totals == want, minutes
        else:  # (SQLite 3.43's SUM compensates its rounding: the last digits may differ)
            assert _approx(totals) == want, minutes
        assert totals is None or set(totals) == {"start", "end", "is_active", *TOKENS, "total_tokens", "cost_usd",
                                                 "cost_usd_known", "cost_basis", "burn_rate", "projection"}
        checked += full is not None
    assert checked > 50


def test_no_active_block_without_recent_entries(home, monkeypatch):
    import sqlite3

    from ledger.index.rawread import wrap
    from ledger.report.blocks import active_block, active_totals

    make(home, "2026-03-01T10:00:00Z", [claude_stream()])
    assert cli("report", "blocks").exit_code == 0
    c = wrap(sqlite3.connect(home / "index.sqlite"))
    from datetime import datetime

    assert active_block(c, datetime.fromisoformat("2026-03-02T10:00:00+00:00").timestamp()) is None
    assert active_block(c, datetime.fromisoformat("2026-02-01T10:00:00+00:00").timestamp()) is None
    assert active_block(c, datetime.fromisoformat("2026-03-01T14:59:00+00:00").timestamp())["entries"] == 1
    for at in ("2026-03-02T10:00:00+00:00", "2026-02-01T10:00:00+00:00"):
        assert active_totals(c, datetime.fromisoformat(at).timestamp()) is None


def _samples(home: Path, lines: list) -> None:
    (home / "statusline").mkdir(parents=True, exist_ok=True)
    with open(home / "statusline" / "rate-limits.jsonl", "w") as f:
        for line in lines:
            f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")


def _at(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_each_block_shows_the_official_limits_sampled_in_it(home, monkeypatch):
    _records(home)
    monkeypatch.setenv("LEDGER_NOW", "2026-03-02T12:30:00Z")
    five = lambda used, reset: {"used_percentage": used, "resets_at": reset}  # noqa: E731
    _samples(home, [
        {"at": _at("2026-03-01T16:50:00Z"), "rate_limits": {"five_hour": five(20, _at("2026-03-01T21:00:00Z")),
                                                            "seven_day": five(5, "2026-03-06T00:00:00Z")}},
        {"at": _at("2026-03-01T17:30:00Z"), "rate_limits": {"five_hour": five(35, _at("2026-03-01T21:00:00Z") * 1000)}},
        {"at": _at("2026-03-01T20:59:00Z"), "rate_limits": {"five_hour": five(30, None)}},
        {"at": _at("2026-03-01T21:00:00Z"), "rate_limits": {"five_hour": five(99, None)}},   # the block's end: not in it
        {"at": _at("2026-02-25T12:00:00Z"), "rate_limits": {"five_hour": five(77, None)}},   # in a gap: no block's
        "garbage", "[1]", '{"at": "x", "rate_limits": {}}', '{"at": 1, "rate_limits": {"five_hour": {"used_percentage": true}}}',
        '{"at": NaN, "rate_limits": {"five_hour": {"used_percentage": 1}}}',
        {"at": _at("2026-03-02T11:00:00Z"), "rate_limits": {"five_hour": five(50, "2026-03-02T15:00:00Z"),
                                                            "seven_day": five(9.5, "2026-03-06T00:00:00Z"),
                                                            "seven_day_opus": five(float("nan"), None), "bad": 3}},
    ])
    blocks = {b["start"]: b for b in _blocks()["blocks"]}
    assert blocks["2026-02-20T09:00:00.000Z"]["rate_limits"] is None
    assert blocks["2026-03-01T16:00:00.000Z"]["rate_limits"] == {
        "five_hour": {"max_used_percentage": 35.0, "resets_at": "2026-03-01T21:00:00.000Z", "samples": 3},
        "seven_day": {"max_used_percentage": 5.0, "resets_at": "2026-03-06T00:00:00.000Z", "samples": 1}}
    assert blocks["2026-03-02T10:00:00.000Z"]["rate_limits"] == {
        "five_hour": {"max_used_percentage": 50.0, "resets_at": "2026-03-02T15:00:00.000Z", "samples": 1},
        "seven_day": {"max_used_percentage": 9.5, "resets_at": "2026-03-06T00:00:00.000Z", "samples": 1}}
    assert all(b["rate_limits"] is None for b in blocks.values() if b["is_gap"])
    csv = cli("report", "blocks", "--csv").stdout.splitlines()
    assert csv[0].endswith(",models,five_hour_max_used_percentage,seven_day_max_used_percentage")
    assert [line.rsplit(",", 2)[1:] for line in csv[1:]] == [["", ""], ["", ""], ["35.0", "5.0"], ["", ""], ["50.0", "9.5"]]
    monkeypatch.setenv("COLUMNS", "80")
    out = cli("report", "blocks").stdout
    table = out.splitlines()
    assert "5h used" in out and max(map(len, table)) <= 80
    assert "Active block: 2,717 tokens/h, $0.00/h (reported)" in table
    assert [line.split()[-1] for line in table if line.startswith(" 2026-03-0") and "gap" not in line] == ["35%", "50%"]
    assert out.splitlines()[-3:] == [
        "Official limits, block of 2026-03-02 10:00 (`ledger statusline`'s samples):",
        "  5h: 50% used at most, resets 2026-03-02 15:00 UTC", "  7d: 9.5% used at most, resets 2026-03-06 00:00 UTC"]


def test_blocks_without_samples_show_no_limit(home, monkeypatch):
    _records(home)
    monkeypatch.setenv("LEDGER_NOW", "2026-03-02T12:30:00Z")
    assert all(b["rate_limits"] is None for b in _blocks()["blocks"])
    out = cli("report", "blocks").stdout
    assert "5h used" not in out and "Official limits" not in out


def test_the_status_lines_block_is_report_blocks_active(home, monkeypatch, db_url):
    """`ledger statusline`'s block (ledger.report.blocks.active_totals, summed in SQL) is
    `report blocks --active --json`'s block, on SQLite and PostgreSQL, partial cost included."""
    from ledger.cli.statusline_cmd import _figures

    _records(home)
    make(home, "2026-03-02T11:50:00Z", [claude_stream(model="acme-proxy-model-1", final=False,
                                                      counters={"cost_usd": None})], model="acme-proxy-model-1")
    monkeypatch.setenv("LEDGER_NOW", "2026-03-02T12:30:00Z")
    want = _blocks("--active", "--db", db_url)["blocks"][0]
    got = _figures({"session_id": None}, home, db_url)["block"]
    assert want["cost_basis"] == "partial" and want["cost_usd_known"] > 0
    assert _approx(got) == {k: want[k] for k in got}
    assert got["total_tokens"] == want["total_tokens"] and got["cost_basis"] == want["cost_basis"]
