"""`ledger push --to s3://bucket/prefix`: a home's records into a bucket (layout: ledger.bucket).

What is pushed, and when a file waits or is a conflict, are the directory store's rules
(ledger.store: its walk of the home, complete lines and frames only, receipts whole, blobs
after their receipt, provider-session.json followed until the run settles). What differs is
how: a file cannot be extended in a bucket, so each push adds objects that hold the new
pieces (a whole file, or the new bytes of an append-only one) and one log entry naming them.

What the home has pushed is the fold of its own log (`seq`, then every file's end and hashes);
the home keeps that fold, with the stat of what it verified, in `.bucket-push-<id>.json` so
that a push reads only what changed. The fold is checked against the log first: entries a
killed push wrote after its last save are folded in; a fold the log does not have (another
bucket at the same name) is thrown away and the log read from its start.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ledger.bucket.client import POOL, Bucket, NotFound, is_bucket_url
from ledger.errors import LedgerError
from ledger.store.destination import COPIED_ID_HINT
from ledger.store.layout import STORE_KIND, STORE_VERSION
from ledger.store.push import pushable_home, pushed_home_uid
from ledger.store.reads import PREFIX_BYTES, TAIL_BYTES, _frames_end, _lines_end, _open_regular, _pread, _whole_json
from ledger.store.summary import Progress, PushSummary
from ledger.store.walk import LINES, ONCE, REPLACE, TERMINAL, _Item, _Walk, push_in_order

MARKER = "ledger-store.json"
MARKER_BYTES = json.dumps({"schema_version": STORE_VERSION, "kind": STORE_KIND, "layout": "objects"}).encode() + b"\n"
LOG_VERSION = 1
STATE_VERSION = 1
BATCH_OBJECTS = 1000  # objects per log entry (a killed push loses at most one entry's uploads)
BATCH_BYTES = 64 << 20


def home_dir(uid: str) -> str:
    return f"homes/{uid}/"


def log_key(uid: str, seq: int) -> str:
    return f"homes/{uid}/log/{seq:012d}.json"


def log_seq(key: str) -> int | None:
    name = key.rsplit("/", 1)[-1]
    stem = name[:-len(".json")] if name.endswith(".json") else ""
    return int(stem) if len(stem) == 12 and stem.isdigit() else None


def object_key(uid: str, sha: str) -> str:
    return f"homes/{uid}/objects/{sha[:2]}/{sha}"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_marker(b: Bucket, create: bool) -> None:
    """The store's marker: written once by the first push (every push writes the same bytes,
    so a lost race is harmless); a reader only checks it."""
    try:
        doc = json.loads(b.get(MARKER))
    except NotFound:
        if not create:
            raise LedgerError(f"{b.url} is not a ledger record store (no {MARKER}; nothing was pushed there)",
                              hint=f"push a home into it first: `ledger push --to {b.url}`") from None
        b.put_new(MARKER, MARKER_BYTES)
        return
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or doc.get("kind") != STORE_KIND or doc.get("layout") != "objects":
        raise LedgerError(f"{b.url}/{MARKER} is not a ledger store marker",
                          hint="choose another prefix: s3://BUCKET/PREFIX")
    if doc.get("schema_version") != STORE_VERSION:
        raise LedgerError(f"the store {b.url} has layout version {doc.get('schema_version')!r}; this ledger "
                          f"reads version {STORE_VERSION}", hint="upgrade ledger (`pip install -U ledger`)")


def read_log(b: Bucket, key: str) -> dict[str, Any]:
    try:
        doc = json.loads(b.get(key))
    except (NotFound, ValueError):
        doc = None
    if not isinstance(doc, dict) or doc.get("v") != LOG_VERSION or not isinstance(doc.get("objects"), list):
        raise LedgerError(f"the push log entry {b.url}/{key} is damaged or missing",
                          hint="restore it from a backup of the bucket (a log entry is written once)")
    return doc


def fold(state: dict[str, Any], doc: dict[str, Any]) -> None:
    """What a log entry adds to what the home has pushed."""
    for obj in doc["objects"]:
        for rel, _op, at, n, head, tail, sha in obj["pieces"]:
            state["files"][rel] = [at + n, sha, head, tail, None]
    state["runs"].update(doc.get("runs") or {})
    state["seq"] = doc["seq"]


def empty_state(url: str, uid: str) -> dict[str, Any]:
    return {"v": STATE_VERSION, "url": url, "home_id": uid, "seq": 0, "files": {}, "runs": {}}


class _Pusher:
    def __init__(self, b: Bucket, home: str, uid: str, summary: PushSummary, state: dict[str, Any],
                 state_path: str, full: bool) -> None:
        self.b, self.home, self.uid, self.s = b, home, uid, summary
        self.state, self.state_path, self.full = state, state_path, full
        self.pool = ThreadPoolExecutor(POOL)
        self.futures: list[Future[bool]] = []
        self.objects: list[dict[str, Any]] = []  # the next log entry
        self.runs: dict[str, str] = {}  # settled runs wholly pushed by it (their signatures)
        self.stats: dict[str, list[int]] = {}  # files verified: their stat, kept once the entry is written
        self.pending = 0
        self.dirty = False  # the fold or the stats changed since the state was saved
        batch = os.environ.get("LEDGER_BUCKET_BATCH", "")  # (tests: many log entries from a small home)
        self.batch = int(batch) if batch.isdigit() and int(batch) > 0 else BATCH_OBJECTS

    # -- one file: (outcome, piece, bytes); a piece is [rel, op, at, n, head, tail, sha]
    def plan(self, item: _Item) -> tuple[str, list[Any] | None, bytes]:
        rel = item.rel
        try:
            fd = _open_regular(os.path.join(self.home, rel))
        except FileNotFoundError:
            return "gone", None, b""
        except OSError as exc:
            self.s.skipped.append({"path": rel, "reason": f"cannot be read ({exc.strerror})"})
            return "skipped", None, b""
        try:
            st = os.fstat(fd)
            size = st.st_size
            have = self.state["files"].get(rel)
            mark = [st.st_ino, size, st.st_mtime_ns]
            if have is not None and have[4] == mark and not self.full:
                self.s.unchanged += 1
                return "unchanged", None, b""
            if item.kind in (ONCE, REPLACE):
                return self._plan_whole(item, fd, size, have, mark)
            return self._plan_append(item, fd, size, have, mark)
        finally:
            os.close(fd)

    def _plan_whole(self, item: _Item, fd: int, size: int, have: list[Any] | None,
                    mark: list[int]) -> tuple[str, list[Any] | None, bytes]:
        rel = item.rel
        data = _pread(fd, size, 0)
        sha = sha256(data)
        if have is not None and have[1] == sha:
            self.stats[rel] = mark
            self.s.unchanged += 1
            return "unchanged", None, b""
        if have is None and not item.ready:
            self.s.waiting += 1  # (a blob of an unsettled run: its receipt follows it)
            return "waiting", None, b""
        if rel.endswith(".json") and not _whole_json(fd, size):
            self.s.waiting += 1  # (a receipt being written in place)
            return "waiting", None, b""
        if have is None:
            self.s.copied += 1
            return "copied", [rel, "new", 0, size, None, None, sha], data
        run = rel.rsplit("/", 1)[0]
        if item.kind == REPLACE and f"{run}/{TERMINAL}" not in self.state["files"]:
            self.s.replaced += 1
            return "replaced", [rel, "replace", 0, size, None, None, sha], data
        self.s.conflicts.append({"path": rel, "side": "home", "reason": "differs from the store's copy (a file "
                                 "written once was changed in the home)"})
        return "conflict", None, b""

    def _plan_append(self, item: _Item, fd: int, size: int, have: list[Any] | None,
                     mark: list[int]) -> tuple[str, list[Any] | None, bytes]:
        rel = item.rel
        start = 0
        if have is not None:
            start = have[0]
            if size < start or _head(fd, start) != have[2] or _tail(fd, start) != have[3]:
                self.s.conflicts.append({"path": rel, "side": "home", "reason": "the store's copy is not the start "
                                         "of the home's file (the home's file was rewritten or shrank)"})
                return "conflict", None, b""
        end = _lines_end(fd, start, size) if item.kind == LINES else _frames_end(fd, start, size)
        if end <= start and have is not None:
            self.stats[rel] = mark
            self.s.unchanged += 1
            return "unchanged", None, b""
        if end == 0 and size:
            self.s.waiting += 1  # (only a torn first line or frame so far)
            return "waiting", None, b""
        if end == size:
            self.stats[rel] = mark
        data = _pread(fd, end - start, start)
        head, tail = _head(fd, end), _tail(fd, end)
        if have is None:
            self.s.copied += 1
            return "copied", [rel, "new", 0, end, head, tail, sha256(data)], data
        self.s.extended += 1
        return "extended", [rel, "append", start, end - start, head, tail, sha256(data)], data

    # -- objects and the log
    def add(self, planned: list[tuple[list[Any], bytes]]) -> None:
        """One object holding these pieces, uploaded in the background."""
        data = b"".join(d for _, d in planned)
        sha = sha256(data)
        key = object_key(self.uid, sha)
        self.objects.append({"key": key, "sha": sha, "size": len(data), "pieces": [p for p, _ in planned]})
        self.futures.append(self.pool.submit(self.b.put_new, key, data))
        self.s.bytes += len(data)
        self.pending += len(data)
        if len(self.objects) >= self.batch or self.pending >= BATCH_BYTES:
            self.commit()

    def commit(self) -> None:
        """Wait for the objects, then write the log entry naming them (never before: a reader
        that sees an entry finds its objects), then save the fold."""
        futures, self.futures = self.futures, []
        for f in futures:
            f.result()  # (a LedgerError from a failed upload stops the push here)
        if self.objects or self.runs:
            seq = self.state["seq"] + 1
            doc = {"v": LOG_VERSION, "home_id": self.uid, "seq": seq, "objects": self.objects, "runs": self.runs}
            data = json.dumps(doc, separators=(",", ":")).encode()
            key = log_key(self.uid, seq)
            if not self.b.put_new(key, data) and self.b.get(key) != data:
                # (a retried PUT whose first try landed reads back the same bytes: that is ours)
                raise LedgerError(f"another push of the home {self.uid} wrote {self.b.url}/{key} meanwhile",
                                  hint="push from one place at a time; push again (it resumes from the log)")
            fold(self.state, doc)
            self.dirty = True
        for rel, mark in self.stats.items():
            ent = self.state["files"].get(rel)
            if ent is not None and ent[4] != mark:
                ent[4] = mark
                self.dirty = True
        self.objects, self.runs, self.stats, self.pending = [], {}, {}, 0
        if self.dirty:  # (a push with nothing new writes nothing, here either)
            save_state(self.state_path, self.state)
            self.dirty = False

    # -- a run, an archived log
    def push_run(self, rrel: str, walk: _Walk) -> None:
        files, sig = walk.run_listing(rrel)
        if sig is not None and self.state["runs"].get(rrel) == sig and not self.full:
            self.s.unchanged += len(files)
            return
        planned, outcomes = [], []
        for item in walk.run_items(rrel, files):
            outcome, piece, data = self.plan(item)
            outcomes.append(outcome)
            if piece is not None:
                planned.append((piece, data))
        settled = sig is not None and any(f.endswith("/" + TERMINAL) for f in files) and \
            all(o in ("copied", "extended", "unchanged", "replaced") for o in outcomes)
        if planned:
            if settled:
                self.runs[rrel] = sig  # type: ignore[assignment]
            self.add(planned)
        elif settled and self.state["runs"].get(rrel) != sig:
            self.state["runs"][rrel] = sig  # (nothing new: only this home's own bookkeeping)
            self.dirty = True

    def push_one(self, item: _Item) -> str:
        outcome, piece, data = self.plan(item)
        if piece is not None:
            self.add([(piece, data)])
        return outcome

    push_archive = push_one  # (an archived log is one more file here)

    def mark_changed(self, client: str) -> None:
        pass  # (a bucket's reader follows the push log: no change marker to move)


def _head(fd: int, end: int) -> str:
    return sha256(_pread(fd, min(PREFIX_BYTES, end), 0))


def _tail(fd: int, end: int) -> str:
    t = min(TAIL_BYTES, end)
    return sha256(_pread(fd, t, end - t))


def state_path(home: str, b: Bucket) -> str:
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or ""
    return os.path.join(home, f".bucket-push-{sha256((endpoint + ' ' + b.url).encode())[:16]}.json")


def load_state(path: str, url: str, uid: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except (OSError, ValueError):
        return empty_state(url, uid)
    if isinstance(doc, dict) and doc.get("v") == STATE_VERSION and doc.get("url") == url and \
            doc.get("home_id") == uid and isinstance(doc.get("files"), dict):
        return doc
    return empty_state(url, uid)


def save_state(path: str, state: dict[str, Any]) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        data = json.dumps(state, separators=(",", ":")).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        # (no fsync: a state lost or torn by a crash is rebuilt from the log, see reconcile)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def reconcile(b: Bucket, uid: str, state: dict[str, Any]) -> list[str]:
    """Bring the home's fold up to its log; the log's keys read (for --full)."""
    seq = state["seq"]
    after = log_key(uid, seq - 1) if seq > 1 else None
    keys = [k for k in b.list(f"homes/{uid}/log/", after=after) if log_seq(k) is not None]
    if seq and (not keys or log_seq(keys[0]) != seq):
        # the log does not hold what the fold says was pushed (a new bucket at the same name)
        state.update(empty_state(state["url"], uid))
        keys = [k for k in b.list(f"homes/{uid}/log/") if log_seq(k) is not None]
    for k in keys:
        n = log_seq(k)
        if n is not None and n > state["seq"]:
            if n != state["seq"] + 1:
                raise LedgerError(f"the push log of {b.url}/{home_dir(uid)} misses entry {state['seq'] + 1}",
                                  hint="restore it from a backup of the bucket (a log entry is written once)")
            fold(state, read_log(b, k))
    return keys


def verify_objects(b: Bucket, uid: str, summary: PushSummary) -> None:
    """--full: every object the log names is got again and must hash to its name."""
    keys = [k for k in b.list(f"homes/{uid}/log/") if log_seq(k) is not None]
    pool = ThreadPoolExecutor(POOL)
    try:
        for k in keys:
            doc = read_log(b, k)
            got = pool.map(lambda o: (o, _get_or_none(b, o["key"])), doc["objects"])
            for obj, data in got:
                if data is None or sha256(data) != obj["sha"]:
                    what = "is missing" if data is None else "changed after it was pushed"
                    for piece in obj["pieces"]:
                        summary.conflicts.append({"path": piece[0], "side": "store",
                                                  "reason": f"the store's object {b.key(obj['key'])} {what}"})
    finally:
        pool.shutdown()


def _get_or_none(b: Bucket, key: str) -> bytes | None:
    try:
        return b.get(key)
    except NotFound:
        return None


def push_bucket(home: str | os.PathLike[str], target: str, *, progress: Progress | None = None,
                full: bool = False) -> PushSummary:
    from ledger.home import HOME_ID_FILE
    from ledger.store.writes import _Lock

    assert is_bucket_url(target)
    t0 = time.perf_counter()
    home_abs, here = pushable_home(home)
    b = Bucket(target)
    check_marker(b, create=True)
    uid = pushed_home_uid(home_abs)
    _check_pushed_from(b, uid, home_abs, here)
    summary = PushSummary(home=home_abs, home_id=uid, dest=b.url)
    spath = state_path(home_abs, b)
    with _Lock(spath[:-len(".json")] + ".lock"):
        state = load_state(spath, b.url, uid)
        if full:
            state = empty_state(b.url, uid)
            verify_objects(b, uid, summary)
        before = state["seq"]
        reconcile(b, uid, state)
        p = _Pusher(b, home_abs, uid, summary, state, spath, full)
        p.dirty = full or state["seq"] != before
        try:
            walk = _Walk(home_abs, summary.skipped)
            p.push_one(_Item(HOME_ID_FILE, ONCE))
            total = push_in_order(p, walk, summary, progress)
            p.commit()
        finally:
            p.pool.shutdown(wait=True, cancel_futures=True)
    if progress is not None:
        progress(total, total)
    summary.seconds = time.perf_counter() - t0
    return summary


def _check_pushed_from(b: Bucket, uid: str, home: str, here: tuple[str, str]) -> None:
    """The store's copy of a home is pushed from one place (as ledger.store's FROM_FILE)."""
    key = f"homes/{uid}/pushed-from.json"
    data = json.dumps({"path": here[0], "machine": here[1]}).encode() + b"\n"
    if b.put_new(key, data):
        return
    try:
        doc = json.loads(b.get(key))
        first = (doc["path"], doc["machine"])
    except (NotFound, ValueError, KeyError, TypeError):
        return
    if first != here:
        where = first[0] + ("" if first[1] == here[1] else " on another machine")
        raise LedgerError(f"the store already holds the home {uid} pushed from {where}; {home} has the same id: "
                          "pushing would merge its runs into that home's", hint=COPIED_ID_HINT)
