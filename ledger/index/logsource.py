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

The counting rules are the pure reducers' (ledger.sources.claude_usage / codex_usage); their
state and the bytes read of each archive file are kept in `log_state`, so a pass reads only
new bytes. A pass stats the archive files (no read when none grew); an archive file that
shrank or was replaced (ledger never does either: damage or a restore) makes the source
re-read its whole archive. Sessions whose rows did not change are not rewritten (their
fingerprint is kept in `log_sessions`). Rebuilding the index rebuilds all of this from the
archive: the index is derived, the archive is the evidence.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator

import orjson
import sqlalchemy as sa

from ledger import progressline
from ledger.index.models import LogSession, LogState, Run, ToolUse, UsageStream
from ledger.index.report_tables import SLOT_SECONDS
from ledger.index.scan import delete_runs
from ledger.records.timefmt import parse_rfc3339
from ledger.records.verdict import judge_session
from ledger.sources.archiveformat import CHANGED_FILE, LINK_REASON, PROBLEMS, ZSTD_SUFFIX, archive_reason, parse_problems

STATE_V = 1
PROJECTION_V = 4  # part of every session's fingerprint: a change to the rows below rewrites them all
# (4: `path` names the archive file as it is on disk, `.jsonl.zst`; a settled session has a verdict)
# (3: runs.tool_calls and the tool results)
SOURCES_DIR = "sources"
ARCHIVE_SKIP = (".state",)  # the archive's own bookkeeping (ledger.sources.archive)
LINK_CHUNK = 500
ADOPTED = "log:"  # the stream ids of a session's usage that an interactive run took (see _adopting)

runs_t = Run.__table__
streams_t = UsageStream.__table__
tools_t = ToolUse.__table__
sessions_t = LogSession.__table__
state_t = LogState.__table__

COUNTERS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_5m_tokens",
            "cache_write_1h_tokens", "output_tokens", "reasoning_tokens")


# ---------------------------------------------------------------- what a session becomes

@dataclass
class _Stream:
    model: str | None
    slot: int
    n: int = 0
    counters: dict[str, int | None] = field(default_factory=lambda: dict.fromkeys(COUNTERS))
    priced: list[dict[str, int | None]] = field(default_factory=list)  # per response, to estimate
    tiers: list[str | None] = field(default_factory=list)  # each priced response's service tier
    cost: float | None = None
    costed: int = 0  # responses that carried their own cost (2.0.x)
    receipt: bool = False

    def add(self, counters: dict[str, int | None], tier: str | None = None) -> None:
        self.n += 1
        for k, v in counters.items():
            if v is not None and k in self.counters:
                self.counters[k] = (self.counters[k] or 0) + v
        self.priced.append(counters)
        self.tiers.append(tier)


@dataclass
class _Session:
    sid: str
    started: str | None = None
    ended: str | None = None
    cwd: str | None = None
    repo: str | None = None
    branch: str | None = None
    surface: str | None = None
    parent: str | None = None
    tools: dict[str, int] = field(default_factory=dict)
    tool_results: dict[str, list[int]] = field(default_factory=dict)  # name -> [ok, error, semantic-error]
    streams: dict[tuple[str, int], _Stream] = field(default_factory=dict)
    files: set[str] = field(default_factory=set)
    damaged: int = 0  # its archive files that could not be read whole (each an evidence gap)

    def stream(self, model: str | None, slot: int) -> _Stream:
        key = (model or "", slot)
        st = self.streams.get(key)
        if st is None:
            st = self.streams[key] = _Stream(model, slot)
        return st


_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def row_id(harness: str, session_id: str) -> str:
    """The row id of a session: `<harness>-<session id>` (ids are UUIDs), or, for an id that
    could not be pasted into `ledger show` (control characters, markup, spaces, huge), a
    stable hash of it (the id itself stays verbatim in provider_session_id)."""
    if _SAFE_ID.fullmatch(session_id):
        return f"{harness}-{session_id}"
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{harness}-x{digest}"


