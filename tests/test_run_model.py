"""A run launched without `--model` takes its model from its usage streams (issue 12), the
same in the records path (`read_run`) and the index (`ledger runs`, `runs_v`)."""

from __future__ import annotations

import json
from pathlib import Path

from indexhelpers import cli
from launchkit import replay, stream_bytes
from ledger.records import RunCapture, read_run


def _sql_models(home) -> dict[str, str | None]:
    res = cli("sql", "SELECT run_id, model FROM runs_v", "--json", "--home", str(home))
    assert res.exit_code == 0, res.output
    return {r["run_id"]: r["model"] for r in json.loads(res.stdout)}


def _runs_models(home) -> dict[str, str | None]:
    res = cli("runs", "--json", "--all", "--home", str(home))
    assert res.exit_code == 0, res.output
    return {r["id"]: r["model"] for r in json.loads(res.stdout)}


def test_a_claude_run_without_model_is_named_by_its_stream(home, tmp_path):
    result, snap = replay(home, tmp_path, "claude", stream_bytes("claude-tool-then-answer.jsonl"))
    # the launch named none, so the record's manifest has none; the run's result (run --json)
    # names the run's model as the record reader does (issue 26: run says what runs says)
    manifest = json.loads((Path(result.path) / "manifest.json").read_text())
    assert manifest["model"] is None
    assert result.model == "claude-sonnet-4-5"
    assert snap.model == "claude-sonnet-4-5"
    assert _runs_models(home) == {result.run_id: "claude-sonnet-4-5"}
    assert _sql_models(home) == {result.run_id: "claude-sonnet-4-5"}


def test_the_main_model_wins_and_a_named_model_is_kept(home):
    def run(model, streams):
        with RunCapture(home, harness="claude", model=model, env={}) as cap:
            a = cap.start_attempt("anthropic", model)
            for i, (m, inp, out) in enumerate(streams):
                s = cap.usage_stream(provider="anthropic", model=m, attempt_key=a, turn_key=f"turn-{i}")
                s.observe({"input_tokens": inp, "output_tokens": out})
            cap.emit("result", outcome="completed", duration_secs=1.0)
        return cap.run_id

    # the subagent's model is seen first and more often; the main one has the most tokens
    mixed = run(None, [("claude-haiku-4-5", 100, 10), ("claude-haiku-4-5", 100, 10), ("claude-opus-4-1", 150, 90)])
    tie = run(None, [("b-model", 10, 0), ("a-model", 5, 5)])
    named = run("claude-sonnet-4-5", [("claude-opus-4-1", 1000, 1000)])
    plain = run(None, [])
    expected = {mixed: "claude-opus-4-1", tie: "a-model", named: "claude-sonnet-4-5", plain: None}
    from ledger.records.ids import run_dir

    assert {rid: read_run(run_dir(home, rid)).model for rid in expected} == expected
    assert _runs_models(home) == expected
    assert _sql_models(home) == expected
