"""The archived session logs of Claude Code and Codex as a source of the index (issue 15).

`ledger import` copies the clients' logs into `<home>/sources/<client>/` (ledger.sources.archive:
append-only, never rewritten). This source projects that archive into the same tables as run
records, so `ledger runs`, `ledger report` and `ledger sql` see every session without new
commands:

- one `runs` row per client session (`run_id` `claude-<session id>` / `codex-<thread id>`,
  `source` `claude-log` / `codex-log`, surface `interactive`, or `headless` for `claude -p` /
  `codex exec`); subagent transcripts belong to their session;
- its usage in `usage_streams`, one row per (model, 15-minute slot): a session spanning days
  is reported on each day it spent; `cost_usd` is the client's own figure (Claude Code
  2.1.x `cost-state` deltas, 2.0.x `costUSD`) with `final_receipt` true, and `est_cost_usd`
  the estimate priced per API response (a long-context tier applies per request, so a sum
  must not be priced as one request);
- `tool_uses` per tool name (Claude: each `tool_use` block id once; Codex: each call id once),
  with the results a log states (Codex: ok / error / semantic-error per call, see
  codex_usage; the rest unknown), and their sums in `runs.tool_calls` / `tool_ok` /
  `tool_errors` / `tool_semantic_errors`;
- `log_sessions`: every session found. One that `ledger run` recorded (same provider
  session id, same harness) is counted once: the run record wins, `linked_run_id` names it
  and the session has no `runs` row. An interactive run record holding no usage of its own
  (its session was not found when the agent exited, issue 33) takes the session's usage,
  cost and tools: its `usage_streams` (ids `log:...`) and `tool_uses` rows, and the sums on
  its `runs` row. A session without any API response or cost (its prompt was never sent)
  is listed there only: it is not a run.

The counting rules are the pure reducers' (ledger.sources.claude_usage / codex_usage; what
each gives: ledger.index.logclients); their state and the bytes read of each archive file are kept in `log_state`, so a pass reads only
new bytes. A pass stats the archive files (no read when none grew); an archive file that
shrank or was replaced (ledger never does either: damage or a restore) makes the source
re-read its whole archive. Sessions whose rows did not change are not rewritten (their
fingerprint is kept in `log_sessions`). Rebuilding the index rebuilds all of this from the
archive: the index is derived, the archive is the evidence.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any, Iterator

import orjson

from ledger import progressline
from ledger.index import logfeed, logrows
from ledger.index.dbapi import Conn, wrap
from ledger.index.fresh import LOG_STATE_FORMAT as STATE_V  # the log_state document's own layout ("v")
from ledger.index.logclients import CLIENTS, state_v
from ledger.index.logfeed import LOG_STATE_COLS, SOURCES_DIR, archive_files, change_marker, state_problems
from ledger.sources.archiveformat import PROBLEMS, ZSTD_SUFFIX, archive_reason, parse_problems

# ---------------------------------------------------------------- the source

class LogSource:
    """One client's archive (`sources/<client>/`) as a source of the index."""

    tables: tuple[str, ...] = ()  # no per-item work: the pass is done in settle()
    key = "row_id"

    def __init__(self, client: str) -> None:
        self.client = client
        self.name = f"{client}-log"  # runs.source and log_state.source: never renamed
        self.spec = CLIENTS[client]

    def discover(self, ctx: Any) -> "LogPass":
        return LogPass(self, ctx)

    @staticmethod
    def fold(*args: Any, **kwargs: Any) -> Any:  # pragma: no cover - never called: no items
        raise NotImplementedError

    damaged = fold
    delete = fold
    previous = fold


