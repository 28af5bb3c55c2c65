"""`ledger run`: launch a command or an agent headless and record it as a run.

Orchestration (DESIGN §2, §3, §5):

1. choose the harness (from the executable's basename with `auto`) and the model (ledger's
   `--model`, else the harness's own model flag), build the redactor from the child's
   environment, publish the run (`RunCapture`: manifest with host, boot id and the
   launcher's pid + start ticks, so a SIGKILLed launcher later reads as `abandoned`);
2. start the child in its own process group (stdin passed through, `LF_RUN_ID` /
   `LF_RUN_DIR` / `LEDGER_RUN_*` exported) and read its stdout in this process: each line
   is kept in a bounded raw capture and, for agent harnesses, parsed strictly and fed to
   the harness adapter, which writes text / tool_use / usage / conversation events;
3. stop the child on `--timeout`, on SIGINT / SIGTERM / SIGHUP to ledger, or when the
   running cost passes `--max-cost` (SIGTERM to the group, a grace period, SIGKILL);
4. write the redacted raw stream and the stderr tail into the record (`streams/`), bound
   by sha256 and size in the `result` event, together with the evidence status
   (`verified` / `unverifiable` + reasons), the exit status and why ledger stopped it;
5. settle `completed` / `failed` / `interrupted` and return what the CLI prints.

The `result` event carries only ledger additions (unknown fields are fine for v1 readers);
no new event type is invented.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import time
from typing import Any

from ledger.errors import LedgerError
from ledger.launch.adapters import COMMAND, HARNESSES, adapter_class, detect_harness, harness_spec
from ledger.launch.adapters.base import Adapter
from ledger.launch.capture import LineSplitter, RawCapture, StrictParser, TailBuffer
# (re-exported: what callers import from the runner)
from ledger.launch.options import EXIT_SKILL_NOT_INVOKED, TOKEN_KEYS, RunOptions, RunResult  # noqa: F401
from ledger.launch.process import ChildProcess
from ledger.launch.progress import Progress
from ledger.launch.recording import books_cost, child_env, launch_request, open_capture, running_cost  # noqa: F401
from ledger.launch.redact import Redactor
from ledger.launch.sessions import SessionStore
from ledger.launch.settlement import HeadlessSettlement
from ledger.launch.stop import EXIT_MAX_COST, EXIT_TIMEOUT, NEEDS_TERMINAL, Signals, StopControl  # noqa: F401
from ledger.launch.stop import stop_exit, stop_reason_of
from ledger.records.verdict import judge

TICK_SECS = 0.1
TERMINAL_CHECK_SECS = 0.5            # how often a quiet child is checked for a terminal stop


class Launcher(HeadlessSettlement):
    """One `ledger run`. Use `run()`; everything it records goes through RunCapture."""

    def __init__(self, opts: RunOptions) -> None:
        self.o = opts
        argv = list(opts.argv)
        if not argv:
            raise LedgerError("no command to run", hint="put the command after `--`: `ledger run -- claude -p ...`")
        self.argv = argv
        harness = opts.harness if opts.harness != "auto" else detect_harness(argv)
        if harness not in HARNESSES:
            raise LedgerError(f"unknown harness {harness!r}", hint=f"use --harness auto|{'|'.join(HARNESSES)}")
        self.harness = harness
        self.harness_cls = adapter_class(harness)
        # an agent detected by name but not asked for its JSON stream is recorded as a plain
        # command (no usage); an explicit --harness is trusted (e.g. a wrapper script)
        self.reader = (harness if opts.harness != "auto" or self.harness_cls.stream_format_ok(argv)
                       else COMMAND)
        self.model = opts.model or self.harness_cls.model_from_argv(argv)
        self.env = dict(opts.env if opts.env is not None else os.environ)
        self.redactor = Redactor.from_env(self.env, opts.redact)
        self.signals = Signals()
        self.stderr_tty = os.isatty(2)
        show = opts.progress if opts.progress is not None else self.stderr_tty
        self.progress = Progress(bool(show), self.stderr_tty, command=self.reader == COMMAND)
        self.terminal_stop: str | None = None  # SIGTTIN / SIGTTOU / stopped: the child needs a terminal

    # -- the run ----------------------------------------------------------------------------

    def run(self) -> RunResult:
        o = self.o
        skill = o.skill or o.expect_skill
        self.signals.install()  # from before the run is published: a stop is never lost
        try:
            return self._publish_and_run(skill)
        finally:
            self.signals.restore()

    def _publish_and_run(self, skill: str | None) -> RunResult:
        o = self.o
        capture = open_capture(
            o.home, harness=self.harness, model=self.model, skill=skill, subjects=list(o.subjects),
            launch=launch_request(self.harness_cls, self.argv, self.redactor), env=self.env,
            cwd=o.cwd or os.getcwd(), arm=o.arm, trial=o.trial, run_id=o.run_id,
        )
        self.capture = capture
        try:
            return self._run(capture)
        except BaseException as exc:
            if capture.settled is None:
                try:
                    capture.settle("interrupted" if isinstance(exc, KeyboardInterrupt) else "failed")
                except Exception:  # noqa: BLE001 - already failing; the record stays unsettled
                    pass
            raise

    def _run(self, capture: Any) -> RunResult:
        o = self.o
        cls = adapter_class(self.reader)
        if self.reader != self.harness:
            hint = harness_spec(self.harness).stream_hint
            sys.stderr.write(f"ledger: {self.harness} is not asked for its JSON stream ({hint}); "
                             "recording it as a plain command: no usage, no cost\n")
        sessions = SessionStore(o.home) if cls.parses_stream else None
        adapter = cls(capture, redactor=self.redactor, model=self.model, argv=self.argv, sessions=sessions,
                      run_id=capture.run_id, expect_skill=o.expect_skill)
        self.adapter = adapter
        adapter.start()
        parses = adapter.parses_stream
        passthrough_fd = None if parses else (2 if o.json_output else o.stdout_fd)

        started = time.monotonic()
        try:
            if self.signals.received:  # stopped before the agent even started
                return self._spawn_failed(capture, adapter, None, started)
            try:
                child = ChildProcess(self.argv, env=child_env(self.env, capture), cwd=o.cwd,
                                     stderr_passthrough=True,
                                     write_stderr=lambda data: self.progress.passthrough(2, data))
            except (FileNotFoundError, PermissionError, NotADirectoryError, OSError) as exc:
                return self._spawn_failed(capture, adapter, exc, started)
            self.child = child
            # The pipe reader thread must get the GIL back quickly while the parser works: with
            # the default 5 ms switch interval a fast agent fills the 1 MiB pipe and blocks.
            sys.setswitchinterval(0.0005)
            if o.nice > 0:
                # this (parsing) thread yields the CPU to the agent under load; on Linux nice is
                # per thread, so the pipe readers (already started) and the agent keep theirs
                try:
                    os.nice(o.nice)
                except OSError:
                    pass
            result = self._consume(capture, adapter, child, started, parses, passthrough_fd)
        finally:
            self.progress.close()
        return result

    def _spawn_failed(self, capture: Any, adapter: Adapter, exc: OSError | None, started: float) -> RunResult:
        """The agent never ran: it could not be started (exc), or ledger was stopped first."""
        if exc is None:  # (exit and outcome by the one stop rule, as a signal stop while running)
            name = signal.Signals(self.signals.received[0]).name
            outcome, code = stop_exit("signal", f"signal:{name}", None)
            msg = f"stopped by {name} before the command started"
        else:
            code, outcome = (127 if isinstance(exc, FileNotFoundError) else 126), "failed"
            msg = self.redactor.text(f"cannot start {self.argv[0]!r}: {exc.strerror or exc}")
        stop_reason = "signal" if exc is None else None
        evidence = "unverifiable" if adapter.parses_stream else "not_applicable"
        reasons = ["the command was not started" if exc is None else "the command could not be started"]
        if adapter.provider is not None:
            capture.emit("provider_attempt_finished", attempt_key=adapter.attempt_key, outcome=outcome)
        duration = time.monotonic() - started
        capture.emit("result", outcome=outcome, duration_secs=duration, exit_code=code, returncode=None,
                     stop_reason=stop_reason, evidence=evidence, evidence_reasons=reasons, error=msg,
                     command=[self.redactor.text(a) for a in self.argv])
        capture.settle(outcome)
        return RunResult(
            run_id=capture.run_id, path=os.fspath(capture.path), harness=self.harness, model=self.model,
            outcome=outcome, exit_code=code, returncode=None, stop_reason=stop_reason, duration_secs=duration,
            evidence=evidence, evidence_reasons=reasons, tokens={}, cost_usd=None, cost_basis=None,
            cost_note=None, final_answer=None, provider_session_id=None, api_retries=0,
            skill_invoked=adapter.skill_invoked, final_streams=0, streams=0, error=msg,
            verdict=judge(state="settled", outcome=outcome, evidence_gaps=0, skill_invoked=adapter.skill_invoked,
                          result={"stop_reason": stop_reason, "error": msg, "exit_code": code}))

    def _consume(self, capture: Any, adapter: Adapter, child: ChildProcess, started: float,
                 parses: bool, passthrough_fd: int | None) -> RunResult:
        o = self.o
        raw = RawCapture(o.capture_bytes) if parses else None
        stdout_tail = TailBuffer(64 * 1024) if not parses else None
        splitter = LineSplitter()
        parser = StrictParser()
        feed = adapter.feed
        stats = adapter.stats
        adapter_errors: list[str] = []
        stops = self.stops = StopControl(self.signals, capture.path, started=started, timeout=o.timeout,
                                         grace_secs=o.grace_secs, say=self.progress.line)
        eof_by: float | None = None
        eof = False
        max_cost_hit: dict[str, Any] | None = None
        last_cost_check = 0.0
        last_terminal_check = started
        terminal_stops = 0
        progress = self.progress
        get = child.chunks.get
        Empty = queue.Empty

        def process_lines(lines: list[bytes]) -> None:
            for line in lines:
                obj = parser.parse(line)
                if obj is None:
                    continue
                try:
                    feed(obj)
                except Exception as exc:  # noqa: BLE001 - a strange line never stops the capture
                    if len(adapter_errors) < 5:
                        adapter_errors.append(f"line {parser.line_no}: {type(exc).__name__}: {exc}")

        while True:
            try:
                chunk = get(timeout=TICK_SECS)
            except Empty:
                chunk = b""
            if chunk is None:
                eof = True
            elif chunk:
                stats.last_event_at = time.monotonic()
                child.consumed(len(chunk))
                if parses:
                    raw.add(chunk)  # type: ignore[union-attr]
                    process_lines(splitter.feed(chunk))
                    try:
                        adapter.flush()
                    except Exception as exc:  # noqa: BLE001
                        if len(adapter_errors) < 5:
                            adapter_errors.append(f"flush: {type(exc).__name__}: {exc}")
                else:
                    stdout_tail.add(chunk)  # type: ignore[union-attr]
                    if passthrough_fd is not None:
                        if not progress.passthrough(passthrough_fd, chunk):
                            passthrough_fd = None
            now = time.monotonic()
            stops.check(child, now)  # signals, --timeout, a stop request
            if (o.max_cost is not None and child.stopped_by is None and adapter.books
                    and (now - last_cost_check >= 0.25 or eof)):
                last_cost_check = now
                cost, basis, note = running_cost(adapter)
                if cost is not None and cost > o.max_cost:
                    max_cost_hit = {"limit_usd": o.max_cost, "observed_usd": cost, "basis": basis}
                    if child.poll() is None:
                        stops.stop(child, "max_cost", now)
                        progress.line(f"ledger: cost ${cost:.4f} ({basis}) passed --max-cost ${o.max_cost:g}; "
                                      f"stopping the agent")
            if (child.stopped_by is None and now - last_terminal_check >= TERMINAL_CHECK_SECS
                    and now - stats.last_event_at >= TERMINAL_CHECK_SECS and child.poll() is None):
                # an interactive program waits for the terminal forever, stopped (SIGTTIN):
                # it is in the background process group; stop it and say how to run it headless
                last_terminal_check = now
                why = child.terminal_stop()
                if why is not None:
                    terminal_stops += 1
                    if why != "stopped" or terminal_stops >= 2:  # ("stopped": seen twice, not a blip)
                        self.terminal_stop = why
                        stops.stop(child, NEEDS_TERMINAL, now, min(o.grace_secs, 2.0))
                else:
                    terminal_stops = 0
            if stats.changed or chunk == b"":
                stats.changed = False
                if progress.enabled:
                    progress.update(stats, lambda: self._live_figures(adapter))
            if eof:
                break
            if child.poll() is not None:
                if eof_by is None:
                    eof_by = now + (0.5 if child.stopped_by else o.drain_secs)
                elif now >= eof_by:
                    break  # something the child left behind holds the pipe: stop reading
        rc = stops.wait_out(child, TICK_SECS, child.wait)
        child.join_stderr(0.5)
        # whatever is still queued (EOF raced with the exit, or we stopped waiting for EOF)
        while True:
            try:
                chunk = child.chunks.get_nowait()
            except Empty:
                break
            if not chunk:
                continue
            child.consumed(len(chunk))
            if parses:
                raw.add(chunk)  # type: ignore[union-attr]
                process_lines(splitter.feed(chunk))
            else:
                stdout_tail.add(chunk)  # type: ignore[union-attr]
                if passthrough_fd is not None and not progress.passthrough(passthrough_fd, chunk):
                    passthrough_fd = None
        if parses:
            last = splitter.finish()
            if last is not None:
                process_lines([last])
        duration = time.monotonic() - started
        stop_reason = stop_reason_of(child.stopped_by, stops.requested)
        try:
            adapter.finish(rc, stop_reason)
        except Exception as exc:  # noqa: BLE001
            adapter_errors.append(f"finish: {type(exc).__name__}: {exc}")
        return self._settle(capture, adapter, child, rc, stop_reason, duration, raw, stdout_tail, parser,
                            splitter, adapter_errors, max_cost_hit)

    def _live_figures(self, adapter: Adapter) -> tuple[dict[str, Any], float | None, str | None]:
        tokens, _, _ = adapter.totals()
        cost = basis = None
        if adapter.books:  # the price table loads once, lazily, when a stream needs an estimate
            cost, basis, _ = running_cost(adapter)
        return tokens, cost, basis


def launch(opts: RunOptions) -> RunResult:
    """Run one command/agent under ledger and record it; see the module docstring. An agent
    asked for its interactive UI, with a terminal to give it, runs on the terminal instead
    (ledger.launch.interactive)."""
    from ledger.launch.interactive import launch_interactive, wanted

    harness = wanted(opts.harness, opts.argv) if opts.argv else None
    if harness is not None:
        return launch_interactive(opts, harness)
    return Launcher(opts).run()