def _epoch(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(parse_rfc3339(text).timestamp())
    except (ValueError, OverflowError):
        return None


def _slot(text: str | None, fallback: int) -> int:
    e = _epoch(text)
    return fallback if e is None else e // SLOT_SECONDS


# ---------------------------------------------------------------- the clients

class _Claude:
    label = "Claude Code"  # (how a progress line names it)
    harness = "claude"
    provider = "anthropic"
    state_v = 3  # claude_usage.STATE_VERSION (2: levels with tokens, forks, compactions; 3: session files): an older state re-reads

    @staticmethod
    def reducer(state: dict[str, Any] | None) -> Any:
        from ledger.sources.prefold import reducer

        return reducer("claude", state)

    @staticmethod
    def sessions(usage: Any) -> dict[str, _Session]:
        out: dict[str, _Session] = {}
        for sid, info in usage.sessions().items():
            ep = info.entrypoint
            surface = None if ep is None else ("headless" if ep.startswith("sdk") else "interactive")
            out[sid] = s = _Session(sid, info.started, info.ended, info.cwd, None, info.git_branch, surface,
                                    tools=dict(info.tools))
            s.files.update(info.files)  # (every file holding its lines: a damaged one is its gap)

        def session(sid: str | None) -> _Session:
            sid = sid or "unknown"
            s = out.get(sid)
            if s is None:
                s = out[sid] = _Session(sid)
            return s

        # a chain with cost-state lines: its models' costs are the client's (per model, or
        # only the session total: then on a model-less stream), the tokens' own cost 0
        chains: dict[str, tuple[set[str | None], set[str]]] = {}
        deltas = usage.cost_deltas()
        for d in deltas:
            models, unknown = chains.setdefault(d.session_id, (set(), set()))
            models.add(d.model)
            if d.cost_usd is None and d.model is not None:
                unknown.add(d.model)
        for r in usage.responses():
            s = session(r.session_id)
            s.files.add(r.file)
            st = s.stream(r.model, _slot(r.time, _slot(s.started, 0)))
            st.add(r.counters)
            if r.cost_usd is not None:  # 2.0.x: the response's own cost
                st.cost = (st.cost or 0.0) + r.cost_usd
                st.costed += 1
        for d in deltas:
            if d.cost_usd is None:
                continue
            s = session(d.session_id)
            st = s.stream(d.model, _slot(d.time, _slot(s.started, 0)))
            st.cost = (st.cost or 0.0) + d.cost_usd
        for s in out.values():
            models, unknown = chains.get(s.sid, (set(), set()))
            for st in s.streams.values():
                if (st.model in models or None in models) and st.model not in unknown:
                    st.receipt = True  # the chain's deltas are this model's cost (0 in this slot if none)
                    st.cost = st.cost or 0.0
                else:
                    st.receipt = st.costed == st.n  # 2.0.x: every response said what it cost
        return out


class _Codex:
    label = "Codex"  # (how a progress line names it)
    harness = "codex"
    provider = "openai"
    state_v = 5  # codex_usage.STATE_VERSION (2: tool calls, 3: results, 4: calls by response id, 5: seed 2525): an older state re-reads

    @staticmethod
    def reducer(state: dict[str, Any] | None) -> Any:
        from ledger.sources.prefold import reducer

        return reducer("codex", state)

    @staticmethod
    def sessions(usage: Any) -> dict[str, _Session]:
        out: dict[str, _Session] = {}
        for info in usage.sessions():
            headless = info.originator == "codex_exec" or info.source == "exec"
            interactive = info.originator == "codex_cli_rs" or info.source == "cli"
            surface = "headless" if headless else ("interactive" if interactive else None)
            s = out[info.session_id] = _Session(info.session_id, info.started, info.ended, info.cwd,
                                                info.git_repository_url, info.git_branch, surface,
                                                parent=info.forked_from_id, tools=dict(info.tools),
                                                tool_results={k: list(v) for k, v in info.tool_results.items()})
            s.files.update(info.files)
        results = usage.tool_results()
        for sid, tools in usage.tools().items():  # (a thread without a session_meta: by its file name)
            if sid not in out:
                out[sid] = _Session(sid, tools=dict(tools), tool_results=results.get(sid, {}))
        for d in usage.deltas():
            sid = d.session_id or d.chain
            s = out.get(sid)
            if s is None:
                s = out[sid] = _Session(sid)
            s.files.add(d.file)
            s.stream(d.model, _slot(d.time, _slot(s.started, 0))).add(d.counters, d.service_tier)
        return out


class _Gemini:
    label = "Gemini CLI"  # (how a progress line names it)
    harness = "gemini"
    provider = "google"

    @staticmethod
    def reducer(state: dict[str, Any] | None) -> Any:
        from ledger.sources.prefold import reducer

        return reducer("gemini", state)

    @staticmethod
    def sessions(usage: Any) -> dict[str, _Session]:
        # the chats log does not say how the client was started, nor the cwd (only its hash)
        out: dict[str, _Session] = {}
        for sid, info in usage.sessions().items():
            s = out[sid] = _Session(sid, info.started, info.ended, tools=dict(info.tools))
            s.files.update(info.files)
        for r in usage.responses():
            s = out.get(r.session_id)
            if s is None:
                s = out[r.session_id] = _Session(r.session_id)
            s.files.add(r.file)
            s.stream(r.model, _slot(r.time, _slot(s.started, 0))).add(r.counters)
        return out


CLIENTS = {"claude": _Claude, "codex": _Codex, "gemini": _Gemini}


def _prefold(root: str, src: "LogSource") -> tuple[dict[str, list[int]], dict[str, Any]] | None:
    from ledger.sources import prefold
    from ledger.sources.archiveformat import STATE_DIR

    return prefold.load(os.path.join(root, STATE_DIR), src.client, _state_v(src.spec))


def _state_v(spec: Any) -> int:
    """The version of a client's reducer state (its module's STATE_VERSION, kept here so that a
    pass that finds nothing new imports no reducer; tests check they agree)."""
    return getattr(spec, "state_v", 1)


# ---------------------------------------------------------------- the source

class LogSource:
    """One client's archive (`sources/<client>/`) as a source of the index."""

    tables: tuple[sa.Table, ...] = ()  # no per-item work: the pass is done in settle()
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


def _marker(root: str) -> str | None:
    """The signature of the archive's change marker (rewritten by every import that archived
    something): unchanged, the archive is as the last pass saw it."""
    try:
        st = os.stat(os.path.join(root, CHANGED_FILE))
    except OSError:
        return None
    return f"{st.st_mtime_ns}:{st.st_size}:{st.st_ino}"


def archive_files(root: str, links: dict[str, list[Any]] | None = None) -> Iterator[tuple[str, os.stat_result]]:
    """(path below root, stat) of every regular `.jsonl` file of an archive (no symlinks:
    each one where a directory or an archive file is goes to `links` as a problem)."""
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel) if rel else root))
        except OSError:
            continue
        for e in entries:
            r = f"{rel}/{e.name}" if rel else e.name
            try:
                if links is not None and e.is_symlink() and (
                        e.is_dir() or e.name.endswith((".jsonl", ".jsonl" + ZSTD_SUFFIX))):
                    links[r] = [None, f"{LINK_REASON}: not followed (its sessions are not read)"]
                    continue
                if e.is_dir(follow_symlinks=False):
                    if not rel and e.name in ARCHIVE_SKIP:
                        continue
                    stack.append(r)
                elif e.is_file(follow_symlinks=False) and e.name.endswith((".jsonl", ".jsonl" + ZSTD_SUFFIX)):
                    yield r, e.stat(follow_symlinks=False)
            except OSError:
                continue


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
        marker = _marker(root)
        if marker is None and not os.path.isdir(root) and ctx.fresh:
            return False  # (nothing imported, nothing indexed: no query)
        with ctx.txn():
            row = None if ctx.fresh else conn.execute(
                sa.select(state_t.c.state).where(state_t.c.home_id == h, state_t.c.source == src.name)).first()
        cur = orjson.loads(row[0]) if row is not None else {"v": STATE_V, "files": {}}
        # a fresh index starts where the client's first import folded its lines (ledger.sources.prefold)
        pre = None if row is not None or ctx.full else _prefold(root, src)
        if pre is not None:
            cur["files"] = pre[0]
        # the reducer state was folded by an older reducer (it lacks what a newer one counts, e.g.
        # Codex tool calls): the whole archive is read again, once, whether it changed or not
        stale = row is not None and cur.get("rv", 1) != _state_v(src.spec)
        if not ctx.full and not stale and marker is not None and cur.get("marker") == marker:
            # no import archived anything since the last pass: no walk (--full walks). Record
            # runs written in this pass may hold one of the sessions (counted once): relink
            if not self.runs_changed or row is None:
                with ctx.txn():
                    self._report(self._problems() if row is not None else {})
                return False
            with ctx.txn():
                if not _links_changed(conn, h, src, self.source.spec.harness):
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
                    conn.execute(sa.update(state_t).where(state_t.c.home_id == h, state_t.c.source == src.name)
                                 .values(state=orjson.dumps({**cur, "marker": marker}).decode()))
                return False
            # (--full reads the whole archive again: a frame damaged in place keeps the file's
            # size and inode, and only a read finds it, as `ledger verify` does)
            reset = ctx.full or stale or bool(gone) or any(
                rel in known and (files[rel].st_size < known[rel][0] or files[rel].st_ino != known[rel][1])
                for rel in changed)
            reducer_row = None if (reset or row is None) else conn.execute(
                sa.select(state_t.c.state).where(state_t.c.home_id == h,
                                                 state_t.c.source == src.name + "/reducer")).first()
            usage = src.spec.reducer(orjson.loads(reducer_row[0]) if reducer_row is not None
                                     else pre[1] if pre is not None and not reset else None)
            pre = None  # (the fold's parsed state: the reducer holds its own copy; a large one is ~2x its JSON)
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
                got = _feed_file(usage, key, os.path.join(root, rel), start, st.st_size, key != rel)
                if got is None:
                    continue  # unreadable now: tried again next pass (its cursor is not moved)
                end, nread, bad = got
                self.bytes_read += nread
                for offset, reason in bad:
                    problems[rel] = [offset, reason]
                fed = True
                known[rel] = [end, st.st_ino]
            if reset or row is None:
                problems.update((rel, why) for rel, why in _state_problems(root, files).items()
                                if not any(rel.startswith(link + "/") for link in links))
                problems.update(links)
            self._project(conn, h, usage, files, root, reset or row is None, problems)
            now = datetime.now(timezone.utc)
            conn.execute(sa.delete(state_t).where(state_t.c.home_id == h, state_t.c.source.in_(
                [src.name, src.name + "/reducer", src.name + PROBLEMS])))
            rows = [{"home_id": h, "source": src.name, "state": orjson.dumps(
                {"v": STATE_V, "rv": _state_v(src.spec), "files": known, "marker": marker}).decode(),
                "indexed_at": now}]
            if fed or reducer_row is not None or reset or row is None:
                rows.append({"home_id": h, "source": src.name + "/reducer",
                             "state": orjson.dumps(usage.state()).decode(), "indexed_at": now})
            if problems:
                rows.append({"home_id": h, "source": src.name + PROBLEMS, "indexed_at": now,
                             "state": orjson.dumps({"v": 1, "problems": problems}, option=orjson.OPT_SORT_KEYS).decode()})
            conn.execute(sa.insert(state_t), rows)
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

    # ------------------------------------------------------------------------------
    def _project(self, conn: Any, h: int, usage: Any, files: dict[str, os.stat_result], root: str,
                 everything: bool, problems: dict[str, list[Any]] | None = None) -> None:
        src = self.source
        what = f"indexing {src.spec.label} sessions"
        progressline.show(what, 0, 0, "sessions")
        sessions = src.spec.sessions(usage)
        links = _links(conn, h, src.spec.harness, sorted(sessions))
        adopting = _adopting(conn, h, sorted(set(links.values())))
        old = {rid: fp for rid, fp in conn.execute(
            sa.select(sessions_t.c.row_id, sessions_t.c.fingerprint).where(
                sessions_t.c.home_id == h, sessions_t.c.source == src.name))}
        now = datetime.now(timezone.utc)
        from ledger.pricing import price_data_version

        version = price_data_version()
        write: list[tuple[str, _Session, int]] = []
        damaged = {rel[:-len(ZSTD_SUFFIX)] if rel.endswith(ZSTD_SUFFIX) else rel for rel in (problems or {})}
        for sid, s in sessions.items():
            rid = row_id(src.spec.harness, sid)
            s.damaged = len(s.files & damaged)
            linked = links.get(sid)
            fp = _fingerprint(s, f"{ADOPTED}{linked}" if linked in adopting else linked, version)
            if everything or old.get(rid) != fp:
                write.append((rid, s, fp))
        summary = self.ctx.summary
        summary.sessions_new += sum(1 for rid, _, _ in write if rid not in old)
        summary.sessions_updated += sum(1 for rid, _, _ in write if rid in old)
        stale = [rid for rid in old if rid not in {row_id(src.spec.harness, sid) for sid in sessions}]
        drop = stale + [rid for rid, _, _ in write if rid in old]
        for i in range(0, len(drop), LINK_CHUNK):
            chunk = drop[i:i + LINK_CHUNK]
            delete_runs(conn, h, chunk, False)
            conn.execute(sa.delete(sessions_t).where(sessions_t.c.home_id == h, sessions_t.c.row_id.in_(chunk)))
        if not write:
            return
        elsewhere = _held_elsewhere(conn, h, [rid for rid, _, _ in write])
        price = _Pricer(src.spec.provider)
        runs, streams, tools, logs = [], [], [], []
        adopted: list[tuple[str, dict[str, Any]]] = []
        for n, (rid, s, fp) in enumerate(write):
            progressline.show(what, n, len(write), "sessions")
            linked = links.get(s.sid)
            main = min(s.files, key=lambda f: ("/subagents/" in f, len(f), f)) if s.files else None
            if main is not None and main + ZSTD_SUFFIX in files:  # (the archive file's own name)
                main += ZSTD_SUFFIX
            logs.append({"home_id": h, "row_id": rid, "source": src.name, "provider_session_id": s.sid,
                         "linked_run_id": linked, "files": len(s.files),
                         "path": f"{SOURCES_DIR}/{src.client}/{main}" if main else None,
                         "fingerprint": fp, "indexed_at": now})
            if linked is not None and linked not in adopting:
                continue  # the run record is the evidence: counted once, as the run
            if not s.streams:
                continue  # no API response, no cost (a prompt never sent): listed, not a run
            if rid in elsewhere:
                continue  # another home imported the same session first: counted there (issue 11)
            run, st_rows = self._rows(h, linked or rid, s, main, price, now)
            streams.extend(st_rows)
            tools.extend({"home_id": h, "run_id": linked or rid, "tool_name": name, "uses": n,
                          **dict(zip(("ok", "errors", "semantic_errors"), s.tool_results.get(name, (0, 0, 0))))}
                         for name, n in sorted(s.tools.items()))
            if linked is None:
                runs.append(run)
                continue
            # an interactive run whose session was not resolved at its exit: the session's
            # figures become the run's (counted once, as the run); its own streams are marked
            for row in st_rows:
                row["stream_id"] = ADOPTED + row["stream_id"]
            adopted.append((linked, run))
        for linked, _ in adopted:  # (what an earlier projection of the session gave the run)
            conn.execute(sa.delete(streams_t).where(streams_t.c.home_id == h, streams_t.c.run_id == linked,
                                                    streams_t.c.stream_id.like(ADOPTED + "%")))
            conn.execute(sa.delete(tools_t).where(tools_t.c.home_id == h, tools_t.c.run_id == linked))
        for table, rows in ((runs_t, runs), (streams_t, streams), (tools_t, tools), (sessions_t, logs)):
            for i in range(0, len(rows), 2000):
                progressline.show(f"{what}: writing {table.name}", i, len(rows), "rows")
                conn.execute(sa.insert(table), rows[i:i + 2000])
        for linked, run in adopted:  # (after its streams: the report's change log sees the run's update)
            r = runs_t.c
            conn.execute(sa.update(runs_t).where(r.home_id == h, r.run_id == linked).values(
                model=sa.func.coalesce(r.model, run["model"]), indexed_at=now,
                **{k: run[k] for k in (*_RUN_COUNTERS, "cost_usd", "streams", "final_streams", "tool_calls",
                                       "tool_ok", "tool_errors", "tool_semantic_errors")}))

    def _rows(self, h: int, rid: str, s: _Session, main: str | None, price: "_Pricer", now: datetime
              ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        src = self.source
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
            **{c: totals.get(c) for c in _RUN_COUNTERS}, "total_input_tokens": None, "peak_input_tokens": None,
            "context_window_tokens": None, "cost_usd": cost, "provider_session_id": s.sid, "final_answer": None,
            "final_answer_exact": None, "api_retries": 0, "skill_invoked": None,
            "tool_calls": sum(s.tools.values()), "tool_ok": res[0], "tool_errors": res[1],
            "tool_semantic_errors": res[2],
            "path": f"{SOURCES_DIR}/{src.client}/{main}" if main else f"{SOURCES_DIR}/{src.client}",
            "indexed_at": now,
        }
        return run, st_rows


