"""Worker processes that fold records, and their scratch SQLite files.

Large batches are projected in forked worker processes, pipelined with the writes. On
SQLite each worker writes its slice's rows into a scratch SQLite file next to the index (a
copy of a template holding the index's tables, untyped, no index) that the writer copies
with INSERT ... SELECT (bulk.copy_batch): no row crosses the process boundary as Python
objects (unpickling them cost the writer more than inserting them). The files are removed
after use; a dead indexer's are cleaned by the next pass. On other databases (or an
in-memory one) rows come back to the writer.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from typing import Any, Callable, NamedTuple

from ledger.index import db as dbmod
from ledger.index.dbapi import wrap
from ledger.index.project import OUT_TABLES, TOOLS_JSON, TOOLS_JSON_INSERT, Folded, plan

SCRATCH_PREFIX = ".ledger-index-parts-"  # + the indexing process's pid + "-" + random

Fold = Callable[..., Folded]  # source.fold: a module-level function (pickled by name)


class Parts(NamedTuple):
    """A batch projected into scratch files: (scratch file, async result) per slice."""

    parts: list[tuple[str, Any]]


def unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def project_task(args: tuple) -> Folded:
    """One record folded in a worker process (rows come back pickled)."""
    fold, home_id, w, prev, now, encode = args
    return fold(home_id, w, prev, now, encode)


def project_part(args: tuple) -> list[Folded]:
    """Fold a slice of a batch in a worker process and write its rows into a scratch SQLite
    file (a copy of `template`), for the writer to copy with one INSERT ... SELECT per table.
    Returns per record the Folded without its rows."""
    fold, home_id, works, prevs, now, out_path, template = args
    tables: dict[str, list[tuple]] = {k: [] for k in OUT_TABLES}
    tables[TOOLS_JSON] = []
    metas = []
    for w, prev in zip(works, prevs):
        metas.append(fold(home_id, w, prev, now, True, tables))
    shutil.copyfile(template, out_path)
    db = sqlite3.connect(out_path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = OFF")  # scratch: the writer reads it once, then it is deleted
        db.execute("PRAGMA synchronous = OFF")
        db.execute("BEGIN")
        for k, rows in tables.items():
            if rows:
                db.executemany(TOOLS_JSON_INSERT if k == TOOLS_JSON else plan(k)[0], rows)
        db.execute("COMMIT")
    finally:
        db.close()
    return metas


def remove_stale_scratch(directory: str) -> None:
    """Scratch directories left by an indexer that died (its pid is gone) are removed."""
    try:
        names = [n for n in os.listdir(directory) if n.startswith(SCRATCH_PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(SCRATCH_PREFIX):].partition("-")[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (or not ours to signal): leave it
        except ProcessLookupError:
            pass
        except OSError:
            continue
        shutil.rmtree(os.path.join(directory, name), ignore_errors=True)


def scratch_template(directory: str) -> str:
    path = os.path.join(directory, "template.sqlite")
    db = sqlite3.connect(path)
    try:
        db.execute(f"PRAGMA page_size = {dbmod.PAGE_SIZE}")
        db.execute("PRAGMA journal_mode = OFF")  # (a scratch template: no fsync)
        db.execute("PRAGMA synchronous = OFF")
        for name in OUT_TABLES:
            db.execute(f'CREATE TABLE "{name}" ({", ".join(chr(34) + n + chr(34) for n in plan(name)[1])})')
        db.execute(f'CREATE TABLE "{TOOLS_JSON}" (home_id, run_id, tools)')
        db.commit()
    finally:
        db.close()
    return path


class Workers:
    """The pass's pool of forked workers (started on first use) and scratch directory."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._pool: Any = None
        self._scratch: str | None = None  # directory of the workers' scratch files (SQLite)
        self._no_scratch = False
        self._template = ""
        self._parts = 0

    def start(self, conn: Any, fold: Fold, home_id: int, batch: list, prevs: dict[str, Any], now: Any,
              encode: bool) -> Any:
        """Start folding a batch: a Parts (scratch files) or an async result of Folded rows."""
        workers = self.n
        if self._pool is None:
            import multiprocessing as mp

            # fork: the workers inherit the imported modules; they never touch the database
            self._pool = mp.get_context("fork").Pool(workers)
        directory = self._scratch_dir(conn) if encode else None
        if directory is not None:
            # one slice per worker, each written to its own scratch file
            size = -(-len(batch) // workers)
            parts = []
            for i in range(0, len(batch), size):
                self._parts += 1
                out_path = os.path.join(directory, f"part-{self._parts}.sqlite")
                part = batch[i:i + size]
                parts.append((out_path, self._pool.apply_async(project_part, ((
                    fold, home_id, part, [prevs.get(w.name) for w in part], now, out_path,
                    self._template),))))
            return Parts(parts)
        args = [(fold, home_id, w, prevs.get(w.name), now, encode) for w in batch]
        return self._pool.map_async(project_task, args, chunksize=max(1, len(args) // (workers * 4)))

    @staticmethod
    def results(handle: Any) -> tuple[list[Folded], list[str]]:
        """Wait for a started batch: (Folded per record, scratch files holding the rows)."""
        if isinstance(handle, Parts):
            results: list[Folded] = []
            scratch: list[str] = []
            try:
                for out_path, part in handle.parts:
                    scratch.append(out_path)
                    results.extend(part.get())
            except BaseException:
                for out_path, _ in handle.parts:
                    unlink(out_path)
                raise
            return results, scratch
        return handle.get(), []

    def _scratch_dir(self, conn: Any) -> str | None:
        """The workers' scratch directory, next to the SQLite index file (None for an
        in-memory database: rows then travel back to this process)."""
        if self._scratch is None and not self._no_scratch:
            self._no_scratch = True  # until proven otherwise below
            raw = wrap(conn).raw
            database = next((r[2] for r in raw.execute("PRAGMA database_list") if r[1] == "main"), "")
            if not database:  # (an in-memory or temporary database)
                return None
            try:  # json_each (SQLite >= 3.38 has it built in) expands the tool counts
                raw.execute("SELECT value FROM json_each('[1]')").fetchall()
            except sqlite3.Error:
                return None
            directory = os.path.dirname(os.path.abspath(database))
            remove_stale_scratch(directory)
            try:
                self._scratch = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=directory)
                self._template = scratch_template(self._scratch)
            except (OSError, sqlite3.Error):  # no room for scratch files: rows travel back instead
                if self._scratch is not None:
                    shutil.rmtree(self._scratch, ignore_errors=True)
                    self._scratch = None
                return None
            self._no_scratch = False
        return self._scratch

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
