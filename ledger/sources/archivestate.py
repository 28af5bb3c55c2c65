"""The archive's state files (`.state/<sha256(key)[:32]>.json`, one per log: its generations
and the source paths seen), the seen cache and the config dirs a client was imported from."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterator

from ledger.errors import LedgerError
from ledger.sources.archiveformat import PREFIX_BYTES, ROOTS_FILE, SEEN_FILE, STATE_DIR, TAIL_BYTES, ZSTD, loads, sha
from ledger.sources.archivefiles import pread_all
from ledger.sources.logdirs import Client

STATE_VERSION = 1


def state_file_path(client_dir: Path, key: str) -> str:
    import hashlib

    digest = hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return f"{client_dir}/{STATE_DIR}/{digest}.json"


def fresh_state(client: Client, key: str) -> dict[str, Any]:
    return {"schema_version": STATE_VERSION, "client": client.name, "key": key, "generations": [], "sources": {}}


def load_state(path: str | Path, client: Client, key: str) -> tuple[dict[str, Any], str | None]:
    """The log's state (fresh when none); a damaged state file is set aside, with a reason."""
    fresh = fresh_state(client, key)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return fresh, None
    except OSError as exc:
        raise LedgerError(f"cannot read the archive state {path}: {exc.strerror}",
                          hint="check the permissions of the ledger home") from None
    try:
        raw = pread_all(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)
    try:
        state = json.loads(raw)
        if state.get("schema_version") != STATE_VERSION or state.get("key") != key:
            raise ValueError("not this log's state")
        for g in state["generations"]:
            g["archive"], g["size"], g["prefix_sha256"], g["tail_sha256"]  # noqa: B018 - shape check
        dict(state["sources"])
        return state, None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        path = Path(path)
        aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}-{os.urandom(3).hex()}")
        os.replace(path, aside)
        return fresh, f"its archive state was damaged ({type(exc).__name__}), set aside as {aside.name}"


def recorded_archives(client_dir: str | Path) -> dict[str, int]:
    """archive file (below the client dir) -> the bytes its state file says it holds (a zstd
    generation's compressed size, a plain one's size): what `ledger verify` and the index
    compare the files with. Damaged or foreign state files are left out."""
    out: dict[str, int] = {}
    for name, state in iter_states(client_dir):
        for g in state.get("generations", ()):
            try:
                rel, n = g["archive"], g["csize"] if g.get("format") == ZSTD else g["size"]
            except (KeyError, TypeError):
                continue
            if isinstance(rel, str) and isinstance(n, int):
                out[rel] = n
    return out


def iter_states(client_dir: str | Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(file name, content) of each readable state file of a client's archive."""
    sdir = os.path.join(client_dir, STATE_DIR)
    try:
        names = sorted(os.listdir(sdir))
    except OSError:
        return
    for name in names:
        if len(name) != 37 or not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(sdir, name), "rb") as f:
                state = loads(f.read())
        except (OSError, ValueError):
            continue
        if isinstance(state, dict) and state.get("schema_version") == STATE_VERSION:
            yield name, state


def load_seen(client_dir: Path) -> dict[str, list[int]]:
    """The seen cache; anything unexpected is an empty cache (the state files decide then)."""
    try:
        data = loads((client_dir / SEEN_FILE).read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}  # the config dirs a client was imported from (refresh() reads them)


def imported_roots(home: Path, client: Client) -> list[str]:
    try:
        data = json.loads((Path(home) / "sources" / client.name / ROOTS_FILE).read_bytes())
    except (OSError, ValueError):
        return []
    return [r for r in data.get("roots", []) if isinstance(r, str)] if isinstance(data, dict) else []


def note_sig(g: dict[str, Any], st: os.stat_result) -> None:
    """The archive file's signature as ledger left it: an explicit import that finds it so
    does not decode it again (see Archiver.check_archives)."""
    g["file_sig"] = [st.st_size, st.st_mtime_ns, st.st_ino]


def hash_from(src: int, g: dict[str, Any], head: bytes, prefix: bool) -> None:
    """The generation's check hashes from the log, which holds the archived bytes at the same
    offsets (that is what the checks verified before the copy)."""
    if prefix:
        g["prefix_sha256"] = sha(head[:min(PREFIX_BYTES, g["size"])])
    t = min(TAIL_BYTES, g["size"])
    g["tail_sha256"] = sha(pread_all(src, t, g["size"] - t))


def rehash(fd: int, g: dict[str, Any], prefix: bool = True) -> None:
    """The generation's check hashes, from the archive itself (what the next log must match)."""
    if prefix:
        g["prefix_sha256"] = sha(pread_all(fd, min(PREFIX_BYTES, g["size"]), 0))
    t = min(TAIL_BYTES, g["size"])
    g["tail_sha256"] = sha(pread_all(fd, t, g["size"] - t))
