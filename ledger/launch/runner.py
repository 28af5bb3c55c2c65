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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ledger.errors import LedgerError
from ledger.launch.adapters import COMMAND, HARNESSES, adapter_class, detect_harness, harness_spec
from ledger.launch.adapters.base import Adapter
from ledger.launch.capture import DEFAULT_CAPTURE_BYTES, LineSplitter, RawCapture, StrictParser, TailBuffer
from ledger.launch.process import ChildProcess, exit_code_for
from ledger.launch.progress import Progress
from ledger.launch.redact import Redactor
from ledger.launch.sessions import SessionStore
from ledger.launch.stop import EXIT_STOPPED, STOP_REQUEST, Signals, StopControl, stop_reason_of
from ledger.records.verdict import NO_VERDICT, Verdict, judge

STREAM_BLOB = "streams/stdout.jsonl"
STDOUT_TAIL_BLOB = "streams/stdout-tail.txt"
STDERR_TAIL_BLOB = "streams/stderr-tail.txt"
TICK_SECS = 0.1
EXIT_TIMEOUT = 124
EXIT_MAX_COST = 125
# the child was stopped for touching the terminal (an interactive program): an error, exit 1
EXIT_NEEDS_TERMINAL = 1
NEEDS_TERMINAL = "needs_terminal"    # stop_reason / stopped_by
TERMINAL_CHECK_SECS = 0.5            # how often a quiet child is checked for a terminal stop
# --expect-skill: the agent exited 0 but the skill was never successfully invoked (the
# verdict skill-not-invoked); RunOptions.fail_on_skill=False (`--no-fail`) keeps the agent's 0
EXIT_SKILL_NOT_INVOKED = 123
_SKIP_PERMISSION_FLAGS = ("--dangerously-skip-permissions", "--dangerously-bypass-approvals-and-sandbox",
                          "--yolo", "-y")


@dataclass
class RunOptions:
    argv: Sequence[str]
    home: Path
    harness: str = "auto"
    subjects: Sequence[str] = ()
    skill: str | None = None
    model: str | None = None
    timeout: float | None = None
    redact: Sequence[str] = ()
    expect_skill: str | None = None
    fail_on_skill: bool = True            # exit EXIT_SKILL_NOT_INVOKED when the skill was not invoked
    max_cost: float | None = None
    progress: bool | None = None          # None: when stderr is a terminal
    json_output: bool = False
    cwd: str | None = None
    env: Mapping[str, str] | None = None  # the child's environment (default: ours)
    grace_secs: float = 5.0               # SIGTERM -> SIGKILL
    drain_secs: float = 2.0               # after the child exits, wait this long for EOF
    capture_bytes: int = DEFAULT_CAPTURE_BYTES
    stdout_fd: int = 1                    # where a command's stdout is passed through
    nice: int = 0                         # lower this process's CPU priority once the child runs
                                          # (the CLI uses 10: a dedicated process; a library
                                          # caller's priority is left alone)
    arm: str | None = None                # manifest `arm` (`--arm`)
    trial: Mapping[str, int] | None = None  # manifest `trial` {number, of} (a trial of `--repeat`)
    run_id: str | None = None             # the run's id (`--repeat` mints its trials' ids); default: minted


@dataclass
class RunResult:
    run_id: str
    path: str
    harness: str
    model: str | None
    outcome: str
    exit_code: int
    returncode: int | None
    stop_reason: str | None
    duration_secs: float
    evidence: str
    evidence_reasons: list[str]
    tokens: dict[str, int | None]
    cost_usd: float | None
    cost_basis: str | None
    cost_note: str | None
    final_answer: str | None
    provider_session_id: str | None
    api_retries: int
    skill_invoked: bool | None
    final_streams: int
    streams: int
    raw_stream: dict[str, Any] | None = None
    error: str | None = None
    hint: str | None = None        # with `error`: the command that fixes it (not in to_json)
    extra: dict[str, Any] = field(default_factory=dict)
    verdict: Verdict = NO_VERDICT  # ledger.records.verdict, judged from what the launch saw

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "path": self.path, "harness": self.harness, "model": self.model,
            "outcome": self.outcome, "exit_code": self.exit_code, "stop_reason": self.stop_reason,
            "duration_secs": round(self.duration_secs, 6), "evidence": self.evidence,
            "evidence_reasons": self.evidence_reasons, "tokens": self.tokens, "cost_usd": self.cost_usd,
            "cost_basis": self.cost_basis, "cost_note": self.cost_note,
            "provider_session_id": self.provider_session_id, "api_retries": self.api_retries,
            "skill_invoked": self.skill_invoked, "usage_streams": self.streams,
            "final_streams": self.final_streams, "raw_stream": self.raw_stream,
            "final_answer": self.final_answer, "error": self.error, **self.extra,
            "ok": self.verdict.ok, "error_kind": self.verdict.error_kind, "error_detail": self.verdict.error_detail,
        }


