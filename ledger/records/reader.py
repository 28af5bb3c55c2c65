"""Read run records: scan a home, read one run's snapshot. Streaming, no SQLAlchemy.

A record that cannot be read (bad manifest, malformed complete line, identity mismatch,
unsupported schema) raises RecordError; `scan()` reports it as a ScanProblem and goes on.
"""

from __future__ import annotations

import hashlib
import os
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from ledger.errors import RecordError
from ledger.plainclass import Plain
from ledger.records import jsonio
from ledger.records.fold import (
    command_text, exit_code_of, fold_file, new_state, open_regular, read_regular, reduce_usage, run_model, stream_totals,
)
from ledger.records.ids import PREFIX, is_run_id, shard_of
from ledger.records.liveness import liveness
from ledger.records.model import (
    OUTCOMES, SCHEMA_VERSION, Manifest, RunSnapshot, ScanProblem, Subject, UsageTotals,
)
from ledger.records.timefmt import format_utc, is_canonical_utc, parse_rfc3339
from ledger.records.verdict import judge

MANIFEST = "manifest.json"
CONTEXT = "context.json"
EVENTS = "events.jsonl"
TERMINAL = "terminal.json"
PROVIDER_SESSION = "provider-session.json"
STREAM_DIR = "streams"  # ledger addition: hash-bound raw provider streams


SYMLINK_REASON = "a symlink, not a directory: not followed"


def iter_run_entries(home: Path) -> Iterator[tuple[str, str, str]]:
    """Yield (path, name, kind) for every candidate entry of a home's runs/, sorted.

    kind is "run" (a directory in a shard: a candidate run record), "shard-link" (a shard
    `runs/<xx>` that is a symlink) or "link" (a symlink in a shard). Symlinks are listed,
    never followed: a record is a real directory inside the home, so a link is damage to
    report, not a place to read (it may point anywhere). Entries starting with `.`
    (staging) and plain files are skipped.
    """
    runs = os.path.join(os.fspath(home), "runs")
    try:
        with os.scandir(runs) as it:
            shards = sorted((e.name, e.path, e.is_symlink()) for e in it
                            if not e.name.startswith(".") and (e.is_symlink() or e.is_dir(follow_symlinks=False)))
    except OSError:  # no runs/ (or not a directory): no runs
        return
    for name, shard_path, link in shards:
        if link:
            yield shard_path, name, "shard-link"
            continue
        try:
            with os.scandir(shard_path) as it:
                entries = sorted((e.name, e.path, e.is_symlink()) for e in it
                                 if not e.name.startswith(".") and (e.is_symlink() or e.is_dir(follow_symlinks=False)))
        except OSError:
            continue
        for run_name, path, rlink in entries:
            yield path, run_name, "link" if rlink else "run"


def iter_run_dirs(home: Path) -> Iterator[tuple[str, str]]:
    """Yield (run_dir_path, dir_name) for every candidate run directory, sorted.

    Entries starting with `.` (staging), non-directories and symlinks are skipped
    (iter_run_entries() lists the symlinks).
    """
    for path, name, kind in iter_run_entries(home):
        if kind == "run":
            yield path, name


def _join(run_path: str, name: str) -> str:
    """os.path.join(run_path, name) for a plain file name, without its generality (hot path)."""
    return run_path + name if run_path.endswith(os.sep) else run_path + os.sep + name


def _read_json(path: str) -> Any:
    return jsonio.loads(read_regular(path))


def read_manifest(run_path: str | Path) -> Manifest:
    run_path = os.fspath(run_path)
    mpath = _join(run_path, MANIFEST)
    try:
        raw = _read_json(mpath)
    except FileNotFoundError:
        raise RecordError(mpath, "manifest.json is missing") from None
    except jsonio.JSONDecodeError as exc:
        raise RecordError(mpath, f"manifest.json is not valid JSON ({exc})") from None
    except OSError as exc:
        raise RecordError(mpath, f"manifest.json cannot be read ({exc.strerror or exc})") from None
    if not isinstance(raw, dict):
        raise RecordError(mpath, "manifest.json is not a JSON object")
    version = raw.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise RecordError(mpath, f"unsupported Run manifest schema {version}; expected {SCHEMA_VERSION}",
                          hint="upgrade ledger to read this record (`pip install -U ledger`)")
    run_id = raw.get("run_id")
    parent, _, name = run_path.rpartition(os.sep)
    shard = parent.rpartition(os.sep)[2]
    if not (type(run_id) is str and run_id == name and is_run_id(run_id) and shard_of(run_id) == shard):
        raise RecordError(mpath, "Run manifest identity does not match its record path")
    try:
        created = raw["created_at"]
        parse_rfc3339(created)
        subjects_raw = raw["subjects"]
        if not isinstance(subjects_raw, list):
            raise ValueError("subjects must be a list")
        subjects = []
        for s in subjects_raw:
            if isinstance(s, dict) and isinstance(s.get("selector"), str):
                subjects.append(Subject(s["selector"], s.get("source") or "declared"))
            else:
                raise ValueError("each subject needs a selector")
        get = raw.get
        opt = {}
        for key in _OPTIONAL_TEXT:
            v = get(key)
            if v is not None and type(v) is not str:
                raise ValueError(f"{key} must be a string or null")
            opt[key] = v
        launch, context, launcher = get("launch"), get("context"), get("launcher")
        return Manifest(
            run_id=run_id, created_at=created, harness=str(get("harness") or "unknown"),
            surface=str(get("surface") or "unknown"), cwd=str(get("cwd") or ""),
            host=str(get("host") or ""), subjects=subjects,
            launch=launch if type(launch) is dict else None,
            context=context if type(context) is dict else None,
            launcher=launcher if type(launcher) is dict else None,
            arm=_arm(get("arm")), trial=_counts(get("trial"), ("number", "of")),
            repeat=_counts(get("repeat"), ("trials", "jobs")),
            **opt,
        )
    except KeyError as exc:
        raise RecordError(mpath, f"manifest.json lacks required field {exc.args[0]}") from None
    except ValueError as exc:
        raise RecordError(mpath, f"manifest.json: {exc}") from None