class LogPass:
    """One home's pass of a LogSource: all the work is in settle()."""

    def __init__(self, source: LogSource, ctx: Any) -> None:
        self.source = source
        self.ctx = ctx
        s = ctx.summary
        self.runs_changed = bool(s.new or s.updated or s.removed)  # record runs: links may change
        self.bytes_read = 0  # (tests count the bytes a pass reads)

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def folded(self, batch: list[Any]) -> None:  # pragma: no cover - no items
        pass

    def write_state(self, insert_rows: Any) -> None:
        pass

    def settle(self) -> bool:
        ctx, src = self.ctx, self.source
        root = os.path.join(ctx.home, SOURCES_DIR, src.client)
        conn, h = ctx.conn, ctx.home_id
        c = wrap(conn)
        marker = change_marker(root)
        if marker is None and not os.path.isdir(root) and ctx.fresh:
            return False  # (nothing imported, nothing indexed: no query)
        with ctx.txn():
            row = None if ctx.fresh else _state(c, h, src.name)
        cur = orjson.loads(row[0]) if row is not None else {"v": STATE_V, "files": {}}
        # a fresh index starts where the client's first import folded its lines (ledger.sources.prefold)
        pre = None if row is not None or ctx.full else _prefold(root, src)
        if pre is not None:
            cur["files"] = pre.files
        # the reducer state was folded by an older reducer (it lacks what a newer one counts, e.g.
        # Codex tool calls): the whole archive is read again, once, whether it changed or not
        stale = row is not None and cur.get("rv", 1) != state_v(src.client)
        if not ctx.full and not stale and marker is not None and cur.get("marker") == marker:
            # no import archived anything since the last pass: no walk (--full walks). Record
            # runs written in this pass may hold one of the sessions (counted once): relink
            if not self.runs_changed or row is None:
                with ctx.txn():
                    self._report(self._problems() if row is not None else {})
                return False
            with ctx.txn():
                if not _links_changed(c, h, src, self.source.spec.harness):
                    self._report(self._problems())
                    return False
            self.runs_changed = True  # (re-project: the links differ)
        links: dict[str, list[Any]] = {}
        files = {rel: st for rel, st in archive_files(root, links)} if os.path.isdir(root) else {}
        if row is None and not files:
            return False
        ctx.ready()
        with ctx.txn():
            known: dict[str, list[int]] = cur["files"]
            changed = [rel for rel, st in files.items() if known.get(rel) != [st.st_size, st.st_ino]]
            # (a plain file's cursor is its size read; a zstd file's the end of its last whole frame)
            gone = [rel for rel in known if rel not in files]
            if not changed and not gone and not self.runs_changed and not stale and not ctx.full and row is not None:
                self._report(self._problems())
                if marker != cur.get("marker"):  # (an import that added nothing here)
                    c.execute("UPDATE log_state SET state = ? WHERE home_id = ? AND source = ?",
                              (orjson.dumps({**cur, "marker": marker}).decode(), h, src.name))
                return False
            # (--full reads the whole archive again: a frame damaged in place keeps the file's
            # size and inode, and only a read finds it, as `ledger verify` does)
            reset = ctx.full or stale or bool(gone) or any(
                rel in known and (files[rel].st_size < known[rel][0] or files[rel].st_ino != known[rel][1])
                for rel in changed)
            now = c.dt(datetime.now(timezone.utc))
            # nothing changed since the fold: the reducer state to store is the fold's own bytes,
            # stored before the reducer is parsed (issue 28's peak memory: not both at once)
            stored = pre is not None and row is None and not reset and not changed and _put_fold(c, h, src, pre, now)
            reducer_row = None if (reset or row is None) else _state(c, h, src.name + "/reducer")
            if reducer_row is not None:
                usage = src.spec.reducer(orjson.loads(reducer_row[0]))
            else:
                usage = _fold_reducer(src, pre) if pre is not None and not reset else None
                if usage is None:  # (no fold, or a damaged one: the whole archive is read)
                    reset, stored = pre is not None or reset, False
                    usage = src.spec.reducer(None)
            pre = None
            if reset:
                known = {}
            problems = {} if (reset or row is None) else self._problems()
            fed = False
            todo = sorted(changed if not reset else files)
            work = sum(files[rel].st_size for rel in todo)
            what = f"indexing {src.spec.label} sessions: reading the archive"
            done_bytes = 0
            for rel in todo:
                st = files[rel]
                progressline.show(what, done_bytes, work, "MB")
                done_bytes += st.st_size
                key = rel[:-len(ZSTD_SUFFIX)] if rel.endswith(ZSTD_SUFFIX) else rel  # (the log's own name)
                # where to read from: a plain file, after the lines the reducer consumed; a zstd
                # file, after its last whole frame read (frames hold whole lines only)
                start = usage.offset(key) if key == rel else (known[rel][0] if rel in known else 0)
                if st.st_size <= start:
                    continue
                got = logfeed.feed_file(usage, key, os.path.join(root, rel), start, st.st_size, key != rel)
                if got is None:
                    continue  # unreadable now: tried again next pass (its cursor is not moved)
                end, nread, bad = got
                self.bytes_read += nread
                for offset, reason in bad:
                    problems[rel] = [offset, reason]
                fed = True
                known[rel] = [end, st.st_ino]
            if reset or row is None:
                problems.update((rel, why) for rel, why in state_problems(root, files).items()
                                if not any(rel.startswith(link + "/") for link in links))
                problems.update(links)
            logrows.project(src, ctx.summary, conn, h, usage, files, reset or row is None, problems)
            c.execute("DELETE FROM log_state WHERE home_id = ? AND source IN (?, ?)", (h, src.name, src.name + PROBLEMS))
            rows = [{"home_id": h, "source": src.name, "state": orjson.dumps(
                {"v": STATE_V, "rv": state_v(src.client), "files": known, "marker": marker}).decode(),
                "indexed_at": now}]
            c.insert_rows("log_state", LOG_STATE_COLS, [[r[k] for k in LOG_STATE_COLS] for r in rows])
            if not stored and (fed or reducer_row is not None or reset or row is None):
                c.execute("DELETE FROM log_state WHERE home_id = ? AND source = ?", (h, src.name + "/reducer"))
                data = usage.state_json()
                usage = None  # (a 10,000-thread reducer is ~250 MB: gone before the driver copies its JSON)
                _put_state(c, h, src.name + "/reducer", data, now)
                del data
            if problems:
                c.insert_rows("log_state", LOG_STATE_COLS, [[h, src.name + PROBLEMS, orjson.dumps(
                    {"v": 1, "problems": problems}, option=orjson.OPT_SORT_KEYS).decode(), now]])
        progressline.done()
        self._report(problems)
        return True

    def _problems(self) -> dict[str, list[Any]]:
        """The archive problems the last pass stored (archive rel -> [byte offset, reason])."""
        return stored_problems(self.ctx.conn, self.ctx.home_id, self.source.name)

    def _report(self, problems: dict[str, list[Any]]) -> None:
        """Each damaged archive file in the pass's skipped list (as a damaged record is)."""
        from ledger.records.model import ScanProblem

        for rel, (offset, reason) in sorted(problems.items()):
            self.ctx.summary.skipped.append(ScanProblem(
                os.path.join(self.ctx.home, SOURCES_DIR, self.source.client, rel), archive_reason(offset, reason)))



