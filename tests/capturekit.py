"""Drive the real Claude Code 2.1.328 against tests/mockprovider.py and keep what it wrote with
the truth (the responses the mock served). Used by scripts/capture_claude.py; the captures
are committed under tests/data/captures/claude/ and read by tests/test_conformance_claude.py.

Headless runs are `claude -p ... --output-format stream-json`; interactive ones run the TUI in
a tmux session (`send-keys`, `capture-pane`) with the onboarding, trust and API-key dialogs
answered in `$CLAUDE_CONFIG_DIR/.claude.json`. A run under `faketime` sees a shifted clock: the
mock's times are shifted by the same offset (measured at launch) so the truth is in the
client's time.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from agentenv import (
    CLAUDE_BIN, CLAUDE_VERSION, DUMMY_ANTHROPIC_KEY, agent_cwd, claude_argv, claude_env, parse_jsonl, run_agent,
    scrub,
)
from mockprovider import MockProvider, answer, tool_call

#: The client's list prices (USD per million tokens: input, output, cache read, cache write 5m,
#: cache write 1h), for the truth's cost; each capture checks them against the client's own
#: `cost-state` (truth.json `check`).
PRICES = {
    "claude-sonnet-4-5": (3.0, 15.0, 0.30, 3.75, 6.0),
    "claude-haiku-4-5": (1.0, 5.0, 0.10, 1.25, 2.0),
}
# (claude-opus-5-5, what `/model claude-opus-4-1` became: its rates are not known here; a capture
# has one response of it, whose truth cost is then the client's own cost-state figure)
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
#: Line types whose payload is replaced by a marker (no usage, no time a count needs; tens of
#: KB each: the system prompt, tool schemas, attachments)
ELIDED = ("attachment", "api-request", "api-request-shape", "api-request-blob")
KEEP_KEYS = ("type", "parentUuid", "uuid", "timestamp", "sessionId", "isSidechain", "agentId", "id",
             "requestSessionId")


def usage(k: int, *, h1: bool = True) -> dict[str, Any]:
    """Scripted usage of main call k: distinct counters, a cache write split 5m/1h."""
    write = 50 * k
    h = (20 * k) if h1 else 0
    return {"input_tokens": 100 + k, "output_tokens": 20 + k, "cache_read_input_tokens": 1000 * k,
            "cache_creation_input_tokens": write,
            "cache_creation": {"ephemeral_5m_input_tokens": write - h, "ephemeral_1h_input_tokens": h}}


SIDE = answer("Summary: the user ran echo and got answers.",
              usage={"input_tokens": 900, "output_tokens": 60, "cache_read_input_tokens": 0,
                     "cache_creation_input_tokens": 40,
                     "cache_creation": {"ephemeral_5m_input_tokens": 40, "ephemeral_1h_input_tokens": 0}})


def cost_of(model: str, u: dict[str, Any]) -> float | None:
    p = PRICES.get(model)
    if p is None:
        return None
    cc = u.get("cache_creation") or {}
    m5 = cc.get("ephemeral_5m_input_tokens", u.get("cache_creation_input_tokens", 0))
    h1 = cc.get("ephemeral_1h_input_tokens", 0)
    return (u["input_tokens"] * p[0] + u["output_tokens"] * p[1] + u["cache_read_input_tokens"] * p[2]
            + m5 * p[3] + h1 * p[4]) / 1e6


# ------------------------------------------------------------------ the session of a capture

class Capture:
    """One scenario's client home, mock and truth."""

    def __init__(self, name: str, steps: list[dict[str, Any]], serve_model: dict | None = None) -> None:
        self.name = name
        self.tmp = Path(tempfile.mkdtemp(prefix=f"cap-{name}-"))
        self.cwd = agent_cwd(self.tmp)
        self.mp = MockProvider({"anthropic": steps, "side": SIDE,
                                "after": answer("(mock: script exhausted)", usage=usage(99, h1=False))},
                               serve_model=serve_model).start()
        self.env = claude_env(self.tmp, self.mp, extra={"TZ": "UTC"})
        self.config = Path(self.env["CLAUDE_CONFIG_DIR"])
        self.config.mkdir(parents=True, exist_ok=True)
        self.offsets: list[tuple[float, float]] = []  # (real time from, offset s) of faked runs
        self.log: list[str] = []
        self.checks: list[dict[str, Any]] = []

    # -- headless
    def headless(self, prompt: str, *, resume: str | None = None, args: tuple[str, ...] = (),
                 model: str | None = "claude-sonnet-4-5", fake: str | None = None,
                 tools: tuple[str, ...] = ("Bash", "Agent")) -> dict[str, Any]:
        argv = claude_argv(prompt, model=model, resume=resume, allowed_tools=tools, extra_args=args)
        shown = ["claude", *argv[1:]]
        env = self.env
        if fake:
            # libfaketime preloaded (the `faketime` wrapper's shared memory fails under some
            # sandboxes); "@" starts the clock there and lets it run
            env = {**env, "LD_PRELOAD": FAKETIME_LIB, "FAKETIME": f"@{fake}", "FAKETIME_NO_CACHE": "1"}
            shown = [f"FAKETIME='@{fake}'", f"LD_PRELOAD={Path(FAKETIME_LIB).name}", *shown]
            self._fake(fake)
        self.log.append(" ".join(shlex.quote(a) if "=" not in a else a for a in shown))
        p = run_agent(argv, env, self.cwd, timeout=180)
        res = [e for e in parse_jsonl(p.stdout) if e.get("type") == "result"]
        if not res:
            raise RuntimeError(f"{self.name}: no result\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        return res[-1]

    def _fake(self, fake: str) -> None:
        t = datetime.strptime(fake, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
        now = time.time()
        self.offsets.append((now, t - now))

    # -- interactive (tmux)
    def tui(self, actions: list[tuple[str, Any]], *, model: str = "claude-sonnet-4-5",
            args: tuple[str, ...] = (), fake: str | None = None) -> None:
        """Run the TUI; `actions`: ("prompt", text) waits for one more main response and an idle
        screen, ("slash", "/compact" ...) waits for `until(screen)`, ("exit", None)."""
        (self.config / ".claude.json").write_text(json.dumps({
            "hasCompletedOnboarding": True, "theme": "dark", "numStartups": 3,
            "customApiKeyResponses": {"approved": [DUMMY_ANTHROPIC_KEY[-20:]], "rejected": []},
            "projects": {str(self.cwd): {"hasTrustDialogAccepted": True, "allowedTools": ["Bash"]}}}))
        env = {**self.env, "TERM": "xterm-256color"}
        del env["NO_COLOR"]
        if fake:
            env.update({"LD_PRELOAD": FAKETIME_LIB, "FAKETIME": f"@{fake}", "FAKETIME_NO_CACHE": "1"})
        cmd = " ".join(["cd", shlex.quote(str(self.cwd)), "&&", "exec", "env", "-i",
                        *(f"{k}={shlex.quote(v)}" for k, v in env.items()),
                        str(CLAUDE_BIN), "--model", model, *args])
        sess = f"cap-{self.name}-{os.getpid()}"
        self.log.append((f"FAKETIME='@{fake}' " if fake else "") + f"TUI: claude --model {model} {' '.join(args)}".strip())
        if fake:
            self._fake(fake)
        subprocess.run(["tmux", "new-session", "-d", "-s", sess, "-x", "150", "-y", "50", cmd], check=True)
        try:
            self._wait(lambda: "❯" in self._screen(sess), 60, sess, "the prompt")
            for kind, value in actions:
                before = len(self.served())
                if kind == "prompt":
                    self.log.append(f"  > {value}")
                    self._type(sess, value)
                    self._wait(lambda: len(self.served()) > before and self._idle(sess), 120, sess, value)
                elif kind == "slash":
                    text, until = value
                    self.log.append(f"  > {text}")
                    self._type(sess, text)
                    self._wait(lambda: until(self._screen(sess), len(self.served()) - before), 120, sess, text)
                    time.sleep(1.5)
                elif kind == "confirm":  # a dialog: wait for its text, take the selected answer
                    self._wait(lambda: value in self._screen(sess), 60, sess, value)
                    self.log.append(f"  ({value} Enter)")
                    subprocess.run(["tmux", "send-keys", "-t", sess, "Enter"], check=True)
                    self._wait(lambda: value not in self._screen(sess) and self._idle(sess), 60, sess, "no dialog")
                elif kind == "sleep":
                    time.sleep(value)
                elif kind == "exit":
                    self.log.append("  > /exit")
                    self._type(sess, "/exit")
                    self._wait(lambda: not self._alive(sess), 60, sess, "exit")
        finally:
            if self._alive(sess):
                subprocess.run(["tmux", "kill-session", "-t", sess], capture_output=True)

    @staticmethod
    def _screen(sess: str) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", sess], capture_output=True, text=True).stdout

    @staticmethod
    def _alive(sess: str) -> bool:
        return subprocess.run(["tmux", "has-session", "-t", sess], capture_output=True).returncode == 0

    def _idle(self, sess: str) -> bool:
        a = self._screen(sess)
        time.sleep(1.0)
        b = self._screen(sess)
        return a == b and "esc to interrupt" not in b

    def _type(self, sess: str, text: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", sess, "-l", text], check=True)
        time.sleep(0.6)
        subprocess.run(["tmux", "send-keys", "-t", sess, "Enter"], check=True)

    def _wait(self, pred: Callable[[], bool], timeout: float, sess: str, what: str) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred():
                return
            time.sleep(0.3)
        raise RuntimeError(f"{self.name}: timed out waiting for {what!r}:\n{self._screen(sess)}")

    # -- the truth
    def served(self) -> list[dict[str, Any]]:
        return [r for r in self.mp.requests if r.get("api") == "anthropic" and r.get("status") == 200
                and r.get("message_id")]

    def _client_time(self, t: float) -> str:
        off = 0.0
        for since, o in self.offsets:
            if t >= since:
                off = o
        return datetime.fromtimestamp(t + off, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def transcripts(self) -> list[Path]:
        return sorted((self.config / "projects").rglob("*.jsonl"))

    def finish(self, out: Path) -> dict[str, Any]:
        self.mp.stop()
        logged: set[str] = set()
        lines: list[dict[str, Any]] = []
        for f in self.transcripts():
            for raw in f.read_text().splitlines():
                o = json.loads(raw)
                lines.append(o)
                m = o.get("message")
                if o.get("type") == "assistant" and isinstance(m, dict) and m.get("id"):
                    logged.add(m["id"])
        responses = []
        for r in self.served():
            model = r["model"]
            responses.append({
                "message_id": r["message_id"], "model": model,
                "session": r["headers"].get("x-claude-code-session-id"),
                "kind": r["kind"], "max_tokens": r.get("max_tokens"), "time": self._client_time(r["time"]),
                "usage": r["usage"], "cost_usd": cost_of(model, r["usage"]), "logged": r["message_id"] in logged,
            })
        _client_costs(responses, lines)
        truth = {"scenario": self.name, "client": f"Claude Code {CLAUDE_VERSION}", "commands": self.log,
                 "responses": responses, "check": _check(responses, lines)}
        if out.exists():
            shutil.rmtree(out)
        for f in self.transcripts():
            rel = Path(scrub(str(f.relative_to(self.config)), self.tmp))
            dest = out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text("".join(sanitize(scrub(raw, self.tmp)) + "\n" for raw in f.read_text().splitlines()))
        (out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
        shutil.rmtree(self.tmp, ignore_errors=True)
        return truth


def sanitize(raw: str) -> str:
    """A transcript line as committed: the payload of the ELIDED line types replaced by a marker
    (their type, ids, session and timestamp kept), every other line byte for byte."""
    o = json.loads(raw)
    if o.get("type") not in ELIDED:
        return raw
    kept = {k: o[k] for k in KEEP_KEYS if k in o}
    kept["elided"] = len(raw)
    return json.dumps(kept, separators=(",", ":"))


def _client_costs(responses: list[dict[str, Any]], lines: list[dict[str, Any]]) -> None:
    """A response of a model without PRICES: when it is its session's only response of that model,
    its cost is the client's (the session's last cost-state for that model)."""
    for r in responses:
        if r["cost_usd"] is not None or r["max_tokens"] == 1:
            continue
        same = [x for x in responses if x["session"] == r["session"] and x["model"] == r["model"]
                and x["max_tokens"] != 1]
        levels = [o["modelUsage"][r["model"]]["costUSD"] for o in lines if o.get("type") == "cost-state"
                  and o.get("sessionId") == r["session"] and r["model"] in (o.get("modelUsage") or {})]
        if len(same) == 1 and levels:
            r["cost_usd"] = max(levels)
            r["cost_from"] = "cost-state"


def _check(responses: list[dict[str, Any]], lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The client's own totals against the truth: per model, the sum over sessions of each
    session's last `cost-state` (a fork's includes its parent's, see README) and the truth
    responses that are not `max_tokens: 1` probes."""
    last: dict[str, dict[str, Any]] = {}
    for o in lines:
        if o.get("type") == "cost-state":
            sid = o["sessionId"]
            if sid not in last or o["totalCostUSD"] >= last[sid]["totalCostUSD"]:
                last[sid] = o
    client: dict[str, dict[str, float]] = {}
    for o in last.values():
        for m, u in (o.get("modelUsage") or {}).items():
            c = client.setdefault(m, {"cost_usd": 0.0, "input_tokens": 0, "output_tokens": 0})
            c["cost_usd"] += u["costUSD"]
            c["input_tokens"] += u["inputTokens"]
            c["output_tokens"] += u["outputTokens"]
    served: dict[str, dict[str, float]] = {}
    for r in responses:
        if r["max_tokens"] == 1:
            continue
        c = served.setdefault(r["model"], {"cost_usd": 0.0, "input_tokens": 0, "output_tokens": 0})
        c["cost_usd"] += r["cost_usd"] or 0.0
        c["input_tokens"] += r["usage"]["input_tokens"]
        c["output_tokens"] += r["usage"]["output_tokens"]
    return {"client_last_cost_states": client, "served_not_probes": served}


# ------------------------------------------------------------------ the scenarios

def _steps(n: int, tools: dict[int, tuple[str, dict]] | None = None, start: int = 1) -> list[dict[str, Any]]:
    tools = tools or {}
    out = []
    for k in range(start, start + n):
        if k in tools:
            out.append(tool_call(*tools[k], usage=usage(k)))
        else:
            out.append(answer(f"Answer {k}.", usage=usage(k, h1=k % 2 == 0)))
    return out


def tools_resume(out: Path) -> dict[str, Any]:
    c = Capture("tools_resume", _steps(6, {1: ("Bash", {"command": "echo one"}),
                                           3: ("Bash", {"command": "echo two"})}))
    r = c.headless("run echo one")                 # calls 1-2
    sid = r["session_id"]
    c.headless("run echo two", resume=sid)         # calls 3-4
    c.headless("and again", args=("--continue",))  # call 5
    return c.finish(out)


def fork(out: Path) -> dict[str, Any]:
    c = Capture("fork", _steps(6, {1: ("Bash", {"command": "echo parent"})}))
    sid = c.headless("parent work")["session_id"]                      # calls 1-2
    c.headless("fork work", resume=sid, args=("--fork-session",))     # call 3
    c.headless("parent again", resume=sid)                             # call 4
    return c.finish(out)


def subagent(out: Path) -> dict[str, Any]:
    c = Capture("subagent", _steps(4, {1: ("Agent", {"description": "look", "prompt": "Say hi.",
                                                     "subagent_type": "general-purpose", "model": "haiku"})}))
    c.headless("delegate a task")
    return c.finish(out)


def model_switch(out: Path) -> dict[str, Any]:
    c = Capture("model_switch", _steps(4))
    sid = c.headless("on sonnet")["session_id"]
    c.headless("on haiku", resume=sid, model="claude-haiku-4-5")
    return c.finish(out)


def midnight(out: Path) -> dict[str, Any]:
    c = Capture("midnight", _steps(4, {1: ("Bash", {"command": "sleep 4; echo late"})}))
    c.headless("work across midnight", fake="2026-12-01 23:59:57")
    return c.finish(out)


def _compacted(screen: str, n: int) -> bool:
    return n >= 1 and ("ompacted" in screen or "ctrl+o" in screen.lower()) and "❯" in screen


def compact(out: Path) -> dict[str, Any]:
    c = Capture("compact", _steps(6, {1: ("Bash", {"command": "echo before"})}))
    c.tui([("prompt", "run echo before"), ("prompt", "one more"),
           ("slash", ("/compact", _compacted)), ("prompt", "after compact"), ("exit", None)])
    sid = _session_of(c)
    c.headless("fork after compact", resume=sid, args=("--fork-session",))
    return c.finish(out)


def clear(out: Path) -> dict[str, Any]:
    c = Capture("clear", _steps(4))
    c.tui([("prompt", "before clear"), ("slash", ("/clear", lambda s, n: "❯" in s)),
           ("prompt", "after clear"), ("exit", None)])
    return c.finish(out)


def model_tui(out: Path) -> dict[str, Any]:
    c = Capture("model_tui", _steps(4))
    c.tui([("prompt", "on sonnet"), ("slash", ("/model claude-opus-4-1", lambda s, n: "Switch model?" in s)),
           ("confirm", "Switch model?"), ("prompt", "on opus"), ("exit", None)])
    return c.finish(out)


def fork_chain(out: Path) -> dict[str, Any]:
    c = Capture("fork_chain", _steps(8, {1: ("Bash", {"command": "echo parent"})}))
    p = c.headless("parent work")["session_id"]                                       # calls 1-2
    f1 = c.headless("fork one", resume=p, args=("--fork-session",))["session_id"]     # 3
    c.headless("fork of the fork", resume=f1, args=("--fork-session",))              # 4
    c.headless("parent again", resume=p)                                             # 5
    c.headless("fork one again", resume=f1)                                          # 6
    return c.finish(out)


def tui_midnight(out: Path) -> dict[str, Any]:
    c = Capture("tui_midnight", _steps(6, {1: ("Bash", {"command": "echo late"})}))
    c.tui([("prompt", "before midnight"), ("sleep", 12), ("prompt", "after midnight"),
           ("slash", ("/compact", _compacted)), ("prompt", "after compact"), ("exit", None)],
          fake="2026-12-01 23:59:48")
    return c.finish(out)


def clear_resume(out: Path) -> dict[str, Any]:
    c = Capture("clear_resume", _steps(5))
    c.tui([("prompt", "before clear"), ("slash", ("/clear", lambda s, n: "❯" in s)),
           ("prompt", "after clear"), ("exit", None)])
    first = min((f for f in c.transcripts() if "subagents" not in f.parts), key=lambda f: f.stat().st_mtime)
    c.headless("back to the first", resume=first.stem)
    return c.finish(out)


#: Made by the same harness but not committed: held out from the tests' data (run them with
#: `scripts/capture_claude.py --out DIR NAME`, then `LEDGER_CLAUDE_CAPTURES=DIR pytest
#: tests/test_conformance_claude.py`)
HELD_OUT = ("tui_midnight", "clear_resume")


def _session_of(c: Capture) -> str:
    (f,) = [f for f in c.transcripts() if "subagents" not in f.parts]
    return f.stem


SCENARIOS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "tools_resume": tools_resume, "fork": fork, "subagent": subagent, "model_switch": model_switch,
    "midnight": midnight, "compact": compact, "clear": clear, "model_tui": model_tui,
    "fork_chain": fork_chain, "tui_midnight": tui_midnight, "clear_resume": clear_resume,
}


def capture(name: str, out: Path) -> dict[str, Any]:
    return SCENARIOS[name](out)
