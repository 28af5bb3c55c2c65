"""Claude Code `claude -p --output-format stream-json --verbose`.

Counting rules (DESIGN §3, reference/stream-formats.md §A; measured with 2.1.328):

* One API message arrives as several `assistant` lines with the same `message.id`; their
  usage figures are streaming snapshots (output_tokens too low). Per message id each field
  keeps its max; per model the running sum over distinct message ids is the turn's
  cumulative *provisional* observation on the stream (attempt, turn, model).
* `result` closes the turn: its per-model figures for *this run* are the **final receipt**
  of each model's stream (with the model's cost). Which figures are "this run's":
    1. `model_usage_since_last_result` (per model, per run) when present;
    2. else `modelUsage` (per model): cumulative over the session after `--resume`, so the
       session's previous cumulative figures (sessions.py) are subtracted; a resumed
       session with no stored figures is recorded with start_known=false (a gap);
    3. else `result.usage` (this run's, main model only) with `total_cost_usd` (cumulative
       after a resume: the stored previous total is subtracted, else the cost is unknown).
  A run killed before `result` keeps its provisional totals (no final receipt).
* Outcome: `is_error` first, then `subtype` (`success` -> completed; `error_max_turns`,
  `error_during_execution`, ... -> failed).
* `system/api_retry` lines are counted (`api_retries` on the result event).
* Each `tool_result` block (in `user` lines) gets its status (ledger.records.verdict:
  `error` when `is_error`, `semantic-error` for an MCP tool's error envelope, else `ok`),
  written as a `conversation` event of type `tool_result`.
* Verification: exactly one `result`, and nothing but `system` lines after it.
* Token shape: input_tokens = uncached input; cache_read_tokens = cache_read_input_tokens;
  cache_write_tokens = cache_creation_input_tokens (+ the 5m/1h split when it accounts for
  all of it); total_input_tokens = input + cache read + cache write.
"""

from __future__ import annotations

import re
from typing import Any

from ledger.launch.adapters.base import Adapter, as_cost, as_count, option_value, with_total_input
from ledger.records.verdict import tool_status

SYNTHETIC_MODEL = "<synthetic>"  # Claude Code's placeholder for locally made messages
_LINE_FIELDS = (("input_tokens", "input_tokens"), ("cache_read_input_tokens", "cache_read_tokens"),
                ("cache_creation_input_tokens", "cache_write_tokens"), ("output_tokens", "output_tokens"))


def _split(total: int | None, m5: int | None, h1: int | None) -> tuple[int | None, int | None]:
    """The 5m/1h cache-write split, only when it accounts for every cache write."""
    if total is None or m5 is None or h1 is None or m5 + h1 != total:
        return None, None
    return m5, h1


def counters_from_api_usage(u: dict[str, Any]) -> dict[str, int | None]:
    """Anthropic snake_case usage (assistant lines, result.usage) -> ledger counters."""
    write = as_count(u.get("cache_creation_input_tokens"))
    cc = u.get("cache_creation") if isinstance(u.get("cache_creation"), dict) else {}
    m5, h1 = _split(write, as_count(cc.get("ephemeral_5m_input_tokens")),
                    as_count(cc.get("ephemeral_1h_input_tokens")))
    c: dict[str, int | None] = {
        "input_tokens": as_count(u.get("input_tokens")),
        "cache_read_tokens": as_count(u.get("cache_read_input_tokens")),
        "cache_write_tokens": write,
        "cache_write_5m_tokens": m5,
        "cache_write_1h_tokens": h1,
        "output_tokens": as_count(u.get("output_tokens")),
    }
    details = u.get("output_tokens_details")
    if isinstance(details, dict) and as_count(details.get("thinking_tokens")) is not None:
        c["reasoning_tokens"] = as_count(details.get("thinking_tokens"))
    return c


def counters_from_model_usage(u: dict[str, Any]) -> dict[str, int | None]:
    """camelCase `modelUsage[model]` -> ledger counters."""
    write = as_count(u.get("cacheCreationInputTokens"))
    m5, h1 = _split(write, as_count(u.get("cacheCreationEphemeral5mInputTokens")),
                    as_count(u.get("cacheCreationEphemeral1hInputTokens")))
    return {
        "input_tokens": as_count(u.get("inputTokens")),
        "cache_read_tokens": as_count(u.get("cacheReadInputTokens")),
        "cache_write_tokens": write,
        "cache_write_5m_tokens": m5,
        "cache_write_1h_tokens": h1,
        "output_tokens": as_count(u.get("outputTokens")),
        "reasoning_tokens": as_count(u.get("thinkingTokens")),
        "context_window_tokens": as_count(u.get("contextWindow")),
    }


