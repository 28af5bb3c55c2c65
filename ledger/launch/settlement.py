"""How a headless run settles (runner.Launcher's second half): the evidence status and its
reasons, the redacted raw stream and output tails kept in the record, the outcome and exit
code (a stop's by the one rule, ledger.launch.stop.stop_exit), the `result` event, the
verdict, terminal.json, and the RunResult the CLI prints."""

from __future__ import annotations

import os
import sys
from typing import Any

from ledger.launch.adapters.base import Adapter
from ledger.launch.capture import LineSplitter, RawCapture, StrictParser, TailBuffer
from ledger.launch.options import EXIT_SKILL_NOT_INVOKED, TOKEN_KEYS, RunResult
from ledger.launch.process import ChildProcess
from ledger.launch.recording import running_cost
from ledger.launch.stop import NEEDS_TERMINAL, stop_exit
from ledger.records.verdict import judge

STREAM_BLOB = "streams/stdout.jsonl"
STDOUT_TAIL_BLOB = "streams/stdout-tail.txt"
STDERR_TAIL_BLOB = "streams/stderr-tail.txt"


class HeadlessSettlement:
    """The settlement methods of runner.Launcher (which sets o, argv, harness, reader,
    redactor, stops and terminal_stop before a run settles)."""

    o: Any
    argv: list[str]
    harness: str
    reader: str
    redactor: Any
    stops: Any
    terminal_stop: str | None

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
        # outcome and exit code: a stop's by the one rule (stop.stop_exit), else the child's end
        hint = None
        outcome, exit_code = stop_exit(stop_reason, child.stopped_by, rc)
        if stop_reason == NEEDS_TERMINAL:
            adapter.error_message, hint = self._needs_terminal()
        elif outcome is not None:
            pass
        elif not adapter.parses_stream:
            outcome = "completed" if rc == 0 else "failed"
        else:
            outcome = "completed" if adapter.stream_outcome == "completed" and rc == 0 else "failed"
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
