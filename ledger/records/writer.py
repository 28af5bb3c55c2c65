"""Write run records: atomic publish, append-only events, write-once settlement.

Writing events never blocks or fails the caller: envelopes go through a queue to a
background thread; an I/O failure is logged once and later events are dropped, while
settlement still happens.
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import threading
import uuid
import weakref
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ledger.errors import LedgerError, SettlementConflict
from ledger.records import jsonio
from ledger.records.ids import is_run_id, mint_run_id, parse_run_id, run_dir
from ledger.records.liveness import boot_id, hostname, launcher_identity
from ledger.records.model import ALL_INT_COUNTERS, OUTCOMES, SCHEMA_VERSION, Manifest, Subject
from ledger.records.reader import CONTEXT, EVENTS, MANIFEST, PROVIDER_SESSION, TERMINAL, read_terminal
from ledger.records.timefmt import now_rfc3339

log = logging.getLogger("ledger.records")

DIR_MODE = 0o700
FILE_MODE = 0o600
LAUNCH_KEYS = ("system_prompt", "task_prompt", "agent", "account_id", "max_turns", "write_scope",
               "execution_boundary", "skip_permissions", "chrome")


def _fsync_dir(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_exclusive(path: str | Path, data: bytes) -> None:
    """Create `path` (O_EXCL, O_NOFOLLOW, 0600), write, fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # exactly 0600 whatever the umask
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _mkdirs(path: Path) -> None:
    """Create directories 0700 (and tighten ones we created but the umask loosened)."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            pass
        os.chmod(d, DIR_MODE)


SHARD_HINT = ("readers never follow a symlinked shard (`ledger verify` lists them): move the records back into "
              "the home (replace runs/<xx> by a real directory), or put the whole runs/ directory (or the home) "
              "on the other disk instead")


def _check_shard(shard: Path) -> None:
    """A shard `runs/<xx>` that is a symlink (or anything but a directory) is refused before a
    run starts (issue 32): readers never follow one (ledger.records.reader.iter_run_entries),
    so a record written through it would be lost to every reader. A symlinked `runs/` itself
    (or home) is followed by the writer and the readers alike."""
    import stat

    try:
        st = os.lstat(shard)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise LedgerError(f"the shard {shard} is a symlink: a run recorded through it would not be read", SHARD_HINT)
    if not stat.S_ISDIR(st.st_mode):
        raise LedgerError(f"the shard {shard} is not a directory: cannot record a run in it", SHARD_HINT)


def write_blob(run_path: str | Path, relpath: str, data: bytes) -> tuple[str, int]:
    """Write an evidence file inside a run (e.g. a raw stream); return (sha256 hex, bytes)."""
    target = Path(run_path) / relpath
    _mkdirs(target.parent)
    write_exclusive(target, data)
    return hashlib.sha256(data).hexdigest(), len(data)


def inherited_parent(env: Mapping[str, str]) -> tuple[str | None, list[Subject]]:
    """The parent run from LF_RUN_ID/LF_RUN_DIR (or LEDGER_*), only if its manifest agrees."""
    for id_var, dir_var in (("LF_RUN_ID", "LF_RUN_DIR"), ("LEDGER_RUN_ID", "LEDGER_RUN_DIR")):
        rid, rdir = env.get(id_var), env.get(dir_var)
        if not rid or not rdir or not is_run_id(rid):
            continue
        try:
            with open(os.path.join(rdir, MANIFEST), "rb") as f:
                parent = jsonio.loads(f.read())
        except (OSError, jsonio.JSONDecodeError):
            continue
        if isinstance(parent, dict) and parent.get("run_id") == rid:
            subjects = [Subject(s["selector"], "inherited") for s in parent.get("subjects") or []
                        if isinstance(s, dict) and isinstance(s.get("selector"), str)]
            return rid, subjects
    return None, []


def publish_run(home: str | Path, *, harness: str, surface: str = "headless", cwd: str | None = None,
                model: str | None = None, repo: str | None = None, worktree: str | None = None,
                skill: str | None = None, subjects: Iterable[str | Subject] = (),
                launch: Mapping[str, Any] | None = None, context: Mapping[str, Any] | None = None,
                env: Mapping[str, str] | None = None, run_id: str | None = None,
                runtime_path: str | None = None, created_at: str | None = None, arm: str | None = None,
                trial: Mapping[str, int] | None = None, repeat: Mapping[str, int] | None = None) -> Manifest:
    """Publish a new run atomically: staging dir -> fsync -> rename -> fsync parent.

    `context` (the exact prompts) is written to context.json and bound by sha256 + size.
    `env` is only consulted for the parent run (LF_RUN_ID / LF_RUN_DIR); it is never persisted.
    """
    run_id = parse_run_id(run_id) if run_id else mint_run_id()
    final = run_dir(Path(home), run_id)
    _check_shard(final.parent)
    _mkdirs(final.parent)
    _check_shard(final.parent)  # (made by another process meanwhile: the same rule)
    parent_id, inherited = inherited_parent(env if env is not None else os.environ)
    declared = [s if isinstance(s, Subject) else Subject(str(s), "declared") for s in subjects]
    seen = {s.selector for s in declared}
    all_subjects = declared + [s for s in inherited if s.selector not in seen]
    manifest = Manifest(
        run_id=run_id, created_at=created_at or now_rfc3339(), harness=harness, surface=surface,
        cwd=cwd or os.getcwd(), host=hostname(), subjects=all_subjects, parent_run_id=parent_id,
        model=model, repo=repo, worktree=worktree, skill=skill,
        launch={k: launch.get(k) for k in LAUNCH_KEYS} if launch is not None else None,
        runtime_path=runtime_path, boot_id=boot_id(), launcher=launcher_identity(),
        arm=arm or None, trial=dict(trial) if trial else None, repeat=dict(repeat) if repeat else None,
    )
    staging = final.parent / f".{run_id}.staging"
    os.mkdir(staging, DIR_MODE)
    try:
        os.chmod(staging, DIR_MODE)  # exactly 0700 whatever the umask
        if context is not None:
            data = jsonio.dumps_pretty({"schema_version": SCHEMA_VERSION, "context": dict(context)})
            write_exclusive(staging / CONTEXT, data)
            manifest.context = {"path": CONTEXT, "content_sha256": hashlib.sha256(data).hexdigest(),
                                "bytes": len(data)}
        write_exclusive(staging / MANIFEST, jsonio.dumps_pretty(manifest.to_dict()))
        _fsync_dir(staging)
        os.rename(staging, final)
    except BaseException:
        for child in staging.iterdir() if staging.exists() else ():
            child.unlink()
        if staging.exists():
            staging.rmdir()
        raise
    _fsync_dir(final.parent)
    return manifest


def settle(run_path: str | Path, outcome: str, *, ended_at: str | None = None,
           result_ref: str | None = None) -> bool:
    """Write terminal.json once. Returns True if written, False if it already held `outcome`.

    A different existing outcome raises SettlementConflict and leaves the file unchanged.
    """
    if outcome not in OUTCOMES:
        raise LedgerError(f"unknown outcome {outcome!r}; expected one of {', '.join(OUTCOMES)}")
    path = Path(run_path) / TERMINAL
    body = {"schema_version": SCHEMA_VERSION, "outcome": outcome,
            "ended_at": ended_at or now_rfc3339(), "result_ref": result_ref}
    try:
        write_exclusive(path, jsonio.dumps_pretty(body))
    except FileExistsError:
        existing = read_terminal(os.fspath(run_path))
        if existing.outcome == outcome:
            return False
        raise SettlementConflict(
            f"Run already settled as {existing.outcome or 'an unreadable outcome'}; refusing {outcome}",
            hint=f"inspect it with `ledger show {Path(run_path).name}`") from None
    _fsync_dir(run_path)
    return True


def write_provider_session(run_path: str | Path, session_id: str, account_id: str | None = None) -> None:
    """Replace provider-session.json atomically (staging file + rename)."""
    run_path = Path(run_path)
    # a unique staging name: two threads (or processes) replacing at once never share it
    tmp = run_path / f".provider-session-{uuid.uuid4().hex}.staging"
    body = {"schema_version": SCHEMA_VERSION, "provider_session_id": session_id, "account_id": account_id}
    write_exclusive(tmp, jsonio.dumps_pretty(body))
    try:
        os.replace(tmp, run_path / PROVIDER_SESSION)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    _fsync_dir(run_path)


_STOP = object()


class EventWriter:
    """Append envelopes to events.jsonl from a background thread.

    `emit()` only stamps seq/observed_at and enqueues: it never blocks on I/O and never
    raises for I/O. The first write failure is logged once; later events are dropped.
    """

    def __init__(self, run_path: str | Path) -> None:
        self.path = os.path.join(os.fspath(run_path), EVENTS)
        self._seq = 0
        self._lock = threading.Lock()
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.failed: str | None = None
        self.dropped = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="ledger-events", daemon=True)
        self._thread.start()

    def emit(self, type: str, **fields: Any) -> int:
        # seq is taken and the envelope queued under one lock: two threads emitting at once
        # must not enqueue seq 5 before seq 4 (a non-increasing seq is an evidence gap), and
        # an emit racing close() must not land behind the stop marker unaccounted.
        with self._lock:
            seq = self._seq
            self._seq += 1
            env = {"schema_version": SCHEMA_VERSION, "seq": seq, "observed_at": now_rfc3339(), "type": type}
            env.update(fields)
            if self._closed:
                self.dropped += 1
            else:
                self._q.put(env)
        return seq

    def _fail(self, exc: BaseException) -> None:
        if self.failed is None:
            self.failed = f"{type(exc).__name__}: {exc}"
            log.warning("ledger: cannot write %s (%s); the run goes on without further events",
                        self.path, self.failed)

    def _drop(self, item: dict[str, Any], exc: BaseException) -> None:
        """One event JSON cannot hold (jsonio.storable already wrote what it could): dropped,
        the events after it still written; its seq is a hole `ledger verify` names."""
        self.dropped += 1
        if self.failed is None:
            self.failed = f"{type(exc).__name__}: {exc}"
        log.warning("ledger: cannot write event seq %s (%s) to %s (%s): it is left out, the next events are "
                    "still written (`ledger verify` shows the hole)", item.get("seq"), item.get("type"), self.path,
                    f"{type(exc).__name__}: {exc}")

    def _run(self) -> None:
        fd: int | None = None
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
        except OSError as exc:
            self._fail(exc)
        dumps = jsonio.dumps_compact
        stop = False
        while not stop:
            batch = [self._q.get()]
            try:
                while len(batch) < 4096:
                    batch.append(self._q.get_nowait())
            except queue.Empty:
                pass
            lines = []
            for item in batch:
                if item is _STOP:
                    stop = True
                    continue
                if fd is None:
                    self.dropped += 1
                    continue
                try:
                    lines.append(dumps(item) + b"\n")
                except TypeError as exc:  # an unserialisable field: drop that event, keep going
                    self._drop(item, exc)
            if fd is not None and lines:
                try:
                    data = memoryview(b"".join(lines))
                    while data:
                        data = data[os.write(fd, data):]
                except OSError as exc:
                    # Stop writing: a short write may have left a partial line, which a
                    # reader counts as one torn-line gap. Appending more would glue the next
                    # line onto it and make the whole record unreadable.
                    self._fail(exc)
                    self.dropped += len(lines)
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                    fd = None
        if fd is not None:
            try:
                os.fsync(fd)
            except OSError as exc:
                self._fail(exc)
            os.close(fd)

    def close(self, timeout: float | None = 30.0) -> None:
        """Flush everything queued, fsync, stop the thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._q.put(_STOP)
        self._thread.join(timeout)