TOKEN_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
              "reasoning_tokens", "total_input_tokens")


def _launch_request(cls: type[Adapter], argv: list[str], redactor: Redactor) -> dict[str, Any] | None:
    """Manifest `launch` (Loopflow's RunLaunchRequest shape), prompts redacted; agents only."""
    if cls.harness == COMMAND:
        return None
    system, task = cls.prompt_from_argv(argv)
    max_turns = None
    for i, a in enumerate(argv):
        if a == "--max-turns" and i + 1 < len(argv) and argv[i + 1].isdigit():
            max_turns = int(argv[i + 1])
    return {
        "system_prompt": redactor.text(system or ""), "task_prompt": redactor.text(task or ""),
        "agent": cls.harness, "account_id": None, "max_turns": max_turns, "write_scope": "configured",
        "execution_boundary": None, "skip_permissions": any(a in _SKIP_PERMISSION_FLAGS for a in argv),
        "chrome": False,
    }


def running_cost(adapter: Adapter) -> tuple[float | None, str | None, str | None]:
    """(cost, basis, note) by the one `auto` rule (ledger.records.costbasis): each stream's
    provider cost from its final receipt, else its estimate from the price table
    (genai-prices, imported only when a stream needs it); basis reported | estimated | mixed.
    The note names the price data of an estimate, or why the cost is unknown."""
    return books_cost(adapter.provider, adapter.books.values())


def books_cost(provider: str | None, books: Any) -> tuple[float | None, str | None, str | None]:
    """running_cost of these usage-stream books (ledger.launch.adapters.base.StreamBook)."""
    from ledger.records.costbasis import REPORTED, auto_cost

    def estimate(b: Any) -> tuple[float | None, str | None]:
        from ledger.pricing import estimate_cost

        return estimate_cost(provider, b.model, b.counters)

    cost, basis, why = auto_cost(books, lambda b: b.final, lambda b: b.cost, estimate)
    if cost is None:
        return None, None, why
    if basis == REPORTED:
        return cost, basis, None
    from ledger.pricing import price_data_version

    return cost, basis, price_data_version()


