"""`ledger run --repeat N [--jobs K] -- CMD ...`: N trials of one command, K at a time.

Each trial is its own run, recorded by its own `ledger run` process (so a trial is exactly
what a single `ledger run` records: its `--timeout`, `--max-cost`, verdict and exit code),
with `trial: {number, of}` in its manifest. All are children of one parent run that this
module publishes first (harness `command`, surface `repeat`, manifest `repeat: {trials,
jobs}`, the arm; no skill, model or subject: it is a grouping run, and `--skill`,
`--subject`, `--model` go to each trial): the trials find it through LF_RUN_ID / LF_RUN_DIR,
as any nested `ledger run` does.

Process control:
- each trial's `ledger run` runs in its own process group, so a Ctrl-C at the terminal
  reaches this process only, which forwards it once to every running trial (each stops its
  agent with the usual grace and settles `interrupted`); a second signal is forwarded too
  (each trial then kills its agent at once);
- after a stop no new trial starts; the trials that never started are recorded all the
  same, settled `interrupted` ("stopped before the trial started"), so a repeat of N always
  leaves N trials and none is missing from a comparison;
- a trial whose `ledger run` died before settling its run (killed) is settled `interrupted`
  here, once that process is gone.

The exit code: 128+N when stopped by signal N; else 0 when every trial exited 0, else the
exit code of the first trial (by number) that did not.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ledger.errors import LedgerError
from ledger.launch.stop import STOP_SIGNALS  # (the signals a run stops on: one list)
POLL_SECS = 0.1


@dataclass
class RepeatOptions:
    argv: Sequence[str]                 # the command
    home: Path
    trials: int
    jobs: int = 1
    run_args: Sequence[str] = ()        # ledger run's own options for every trial (no --repeat/--jobs/--json)
    arm: str | None = None
    skill: str | None = None
    subjects: Sequence[str] = ()
    model: str | None = None
    env: dict[str, str] | None = None   # the trials' environment (default: ours)
    python: Sequence[str] = field(default_factory=lambda: [sys.executable, "-m", "ledger"])


@dataclass
class Trial:
    number: int
    run_id: str
    proc: subprocess.Popen | None = None
    result: dict[str, Any] | None = None
    returncode: int | None = None


@dataclass
class RepeatResult:
    run_id: str
    outcome: str
    exit_code: int
    trials: list[dict[str, Any]]
    jobs: int
    arm: str | None
    duration_secs: float
    max_running: int                    # the most trials that ran at once

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "outcome": self.outcome, "exit_code": self.exit_code, "arm": self.arm,
                "trials": len(self.trials), "jobs": self.jobs, "duration_secs": round(self.duration_secs, 6),
                "max_running": self.max_running, "runs": self.trials}


class _Signals:
    def __init__(self) -> None:
        self.received: list[int] = []
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in STOP_SIGNALS:
            try:
                if signal.getsignal(sig) == signal.SIG_IGN:
                    continue
                self._previous[sig] = signal.signal(sig, lambda s, f: self.received.append(s))
            except (ValueError, OSError):
                pass

    def restore(self) -> None:
        for sig, prev in self._previous.items():
            try:
                signal.signal(sig, prev)
            except (ValueError, OSError, TypeError):
                pass


def run_repeats(o: RepeatOptions) -> RepeatResult:
    from ledger.records.ids import mint_run_id
    from ledger.records.writer import RunCapture

    if o.trials < 1 or o.jobs < 1:
        raise LedgerError("--repeat and --jobs must be at least 1", hint="e.g. `ledger run --repeat 5 --jobs 2 -- CMD`")
    env = dict(o.env if o.env is not None else os.environ)
    signals = _Signals()
    signals.install()  # before the parent is published: a stop is never lost
    try:
        try:
            # a grouping run: it exercises no skill and is for no subject itself (the trials
            # are: --skill and --subject go to each), so reports by skill or subject count
            # the trials only
            parent = RunCapture(o.home, harness="command", surface="repeat", env=env, arm=o.arm,
                                repeat={"trials": o.trials, "jobs": o.jobs})
        except OSError as exc:
            raise LedgerError(f"cannot create a run record in {o.home}: {exc.strerror or exc}",
                              hint="pass a writable home with `ledger run --home DIR` (or set LEDGER_HOME)") from None
        started = time.monotonic()
        trials = [Trial(i, mint_run_id()) for i in range(1, o.trials + 1)]
        try:
            max_running = _drive(o, parent, trials, _trial_env(env, parent), signals)
        except BaseException:
            parent.settle("interrupted")
            raise
        stopped = signals.received[0] if signals.received else None
        for t in trials:
            if t.result is None:
                _settle_missing(o, parent, t, stopped)
        exit_code = 128 + int(stopped) if stopped else next(
            (t.returncode for t in trials if t.returncode), 0)
        outcome = "interrupted" if stopped else "completed"
        fields: dict[str, Any] = {"outcome": outcome, "duration_secs": round(time.monotonic() - started, 6),
                                  "exit_code": exit_code, "trials": [t.run_id for t in trials]}
        if stopped:
            fields.update(stop_reason="signal", stopped_by=f"signal:{signal.Signals(stopped).name}")
        parent.emit("result", **fields)
        parent.settle(outcome)
        return RepeatResult(parent.run_id, outcome, exit_code, [t.result or {} for t in trials], o.jobs, o.arm,
                            time.monotonic() - started, max_running)
    finally:
        signals.restore()


def _trial_env(env: dict[str, str], parent: Any) -> dict[str, str]:
    out = dict(env)
    out.pop("LF_PARENT_RUN_ID", None)
    path = os.fspath(parent.path)
    out.update({"LF_RUN_ID": parent.run_id, "LF_RUN_DIR": path, "LEDGER_RUN_ID": parent.run_id,
                "LEDGER_RUN_DIR": path})
    if parent.manifest.parent_run_id:
        out["LF_PARENT_RUN_ID"] = parent.manifest.parent_run_id
    return out


def _argv(o: RepeatOptions, t: Trial) -> list[str]:
    return [*o.python, "run", *o.run_args, "--home", os.fspath(o.home), "--trial", f"{t.number}/{o.trials}",
            "--run-id", t.run_id, "--json", "--no-progress", "--", *o.argv]


def _drive(o: RepeatOptions, parent: Any, trials: list[Trial], env: dict[str, str], signals: _Signals) -> int:
    """Start the trials K at a time until all ended or a stop came; returns the most that ran at once."""
    done: queue.Queue[Trial] = queue.Queue()
    waiting = list(trials)
    running: dict[int, Trial] = {}
    forwarded = 0
    max_running = 0

    def wait(t: Trial) -> None:
        assert t.proc is not None
        out, _ = t.proc.communicate()
        t.returncode = t.proc.returncode
        try:
            import json

            doc = json.loads(out.decode("utf-8", "replace")) if out.strip() else None
            t.result = doc if isinstance(doc, dict) else None
        except ValueError:
            t.result = None
        done.put(t)

    while waiting or running:
        while waiting and len(running) < o.jobs and not signals.received:
            t = waiting.pop(0)
            try:
                t.proc = subprocess.Popen(_argv(o, t), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          process_group=0)
            except OSError as exc:
                raise LedgerError(f"cannot start a trial: {exc.strerror or exc}",
                                  hint="check that `python -m ledger` runs here") from None
            running[t.number] = t
            max_running = max(max_running, len(running))
            threading.Thread(target=wait, args=(t,), daemon=True).start()
        if signals.received and not running:
            break
        while len(signals.received) > forwarded:
            sig = signals.received[forwarded]
            forwarded += 1
            for t in running.values():
                try:
                    t.proc.send_signal(sig)  # type: ignore[union-attr]
                except (ProcessLookupError, OSError):
                    pass
        try:
            t = done.get(timeout=POLL_SECS)
        except queue.Empty:
            continue
        running.pop(t.number, None)
        if t.result is not None:
            t.result["trial"] = t.number
            _report(t, o.trials)
    return max_running


def _report(t: Trial, of: int) -> None:
    """One line per finished trial on stderr (stdout holds the data: `--json`)."""
    r = t.result or {}
    cost = r.get("cost_usd")
    ok = r.get("ok")
    why = "ok" if ok else (r.get("error_kind") or "not ok")
    sys.stderr.write(f"ledger: trial {t.number}/{of} {str(r.get('run_id', ''))[:12]} {r.get('outcome')} ({why})"
                     f" · {float(r.get('duration_secs') or 0):.1f}s"
                     + (f" · ${cost:.4f}" if isinstance(cost, (int, float)) else "") + "\n")
    sys.stderr.flush()


def _settle_missing(o: RepeatOptions, parent: Any, t: Trial, stopped: int | None) -> None:
    """A trial without a result: never started (a stop came first), or its `ledger run`
    ended without settling (killed). Its run is recorded / settled `interrupted`."""
    from ledger.records.reader import read_manifest
    from ledger.records.writer import RunCapture, run_dir, settle

    name = signal.Signals(stopped).name if stopped else None
    path = run_dir(Path(o.home), t.run_id)
    if path.exists():
        try:
            read_manifest(path)
        except Exception:  # noqa: BLE001 - not a record we can settle
            return
        if not (path / "terminal.json").exists():
            settle(path, "interrupted")
        detail = "its ledger run ended without settling it"
    else:
        capture = RunCapture(o.home, harness="command", surface="headless", model=o.model, skill=o.skill,
                             subjects=list(o.subjects), env=_trial_env(dict(o.env if o.env is not None else os.environ), parent),
                             run_id=t.run_id, arm=o.arm, trial={"number": t.number, "of": o.trials})
        fields: dict[str, Any] = {"outcome": "interrupted", "duration_secs": 0.0,
                                  "error": f"stopped by {name} before the trial started" if name
                                  else "the trial did not start"}
        if name:
            fields.update(stop_reason="signal", stopped_by=f"signal:{name}")
        capture.emit("result", **fields)
        capture.settle("interrupted")
        detail = fields["error"]
    t.result = {"run_id": t.run_id, "outcome": "interrupted", "ok": False, "error_kind": "cancelled",
                "error": detail, "trial": t.number, "exit_code": 128 + int(stopped) if stopped else None}
    t.returncode = t.returncode if t.returncode is not None else (128 + int(stopped) if stopped else 1)