def _arm(v: Any) -> str | None:
    """The manifest's `arm` (a ledger addition): a non-empty string, else none. Malformed
    additions read as absent (they are not v1 fields, so they never make a record unreadable)."""
    return v if type(v) is str and v else None


def _counts(v: Any, keys: tuple[str, str]) -> dict[str, int] | None:
    """`trial` {number, of} / `repeat` {trials, jobs}: positive integers, else none."""
    if type(v) is not dict:
        return None
    out = {k: v.get(k) for k in keys}
    if all(type(x) is int and x >= 1 for x in out.values()):
        return out
    return None


# optional text fields of a manifest, in the order they are checked (the first bad one is named)
_OPTIONAL_TEXT = ("parent_run_id", "model", "repo", "worktree", "skill", "runtime_path", "runtime_digest", "boot_id")


def context_valid(run_path: str, manifest: Manifest) -> bool:
    """True when there is no context ref, or the file's size and sha256 match it."""
    ref = manifest.context
    if ref is None:
        return True
    # The ref names context.json and nothing else (as in Loopflow): a ref pointing elsewhere
    # (another path, `..`, /dev/zero) is invalid, never followed.
    size = ref.get("bytes")
    if ref.get("path") != CONTEXT or type(size) is not int or not isinstance(ref.get("content_sha256"), str):
        return False
    digest = hashlib.sha256()
    try:
        with open_regular(os.path.join(run_path, CONTEXT)) as f:
            if os.fstat(f.fileno()).st_size != size:
                return False
            read = 0
            while chunk := f.read(1 << 20):
                read += len(chunk)
                digest.update(chunk)
    except OSError:
        return False
    return read == size and digest.hexdigest() == ref["content_sha256"]


class Terminal(Plain):
    __slots__ = ("present", "valid", "outcome", "ended_at", "ended_dt")

    def __init__(
            self,
            present: bool,
            valid: bool,
            outcome: str | None = None,
            ended_at: str | None = None,
            ended_dt: datetime | None = None,  # ended_at parsed (UTC)
    ) -> None:
        self.present = present
        self.valid = valid
        self.outcome = outcome
        self.ended_at = ended_at
        self.ended_dt = ended_dt


def read_terminal(run_path: str) -> Terminal:
    path = _join(run_path, TERMINAL)
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return Terminal(present=False, valid=True)
    except OSError:
        return Terminal(present=True, valid=False)
    try:
        raw = jsonio.loads(data)
        if not isinstance(raw, dict) or raw.get("schema_version") != SCHEMA_VERSION:
            return Terminal(True, False)
        outcome = raw.get("outcome")
        if outcome not in OUTCOMES:
            return Terminal(True, False)
        # ended_at is required (Loopflow cannot parse a receipt without it): missing or not
        # RFC 3339 makes the receipt unparseable, raising ValueError below.
        text = raw.get("ended_at")
        ended = parse_rfc3339(text)
        return Terminal(True, True, outcome, text if is_canonical_utc(text) else format_utc(ended), ended)
    except (jsonio.JSONDecodeError, ValueError):
        return Terminal(True, False)


def read_provider_session(run_path: str) -> str | None:
    try:
        raw = _read_json(_join(run_path, PROVIDER_SESSION))
    except (OSError, jsonio.JSONDecodeError):
        return None
    sid = raw.get("provider_session_id") if isinstance(raw, dict) else None
    return sid if isinstance(sid, str) else None


