"""A record to read, and the signatures the scan compares: no database, no SQLAlchemy.

Shared by the pass (scan.py, project.py, the workers) and the small SQLAlchemy-free pass
(quickpass.py), so that both hand the projection the same work items.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

from ledger.index.sealing import SeenCursor

PREFIX_BYTES = 4096


# -- signatures -------------------------------------------------------------------------

def sig(st: os.stat_result) -> str:
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"


def files_sig(msig: str, tsig: str, tvalid: bool) -> str:
    """index_cursors.files_sig: manifest.json and terminal.json signatures (`-`: absent), and
    whether the receipt was valid: `size:mtime:ino|size:mtime:ino|1`."""
    return f"{msig}|{tsig}|{1 if tvalid else 0}"


def launcher_dict(pid: int | None, ticks: int | None) -> dict[str, Any] | None:
    """The launcher liveness() reads back from the index's launcher columns."""
    return None if pid is None else {"pid": pid, "start_ticks": ticks}


# -- work items -------------------------------------------------------------------------

@dataclass
class Work:
    """One record to read: what the scan stat()ed, and its light cursor (None: new)."""

    path: str
    name: str
    dsig: str
    esig: str | None
    esize: int | None  # events.jsonl size and inode as stat()ed with esig (None: no file)
    eino: int | None
    cur: SeenCursor | None
    racy: bool
    shard: str
    sealable: bool  # quiet for SEAL_GRACE; cleared when the read finds it racy
    verify: bool = False  # --full: an unchanged events.jsonl signature is not trusted (prefix re-hashed)
    # read and not settled (set by the indexer): sealable only if its launcher is gone for good
    unsettled: bool = False

    def __reduce__(self) -> tuple:
        # sent to the workers as a plain tuple: pickling dataclass state cost ~10 us per record
        return (Work, (self.path, self.name, self.dsig, self.esig, self.esize, self.eino, self.cur, self.racy,
                       self.shard, self.sealable, self.verify, self.unsettled))


class PrevCursor(NamedTuple):
    """An index_cursors row as the pass hands it to the projection (booleans as bool, as
    SQLAlchemy read them; its fields are project.EXPECTED_COLS["index_cursors"])."""

    home_id: int
    run_id: str
    shard: str
    status: str
    problem: str | None
    problem_path: str | None
    settled: bool
    racy: bool
    dir_sig: str | None
    events_sig: str | None
    files_sig: str | None
    context_sig: str | None
    context_ok: bool | None
    events_ino: int | None
    events_offset: int
    torn: bool
    prefix_len: int
    prefix_sha256: str | None
    record_rewrites: int
    fold_state: str | None
    indexed_at: Any  # (as the dialect reads it: SQLite's text; unused by the projection)


_BOOLS = (6, 7, 12, 15)  # settled, racy, context_ok, torn (SQLite reads 0/1)
_CURSOR_SQL = f"SELECT {', '.join(PrevCursor._fields)} FROM index_cursors WHERE home_id = ? AND run_id IN "


def prev_cursors(rows: Callable[[str, Sequence[Any]], list[tuple]], home_id: int, names: list[str]
                 ) -> dict[str, PrevCursor]:
    """The cursor rows of these records (`rows(sql, params)`: a query of the index, as
    dbapi.Conn.rows), by run id: what the projection compares a record with."""
    out: dict[str, PrevCursor] = {}
    if not names:
        return out
    for row in rows(f"{_CURSOR_SQL}({', '.join('?' * len(names))})", (home_id, *names)):
        vals = list(row)
        for i in _BOOLS:
            if vals[i] is not None:
                vals[i] = bool(vals[i])
        out[row[1]] = PrevCursor(*vals)
    return out


def tally(s: Any, batch: list[Work], results: list[Any], prevs: dict[str, Any], out: dict[str, list[Any]],
          cursors: list[Any], damaged: Any) -> None:
    """Count a read batch's outcomes into the pass summary `s` and gather its rows into `out`
    (per table) and `cursors` (the cursor table's list): the one rule of the pass
    (indexer.py) and the small pass (quickpass.py). `results` are project.Folded;
    `damaged(w, problem, prev)` is the source's cursor row of an unreadable item."""
    for w, (rows, problem, racy, rewrites, settled) in zip(batch, results):
        prev = prevs.get(w.name)
        s.records_read += 1
        s.rewritten += rewrites
        w.racy = racy
        if problem is not None:
            if w.racy:
                w.sealable = False
            if prev is not None and prev.status == "damaged" and prev.problem == problem.reason:
                s.unchanged += 1  # (--full re-reads damaged records: still the same damage)
            s.skipped.append(problem)
            cursors.append(damaged(w, problem, prev))
            continue
        if rows:
            for k, v in rows.items():
                out[k].extend(v)
        if not settled:  # (sealable only if found abandoned: scan.RunScan.folded asks)
            w.unsettled = True
        if prev is None:
            s.new += 1
        elif w.racy and prev.dir_sig == w.dsig and prev.events_sig == w.esig and prev.status == "indexed":
            s.unchanged += 1
        else:
            s.updated += 1


# -- a pass ------------------------------------------------------------------------------

@dataclass
class PassContext:
    """What a source's discovery gets for one home's pass."""

    conn: Any
    home: str
    home_id: int
    full: bool  # --full: look into everything, trust no signature alone
    fresh: bool  # an empty database: there are no cursors to look up
    racy_before: int  # ns: a signature this recent may still change within its clock tick
    seal_before: int  # ns: quiet since then, a settled item may be sealed
    summary: Any  # the pass's IndexSummary (counts and problems found while discovering)
    encode: bool  # rows are encoded for SQLite's driver
    txn: Callable[[], AbstractContextManager[Any]]  # a transaction (or the caller's single one)
    ready: Callable[[], None] = lambda: None  # before a source's first write: a fresh build's schema