def _prefold(root: str, src: "LogSource") -> Any:
    from ledger.sources import prefold
    from ledger.sources.archiveformat import STATE_DIR

    return prefold.load(os.path.join(root, STATE_DIR), src.client, state_v(src.client))


def _put_fold(c: Conn, h: int, src: LogSource, pre: Any, now: Any) -> bool:
    """The fold's reducer state stored as the reducer's log_state row; False: unreadable."""
    try:
        data = pre.state_bytes()
    except (OSError, ValueError):
        return False
    c.execute("DELETE FROM log_state WHERE home_id = ? AND source = ?", (h, src.name + "/reducer"))
    _put_state(c, h, src.name + "/reducer", data, now)
    return True


def _fold_reducer(src: LogSource, pre: Any) -> Any:
    """The reducer from the fold's state, parsed part by part (ledger.sources.prefold.Loaded), or
    None when the file is damaged (it is a cache written by ledger: a shape error is damage too)."""
    from ledger.sources import prefold

    try:
        state = pre.state(prefold.sharer(src.client))
        return prefold.reducer(src.client, state, adopt=True, shared=True)
    except (OSError, ValueError, TypeError, AttributeError, KeyError, IndexError):
        return None


def _state(c: Conn, h: int, source: str) -> tuple | None:
    """The log_state row (state,) of `source` in home `h`, or None."""
    return c.one("SELECT state FROM log_state WHERE home_id = ? AND source = ?", (h, source))


def _put_state(c: Any, h: int, source: str, data: bytes, now: Any) -> None:
    """A log_state row whose state is `data`, UTF-8 JSON bytes, stored as text without a
    Python str of it (a Codex reducer state is ~75 MB: issue 28's peak memory)."""
    if not c.sqlite:
        c.execute("INSERT INTO log_state (home_id, source, state, indexed_at) VALUES (?, ?, convert_from(?, 'UTF8'), ?)",
                  (h, source, data, now))
        return
    # SQLite keeps a copy of a bound value until the cached statement is bound again: the same
    # statement inserting nothing, with an empty state, lets that copy go
    sql = "INSERT INTO log_state (home_id, source, state, indexed_at) SELECT ?, ?, CAST(? AS TEXT), ? WHERE ?"
    c.execute(sql, (h, source, data, now, 1))
    c.execute(sql, (h, source, b"", now, 0))


def stored_problems(conn: Any, h: int, source: str) -> dict[str, list[Any]]:
    row = _state(wrap(conn), h, source + PROBLEMS)
    return {} if row is None else parse_problems(row[0])


def _links_changed(c: Conn, h: int, src: LogSource, harness: str) -> bool:
    """Whether a session's link to a run record differs from what log_sessions holds (the rule
    is ledger.index.fresh.links_changed, shared with the small pass)."""
    from ledger.index.fresh import links_changed

    if src.name != f"{harness}-log":  # pragma: no cover - (a source named otherwise than its client)
        raise ValueError(src.name)
    return links_changed(c.rows, h, harness)
