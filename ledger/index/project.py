"""A run record projected into index rows: tuples in column order, encoders, column plans.

SQLite bulk writes skip SQLAlchemy's per-row parameter processing (the largest cost of a
cold index): rows are built as tuples holding what SQLAlchemy would store and go straight
to the driver, through the workers' scratch files or executemany. A test compares every
stored value and SQLite type with Core's (indexer.FAST_SQLITE = False). Other databases get
the rows as dicts through Core's executemany.

Everything here is pure (no database): it runs in the worker processes.
"""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta
from typing import Any, NamedTuple

import orjson

from ledger.errors import RecordError
from ledger.index.sealing import EVENTS, LINK_SIG, MANIFEST, TERMINAL, file_sig, prefix_sha
from ledger.index.work import PREFIX_BYTES, PrevCursor, Work, files_sig
from ledger.records import reader
from ledger.records.fold import OVERFLOW, _known, command_text, exit_code_of, reduce_usage, run_model
from ledger.records.liveness import liveness
from ledger.records.model import ALL_INT_COUNTERS as COUNTER_COLUMNS
from ledger.records.model import I64_MAX, MAX_ACROSS_STREAMS, ScanProblem
from ledger.records.timefmt import is_canonical_utc, parse_rfc3339
from ledger.records.verdict import judge

# (No SQLAlchemy here: the small pass, ledger.index.quickpass, projects records without it.
# The tables' columns are EXPECTED_COLS below; ledger.index.sources checks them against the models.)
# In the scratch files a run's tool counts travel as one JSON object (SQLite's json_each turns
# it into tool_uses rows): ~5 rows per run fewer to bind in Python.
TOOLS_JSON = "tool_uses_json"
TOOLS_JSON_INSERT = f'INSERT INTO "{TOOLS_JSON}" (home_id, run_id, tools) VALUES (?, ?, ?)'
_CURSOR_SETTLED = 6  # index of `settled` in an index_cursors row (see EXPECTED_COLS)

_PLANS: dict[str, tuple[str, tuple[str, ...]]] = {}


def plan(table: Any) -> tuple[str, tuple[str, ...]]:
    """(INSERT statement, column names) of a table: an SQLAlchemy Table, or the name of one of
    a run record's tables (OUT_TABLES)."""
    name = table if isinstance(table, str) else table.name
    p = _PLANS.get(name)
    if p is None:
        names = EXPECTED_COLS[name] if isinstance(table, str) else tuple(col.name for col in table.columns)
        sql = (f'INSERT INTO "{name}" ({", ".join(chr(34) + n + chr(34) for n in names)}) '
               f'VALUES ({", ".join("?" for _ in names)})')
        p = _PLANS[name] = (sql, names)
    return p


# -- encoders ---------------------------------------------------------------------------

def i64(v: int) -> int:
    return v - (1 << 64) if v > I64_MAX else v


def _text(v: Any) -> str | None:
    if v is None or isinstance(v, str):
        return v
    return orjson.dumps(v).decode()


def _int_or(v: Any, default: int) -> int:
    if isinstance(v, int) and not isinstance(v, bool) and -I64_MAX - 1 <= v <= I64_MAX:
        return v
    return default


def _ticks(v: Any) -> int | None:
    """Launcher start ticks as stored: None stays None; anything liveness() could not match -> -1."""
    if v is None:
        return None
    if isinstance(v, bool):
        return -1
    if isinstance(v, int):
        return v if 0 <= v <= I64_MAX else -1
    if isinstance(v, float) and v.is_integer() and 0 <= v <= I64_MAX:
        return int(v)
    return -1


def _launcher_cols(launcher: Any) -> tuple[int | None, int | None]:
    """(pid, start_ticks) such that liveness(scan.launcher_dict(pid, ticks)) == liveness(launcher)."""
    pid = launcher.get("pid") if isinstance(launcher, dict) else None
    if type(pid) is not int:
        return None, None  # liveness: unknown
    pid = max(0, min(pid, I64_MAX))  # <= 0: unknown; past i64: no such process (abandoned)
    return pid, _ticks(launcher.get("start_ticks"))


