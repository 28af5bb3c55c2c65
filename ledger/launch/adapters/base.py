"""What every stream adapter shares: usage-stream books, live stats, verification notes.

An adapter turns one harness's parsed stdout objects into run-record events through a
*sink* (a `RunCapture`, or anything with the same `emit` / `start_attempt` /
`usage_stream` / `provider_session` methods). Stream identity (DESIGN §3): one usage
stream per (attempt, turn, model); every observation written to a stream is that stream's
cumulative total so far, so the reader's "max per stream, sum across streams" rule gives
the run's usage.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Protocol, Sequence

import orjson

from ledger.launch.redact import Redactor
from ledger.launch.sessions import SessionStore
# the counters and the max-across-streams rule are the record format's (one home)
from ledger.records.model import ALL_INT_COUNTERS as COUNTERS, MAX_ACROSS_STREAMS as MAX_ACROSS

SUMMARY_CHARS = 240


class Sink(Protocol):  # pragma: no cover - typing only
    def emit(self, type: str, **fields: Any) -> int: ...
    def start_attempt(self, provider: str, model: str | None, account_id: str | None = None) -> str: ...
    def usage_stream(self, *, provider: str, model: str | None, attempt_key: str, turn_key: str) -> Any: ...
    def provider_session(self, attempt_key: str, session_id: str, account_id: str | None = None) -> None: ...


def as_count(v: Any) -> int | None:
    """A token count from provider JSON: a non-negative int, else unknown (None)."""
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        if isinstance(v, float) and v.is_integer() and v >= 0:
            return int(v)
        return None
    return v


def as_cost(v: Any) -> float | None:
    """A measured cost: finite and non-negative, else unknown (never 0)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    if v != v or v in (float("inf"), float("-inf")) or v < 0:
        return None
    return v


def with_total_input(c: dict[str, int | None]) -> dict[str, int | None]:
    """Add total_input_tokens = input + cache read + cache write (when input is known)."""
    inp = c.get("input_tokens")
    if inp is not None:
        c["total_input_tokens"] = inp + (c.get("cache_read_tokens") or 0) + (c.get("cache_write_tokens") or 0)
    return c


class StreamBook:
    """One usage stream plus a mirror of what the reader will reduce it to (max per counter)."""

    def __init__(self, stream: Any, provider: str | None, model: str | None) -> None:
        self.stream = stream
        self.provider, self.model = provider, model
        self.counters: dict[str, int] = {}
        self.cost: float | None = None
        self.final = False
        self.observations = 0

    def observe(self, counters: Mapping[str, int | None], *, cost: float | None = None,
                final: bool = False, start_known: bool = True) -> bool:
        """Write a cumulative observation if it says something new (or is a final receipt)."""
        known = {k: int(v) for k, v in counters.items() if v is not None and k in COUNTERS}
        changed = final or (cost is not None and cost != self.cost) or not start_known
        if not changed:
            for k, v in known.items():
                if self.counters.get(k) != v:
                    changed = True
                    break
        if not changed:
            return False
        payload: dict[str, Any] = dict(known)
        if cost is not None:
            payload["cost_usd"] = cost
        if not self.stream.observe(payload, final_receipt=final, start_known=start_known):
            return False
        self.observations += 1
        for k, v in known.items():
            if self.counters.get(k) is None or v > self.counters[k]:
                self.counters[k] = v
        if cost is not None and (self.cost is None or cost > self.cost):
            self.cost = cost
        if final:
            self.final = True
        return True


def reduce_books(books: Iterable[StreamBook]) -> tuple[dict[str, int | None], float | None, bool]:
    """(summed counters, summed provider cost, cost_complete) over streams, like the reader."""
    totals: dict[str, int | None] = {}
    cost: float | None = None
    cost_complete = True
    any_book = False
    for b in books:
        any_book = True
        for k, v in b.counters.items():
            prev = totals.get(k)
            if prev is None:
                totals[k] = v
            elif k in MAX_ACROSS:
                totals[k] = max(prev, v)
            else:
                totals[k] = prev + v
        if b.cost is None:
            cost_complete = False
        else:
            cost = b.cost if cost is None else cost + b.cost
    return totals, cost, cost_complete and any_book