def fold_events(run_path: str, state: dict[str, Any] | None = None, offset: int = 0, *,
                size: int | None = None, head: list[bytes] | None = None) -> tuple[dict[str, Any], int, bool]:
    """Fold events.jsonl from `offset` into `state`; returns (state, offset, torn).

    With `size`, bytes at or past that offset are not read: an indexer folds exactly up to
    the size it stat()ed, so its cursor (signature + offset) describes one consistent file.
    """
    state = new_state() if state is None else state
    path = _join(run_path, EVENTS)
    try:
        new_offset, torn = fold_file(path, state, offset, size=size, head=head)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return state, offset, False  # no events (yet): nothing observed, not a gap
    except OSError as exc:
        raise RecordError(path, f"events.jsonl cannot be read ({exc.strerror or exc})") from None
    return state, new_offset, torn


def build_snapshot(run_path: str, manifest: Manifest, state: dict[str, Any], torn: bool,
                   context_ok: bool, terminal: Terminal, provider_session: str | None) -> RunSnapshot:
    """Assemble the snapshot from the separately read parts (the indexer reuses this)."""
    usage = reduce_usage(state, 1 if torn else 0)
    gaps = usage.gaps + (0 if context_ok else 1) + (0 if terminal.valid else 1)
    if terminal.present:
        state_name = "settled"
    else:
        state_name = liveness(manifest.host, manifest.boot_id, manifest.launcher)
    attempts = sorted(state["attempts"].values(), key=lambda a: a["attempt_key"])
    skill_invoked = state["skill_invoked"] if isinstance(state["skill_invoked"], bool) else None
    verdict = judge(state=state_name, outcome=terminal.outcome if terminal.valid else None,
                    result=state["result"], evidence_gaps=gaps, skill_invoked=skill_invoked)
    return RunSnapshot(
        id=manifest.run_id, parent_run_id=manifest.parent_run_id, repo=manifest.repo,
        worktree=manifest.worktree, subjects=manifest.subjects, skill=manifest.skill,
        outcome=terminal.outcome if terminal.valid else None,
        started=format_utc(parse_rfc3339(manifest.created_at)), ended=terminal.ended_at,
        usage=usage, evidence_gaps=gaps, harness=manifest.harness, model=run_model(manifest.model, state),
        surface=manifest.surface, state=state_name, host=manifest.host or None, cwd=manifest.cwd,
        path=run_path, provider_session_id=provider_session or state["session"],
        final_answer=state["answer"], streams=stream_totals(state), attempts=attempts,
        tool_uses=dict(state["tools"]), api_retries=state["retries"],
        skill_invoked=state["skill_invoked"], ok=verdict.ok, error_kind=verdict.error_kind,
        error_detail=verdict.error_detail, tool_status=dict(state.get("tool_status") or {}),
        command=command_text(state["result"]), exit_code=exit_code_of(state["result"]),
        arm=manifest.arm, trial=manifest.trial_number, trials=manifest.trials,
    )


UNREADABLE = "unreadable"  # the state of a record that cannot be read (RunSnapshot.state)


def unreadable_snapshot(run_id: str, path: str | None) -> RunSnapshot:
    """What `ledger runs` shows for a record that cannot be read (a damaged file, a symlink
    where its directory should be): its id and state `unreadable`, nothing else known. It is
    listed, never dropped: a run that disappears from the listings hides its cost."""
    return RunSnapshot(
        id=run_id, parent_run_id=None, repo=None, worktree=None, subjects=[], skill=None, outcome=None,
        started=None, ended=None, usage=UsageTotals(), evidence_gaps=0, harness=None, model=None,
        surface=None, state=UNREADABLE, path=path,
    )


def read_run(run_path: str | Path) -> RunSnapshot:
    """Read one run record whole (streaming over events.jsonl)."""
    run_path = os.fspath(run_path)
    manifest = read_manifest(run_path)
    # read terminal before events: events appended after settlement are still read below
    terminal = read_terminal(run_path)
    state, _, torn = fold_events(run_path)
    return build_snapshot(run_path, manifest, state, torn, context_valid(run_path, manifest),
                          terminal, read_provider_session(run_path))


def scan_named(home: Path) -> Iterator[tuple[str | None, RunSnapshot | ScanProblem]]:
    """scan() with each item's run directory name (None for a symlinked shard: no run)."""
    for path, name, kind in iter_run_entries(home):
        if kind == "shard-link":
            yield None, ScanProblem(path, SYMLINK_REASON)
            continue
        if not name.startswith(PREFIX):
            continue
        if kind == "link":
            yield name, ScanProblem(path, SYMLINK_REASON)
            continue
        try:
            snapshot = read_run(path)
        except RecordError as exc:
            yield name, ScanProblem(exc.path, exc.reason)
            continue
        except OSError as exc:
            yield name, ScanProblem(exc.filename or path, f"record cannot be read ({exc.strerror or exc})")
            continue
        except Exception as exc:  # noqa: BLE001 - one broken record never hides the others
            yield name, ScanProblem(path, f"record cannot be read ({type(exc).__name__}: {exc})")
            continue
        yield name, snapshot


def scan(home: Path) -> Iterator[RunSnapshot | ScanProblem]:
    """Every run of a home, oldest directory order; damaged records come as ScanProblem, and
    so do symlinks where a shard or a run directory should be (listed, not followed)."""
    for _, item in scan_named(home):
        yield item