_MS = timedelta(milliseconds=1)


def same(v: Any) -> Any:
    return v


def enc_bool(v: Any) -> Any:
    return None if v is None else (1 if v else 0)


def enc_datetime(v: Any, text: str | None = None) -> Any:
    """SQLAlchemy's SQLite DATETIME storage text (zero-padded fields, no offset: ours are UTC).
    `text`, the RFC 3339 form the value was parsed from, is reused when canonical."""
    if v is None:
        return None
    if text is not None and is_canonical_utc(text):
        return f"{text[:10]} {text[11:26]}"
    return (f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"
            f".{v.microsecond:06d}")


_NOW_TEXT: list[Any] = [None, None]


def now_text(now: Any) -> str | None:
    """`now` in SQLite's storage format, formatted once per batch (every row carries it)."""
    if now is None:
        return None
    if _NOW_TEXT[0] is not now:
        _NOW_TEXT[0], _NOW_TEXT[1] = now, enc_datetime(now)
    return _NOW_TEXT[1]


def _extra_counter_total(state: dict[str, Any], name: str) -> int | None:
    """Run total of a counter reduce_usage() does not carry (cache write 5m/1h split)."""
    total: int | None = None
    for st in state["streams"].values():
        v = st["c"].get(name)
        if v is None:
            continue
        if v == OVERFLOW:
            return None
        total = v if total is None else (max(total, v) if name in MAX_ACROSS_STREAMS else total + v)
    return total if total is None or total <= I64_MAX else None


# -- a record's rows --------------------------------------------------------------------

class Folded(NamedTuple):
    """What projecting one record gave: its rows per table (None when appended to a shared
    `out`, or on failure), the problem that made it unreadable, whether it is racy, the
    rewrites detected by this read, whether it is settled."""

    rows: dict[str, list[tuple]] | None
    problem: ScanProblem | None
    racy: bool
    rewrites: int
    settled: bool


def cursor_row(home_id: int, w: Work, now: Any, encode: bool, *, status: str,
               problem: tuple[str, str] | None = None, settled: bool = False, files_sig: str | None = None,
               context_sig: str | None = None, context_ok: bool | None = None, offset: int = 0,
               torn: bool = False, prefix_len: int = 0, prefix_sha: str | None = None, rewrites: int = 0,
               state: bytes | None = None) -> tuple:
    """An index_cursors row (column order: EXPECTED_COLS["index_cursors"])."""
    B, D = (enc_bool, now_text) if encode else (same, same)
    return (
        home_id, w.name, w.shard, status, problem[1] if problem else None, problem[0] if problem else None,
        B(settled), B(w.racy), w.dsig, w.esig, files_sig, context_sig, B(context_ok),
        i64(w.eino) if w.eino is not None else None, offset, B(torn), prefix_len, prefix_sha,
        rewrites, state.decode() if state is not None else None, D(now),
    )


def damaged_cursor(home_id: int, w: Work, now: Any, encode: bool, problem: ScanProblem, prev: Any) -> tuple:
    """The cursor of a record that cannot be read: its problem remembered, no rows."""
    return cursor_row(home_id, w, now, encode, status="damaged", problem=(problem.path, problem.reason),
                      rewrites=prev.record_rewrites if prev is not None else 0)


