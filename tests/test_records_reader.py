"""Reading records: scan over damage, manifest checks, a hand-built Loopflow record, liveness."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

import recordkit as rk
from ledger.errors import RecordError
from ledger.records import RunSnapshot, ScanProblem, publish_run, read_manifest, read_run, scan
from ledger.records.liveness import boot_id, hostname, process_start_ticks


def scan_split(home):
    snaps, problems = [], []
    for item in scan(home):
        assert isinstance(item, (RunSnapshot, ScanProblem))
        (problems if isinstance(item, ScanProblem) else snaps).append(item)
    return snaps, problems


# --- one broken record never hides the others -----------------------------------------

def test_malformed_complete_line_skips_only_that_record(home):
    good1 = rk.write_record(home, events=rk.golden_events(), term=rk.terminal())
    bad_events = rk.events_bytes(rk.golden_events()[:4]) + b"{oops}\n" + rk.events_bytes(rk.golden_events()[4:])
    bad = rk.write_record(home, events=bad_events)
    good2 = rk.write_record(home, events=[])
    snaps, problems = scan_split(home)
    assert sorted(s.id for s in snaps) == sorted([good1.name, good2.name])
    assert len(problems) == 1
    assert problems[0].path == str(bad / "events.jsonl")
    assert "line 5" in problems[0].reason
    assert problems[0].to_dict() == {"path": problems[0].path, "reason": problems[0].reason}


def test_unsupported_manifest_schema_names_the_version(home):
    rid = rk.new_id()
    d = rk.write_record(home, rid, schema_version=2)
    ok = rk.write_record(home)
    snaps, problems = scan_split(home)
    assert [s.id for s in snaps] == [ok.name]
    assert problems[0].path == str(d / "manifest.json")
    assert problems[0].reason == "unsupported Run manifest schema 2; expected 1"
    with pytest.raises(RecordError) as info:
        read_manifest(d)
    assert "unsupported Run manifest schema 2; expected 1" in info.value.message
    assert info.value.hint


def test_identity_mismatch_run_id_differs_from_directory(home):
    d = rk.write_record(home, rk.new_id())
    m = json.loads((d / "manifest.json").read_bytes())
    other = rk.new_id()
    m["run_id"] = other[:4] + d.name[4:6] + other[6:]  # same shard, different id
    (d / "manifest.json").write_bytes(rk.pretty(m))
    _, problems = scan_split(home)
    assert [p.reason for p in problems] == ["Run manifest identity does not match its record path"]


def test_identity_mismatch_wrong_shard_directory(home):
    d = rk.write_record(home, "run_ab" + "0" * 30)
    wrong = home / "runs" / "cd"
    wrong.mkdir(mode=0o700)
    shutil.move(str(d), str(wrong / d.name))
    _, problems = scan_split(home)
    assert [p.reason for p in problems] == ["Run manifest identity does not match its record path"]
    with pytest.raises(RecordError, match="Run manifest identity does not match its record path"):
        read_run(wrong / d.name)


def test_identity_mismatch_invalid_run_id_in_manifest(home):
    d = home / "runs" / "ab" / "run_abc"
    d.mkdir(parents=True)
    (d / "manifest.json").write_bytes(rk.pretty(rk.manifest("run_abc")))
    _, problems = scan_split(home)
    assert [p.reason for p in problems] == ["Run manifest identity does not match its record path"]


@pytest.mark.parametrize("damage", [
    "missing", "not-json", "array", "no-created_at", "bad-created_at", "created_at-out-of-range",
    "subjects-missing", "subjects-not-list", "subject-without-selector", "model-not-string",
    "schema-true", "manifest-is-dir", "manifest-is-fifo",
])
def test_damaged_manifest_is_a_scan_problem_with_a_reason(home, damage):
    rid = rk.new_id()
    m = rk.manifest(rid)
    d = rk.write_record(home, rid)
    mp = d / "manifest.json"
    if damage == "missing":
        mp.unlink()
    elif damage == "not-json":
        mp.write_bytes(b"{\n")
    elif damage == "array":
        mp.write_bytes(b"[]")
    elif damage == "manifest-is-dir":
        mp.unlink()
        mp.mkdir()
    elif damage == "manifest-is-fifo":
        mp.unlink()
        os.mkfifo(mp)  # must not hang the scan
    else:
        if damage == "no-created_at":
            del m["created_at"]
        elif damage == "bad-created_at":
            m["created_at"] = "yesterday"
        elif damage == "created_at-out-of-range":
            m["created_at"] = "9999-12-31T23:30:00-05:00"
        elif damage == "subjects-missing":
            del m["subjects"]
        elif damage == "subjects-not-list":
            m["subjects"] = "task:1"
        elif damage == "subject-without-selector":
            m["subjects"] = [{"source": "declared"}]
        elif damage == "model-not-string":
            m["model"] = 5
        elif damage == "schema-true":
            m["schema_version"] = True
        mp.write_bytes(rk.pretty(m))
    ok = rk.write_record(home)
    snaps, problems = scan_split(home)
    assert [s.id for s in snaps] == [ok.name]
    assert len(problems) == 1 and problems[0].reason and problems[0].path.startswith(str(d))


def test_scan_skips_staging_and_non_directories(home):
    ok = rk.write_record(home)
    shard = ok.parent
    (shard / (".%s.staging" % rk.new_id())).mkdir()
    (shard / "run_stray_file").write_text("x")
    (home / "runs" / "README").write_text("x")
    (home / "runs" / ".tmp").mkdir()
    snaps, problems = scan_split(home)
    assert [s.id for s in snaps] == [ok.name] and problems == []


def test_scan_of_missing_or_odd_home_yields_nothing(tmp_path):
    assert list(scan(tmp_path / "nope")) == []
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "runs").write_text("a file where runs/ should be")
    assert list(scan(tmp_path / "h")) == []


def test_events_fifo_is_a_problem_not_a_hang(home):
    d = rk.write_record(home, events=None)
    os.mkfifo(d / "events.jsonl")
    _, problems = scan_split(home)
    assert len(problems) == 1 and "events.jsonl" in problems[0].path


def test_terminal_that_is_not_a_regular_file_is_a_gap(home):
    d = rk.write_record(home, events=[])
    os.mkfifo(d / "terminal.json")
    snap = read_run(d)
    assert snap.evidence_gaps == 1 and snap.outcome is None


def test_events_jsonl_directory_reads_as_no_events(home):
    d = rk.write_record(home, events=None)
    (d / "events.jsonl").mkdir()
    snap = read_run(d)
    assert snap.usage.streams == 0 and snap.evidence_gaps == 0


# --- a record built by hand from the spec, as Loopflow writes it --------------------------

def test_handbuilt_loopflow_record_reads_back(home):
    rid = "run_" + "5e" + "0123456789abcdef0123456789abcd"
    parent = rk.new_id()
    ctx = rk.pretty(rk.context_doc(system=None, task="Fix the flaky test in LOO-265"))
    d = home / "runs" / "5e" / rid
    d.mkdir(parents=True, mode=0o700)
    (d / "context.json").write_bytes(ctx)
    manifest = {
        "schema_version": 1,
        "run_id": rid,
        "parent_run_id": parent,
        "created_at": "2026-03-08T01:30:00-05:00",
        "harness": "codex",
        "model": "gpt-5-codex",
        "surface": "headless",
        "cwd": "/home/u/src/app",
        "repo": "/home/u/src/app",
        "worktree": "/home/u/src/app-wt",
        "skill": "fix-flaky",
        "subjects": [{"selector": "task:LOO-265", "source": "declared"},
                     {"selector": "pr:42", "source": "inherited"}],
        "flow": {"kind": "independent"},
        "launch": {"system_prompt": "", "task_prompt": "Fix the flaky test in LOO-265", "agent": "codex",
                   "account_id": None, "max_turns": 30, "write_scope": "worktree",
                   "execution_boundary": None, "skip_permissions": False, "chrome": False},
        "context": {"path": "context.json", "content_sha256": hashlib.sha256(ctx).hexdigest(), "bytes": len(ctx)},
        "runtime_path": "/usr/local/bin/lf",
        "runtime_digest": "sha256:abc",
        "host": "build-box-7",
        "boot_id": "8c1d8e0a-0000-4000-8000-000000000000",
    }
    (d / "manifest.json").write_bytes(json.dumps(manifest, indent=2).encode())
    stream = "attempt-1/turn-1/gpt-5-codex"
    events = [
        rk.envelope(0, "provider_attempt_started", "2026-03-08T06:30:00.000000001Z", provider="openai",
                    model="gpt-5-codex", account_id=None, attempt_key="attempt-1"),
        rk.envelope(2, "provider_session_observed", attempt_key="attempt-1", provider_session_id="th_123"),
        rk.envelope(3, "conversation", event={"type": "turn_started", "turn_id": "t1"}),
        rk.envelope(5, "tool_use", name="shell", summary="pytest -x"),
        rk.envelope(6, "usage", usage_stream_id=stream, provider="openai", model="gpt-5-codex",
                    attempt_key="attempt-1", turn_key="turn-1", observation_seq=1, counter_kind="cumulative",
                    start_known=True, final_receipt=False,
                    usage={"input_tokens": 900, "cache_read_tokens": 100, "total_input_tokens": 1000,
                           "output_tokens": 40, "reasoning_tokens": 10, "model": "gpt-5-codex"}),
        rk.envelope(9, "conversation", event={"type": "item_completed", "turn_id": "t1",
                                              "item": {"type": "message", "text": "Fixed it.", "phase": "final_answer"}}),
        rk.envelope(10, "usage", usage_stream_id=stream, provider="openai", model="gpt-5-codex",
                    attempt_key="attempt-1", turn_key="turn-1", observation_seq=2, counter_kind="cumulative",
                    start_known=True, final_receipt=True,
                    usage={"input_tokens": 1800, "cache_read_tokens": 300, "total_input_tokens": 2100,
                           "output_tokens": 95, "reasoning_tokens": 30, "cost_usd": 0.0123, "model": "gpt-5-codex"}),
        rk.envelope(11, "conversation", event={"type": "turn_completed", "turn_id": "t1", "status": "completed"}),
        rk.envelope(12, "result", outcome="completed", duration_secs=41.2),
        rk.envelope(20, "provider_attempt_finished", attempt_key="attempt-1", outcome="completed"),
    ]
    (d / "events.jsonl").write_bytes(rk.events_bytes(events))
    (d / "terminal.json").write_bytes(json.dumps(
        {"schema_version": 1, "outcome": "completed", "ended_at": "2026-03-08T01:31:00.987654321-05:00",
         "result_ref": None}, indent=2).encode())

    snap = read_run(d)
    assert snap.id == rid and snap.parent_run_id == parent
    assert snap.started == "2026-03-08T06:30:00.000000Z"
    assert snap.ended == "2026-03-08T06:31:00.987654Z"
    assert snap.outcome == "completed" and snap.state == "settled"
    assert snap.evidence_gaps == 0
    assert (snap.harness, snap.model, snap.surface, snap.skill) == ("codex", "gpt-5-codex", "headless", "fix-flaky")
    assert (snap.repo, snap.worktree, snap.cwd, snap.host) == (
        "/home/u/src/app", "/home/u/src/app-wt", "/home/u/src/app", "build-box-7")
    assert [(s.selector, s.source) for s in snap.subjects] == [("task:LOO-265", "declared"), ("pr:42", "inherited")]
    u = snap.usage
    assert (u.streams, u.final_streams, u.gaps) == (1, 1, 0)
    assert (u.input_tokens, u.cache_read_tokens, u.total_input_tokens, u.output_tokens, u.reasoning_tokens) == (
        1800, 300, 2100, 95, 30)
    assert u.cost_usd == 0.0123 and u.cache_write_tokens is None
    assert snap.provider_session_id == "th_123"
    assert snap.final_answer == "Fixed it."
    assert snap.tool_uses == {"shell": 1}
    assert snap.attempts[0]["outcome"] == "completed"
    d_json = snap.to_dict()
    assert d_json["subjects"] == ["task:LOO-265", "pr:42"] and d_json["usage"]["gaps"] == 0
    json.dumps(d_json)


def test_provider_session_file_wins_over_events(home):
    d = rk.write_record(home, events=[rk.envelope(0, "provider_session_observed", attempt_key="a",
                                              provider_session_id="from-events")])
    assert read_run(d).provider_session_id == "from-events"
    (d / "provider-session.json").write_bytes(rk.pretty(
        {"schema_version": 1, "provider_session_id": "from-file", "account_id": None}))
    assert read_run(d).provider_session_id == "from-file"


def test_final_answer_rules(home):
    def conv(seq, **event):
        return rk.envelope(seq, "conversation", event=event)
    evs = [
        conv(0, type="text_delta", turn_id="a", delta="stream"), conv(1, type="text_delta", turn_id="a", delta="ed"),
        conv(2, type="turn_completed", turn_id="a", status="completed"),
    ]
    snap = read_run(rk.write_record(home, events=evs))
    assert snap.final_answer == "streamed"  # deltas only (inexact)
    evs += [
        conv(3, type="item_completed", turn_id="b", item={"type": "message", "text": "plain"}),
        conv(4, type="item_completed", turn_id="b", item={"type": "message", "text": "FINAL", "phase": "final_answer"}),
        conv(5, type="item_completed", turn_id="b", item={"type": "message", "text": "note", "phase": "commentary"}),
        conv(6, type="turn_completed", turn_id="b", status="completed"),
        conv(7, type="item_completed", turn_id="c", item={"type": "message", "text": "failed turn"}),
        conv(8, type="turn_completed", turn_id="c", status="failed"),
    ]
    snap = read_run(rk.write_record(home, events=evs))
    assert snap.final_answer == "FINAL"  # final_answer phase wins; a failed later turn does not count


# --- forward compatibility ---------------------------------------------------------------

def test_unknown_manifest_and_event_fields_are_ignored(home):
    plain = read_run(rk.write_record(home, events=rk.golden_events(), term=rk.terminal()))
    evs = []
    for ev in rk.golden_events():
        ev = {**ev, "future_envelope_field": {"x": [1, 2]}, "trace_id": "abc"}
        if ev["type"] == "usage":
            ev["usage"] = {**ev["usage"], "future_counter": 7, "web_search_requests": 2}
            ev["usage_origin"] = "provider"
        evs.append(ev)
    rid = rk.new_id()
    term = {**rk.terminal(), "future": True}
    d = rk.write_record(home, rid, events=evs, term=term, flow={"kind": "step", "step": {}},
                    future_manifest_field=[1, 2, 3], launcher_v2={"pid": 1})
    snap = read_run(d)
    assert snap.usage == plain.usage and snap.evidence_gaps == 0
    assert snap.outcome == "completed"


def test_missing_optional_manifest_fields_read_as_null(home):
    rid = rk.new_id()
    m = {"schema_version": 1, "run_id": rid, "created_at": "2026-03-08T06:30:00Z", "harness": "command",
         "surface": "headless", "cwd": "/", "host": "h", "subjects": []}
    d = rk.write_record(home, rid, manifest_bytes=rk.pretty(m))
    snap = read_run(d)
    assert (snap.model, snap.repo, snap.worktree, snap.skill, snap.parent_run_id) == (None,) * 5
    assert snap.subjects == []


# --- liveness ----------------------------------------------------------------------------

def _write_launcher(d, **launcher):
    m = json.loads((d / "manifest.json").read_bytes())
    m.update(host=hostname(), boot_id=boot_id(), launcher=launcher)
    (d / "manifest.json").write_bytes(rk.pretty(m))


def test_liveness_own_live_pid_is_running(home):
    m = publish_run(home, harness="command", env={})
    snap = read_run(rk.record_dir(home, m.run_id))
    assert snap.state == "running" and snap.outcome is None


def test_liveness_dead_launcher_pid_is_abandoned(home):
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    d = rk.write_record(home)
    _write_launcher(d, pid=p.pid, start_ticks=None)
    assert read_run(d).state == "abandoned"


def test_liveness_sigkilled_launcher_is_abandoned(home):
    script = textwrap.dedent(f"""
        import sys, time
        from ledger.records import RunCapture
        run = RunCapture({str(home)!r}, harness="command", env={{}})
        print(run.path, flush=True)
        time.sleep(60)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        path = p.stdout.readline().strip()
        assert read_run(path).state == "running"
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    finally:
        p.kill()
        p.stdout.close()
    snap = read_run(path)
    assert snap.state == "abandoned" and snap.outcome is None


