"""zstd frames read with bounds (issue 26: a damaged archive is evidence; issue 32: a zstd bomb).

An archive file (`sources/<client>/....jsonl.zst`) is a sequence of zstd frames, one per
import, each holding whole lines; a Codex `rollout-*.jsonl.zst` is one zstd stream. Before a
frame is decompressed its header and block headers are walked (RFC 8878: a block's header
says its size; a raw or RLE block regenerates exactly its size, a compressed one at most
128 KiB), which gives, without decompressing anything:

- where the frame ends (a damaged frame is skipped and the next one read: frames hold whole
  lines, so what follows is still line-aligned), and
- an upper bound of what it decompresses to: a log over MAX_LOG_BYTES in all, or a large
  frame that would grow more than MAX_RATIO times (a 134 KB bomb holding 4 GiB of newlines
  grows 32,768 times; transcripts 5-10 times), is refused before any byte is decompressed.

Frames are then decompressed a few blocks at a time (at most STEP_OUT bytes per call), so
memory stays bounded whatever a frame holds. A frame written with a content checksum (every
frame ledger writes since issue 26) is checked by libzstd; an older frame without one is
only as safe as its blocks decode.

The bounds are settings (environment variables, read when first needed):
`LEDGER_MAX_LOG_BYTES` (default 4 GiB decompressed per log), `LEDGER_MAX_RATIO` (default
4,096, applied to a frame once it could exceed 16 MiB) and `LEDGER_MAX_LINE_BYTES` (default
64 MiB, the longest line a log may hold: see ledger.sources.archiver).
"""

from __future__ import annotations

import mmap  # noqa: F401 - (the Buf type)
import os
from typing import Iterator

Buf = "bytes | bytearray | mmap.mmap"  # (anything with find() and slices of bytes)

MAGIC = b"\x28\xb5\x2f\xfd"
BLOCK_MAX = 128 << 10
STEP_OUT = 8 << 20  # decompressed bytes per decompress call, at most
BUFFER = 64 << 20  # a frame decompressing to at most this is checked and handed out in one decode
RATIO_MIN_OUT = 16 << 20  # a frame that could decompress to less is never refused for its ratio

DEFAULTS = {"LEDGER_MAX_LOG_BYTES": 4 << 30, "LEDGER_MAX_RATIO": 4096, "LEDGER_MAX_LINE_BYTES": 64 << 20}


def bound(name: str) -> int:
    """A bound's value: the environment variable when it holds a positive integer, else its default."""
    raw = os.environ.get(name)
    if raw:
        try:
            v = int(raw)
            if v > 0:
                return v
        except ValueError:
            pass
    return DEFAULTS[name]


class OverBound(Exception):
    """A log would decompress to more than the bounds allow (reason: what and which bound)."""

    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.offset = offset


class Frame:
    __slots__ = ("start", "end", "max_out", "blocks", "checksum", "bad")

    def __init__(self, start: int, end: int, max_out: int, blocks: list[tuple[int, int]], checksum: bool,
                 bad: str | None = None) -> None:
        self.start = start  # offset of its magic number in the file
        self.end = end  # offset after it (its checksum included)
        self.max_out = max_out  # what it decompresses to, at most
        self.blocks = blocks  # (offset after the block, its max output), for bounded steps
        self.checksum = checksum
        self.bad = bad  # why it cannot be read (then `end` is where the next frame is looked for)


def _next_magic(buf: "Buf", pos: int) -> int:
    i = buf.find(MAGIC, pos)
    return len(buf) if i < 0 else i


def frame_at(buf: Buf, pos: int) -> Frame | None:
    """The frame starting at `pos` (None: its end is not in `buf`, a frame being written or
    a file cut short). A frame whose header is not zstd's is `bad`."""
    n = len(buf)
    if n - pos < 6:
        return None
    if bytes(buf[pos:pos + 4]) != MAGIC:
        if bytes(buf[pos + 1:pos + 4]) == b"\x2a\x4d\x18" and 0x50 <= buf[pos] <= 0x5f:  # a skippable frame
            size = int.from_bytes(bytes(buf[pos + 4:pos + 8]), "little")
            end = pos + 8 + size
            return None if end > n else Frame(pos, end, 0, [], False)
        return Frame(pos, _next_magic(buf, pos + 1), 0, [], False, "not a zstd frame")
    fhd = buf[pos + 4]
    fcs_flag, single, checksum, dict_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
    if fhd & 0x08:
        return Frame(pos, _next_magic(buf, pos + 1), 0, [], False, "a damaged frame header")
    p = pos + 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
    fcs_size = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if p + fcs_size > n:
        return None
    content = None
    if fcs_size:
        content = int.from_bytes(bytes(buf[p:p + fcs_size]), "little") + (256 if fcs_size == 2 else 0)
    p += fcs_size
    blocks: list[tuple[int, int]] = []
    total = 0
    while True:
        if p + 3 > n:
            return None
        h = int.from_bytes(bytes(buf[p:p + 3]), "little")
        last, kind, size = h & 1, (h >> 1) & 3, h >> 3
        p += 3
        if kind == 3 or (kind != 1 and size > BLOCK_MAX) or size > BLOCK_MAX:
            return Frame(pos, _next_magic(buf, pos + 1), 0, [], False, "a damaged block header")
        p += 1 if kind == 1 else size
        if p > n:
            return None
        out = size if kind in (0, 1) else BLOCK_MAX
        total += out
        blocks.append((p, out))
        if last:
            break
    if checksum:
        p += 4
        if p > n:
            return None
    max_out = total if content is None else min(total, content)
    return Frame(pos, p, max_out, blocks, bool(checksum))