_CUMULATIVE_KEYS = ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens",
                    "cacheCreationEphemeral5mInputTokens", "cacheCreationEphemeral1hInputTokens",
                    "thinkingTokens", "costUSD")


def _subtract_model_usage(now: dict[str, Any], before: dict[str, Any]) -> dict[str, Any] | None:
    """now - before for the additive fields of one model's modelUsage (None if it went down)."""
    out = dict(now)
    for k in _CUMULATIVE_KEYS:
        a, b = now.get(k), before.get(k)
        if a is None or b is None:
            continue
        if k == "costUSD":
            a_c, b_c = as_cost(a), as_cost(b)
            if a_c is None or b_c is None or a_c < b_c:
                return None
            out[k] = a_c - b_c
        else:
            a_i, b_i = as_count(a), as_count(b)
            if a_i is None or b_i is None or a_i < b_i:
                return None
            out[k] = a_i - b_i
    return out


def _merge_cumulative(stored: dict[str, Any] | None, model_usage: dict[str, Any] | None,
                      total_cost: float | None) -> dict[str, Any]:
    """The session's new cumulative figures: cumulative counters only grow, so keep the max
    per field (a failed turn that reports `modelUsage: {}` / cost 0 must not reset them)."""
    before = (stored or {}).get("modelUsage") if isinstance((stored or {}).get("modelUsage"), dict) else {}
    merged: dict[str, Any] = {m: dict(u) for m, u in before.items() if isinstance(u, dict)}
    for m, u in (model_usage or {}).items():
        if not isinstance(u, dict):
            continue
        old = merged.get(m, {})
        new = dict(u)
        for k in _CUMULATIVE_KEYS:
            a, b = old.get(k), u.get(k)
            if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a > b:
                new[k] = a
        merged[m] = new
    costs = [c for c in (as_cost((stored or {}).get("total_cost_usd")), total_cost) if c is not None]
    return {"modelUsage": merged, "total_cost_usd": max(costs) if costs else None}


_DATE_SUFFIX = re.compile(r"-(?:20\d{6}|latest)$|\[[^\]]*\]$")


def _base_model(model: str) -> str:
    """`claude-sonnet-4-5-20250929` / `claude-sonnet-4-5[1m]` -> `claude-sonnet-4-5`."""
    prev = None
    while prev != model:
        prev, model = model, _DATE_SUFFIX.sub("", model)
    return model


def _resume_flag(argv: list[str]) -> bool:
    for a in argv[1:]:
        if a in ("--resume", "-r", "--continue", "-c") or a.startswith("--resume="):
            return True
    return False


