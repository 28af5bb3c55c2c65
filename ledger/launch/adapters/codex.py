"""Codex CLI `codex exec --json` (and `codex exec resume ... --json`).

Counting rules (DESIGN §3, reference/stream-formats.md §C.1):

* `turn.completed.usage` is the **thread's** cumulative total (after `exec resume` it
  includes the earlier turns). The run is charged the delta against the thread's previous
  total, remembered in the sessions store (`$home/sessions/codex/<thread>.json`). A resumed
  thread with no stored total is recorded whole with start_known=false (an evidence gap:
  the run's own share is not known).
* OpenAI-style usage counts cached input inside input: input_tokens = input_tokens -
  cached_input_tokens (- cache_write_input_tokens, also a part of input);
  cache_read_tokens = cached_input_tokens; cache_write_tokens = cache_write_input_tokens;
  reasoning_output_tokens -> reasoning_tokens (already inside output_tokens).
* No model and no cost in the stream: the model comes from `-m/--model` (or `--model` of
  ledger); the cost is estimated later from a price table.
* `thread.started.thread_id` is the provider session. Outcome `failed` on `turn.failed`.
* Verification: exactly one `turn.completed` / `turn.failed`.
"""

from __future__ import annotations

from typing import Any

from ledger.launch.adapters.base import Adapter, as_count, option_value

_RAW_KEYS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens",
             "reasoning_output_tokens")


def counters_from_codex_usage(u: dict[str, Any]) -> dict[str, int | None]:
    """A (delta of) Codex usage -> ledger counters."""
    inp = as_count(u.get("input_tokens"))
    cached = as_count(u.get("cached_input_tokens"))
    write = as_count(u.get("cache_write_input_tokens"))
    uncached = None
    if inp is not None:
        uncached = inp - (cached or 0) - (write or 0)
        if uncached < 0:
            uncached = None
    return {
        "input_tokens": uncached,
        "cache_read_tokens": cached,
        "cache_write_tokens": write,
        "output_tokens": as_count(u.get("output_tokens")),
        "reasoning_tokens": as_count(u.get("reasoning_output_tokens")),
        "total_input_tokens": inp,
    }


def _is_resume(argv: list[str]) -> bool:
    args = argv[1:]
    return "exec" in args and "resume" in args[args.index("exec") + 1:]