def fold_record(home_id: int, w: Work, prev: Any, now: Any, encode: bool,
                out: dict[str, list[tuple]] | None = None) -> Folded:
    """Project one record (see Folded). Failures map to a ScanProblem like reader.scan() does.
    Rows are tuples in column order; with `encode` their values are already what SQLite's
    driver is given. Given `out`, the rows are appended to its lists instead; a failed record
    leaves no row there."""
    shared = out is not None
    if out is None:
        out = {k: [] for k in OUT_TABLES}
    sizes = [len(v) for v in out.values()] if shared else None
    detected = [0]  # rewrites seen before a failure count too
    try:
        _project(home_id, w, prev, now, out, encode, detected)
        problem, racy = None, w.racy
    except RecordError as exc:
        problem, racy = ScanProblem(exc.path, exc.reason), w.racy
    except OSError as exc:  # may be transient: the record is retried next pass (racy)
        problem, racy = ScanProblem(exc.filename or w.path, f"record cannot be read ({exc.strerror or exc})"), True
    except Exception as exc:  # noqa: BLE001 - one broken record never hides the others
        problem, racy = ScanProblem(w.path, f"record cannot be read ({type(exc).__name__}: {exc})"), True
    if problem is not None:
        if shared:  # drop whatever the failed record appended
            for v, n in zip(out.values(), sizes):  # type: ignore[arg-type]
                del v[n:]
        return Folded(None, problem, racy, detected[0], False)
    settled = bool(out["index_cursors"][-1][_CURSOR_SETTLED])
    return Folded(None if shared else {k: v for k, v in out.items() if v}, None, racy, detected[0], settled)


def _project(home_id: int, w: Work, prev: Any, now: Any, out: dict[str, list[tuple]], encode: bool,
             detected: list[int]) -> None:
    """Read what changed in one record and append its rows + cursor to `out` (tuples in
    column order; encoded for SQLite's driver when `encode`). Rewrites detected are counted
    in `detected[0]`."""
    path = w.path
    if w.dsig.startswith(LINK_SIG):
        raise RecordError(path, reader.SYMLINK_REASON)
    events_path = path + EVENTS  # (a scandir path: no trailing separator)
    # manifest.json is immutable and terminal.json write-once: signed (stat()ed before they
    # are read) so that a later change, even in place, is seen (see scan.files_unchanged)
    msig, tsig = file_sig(path + MANIFEST), file_sig(path + TERMINAL)
    manifest = reader.read_manifest(path)
    terminal = reader.read_terminal(path)  # before the events, like read_run()
    fsig = files_sig(msig, tsig, terminal.present and terminal.valid)
    rewrites = prev.record_rewrites if prev is not None else 0
    if prev is not None and prev.status == "indexed" and prev.files_sig:
        # Files the format never changes, changed since they were indexed: flagged like a
        # rewritten events.jsonl (the files alone no longer show it). A receipt counts
        # once it was read valid (one read mid-write, before its bytes landed, is not).
        pmsig, ptsig, pvalid = prev.files_sig.split("|")
        if pmsig != msig:
            rewrites += 1
            detected[0] += 1
        if ptsig != "-" and pvalid == "1" and ptsig != tsig:
            rewrites += 1  # replaced, edited or deleted: the run no longer looks cleanly settled
            detected[0] += 1
    state: dict[str, Any] | None = None
    offset = 0
    torn = False
    fold = True
    head: list[bytes] | None = None
    if prev is not None and prev.status == "indexed" and prev.fold_state is not None:
        poff = prev.events_offset
        if w.esig == prev.events_sig and not w.verify:
            state, offset, torn, fold = orjson.loads(prev.fold_state), poff, prev.torn, False
        elif (w.esize is not None and i64(w.eino) == prev.events_ino and w.esize >= poff  # type: ignore[arg-type]
              and prefix_sha(events_path, prev.prefix_len) == prev.prefix_sha256):
            state, offset = orjson.loads(prev.fold_state), poff  # appended: fold from the offset
        elif poff > 0:
            rewrites += 1  # shrank, replaced or prefix changed: re-read whole, flag it
            detected[0] += 1
    if fold:
        # only up to the size stat()ed with the cursor's signature: a file created or grown
        # since (the writer thread appends while we work) is picked up by the next pass
        # instead of being mistaken for a rewrite then
        size = w.esize if w.esize is not None else 0
        head = [] if offset == 0 else None  # a whole read: the prefix hash comes from its first chunk
        state, offset, torn = reader.fold_events(path, state, offset, size=size, head=head)
    assert state is not None
    # context binding: re-hash only when the context file changed
    ctx_ref = manifest.context
    if ctx_ref is None:
        context_sig, context_ok = "none", True
    else:
        context_sig = str(ctx_ref.get("path") or reader.CONTEXT) + "=" + file_sig(
            os.path.join(path, str(ctx_ref.get("path") or reader.CONTEXT))) + f"/{ctx_ref.get('content_sha256')}:{ctx_ref.get('bytes')}"
        if prev is not None and prev.context_sig == context_sig and prev.context_ok is not None:
            context_ok = prev.context_ok
        else:
            context_ok = reader.context_valid(path, manifest)
    provider_session = reader.read_provider_session(path)
    prefix_len = min(PREFIX_BYTES, offset)
    if prev is not None and not fold and prev.prefix_len == prefix_len:
        psha = prev.prefix_sha256
    elif head and len(head[0]) >= prefix_len > 0:
        psha = hashlib.sha256(head[0][:prefix_len]).hexdigest()
    else:
        psha = prefix_sha(events_path, prefix_len)
    _rows(home_id, path, manifest, terminal, state, torn, context_ok, provider_session, rewrites, now, encode, out)
    out["index_cursors"].append(cursor_row(
        home_id, w, now, encode, status="indexed", settled=terminal.present, files_sig=fsig,
        context_sig=context_sig, context_ok=context_ok, offset=offset, torn=torn, prefix_len=prefix_len,
        prefix_sha=psha, rewrites=rewrites, state=orjson.dumps(state)))


