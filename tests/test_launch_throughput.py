"""A fast child is not held back and nothing it prints is lost (the full-size measurement,
200,000 lines, is `python scripts/bench.py launch`; numbers in docs/benchmarks.md)."""

from __future__ import annotations

import importlib.util
import json
import sys

from launchkit import REPO
from ledger.launch.runner import RunOptions, launch
from ledger.records import read_run


def _generator_source() -> str:
    spec = importlib.util.spec_from_file_location("bench_launch", REPO / "scripts" / "bench_launch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod.GENERATOR


def test_fast_claude_shaped_stream_loses_no_usage(home, tmp_path, monkeypatch):
    gen = tmp_path / "gen.py"
    gen.write_text(_generator_source())
    report = tmp_path / "child.json"
    monkeypatch.setenv("BENCH_CHILD_REPORT", str(report))
    lines = 20_000
    result = launch(RunOptions(argv=[sys.executable, str(gen), str(lines)], home=home, harness="claude",
                               progress=False, capture_bytes=256 * 1024))
    child = json.loads(report.read_text())
    snap = read_run(result.path)
    u = snap.usage
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) == (
        child["input"], child["output"], child["cache_read"], child["cache_write"])
    assert u.final_streams == 1 and snap.evidence_gaps == 0 and snap.outcome == "completed"
    assert result.evidence == "verified" and snap.final_answer == "done"
    assert snap.tool_uses == {"Bash": lines // 2}
    assert result.raw_stream["truncated"] and result.raw_stream["total_lines"] == child["lines"]