def test_liveness_reused_pid_is_abandoned(home):
    d = rk.write_record(home)
    _write_launcher(d, pid=os.getpid(), start_ticks=process_start_ticks(os.getpid()) + 1)
    assert read_run(d).state == "abandoned"


def test_liveness_other_boot_is_abandoned(home):
    d = rk.write_record(home)
    _write_launcher(d, pid=os.getpid(), start_ticks=process_start_ticks(os.getpid()))
    assert read_run(d).state == "running"
    m = json.loads((d / "manifest.json").read_bytes())
    m["boot_id"] = "00000000-0000-4000-8000-000000000000"
    (d / "manifest.json").write_bytes(rk.pretty(m))
    assert read_run(d).state == "abandoned"


def test_liveness_another_host_is_unknown(home):
    d = rk.write_record(home)
    _write_launcher(d, pid=os.getpid(), start_ticks=None)
    m = json.loads((d / "manifest.json").read_bytes())
    m["host"] = "some-other-host.example"
    (d / "manifest.json").write_bytes(rk.pretty(m))
    assert read_run(d).state == "unknown"


@pytest.mark.parametrize("launcher", [None, {}, {"pid": "12"}, {"pid": True}, {"pid": -5}])
def test_liveness_without_a_usable_launcher_is_unknown(home, launcher):
    d = rk.write_record(home)
    m = json.loads((d / "manifest.json").read_bytes())
    m.update(host=hostname(), boot_id=boot_id(), launcher=launcher)
    (d / "manifest.json").write_bytes(rk.pretty(m))
    assert read_run(d).state == "unknown"


