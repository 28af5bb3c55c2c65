"""Drive the real Codex CLI (headless and its TUI in tmux) against tests/mockprovider.py and
keep what it wrote with the truth: every response the mock served.

Used by scripts/capture_codex.py (which makes tests/data/captures/codex/) and read by
tests/test_conformance_codex.py (which only reads the committed capture: the tests never run
the client). Standard library only, plus the two test helpers it drives.

The truth is the mock's own log: for each `POST /v1/responses` it answered, the response id it
made up, the model asked for, the usage it sent (input incl. cached, output incl. reasoning),
the service tier asked for, the time it answered and the thread that asked (Codex sends the
thread id as the `session_id` header and as `prompt_cache_key`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

from agentenv import CODEX_BIN, STABLE_TMP, codex_env
from mockprovider import answer

#: tmux server of its own (never the user's, never another helper's)
TMUX_SOCKET = f"ledger-capture-{os.getpid()}"


# --------------------------------------------------------------------------
# tmux
# --------------------------------------------------------------------------


class Tui:
    """One client in a detached tmux session: type, press keys, wait for the screen."""

    def __init__(self, name: str, argv: Sequence[str], env: dict[str, str], cwd: Path,
                 *, width: int = 160, height: int = 50):
        self.name = name
        self.target = f"{name}:0.0"
        env = {**env, "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)
        inner = "env -i " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + \
            " ".join(shlex.quote(a) for a in argv)
        # the shell stays after the client exits, so its last screen and status can be read
        script = f"{inner}; echo; echo CLIENT-EXIT $?; sleep 600"
        self._tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height),
                   "-c", str(cwd), "bash -c " + shlex.quote(script))

    @staticmethod
    def _tmux(*args: str) -> str:
        p = subprocess.run(["tmux", "-L", TMUX_SOCKET, *args], capture_output=True, text=True, timeout=30)
        return p.stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.target)

    def wait(self, pattern: str, timeout: float = 90, *, absent: bool = False) -> str:
        """Wait until `pattern` (a regex) is on the screen (or gone, with `absent`)."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            s = self.screen()
            if bool(rx.search(s)) != absent:
                return s
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: {'still' if absent else 'no'} {pattern!r} on screen:\n{s}")
            time.sleep(0.5)

    def type(self, text: str) -> None:
        self._tmux("send-keys", "-t", self.target, "-l", text)

    def key(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.target, *keys)

    def submit(self, text: str) -> None:
        self.type(text)
        time.sleep(0.6)
        self.key("Enter")

    def close(self) -> None:
        self._tmux("kill-session", "-t", self.name)


def kill_tmux_server() -> None:
    subprocess.run(["tmux", "-L", TMUX_SOCKET, "kill-server"], capture_output=True, timeout=30)


# --------------------------------------------------------------------------
# truth
# --------------------------------------------------------------------------


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def thread_of_request(entry: dict[str, Any]) -> str | None:
    body = entry.get("body") if isinstance(entry.get("body"), dict) else {}
    h = entry.get("headers") or {}
    return h.get("session_id") or h.get("session-id") or body.get("prompt_cache_key")


def is_title_call(body: dict[str, Any]) -> bool:
    """The TUI's thread-title call: its output format is a JSON schema of one `title`."""
    fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    props = ((fmt or {}).get("schema") or {}).get("properties") if isinstance(fmt, dict) else None
    return isinstance(props, dict) and set(props) == {"title"}


def mock_scenario() -> dict[str, Any]:
    """The mock's scenario for a capture: OpenAI scripts set per step (Capture.script), the
    title calls answered apart (they must not take a scripted step)."""
    return {"openai": [], "openai_side": is_title_call,
            "side": answer('{"title":"Mock title"}', usage={"input_tokens": 60, "cached_tokens": 0,
                                                           "output_tokens": 6})}


def request_purpose(entry: dict[str, Any]) -> str:
    """`title` (the TUI's thread-title call, which no rollout holds) or `turn` (any other
    call: the agent loop's, a compaction)."""
    body = entry.get("body") if isinstance(entry.get("body"), dict) else {}
    return "title" if is_title_call(body) else "turn"


def served(requests: Iterable[dict[str, Any]], scenario: str) -> list[dict[str, Any]]:
    """The responses the mock served (status 200) as truth rows."""
    rows = []
    for r in requests:
        if r.get("api") != "openai" or r.get("kind") not in ("main", "side") or r.get("status") != 200:
            continue
        u = r["usage"]
        rows.append({
            "scenario": scenario,
            "response_id": r["response_id"],
            "model": r["model"],
            "service_tier": r.get("service_tier"),
            "time": _utc(r["time"]),
            "thread": thread_of_request(r),
            "purpose": request_purpose(r),
            "input_tokens": u["input_tokens"],
            "cached_input_tokens": u.get("input_tokens_details", {}).get("cached_tokens", 0),
            "output_tokens": u["output_tokens"],
            "reasoning_output_tokens": u.get("output_tokens_details", {}).get("reasoning_tokens", 0),
            "total_tokens": u["total_tokens"],
        })
    return rows


