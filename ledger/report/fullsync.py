"""A full sync of `report_facts` on SQLite through the driver (issue 10).

A full sync (the first report after a cold index, a new price-data version, `--resync`)
builds the facts of every run. Through SQLAlchemy that cost ~230 us per run at 100,000 runs
(23 s): each run's rows assembled as several 57-key dicts (ledger.report.facts.FactBuilder.rows)
and bound one parameter at a time by Core's executemany. Here, on SQLite only:

- runs, their usage streams and subjects are read with the sqlite3 driver in key order, a
  batch of runs at a time (a key range: the streams and subjects of a batch are one range
  read), and converted as SQLAlchemy's types would convert them (booleans, datetimes);
- a run record's rows (every stream priced in the run's own slot: the usual case) are built
  as tuples in `report_facts`' column order by `record_rows`, which follows FactBuilder.rows
  rule for rule; any other run (an imported session: streams in several slots, each with
  its own estimate) goes through FactBuilder.rows itself;
- the rows are inserted by the driver's executemany.

tests/test_fullsync.py holds it to the SQLAlchemy path: the same table, value for value and
type for type, on generated homes with every shape of run (no usage, several models, unknown
counters, unpriced models, receipts with and without cost, subjects, verdicts, imported
sessions), and `record_rows` equal to FactBuilder.rows on random runs (hypothesis).
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import os
from collections import namedtuple
from datetime import datetime
from types import SimpleNamespace
from typing import Any, Sequence

from ledger import progressline
from ledger.index.dbapi import wrap
from ledger.report import facts as F
from ledger.report.buckets import epoch
from ledger.report.costs import combine_codes, split_known, sum_known
from ledger.report.schema import (
    COUNTER_COLUMNS, ESTIMATED, FACT_COLUMNS, REPORTED, RUN_COLUMNS, SLOT_SECONDS, STREAM_COLUMNS, TOKEN_COLUMNS,
)

# record_rows writes its tuples in this order (ledger.report.schema: checked against the model by
# ledger.report.sync); a new column must be added there too
FACT_COLS = FACT_COLUMNS
RUN_NAMES = RUN_COLUMNS
STREAM_NAMES = STREAM_COLUMNS
RunRow = namedtuple("RunRow", RUN_NAMES)  # type: ignore[misc]
StreamRow = namedtuple("StreamRow", STREAM_NAMES)  # type: ignore[misc]
_BOOL_RUN = tuple(i for i, n in enumerate(RUN_NAMES) if n in ("settled", "ok", "skill_invoked"))
# (indexed_at is copied as stored: the facts compare it with the run's, ledger.report.sync)
_DT_RUN = tuple(i for i, n in enumerate(RUN_NAMES) if n == "created_at")
_RECEIPT = STREAM_NAMES.index("final_receipt")
_SLOT, _EST = STREAM_NAMES.index("slot"), STREAM_NAMES.index("est_cost_usd")
_as_tuple = operator.itemgetter(*FACT_COLS)
TOKENS4 = TOKEN_COLUMNS[:4]
_ZERO_TAIL = (0, 0, 0, 0, 0, 0, None, None, None, None, None, None)  # failed .. run_total_tokens
_ZERO_PARTIALS = (None, None, None)  # run_cost_*_partial
_ZERO_VERDICTS = (0, 0, 0, 0, 0, 0)
_NO_USAGE_MODEL = (None, None, None, None, None, None, None, None, None, None, None, None, None, None, 0)


def _bool(v: Any) -> bool | None:
    return None if v is None else bool(v)  # (SQLAlchemy's Boolean on SQLite)


def _dt(v: Any) -> Any:
    return datetime.fromisoformat(v) if isinstance(v, str) else v  # (its DateTime on SQLite)


def run_row(raw: Sequence[Any]) -> RunRow:
    vals = list(raw)
    for i in _BOOL_RUN:
        vals[i] = _bool(vals[i])
    for i in _DT_RUN:
        vals[i] = _dt(vals[i])
    return RunRow._make(vals)


def stream_row(raw: Sequence[Any]) -> StreamRow:
    vals = list(raw)
    vals[_RECEIPT] = _bool(vals[_RECEIPT])
    return StreamRow._make(vals)


_COUNTERS_AT = STREAM_NAMES.index(COUNTER_COLUMNS[0])
if STREAM_NAMES[_COUNTERS_AT:] != COUNTER_COLUMNS:  # pragma: no cover - the memo key below
    raise RuntimeError("usage_streams' counters are no longer the tail of schema.STREAM_COLUMNS")
_TOKENS_AT = tuple(STREAM_NAMES.index(c) for c in TOKEN_COLUMNS)
_tokens = operator.itemgetter(*_TOKENS_AT)


def _estimate(b: F.FactBuilder, st: Any) -> tuple[float | None, str | None]:
    """FactBuilder._estimate(provider, model, counters), its memo looked up first without
    building the counters (the same key: provider, model, every counter or None)."""
    hit = b._memo.get((st.provider, st.model) + st[_COUNTERS_AT:])
    return hit if hit is not None else b._estimate(st.provider, st.model, F._counters(st))


def _fingerprint1(st: Any) -> int:
    """sync._fingerprint([st]) of a run record's stream (no slot, no estimate of its own)."""
    h = hashlib.sha1(repr((st.stream_id, st.provider, st.model, bool(st.final_receipt), st.cost_usd,
                           st[_COUNTERS_AT:])).encode())
    return int.from_bytes(h.digest()[:8], "big", signed=True)


