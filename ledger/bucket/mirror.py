"""The central reader's side of a bucket store: its homes' logs, read from a cursor, replayed
into a local directory store (the layout of ledger.store) that the ordinary index reads.

A pass costs what changed: one LIST of the store's homes, one LIST per home of the log
entries after its cursor, and a GET of each new entry and of each object it names; never a
walk of the bucket. It needs list and get rights only. Every object must hash to its name:
one that does not (changed behind ledger's back) is a conflict, reported; that home's replay
stops before the entry naming it (its cursor stays), and the other homes go on.

The mirror is this machine's cache (`$LEDGER_BUCKET_CACHE`, default the user cache dir):
deleting it costs one replay of every log, nothing else. Paths in a log are hostile input:
only `home-id.json`, `runs/<shard>/<run>/...` and `sources/<client>/...` below a home, without
`.` or `..` parts, staging names or the archive's bookkeeping (`.state`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ledger.bucket.client import POOL, Bucket, NotFound
from ledger.bucket.push import check_marker, log_key, log_seq, read_log, sha256
from ledger.errors import LedgerError
from ledger.plainclass import Plain
from ledger.store.destination import open_store
from ledger.store.layout import HOMES_DIR, _is_uuid
from ledger.store.walk import SOURCES, STATE_DIR

CURSORS = ".bucket-cursors.json"


class SyncSummary(Plain):
    __slots__ = ("store", "mirror", "homes", "entries", "objects", "bytes", "conflicts", "restarted", "seconds")

    def __init__(self, store: str, mirror: str) -> None:
        self.store = store
        self.mirror = mirror
        self.homes = 0
        self.entries = 0  # log entries replayed
        self.objects = 0
        self.bytes = 0
        self.conflicts: list[dict[str, str]] = []
        self.restarted: list[str] = []  # homes whose log no longer holds the cursor's entry: replayed anew
        self.seconds = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"store": self.store, "mirror": self.mirror, "homes": self.homes, "entries": self.entries,
                "objects": self.objects, "bytes": self.bytes, "conflicts": self.conflicts, "restarted": self.restarted,
                "seconds": round(self.seconds, 3)}

    def line(self) -> str:
        return (f"read {self.store}: {self.homes:,} homes, {self.entries:,} new log entries, {self.objects:,} "
                f"objects ({self.bytes:,} bytes), {len(self.conflicts):,} conflicts in {self.seconds:.1f} s")


def mirror_dir(b: Bucket) -> Path:
    base = os.environ.get("LEDGER_BUCKET_CACHE")
    if not base:
        import platformdirs

        base = os.path.join(platformdirs.user_cache_dir("ledger", appauthor=False), "buckets")
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or ""
    name = hashlib.sha256(f"{endpoint} {b.url}".encode()).hexdigest()[:16]
    return Path(base) / f"{b.bucket}-{name}"


def _safe_rel(rel: Any) -> bool:
    if not isinstance(rel, str) or not rel or "\\" in rel or "\0" in rel or rel.startswith("/"):
        return False
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return False
    if parts[0] == "runs":  # (runs/<shard>/run_.../...: never a staging name)
        return len(parts) > 3 and not any(p.startswith(".") for p in parts[:3])
    if parts[0] == SOURCES:  # (never the mirror's own bookkeeping, sources/<client>/.state/)
        return len(parts) > 2 and not parts[1].startswith(".") and parts[2] != STATE_DIR
    return rel == "home-id.json"


class _Replay:
    def __init__(self, b: Bucket, mirror: Path, summary: SyncSummary) -> None:
        self.b, self.mirror, self.s = b, mirror, summary
        self.pool = ThreadPoolExecutor(POOL)

    def home(self, uid: str, cursor: int) -> int:
        """Replay the home's log after `cursor`; the new cursor."""
        # (from the cursor's own entry: the same one LIST tells whether the log is still the one
        # replayed, or was put back from scratch, e.g. a home's prefix moved aside and pushed again)
        after = log_key(uid, cursor - 1) if cursor > 1 else None
        keys = [k for k in self.b.list(f"homes/{uid}/log/", after=after) if log_seq(k) is not None]
        dest = self.mirror / HOMES_DIR / uid
        if cursor and (not keys or log_seq(keys[0]) != cursor):
            import shutil

            self.s.restarted.append(uid)
            shutil.rmtree(dest, ignore_errors=True)
            cursor = 0
            keys = [k for k in self.b.list(f"homes/{uid}/log/") if log_seq(k) is not None]
        keys = [k for k in keys if (log_seq(k) or 0) > cursor]
        for key in keys:
            seq = log_seq(key)
            if seq != cursor + 1:
                self.s.conflicts.append({"home_id": uid, "key": key, "reason": f"the log misses entry {cursor + 1}"})
                break
            doc = read_log(self.b, key)
            objs = doc["objects"]
            got = list(self.pool.map(self._get, objs))
            bad = [o for o, d in zip(objs, got) if d is None or sha256(d) != o.get("sha")]
            if bad:
                for o in bad:
                    self.s.conflicts.append({"home_id": uid, "key": self.b.key(str(o.get("key"))), "reason":
                                             "the object changed after it was pushed (it does not hash to its name)"})
                break
            clients: set[str] = set()
            for obj, data in zip(objs, got):
                pos = 0
                for rel, op, at, n, _h, _t, _sha in obj["pieces"]:
                    piece = data[pos:pos + n]
                    pos += n
                    if not _safe_rel(rel) or not isinstance(at, int) or len(piece) != n:
                        self.s.conflicts.append({"home_id": uid, "key": obj["key"], "reason":
                                                 f"a log entry names an unsafe path or range ({rel!r})"})
                        continue
                    problem = _apply(dest / rel, op, at, piece)
                    if problem:
                        self.s.conflicts.append({"home_id": uid, "key": obj["key"], "path": rel, "reason": problem})
                    if rel.startswith(SOURCES + "/"):
                        clients.add(rel.split("/")[1])
                self.s.objects += 1
                self.s.bytes += len(data)
            for client in sorted(clients):
                _mark_changed(dest / SOURCES / client / STATE_DIR)
            cursor = seq  # type: ignore[assignment]
            self.s.entries += 1
        return cursor

    def _get(self, obj: Any) -> bytes | None:
        key = obj.get("key") if isinstance(obj, dict) else None
        uid_dir = key.split("/")[:2] if isinstance(key, str) else []
        if len(uid_dir) != 2 or uid_dir[0] != HOMES_DIR:
            return None
        try:
            return self.b.get(key)  # type: ignore[arg-type]
        except NotFound:
            return None