def _rows(home_id: int, path: str, manifest: Any, terminal: Any, state: dict[str, Any], torn: bool,
          context_ok: bool, provider_session: str | None, rewrites: int, now: Any, encode: bool,
          out: dict[str, list[tuple]]) -> None:
    """The run's rows, as reader.build_snapshot() sees the run (the index == records tests
    hold the two together), built straight as tuples in column order."""
    B = enc_bool if encode else same
    u = reduce_usage(state, 1 if torn else 0)
    if terminal.present:
        live = "settled"
    else:
        live = liveness(manifest.host, manifest.boot_id, manifest.launcher)
    created = parse_rfc3339(manifest.created_at)
    ended = terminal.ended_dt if terminal.valid else None
    pid, ticks = _launcher_cols(manifest.launcher)
    rid = manifest.run_id
    skill_invoked = state["skill_invoked"]
    record_gaps = u.gaps + (0 if context_ok else 1) + (0 if terminal.valid else 1)
    gaps = record_gaps + rewrites
    # judged on the record's own gaps (as the records reader does): a rewrite only the index saw
    # shows in evidence_gaps, not in the verdict
    verdict = judge(state=live, outcome=terminal.outcome if terminal.valid else None, result=state["result"],
                    evidence_gaps=record_gaps,
                    skill_invoked=skill_invoked if isinstance(skill_invoked, bool) else None)
    tools = state["tools"]
    status = state.get("tool_status") or {}
    t_ok = t_err = t_sem = 0
    for name, c in status.items():
        if name not in tools:
            continue  # (a result without its use: not counted)
        t_ok, t_err, t_sem = t_ok + c[0], t_err + c[1], t_sem + c[2]
    out["runs"].append((
        home_id, rid, manifest.parent_run_id,
        enc_datetime(created, manifest.created_at) if encode else created,
        enc_datetime(ended, terminal.ended_at) if encode else ended,
        (ended - created) // _MS if ended is not None else None,
        manifest.harness, run_model(manifest.model, state), manifest.surface, "record", manifest.repo, manifest.worktree,
        manifest.skill,
        manifest.cwd, manifest.host or None, manifest.boot_id, pid, ticks,
        terminal.outcome if terminal.valid else None, B(terminal.present), live,
        gaps, u.gaps, rewrites,
        u.streams, u.final_streams, u.input_tokens, u.output_tokens, u.total_input_tokens, u.peak_input_tokens,
        u.context_window_tokens, u.reasoning_tokens, u.cache_read_tokens, u.cache_write_tokens,
        _extra_counter_total(state, "cache_write_5m_tokens"), _extra_counter_total(state, "cache_write_1h_tokens"),
        u.cost_usd, provider_session or state["session"], state["answer"], B(state.get("answer_exact")),
        _int_or(state["retries"], 0), B(skill_invoked) if isinstance(skill_invoked, bool) else None,
        B(verdict.ok), verdict.error_kind, verdict.error_detail, _int_or(sum(tools.values()), 0), t_ok, t_err,
        t_sem, command_text(state["result"]), exit_code_of(state["result"]), manifest.arm,
        manifest.trial_number, manifest.trials, path,
        (now_text(now) if encode else now),
    ))
    rows = out["subjects"]
    for pos, subj in enumerate(manifest.subjects):
        rows.append((home_id, rid, pos, subj.selector, _text(subj.source) or "declared"))
    rows = out["attempts"]
    for _, att in sorted(state["attempts"].items()):  # (primary-key order)
        rows.append((home_id, rid, att["attempt_key"], _text(att.get("provider")), _text(att.get("model")),
                     _text(att.get("started_at")), _text(att.get("finished_at")), _text(att.get("outcome"))))
    rows = out["usage_streams"]
    for sid, st in sorted(state["streams"].items()):
        c = st["c"]
        rows.append((home_id, rid, sid, _text(st["provider"]), _text(st["model"]), _text(st["attempt"]),
                     _text(st["turn"]), st["n"], B(bool(st["final"])),
                     *[_known(c[name]) if name in c else None for name in COUNTER_COLUMNS], st["cost"],
                     None, None))  # (slot, est_cost_usd: archived sessions only)
    if tools and TOOLS_JSON in out:  # scratch transport: one JSON object per run, expanded by SQLite
        # {tool: [uses, ok, errors, semantic_errors]}
        text = orjson.dumps({t: [n, *status.get(t, _NO_STATUS)] for t, n in tools.items()},
                            option=orjson.OPT_SORT_KEYS).decode()
        if "\\u0000" not in text:  # (SQLite's JSON cuts a key at an escaped NUL: those go as rows)
            out[TOOLS_JSON].append((home_id, rid, text))
            tools = {}
    rows = out["tool_uses"]
    for tool, n in sorted(tools.items()):
        rows.append((home_id, rid, tool, n, *status.get(tool, _NO_STATUS)))