_STREAM_COUNTERS = COUNTERS
_RUN_COUNTERS = COUNTERS


class _Pricer:
    """Per-response estimates, memoised by shape (sessions repeat the same counters often)."""

    def __init__(self, provider: str) -> None:
        from ledger.pricing import estimate_cost

        self.provider = provider
        self.estimate_cost = estimate_cost
        self.memo: dict[tuple, float | None] = {}

    def estimate(self, st: _Stream) -> float | None:
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




def stored_problems(conn: Any, h: int, source: str) -> dict[str, list[Any]]:
    row = conn.execute(sa.select(state_t.c.state).where(state_t.c.home_id == h,
                                                          state_t.c.source == source + PROBLEMS)).first()
    return {} if row is None else parse_problems(row[0])


FEED_CHUNK = 16 << 20  # bytes of a plain archive file fed to the reducer at a time


def _feed_file(usage: Any, key: str, path: str, start: int, size: int, zstd: bool
               ) -> tuple[int, int, list[tuple[int, str]]] | None:
    """Feed an archive file's new content from `start` (a zstd file: its byte offset; a plain
    one: the reducer's offset) to the reducer, in bounded pieces (ledger.sources.zframes);
    (the file's new cursor, bytes read, problems as (byte offset, reason)), or None when it
    cannot be opened. A damaged frame is skipped (frames hold whole lines: what follows is
    read), a frame over the bounds ends the file, a torn last frame waits for the next pass."""
    import mmap

    from ledger.sources import zframes

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    bad: list[tuple[int, str]] = []
    try:
        if not zstd:
            return _feed_plain(usage, key, fd, start, size, bad)
        try:
            buf = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return None
        max_line = zframes.bound("LEDGER_MAX_LINE_BYTES")
        with buf:
            end = start
            carry = b""
            total = usage.offset(key)
            try:
                for f, piece in zframes.inflate(buf, start, "", total):
                    if piece is not None:
                        data = carry + piece if carry else piece
                        cut = data.rfind(b"\n") + 1
                        if cut:
                            usage.feed(key, data[:cut], usage.offset(key))
                        carry = data[cut:]
                        if len(carry) > max_line:
                            bad.append((f.start, f"a line longer than {max_line:,} bytes in the frame at byte "
                                                  f"{f.start:,} (LEDGER_MAX_LINE_BYTES): not read past it"))
                            return size, size - start, bad
                        continue
                    if f.bad is not None:
                        bad.append((f.start, f"the frame of bytes {f.start:,}-{f.end:,} {f.bad}"))
                    end = f.end
            except zframes.OverBound as exc:
                bad.append((exc.offset, exc.reason))
                end = size  # (not read again until the file changes)
            if carry:
                usage.feed(key, carry, usage.offset(key))  # (a torn line: the reducer names it)
            return end, end - start, bad
    finally:
        os.close(fd)