@dataclass
class LiveStats:
    """What the progress line shows; updated as the stream is read."""

    model_calls: int = 0
    tool_calls: int = 0
    api_retries: int = 0
    last_retry: str | None = None
    retry_log: list[str] = field(default_factory=list)  # what each retry said (first 100)
    last_event_at: float = field(default_factory=time.monotonic)
    changed: bool = False


def summarize_input(name: str, inp: Any, redactor: Redactor) -> str:
    """A short, redacted summary of a tool call's input."""
    text: str | None = None
    if isinstance(inp, dict):
        for key in ("command", "cmd", "file_path", "path", "pattern", "url", "query", "skill",
                    "description", "prompt"):
            v = inp.get(key)
            if isinstance(v, str) and v:
                text = v
                break
            if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
                text = " ".join(v)
                break
    elif isinstance(inp, str):
        text = inp
    if text is None:
        try:
            text = orjson.dumps(inp).decode() if inp is not None else ""
        except TypeError:
            text = str(inp)
    text = redactor.text(text)
    if len(text) > SUMMARY_CHARS:
        text = text[: SUMMARY_CHARS - 1] + "…"
    return text


def option_value(argv: Sequence[str], names: tuple[str, ...]) -> str | None:
    """The last value given to one of `names` (`--opt VALUE` or `--opt=VALUE`)."""
    value = None
    for i, a in enumerate(argv[1:], start=1):
        if a in names and i + 1 < len(argv):
            value = argv[i + 1]
        else:
            for n in names:
                if n.startswith("--") and a.startswith(n + "="):
                    value = a[len(n) + 1:]
    return value


def positionals(args: Sequence[str], value_opts: frozenset[str] = frozenset(),
                variadic: frozenset[str] = frozenset()) -> list[str]:
    """The positional arguments of `args` (argv without the executable): the values of
    `value_opts` and everything after a `variadic` option up to the next option skipped."""
    out: list[str] = []
    i = 0
    in_variadic = False
    while i < len(args):
        a = args[i]
        if a == "--":
            out.extend(args[i + 1:])
            break
        if a.startswith("-") and a != "-":
            in_variadic = a in variadic
            if a in value_opts and "=" not in a:
                i += 1
            i += 1
            continue
        if not in_variadic:
            out.append(a)
        i += 1
    return out