def _write_new(path: Path, data: bytes, replace: bool = False) -> None:
    os.makedirs(path.parent, mode=0o700, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _apply(path: Path, op: str, at: int, piece: bytes) -> str | None:
    """One piece into the mirror; replaying a piece already there changes nothing (a pass
    killed before it saved its cursor replays its last entry)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and not os.path.isfile(path) or os.path.islink(path):
        return "the mirror's copy is not a regular file"
    if op == "replace" or (op == "new" and st is None):
        _write_new(path, piece)
        return None
    if op == "new":
        with open(path, "rb") as f:
            have = f.read(len(piece) + 1)
        if have[:len(piece)] == piece:
            if len(have) > len(piece):
                return None  # (appended to since: a replay of an older entry)
            return None
        return "two log entries give this file different first bytes"
    if op != "append":
        return f"an unknown operation {op!r}"
    if st is None:
        return "an append to a file the log never created"
    size = st.st_size
    if size >= at + len(piece):
        return None  # (a replay)
    if size < at:
        return "an append after a gap (a log entry is missing)"
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.ftruncate(fd, at)  # (a torn append of a pass that was killed)
        os.lseek(fd, at, os.SEEK_SET)
        view = memoryview(piece)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    return None


def _mark_changed(state_dir: Path) -> None:
    """The mirrored home's change marker for a client's archive (what ledger.index.logsource
    looks at, as for a directory store)."""
    _write_new(state_dir / "changed", f"{time.time_ns()}\n".encode())


def _load_cursors(path: Path, url: str) -> dict[str, int]:
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict) or doc.get("store") != url or not isinstance(doc.get("homes"), dict):
        return {}
    return {k: v for k, v in doc["homes"].items() if isinstance(v, int)}


def sync(target: str) -> SyncSummary:
    """Bring the local mirror of the bucket store up to date; what it read."""
    t0 = time.perf_counter()
    b = Bucket(target)
    check_marker(b, create=False)
    mirror = mirror_dir(b)
    os.makedirs(mirror.parent, mode=0o700, exist_ok=True)
    open_store(mirror)
    summary = SyncSummary(store=b.url, mirror=str(mirror))
    cpath = mirror / CURSORS
    cursors = _load_cursors(cpath, b.url)
    uids = [p.rstrip("/").rsplit("/", 1)[-1] for p in b.list(f"{HOMES_DIR}/", delimiter="/")]
    uids = [u for u in uids if _is_uuid(u)]
    summary.homes = len(uids)
    replay = _Replay(b, mirror, summary)
    try:
        for uid in uids:
            new = replay.home(uid, cursors.get(uid, 0))
            if new != cursors.get(uid, 0):
                cursors[uid] = new
                _write_new(cpath, json.dumps({"store": b.url, "homes": cursors}).encode())
    finally:
        replay.pool.shutdown()
    if not uids:
        raise LedgerError(f"the record store {b.url} holds no homes yet",
                          hint=f"push one into it with `ledger push --to {b.url}`")
    summary.seconds = time.perf_counter() - t0
    return summary
