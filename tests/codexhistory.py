"""A synthetic Codex history (rollout files) with every known duplication hazard, and its
ground truth.

`generate(root, threads=N, seed=S)` writes a `$CODEX_HOME` layout under `root`
(`sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`, `archived_sessions/rollout-*.jsonl`) and
returns a `History` whose truth is computed from the generator's own list of model calls
(the usage each call added), never by reading the files back.

Hazards (reference/stream-formats.md §C.2):
* `token_count` totals are cumulative per thread; `last_token_usage` is written too (summing it
  would count repeats);
* `token_count` with `info: null` at every turn start;
* exact repeats: a `token_count` written twice (same bytes, or the same totals 12 ms later);
* several models per thread (one `turn_context` per turn), threads of three client styles
  (with `cache_write_input_tokens`; without it; without `reasoning_output_tokens`);
* resumed threads: more turns appended to the same file days later, totals continuing; now and
  then an old-build resume whose totals restart from zero;
* forks: a new file with its own `session_meta` (`forked_from_id`), then a copy of the parent's
  lines (its `session_meta` included) up to the fork point, with the original timestamps or
  rewritten to the fork time, then its own turns whose totals continue from the fork point;
  forks of forks;
* the same rollout under `sessions/` and `archived_sessions/`;
* sessions near midnight UTC and resumed days later;
* a legacy pre-envelope rollout (no usage);
* junk: malformed JSON, non-UTF-8 bytes, a JSON array, an unknown line type, a `token_count`
  without a cumulative total, a `function_call` without a name, and a torn last line;
* tool calls before each model call's total: `function_call` (`exec_command`), now and then a
  `custom_tool_call` (`apply_patch`), a `local_shell_call` or a `web_search_call` (no id: keyed
  by its payload); a call's line written twice (the same bytes, or the same call id 5 ms
  later); fork copies carry the parent's calls (counted once, as the parent's). The truth
  (`History.tools`) lists each call once, under the thread that made it;
* tool results where the rollout states them: 0.169's `item_completed` `CommandExecution`
  (completed / failed / declined; in progress is none), the old `shell` tool's JSON output
  (`metadata.exit_code`), `patch_apply_end` (`success`), an MCP call's `mcp_tool_call_end`
  (`Err`, `isError`, an error envelope: semantic-error); and results that say nothing (output
  text, a web search): unknown. A result line written twice, fork copies of results. The
  truth (`History.results`): per thread and tool [ok, error, semantic-error];
* forks that kept the original times now and then moved to `archived_sessions/` (that path
  sorts before the parent's: a tie on time must still give the parent its own usage).

`generate(..., real_shapes=True)` writes only the shapes the real clients were seen to write
(tests/data/captures/codex/README.md), threads of two client versions:
* 0.169: an `ordinal` on every line; one `token_usage_record` per call (`response_id`, the
  call's `usage`, `turn_token_usage`, `thread_token_usage`) before the `token_count` repeating
  its total; `thread_settings_applied` with a `service_tier` (now and then `priority`); a model
  change between turns re-emits the current `token_count`, runs a compaction call on the old
  model, writes `compacted` and a `token_count` whose `last_token_usage` is 0 but
  `total_tokens`; forks are **paginated**: own `session_meta` with `forked_from_id`,
  `forked_from_ordinal_exclusive`, `history_mode: "paginated"`, `history_base`, none of the
  parent's lines, totals going on from the parent's at the fork point (a fork on another
  model: the parent's token_count re-emitted at fork time, then the compaction call on the
  parent's model before the fork's first `turn_context`);
* 0.130: `token_count` only; forks **copy**: own `session_meta` (`forked_from_id` only), then
  the parent's `session_meta` and every parent line re-stamped to the fork instant, then the
  fork's own lines.
The truth has each call's `service_tier`.
"""

from __future__ import annotations

import copy
import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson

COUNTERS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")
MODELS = ("gpt-5.5", "gpt-5.3-codex", "gpt-5.2-codex-mini")
T0 = datetime(2026, 3, 9, 22, 40, tzinfo=timezone.utc)


@dataclass
class TrueCall:
    session_id: str
    model: str
    time: datetime
    counters: dict[str, int | None]
    service_tier: str | None = None

    @property
    def day(self) -> str:
        return self.time.strftime("%Y-%m-%d")