def _as_counter(v: Any) -> int | None:
    """An integral counter, or None (omitted) for unknown/unusable values: never raises."""
    if v is None or isinstance(v, bool):
        return None
    try:
        n = int(v)
    except (TypeError, ValueError, OverflowError):
        return None
    if isinstance(v, float) and n != v:
        return None
    return n


class UsageStream:
    """One usage stream (attempt, turn, model): cumulative observations numbered from 1."""

    def __init__(self, writer: EventWriter, *, provider: str, model: str | None, attempt_key: str,
                 turn_key: str) -> None:
        self.writer = writer
        self.provider, self.model = provider, model
        self.attempt_key, self.turn_key = attempt_key, turn_key
        self.stream_id = f"{attempt_key}/{turn_key}/{model or 'unknown'}"
        self.observation_seq = 0

    def observe(self, counters: Mapping[str, Any], *, final_receipt: bool = False,
                start_known: bool = True) -> bool:
        """Write one cumulative observation; unknown (None) counters are omitted, never 0.
        Returns False (and writes nothing) when no counter is known."""
        usage: dict[str, Any] = {}
        for name in ALL_INT_COUNTERS:
            v = _as_counter(counters.get(name))
            if v is not None:
                usage[name] = v
        cost = counters.get("cost_usd")
        if cost is not None and not isinstance(cost, bool):
            try:
                # A non-finite cost is written as null, as Loopflow (serde_json) does: the
                # reader counts it as a gap instead of the run silently having no cost.
                usage["cost_usd"] = float(cost)
            except (TypeError, ValueError):
                pass
            except OverflowError:  # (an int past a float's range) written as null: the reader's gap
                usage["cost_usd"] = None
        if not usage:
            return False
        if self.model:
            usage["model"] = self.model
        self.observation_seq += 1
        self.writer.emit("usage", usage_stream_id=self.stream_id, provider=self.provider,
                         model=self.model, attempt_key=self.attempt_key, turn_key=self.turn_key,
                         observation_seq=self.observation_seq, counter_kind="cumulative",
                         start_known=start_known, final_receipt=final_receipt, usage=usage)
        return True