def _model_row1(b: F.FactBuilder, key: str, st: Any) -> tuple:
    """_model_row of one stream. `0 + x` is what sum([x]) (split_known) computes: the same
    float, bit for bit."""
    e, why = _estimate(b, st)
    est = None if e is None else 0 + e
    c = st.cost_usd
    if st.final_receipt and c is not None:
        auto, basis = c, REPORTED  # (sum_known([c]) is c itself)
    else:
        auto, basis = est, (ESTIMATED if est is not None else None)
    return (key, key or None, *_tokens(st), None if c is None else 0 + c, est, auto, basis,
            why if est is None else None, None, None, None, _fingerprint1(st))


def _model_row(b: F.FactBuilder, key: str, group: list[Any]) -> tuple:
    """(model_key, model, 5 tokens, cost reported / estimated / auto, basis, unpriced,
    partial reported / estimated / auto, fingerprint): FactBuilder.rows' per-model row for
    streams without a cached estimate."""
    if len(group) == 1:
        return _model_row1(b, key, group[0])
    fp = F._fingerprint(group)
    toks = []
    for c in TOKEN_COLUMNS:
        vals = [v for v in (getattr(st, c) for st in group) if v is not None]
        toks.append(sum(vals) if vals else None)
    est_by_stream = [_estimate(b, st) for st in group]
    est, est_part = split_known(e for e, _ in est_by_stream)
    unpriced = next((why for e, why in est_by_stream if e is None), None)
    reported, reported_part = split_known(st.cost_usd for st in group)
    receipts = [st.cost_usd if st.final_receipt and st.cost_usd is not None else None for st in group]
    if all(r is not None for r in receipts):
        auto, auto_part, basis = sum_known(receipts), None, REPORTED
    elif all(r is None for r in receipts):
        auto, auto_part, basis = est, est_part, (ESTIMATED if est is not None else None)
    else:
        parts = [(r, REPORTED) if r is not None else (e, ESTIMATED) for r, (e, _) in zip(receipts, est_by_stream)]
        auto, auto_part = split_known(p for p, _ in parts)
        basis = combine_codes(c for _, c in parts) if auto is not None else None
    return (key, key or None, *toks, reported, est, auto, basis, unpriced if est is None else None,
            reported_part, est_part, auto_part, fp)


# indexes into _model_row's tuple
_M_KEY, _M_MODEL, _M_TOK, _M_COST, _M_BASIS, _M_UNPRICED, _M_PART, _M_FP = 0, 1, 2, 7, 10, 11, 12, 15
_MODE_AT = {"reported": 0, "estimated": 1, "auto": 2}  # within cost / partial triples


def _run_costs(models: list[tuple]) -> tuple[tuple, tuple]:
    """(run cost reported / estimated / auto, their partials): sync._run_costs on tuples."""
    if len(models) == 1:  # (split_known of one figure: `0 + x`; its partial, sum_known: itself)
        m = models[0]
        c, p = m[_M_COST:_M_COST + 3], m[_M_PART:_M_PART + 3]
        return (tuple(None if v is None else 0 + v for v in c),
                tuple(q if v is None else None for v, q in zip(c, p)))
    totals, parts = [], []
    for mode in ("reported", "estimated", "auto"):
        i = _MODE_AT[mode]
        total, part = split_known(m[_M_COST + i] for m in models)
        if total is None:
            known = [m[_M_COST + i] if m[_M_COST + i] is not None else m[_M_PART + i] for m in models]
            part = sum_known(v for v in known if v is not None)
        totals.append(total)
        parts.append(part)
    return tuple(totals), tuple(parts)