@dataclass
class History:
    root: Path | None
    files: dict[str, bytes]          # relative path -> bytes written
    calls: list[TrueCall]
    junk_lines: int
    torn_files: list[str]
    tools: dict[str, dict[str, int]] = field(default_factory=dict)  # thread -> tool name -> calls
    # thread -> tool name -> [ok, error, semantic-error] (a call without a stated result: in neither)
    results: dict[str, dict[str, list[int]]] = field(default_factory=dict)

    def truth(self, by: tuple[str, ...] = ("day", "model")) -> dict[tuple, dict[str, Any]]:
        out: dict[tuple, dict[str, Any]] = {}
        for c in self.calls:
            f = {"day": c.day, "model": c.model, "session": c.session_id}
            k = tuple(f[b] for b in by)
            if k not in out:
                out[k] = {**{n: None for n in COUNTERS}, "deltas": 0, "cost_usd": None}
            x = out[k]
            x["deltas"] += 1
            for n, v in c.counters.items():
                if v is not None:
                    x[n] = (x[n] or 0) + v
        return out


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


@dataclass
class _Thread:
    tid: str
    rel: str
    style: str                       # "full" | "std" | "old"
    models: list[str]
    lines: list[Any] = field(default_factory=list)   # dicts, or raw bytes (junk)
    total: list[int] = field(default_factory=lambda: [0, 0, 0, 0, 0])
    kept_times: bool = False         # a fork whose copies kept the parent's timestamps
    version: str = "old"             # "0.169" / "0.130" (real_shapes), else the assumed shapes
    last_model: str | None = None
    tier: str | None = None


