"""Writing records: publish, events, usage streams, settlement, capture lifecycle, secrets, modes."""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
import types
from pathlib import Path

import pytest

import recordkit as rk
from ledger.errors import LedgerError, SettlementConflict
from ledger.records import (
    EventWriter, Interrupted, RunCapture, publish_run, read_manifest, read_run, scan, settle, write_blob,
    write_provider_session,
)
from ledger.records import writer as writer_mod
from ledger.records.model import INT_COUNTERS
from ledger.records.timefmt import parse_rfc3339

SPEC_MANIFEST_KEYS = {"schema_version", "run_id", "parent_run_id", "created_at", "harness", "model", "surface",
                      "cwd", "repo", "worktree", "skill", "subjects", "launch", "context", "runtime_path",
                      "runtime_digest", "host", "boot_id"}
SPEC_LAUNCH_KEYS = {"system_prompt", "task_prompt", "agent", "account_id", "max_turns", "write_scope",
                    "execution_boundary", "skip_permissions", "chrome"}


def terminal_of(path):
    return json.loads((path / "terminal.json").read_bytes())


# --- publish ------------------------------------------------------------------------------

def test_publish_writes_a_spec_manifest_atomically(home):
    m = publish_run(home, harness="claude", model="claude-sonnet-4-5", subjects=["task:LOO-1"], env={},
                    cwd="/tmp", repo="/repo", skill="review")
    d = rk.record_dir(home, m.run_id)
    raw = (d / "manifest.json").read_bytes()
    doc = json.loads(raw)
    assert SPEC_MANIFEST_KEYS <= set(doc)
    assert raw.startswith(b'{\n  "')  # pretty JSON, like Loopflow
    assert doc["schema_version"] == 1 and doc["run_id"] == m.run_id == d.name
    assert doc["subjects"] == [{"selector": "task:LOO-1", "source": "declared"}]
    assert doc["created_at"].endswith("Z") and parse_rfc3339(doc["created_at"])
    assert doc["launch"] is None and doc["context"] is None and doc["parent_run_id"] is None
    assert sorted(os.listdir(d.parent)) == [d.name]  # no staging left behind
    assert read_manifest(d).run_id == m.run_id


def test_publish_failure_leaves_no_run_and_no_staging(home):
    with pytest.raises(TypeError):
        publish_run(home, harness="command", env={}, context={"unserialisable": object()})
    assert [p for p in rk.all_files(home)] == []
    assert list(scan(home)) == []


def test_publish_context_is_bound_by_sha256_and_bytes(home):
    ctx = rk.context_doc()["context"]
    m = publish_run(home, harness="claude", env={}, context=ctx)
    d = rk.record_dir(home, m.run_id)
    data = (d / "context.json").read_bytes()
    assert m.context == {"path": "context.json", "content_sha256": hashlib.sha256(data).hexdigest(),
                         "bytes": len(data)}
    assert json.loads(data) == {"schema_version": 1, "context": ctx}
    assert read_run(d).evidence_gaps == 0


def test_two_runs_about_one_subject_keep_distinct_ids(home):
    with RunCapture(home, harness="claude", subjects=["task:LOO-265"], env={}) as a:
        pass
    with RunCapture(home, harness="claude", subjects=["task:LOO-265"], env={}) as b:
        pass
    assert a.run_id != b.run_id and a.path != b.path
    snaps = [s for s in scan(home)]
    assert sorted(s.id for s in snaps) == sorted([a.run_id, b.run_id])
    assert all([x.selector for x in s.subjects] == ["task:LOO-265"] for s in snaps)


# --- events -------------------------------------------------------------------------------

def test_events_are_compact_lines_with_seq_from_zero(home):
    with RunCapture(home, harness="command", env={}) as run:
        for i in range(5):
            run.emit("text", text=f"line {i}")
    raw = (run.path / "events.jsonl").read_bytes()
    lines = raw.split(b"\n")
    assert lines[-1] == b"" and len(lines) == 6
    evs = [json.loads(x) for x in lines[:-1]]
    assert [e["seq"] for e in evs] == [0, 1, 2, 3, 4]
    for line, e in zip(lines, evs):
        assert b"\n" not in line and b": " not in line  # compact
        assert e["schema_version"] == 1 and e["type"] == "text"
        assert e["observed_at"].endswith("Z") and parse_rfc3339(e["observed_at"])