def _feed_plain(usage: Any, key: str, fd: int, start: int, size: int, bad: list[tuple[int, str]]
                ) -> tuple[int, int, list[tuple[int, str]]] | None:
    from ledger.sources.zframes import bound

    max_line = bound("LEDGER_MAX_LINE_BYTES")
    pos = start
    carry = b""
    try:
        while pos < size:
            chunk = os.pread(fd, min(FEED_CHUNK, size - pos), pos)
            if not chunk:
                break
            pos += len(chunk)
            data = carry + chunk if carry else chunk
            cut = data.rfind(b"\n") + 1
            if cut:
                usage.feed(key, data[:cut], usage.offset(key))
            carry = data[cut:]
            if len(carry) > max_line:
                bad.append((pos - len(carry), f"a line longer than {max_line:,} bytes (LEDGER_MAX_LINE_BYTES): "
                                              "not read past it"))
                return size, pos - start, bad
    except OSError:
        return None
    if carry:
        usage.feed(key, carry, usage.offset(key))  # (a torn line: the reducer names it, and waits)
    return pos, pos - start, bad


def _state_problems(root: str, files: dict[str, os.stat_result]) -> dict[str, list[Any]]:
    """The archive files the archive's state files (ledger.sources.archivestate) hold more of than
    the disk: deleted (absent) or truncated (shorter than recorded). Read on a pass that reads
    the whole archive (a fresh index, --full, a file that shrank or vanished)."""
    from ledger.sources.archivestate import recorded_archives

    out: dict[str, list[Any]] = {}
    for rel, want in recorded_archives(root).items():
        st = files.get(rel)
        if st is None:
            out[rel] = [None, f"missing (the archive recorded {want:,} bytes; deleted?)"]
        elif st.st_size < want:
            out[rel] = [st.st_size, f"truncated: {st.st_size:,} of the {want:,} bytes recorded"]
    return out