class Interrupted(BaseException):
    """Raised in the main thread by a SIGTERM handler so the capture settles `interrupted`."""


def _settle_dropped(run_path: str, writer: EventWriter) -> None:
    writer.close()
    try:
        settle(run_path, "failed")
    except (LedgerError, OSError):
        pass


class RunCapture:
    """A run being recorded: publish on creation, events while open, settle on exit.

    Used as a context manager: normal exit settles whatever `settle()` was given (default
    `completed`); an exception settles `failed`; KeyboardInterrupt / Interrupted settle
    `interrupted`. A capture dropped without settling settles `failed` (garbage collection).
    """

    def __init__(self, home: str | Path, **publish_kwargs: Any) -> None:
        self.manifest = publish_run(home, **publish_kwargs)
        self.run_id = self.manifest.run_id
        self.path = run_dir(Path(home), self.run_id)
        self.events = EventWriter(self.path)
        self.settled: str | None = None
        self._attempt = 0
        self._streams: dict[tuple[str, str, str | None], UsageStream] = {}
        self._finalizer = weakref.finalize(self, _settle_dropped, os.fspath(self.path), self.events)

    def emit(self, type: str, **fields: Any) -> int:
        return self.events.emit(type, **fields)

    def start_attempt(self, provider: str, model: str | None, account_id: str | None = None) -> str:
        self._attempt += 1
        key = f"attempt-{self._attempt}"
        self.emit("provider_attempt_started", provider=provider, model=model,
                  account_id=account_id, attempt_key=key)
        return key

    def usage_stream(self, *, provider: str, model: str | None, attempt_key: str, turn_key: str) -> UsageStream:
        """The stream of (attempt, turn, model); asking twice returns the same stream, so its
        observation_seq keeps increasing instead of restarting at 1 (a gap)."""
        key = (attempt_key, turn_key, model)
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = UsageStream(self.events, provider=provider, model=model,
                                                      attempt_key=attempt_key, turn_key=turn_key)
        return stream

    def provider_session(self, attempt_key: str, session_id: str, account_id: str | None = None) -> None:
        self.emit("provider_session_observed", attempt_key=attempt_key, provider_session_id=session_id)
        try:
            write_provider_session(self.path, session_id, account_id)
        except OSError as exc:
            log.warning("ledger: cannot write provider-session.json (%s)", exc)

    def settle(self, outcome: str, *, ended_at: str | None = None) -> bool:
        """Flush events, then write terminal.json (write-once)."""
        self.events.close()
        written = settle(self.path, outcome, ended_at=ended_at)
        self.settled = outcome
        self._finalizer.detach()
        return written

    def detach(self) -> None:
        """Stop recording without settling: the event log is flushed and closed and the run is
        left unsettled, as when the launcher hands the run on or dies. It reads as `running`
        while this process lives and as `abandoned` once it is gone (DESIGN §2, settlement)."""
        self.events.close()
        self._finalizer.detach()

    def __enter__(self) -> "RunCapture":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.settled is not None:
            return
        if exc_type is None or (issubclass(exc_type, SystemExit) and getattr(exc, "code", 1) in (0, None)):
            self.settle("completed")  # sys.exit(0) inside the capture is a normal end
        elif issubclass(exc_type, (KeyboardInterrupt, Interrupted)):
            self.settle("interrupted")
        else:
            self.settle("failed")


def sigterm_raises_interrupted() -> Callable[[], None]:
    """Make SIGTERM raise Interrupted in the main thread; returns a function that restores."""
    import signal

    def handler(signum: int, frame: Any) -> None:
        raise Interrupted(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, previous)
