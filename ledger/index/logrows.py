"""A client's sessions as index rows: one `runs` row per session (or its figures taken by the
interactive run record that holds no usage of its own, issue 33), its `usage_streams`
(priced per API response), `tool_uses` and `log_sessions` (see ledger.index.logsource). A
session whose fingerprint did not change is not rewritten; one another home of the index
already counts is counted there.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any

import orjson

from ledger import progressline
from ledger.index.dbapi import Conn, wrap
from ledger.index.logclients import COUNTERS, Session, Stream, row_id
from ledger.index.logfeed import LOG_SESSION_COLS, SOURCES_DIR
from ledger.index.project import EXPECTED_COLS
from ledger.index.reportshape import SLOT_SECONDS
from ledger.index.scan import delete_runs
from ledger.records.timefmt import parse_rfc3339
from ledger.records.verdict import judge_session
from ledger.sources.archiveformat import ZSTD_SUFFIX

PROJECTION_V = 4  # part of every session's fingerprint: a change to the rows below rewrites them all
# (4: `path` names the archive file as it is on disk, `.jsonl.zst`; a settled session has a verdict)
# (3: runs.tool_calls and the tool results)
LINK_CHUNK = 500
ADOPTED = "log:"  # the stream ids of a session's usage that an interactive run took (see _adopting)

# the columns of each table the rows go to, in write order (a row's missing keys are NULL)
_COLS = {"runs": EXPECTED_COLS["runs"], "usage_streams": EXPECTED_COLS["usage_streams"],
         "tool_uses": EXPECTED_COLS["tool_uses"], "log_sessions": LOG_SESSION_COLS}
_DATETIMES = ("created_at", "ended_at", "indexed_at")


def project(src: Any, summary: Any, conn: Any, h: int, usage: Any, files: dict[str, Any], everything: bool,
            problems: dict[str, list[Any]] | None = None) -> None:
    """Write the rows of `src`'s sessions as the reducer `usage` holds them (every session when
    `everything`, else those whose fingerprint changed); counts them in `summary`."""
    what = f"indexing {src.spec.label} sessions"
    progressline.show(what, 0, 0, "sessions")
    c = wrap(conn)
    sessions = src.spec.sessions(usage)
    links = _links(c, h, src.spec.harness, sorted(sessions))
    adopting = _adopting(c, h, sorted(set(links.values())))
    old = dict(c.rows("SELECT row_id, fingerprint FROM log_sessions WHERE home_id = ? AND source = ?",
                      (h, src.name)))
    now = datetime.now(timezone.utc)
    from ledger.pricing import price_data_version

    version = price_data_version()
    write: list[tuple[str, Session, int]] = []
    damaged = {rel[:-len(ZSTD_SUFFIX)] if rel.endswith(ZSTD_SUFFIX) else rel for rel in (problems or {})}
    for sid, s in sessions.items():
        rid = row_id(src.spec.harness, sid)
        s.damaged = len(s.files & damaged)
        linked = links.get(sid)
        fp = _fingerprint(s, f"{ADOPTED}{linked}" if linked in adopting else linked, version)
        if everything or old.get(rid) != fp:
            write.append((rid, s, fp))
    summary.sessions_new += sum(1 for rid, _, _ in write if rid not in old)
    summary.sessions_updated += sum(1 for rid, _, _ in write if rid in old)
    stale = [rid for rid in old if rid not in {row_id(src.spec.harness, sid) for sid in sessions}]
    drop = stale + [rid for rid, _, _ in write if rid in old]
    for i in range(0, len(drop), LINK_CHUNK):
        chunk = drop[i:i + LINK_CHUNK]
        delete_runs(conn, h, chunk, False)
        c.execute(f"DELETE FROM log_sessions WHERE home_id = ? AND row_id IN ({c.marks(len(chunk))})", (h, *chunk))
    if not write:
        return
    elsewhere = _held_elsewhere(conn, c, h, [rid for rid, _, _ in write])
    price = _Pricer(src.spec.provider)
    # (what an earlier projection of an adopting session gave its run goes first: every delete
    # before any insert, as one batch of all rows would have it)
    for linked in dict.fromkeys(links.get(s.sid) for rid, s, _ in write
                                if links.get(s.sid) in adopting and s.streams and rid not in elsewhere):
        c.execute("DELETE FROM usage_streams WHERE home_id = ? AND run_id = ? AND stream_id LIKE ?",
                  (h, linked, ADOPTED + "%"))
        c.execute("DELETE FROM tool_uses WHERE home_id = ? AND run_id = ?", (h, linked))
    out: dict[str, list[dict[str, Any]]] = {t: [] for t in _TABLES}
    adopted: list[tuple[str, dict[str, Any]]] = []
    for n, (rid, s, fp) in enumerate(write):
        progressline.show(what, n, len(write), "sessions")
        if n and n % FLUSH_SESSIONS == 0:  # (rows written as they come: a 10,000-thread history's are ~170 MB)
            _flush(c, out, what)
        linked = links.get(s.sid)
        main = min(s.files, key=lambda f: ("/subagents/" in f, len(f), f)) if s.files else None
        if main is not None and main + ZSTD_SUFFIX in files:  # (the archive file's own name)
            main += ZSTD_SUFFIX
        out["log_sessions"].append({"home_id": h, "row_id": rid, "source": src.name, "provider_session_id": s.sid,
                                    "linked_run_id": linked, "files": len(s.files),
                                    "path": f"{SOURCES_DIR}/{src.client}/{main}" if main else None,
                                    "fingerprint": fp, "indexed_at": now})
        if linked is not None and linked not in adopting:
            continue  # the run record is the evidence: counted once, as the run
        if not s.streams:
            continue  # no API response, no cost (a prompt never sent): listed, not a run
        if rid in elsewhere:
            continue  # another home imported the same session first: counted there (issue 11)
        run, st_rows = _rows(src, h, linked or rid, s, main, price, now)
        out["usage_streams"].extend(st_rows)
        out["tool_uses"].extend(
            {"home_id": h, "run_id": linked or rid, "tool_name": name, "uses": n,
             **dict(zip(("ok", "errors", "semantic_errors"), s.tool_results.get(name, (0, 0, 0))))}
            for name, n in sorted(s.tools.items()))
        if linked is None:
            out["runs"].append(run)
            continue
        # an interactive run whose session was not resolved at its exit: the session's
        # figures become the run's (counted once, as the run); its own streams are marked
        for row in st_rows:
            row["stream_id"] = ADOPTED + row["stream_id"]
        adopted.append((linked, run))
    _flush(c, out, what)
    for linked, run in adopted:  # (after its streams: the report's change log sees the run's update)
        c.execute(f"UPDATE runs SET model = coalesce(model, ?), indexed_at = ?, {_ADOPT_SET} "
                  "WHERE home_id = ? AND run_id = ?",
                  (run["model"], c.dt(now), *(run[k] for k in _ADOPT_COLS), h, linked))


# the tables a projection writes, in the order each batch writes them (runs before the rows
# that name them)
_TABLES = ("runs", "usage_streams", "tool_uses", "log_sessions")
FLUSH_SESSIONS = 500  # sessions whose rows are written together


def _flush(c: Conn, out: dict[str, list[dict[str, Any]]], what: str) -> None:
    for table in _TABLES:
        _insert(c, table, out[table], what)
        out[table] = []


# the figures an adopting run takes from its session (with its model when it names none)
_ADOPT_COLS = (*COUNTERS, "cost_usd", "streams", "final_streams", "tool_calls", "tool_ok", "tool_errors",
               "tool_semantic_errors")
_ADOPT_SET = ", ".join(f"{k} = ?" for k in _ADOPT_COLS)


def _insert(c: Conn, table: str, rows: list[dict[str, Any]], what: str) -> None:
    """`rows` (dicts) into `table`, 2,000 at a time (datetimes as the dialect stores them)."""
    cols = _COLS[table]
    dts = [i for i, k in enumerate(cols) if k in _DATETIMES]
    for i in range(0, len(rows), 2000):
        progressline.show(f"{what}: writing {table}", i, len(rows), "rows")
        out = []
        for row in rows[i:i + 2000]:
            vals = [row.get(k) for k in cols]
            for j in dts:
                vals[j] = c.dt(vals[j])
            out.append(vals)
        c.insert_rows(table, cols, out)


def _rows(src: Any, h: int, rid: str, s: Session, main: str | None, price: "_Pricer", now: datetime
          ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    created = _dt(s.started) or _dt(min((st.slot for st in s.streams.values()), default=0) * SLOT_SECONDS)
    ended = _dt(s.ended)
    totals: dict[str, int | None] = dict.fromkeys(COUNTERS)
    st_rows = []
    by_model: dict[str, int] = {}
    cost: float | None = None
    for (mkey, slot), st in sorted(s.streams.items()):
        for k, v in st.counters.items():
            if v is not None:
                totals[k] = (totals[k] or 0) + v
        if st.model is not None:
            by_model[st.model] = by_model.get(st.model, 0) + sum(
                st.counters[k] or 0 for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens",
                                              "output_tokens"))
        if st.cost is not None:
            cost = (cost or 0.0) + st.cost
        st_rows.append({
            "home_id": h, "run_id": rid, "stream_id": f"{mkey or '-'}@{slot}", "provider": src.spec.provider,
            "model": st.model, "attempt_key": None, "turn_key": None, "observations": st.n,
            "final_receipt": st.receipt, **{c: st.counters.get(c) for c in _STREAM_COUNTERS},
            "cost_usd": st.cost,
            "slot": slot, "est_cost_usd": price.estimate(st),
        })
    model = max(by_model, key=lambda m: (by_model[m], m)) if by_model else None
    # a rewritten log's new generation, and each archive file of it that cannot be read whole
    gaps = sum(1 for f in s.files if ".gen" in f.rsplit("/", 1)[-1]) + s.damaged
    # results of the counted uses only (as for run records); the rest is unknown
    res = [sum(v[i] for k, v in s.tool_results.items() if k in s.tools) for i in range(3)]
    run = {
        "home_id": h, "run_id": rid, "parent_run_id": row_id(src.spec.harness, s.parent) if s.parent else None,
        "created_at": created, "ended_at": ended,
        "duration_ms": int((ended - created).total_seconds() * 1000) if ended and created and ended >= created else None,
        "harness": src.spec.harness, "model": model, "surface": s.surface, "source": src.name,
        "repo": s.repo, "worktree": None, "skill": None, "cwd": s.cwd, "host": None, "boot_id": None,
        "launcher_pid": None, "launcher_start_ticks": None, "outcome": None, "settled": True,
        **judge_session(gaps)._asdict(),
        "state": "settled", "evidence_gaps": gaps, "usage_gaps": 0, "record_rewrites": 0,
        "streams": len(st_rows), "final_streams": sum(1 for r in st_rows if r["final_receipt"]),
        **{c: totals.get(c) for c in COUNTERS}, "total_input_tokens": None, "peak_input_tokens": None,
        "context_window_tokens": None, "cost_usd": cost, "provider_session_id": s.sid, "final_answer": None,
        "final_answer_exact": None, "api_retries": 0, "skill_invoked": None,
        "tool_calls": sum(s.tools.values()), "tool_ok": res[0], "tool_errors": res[1],
        "tool_semantic_errors": res[2],
        "path": f"{SOURCES_DIR}/{src.client}/{main}" if main else f"{SOURCES_DIR}/{src.client}",
        "indexed_at": now,
    }
    return run, st_rows


_STREAM_COUNTERS = COUNTERS


class _Pricer:
    """Per-response estimates, memoised by shape (sessions repeat the same counters often)."""

    def __init__(self, provider: str) -> None:
        from ledger.pricing import estimate_cost

        self.provider = provider
        self.estimate_cost = estimate_cost
        self.memo: dict[tuple, float | None] = {}

    def estimate(self, st: Stream) -> float | None:
        if not st.priced:
            return 0.0  # a stream of reported cost only: no tokens to estimate
        total = 0.0
        for c, tier in zip(st.priced, st.tiers):
            key = (st.model, tier, *(c.get(k) for k in COUNTERS))
            v = self.memo.get(key, False)
            if v is False:
                try:
                    v = self.estimate_cost(self.provider, st.model, c, service_tier=tier)[0]
                except Exception:  # noqa: BLE001 - a price-table failure is an unknown cost, not a crash
                    v = None
                self.memo[key] = v
            if v is None:
                return None  # the report prices the stream itself and says why it cannot
            total += v
        return total


def _dt(v: Any) -> datetime | None:
    if v is None:
        return None
    if isinstance(v, int):
        return datetime.fromtimestamp(v, timezone.utc)
    try:
        return parse_rfc3339(v)
    except (ValueError, OverflowError):
        return None


def _links(c: Conn, h: int, harness: str, sids: list[str]) -> dict[str, str]:
    """provider session id -> the run record that holds it (the earliest, when several do)."""
    out: dict[str, str] = {}
    for i in range(0, len(sids), LINK_CHUNK):
        chunk = sids[i:i + LINK_CHUNK]
        for rid, psid in c.rows(
                "SELECT run_id, provider_session_id FROM runs WHERE home_id = ? AND source = ? AND harness = ? "
                f"AND provider_session_id IN ({c.marks(len(chunk))}) ORDER BY run_id",
                (h, "record", harness, *chunk)):
            out.setdefault(psid, rid)
    return out


def _adopting(c: Conn, h: int, rids: list[str]) -> set[str]:
    """The linked runs that take their session's figures: interactive run records holding no
    usage of their own (the session was not resolved when the agent exited, issue 33)."""
    out: set[str] = set()
    for i in range(0, len(rids), LINK_CHUNK):
        chunk = rids[i:i + LINK_CHUNK]
        out.update(row[0] for row in c.rows(
            "SELECT r.run_id FROM runs AS r WHERE r.home_id = ? AND r.source = ? AND r.surface = ? "
            f"AND r.run_id IN ({c.marks(len(chunk))}) AND NOT EXISTS (SELECT 1 FROM usage_streams AS u "
            "WHERE u.home_id = r.home_id AND u.run_id = r.run_id AND u.stream_id NOT LIKE ?)",
            (h, "record", "interactive", *chunk, ADOPTED + "%")))
    return out


def _fingerprint(s: Session, linked: str | None, version: str) -> int:
    """A 63-bit hash of everything a session's rows hold (unchanged: not rewritten)."""
    h = hashlib.sha1()
    h.update(orjson.dumps([PROJECTION_V, s.damaged, s.sid, s.started, s.ended, s.cwd, s.repo, s.branch, s.surface, s.parent,
                           sorted(s.tools.items()), sorted(s.tool_results.items()), sorted(s.files), linked,
                           version]))
    for key, st in sorted(s.streams.items()):
        h.update(orjson.dumps([list(key), st.model, st.n, [st.counters[k] for k in COUNTERS], st.cost, st.receipt,
                               [[c.get(k) for k in COUNTERS] for c in st.priced]]))
    return int.from_bytes(h.digest()[:8], "big", signed=True)


def _held_elsewhere(conn: Any, c: Conn, h: int, rids: list[str]) -> set[str]:
    """The sessions of `rids` another home of the index already counts (the same client logs
    imported into two homes, a home and its copy): a session is counted once."""
    from ledger.index import pglocks

    if not rids:
        return set()
    if c.sqlite and c.scalar("SELECT count(*) FROM homes") < 2:
        return set()
    if c.dialect == "postgresql":
        pglocks.lock_copies(conn, rids)  # (pglocks takes the caller's connection)
    out: set[str] = set()
    for i in range(0, len(rids), LINK_CHUNK):
        chunk = rids[i:i + LINK_CHUNK]
        out.update(row[0] for row in c.rows(
            f"SELECT DISTINCT run_id FROM runs WHERE home_id != ? AND run_id IN ({c.marks(len(chunk))})",
            (h, *chunk)))
    return out