def _links_changed(conn: Any, h: int, src: LogSource, harness: str) -> bool:
    """Whether a session's link to a run record differs from what log_sessions holds (the rule
    is ledger.index.fresh.links_changed, shared with the small pass)."""
    from ledger.index.fresh import links_changed
    from ledger.index.dbapi import wrap

    if src.name != f"{harness}-log":  # pragma: no cover - (a source named otherwise than its client)
        raise ValueError(src.name)
    return links_changed(wrap(conn).rows, h, harness)


def _links(conn: Any, h: int, harness: str, sids: list[str]) -> dict[str, str]:
    """provider session id -> the run record that holds it (the earliest, when several do)."""
    out: dict[str, str] = {}
    r = runs_t.c
    for i in range(0, len(sids), LINK_CHUNK):
        chunk = sids[i:i + LINK_CHUNK]
        for rid, psid in conn.execute(
                sa.select(r.run_id, r.provider_session_id).where(
                    r.home_id == h, r.source == "record", r.harness == harness,
                    r.provider_session_id.in_(chunk)).order_by(r.run_id)):
            out.setdefault(psid, rid)
    return out


def _adopting(conn: Any, h: int, rids: list[str]) -> set[str]:
    """The linked runs that take their session's figures: interactive run records holding no
    usage of their own (the session was not resolved when the agent exited, issue 33)."""
    r, u = runs_t.c, streams_t.c
    own = sa.select(u.run_id).where(u.home_id == r.home_id, u.run_id == r.run_id,
                                    sa.not_(u.stream_id.like(ADOPTED + "%"))).exists()
    out: set[str] = set()
    for i in range(0, len(rids), LINK_CHUNK):
        out.update(row[0] for row in conn.execute(sa.select(r.run_id).where(
            r.home_id == h, r.source == "record", r.surface == "interactive",
            r.run_id.in_(rids[i:i + LINK_CHUNK]), sa.not_(own))))
    return out