class _Bad(Exception):
    pass


def _pieces(buf: Buf, f: Frame) -> Iterator[bytes]:
    """The frame's content, a few blocks per decompress call (raises _Bad)."""
    import zstandard

    d = zstandard.ZstdDecompressor().decompressobj()
    at = f.start
    step_out = 0
    got = 0
    for i, (end, out) in enumerate(f.blocks):
        step_out += out
        last = i == len(f.blocks) - 1
        if step_out < STEP_OUT and not last:
            continue
        stop = f.end if last else end
        try:
            piece = d.decompress(bytes(buf[at:stop]))
        except zstandard.ZstdError as exc:
            raise _Bad(f"does not decompress ({exc})") from None
        at, step_out = stop, 0
        got += len(piece)
        if got > f.max_out:  # (cannot happen with a sane decoder: the bound holds)
            raise _Bad("decompresses to more than its blocks allow")
        if piece:
            yield piece
    if f.blocks and not d.eof:
        raise _Bad("its last block does not end it")


def inflate(buf: Buf, start: int = 0, name: str = "", total: int = 0) -> Iterator[tuple[Frame, bytes | None]]:
    """(frame, a piece of its content) for the frames of buf[start:], in order; pieces are at
    most STEP_OUT bytes, and come only once their frame decoded whole (checksum included):
    a frame of up to BUFFER bytes is decoded once, a larger one once to check it and again
    to hand it out. Each frame ends with (frame, None); a frame that cannot be read yields
    only that, with `frame.bad` set. Stops before a frame whose end is not in `buf`. Raises
    OverBound before decompressing a frame that would take the log (`total` bytes so far)
    over MAX_LOG_BYTES, or grow more than MAX_RATIO times."""
    limit, ratio = bound("LEDGER_MAX_LOG_BYTES"), bound("LEDGER_MAX_RATIO")
    pos = start
    while True:
        f = frame_at(buf, pos)
        if f is None:
            nxt = _next_magic(buf, pos + 1)
            if nxt >= len(buf):
                return  # a torn last frame (being written, or the file was cut): it waits
            # a frame whose blocks run past the next frame: its header or a block header is damaged
            f = Frame(pos, nxt, 0, [], False, "a damaged frame: its blocks do not end where the next frame starts")
        pos = f.end
        if f.bad is not None:
            yield f, None
            continue
        if total + f.max_out > limit:
            raise OverBound(f"{name + ' ' if name else ''}would decompress to more than {limit:,} bytes "
                            f"(LEDGER_MAX_LOG_BYTES)", f.start)
        csize = f.end - f.start
        if f.max_out > RATIO_MIN_OUT and f.max_out > ratio * csize:
            raise OverBound(f"{name + ': ' if name else ''}a frame of {csize:,} bytes would decompress to up to "
                            f"{f.max_out:,} bytes, more than {ratio:,} times its size (a zstd bomb?; "
                            f"LEDGER_MAX_RATIO)", f.start)
        try:
            if f.max_out <= BUFFER:
                pieces: list[bytes] = list(_pieces(buf, f))
            else:
                for _ in _pieces(buf, f):  # (checked first: nothing of a damaged frame is handed out)
                    pass
                pieces = None  # type: ignore[assignment]
        except _Bad as exc:
            f.bad = str(exc)
            yield f, None
            continue
        for piece in (pieces if pieces is not None else _pieces(buf, f)):
            total += len(piece)
            yield f, piece
        yield f, None


def whole(buf: Buf, start: int = 0, name: str = "") -> tuple[int, bytes, list[Frame]]:
    """(offset after the last frame, the content of the readable frames, the bad frames) of
    buf[start:]. Raises OverBound."""
    out = bytearray()
    bad: list[Frame] = []
    end = start
    for f, piece in inflate(buf, start, name):
        if piece is not None:
            out += piece
            continue
        if f.bad is not None:
            bad.append(f)
        end = f.end
    return end, bytes(out), bad


def leading(buf: Buf, start: int = 0) -> tuple[int, bytes]:
    """(offset after the whole readable frames at the start of buf[start:], their content):
    the first damaged frame, or one over the bounds, ends it."""
    out = bytearray()
    end = start
    try:
        for f, piece in inflate(buf, start):
            if piece is not None:
                out += piece
            elif f.bad is not None:
                break
            else:
                end = f.end
    except OverBound:
        pass
    return end, bytes(out)