class Adapter:
    """Base adapter: `start()`, `feed(obj)` per parsed line, `finish(...)`.

    A subclass also knows its harness's command line (classmethods, asked before a run
    starts): whether the machine-readable stream was asked for, the model flag, the prompts.
    """

    harness = "command"
    provider: str | None = None
    parses_stream = True        # stdout is a JSON-lines stream to parse and keep
    terminal_types: tuple[str, ...] = ()  # the stream's terminal event type(s)
    reports_api_retries = False  # the stream says when the provider's API was retried
    # options of the harness's CLI that take a value (so a value is not taken for the prompt),
    # and options that take every following non-option argument
    value_options: frozenset[str] = frozenset()
    variadic_options: frozenset[str] = frozenset()

    # -- the harness's command line ---------------------------------------------------------

    @classmethod
    def stream_format_ok(cls, argv: list[str]) -> bool:
        """Is the agent asked for the machine-readable stream this adapter reads?"""
        return True

    @classmethod
    def wants_terminal(cls, argv: list[str]) -> bool:
        """Is the agent asked for its interactive UI (no headless flag)? Then `ledger run`
        in a terminal hands it the terminal (ledger.launch.interactive)."""
        return False

    @classmethod
    def model_from_argv(cls, argv: list[str]) -> str | None:
        """The model named by the harness's own model flag."""
        return None

    @classmethod
    def prompt_from_argv(cls, argv: list[str]) -> tuple[str | None, str | None]:
        """(system prompt, task prompt) as given on the command line: by default the task
        is the last positional argument (not `-`, which means stdin)."""
        return None, cls._last_positional(cls.positionals(argv))

    @classmethod
    def positionals(cls, argv: list[str]) -> list[str]:
        return positionals(argv[1:], cls.value_options, cls.variadic_options)

    @staticmethod
    def _last_positional(args: list[str]) -> str | None:
        return args[-1] if args and args[-1] != "-" else None

    def __init__(self, sink: Sink, *, redactor: Redactor | None = None, model: str | None = None,
                 argv: Sequence[str] = (), sessions: SessionStore | None = None,
                 run_id: str | None = None, expect_skill: str | None = None) -> None:
        self.sink = sink
        self.redactor = redactor or Redactor()
        self.model = model
        self.argv = list(argv)
        self.sessions = sessions
        self.run_id = run_id
        self.expect_skill = expect_skill
        self.attempt_key = "attempt-1"
        self.books: dict[tuple[str, str | None], StreamBook] = {}
        self.stats = LiveStats()
        self.notes: list[str] = []            # verification failures (stream-level)
        self.terminal_count = 0
        self.stream_outcome: str | None = None  # completed / failed, per the provider's terminal event
        self.final_answer: str | None = None
        self.session_id: str | None = None
        self.result_fields: dict[str, Any] = {}  # ledger additions for the result event
        self.skill_invoked: bool | None = None
        self.error_message: str | None = None
        self._started = False

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        if self.provider is not None and not self._started:
            self.attempt_key = self.sink.start_attempt(self.provider, self.model)
        self._started = True

    def feed(self, obj: dict[str, Any]) -> None:  # pragma: no cover - overridden
        pass

    def flush(self) -> None:
        """Write pending (coalesced) observations; the runner calls it after every chunk."""

    def finish(self, returncode: int | None, stopped_by: str | None) -> None:
        """Called once after the stream ended (EOF or the child was stopped)."""

    # -- helpers for subclasses --------------------------------------------------------------

    def book(self, turn_key: str, model: str | None) -> StreamBook:
        key = (turn_key, model)
        b = self.books.get(key)
        if b is None:
            stream = self.sink.usage_stream(provider=self.provider or "unknown", model=model,
                                            attempt_key=self.attempt_key, turn_key=turn_key)
            b = self.books[key] = StreamBook(stream, self.provider, model)
        return b

    def observe_session(self, session_id: Any) -> None:
        if isinstance(session_id, str) and session_id and session_id != self.session_id:
            self.session_id = session_id
            self.sink.provider_session(self.attempt_key, session_id)

    def emit_text(self, text: str) -> None:
        if text:
            self.sink.emit("text", text=self.redactor.text(text))

    def emit_tool(self, name: str, inp: Any) -> None:
        self.stats.tool_calls += 1
        self.stats.changed = True
        self.sink.emit("tool_use", name=str(name), summary=summarize_input(name, inp, self.redactor))

    def emit_tool_result(self, turn_id: str, tool_use_id: str, name: str, status: str) -> None:
        """One tool use's result status (ledger.records.verdict.tool_status) as a conversation
        event: a v1 reader skips conversation event types it does not know."""
        self.sink.emit("conversation", event={"type": "tool_result", "turn_id": turn_id, "tool_use_id": tool_use_id,
                                              "name": name, "status": status})

    def emit_final_answer(self, turn_id: str, text: str | None, completed: bool) -> None:
        """Conversation events so the reader's final-answer fold finds the answer."""
        if text is not None and completed:
            self.sink.emit("conversation", event={
                "type": "item_completed", "turn_id": turn_id,
                "item": {"type": "message", "phase": "final_answer", "text": self.redactor.text(text)}})
        self.sink.emit("conversation", event={"type": "turn_completed", "turn_id": turn_id,
                                              "status": "completed" if completed else "failed"})

    def note(self, reason: str) -> None:
        if reason not in self.notes:
            self.notes.append(reason)

    # -- read-outs -------------------------------------------------------------------------

    def totals(self) -> tuple[dict[str, int | None], float | None, bool]:
        return reduce_books(self.books.values())

    def final_streams(self) -> int:
        return sum(1 for b in self.books.values() if b.final)

    def models(self) -> list[str]:
        return sorted({b.model for b in self.books.values() if b.model})

    def verification_notes(self) -> list[str]:
        """Reasons the stream does not verify (besides junk lines, which the runner adds)."""
        out = list(self.notes)
        if self.terminal_types:
            names = "/".join(self.terminal_types)
            if self.terminal_count == 0:
                out.append(f"no {names} event")
            elif self.terminal_count > 1:
                out.append(f"{self.terminal_count} {names} events (expected exactly one)")
        return out
