"""`ledger replay RUN`: run a recorded headless run's launch request again, as a new run.

The launch request is what the record kept of how the run was started: the harness, the
command line (the `result` event's `command`, redacted like everything ledger writes), the
prompts (the manifest's `launch`), the model, the skill and the cwd. A replay starts the
same command line in the same directory as a new run whose `parent_run_id` is the source
run and whose subjects are inherited from it (the parent is passed the way a `ledger run`
inside an agent passes it: LF_RUN_ID / LF_RUN_DIR, checked against the parent's manifest).

It refuses (LedgerError: message + hint) when there is nothing faithful to re-execute:
- no launch request was recorded (a plain command, a run that has not settled yet, a record
  written by another tool without one);
- a prompt or argument was redacted (`[REDACTED]`: a secret was in it; a replay never
  guesses the value);
- the harness's executable is not installed here (not on PATH);
- the run is interactive (its prompts were typed into the agent, not recorded).
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.errors import LedgerError
from ledger.launch.redact import MASK

INTERACTIVE = "interactive"


@dataclass
class ReplayPlan:
    source_run_id: str
    source_path: str
    harness: str            # the --harness to pass (auto when detection gives the same)
    argv: list[str]
    cwd: str
    model: str | None
    skill: str | None
    expect_skill: str | None
    subjects: list[str] = field(default_factory=list)

    def command(self) -> str:
        return shlex.join(self.argv)

    def to_json(self) -> dict[str, Any]:
        return {"parent_run_id": self.source_run_id, "harness": self.harness, "argv": self.argv,
                "command": self.command(), "cwd": self.cwd, "model": self.model, "skill": self.skill,
                "expect_skill": self.expect_skill, "subjects": self.subjects}

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """The environment of the replay: ours, with the source run as the parent."""
        env = {k: v for k, v in base.items() if k not in ("LEDGER_RUN_ID", "LEDGER_RUN_DIR", "LF_PARENT_RUN_ID")}
        env["LF_RUN_ID"] = self.source_run_id
        env["LF_RUN_DIR"] = self.source_path
        return env


def _result_event(run_path: str) -> dict[str, Any] | None:
    """The last `result` event of the record, read whole (the fold keeps a cut command)."""
    from ledger.records import jsonio

    last = None
    try:
        with open(os.path.join(run_path, "events.jsonl"), "rb") as f:
            for line in f:
                if b'"result"' not in line or not line.endswith(b"\n"):
                    continue
                try:
                    ev = jsonio.loads(line)
                except jsonio.JSONDecodeError:
                    continue
                if isinstance(ev, dict) and ev.get("type") == "result":
                    last = ev
    except OSError:
        return None
    return last


def _installed(executable: str, path_env: str | None) -> bool:
    if os.sep in executable:
        return os.path.isfile(executable) and os.access(executable, os.X_OK)
    return shutil.which(executable, path=path_env) is not None


def plan_replay(home: Path, selector: str, env: dict[str, str] | None = None) -> ReplayPlan:
    """What `ledger replay RUN` would run, or the reason it refuses (LedgerError)."""
    from ledger.launch.adapters import detect_harness
    from ledger.records.ids import resolve_selector
    from ledger.records.reader import read_manifest

    env = dict(os.environ if env is None else env)
    path = resolve_selector(home, selector)
    m = read_manifest(path)
    rid = m.run_id
    if m.surface == INTERACTIVE:
        raise LedgerError(f"{rid} is an interactive run: its prompts were typed into the agent, not recorded, "
                          "so there is no launch request to replay",
                          hint=f"start it again yourself: `ledger run -- {m.harness} ...`")
    result = _result_event(os.fspath(path))
    argv = result.get("command") if result else None
    if m.launch is None or not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        why = ("a plain command has none" if m.harness == "command" else
               "the run has not settled yet" if result is None else "the record has none")
        raise LedgerError(f"no launch request was recorded for {rid} ({why})",
                          hint="only a settled headless agent run (`ledger run -- claude -p ...`) can be replayed; "
                               "run the command again with `ledger run -- CMD ...`")
    launch = m.launch
    prompts = [launch.get("system_prompt"), launch.get("task_prompt")]
    if any(isinstance(t, str) and MASK in t for t in [*prompts, *argv]):
        raise LedgerError(f"{rid}'s launch request was redacted (a secret was in a prompt or an argument); "
                          "a replay never guesses the secret",
                          hint="run it again yourself with the secret: `ledger run -- ...` "
                               f"(see the command with `ledger show {rid}`)")
    if not _installed(argv[0], env.get("PATH")):
        raise LedgerError(f"{rid}'s harness is not installed here: {argv[0]!r} is not on PATH",
                          hint=f"install {m.harness} (or put {os.path.basename(argv[0])} on PATH), "
                               f"then `ledger replay {rid}`")
    if not os.path.isdir(m.cwd):
        raise LedgerError(f"{rid} ran in {m.cwd}, which does not exist here",
                          hint=f"recreate the directory or replay on the machine that ran it: `ledger replay {rid}`")
    harness = "auto" if detect_harness(argv) == m.harness else m.harness
    expect = result.get("expected_skill") if isinstance(result.get("expected_skill"), str) else None
    return ReplayPlan(source_run_id=rid, source_path=os.fspath(path), harness=harness, argv=list(argv),
                      cwd=m.cwd, model=m.model, skill=m.skill, expect_skill=expect,
                      subjects=[s.selector for s in m.subjects])
