"""`ledger run -- claude` (no `-p`), `-- codex`, `-- gemini` in a terminal: an interactive run.

When the agent is asked for its interactive UI (no headless flag: `claude` without
`-p/--print`, `codex` without `exec`, `gemini` without `-p/--prompt`) and ledger's stdin and
stdout are a terminal whose foreground ledger holds, the agent gets the terminal:

- it runs in its own process group, made the terminal's foreground group (tcsetpgrp, in the
  child before exec and in ledger, as shells do): the keyboard's Ctrl-C, Ctrl-\\ and
  Ctrl-Z, and the window size changes (SIGWINCH), reach the agent, not ledger;
- Ctrl-Z stops the agent: ledger takes the terminal back, restores its modes and stops
  itself, so the shell's job control works; `fg` gives the agent the terminal again;
- however the run ends (the agent exits, a stop, an error in ledger), ledger restores the
  terminal's modes as they were before the agent started and takes the foreground back;
- SIGTERM / SIGHUP / SIGINT sent to ledger itself, a `ledger stop`, and `--timeout` stop the
  agent as for a headless run (one rule: ledger.launch.stop.StopControl).

The record: the manifest (surface `interactive`, the launch request, subjects, skill, cwd), a
`handoff` event (surface `interactive`) when the terminal is handed over, and after the
agent exited its usage, tools and tool results read from its own session log
(ledger.launch.sessionlog: Claude Code's session is pinned with `--session-id`, Codex's and
Gemini's found), the `result` event (exit code, the session's resolution) and settlement
with the agent's exit code.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any, Mapping, Sequence

from ledger.launch.adapters import COMMAND, adapter_class, detect_harness
from ledger.launch.stop import Signals, StopControl, stop_exit, stop_reason_of

SURFACE = "interactive"
TICK_SECS = 0.1
GRACE_SECS = 5.0
LATE_LOG_SECS = 3.0  # how long a found (not pinned) session's log may take to appear after the exit


def terminal_fd() -> int | None:
    """fd 0 when stdin and stdout are the same terminal and ledger is in its foreground."""
    try:
        if not (os.isatty(0) and os.isatty(1)):
            return None
        if os.tcgetpgrp(0) != os.getpgrp():
            return None  # a background job: the terminal is not ours to give
    except OSError:
        return None
    return 0


def wanted(harness: str, argv: Sequence[str]) -> str | None:
    """The agent harness when `argv` asks for an interactive agent and a terminal is ours."""
    name = harness if harness != "auto" else detect_harness(argv)
    if name == COMMAND or harness not in ("auto", name):
        return None
    cls = adapter_class(name)
    if not cls.wants_terminal(list(argv)):
        return None
    return name if terminal_fd() is not None else None


def harness_example(harness: str) -> str:
    return {"claude": 'claude -p "..." --output-format stream-json --verbose',
            "codex": 'codex exec --json "..."', "gemini": 'gemini -p "..." --output-format stream-json'}[harness]


class TerminalChild:
    """The agent, in the foreground of the terminal `fd` (its own process group)."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None, fd: int) -> None:
        import termios

        self.fd = fd
        self.saved_modes = termios.tcgetattr(fd)
        self.stopped_by: str | None = None
        self.killed = False
        self.returncode: int | None = None
        self.job_stops = 0

        def take_terminal() -> None:  # in the child, before exec
            os.setpgid(0, 0)
            old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            try:
                os.tcsetpgrp(fd, os.getpgrp())
            finally:
                signal.signal(signal.SIGTTOU, old)
            for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU,
                        signal.SIGCHLD, signal.SIGWINCH, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)

        self.proc = subprocess.Popen(list(argv), env=dict(env), cwd=cwd, close_fds=True,
                                     preexec_fn=take_terminal, restore_signals=True)
        self.pid = self.pgid = self.proc.pid
        self._foreground(self.pgid)  # (also from here: whichever runs first, the agent has it)

    # -- the terminal -------------------------------------------------------------------------

    def _foreground(self, pgid: int) -> None:
        try:
            os.tcsetpgrp(self.fd, pgid)
        except OSError:
            pass

    def restore(self) -> None:
        """The terminal's modes as before the agent, and the foreground back to ledger."""
        import termios

        try:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved_modes)
        except (OSError, termios.error):
            pass
        self._foreground(os.getpgrp())

    def _job_stop(self) -> None:
        """The agent was stopped (Ctrl-Z): hand the terminal back, stop ledger like a job,
        and once continued (`fg`), give the agent the terminal and continue it."""
        import termios

        self.job_stops += 1
        try:
            agent_modes = termios.tcgetattr(self.fd)
        except (OSError, termios.error):
            agent_modes = None
        self.restore()
        os.kill(os.getpid(), signal.SIGSTOP)
        # continued
        if agent_modes is not None:
            try:
                termios.tcsetattr(self.fd, termios.TCSADRAIN, agent_modes)
            except (OSError, termios.error):
                pass
        self._foreground(self.pgid)
        self.signal_group(signal.SIGCONT)

    # -- the process (what StopControl asks of a child) ------------------------------------------

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG | os.WUNTRACED)
        except ChildProcessError:
            self.returncode = self.proc.returncode if self.proc.returncode is not None else -signal.SIGKILL
            return self.returncode
        if pid == 0:
            return None
        if os.WIFSTOPPED(status):
            if os.WSTOPSIG(status) in (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU) and self.stopped_by is None:
                self._job_stop()
            return None
        self.returncode = os.waitstatus_to_exitcode(status)
        self.proc.returncode = self.returncode
        return self.returncode

    def signal_group(self, sig: int) -> bool:
        try:
            os.killpg(self.pgid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def terminate(self, reason: str) -> None:
        if self.stopped_by is None:
            self.stopped_by = reason
        self.signal_group(signal.SIGTERM)
        self.signal_group(signal.SIGCONT)

    def kill(self) -> None:
        self.killed = True
        self.signal_group(signal.SIGKILL)


def launch_interactive(opts: Any, harness: str) -> Any:
    """Run the agent on the terminal and record it (see the module docstring); a RunResult."""
    from ledger.launch import sessionlog
    from ledger.launch.redact import Redactor
    from ledger.launch.options import RunResult
    from ledger.launch.recording import child_env, launch_request, open_capture
    from ledger.records.verdict import judge

    from ledger.errors import LedgerError

    fd = terminal_fd()
    assert fd is not None
    cls = adapter_class(harness)
    for flag, value in (("--max-cost", opts.max_cost), ("--expect-skill", opts.expect_skill)):
        if value is not None:  # (both read the agent's live stream, which an interactive agent has not)
            raise LedgerError(f"{flag} needs the agent's stream: it does not apply to an interactive run",
                              hint=f"run the agent headless, e.g. `ledger run {flag} ... -- "
                                   f"{harness_example(harness)}`")
    env = dict(opts.env if opts.env is not None else os.environ)
    redactor = Redactor.from_env(env, opts.redact)
    argv, pinned, resumed = sessionlog.pin_session(harness, opts.argv)
    model = opts.model or cls.model_from_argv(argv)
    cwd = opts.cwd or os.getcwd()
    signals = Signals()
    signals.install()
    ignore_ttou = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # ledger takes the terminal back from the background
    try:
        capture = open_capture(opts.home, harness=harness, surface=SURFACE, model=model,
                               skill=opts.skill or opts.expect_skill, subjects=list(opts.subjects),
                               launch=launch_request(cls, argv, redactor), env=env, cwd=cwd)
        attempt = capture.start_attempt(cls.provider, model)
        if pinned:
            capture.provider_session(attempt, pinned)
        logs = sessionlog.snapshot(harness, env)
        started_at = sessionlog.utc_now()
        started = time.monotonic()
        capture.emit("handoff", surface=SURFACE)
        try:
            child = TerminalChild(argv, env=child_env(env, capture), cwd=opts.cwd, fd=fd)
        except OSError as exc:
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            msg = redactor.text(f"cannot start {argv[0]!r}: {exc.strerror or exc}")
            capture.emit("provider_attempt_finished", attempt_key=attempt, outcome="failed")
            capture.emit("result", outcome="failed", duration_secs=time.monotonic() - started, exit_code=code,
                         returncode=None, evidence="unverifiable", evidence_reasons=["the agent could not be started"],
                         error=msg, command=[redactor.text(a) for a in argv])
            capture.settle("failed")
            return RunResult(run_id=capture.run_id, path=os.fspath(capture.path), harness=harness, model=model,
                             outcome="failed", exit_code=code, returncode=None, stop_reason=None,
                             duration_secs=time.monotonic() - started, evidence="unverifiable",
                             evidence_reasons=["the agent could not be started"], tokens={}, cost_usd=None,
                             cost_basis=None, cost_note=None, final_answer=None, provider_session_id=None,
                             api_retries=0, skill_invoked=None, final_streams=0, streams=0, error=msg,
                             verdict=judge(state="settled", outcome="failed", evidence_gaps=0, skill_invoked=None,
                                           result={"error": msg, "exit_code": code}))
        stops = StopControl(signals, capture.path, started=started, timeout=opts.timeout,
                            grace_secs=opts.grace_secs or GRACE_SECS)
        try:
            rc = stops.wait_out(child, TICK_SECS)
        finally:
            child.restore()
        duration = time.monotonic() - started
        try:
            return _settle(opts, capture, cls, harness, model, argv, redactor, attempt, child, stops, rc, duration,
                           logs, pinned, cwd, started_at)
        except BaseException:
            if capture.settled is None:  # (the agent's end is known: never leave the run open)
                try:
                    capture.settle("failed" if rc else "completed")
                except Exception:  # noqa: BLE001 - already failing; the record stays unsettled
                    pass
            raise
    finally:
        signal.signal(signal.SIGTTOU, ignore_ttou)
        signals.restore()


def _settle(opts: Any, capture: Any, cls: Any, harness: str, model: str | None, argv: list[str], redactor: Any,
            attempt: str, child: TerminalChild, stops: StopControl, rc: int | None, duration: float,
            logs: Any, pinned: str | None, cwd: str, started_at: Any) -> Any:
    from ledger.launch import sessionlog
    from ledger.launch.adapters.base import StreamBook, reduce_books, with_total_input
    from ledger.launch.options import TOKEN_KEYS, RunResult
    from ledger.launch.recording import books_cost
    from ledger.records.verdict import TOOL_STATUSES, judge

    # a stop's outcome and exit code by the one rule (stop.stop_exit), else the agent's end
    stop_reason = stop_reason_of(child.stopped_by, stops.requested)
    outcome, exit_code = stop_exit(stop_reason, child.stopped_by, rc)
    if outcome is None:
        outcome = "completed" if rc == 0 else "failed"
    # the session: found, archived as `ledger import` does, read by the import's reducers
    reasons: list[str] = []
    try:
        res = sessionlog.resolve(harness, logs, pinned, cwd, started_at)
        # Codex's TUI hands its turns to a background app-server that may write the rollout a
        # moment after the TUI exited: look again for a little while before saying unresolved
        end = time.monotonic() + LATE_LOG_SECS
        while res.status == sessionlog.UNRESOLVED and pinned is None and time.monotonic() < end:
            time.sleep(0.2)
            res = sessionlog.resolve(harness, logs, pinned, cwd, started_at)
    except OSError as exc:  # (an unreadable config dir: said, the run still settles)
        res = sessionlog.Resolution(sessionlog.UNRESOLVED, session_id=pinned,
                                    reason=f"the session logs could not be read ({exc.strerror or exc})")
    archive_note = sessionlog.archive(opts.home, harness, logs.roots) if res.status == sessionlog.RESOLVED else None
    if archive_note:
        reasons.append(archive_note)
    books: list[StreamBook] = []
    facts = None
    if res.status == sessionlog.RESOLVED:
        if res.session_id and res.session_id != pinned:
            capture.provider_session(attempt, res.session_id)
        facts = sessionlog.read_usage(harness, res, started_at)
        for u in facts.usage:
            stream = capture.usage_stream(provider=cls.provider, model=u.model, attempt_key=attempt,
                                          turn_key=f"session:{res.session_id}")
            book = StreamBook(stream, cls.provider, u.model)
            book.observe(with_total_input(dict(u.counters)), cost=u.cost_usd, final=True)
            books.append(book)
        n = 0
        for name, count in sorted(facts.tools.items()):
            for _ in range(count):
                capture.emit("tool_use", name=str(name), summary="")
        for name, counts in sorted(facts.tool_results.items()):
            for status, count in zip(TOOL_STATUSES, counts):
                for _ in range(count):
                    n += 1
                    capture.emit("conversation", event={"type": "tool_result", "turn_id": "session",
                                                        "tool_use_id": f"log-{n}", "name": name, "status": status})
        if facts.problems:
            reasons.append(f"{facts.problems} line(s) of the session log could not be read")
    else:
        reasons.append(f"provider session {res.status}: {res.reason}")
    if stop_reason:
        reasons.append(f"stopped by ledger ({child.stopped_by})")
    evidence = "unverifiable" if reasons else "verified"
    capture.emit("provider_attempt_finished", attempt_key=attempt, outcome=outcome)

    cost_usd = cost_basis = cost_note = None
    if books:
        cost_usd, cost_basis, cost_note = books_cost(cls.provider, books)
    tokens, _, _ = reduce_books(books)
    fields = stops.fields()
    capture.emit("result", outcome=outcome, duration_secs=duration, exit_code=exit_code, returncode=rc,
                 stop_reason=stop_reason, stopped_by=child.stopped_by, killed=child.killed, evidence=evidence,
                 evidence_reasons=[redactor.text(r) for r in reasons], error=None,
                 command=[redactor.text(a) for a in argv], surface=SURFACE, provider_session=res.to_json(),
                 job_stops=child.job_stops, **fields)
    verdict = judge(state="settled", outcome=outcome, evidence_gaps=0, skill_invoked=None,
                    result={"stop_reason": stop_reason, "stopped_by": child.stopped_by, "evidence": evidence,
                            "evidence_reason": redactor.text(reasons[0]) if reasons else None, "error": None,
                            "exit_code": exit_code})
    capture.settle(outcome)
    return RunResult(
        run_id=capture.run_id, path=os.fspath(capture.path), harness=harness, model=model, outcome=outcome,
        exit_code=exit_code, returncode=rc, stop_reason=stop_reason, duration_secs=duration, evidence=evidence,
        evidence_reasons=[redactor.text(r) for r in reasons], tokens={k: tokens.get(k) for k in TOKEN_KEYS},
        cost_usd=cost_usd, cost_basis=cost_basis, cost_note=cost_note, final_answer=None,
        provider_session_id=res.session_id, api_retries=0, skill_invoked=None,
        final_streams=len(books), streams=len(books), error=None,
        extra={"surface": SURFACE, "provider_session": res.to_json()}, verdict=verdict)
