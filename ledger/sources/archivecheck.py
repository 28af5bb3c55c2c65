"""Check the archive of imported logs against its state files (`ledger verify`, issue 26).

Every archive file below `sources/<client>/` is read whole: each zstd frame is decoded
(checksum included, with the bounds of ledger.sources.zframes) and the content of the part
its state file records is compared with what the state says: its size, the sha256 of its
first 4 KiB and of its last 256 bytes. A problem names the file and the byte offset where
it is (the start of the damaged frame; the size of a file cut short):

- a frame that does not decode (its bytes changed) or a torn frame inside the recorded part;
- a file shorter than recorded (truncated), or missing (deleted);
- content that does not match the recorded size or hashes (a plain file edited in place);
- a file no state file records (an interrupted import's leftover: the next import adopts
  or removes it), bytes past the recorded end that are not whole frames;
- a symlink where a directory or file of the archive should be (never followed).
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_mod
from typing import Any, Iterator

from ledger.sources.archiveformat import LINK_REASON, PREFIX_BYTES, STATE_DIR, TAIL_BYTES, ZSTD, ZSTD_SUFFIX
from ledger.sources.archivestate import iter_states
from ledger.sources.logdirs import CLIENTS


class ArchiveProblem:
    __slots__ = ("path", "offset", "reason")

    def __init__(self, path: str, offset: int | None, reason: str) -> None:
        self.path = path  # below the home: sources/<client>/...
        self.offset = offset
        self.reason = reason

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "offset": self.offset, "reason": self.reason}

    def __str__(self) -> str:
        at = f" at byte {self.offset:,}" if self.offset is not None else ""
        return f"{self.path}{at}: {self.reason}"


class ArchiveCheck:
    __slots__ = ("files", "frames", "bytes", "problems", "read")

    def __init__(self) -> None:
        self.files = 0  # archive files read
        self.read: set[str] = set()  # ... their paths
        self.frames = 0  # zstd frames decoded
        self.bytes = 0  # content bytes decoded
        self.problems: list[ArchiveProblem] = []

    @property
    def bad_files(self) -> int:
        """Files read that have a problem (a missing file or a symlink is a problem, not a file)."""
        return len({p.path for p in self.problems} & self.read)


def walk(client_dir: str) -> Iterator[tuple[str, os.stat_result | None, str | None]]:
    """(path below client_dir, stat, None) of every archive file (`.jsonl`, `.jsonl.zst`),
    and (path, None, why) of each symlink where a directory or an archive file is."""
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            with os.scandir(os.path.join(client_dir, rel) if rel else client_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            yield rel or ".", None, f"unreadable directory ({exc.strerror})"
            continue
        for e in entries:
            r = f"{rel}/{e.name}" if rel else e.name
            try:
                if e.is_symlink():
                    if e.is_dir() or e.name.endswith((".jsonl", ".jsonl" + ZSTD_SUFFIX)):
                        yield r, None, f"{LINK_REASON} (never followed, never written through)"
                    continue
                if e.is_dir(follow_symlinks=False):
                    if not (not rel and e.name == STATE_DIR):
                        stack.append(r)
                elif e.name.endswith((".jsonl", ".jsonl" + ZSTD_SUFFIX)):
                    st = e.stat(follow_symlinks=False)
                    if stat_mod.S_ISREG(st.st_mode):
                        yield r, st, None
            except OSError as exc:
                yield r, None, f"unreadable ({exc.strerror})"


def check_home(home: str | os.PathLike[str]) -> ArchiveCheck:
    out = ArchiveCheck()
    for client in CLIENTS.values():
        client_dir = os.path.join(home, "sources", client.name)
        if os.path.islink(client_dir):
            out.problems.append(ArchiveProblem(f"sources/{client.name}", None, "a symlink (never followed)"))
            continue
        if os.path.isdir(client_dir):
            _check_client(client_dir, f"sources/{client.name}", out)
    return out


def _check_client(client_dir: str, label: str, out: ArchiveCheck) -> None:
    recorded: dict[str, dict[str, Any]] = {}
    for _name, state in iter_states(client_dir):
        for g in state.get("generations", ()):
            if isinstance(g, dict) and isinstance(g.get("archive"), str):
                recorded[g["archive"]] = g
    found = set()
    links: list[str] = []
    for rel, st, why in walk(client_dir):
        if why is not None:
            out.problems.append(ArchiveProblem(f"{label}/{rel}", None, why))
            links.append(rel)
            continue
        found.add(rel)
        out.files += 1
        out.read.add(f"{label}/{rel}")
        check_file(os.path.join(client_dir, rel), f"{label}/{rel}", st, recorded.get(rel), out)
    for rel, g in sorted(recorded.items()):
        if rel not in found and rel not in links and not any(rel.startswith(d + "/") for d in links):
            want = g.get("csize") if g.get("format") == ZSTD else g.get("size")
            out.problems.append(ArchiveProblem(f"{label}/{rel}", None,
                                               f"missing: its state records {want:,} bytes (deleted?)"))


class _Content:
    """The first PREFIX_BYTES and last TAIL_BYTES of a content stream, and its size."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = b""
        self.size = 0

    def add(self, piece: bytes) -> None:
        if len(self.head) < PREFIX_BYTES:
            self.head += piece[:PREFIX_BYTES - len(self.head)]
        self.tail = (self.tail + piece[-TAIL_BYTES:])[-TAIL_BYTES:]
        self.size += len(piece)


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def check_file(path: str, label: str, st: os.stat_result, g: dict[str, Any] | None, out: ArchiveCheck) -> None:
    import mmap

    from ledger.sources import zframes

    def problem(offset: int | None, reason: str) -> None:
        out.problems.append(ArchiveProblem(label, offset, reason))

    before = len(out.problems)
    if g is None:
        problem(None, "no state file records it (left by an interrupted import? the next `ledger import` "
                      "adopts it or removes it)")
    zstd = path.endswith(ZSTD_SUFFIX)
    recorded = (g.get("csize") if zstd else g.get("size")) if g is not None else None
    if isinstance(recorded, int) and st.st_size < recorded:
        problem(st.st_size, f"truncated: {st.st_size:,} of the {recorded:,} bytes its state records")
    content = _Content()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        problem(None, f"unreadable ({exc.strerror})")
        return
    try:
        if not zstd:
            pos = 0
            while chunk := os.pread(fd, 1 << 22, pos):
                content.add(chunk if recorded is None or pos + len(chunk) <= recorded else chunk[:max(0, recorded - pos)])
                pos += len(chunk)
        elif st.st_size:
            with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf:
                end = 0
                limit = recorded if isinstance(recorded, int) else st.st_size
                try:
                    for f, piece in zframes.inflate(buf, 0):
                        if piece is not None:
                            if f.end <= limit:
                                content.add(piece)
                            continue
                        out.frames += 1
                        if f.bad is not None:
                            problem(f.start, f"the frame of bytes {f.start:,}-{f.end:,} {f.bad}")
                        end = f.end
                except zframes.OverBound as exc:
                    problem(exc.offset, exc.reason)
                    end = st.st_size
                if end < st.st_size:
                    where = ("past the recorded end (an import interrupted or under way: the next import adopts "
                             "the whole frames)" if isinstance(recorded, int) and end >= recorded else "")
                    problem(end, f"a torn frame ({st.st_size - end:,} bytes) {where}".rstrip())
    except OSError as exc:
        problem(None, f"unreadable ({exc.strerror})")
        return
    finally:
        os.close(fd)
    out.bytes += content.size
    if g is None or len(out.problems) > before:  # (what is wrong is said already)
        return
    size = g.get("size")
    if content.size != size:
        problem(None, f"its frames hold {content.size:,} bytes, its state records {size:,}")
    elif _sha(bytes(content.head[:min(PREFIX_BYTES, size)])) != g.get("prefix_sha256"):
        problem(0, "its first bytes differ from the hash its state records")
    elif _sha(content.tail[-min(TAIL_BYTES, size):] if size else b"") != g.get("tail_sha256"):
        problem(None, "its last bytes differ from the hash its state records")