def record_rows(b: F.FactBuilder, run: Any, streams: Sequence[Any], subjects: Sequence[str]) -> list[tuple]:
    """The fact rows of a run whose streams are all in its own slot, none with an estimate of
    its own (a run record), as tuples in FACT_COLS order: FactBuilder.rows(run, streams, {},
    subjects) without the dicts."""
    created_s = epoch(run.created_at)
    slot = created_s // SLOT_SECONDS
    by_model: dict[str, list[Any]] = {}
    for st in streams:
        by_model.setdefault(st.model or "", []).append(st)
    settled = bool(run.settled)
    outcome = F.run_outcome(run.outcome, settled, run.state)
    never_usage = not by_model and run.harness == F.COMMAND_HARNESS
    if by_model:
        models = [_model_row(b, key, by_model[key]) for key in sorted(by_model)]
    else:
        models = [("", *_NO_USAGE_MODEL)]
    run_model = run.model
    if run_model is None:
        best = max((m for m in models if m[_M_MODEL] is not None),
                   key=lambda m: (sum(v or 0 for v in m[_M_TOK:_M_TOK + 4]), m[_M_KEY]), default=None)
        run_model = best[_M_MODEL] if best is not None else None
    names = sorted({m[_M_MODEL] for m in models if m[_M_MODEL]} | ({run_model} if run_model else set()))
    costs, partials = _run_costs(models)
    gaps = run.evidence_gaps or 0
    tok_vals = [v for m in models for v in m[_M_TOK:_M_TOK + 4] if v is not None]
    ok, invoked = run.ok, run.skill_invoked
    head = (run.home_id, run.run_id)
    common = (run.indexed_at, 1 if settled else 0, run.state)
    common2 = (run.harness, run.source)
    models_text = "|" + "|".join(names) + "|"
    common4 = (run.skill, run.repo, run.host, run.provider_session_id, subjects[0] if subjects else None,
               len(subjects), outcome)
    first_tail = (int(outcome == "failed"), int(outcome == "interrupted"), int(outcome == "abandoned"),
                  int(gaps > 0), gaps, int(not streams and not never_usage), run.duration_ms, *costs,
                  combine_codes(m[_M_BASIS] for m in models), sum(tok_vals) if tok_vals else None)
    first_verdicts = (int(ok is not None), int(ok is True), int(invoked is not None), int(invoked is True),
                      run.tool_calls or 0, (run.tool_errors or 0) + (run.tool_semantic_errors or 0))
    out = []
    for j, m in enumerate(models):
        first = j == 0
        out.append((slot, *head, m[_M_KEY], created_s, 1 if first else 0, *common, m[_M_FP], *common2,
                    1 if first and not never_usage else 0, run_model, m[_M_MODEL], models_text, *common4,
                    *(first_tail if first else _ZERO_TAIL), *m[_M_TOK:_M_TOK + 5], *m[_M_COST:_M_COST + 4],
                    m[_M_UNPRICED], *(partials if first else _ZERO_PARTIALS), *m[_M_PART:_M_PART + 3],
                    *(first_verdicts if first else _ZERO_VERDICTS)))
    return out


def fact_tuples(b: F.FactBuilder, run: Any, streams: Sequence[Any], subjects: Sequence[str]) -> list[tuple]:
    """The run's fact rows as tuples: record_rows for a run record's shape, else FactBuilder.rows."""
    if all(st.slot is None and st.est_cost_usd is None for st in streams):
        return record_rows(b, run, streams, subjects)
    ns = SimpleNamespace(**run._asdict())  # (verdict_facts reads a plain object's __dict__)
    return [_as_tuple(d) for d in b.rows(ns, streams, {}, subjects)]


def insert_facts(conn: Any, rows: Sequence[tuple]) -> None:
    """Fact tuples (FACT_COLS order) into report_facts: the one insert of every sync (an
    executemany on SQLite, COPY on PostgreSQL: ledger.index.dbapi.Conn.insert_rows)."""
    wrap(conn).insert_rows("report_facts", FACT_COLS, rows)


BATCH = 2000
PARALLEL_AT = 20_000  # a home with more runs is built by two processes (this one and a fork)
CHILD_SHARE = 0.55  # of the runs, the forked process's (this one also copies its rows in)
# runs in the order of their facts' key (slot first): the facts' b-tree is then filled by
# appending (in run-id order, i.e. at random, the same inserts cost ~3x)
_RUNS = f"SELECT {', '.join(RUN_NAMES)} FROM runs WHERE home_id = ?"
_AFTER = " AND (created_at > ? OR (created_at = ? AND run_id > ?))"
_BEFORE = " AND (created_at < ? OR (created_at = ? AND run_id < ?))"
_FROM = " AND (created_at > ? OR (created_at = ? AND run_id >= ?))"
_ORDER = " ORDER BY created_at, run_id LIMIT ?"
_STREAMS = (f"SELECT {', '.join(STREAM_NAMES)} FROM usage_streams WHERE home_id = ? "
            "AND run_id IN (SELECT value FROM json_each(?)) ORDER BY run_id, stream_id")
