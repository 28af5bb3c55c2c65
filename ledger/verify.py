"""`ledger verify`: re-check the evidence of run records against their bindings.

For each run: the record must be readable (manifest, every complete events line), the
context must match its sha256/size, terminal.json must be valid, and every evidence file a
`result` event binds (`raw_stream`, `stdout_tail`, `stderr_tail`: {path, sha256, bytes})
must re-hash to the recorded digest. Evidence gaps counted by the reader are reported too.
The archive of imported logs (`sources/`) is checked too (ledger.sources.archivecheck).
Reads records and the archive only (never the index), so it works when the index is gone. A symlink where
a shard or a run directory should be is a problem (listed, never followed out of the home);
a home that is missing or not a directory is an error, not "0 runs verified".
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ledger.errors import LedgerError, RecordError
from ledger.records import jsonio
from ledger.records.reader import EVENTS, SYMLINK_REASON, iter_run_entries, read_run

BOUND_KEYS = ("raw_stream", "stdout_tail", "stderr_tail")


@dataclass
class Verdict:
    run_id: str
    path: str
    ok: bool
    evidence_gaps: int = 0
    problems: list[str] = field(default_factory=list)
    bound_files: int = 0
    shard: bool = False  # a symlinked shard `runs/<xx>`: not a run (counted apart, issue 32)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "path": self.path, "ok": self.ok,
                "evidence_gaps": self.evidence_gaps, "bound_files": self.bound_files,
                "problems": self.problems}


def _scan_events(run_path: str) -> tuple[list[dict[str, Any]], list[tuple[int, int]]]:
    """The file bindings carried by `result` events, and the holes in `seq` (complete lines
    only): (last seq, next seq) wherever the next is more than one past the last. The writer
    numbers every event it is given from 0, so a hole is an event that was never written (a
    failed write, a line cut out); the reader's gap rules (Loopflow's) count only a seq that
    does not increase, so verify is where a hole shows (issue 32)."""
    refs: list[dict[str, Any]] = []
    holes: list[tuple[int, int]] = []
    try:
        f = open(os.path.join(run_path, EVENTS), "rb")
    except OSError:
        return refs, holes
    last: int | None = -1  # seq starts at 0
    with f:
        for line in f:
            if not line.endswith(b"\n"):
                continue
            try:
                ev = jsonio.loads(line)
            except jsonio.JSONDecodeError:
                continue
            if not isinstance(ev, dict):
                continue
            seq = ev.get("seq")
            if type(seq) is int:
                if last is not None and seq > last + 1:
                    holes.append((last, seq))
                last = seq if last is None or seq > last else last
            if ev.get("type") == "result":
                for key in BOUND_KEYS:
                    ref = ev.get(key)
                    if isinstance(ref, dict) and isinstance(ref.get("path"), str):
                        refs.append(ref)
    return refs, holes


def _hash_file(path: str) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


from ledger.home import HOME_HINT, check_home  # noqa: E402,F401 - one rule for every command


def verify_run(run_path: str | Path) -> Verdict:
    run_path = os.fspath(run_path)
    name = os.path.basename(run_path)
    if os.path.islink(run_path):
        return Verdict(name, run_path, False, problems=[SYMLINK_REASON])
    try:
        snap = read_run(run_path)
    except RecordError as exc:
        return Verdict(name, run_path, False, problems=[f"unreadable: {exc.reason}"])
    v = Verdict(snap.id, run_path, True, evidence_gaps=snap.evidence_gaps)
    if snap.evidence_gaps:
        v.problems.append(f"{snap.evidence_gaps} evidence gap(s)")
    if snap.state == "abandoned":
        v.problems.append("abandoned: the launcher is gone and the run was never settled")
    refs, holes = _scan_events(run_path)
    for before, after in holes:
        missing = after - before - 1
        v.problems.append(f"{EVENTS}: seq jumps from {before} to {after} ({missing} event(s) missing)"
                          if before >= 0 else f"{EVENTS}: seq starts at {after}, not 0 ({missing} event(s) missing)")
    for ref in refs:
        v.bound_files += 1
        target = os.path.normpath(os.path.join(run_path, ref["path"]))
        if not target.startswith(run_path + os.sep):
            v.problems.append(f"{ref['path']}: binding points outside the record")
            continue
        try:
            digest, size = _hash_file(target)
        except OSError as exc:
            v.problems.append(f"{ref['path']}: missing ({exc.strerror or exc})")
            continue
        if digest != ref.get("sha256") or size != ref.get("bytes"):
            v.problems.append(f"{ref['path']}: sha256/size do not match the recorded binding")
    v.ok = not v.problems
    return v


def verify_archive(home: Path) -> Any:
    """The archive of imported logs checked frame by frame (ledger.sources.archivecheck)."""
    from ledger.sources.archivecheck import check_home as check_archive

    return check_archive(home)


def verify_home(home: Path) -> Iterator[Verdict]:
    """Every entry of the home's runs/: a verdict per run directory, and a failed one per
    symlink (a symlinked shard is named `runs/<xx>`: whatever it holds is not in the home)."""
    from ledger.sources.logdirs import missing_home_hint

    check_home(home, missing_home_hint)
    for path, name, kind in iter_run_entries(home):
        if kind == "run":
            yield verify_run(path)
        else:
            label = f"runs/{name}" if kind == "shard-link" else name
            yield Verdict(label, path, False, problems=[SYMLINK_REASON], shard=kind == "shard-link")