class CodexAdapter(Adapter):
    harness = "codex"
    provider = "openai"
    terminal_types = ("turn.completed/turn.failed",)
    value_options = frozenset({
        "-m", "--model", "-c", "--config", "-p", "--profile", "-s", "--sandbox", "-C", "--cd",
        "--output-schema", "-o", "--output-last-message", "-i", "--image", "--color",
        "-a", "--ask-for-approval", "--add-dir", "--local-provider", "--enable", "--disable"})

    @classmethod
    def stream_format_ok(cls, argv: list[str]) -> bool:
        # `codex exec ... --json` (`e` is exec's alias; --experimental-json its old name)
        args = argv[1:]
        return ("exec" in args or "e" in args) and ("--json" in args or "--experimental-json" in args)

    # `codex SUBCOMMAND` that is no TUI session (`codex --help`); `resume` / `fork` are
    SUBCOMMANDS = frozenset({"exec", "e", "review", "login", "logout", "mcp", "mcp-server", "app-server",
                             "app", "completion", "sandbox", "debug", "apply", "a", "cloud", "features",
                             "help", "agents", "proto"})

    @classmethod
    def wants_terminal(cls, argv: list[str]) -> bool:
        if any(a in ("-h", "--help", "-V", "--version") for a in argv[1:]):
            return False
        pos = cls.positionals(argv)
        return not (pos and pos[0] in cls.SUBCOMMANDS)

    @classmethod
    def model_from_argv(cls, argv: list[str]) -> str | None:
        value = option_value(argv, ("-m", "--model"))
        for i, a in enumerate(argv[1:], start=1):  # -c model=NAME overrides the config
            if a in ("-c", "--config") and i + 1 < len(argv):
                kv = argv[i + 1].replace(" ", "")
                if kv.startswith("model="):
                    value = kv.split("=", 1)[1].strip("\"'")
        return value

    @classmethod
    def prompt_from_argv(cls, argv: list[str]) -> tuple[str | None, str | None]:
        positional = [p for p in cls.positionals(argv) if p not in ("exec", "e", "resume")]
        if "resume" in argv and len(positional) >= 2:
            positional = positional[1:]  # the first positional of `resume` is the thread id
        return None, cls._last_positional(positional)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.turn = 0
        self._seen_items: set[str] = set()
        self._last_message: str | None = None
        self.resume_flag = _is_resume(self.argv)

    def feed(self, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        if kind == "thread.started":
            self.observe_session(obj.get("thread_id"))
        elif kind == "turn.started":
            self.turn += 1
            self.stats.model_calls += 1
            self.stats.changed = True
        elif kind in ("item.started", "item.updated", "item.completed"):
            item = obj.get("item")
            if isinstance(item, dict):
                self._item(kind, item)
        elif kind == "turn.completed":
            self.terminal_count += 1
            self.stream_outcome = "completed" if self.stream_outcome != "failed" else "failed"
            usage = obj.get("usage")
            if isinstance(usage, dict):
                self._usage(usage)
            self._close_turn(completed=True)
        elif kind == "turn.failed":
            self.terminal_count += 1
            self.stream_outcome = "failed"
            err = obj.get("error")
            if isinstance(err, dict) and isinstance(err.get("message"), str):
                self.error_message = err["message"]
            self._close_turn(completed=False)
        elif kind == "error":
            if isinstance(obj.get("message"), str) and self.error_message is None:
                self.error_message = obj["message"]

    def _turn_key(self) -> str:
        return f"turn-{max(self.turn, 1)}"

    def _item(self, kind: str, item: dict[str, Any]) -> None:
        itype = item.get("type")
        iid = item.get("id")
        first = isinstance(iid, str) and iid not in self._seen_items
        if isinstance(iid, str):
            self._seen_items.add(iid)
        if itype == "agent_message":
            if kind == "item.completed" and isinstance(item.get("text"), str):
                self._last_message = item["text"]
                self.emit_text(item["text"])
            return
        if not first:
            return
        if itype == "command_execution":
            self.emit_tool("command_execution", {"command": item.get("command")})
        elif itype == "file_change":
            changes = item.get("changes")
            paths = [c.get("path") for c in changes if isinstance(c, dict)] if isinstance(changes, list) else []
            self.emit_tool("file_change", {"path": " ".join(str(p) for p in paths)})
        elif itype == "mcp_tool_call":
            self.emit_tool(f"mcp__{item.get('server')}__{item.get('tool')}", item.get("arguments"))
        elif itype == "web_search":
            self.emit_tool("web_search", {"query": item.get("query")})
        elif itype == "collab_tool_call":
            self.emit_tool(f"collab__{item.get('tool')}", {"prompt": item.get("prompt")})

    def _usage(self, usage: dict[str, Any]) -> None:
        stored = None
        if self.sessions is not None and self.session_id:
            entry = self.sessions.get(self.harness, self.session_id)
            stored = entry.get("cumulative") if entry else None
        raw = {k: as_count(usage.get(k)) for k in _RAW_KEYS}
        start_known = True
        if stored is not None:
            delta: dict[str, Any] = {}
            for k, v in raw.items():
                before = as_count(stored.get(k))
                if v is None:
                    continue
                if before is None:
                    before = 0 if k in ("cache_write_input_tokens", "reasoning_output_tokens") else None
                if before is None or v < before:
                    start_known = False
                    delta[k] = v
                else:
                    delta[k] = v - before
            self.result_fields["charged_since"] = {k: stored.get(k) for k in _RAW_KEYS if k in stored}
            self.result_fields["charged_from"] = "turn.completed.usage minus the thread's previous total"
        else:
            delta = {k: v for k, v in raw.items() if v is not None}
            if self.resume_flag:
                start_known = False
                self.result_fields["charged_from"] = "turn.completed.usage (resumed thread, no previous total)"
            else:
                self.result_fields["charged_from"] = "turn.completed.usage"
        self.result_fields["provider_cumulative"] = {k: v for k, v in raw.items() if v is not None}
        counters = counters_from_codex_usage(delta)
        self.book(self._turn_key(), self.model).observe(counters, final=True, start_known=start_known)
        if self.sessions is not None and self.session_id:
            merged = {k: v for k, v in raw.items() if v is not None}
            for k, v in (stored or {}).items():  # cumulative totals only grow: keep the max
                if isinstance(v, int) and v > merged.get(k, -1):
                    merged[k] = v
            self.sessions.put(self.harness, self.session_id, merged, self.run_id)

    def _close_turn(self, completed: bool) -> None:
        text = self._last_message if completed else None
        if completed:
            self.final_answer = text
        self.emit_final_answer(self._turn_key(), text, completed)

    def finish(self, returncode: int | None, stopped_by: str | None) -> None:
        if self.expect_skill is not None:
            self.skill_invoked = False