_SUBJECTS = ("SELECT run_id, selector FROM subjects WHERE home_id = ? "
             "AND run_id IN (SELECT value FROM json_each(?)) ORDER BY run_id, position")
_CREATED = RUN_NAMES.index("created_at")
_KEY = operator.itemgetter(0, 1, 2, 3)  # slot, home_id, run_id, model_key
_SIGNATURE = "SELECT count(*), max(indexed_at), max(created_at) FROM runs WHERE home_id = ?"


def _build_range(raw: Any, b: F.FactBuilder, home: int, start: tuple | None, stop: tuple | None,
                 emit: Any, total: int = 0) -> None:
    """The fact rows of the home's runs from `start` (a (created_at, run_id) key, inclusive)
    to `stop` (exclusive), a batch at a time, each batch sorted by the facts' key, to `emit`."""
    import orjson

    last: tuple | None = None
    while True:  # keyset pagination: memory stays flat
        sql, params = _RUNS, [home]
        if last is not None:
            sql, params = sql + _AFTER, params + [last[0], last[0], last[1]]
        elif start is not None:
            sql, params = sql + _FROM, params + [start[0], start[0], start[1]]
        if stop is not None:
            sql, params = sql + _BEFORE, params + [stop[0], stop[0], stop[1]]
        progressline.show("building the report tables", b.stats.rebuilt, total, "runs")
        batch = raw.execute(sql + _ORDER, (*params, BATCH)).fetchall()
        if not batch:
            return
        last = (batch[-1][_CREATED], batch[-1][1])
        ids = orjson.dumps([r[1] for r in batch])
        streams: dict[str, list[Any]] = {}
        for r in raw.execute(_STREAMS, (home, ids)):
            streams.setdefault(r[1], []).append(stream_row(r))
        subjects: dict[str, list[str]] = {}
        for rid, sel in raw.execute(_SUBJECTS, (home, ids)):
            subjects.setdefault(rid, []).append(sel)
        rows: list[tuple] = []
        for r in batch:
            run = run_row(r)
            rows.extend(fact_tuples(b, run, streams.get(run.run_id, ()), subjects.get(run.run_id, ())))
        b.stats.rebuilt += len(batch)
        rows.sort(key=_KEY)
        emit(rows)


_ALIASES = itertools.count()