class ClaudeAdapter(Adapter):
    harness = "claude"
    provider = "anthropic"
    terminal_types = ("result",)
    reports_api_retries = True  # `system/api_retry` lines
    value_options = frozenset({
        "--output-format", "--input-format", "--model", "--resume", "-r", "--max-turns",
        "--system-prompt", "--append-system-prompt", "--permission-mode", "--session-id",
        "--fallback-model", "--settings", "--mcp-config", "--agents", "--max-budget-usd",
        "--json-schema", "--setting-sources", "--permission-prompt-tool", "--agent",
        "--system-prompt-file", "--append-system-prompt-file", "--betas", "--debug-file"})
    variadic_options = frozenset({"--allowedTools", "--allowed-tools", "--disallowedTools", "--disallowed-tools",
                                  "--add-dir", "--tools", "--plugin-dir", "--mcp-config", "--file"})

    @classmethod
    def stream_format_ok(cls, argv: list[str]) -> bool:
        # `--output-format stream-json` (which needs `--verbose` with `-p`)
        return option_value(argv, ("--output-format",)) == "stream-json"

    # `claude SUBCOMMAND`: not a session (claude --help lists them)
    SUBCOMMANDS = frozenset({"mcp", "config", "doctor", "update", "install", "migrate-installer",
                             "setup-token", "plugin", "auth", "agents"})

    @classmethod
    def wants_terminal(cls, argv: list[str]) -> bool:
        args = argv[1:]
        if any(a in ("-p", "--print", "-h", "--help", "-v", "--version") for a in args):
            return False
        if cls.stream_format_ok(argv):
            return False
        pos = cls.positionals(argv)
        return not (pos and pos[0] in cls.SUBCOMMANDS)

    @classmethod
    def model_from_argv(cls, argv: list[str]) -> str | None:
        return option_value(argv, ("--model",))

    @classmethod
    def prompt_from_argv(cls, argv: list[str]) -> tuple[str | None, str | None]:
        system = task = None
        for i, a in enumerate(argv):
            if a in ("--system-prompt", "--append-system-prompt") and i + 1 < len(argv):
                system = argv[i + 1]
            if a in ("-p", "--print") and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                task = argv[i + 1]
        if task is None:
            task = cls._last_positional(cls.positionals(argv))
        return system, task

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.turn = 1
        self.init_model: str | None = None
        self._msgs: dict[str, dict[str, Any]] = {}          # message id -> {model, fields}
        self._running: dict[str | None, dict[str, int]] = {}  # model -> running sums
        self._peak: dict[str | None, int] = {}
        self._dirty: set[str | None] = set()
        self._pending_tools: dict[str, str] = {}           # tool_use id -> name
        self._pending_skills: dict[str, str] = {}          # tool_use id -> skill name
        self.skills_ok: list[str] = []
        self.after_result_violation = False
        self.resume_flag = _resume_flag(self.argv)
        self._last_text: str | None = None

    # -- dispatch --------------------------------------------------------------------------

    def feed(self, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        if self.terminal_count and kind != "system" and not self.after_result_violation:
            # -p prints exactly one result, last; anything but system lines after it is suspect
            if kind != "result":
                self.after_result_violation = True
                self.note(f"a {kind!r} event after the result")
        if kind == "assistant":
            self._assistant(obj)
        elif kind == "user":
            self._user(obj)
        elif kind == "system":
            self._system(obj)
        elif kind == "result":
            self._result(obj)
        if "session_id" in obj and self.session_id is None:
            self.observe_session(obj.get("session_id"))

    def _system(self, obj: dict[str, Any]) -> None:
        sub = obj.get("subtype")
        if sub == "init":
            self.observe_session(obj.get("session_id"))
            if isinstance(obj.get("model"), str) and obj["model"]:
                self.init_model = obj["model"]
        elif sub == "api_retry":
            self.stats.api_retries += 1
            status = obj.get("error_status")
            err = obj.get("error")
            self.stats.last_retry = " ".join(str(x) for x in (status, err) if x is not None) or "retry"
            if len(self.stats.retry_log) < 100:
                self.stats.retry_log.append(self.stats.last_retry)
            self.stats.changed = True

    def _assistant(self, obj: dict[str, Any]) -> None:
        msg = obj.get("message")
        if not isinstance(msg, dict):
            return
        model = msg.get("model") if isinstance(msg.get("model"), str) else None
        if model == SYNTHETIC_MODEL:
            model = None
        mid = msg.get("id")
        usage = msg.get("usage")
        if model is not None or (isinstance(usage, dict) and mid):
            self._usage_line(mid if isinstance(mid, str) else None, model or self.init_model or self.model,
                             usage if isinstance(usage, dict) else None, synthetic=msg.get("model") == SYNTHETIC_MODEL)
        content = msg.get("content")
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text":
                text = block.get("text")
                if isinstance(text, str) and text:
                    self.emit_text(text)
                    if obj.get("parent_tool_use_id") is None:
                        self._last_text = text
            elif btype in ("tool_use", "server_tool_use"):
                name = str(block.get("name") or "unknown")
                inp = block.get("input")
                self.emit_tool(name, inp)
                tid = block.get("id")
                if isinstance(tid, str):
                    self._pending_tools[tid] = name
                    if name == "Skill" and isinstance(inp, dict):
                        skill = inp.get("skill") or inp.get("command") or inp.get("name")
                        if isinstance(skill, str):
                            self._pending_skills[tid] = skill

    def _usage_line(self, mid: str | None, model: str | None, usage: dict[str, Any] | None,
                    synthetic: bool) -> None:
        if synthetic or usage is None:
            return
        key = mid or f"anon-{len(self._msgs)}"
        rec = self._msgs.get(key)
        if rec is None:
            rec = self._msgs[key] = {"model": model, "f": {}}
            self.stats.model_calls += 1
            self.stats.changed = True
        model = rec["model"]
        f = rec["f"]
        running = self._running.get(model)
        if running is None:
            running = self._running[model] = {}
        changed = False
        for src, name in _LINE_FIELDS:  # hot path: one line of a fast stream
            v = usage.get(src)
            if v.__class__ is not int or v < 0:
                continue
            prev = f.get(name)
            if prev is None or v > prev:
                f[name] = v
                running[name] = running.get(name, 0) + v - (prev or 0)
                changed = True
        cc = usage.get("cache_creation")
        if cc.__class__ is dict:
            for src, name in (("ephemeral_5m_input_tokens", "cache_write_5m_tokens"),
                              ("ephemeral_1h_input_tokens", "cache_write_1h_tokens")):
                v = cc.get(src)
                if v.__class__ is not int or v < 0:
                    continue
                prev = f.get(name)
                if prev is None or v > prev:
                    f[name] = v
                    running[name] = running.get(name, 0) + v - (prev or 0)
                    changed = True
        if not changed:
            return
        msg_in = f.get("input_tokens", 0) + f.get("cache_read_tokens", 0) + f.get("cache_write_tokens", 0)
        if msg_in > self._peak.get(model, 0):
            self._peak[model] = msg_in
        self._dirty.add(model)

    def flush(self) -> None:
        """Write the provisional cumulative observation of every model that changed.

        Observations are cumulative, so writing only the latest one per batch of lines (the
        runner flushes after each chunk read from the pipe, and before the result) loses
        nothing and keeps a fast stream cheap to record."""
        if not self._dirty:
            return
        turn_key = f"turn-{self.turn}"
        for model in sorted(self._dirty, key=lambda m: m or ""):
            self.book(turn_key, model).observe(self._provisional(model))
        self._dirty.clear()

    def _provisional(self, model: str | None) -> dict[str, int | None]:
        c: dict[str, int | None] = dict(self._running.get(model, {}))
        # the 5m/1h split is kept only while it accounts for all cache writes
        m5, h1 = _split(c.get("cache_write_tokens"), c.get("cache_write_5m_tokens"), c.get("cache_write_1h_tokens"))
        c["cache_write_5m_tokens"], c["cache_write_1h_tokens"] = m5, h1
        with_total_input(c)
        if model in self._peak:
            c["peak_input_tokens"] = self._peak[model]
        return c

    def _user(self, obj: dict[str, Any]) -> None:
        msg = obj.get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, list):
            return
        meta = obj.get("tool_use_result")
        meta_failed = isinstance(meta, dict) and meta.get("success") is False
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            tid = block.get("tool_use_id")
            if not isinstance(tid, str):
                continue
            name = self._pending_tools.pop(tid, None)
            failed = block.get("is_error") is True or meta_failed
            if name is not None:
                self.emit_tool_result(f"turn-{self.turn}", tid, name, tool_status(name, failed, block.get("content")))
            skill = self._pending_skills.pop(tid, None)
            if skill is not None and not failed:
                self.skills_ok.append(skill)

    # -- the result -----------------------------------------------------------------------

    def _result(self, obj: dict[str, Any]) -> None:
        self.flush()
        self.terminal_count += 1
        if self.terminal_count > 1:
            self.note("more than one result event")
        turn_key = f"turn-{self.turn}"
        is_error = obj.get("is_error") is True
        subtype = obj.get("subtype")
        completed = not is_error and subtype == "success"
        self.stream_outcome = "completed" if completed else "failed"
        text = obj.get("result") if isinstance(obj.get("result"), str) else None
        if text is None and completed:
            text = self._last_text
        if completed:
            self.final_answer = text
        elif is_error and isinstance(obj.get("result"), str):
            self.error_message = obj["result"]
        errors = obj.get("errors")
        if self.error_message is None and isinstance(errors, list) and errors:
            self.error_message = "; ".join(str(e) for e in errors[:3])
        self.observe_session(obj.get("session_id"))
        self._final_receipts(obj, turn_key)
        self.emit_final_answer(turn_key, text, completed)
        self.result_fields.update({
            "provider_subtype": subtype, "provider_is_error": is_error,
            "num_turns": obj.get("num_turns") if isinstance(obj.get("num_turns"), int) else None,
            "api_error_status": obj.get("api_error_status"),
            "terminal_reason": obj.get("terminal_reason"),
        })
        self.turn += 1
        self._msgs = {}
        self._running = {}
        self._peak = {}

    def _stored(self) -> dict[str, Any] | None:
        if self.sessions is None or not self.session_id:
            return None
        entry = self.sessions.get(self.harness, self.session_id)
        return entry.get("cumulative") if entry else None

    def _final_receipts(self, obj: dict[str, Any], turn_key: str) -> None:
        since = obj.get("model_usage_since_last_result")
        cumulative = obj.get("modelUsage") if isinstance(obj.get("modelUsage"), dict) else None
        total_cost = as_cost(obj.get("total_cost_usd"))
        stored = self._stored()
        resumed = stored is not None or self.resume_flag
        start_known = True
        basis: str
        per_model: dict[str, Any] | None = None
        if isinstance(since, dict) and since:
            per_model, basis = since, "model_usage_since_last_result"
        elif cumulative:
            if stored is not None and isinstance(stored.get("modelUsage"), dict):
                per_model, basis = {}, "modelUsage minus the session's previous cumulative"
                prev_models = stored["modelUsage"]
                for m, u in cumulative.items():
                    if not isinstance(u, dict):
                        continue
                    before = prev_models.get(m)
                    diff = _subtract_model_usage(u, before) if isinstance(before, dict) else u
                    if diff is None:
                        diff, start_known = u, False
                    per_model[m] = diff
            elif resumed:
                per_model, basis, start_known = None, "result.usage (resumed session, no previous figures)", True
            else:
                per_model, basis = cumulative, "modelUsage"
        else:
            basis = "result.usage"
        receipts: dict[str | None, tuple[dict[str, int | None], float | None]] = {}
        if per_model:
            for m, u in per_model.items():
                if isinstance(u, dict):
                    receipts[m] = (counters_from_model_usage(u), as_cost(u.get("costUSD")))
        else:
            usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
            if usage is not None:
                model = self._main_model()
                cost = total_cost
                if resumed:
                    prev_cost = as_cost(stored.get("total_cost_usd")) if stored else None
                    cost = (total_cost - prev_cost if total_cost is not None and prev_cost is not None
                            and total_cost >= prev_cost else None)
                receipts[model] = (counters_from_api_usage(usage), cost)
        receipts = self._align_models(receipts)
        for model, (counters, cost) in receipts.items():
            c = dict(counters)
            with_total_input(c)
            if model in self._peak:
                c["peak_input_tokens"] = self._peak[model]
            self.book(turn_key, model).observe(c, cost=cost, final=True, start_known=start_known)
        self.result_fields["charged_from"] = basis
        if stored is not None and basis.startswith("modelUsage minus"):
            self.result_fields["charged_since"] = {"total_cost_usd": stored.get("total_cost_usd")}
        self.result_fields["provider_cumulative"] = {"total_cost_usd": total_cost, "modelUsage": cumulative}
        if self.sessions is not None and self.session_id and (cumulative or total_cost):
            self.sessions.put(self.harness, self.session_id,
                              _merge_cumulative(stored, cumulative, total_cost), self.run_id)

    def _align_models(self, receipts: dict[str | None, Any]) -> dict[str | None, Any]:
        """Close each provisional stream with its model's receipt even when the two spell the
        model differently (an alias vs a dated id): one stream per model, never two."""
        provisional = [m for m in self._running if m is not None and m not in receipts]
        if not provisional:
            return receipts
        out = dict(receipts)
        for model in provisional:
            matches = [r for r in out if r is not None and r not in self._running
                       and _base_model(r) == _base_model(model)]
            if len(matches) == 1:
                out[model] = out.pop(matches[0])
        return out

    def _main_model(self) -> str | None:
        """The model that answered most messages this turn, else init's, else the launch's."""
        counts: dict[str, int] = {}
        for rec in self._msgs.values():
            if rec["model"]:
                counts[rec["model"]] = counts.get(rec["model"], 0) + 1
        if counts:
            return max(counts, key=lambda m: counts[m])
        return self.init_model or self.model

    # -- end --------------------------------------------------------------------------------

    def finish(self, returncode: int | None, stopped_by: str | None) -> None:
        self.flush()
        if self.expect_skill is not None:
            want = self.expect_skill.lstrip("/")
            self.skill_invoked = any(s.lstrip("/") == want or s.lstrip("/").split(":")[-1] == want
                                     for s in self.skills_ok)
        if self.stats.api_retries:
            self.result_fields["api_retries"] = self.stats.api_retries