class Launcher:
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
        from ledger.records.writer import RunCapture

        o = self.o
        skill = o.skill or o.expect_skill
        self.signals.install()  # from before the run is published: a stop is never lost
        try:
            return self._publish_and_run(RunCapture, skill)
        finally:
            self.signals.restore()

    def _publish_and_run(self, RunCapture: Any, skill: str | None) -> RunResult:
        o = self.o
        try:
            capture = RunCapture(
                o.home, harness=self.harness, model=self.model, skill=skill, subjects=list(o.subjects),
                launch=_launch_request(self.harness_cls, self.argv, self.redactor), env=self.env,
                cwd=o.cwd or os.getcwd(), arm=o.arm, trial=o.trial, run_id=o.run_id,
            )
        except OSError as exc:
            raise LedgerError(f"cannot create a run record in {o.home}: {exc.strerror or exc}",
                              hint="pass a writable home with `ledger run --home DIR` (or set LEDGER_HOME)") from None
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

    def _child_env(self, capture: Any) -> dict[str, str]:
        env = dict(self.env)
        path = os.fspath(capture.path)
        for k in ("LF_PARENT_RUN_ID",):
            env.pop(k, None)
        env.update({"LF_RUN_ID": capture.run_id, "LF_RUN_DIR": path,
                    "LEDGER_RUN_ID": capture.run_id, "LEDGER_RUN_DIR": path})
        if capture.manifest.parent_run_id:
            env["LF_PARENT_RUN_ID"] = capture.manifest.parent_run_id
        return env

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
                child = ChildProcess(self.argv, env=self._child_env(capture), cwd=o.cwd,
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
        if exc is None:
            sig = self.signals.received[0]
            code, outcome = 128 + sig, "interrupted"
            msg = f"stopped by {signal.Signals(sig).name} before the command started"
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
        # the child: wait for it (it may outlive its stdout), still honouring stops
        rc = child.poll()
        while rc is None:
            rc = child.wait(TICK_SECS)
            if rc is None:
                stops.check(child, time.monotonic())
        stops.reap_group(child)
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

    # -- settlement ---------------------------------------------------------------------------

    def _settle(self, capture: Any, adapter: Adapter, child: ChildProcess, rc: int | None,
                stop_reason: str | None, duration: float, raw: RawCapture | None,
                stdout_tail: TailBuffer | None, parser: StrictParser, splitter: LineSplitter,
                adapter_errors: list[str], max_cost_hit: dict[str, Any] | None) -> RunResult:
        from ledger.records.writer import write_blob

        red = self.redactor
        fields: dict[str, Any] = {}
        # evidence
        reasons: list[str] = []
        if adapter.parses_stream:
            st = parser.stats
            if st.junk:
                reasons.append(f"{st.junk} line(s) are not JSON objects (first: line {st.first_junk_line}, "
                               f"{st.first_junk_reason})")
            if splitter.overlong:
                reasons.append(f"{splitter.overlong} line(s) longer than the line bound")
            reasons.extend(adapter.verification_notes())
            reasons.extend(f"adapter error at {e}" for e in adapter_errors)
            if stop_reason:
                reasons.append(f"stopped by ledger ({child.stopped_by})")
            evidence = "unverifiable" if reasons else "verified"
            if raw is not None:
                try:
                    data = red.stream(raw.data())
                    sha, size = write_blob(capture.path, STREAM_BLOB, data)
                    fields["raw_stream"] = {"path": STREAM_BLOB, "sha256": sha, "bytes": size, "redacted": True,
                                            **raw.describe()}
                except OSError as exc:
                    reasons.append(f"raw stream not kept ({exc.strerror or exc})")
                    evidence = "unverifiable"
        else:
            evidence = "not_applicable"
            if stdout_tail is not None and stdout_tail.total_bytes:
                fields["stdout_tail"] = self._blob(capture, STDOUT_TAIL_BLOB, stdout_tail)
        err_tail = child.stderr_tail
        if err_tail.total_bytes:
            fields["stderr_tail"] = self._blob(capture, STDERR_TAIL_BLOB, err_tail)
        # outcome and exit code
        hint = None
        if stop_reason == NEEDS_TERMINAL:
            outcome = "failed"  # it could never have run headless: an error, not a cancellation
            adapter.error_message, hint = self._needs_terminal()
        elif stop_reason is not None:
            outcome = "interrupted"
        elif rc is not None and rc < 0 and -rc in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            outcome = "interrupted"
        elif not adapter.parses_stream:
            outcome = "completed" if rc == 0 else "failed"
        else:
            outcome = "completed" if adapter.stream_outcome == "completed" and rc == 0 else "failed"
        if stop_reason == "timeout":
            exit_code = EXIT_TIMEOUT
        elif stop_reason == "signal":
            sig_name = (child.stopped_by or "").split(":", 1)[1]
            exit_code = 128 + int(getattr(signal.Signals, sig_name, signal.SIGINT))
        elif stop_reason == "max_cost":
            exit_code = EXIT_MAX_COST
        elif stop_reason == STOP_REQUEST:
            exit_code = EXIT_STOPPED
        elif stop_reason == NEEDS_TERMINAL:
            exit_code = EXIT_NEEDS_TERMINAL
        else:
            exit_code = exit_code_for(rc)
        if exit_code == 0 and adapter.skill_invoked is False and self.o.fail_on_skill:
            exit_code = EXIT_SKILL_NOT_INVOKED
        if adapter.provider is not None:
            capture.emit("provider_attempt_finished", attempt_key=adapter.attempt_key,
                         outcome=outcome)
        tokens, _, _ = adapter.totals()
        cost_usd: float | None = None
        cost_basis = cost_note = None
        if adapter.books:
            cost_usd, cost_basis, cost_note = running_cost(adapter)
        error = adapter.error_message
        fields.update(adapter.result_fields)
        if isinstance(fields.get("provider_cumulative"), dict):
            fields["provider_cumulative"] = red.value(fields["provider_cumulative"])
        if max_cost_hit is not None and stop_reason == "max_cost":
            fields["max_cost"] = max_cost_hit
        if adapter.skill_invoked is not None:
            fields["skill_invoked"] = adapter.skill_invoked
            fields["expected_skill"] = self.o.expect_skill
        if self.reader != self.harness:
            fields["stream_format"] = "not requested: recorded as a plain command"
        if adapter.reports_api_retries:
            fields["api_retries"] = adapter.stats.api_retries
        fields.update(self.stops.fields())
        capture.emit(
            "result", outcome=outcome, duration_secs=duration, exit_code=exit_code, returncode=rc,
            stop_reason=stop_reason, stopped_by=child.stopped_by, killed=child.killed,
            evidence=evidence, evidence_reasons=[red.text(r) for r in reasons],
            error=red.text(error) if error else None, command=[red.text(a) for a in self.argv],
            **fields,
        )
        verdict = judge(state="settled", outcome=outcome, evidence_gaps=0, skill_invoked=adapter.skill_invoked,
                        result={"stop_reason": stop_reason, "stopped_by": child.stopped_by, "evidence": evidence,
                                "evidence_reason": red.text(reasons[0]) if reasons else None,
                                "error": red.text(error) if error else None, "exit_code": exit_code,
                                "expected_skill": self.o.expect_skill})
        try:
            capture.settle(outcome)
        except OSError as exc:  # the agent's exit status still wins; say what was not kept
            sys.stderr.write(f"ledger: could not settle run {capture.run_id} ({exc.strerror or exc}); "
                             "it will read as abandoned\n")
        # the run's model as `ledger runs` reads it from the record (records.fold.run_model: the
        # launch's, else the one its usage streams name most)
        from ledger.records.fold import run_model

        model = run_model(self.model, {"streams": {f"{t}/{m}": {"model": b.model, "c": b.counters}
                                                   for (t, m), b in adapter.books.items()}})
        return RunResult(
            run_id=capture.run_id, path=os.fspath(capture.path), harness=self.harness, model=model,
            outcome=outcome, exit_code=exit_code, returncode=rc, stop_reason=stop_reason, duration_secs=duration,
            evidence=evidence, evidence_reasons=[red.text(r) for r in reasons],
            tokens={k: tokens.get(k) for k in TOKEN_KEYS}, cost_usd=cost_usd, cost_basis=cost_basis,
            cost_note=cost_note, final_answer=adapter.final_answer, provider_session_id=adapter.session_id,
            api_retries=adapter.stats.api_retries, skill_invoked=adapter.skill_invoked,
            final_streams=adapter.final_streams(), streams=len(adapter.books), raw_stream=fields.get("raw_stream"),
            error=red.text(error) if error else None, hint=hint,
            extra={"max_cost": max_cost_hit} if max_cost_hit else {}, verdict=verdict,
        )

    def _needs_terminal(self) -> tuple[str, str]:
        """(error, hint) for a child stopped for touching the terminal."""
        how = {"SIGTTIN": "it read from the terminal", "SIGTTOU": "it set the terminal's mode"}.get(
            self.terminal_stop or "", "it was stopped")
        name = os.path.basename(self.argv[0])
        error = f"{name} waits for a terminal ({how}); ledger runs commands headless"
        if self.harness == "claude":
            hint = 'the agent waits for a terminal: run it headless, e.g. `ledger run -- claude -p "..." ' \
                   '--output-format stream-json --verbose`'
        elif self.harness in ("codex", "gemini"):
            example = "codex exec --json" if self.harness == "codex" else 'gemini -p "..." --output-format stream-json'
            hint = f"the agent waits for a terminal: run it headless, e.g. `ledger run -- {example} ...`"
        else:
            hint = "give the command its input (e.g. `ledger run -- CMD ... < FILE`) or its non-interactive mode"
        return self.redactor.text(error), hint

    def _blob(self, capture: Any, rel: str, tail: TailBuffer) -> dict[str, Any] | None:
        from ledger.records.writer import write_blob

        data = self.redactor.bytes(tail.data())
        try:
            sha, size = write_blob(capture.path, rel, data)
        except OSError:
            return None
        return {"path": rel, "sha256": sha, "bytes": size, "total_bytes": tail.total_bytes,
                "truncated": tail.truncated, "redacted": True}


def launch(opts: RunOptions) -> RunResult:
    """Run one command/agent under ledger and record it; see the module docstring. An agent
    asked for its interactive UI, with a terminal to give it, runs on the terminal instead
    (ledger.launch.interactive)."""
    from ledger.launch.interactive import launch_interactive, wanted

    harness = wanted(opts.harness, opts.argv) if opts.argv else None
    if harness is not None:
        return launch_interactive(opts, harness)
    return Launcher(opts).run()