class _Gen:
    def __init__(self, seed: int, real_shapes: bool = False, pad: int = 0) -> None:
        self.real = real_shapes
        self.pad = pad
        self.rng = random.Random(seed)
        self.threads: list[_Thread] = []
        self.calls: list[TrueCall] = []
        # tool lines draw from their own generator: the usage of a seed stays what it was
        self.trng = random.Random(seed * 7919 + 1)
        self.tools: dict[str, dict[str, int]] = {}
        self.results: dict[str, dict[str, list[int]]] = {}
        self.searches = 0

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def new_thread(self, t: datetime, style: str, models: list[str], parent: _Thread | None = None,
                   version: str = "old") -> _Thread:
        tid = self.uid()
        rel = f"sessions/{t:%Y/%m/%d}/rollout-{t:%Y-%m-%dT%H-%M-%S}-{tid}.jsonl"
        th = _Thread(tid, rel, style, models, version=version)
        meta: dict[str, Any] = {"id": tid, "timestamp": _iso(t), "cwd": "/home/dev/proj", "originator": "codex_cli_rs",
                                "cli_version": "0.169.0", "instructions": None, "source": "cli",
                                "model_provider": "openai",
                                "git": {"commit_hash": "0" * 40, "branch": "main", "repository_url": None}}
        if parent is not None:
            meta["forked_from_id"] = parent.tid
        if version == "0.169":
            meta["cli_version"] = "0.169.0"
            meta["history_mode"] = "paginated"
            if parent is not None:
                n = sum(1 for x in parent.lines if isinstance(x, dict))  # (ordinals: the client's lines)
                meta["forked_from_ordinal_exclusive"] = n
                meta["history_base"] = {"thread_id": parent.tid, "end_ordinal_exclusive": n,
                                        "end_byte_offset": 1000 * n}
        elif version == "0.130":
            meta["cli_version"] = "0.130.0"
        th.lines.append({"timestamp": _iso(t), "type": "session_meta", "payload": meta})
        self.threads.append(th)
        return th

    def usage(self, th: _Thread, raw: list[int]) -> dict[str, int]:
        u = {"input_tokens": raw[0], "cached_input_tokens": raw[1]}
        if th.style == "full":
            u["cache_write_input_tokens"] = raw[2]
        u["output_tokens"] = raw[3]
        if th.style != "old":
            u["reasoning_output_tokens"] = raw[4]
        u["total_tokens"] = raw[0] + raw[3]
        return u

    def call(self, th: _Thread, t: datetime, model: str, *, restart: bool = False,
             compaction: bool = False) -> datetime:
        rng = self.rng
        inp = rng.randint(2000, 60000)
        if restart:
            inp = rng.randint(1, max(1, th.total[0] - 1))  # below the old total: detectable
            th.total = [0, 0, 0, 0, 0]
        cached = rng.choice([0, rng.randint(0, inp * 9 // 10)])
        write = rng.randint(0, (inp - cached) // 4) if th.style == "full" else 0
        out = rng.randint(1, 3000)
        reason = rng.randint(0, out) if th.style != "old" else 0
        raw = [inp, cached, write, out, reason]
        th.total = [a + b for a, b in zip(th.total, raw)]
        if not compaction:
            th.lines.append({"timestamp": _iso(t), "type": "response_item",
                             "payload": {"type": "function_call", "name": "exec_command", "arguments": "{}",
                                         "call_id": "call_" + self.uid()[:8]}})
            self.tool_lines(th, t)
        t += timedelta(milliseconds=rng.randint(50, 5000))
        if self.pad and not compaction:
            # the answer's text (the captured 0.130 shape; 0.169 writes it too): size for the
            # benchmarks, derived from the thread and its line count, not the random stream, so a
            # padded history has the same calls and truth as an unpadded one of the same seed
            from claudehistory import _filler

            th.lines.append({"timestamp": _iso(t), "type": "response_item", "payload": {
                "type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "done" + _filler(th.tid, len(th.lines), self.pad)}]}})
        if th.version == "0.169":
            th.lines.append({"timestamp": _iso(t), "type": "token_usage_record", "payload": {
                "thread_id": th.tid, "turn_id": "t", "session_id": th.tid,
                "response_id": f"resp_{self.uid().replace('-', '')[:24]}", "usage": self.usage(th, raw),
                "turn_token_usage": self.usage(th, raw), "thread_token_usage": self.usage(th, th.total)}})
        tc = {"timestamp": _iso(t), "type": "event_msg",
              "payload": {"type": "token_count",
                          "info": {"total_token_usage": self.usage(th, th.total),
                                   "last_token_usage": self.usage(th, raw),
                                   "model_context_window": 258400},
                          "rate_limits": {"limit_id": "codex", "primary": {"used_percent": 12.0}}}}
        th.lines.append(tc)
        self.calls.append(TrueCall(th.tid, model, t, {
            "input_tokens": inp - cached - (write if th.style == "full" else 0), "cache_read_tokens": cached,
            "cache_write_tokens": write if th.style == "full" else None, "output_tokens": out,
            "reasoning_tokens": reason if th.style != "old" else None}, th.tier))
        if compaction:
            th.lines.append({"timestamp": _iso(t), "type": "compacted", "payload": {"message": "", "replacement_history": []}})
            after = copy.deepcopy(tc)
            zero = {k: 0 for k in after["payload"]["info"]["last_token_usage"]}
            after["payload"]["info"]["last_token_usage"] = {**zero, "total_tokens": rng.randint(5000, 20000)}
            th.lines.append(after)
            return t + timedelta(seconds=1)
        r = rng.random()
        if r < 0.15:
            th.lines.append(copy.deepcopy(tc))                     # the same bytes again
        elif r < 0.3:
            again = copy.deepcopy(tc)                              # the same totals 12 ms later
            again["timestamp"] = _iso(t + timedelta(milliseconds=12))
            th.lines.append(again)
        return t + timedelta(seconds=rng.randint(1, 120))

    def tool(self, th: _Thread, name: str) -> None:
        t = self.tools.setdefault(th.tid, {})
        t[name] = t.get(name, 0) + 1

    def result(self, th: _Thread, name: str, status: str | None, line: dict[str, Any], t: datetime) -> None:
        """The result line of the call just written (status None: one that states nothing)."""
        th.lines.append({"timestamp": _iso(t + timedelta(milliseconds=3)), **line})
        if self.trng.random() < 0.1:
            th.lines.append(copy.deepcopy(th.lines[-1]))           # a result written twice
        if status is not None:
            r = self.results.setdefault(th.tid, {}).setdefault(name, [0, 0, 0])
            r[("ok", "error", "semantic-error").index(status)] += 1

    def exec_result(self, th: _Thread, cid: str, t: datetime) -> None:
        tr = self.trng
        r = tr.random()
        if r < 0.45:  # 0.169: the command's item_completed (its id is the call id)
            status = tr.choice(["completed", "completed", "failed", "declined", "in_progress"])
            code = {"completed": 0, "failed": tr.randint(1, 255), "declined": -1}.get(status)
            item = {"type": "CommandExecution", "id": cid, "command": ["/bin/bash", "-lc", "true"], "status": status}
            if code is not None:
                item["exit_code"] = code
            self.result(th, "exec_command", {"in_progress": None, "completed": "ok"}.get(status, "error"),
                        {"type": "event_msg", "payload": {"type": "item_completed", "thread_id": th.tid,
                                                          "turn_id": "t", "item": item}}, t)
        elif r < 0.7:  # the output text alone: says nothing clear
            self.result(th, "exec_command", None, {"type": "response_item", "payload": {
                "type": "function_call_output", "call_id": cid,
                "output": f"Chunk ID: ab12\nProcess exited with code {tr.randint(0, 1)}\nOutput:\n"}}, t)
        # (else no result line at all: unknown)

    def shell_output(self, code: int) -> str:
        return orjson.dumps({"output": "x\n", "metadata": {"exit_code": code, "duration_seconds": 0.1}}).decode()

    def tool_lines(self, th: _Thread, t: datetime) -> None:
        """More tool lines after the exec_command call just written (its truth included)."""
        tr = self.trng
        self.tool(th, "exec_command")
        last = th.lines[-1]
        r = tr.random()
        if r < 0.1:
            th.lines.append(copy.deepcopy(last))                   # the same bytes again
        elif r < 0.2:
            again = copy.deepcopy(last)                            # the same call id 5 ms later
            again["timestamp"] = _iso(t + timedelta(milliseconds=5))
            th.lines.append(again)
        self.exec_result(th, last["payload"]["call_id"], t)
        r = tr.random()
        cid = f"call_{tr.getrandbits(48):012x}"
        if r < 0.2:
            th.lines.append({"timestamp": _iso(t), "type": "response_item",
                             "payload": {"type": "custom_tool_call", "status": "completed", "call_id": cid,
                                         "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"}})
            self.tool(th, "apply_patch")
            if tr.random() < 0.7:
                ok = tr.random() < 0.7
                self.result(th, "apply_patch", "ok" if ok else "error", {"type": "event_msg", "payload": {
                    "type": "patch_apply_end", "call_id": cid, "stdout": "", "stderr": "", "success": ok}}, t)
        elif r < 0.3:
            th.lines.append({"timestamp": _iso(t), "type": "response_item",
                             "payload": {"type": "local_shell_call", "call_id": cid, "status": "completed",
                                         "action": {"type": "exec", "command": ["ls"]}}})
            self.tool(th, "local_shell")
            code = tr.choice([0, 0, 2])
            self.result(th, "local_shell", "ok" if code == 0 else "error", {"type": "response_item", "payload": {
                "type": "function_call_output", "call_id": cid, "output": self.shell_output(code)}}, t)
        elif r < 0.38:
            name = "mcp__git__status"
            th.lines.append({"timestamp": _iso(t), "type": "response_item",
                             "payload": {"type": "function_call", "name": name, "arguments": "{}", "call_id": cid}})
            self.tool(th, name)
            inv = {"server": "git", "tool": "status", "arguments": {}}
            status, res = tr.choice([("ok", {"Ok": {"content": [{"type": "text", "text": "clean"}]}}),
                                     ("error", {"Ok": {"content": [{"type": "text", "text": "no repo"}],
                                                       "isError": True}}),
                                     ("semantic-error", {"Ok": {"content": [{"type": "text",
                                                                             "text": "Error: not a git repo"}]}}),
                                     ("error", {"Err": "tool call failed: timeout"})])
            self.result(th, name, status, {"type": "event_msg", "payload": {
                "type": "mcp_tool_call_end", "call_id": cid, "invocation": inv,
                "duration": {"secs": 0, "nanos": 1}, "result": res}}, t)
        elif r < 0.45:
            self.searches += 1
            line = {"timestamp": _iso(t), "type": "response_item",
                    "payload": {"type": "web_search_call", "status": "completed",
                                "action": {"type": "search", "query": f"query {self.searches}"}}}
            th.lines.append(line)
            if tr.random() < 0.3:
                th.lines.append(copy.deepcopy(line))               # an exact repeat of an id-less call
            self.tool(th, "web_search")
        elif r < 0.5:
            th.lines.append(b'{"timestamp":"2026-03-10T00:00:00.000Z","type":"response_item",'
                            b'"payload":{"type":"function_call","arguments":"{}","call_id":"call_noname"}}\n')

    def junk(self, th: _Thread) -> None:
        th.lines.append(self.rng.choice([
            b'{"timestamp":"2026-03-10T00:00:00.000Z","type":"event_msg","payload":{"type":"token_c\n',
            b"\xff\xfe not utf-8 \x80\n", b"[1, 2, 3]\n", b'{"type":"x-future-record","payload":{}}\n',
            b'{"timestamp":"2026-03-10T00:00:00.000Z","type":"event_msg","payload":{"type":"token_count",'
            b'"info":{"last_token_usage":{"input_tokens":5,"output_tokens":1}}}}\n']))

    def turns(self, th: _Thread, t: datetime, n: int, *, restart_first: bool = False) -> datetime:
        rng = self.rng
        for i in range(n):
            model = rng.choice(th.models)
            if th.version == "0.169":
                if rng.random() < 0.3:
                    th.tier = rng.choice([None, "priority"])
                th.lines.append({"timestamp": _iso(t), "type": "event_msg", "payload": {
                    "type": "thread_settings_applied", "thread_id": th.tid,
                    "thread_settings": {"model": model, "service_tier": th.tier or "default"}}})
                if th.last_model is not None and model != th.last_model:
                    t = self.model_change(th, t)
            th.lines.append({"timestamp": _iso(t), "type": "event_msg",
                             "payload": {"type": "task_started", "model_context_window": 258400}})
            th.lines.append({"timestamp": _iso(t), "type": "turn_context",
                             "payload": {"cwd": "/home/dev/proj", "approval_policy": "never", "model": model}})
            th.last_model = model
            th.lines.append({"timestamp": _iso(t), "type": "event_msg",
                             "payload": {"type": "user_message", "message": "go on", "images": []}})
            th.lines.append({"timestamp": _iso(t), "type": "event_msg",
                             "payload": {"type": "token_count", "info": None, "rate_limits": {"limit_id": "codex"}}})
            t += timedelta(seconds=rng.randint(1, 20))
            for j in range(rng.randint(1, 3)):
                t = self.call(th, t, model, restart=restart_first and i == 0 and j == 0)
            if rng.random() < 0.1:
                self.junk(th)
            th.lines.append({"timestamp": _iso(t), "type": "event_msg",
                             "payload": {"type": "task_complete", "last_agent_message": "done"}})
            t += timedelta(minutes=rng.randint(1, 120))
        return t

    def model_change(self, th: _Thread, t: datetime) -> datetime:
        """0.169 on a model change: the current token_count re-emitted, then a compaction call
        on the old model (th.last_model, whose turn_context is still the latest, or none yet in
        a fork's file)."""
        last = [x for x in th.lines if isinstance(x, dict) and x.get("type") == "event_msg"
                and x["payload"].get("type") == "token_count" and x["payload"]["info"]]
        if last:
            again = copy.deepcopy(last[-1])
            again["timestamp"] = _iso(t)
            th.lines.append(again)
        elif th.total != [0, 0, 0, 0, 0]:  # a fork: its parent's total at the fork point
            th.lines.append({"timestamp": _iso(t), "type": "event_msg", "payload": {"type": "token_count", "info": {
                "total_token_usage": self.usage(th, th.total), "last_token_usage": self.usage(th, [0] * 5),
                "model_context_window": 258400}}})
        return self.call(th, t + timedelta(milliseconds=40), th.last_model, compaction=True)

    def paginated_fork(self, parent: _Thread, t: datetime) -> tuple[_Thread, datetime]:
        """0.169: a new rollout holding none of the parent's lines; totals go on from its end."""
        child = self.new_thread(t, parent.style, parent.models, parent, version="0.169")
        child.total = list(parent.total)
        child.last_model = parent.last_model
        child.tier = parent.tier
        t = self.turns(child, t + timedelta(seconds=2), self.rng.randint(1, 2))
        return child, t

    def copied_fork(self, parent: _Thread, t: datetime) -> tuple[_Thread, datetime]:
        """0.130: own session_meta, then the parent's meta and every line re-stamped to the fork
        instant, then its own turns."""
        child = self.new_thread(t, parent.style, parent.models, parent, version="0.130")
        for x in parent.lines:
            if isinstance(x, dict):
                y = copy.deepcopy(x)
                y["timestamp"] = _iso(t)
                child.lines.append(y)
        child.total = list(parent.total)
        t = self.turns(child, t + timedelta(seconds=2), self.rng.randint(1, 2))
        return child, t

    def fork(self, parent: _Thread, t: datetime) -> tuple[_Thread, datetime]:
        """A new rollout copying the parent's lines up to one of its token_counts."""
        rng = self.rng
        if self.real:
            return (self.paginated_fork if parent.version == "0.169" else self.copied_fork)(parent, t)
        child = self.new_thread(t, parent.style, parent.models, parent)
        tcs = [i for i, x in enumerate(parent.lines)
               if isinstance(x, dict) and x["payload"].get("type") == "token_count" and x["payload"]["info"]]
        cut = rng.choice(tcs[-3:])
        rewrite = rng.random() < 0.5  # the real client writes the copies at fork time
        child.kept_times = not rewrite
        ct = t
        for x in parent.lines[:cut + 1]:
            if isinstance(x, dict):
                y = copy.deepcopy(x)
                if rewrite:
                    ct += timedelta(milliseconds=1)
                    y["timestamp"] = _iso(ct)
                child.lines.append(y)
        last = parent.lines[cut]["payload"]["info"]["total_token_usage"]
        child.total = [last.get("input_tokens", 0), last.get("cached_input_tokens", 0),
                       last.get("cache_write_input_tokens", 0), last.get("output_tokens", 0),
                       last.get("reasoning_output_tokens", 0)]
        t = self.turns(child, ct + timedelta(seconds=2), rng.randint(1, 2))
        return child, t

    def thread(self, t: datetime, style: str) -> None:
        rng = self.rng
        version = rng.choice(["0.169", "0.169", "0.130"]) if self.real else "old"
        if version == "0.169":
            style = "full"  # (0.169 writes every counter)
        th = self.new_thread(t, style, rng.sample(MODELS, rng.randint(1, 2)), version=version)
        t = self.turns(th, t + timedelta(seconds=1), rng.randint(1, 3))
        hazard = rng.random()
        if hazard < 0.45:
            child, ct = self.fork(th, t + timedelta(minutes=rng.randint(1, 300)))
            if rng.random() < 0.4:
                self.fork(child, ct + timedelta(minutes=5))
        if rng.random() < 0.4:
            # resumed days later into the same file (an old build now and then restarts the total)
            t += timedelta(days=rng.randint(1, 3), hours=rng.randint(0, 5))
            restart = rng.random() < 0.25 and not self.real  # (no real client was seen to restart)
            self.turns(th, t, rng.randint(1, 2), restart_first=restart)


def generate(root: Path | None, threads: int = 8, seed: int = 0, real_shapes: bool = False,
             pad: int = 0) -> History:
    """Write the history under `root` (a Codex home; None: keep it in memory only) and return
    it with its truth. `real_shapes`: only the shapes the real 0.169/0.130 clients write; `pad`:
    characters of an assistant answer's text written before each call's usage (size only)."""
    g = _Gen(seed, real_shapes, pad)
    styles = ("full", "std", "old")
    for i in range(threads):
        style = styles[i % 3] if i < 3 else g.rng.choice(styles)
        g.thread(T0 + timedelta(days=g.rng.randint(0, 3), minutes=g.rng.randint(0, 150)), style)
    # a live session's torn last line: a token_count still being written (not in the truth)
    live = g.threads[-1]
    live.lines.append(b'{"timestamp":"2026-03-20T10:00:00.000Z","type":"event_msg","payload":{"type":"token_count","in')
    # a fork that kept the original times, moved by the client to archived_sessions/ (its path
    # sorts before its parent's: their copies tie on time)
    for th in [x for x in g.threads if x.kept_times or (real_shapes and x.version == "0.169")][::2]:
        th.rel = "archived_sessions/" + th.rel.rsplit("/", 1)[1]  # (`codex archive`: flat)
    files: dict[str, bytes] = {}
    junk = 0
    for th in g.threads:
        if th.version == "0.169":  # each line the client writes has its ordinal
            n = 0
            for x in th.lines:
                if isinstance(x, dict):
                    x["ordinal"] = n
                    n += 1
        files[th.rel] = b"".join(x if isinstance(x, bytes) else orjson.dumps(x) + b"\n" for x in th.lines)
        junk += sum(1 for x in th.lines if isinstance(x, bytes) and x.endswith(b"\n"))
    # the same rollout under archived_sessions/ (the client moved it; both copies exist)
    arch = g.threads[0]
    files["archived_sessions/" + arch.rel.rsplit("/", 1)[1]] = files[arch.rel]
    junk += sum(1 for x in arch.lines if isinstance(x, bytes) and x.endswith(b"\n"))
    # a legacy pre-envelope rollout: no usage
    files["sessions/2026/01/04/rollout-2026-01-04T05-06-07-44444444-4444-4444-8444-444444444444.jsonl"] = (
        b'{"id":"44444444-4444-4444-8444-444444444444","timestamp":"2026-01-04T05:06:07.000Z"}\n'
        b'{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}\n')
    if root is not None:
        for rel, data in files.items():
            p = Path(root) / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
    return History(Path(root) if root is not None else None, files, g.calls, junk, [live.rel], g.tools, g.results)