def test_liveness_settled_run_is_settled(home):
    d = rk.write_record(home, term=rk.terminal("failed"))
    snap = read_run(d)
    assert snap.state == "settled" and snap.outcome == "failed"


def test_start_ticks_of_this_process_are_known():
    assert process_start_ticks(os.getpid()) is not None
    assert process_start_ticks(2**22 + 12345) is None  # above pid_max: no such process


def test_small_record_files_past_one_read_or_not_regular(home):
    """Manifest / receipt / provider session are read in one go when small; bigger ones are
    read on, and a device in their place is refused, never read forever."""
    big = rk.write_record(home, launch={"argv": ["x" * 200_000]}, term=rk.terminal())  # manifest > 64 KiB
    assert (big / "manifest.json").stat().st_size > 200_000
    snap = read_run(big)
    assert snap.id == big.name and snap.outcome == "completed"
    dev = rk.write_record(home, events=[])
    (dev / "terminal.json").symlink_to("/dev/zero")
    assert read_run(dev).evidence_gaps == 1  # an unreadable receipt: one gap
    (dev / "manifest.json").unlink()
    (dev / "manifest.json").symlink_to("/dev/urandom")
    snaps, problems = scan_split(home)
    assert [s.id for s in snaps] == [big.name]
    assert len(problems) == 1 and "not a regular file" in problems[0].reason
