"""`ledger verify` re-hashes bound evidence files and reports damaged records."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from typer.testing import CliRunner

from ledger.cli.app import app
from ledger.records import RunCapture


def _run(home, *args):
    cmd, *rest = args  # --home goes before `--` so `ledger run` does not pass it to the child
    return subprocess.run([sys.executable, "-m", "ledger", cmd, "--home", str(home), *rest],
                          capture_output=True, text=True, timeout=60)


def test_verify_clean_run_then_tampered_stream_is_reported(tmp_path):
    home = tmp_path / "h"
    r = _run(home, "run", "--", sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)")
    assert r.returncode == 0, r.stderr
    ok = _run(home, "verify", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["problems"] == []
    run_dir = next((home / "runs").glob("*/run_*"))
    tail = run_dir / "streams" / "stderr-tail.txt"
    assert tail.exists()
    with open(tail, "ab") as f:
        f.write(b"tampered")
    bad = _run(home, "verify", "--json")
    assert bad.returncode == 1
    doc = json.loads(bad.stdout)
    assert doc["ok"] == 0
    assert any("stderr-tail.txt" in p for p in doc["problems"][0]["problems"])


def test_verify_lists_unreadable_record_and_keeps_going(tmp_path):
    home = tmp_path / "h"
    good = RunCapture(home, harness="command")
    good.settle("completed")
    bad = RunCapture(home, harness="command")
    bad.settle("completed")
    with open(bad.path / "events.jsonl", "ab") as f:
        f.write(b"{not json}\n")
    result = CliRunner().invoke(app, ["verify", "--home", str(home), "--json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["runs"] == 2 and doc["ok"] == 1
    (problem,) = doc["problems"]
    assert problem["path"] == os.fspath(bad.path)
    assert "line 1" in problem["problems"][0]
