"""Gemini CLI `gemini -p ... --output-format stream-json`.

Counting rules (reference/stream-formats.md §D): usage is one aggregate, in `result.stats`,
reported once per process; it is the final receipt.

* v0.34+ `stats.models` gives one entry per model -> one stream per model; older versions
  give only the aggregate -> one stream for `init.model` (unknown when it is "auto" and no
  model was given on the command line).
* `input_tokens` counts cached input: input_tokens (ledger) = `input` when given, else
  input_tokens - cached; cache_read_tokens = `cached` (unknown in the v0.11 shape).
* `output_tokens` excludes thoughts; thoughts are reconstructed as total_tokens -
  input_tokens - output_tokens (this remainder also holds tool-use prompt tokens, which
  Gemini CLI does not export separately) and reported as reasoning_tokens, included in
  output_tokens (ledger's output includes reasoning).
* No cost in the stream. `init.session_id` is the provider session.
* Outcome from `result.status`. Verification: exactly one `result`.
"""

from __future__ import annotations

from typing import Any

from ledger.launch.adapters.base import Adapter, as_count, option_value, with_total_input


def counters_from_gemini_stats(s: dict[str, Any]) -> dict[str, int | None]:
    prompt = as_count(s.get("input_tokens"))
    cached = as_count(s.get("cached"))
    uncached = as_count(s.get("input"))
    if uncached is None and prompt is not None:
        uncached = prompt - cached if cached is not None and cached <= prompt else (prompt if cached is None else None)
    out = as_count(s.get("output_tokens"))
    total = as_count(s.get("total_tokens"))
    thoughts = None
    if total is not None and prompt is not None and out is not None and total >= prompt + out:
        thoughts = total - prompt - out
    c: dict[str, int | None] = {
        "input_tokens": uncached,
        "cache_read_tokens": cached,
        "output_tokens": out + thoughts if out is not None and thoughts is not None else out,
        "reasoning_tokens": thoughts,
    }
    with_total_input(c)
    if prompt is not None and cached is None:
        c["total_input_tokens"] = prompt
    return c


class GeminiAdapter(Adapter):
    harness = "gemini"
    provider = "google"
    terminal_types = ("result",)
    value_options = frozenset({
        "-m", "--model", "--output-format", "-o", "--approval-mode", "--include-directories",
        "--allowed-tools", "--allowed-mcp-server-names", "-e", "--extensions", "--resume", "-r",
        "--telemetry-target", "--proxy"})

    @classmethod
    def stream_format_ok(cls, argv: list[str]) -> bool:
        return option_value(argv, ("--output-format", "-o")) == "stream-json"

    @classmethod
    def wants_terminal(cls, argv: list[str]) -> bool:
        args = argv[1:]
        if any(a in ("-p", "--prompt", "-h", "--help", "-v", "--version") or a.startswith("--prompt=")
               for a in args):
            return False
        return not cls.stream_format_ok(argv) and option_value(argv, ("--output-format", "-o")) in (None, "text")

    @classmethod
    def model_from_argv(cls, argv: list[str]) -> str | None:
        return option_value(argv, ("-m", "--model"))

    @classmethod
    def prompt_from_argv(cls, argv: list[str]) -> tuple[str | None, str | None]:
        task = None
        for i, a in enumerate(argv):
            if a in ("-p", "--prompt", "-i", "--prompt-interactive") and i + 1 < len(argv):
                task = argv[i + 1]
            elif a.startswith("--prompt="):
                task = a.split("=", 1)[1]
        if task is None:
            task = cls._last_positional(cls.positionals(argv))
        return None, task

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.init_model: str | None = None
        self._answer_parts: list[str] = []
        self._tools: dict[str, str] = {}
        self.warnings: list[str] = []

    def feed(self, obj: dict[str, Any]) -> None:
        kind = obj.get("type")
        if kind == "init":
            self.observe_session(obj.get("session_id"))
            if isinstance(obj.get("model"), str) and obj["model"] and obj["model"] != "auto":
                self.init_model = obj["model"]
        elif kind == "message":
            if obj.get("role") == "assistant" and isinstance(obj.get("content"), str):
                if obj.get("delta") is True:
                    self._answer_parts.append(obj["content"])
                else:
                    self._flush_text()
                    self._answer_parts = [obj["content"]]
            elif obj.get("role") == "user":
                self._flush_text()
                self.stats.model_calls += 1
                self.stats.changed = True
        elif kind == "tool_use":
            self._flush_text()
            name = str(obj.get("tool_name") or "unknown")
            self.emit_tool(name, obj.get("parameters"))
            if isinstance(obj.get("tool_id"), str):
                self._tools[obj["tool_id"]] = name
        elif kind == "tool_result":
            self._tools.pop(str(obj.get("tool_id")), None)
        elif kind == "error":
            msg = obj.get("message")
            if isinstance(msg, str):
                self.warnings.append(msg)
        elif kind == "result":
            self._result(obj)

    def _flush_text(self) -> None:
        # text before a tool call is not the final answer (0.61 streams deltas, then tool_use)
        if self._answer_parts:
            self.emit_text("".join(self._answer_parts))
            self._answer_parts = []

    def _result(self, obj: dict[str, Any]) -> None:
        self.terminal_count += 1
        if self.terminal_count > 1:
            self.note("more than one result event")
        completed = obj.get("status") == "success"
        self.stream_outcome = "completed" if completed else "failed"
        text = "".join(self._answer_parts) if self._answer_parts else None
        self._flush_text()
        self._answer_parts = []
        err = obj.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            self.error_message = err["message"]
        stats = obj.get("stats")
        turn_key = f"turn-{self.terminal_count}"
        if isinstance(stats, dict):
            models = stats.get("models")
            if isinstance(models, dict) and models:
                for m, s in models.items():
                    if isinstance(s, dict):
                        self.book(turn_key, m).observe(counters_from_gemini_stats(s), final=True)
            else:
                model = self.model or self.init_model
                self.book(turn_key, model).observe(counters_from_gemini_stats(stats), final=True)
            if isinstance(stats.get("tool_calls"), int):
                self.result_fields["provider_tool_calls"] = stats["tool_calls"]
        if completed:
            self.final_answer = text
        self.emit_final_answer(turn_key, text, completed)
        self.result_fields["provider_status"] = obj.get("status")
        if self.warnings:
            self.result_fields["provider_warnings"] = [self.redactor.text(w) for w in self.warnings[:10]]

    def finish(self, returncode: int | None, stopped_by: str | None) -> None:
        if self.expect_skill is not None:
            self.skill_invoked = False