class _Part:
    """The runs from `start` on, built by a forked process into a scratch SQLite file that
    the parent copies in. The child reads the index through its own read-only connection:
    the parent holds the write lock, so the committed runs it sees are the parent's (checked:
    the runs' count and latest stamps must agree, else the child refuses and the parent
    builds the part itself, as it does when the child fails in any way)."""

    def __init__(self, index_path: str, b: F.FactBuilder, home: int, start: tuple, signature: tuple) -> None:
        import tempfile

        from ledger.index.workers import SCRATCH_PREFIX, remove_stale_scratch

        # (the indexer's scratch convention: a directory named by this pid, removed by the
        # next pass or sync if this process dies before it removes it)
        directory = os.path.dirname(index_path)
        remove_stale_scratch(directory)
        self.dir = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=directory)
        self.path = os.path.join(self.dir, "facts.sqlite")
        rfd, wfd = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns
            os.close(rfd)
            code = 1
            try:
                import orjson

                got = self._child(index_path, b, home, start, signature)
                os.write(wfd, orjson.dumps(got))  # (a few bytes: one atomic pipe write)
                code = 0
            except BaseException:  # noqa: BLE001 - the parent builds the part itself
                pass
            finally:
                os._exit(code)
        os.close(wfd)
        self.rfd = rfd

    def _child(self, index_path: str, b: F.FactBuilder, home: int, start: tuple, signature: tuple) -> dict:
        import sqlite3

        from pathlib import Path

        from ledger.index import db as dbmod

        base = (b.stats.rebuilt, b.stats.priced_streams)  # (the counts so far are the parent's)
        src = sqlite3.connect(dbmod._ro_uri(Path(index_path)), uri=True, isolation_level=None)
        src.execute(f"PRAGMA busy_timeout = {dbmod.BUSY_TIMEOUT_MS}")
        src.execute("BEGIN")
        if tuple(src.execute(_SIGNATURE, (home,)).fetchone()) != signature:
            return {"ok": False}
        out = sqlite3.connect(self.path, isolation_level=None)
        out.execute("PRAGMA journal_mode = OFF")  # scratch: read once by the parent, then deleted
        out.execute("PRAGMA synchronous = OFF")
        out.execute(f"CREATE TABLE facts ({', '.join(FACT_COLS)})")
        out.execute("BEGIN")
        insert = f"INSERT INTO facts VALUES ({', '.join('?' * len(FACT_COLS))})"
        _build_range(src, b, home, start, None, lambda rows: out.executemany(insert, rows))
        out.execute("COMMIT")
        out.close()
        return {"ok": True, "rebuilt": b.stats.rebuilt - base[0], "priced": b.stats.priced_streams - base[1]}

    def result(self) -> dict:
        """The child's summary ({"ok": False} when it refused or failed)."""
        import orjson

        data = b""
        while True:
            chunk = os.read(self.rfd, 65536)
            if not chunk:
                break
            data += chunk
        os.close(self.rfd)
        _, status = os.waitpid(self.pid, 0)
        try:
            got = orjson.loads(data) if status == 0 and data else {"ok": False}
        except orjson.JSONDecodeError:
            got = {"ok": False}
        return got

    def copy_into(self, raw: Any) -> None:
        """INSERT ... SELECT from the attached scratch file (~4x cheaper than an executemany
        of its rows). ATTACH is allowed in a transaction, DETACH only after it: the
        connection's close (at the end of ops.writing) lets the file go."""
        import sqlite3

        alias = f"ledger_facts_part_{os.getpid()}_{next(_ALIASES)}"
        cols = ", ".join(FACT_COLS)
        raw.execute(f"ATTACH DATABASE ? AS {alias}", (self.path,))
        raw.execute(f"INSERT INTO main.report_facts ({cols}) SELECT {cols} FROM {alias}.facts")
        try:
            raw.execute(f"DETACH DATABASE {alias}")
        except sqlite3.OperationalError:
            pass  # ("database is locked" inside the transaction; unlinked next, gone at close)

    def remove(self) -> None:
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


def _index_path(raw: Any) -> str | None:
    for _, name, path in raw.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return path or None  # ('' for an in-memory or temporary database)
    return None


def _busy() -> bool:
    """No core to spare right now (the import's rule, ledger.sources.archivefork): a fork would
    only share this process's core and add the copy of its rows."""
    from ledger.sources.archivefork import busy

    return busy(os.cpu_count() or 1)


def write_all(raw: Any, b: F.FactBuilder, parallel: bool = True) -> None:
    """Insert the facts of every run (report_facts is empty), reading and writing through
    the sqlite3 connection `raw` inside the caller's transaction. A home of PARALLEL_AT runs
    or more is built by two processes when the machine has a second core."""
    # the facts' secondary indexes are dropped and made again after the inserts (in this
    # transaction): one sort per index instead of a b-tree insert per row (~3x cheaper)
    indexes = raw.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'report_facts' "
                          "AND sql IS NOT NULL ORDER BY name").fetchall()
    for name, _ in indexes:
        raw.execute(f'DROP INDEX "{name}"')
    insert = lambda rows: insert_facts(raw, rows)  # noqa: E731
    path = _index_path(raw) if parallel and (os.cpu_count() or 1) > 1 and hasattr(os, "fork") else None
    homes = [h for (h,) in raw.execute("SELECT home_id FROM homes ORDER BY home_id").fetchall()]
    for home in homes:
        signature = tuple(raw.execute(_SIGNATURE, (home,)).fetchone())
        n = signature[0]
        split = None
        if path is not None and n >= PARALLEL_AT and not _busy():
            split = raw.execute("SELECT created_at, run_id FROM runs WHERE home_id = ? ORDER BY created_at, run_id "
                                "LIMIT 1 OFFSET ?", (home, int(n * (1 - CHILD_SHARE)))).fetchone()
        if split is None:
            _build_range(raw, b, home, None, None, insert, n)
            continue
        part = _Part(path, b, home, tuple(split), signature)
        try:
            _build_range(raw, b, home, None, tuple(split), insert, n)
            got = part.result()
            if got.get("ok"):
                part.copy_into(raw)
                b.stats.rebuilt += got["rebuilt"]
                b.stats.priced_streams += got["priced"]
            else:
                _build_range(raw, b, home, tuple(split), None, insert)
        finally:
            part.remove()
    for _, sql in indexes:
        raw.execute(sql)
    progressline.done()