_NO_STATUS = (0, 0, 0)


# The row builders above write tuples in these column orders: checked against the models at
# import, so a schema change cannot silently shift values into the wrong columns.
_RUN_COLS = (
    "home_id", "run_id", "parent_run_id", "created_at", "ended_at", "duration_ms", "harness", "model",
    "surface", "source", "repo", "worktree", "skill", "cwd", "host", "boot_id", "launcher_pid", "launcher_start_ticks",
    "outcome", "settled", "state", "evidence_gaps", "usage_gaps", "record_rewrites", "streams",
    "final_streams", "input_tokens", "output_tokens", "total_input_tokens", "peak_input_tokens",
    "context_window_tokens", "reasoning_tokens", "cache_read_tokens", "cache_write_tokens",
    "cache_write_5m_tokens", "cache_write_1h_tokens", "cost_usd", "provider_session_id", "final_answer",
    "final_answer_exact", "api_retries", "skill_invoked", "ok", "error_kind", "error_detail", "tool_calls",
    "tool_ok", "tool_errors", "tool_semantic_errors", "command", "exit_code", "arm", "trial", "trials", "path",
    "indexed_at",
)
EXPECTED_COLS = {
    "runs": _RUN_COLS,
    "subjects": ("home_id", "run_id", "position", "selector", "source"),
    "attempts": ("home_id", "run_id", "attempt_key", "provider", "model", "started_at", "finished_at", "outcome"),
    "usage_streams": ("home_id", "run_id", "stream_id", "provider", "model", "attempt_key", "turn_key",
                      "observations", "final_receipt", *COUNTER_COLUMNS, "cost_usd", "slot", "est_cost_usd"),
    "tool_uses": ("home_id", "run_id", "tool_name", "uses", "ok", "errors", "semantic_errors"),
    "index_cursors": PrevCursor._fields,
}
# the tables a run record's rows go to, in write order (the cursor last)
OUT_TABLES = tuple(EXPECTED_COLS)