def _fingerprint(s: _Session, linked: str | None, version: str) -> int:
    """A 63-bit hash of everything a session's rows hold (unchanged: not rewritten)."""
    h = hashlib.sha1()
    h.update(orjson.dumps([PROJECTION_V, s.damaged, s.sid, s.started, s.ended, s.cwd, s.repo, s.branch, s.surface, s.parent,
                           sorted(s.tools.items()), sorted(s.tool_results.items()), sorted(s.files), linked,
                           version]))
    for key, st in sorted(s.streams.items()):
        h.update(orjson.dumps([list(key), st.model, st.n, [st.counters[k] for k in COUNTERS], st.cost, st.receipt,
                               [[c.get(k) for k in COUNTERS] for c in st.priced]]))
    return int.from_bytes(h.digest()[:8], "big", signed=True)


def _held_elsewhere(conn: Any, h: int, rids: list[str]) -> set[str]:
    """The sessions of `rids` another home of the index already counts (the same client logs
    imported into two homes, a home and its copy): a session is counted once."""
    from ledger.index import pglocks

    if not rids:
        return set()
    if conn.dialect.name == "sqlite" and conn.execute(sa.text("SELECT count(*) FROM homes")).scalar_one() < 2:
        return set()
    if conn.dialect.name == "postgresql":
        pglocks.lock_copies(conn, rids)
    r = runs_t.c
    out: set[str] = set()
    for i in range(0, len(rids), LINK_CHUNK):
        out.update(row[0] for row in conn.execute(
            sa.select(r.run_id).where(r.home_id != h, r.run_id.in_(rids[i:i + LINK_CHUNK])).distinct()))
    return out