def test_concurrent_emitters_keep_seq_strictly_increasing_on_disk(home):
    run = RunCapture(home, harness="command", env={})
    def worker(n):
        for i in range(400):
            run.emit("text", text=f"{n}-{i}")
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run.settle("completed")
    seqs = [e["seq"] for e in rk.read_events(run.path)]
    assert len(seqs) == 3200 and seqs == sorted(set(seqs))
    assert read_run(run.path).evidence_gaps == 0


def test_events_jsonl_made_a_directory_still_settles_and_logs_once(home, caplog):
    m = publish_run(home, harness="command", env={})
    d = rk.record_dir(home, m.run_id)
    (d / "events.jsonl").mkdir()
    with caplog.at_level(logging.WARNING, logger="ledger.records"):
        w = EventWriter(d)
        for i in range(50):
            assert w.emit("text", text=str(i)) == i  # never raises, never blocks
        w.close()
    assert w.failed and w.dropped == 50
    assert settle(d, "completed") is True
    assert terminal_of(d)["outcome"] == "completed"
    warnings = [r for r in caplog.records if r.name == "ledger.records" and r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "events.jsonl" in warnings[0].getMessage()
    assert read_run(d).outcome == "completed"


def test_capture_whose_events_path_is_a_directory_still_settles(home, caplog, monkeypatch):
    real = writer_mod.publish_run

    def publish_then_break(home_, **kw):
        m = real(home_, **kw)
        (rk.record_dir(home_, m.run_id) / "events.jsonl").mkdir()
        return m

    monkeypatch.setattr(writer_mod, "publish_run", publish_then_break)
    with caplog.at_level(logging.WARNING, logger="ledger.records"):
        with RunCapture(home, harness="command", env={}) as run:
            st = run.usage_stream(provider="p", model="m", attempt_key=run.start_attempt("p", "m"), turn_key="t")
            for i in range(1, 20):
                st.observe({"input_tokens": i})
    assert terminal_of(run.path)["outcome"] == "completed"
    assert len([r for r in caplog.records if r.name == "ledger.records"]) == 1


def _wait_for(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_write_failure_stops_writing_so_the_record_stays_readable(home, caplog, monkeypatch):
    """A short write then ENOSPC: the partial line stays last (one torn-line gap); later
    events are dropped instead of being glued onto it (which would make the record unreadable)."""
    run = RunCapture(home, harness="command", env={})
    events = run.path / "events.jsonl"
    run.emit("text", text="first")
    _wait_for(lambda: events.exists() and events.read_bytes().endswith(b'"first"}\n'))
    calls = []

    def failing_write(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return os.write(fd, bytes(data[:10]))  # short write
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return os.write(fd, data)  # the disk has room again

    fake_os = types.SimpleNamespace(**{k: getattr(os, k) for k in dir(os) if not k.startswith("__")})
    fake_os.write = failing_write
    monkeypatch.setattr(writer_mod, "os", fake_os)
    with caplog.at_level(logging.WARNING, logger="ledger.records"):
        run.emit("text", text="second")
        _wait_for(lambda: len(calls) >= 2)
        run.emit("text", text="third")
        run.settle("failed")
    monkeypatch.undo()
    snap = read_run(run.path)  # must not raise
    assert snap.evidence_gaps == 1  # the torn 'second'
    data = events.read_bytes()
    first, torn = data.split(b"\n")
    assert json.loads(first)["text"] == "first" and torn == data[len(first) + 1:] and len(torn) == 10
    assert b"third" not in data
    assert run.events.failed and run.events.dropped == 2
    assert len([r for r in caplog.records if r.name == "ledger.records"]) == 1
    assert snap.outcome == "failed"


# --- usage streams ------------------------------------------------------------------------

def test_usage_events_omit_unknown_counters_and_start_at_observation_1(home):
    with RunCapture(home, harness="claude", env={}) as run:
        a = run.start_attempt("anthropic", "claude-sonnet-4-5")
        st = run.usage_stream(provider="anthropic", model="claude-sonnet-4-5", attempt_key=a, turn_key="turn-1")
        assert st.observe({"input_tokens": 10, "output_tokens": None, "cache_read_tokens": None}) is True
        assert st.observe({name: None for name in INT_COUNTERS}) is False  # nothing known: nothing written
        assert st.observe({}) is False
        assert st.observe({"input_tokens": 12, "output_tokens": 0, "cost_usd": 0.0}, final_receipt=True) is True
    usage = [e for e in rk.read_events(run.path) if e["type"] == "usage"]
    assert len(usage) == 2
    first, second = usage
    assert first["usage"] == {"input_tokens": 10, "model": "claude-sonnet-4-5"}  # no zeros for unknowns
    assert second["usage"] == {"input_tokens": 12, "output_tokens": 0, "cost_usd": 0.0, "model": "claude-sonnet-4-5"}
    assert [u["observation_seq"] for u in usage] == [1, 2]
    for u in usage:
        assert u["counter_kind"] == "cumulative" and u["start_known"] is True
        assert (u["provider"], u["model"], u["attempt_key"], u["turn_key"]) == (
            "anthropic", "claude-sonnet-4-5", "attempt-1", "turn-1")
        assert set(u) >= {"usage_stream_id", "final_receipt"}
    assert [u["final_receipt"] for u in usage] == [False, True]


def test_a_retry_yields_distinct_usage_streams_each_starting_at_observation_1(home):
    with RunCapture(home, harness="claude", env={}) as run:
        for _ in range(3):
            a = run.start_attempt("anthropic", "claude-sonnet-4-5")
            st = run.usage_stream(provider="anthropic", model="claude-sonnet-4-5", attempt_key=a, turn_key="turn-1")
            st.observe({"input_tokens": 5})
            st.observe({"input_tokens": 9, "output_tokens": 2})
    evs = rk.read_events(run.path)
    assert [e["attempt_key"] for e in evs if e["type"] == "provider_attempt_started"] == [
        "attempt-1", "attempt-2", "attempt-3"]
    by_stream: dict[str, list[int]] = {}
    for e in evs:
        if e["type"] == "usage":
            by_stream.setdefault(e["usage_stream_id"], []).append(e["observation_seq"])
    assert len(by_stream) == 3 and all(v == [1, 2] for v in by_stream.values())
    snap = read_run(run.path)
    assert (snap.usage.streams, snap.usage.input_tokens, snap.usage.output_tokens, snap.usage.gaps) == (3, 27, 6, 0)


def test_asking_for_the_same_stream_twice_continues_its_observation_seq(home):
    with RunCapture(home, harness="claude", env={}) as run:
        a = run.start_attempt("anthropic", "m")
        s1 = run.usage_stream(provider="anthropic", model="m", attempt_key=a, turn_key="t")
        s1.observe({"input_tokens": 1})
        s2 = run.usage_stream(provider="anthropic", model="m", attempt_key=a, turn_key="t")
        s2.observe({"input_tokens": 2})
    assert s1 is s2
    assert [e["observation_seq"] for e in rk.read_events(run.path) if e["type"] == "usage"] == [1, 2]
    assert read_run(run.path).evidence_gaps == 0


def test_observe_never_raises_on_odd_values(home):
    with RunCapture(home, harness="claude", env={}) as run:
        st = run.usage_stream(provider="p", model="m", attempt_key=run.start_attempt("p", "m"), turn_key="t")
        assert st.observe({"input_tokens": float("nan"), "output_tokens": "abc", "reasoning_tokens": 1.5,
                           "cache_read_tokens": True, "cost_usd": "n/a"}) is False
        assert st.observe({"input_tokens": 7.0, "cost_usd": float("nan")}) is True
    (u,) = [e for e in rk.read_events(run.path) if e["type"] == "usage"]
    # NaN cost is written as null (as serde_json does) and read back as one gap, cost unknown
    assert u["usage"] == {"input_tokens": 7, "cost_usd": None, "model": "m"}
    snap = read_run(run.path)
    assert snap.usage.cost_usd is None and snap.usage.gaps == 1 and snap.usage.input_tokens == 7


# --- settlement ---------------------------------------------------------------------------

def test_settle_twice_with_the_same_outcome_is_a_noop(home):
    m = publish_run(home, harness="command", env={})
    d = rk.record_dir(home, m.run_id)
    assert settle(d, "completed") is True
    before = (d / "terminal.json").read_bytes()
    st = os.stat(d / "terminal.json")
    assert settle(d, "completed") is False
    assert (d / "terminal.json").read_bytes() == before
    assert os.stat(d / "terminal.json").st_ino == st.st_ino


def test_settle_with_a_different_outcome_is_refused_and_file_unchanged(home):
    m = publish_run(home, harness="command", env={})
    d = rk.record_dir(home, m.run_id)
    settle(d, "completed")
    before = (d / "terminal.json").read_bytes()
    with pytest.raises(SettlementConflict) as info:
        settle(d, "failed")
    assert info.value.message == "Run already settled as completed; refusing failed"
    assert info.value.hint
    assert (d / "terminal.json").read_bytes() == before


def test_terminal_is_write_once_even_when_someone_else_wrote_it(home):
    m = publish_run(home, harness="command", env={})
    d = rk.record_dir(home, m.run_id)
    foreign = rk.pretty(rk.terminal("interrupted"))
    (d / "terminal.json").write_bytes(foreign)
    assert settle(d, "interrupted") is False
    with pytest.raises(SettlementConflict):
        settle(d, "completed")
    (d / "terminal.json").write_bytes(b"garbage")
    with pytest.raises(SettlementConflict, match="refusing completed"):
        settle(d, "completed")
    assert (d / "terminal.json").read_bytes() == b"garbage"


def test_terminal_format(home):
    m = publish_run(home, harness="command", env={})
    d = rk.record_dir(home, m.run_id)
    settle(d, "interrupted", ended_at="2026-03-08T06:45:10.000000Z")
    raw = (d / "terminal.json").read_bytes()
    assert raw.startswith(b'{\n  "')
    assert json.loads(raw) == {"schema_version": 1, "outcome": "interrupted",
                               "ended_at": "2026-03-08T06:45:10.000000Z", "result_ref": None}


def test_settle_refuses_an_unknown_outcome(home):
    m = publish_run(home, harness="command", env={})
    with pytest.raises(LedgerError):
        settle(rk.record_dir(home, m.run_id), "succeeded")
    assert not (rk.record_dir(home, m.run_id) / "terminal.json").exists()


# --- capture lifecycle --------------------------------------------------------------------

def test_clean_exit_settles_completed(home):
    with RunCapture(home, harness="command", env={}) as run:
        run.emit("text", text="hi")
    assert terminal_of(run.path)["outcome"] == "completed"


def test_explicit_settle_inside_the_block_is_kept(home):
    with RunCapture(home, harness="command", env={}) as run:
        assert run.settle("failed") is True
    assert terminal_of(run.path)["outcome"] == "failed"


def test_dropped_capture_settles_failed(home):
    run = RunCapture(home, harness="command", env={})
    path = run.path
    run.emit("text", text="about to be dropped")
    del run
    gc.collect()
    assert terminal_of(path)["outcome"] == "failed"
    assert [e["text"] for e in rk.read_events(path)] == ["about to be dropped"]  # flushed first


def test_exception_inside_capture_settles_failed(home):
    with pytest.raises(ValueError):
        with RunCapture(home, harness="command", env={}) as run:
            raise ValueError("boom")
    assert terminal_of(run.path)["outcome"] == "failed"


def test_keyboard_interrupt_settles_interrupted(home):
    with pytest.raises(KeyboardInterrupt):
        with RunCapture(home, harness="command", env={}) as run:
            raise KeyboardInterrupt
    assert terminal_of(run.path)["outcome"] == "interrupted"


def test_interrupted_exception_settles_interrupted(home):
    with pytest.raises(Interrupted):
        with RunCapture(home, harness="command", env={}) as run:
            raise Interrupted("signal 15")
    assert terminal_of(run.path)["outcome"] == "interrupted"


def _capture_script(home, body):
    return textwrap.dedent(f"""
        import sys, time
        from ledger.records import RunCapture
        from ledger.records.writer import sigterm_raises_interrupted
        home = {str(home)!r}
    """) + textwrap.dedent(body)


def test_sigterm_to_a_real_capture_process_settles_interrupted(home):
    script = _capture_script(home, """
        restore = sigterm_raises_interrupted()
        with RunCapture(home, harness="command", env={}) as run:
            run.emit("text", text="working")
            print(run.path, flush=True)
            time.sleep(60)
    """)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        path = p.stdout.readline().strip()
        assert path, p.stderr.read()
        p.send_signal(signal.SIGTERM)
        p.wait(20)
    finally:
        p.kill()
        p.stdout.close()
        p.stderr.close()
    assert p.returncode != 0
    assert terminal_of(Path(path))["outcome"] == "interrupted"
    assert read_run(path).state == "settled"


def test_process_exiting_without_settling_settles_failed(home):
    script = _capture_script(home, """
        run = RunCapture(home, harness="command", env={})
        run.emit("text", text="forgot to settle")
        print(run.path, flush=True)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    path = Path(out.stdout.strip())
    assert terminal_of(path)["outcome"] == "failed"
    assert [e["text"] for e in rk.read_events(path)] == ["forgot to settle"]


# --- provider session ---------------------------------------------------------------------

def test_provider_session_is_replaced_atomically(home):
    m = publish_run(home, harness="claude", env={})
    d = rk.record_dir(home, m.run_id)
    write_provider_session(d, "sess-1")
    ino1 = os.stat(d / "provider-session.json").st_ino
    write_provider_session(d, "sess-2", "acct-9")
    assert os.stat(d / "provider-session.json").st_ino != ino1  # a new file renamed over, not rewritten
    doc = json.loads((d / "provider-session.json").read_bytes())
    assert doc == {"schema_version": 1, "provider_session_id": "sess-2", "account_id": "acct-9"}
    assert sorted(os.listdir(d)) == ["manifest.json", "provider-session.json"]  # no staging left
    assert read_run(d).provider_session_id == "sess-2"


def test_provider_session_concurrent_writers_never_leave_a_torn_file(home):
    m = publish_run(home, harness="claude", env={})
    d = rk.record_dir(home, m.run_id)
    errors = []

    def worker(n):
        try:
            for i in range(30):
                write_provider_session(d, f"s-{n}-{i}")
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert json.loads((d / "provider-session.json").read_bytes())["provider_session_id"].startswith("s-")
    assert sorted(os.listdir(d)) == ["manifest.json", "provider-session.json"]


def test_capture_provider_session_writes_event_and_file(home):
    with RunCapture(home, harness="claude", env={}) as run:
        a = run.start_attempt("anthropic", "m")
        run.provider_session(a, "sess-xyz")
    evs = [e for e in rk.read_events(run.path) if e["type"] == "provider_session_observed"]
    assert evs == [{**evs[0], "attempt_key": "attempt-1", "provider_session_id": "sess-xyz"}]
    assert read_run(run.path).provider_session_id == "sess-xyz"


# --- parent inheritance -------------------------------------------------------------------

def test_parent_inherited_when_lf_run_dir_manifest_carries_lf_run_id(home):
    parent = publish_run(home, harness="claude", subjects=["task:LOO-1", "pr:7"], env={})
    pdir = rk.record_dir(home, parent.run_id)
    env = {"LF_RUN_ID": parent.run_id, "LF_RUN_DIR": str(pdir)}
    child = publish_run(home, harness="codex", subjects=["task:LOO-1", "doc:x"], env=env)
    assert child.parent_run_id == parent.run_id
    doc = json.loads((rk.record_dir(home, child.run_id) / "manifest.json").read_bytes())
    assert doc["parent_run_id"] == parent.run_id
    assert doc["subjects"] == [
        {"selector": "task:LOO-1", "source": "declared"},
        {"selector": "doc:x", "source": "declared"},
        {"selector": "pr:7", "source": "inherited"},
    ]


def test_parent_ignored_when_manifest_does_not_carry_that_id(home):
    parent = publish_run(home, harness="claude", subjects=["task:LOO-1"], env={})
    other = publish_run(home, harness="claude", env={})
    cases = [
        {"LF_RUN_ID": other.run_id, "LF_RUN_DIR": str(rk.record_dir(home, parent.run_id))},  # wrong id
        {"LF_RUN_ID": parent.run_id, "LF_RUN_DIR": str(home / "nowhere")},                # no manifest
        {"LF_RUN_ID": parent.run_id},                                                     # no dir
        {"LF_RUN_DIR": str(rk.record_dir(home, parent.run_id))},                          # no id
        {"LF_RUN_ID": "", "LF_RUN_DIR": ""},
    ]
    for env in cases:
        child = publish_run(home, harness="codex", subjects=["x:1"], env=env)
        assert child.parent_run_id is None, env
        assert [(s.selector, s.source) for s in child.subjects] == [("x:1", "declared")], env


def test_parent_ignored_when_lf_run_id_is_not_a_run_id(home):
    bogus = home / "bogus"
    bogus.mkdir(parents=True)
    (bogus / "manifest.json").write_text(json.dumps({"run_id": "evil", "subjects": [{"selector": "task:x"}]}))
    child = publish_run(home, harness="codex", env={"LF_RUN_ID": "evil", "LF_RUN_DIR": str(bogus)})
    assert child.parent_run_id is None and child.subjects == []


def test_parent_from_ledger_names_and_from_the_process_environment(home, monkeypatch):
    parent = publish_run(home, harness="claude", subjects=["task:P"], env={})
    pdir = str(rk.record_dir(home, parent.run_id))
    child = publish_run(home, harness="codex", env={"LEDGER_RUN_ID": parent.run_id, "LEDGER_RUN_DIR": pdir})
    assert child.parent_run_id == parent.run_id
    monkeypatch.setenv("LF_RUN_ID", parent.run_id)
    monkeypatch.setenv("LF_RUN_DIR", pdir)
    child2 = publish_run(home, harness="codex")  # env=None: the process environment
    assert child2.parent_run_id == parent.run_id
    assert [(s.selector, s.source) for s in child2.subjects] == [("task:P", "inherited")]
    assert read_run(rk.record_dir(home, child2.run_id)).parent_run_id == parent.run_id


# --- nothing leaks, modes -----------------------------------------------------------------

CANARIES = [
    "sk-ant-canary-0123456789abcdefghijklmnop",
    "ghp_canaryCANARYcanary0123456789abcdef",
    "resume-token-canary-7f3e",
    "Bearer canary-bearer-token-xyz",
    "hunter2-canary-password",
]


def test_no_secret_from_env_or_resume_token_is_written(home, monkeypatch):
    env = {"ANTHROPIC_API_KEY": CANARIES[0], "GITHUB_TOKEN": CANARIES[1], "HTTP_AUTH": CANARIES[3],
           "PGPASSWORD": CANARIES[4], "PATH": "/usr/bin"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    launch = {"system_prompt": "be careful", "task_prompt": "fix LOO-265", "agent": "claude",
              "account_id": None, "max_turns": 5, "write_scope": "worktree", "execution_boundary": None,
              "skip_permissions": False, "chrome": False,
              # not launch keys of the spec: must be dropped
              "resume_token": CANARIES[2], "resume": CANARIES[2], "env": env, "api_key": CANARIES[0]}
    with RunCapture(home, harness="claude", subjects=["task:LOO-265"], launch=launch, env=env,
                    context=rk.context_doc()["context"]) as run:
        a = run.start_attempt("anthropic", "claude-sonnet-4-5")
        run.provider_session(a, "sess-1")
        st = run.usage_stream(provider="anthropic", model="claude-sonnet-4-5", attempt_key=a, turn_key="t1")
        st.observe({"input_tokens": 1, "cost_usd": 0.01}, final_receipt=True)
        run.emit("result", outcome="completed", duration_secs=1.0)
    publish_run(home, harness="command", launch=launch)  # env=None: the (secret-laden) process environment
    files = rk.all_files(home)
    assert len(files) == 6  # manifest, context, events, terminal, provider-session + a manifest
    for f in files:
        data = f.read_bytes()
        for canary in CANARIES:
            assert canary.encode() not in data, (f, canary)
    doc = json.loads((run.path / "manifest.json").read_bytes())
    assert set(doc["launch"]) == SPEC_LAUNCH_KEYS
    assert doc["launch"]["task_prompt"] == "fix LOO-265"


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_modes_dirs_0700_files_0600(home, umask):
    old = os.umask(umask)
    try:
        with RunCapture(home, harness="claude", env={}, context=rk.context_doc()["context"]) as run:
            a = run.start_attempt("anthropic", "m")
            run.provider_session(a, "sess")
            run.usage_stream(provider="anthropic", model="m", attempt_key=a, turn_key="t").observe({"input_tokens": 1})
            write_blob(run.path, "streams/attempt-1/stdout.jsonl", b'{"type":"result"}\n')
    finally:
        os.umask(old)
    seen_files = 0
    for dirpath, dirnames, filenames in os.walk(home):
        assert stat.S_IMODE(os.stat(dirpath).st_mode) == 0o700, dirpath
        for name in filenames:
            seen_files += 1
            mode = stat.S_IMODE(os.lstat(os.path.join(dirpath, name)).st_mode)
            assert mode == 0o600, (dirpath, name, oct(mode))
    assert seen_files == 6  # manifest, context, events, terminal, provider-session, blob


def test_sys_exit_zero_inside_capture_settles_completed_nonzero_failed(tmp_path):
    import pytest as _pytest

    from ledger.records import RunCapture, read_run

    with _pytest.raises(SystemExit):
        with RunCapture(tmp_path / "h", harness="command") as ok:
            raise SystemExit(0)
    with _pytest.raises(SystemExit):
        with RunCapture(tmp_path / "h", harness="command") as bad:
            raise SystemExit(3)
    assert read_run(ok.path).outcome == "completed"
    assert read_run(bad.path).outcome == "failed"
