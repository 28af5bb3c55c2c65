"""Run ids: `run_` + a UUID. Minted in simple form; parsed strictly, kept verbatim."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ledger.errors import AmbiguousRun, LedgerError, RunNotFound

PREFIX = "run_"
_H = "[0-9a-fA-F]"
_HYPH = f"{_H}{{8}}-{_H}{{4}}-{_H}{{4}}-{_H}{{4}}-{_H}{{12}}"
# Python's uuid.UUID() accepts more spellings than the format does, so validate explicitly.
# fullmatch, not `$`: `$` would also accept a trailing newline.
_SUFFIX = re.compile(rf"(?:{_H}{{32}}|{_HYPH}|urn:uuid:{_HYPH}|\{{{_HYPH}\}})")


class InvalidRunId(LedgerError):
    pass


def mint_run_id() -> str:
    import uuid  # (here: with platform, ~11 M instructions a reader never needs)

    return PREFIX + uuid.uuid4().hex


def is_run_id(text: str) -> bool:
    return isinstance(text, str) and text.startswith(PREFIX) and bool(_SUFFIX.fullmatch(text, len(PREFIX)))


def parse_run_id(text: str) -> str:
    """Return the id verbatim if valid, else raise InvalidRunId."""
    if not is_run_id(text):
        raise InvalidRunId(f"invalid run id {text!r}: expected run_ followed by a UUID",
                           hint="list ids with `ledger runs`")
    return text


def shard_of(run_id: str) -> str:
    """The two-character prefix directory: the first two characters after `run_`."""
    return run_id[len(PREFIX):len(PREFIX) + 2]


def run_dir(home: Path, run_id: str) -> Path:
    return Path(home) / "runs" / shard_of(run_id) / run_id


def resolve_selector(home: Path, selector: str) -> Path:
    """Resolve a unique-prefix selector (with or without `run_`) to a run directory."""
    sel = (selector or "").strip()
    if not sel:
        raise LedgerError("Run id cannot be empty", hint="list ids with `ledger runs`")
    runs = Path(home) / "runs"
    matches: list[Path] = []
    try:
        with os.scandir(runs) as it:
            shards = [e.path for e in it if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]
    except OSError:  # no runs/ yet (or not a directory): nothing matches
        shards = []
    for shard in shards:
        try:
            with os.scandir(shard) as it:
                # a symlinked run resolves (to its own path, never followed): `ledger verify RUN`
                # then says what it is instead of "not found"
                names = [(e.name, e.path) for e in it
                         if not e.name.startswith(".") and (e.is_dir(follow_symlinks=False) or e.is_symlink())]
        except OSError:
            continue
        for name, path in names:
            if name.startswith(sel) or (name.startswith(PREFIX) and name[len(PREFIX):].startswith(sel)):
                matches.append(Path(path))
    if not matches:
        raise RunNotFound(f"Run {sel} was not found", hint="list ids with `ledger runs --all`")
    if len(matches) > 1:
        raise AmbiguousRun(f"Run prefix {sel} is ambiguous", hint="give more characters of the id (`ledger runs --all`)")
    return matches[0]