# --------------------------------------------------------------------------
# a capture session: one CODEX_HOME, one mock, several scenarios
# --------------------------------------------------------------------------


class Capture:
    def __init__(self, root: Path, mock: Any, *, codex_bin: Path = CODEX_BIN, extra_config: str = ""):
        self.root = Path(root)
        self.mock = mock
        self.codex = str(codex_bin)
        self.env = codex_env(self.root, mock, extra_config=extra_config)
        self.cwd = self.root / "work"
        self.codex_home = Path(self.env["CODEX_HOME"])
        self.truth: list[dict[str, Any]] = []
        self.notes: dict[str, Any] = {}
        self._seen = 0

    def script(self, steps: list[dict[str, Any]]) -> None:
        """Steps for the next calls (after them: the mock's `after` answer)."""
        with self.mock._lock:  # (what an earlier scenario left unplayed is dropped)
            done = self.mock.scripts["openai"][:self.mock._cursor["openai"]]
            self.mock.scripts["openai"] = done + list(steps)

    def mark(self, scenario: str, **notes: Any) -> list[dict[str, Any]]:
        """Book the responses served since the last mark under `scenario`."""
        reqs = self.mock.requests[self._seen:]
        self._seen = len(self.mock.requests)
        rows = served(reqs, scenario)
        self.truth += rows
        self.notes[scenario] = {**notes, "responses": len(rows),
                                "purposes": sorted({r["purpose"] for r in rows})}
        return rows

    def exec(self, *args: str, timeout: float = 180) -> list[dict[str, Any]]:
        """`codex exec ...` with --json; returns its events."""
        argv = [self.codex, "exec", *args]
        p = subprocess.run(argv, env=self.env, cwd=self.cwd, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise RuntimeError(f"{argv[1:]} exit {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        out = []
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                out.append(json.loads(line))
        return out

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([self.codex, *args], env=self.env, cwd=self.cwd, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def tui(self, name: str, *args: str) -> Tui:
        return Tui(name, [self.codex, *args], self.env, self.cwd)

    def rollouts(self) -> list[Path]:
        return sorted(p for d in ("sessions", "archived_sessions") if (self.codex_home / d).is_dir()
                      for p in (self.codex_home / d).rglob("*.jsonl"))

    def thread_file(self, thread: str) -> Path:
        (hit,) = [p for p in self.rollouts() if thread in p.name]
        return hit


# --------------------------------------------------------------------------
# keeping it: small, no temp paths
# --------------------------------------------------------------------------

#: strings longer than this (instructions, skill lists, tool output) are cut: no rule reads them
KEEP_CHARS = 160


def _trim(v: Any, key: str = "") -> Any:
    if isinstance(v, str):
        return v if len(v) <= KEEP_CHARS else v[:KEEP_CHARS] + f"...[{len(v) - KEEP_CHARS} chars cut]"
    if isinstance(v, list):
        return [_trim(x) for x in v]
    if isinstance(v, dict):
        return {k: _trim(x, k) for k, x in v.items()}
    return v


def sanitize_line(line: str, root: Path) -> str:
    """One rollout line, its temp paths replaced by /tmp/ledger-test and long strings cut
    (the line's keys, numbers, ids and timestamps are kept as the client wrote them)."""
    real = str(root)
    for variant in {real, os.path.realpath(real)}:
        line = line.replace(variant, STABLE_TMP)
    try:
        obj = json.loads(line)
    except ValueError:
        return line
    return json.dumps(_trim(obj), ensure_ascii=False, separators=(",", ":"))


def keep(cap: Capture, dest: Path) -> list[str]:
    """Copy the capture's rollouts (sessions/ and archived_sessions/, layout kept) to `dest`."""
    out = []
    for p in cap.rollouts():
        rel = p.relative_to(cap.codex_home)
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        text = p.read_text()
        lines = [sanitize_line(x, cap.root) for x in text.splitlines()]
        target.write_text("\n".join(lines) + ("\n" if text.endswith("\n") else ""))
        out.append(str(rel))
    return out


def write_truth(cap: Capture, dest: Path, *, client: str, files: list[str]) -> None:
    """truth.json: each served response, `logged` when a kept rollout names its response id
    (0.169 writes one `token_usage_record` per call; an older client names none: None)."""
    text = "".join((dest / f).read_text() for f in files)
    named = "token_usage_record" in text
    for r in cap.truth:
        r["logged"] = (r["response_id"] in text) if named else None
    doc = {"client": client, "made": _utc(time.time()), "scenarios": cap.notes, "files": files,
           "responses": cap.truth}
    (dest / "truth.json").write_text(json.dumps(doc, indent=1) + "\n")


def reset(dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
