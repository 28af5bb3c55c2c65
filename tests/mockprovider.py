"""A scriptable mock model-provider API server on 127.0.0.1.

The real ``claude`` (Anthropic Messages API), ``codex`` (OpenAI Responses
API) and ``gemini`` (Gemini API ``streamGenerateContent``) command-line
clients can be pointed at it; see ``tests/agentenv.py``.
Standard library only.

A *scenario* is data: a list of scripted responses ("steps"), consumed in
order, separately for each API.  Steps are plain dicts built by the helpers
below::

    answer("done")                                 # final text answer
    tool_call("Bash", {"command": "echo hi"})      # model asks for a tool
    error(500)                                     # HTTP error on this call
    slow(30)                                       # stream that stalls

Every step carries usage figures; pass ``usage={...}`` to choose them, or get
the default for call k (1-based, counted per API over *main* calls)::

    Anthropic: input_tokens 100+k, output_tokens 20+k,
               cache_read_input_tokens 1000*k, cache_creation_input_tokens 50*k
    OpenAI:    input_tokens 200+k (of which cached_tokens 100+k),
               output_tokens 30+k (of which reasoning_tokens k)
    Gemini:    promptTokenCount 300+k (of which cachedContentTokenCount
               10*k), candidatesTokenCount 40+k, thoughtsTokenCount 2*k
               (not part of candidates), totalTokenCount their sum

k counts every main call of that API, errors included.  Usage dicts may be
given flat (``cached_tokens``, ``reasoning_tokens``, ``cache_write_tokens``)
or nested as the API sends them (``input_tokens_details`` ...).

Scenario forms accepted by ``MockProvider``:

* a list of steps: the same script is played for each API (own cursor each);
* a dict with keys ``anthropic`` / ``openai`` / ``gemini`` (lists), ``after`` (the step
  replayed for every main call once a script is exhausted; default an answer
  ``"(mock: script exhausted)"``), ``side`` (the step used for side calls,
  see below; default a short answer with small usage) and ``openai_side`` (a
  predicate on a Responses API request body: true for a side call, e.g.
  Codex's thread-title call; without it every OpenAI call is a main call).

*Main* calls are the model turns of the agent loop: for Anthropic a
``POST /v1/messages`` whose body has a non-empty ``tools`` list; for OpenAI
every ``POST .../responses``; for Gemini every ``POST
/v1beta/models/<model>:streamGenerateContent`` (or ``:generateContent``)
whose body has ``tools``.  Other ``/v1/messages`` calls (Claude Code's
small side calls, e.g. with a haiku model) are *side* calls: they are
recorded with ``kind="side"`` and answered with the ``side`` step without
consuming the script.  ``count_tokens`` is answered with a token estimate.

``MockProvider(...)`` is a context manager.  ``.base_url`` is
``http://127.0.0.1:<port>`` and ``.requests`` is the list of received
requests (dicts: method, path, headers, body, api, kind, step, status).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "MockProvider",
    "answer",
    "tool_call",
    "error",
    "slow",
    "all_errors",
    "default_usage",
    "anthropic_usage",
    "openai_usage",
    "gemini_usage",
]


# --------------------------------------------------------------------------
# Scenario steps
# --------------------------------------------------------------------------


def answer(text: str, usage: dict | None = None, **extra: Any) -> dict:
    """A final text answer (Anthropic stop_reason ``end_turn``)."""
    return {"kind": "answer", "text": text, "usage": usage, **extra}


def tool_call(
    name: str,
    input: dict,
    usage: dict | None = None,
    text: str | None = None,
    **extra: Any,
) -> dict:
    """The model asks for tool ``name`` with arguments ``input``.

    ``text`` (optional) is emitted as a text block before the tool call.
    For Anthropic the response ends with stop_reason ``tool_use``; for the
    Responses API a ``function_call`` item is emitted whose ``arguments`` is
    ``json.dumps(input)``.  The client runs the tool and sends the result in
    its next request, which gets the next scripted step.
    """
    return {"kind": "tool_call", "name": name, "input": input, "text": text,
            "usage": usage, **extra}


def error(status: int = 500, message: str | None = None,
          headers: dict | None = None, **extra: Any) -> dict:
    """Answer the call with an HTTP error ``status`` (JSON error body)."""
    return {"kind": "error", "status": status, "message": message,
            "headers": headers or {}, **extra}


def slow(seconds: float, text: str = "slow answer", usage: dict | None = None,
         **extra: Any) -> dict:
    """A stream that stalls: headers and the first events are sent, then the
    server sleeps in small steps for ``seconds`` (or until the server stops)
    before finishing as ``answer(text)``."""
    return {"kind": "slow", "seconds": seconds, "text": text, "usage": usage,
            **extra}


def all_errors(status: int = 500) -> dict:
    """Scenario in which every call (main and side, both APIs) errors."""
    return {"anthropic": [], "openai": [], "gemini": [],
            "after": error(status), "side": error(status)}


def anthropic_usage(k: int) -> dict:
    """Default Anthropic usage for main call k (1-based)."""
    return {
        "input_tokens": 100 + k,
        "output_tokens": 20 + k,
        "cache_read_input_tokens": 1000 * k,
        "cache_creation_input_tokens": 50 * k,
    }


def openai_usage(k: int) -> dict:
    """Default Responses-API usage for main call k (1-based)."""
    return {
        "input_tokens": 200 + k,
        "cached_tokens": 100 + k,
        "output_tokens": 30 + k,
        "reasoning_tokens": k,
    }


def gemini_usage(k: int) -> dict:
    """Default Gemini API usageMetadata for main call k (1-based)."""
    return {
        "promptTokenCount": 300 + k,
        "cachedContentTokenCount": 10 * k,
        "candidatesTokenCount": 40 + k,
        "thoughtsTokenCount": 2 * k,
    }


def default_usage(api: str, k: int) -> dict:
    if api == "gemini":
        return gemini_usage(k)
    return anthropic_usage(k) if api == "anthropic" else openai_usage(k)


SIDE_USAGE_ANTHROPIC = {"input_tokens": 7, "output_tokens": 3,
                        "cache_read_input_tokens": 0,
                        "cache_creation_input_tokens": 0}


def _norm_openai_usage(u: dict) -> dict:
    """Accept flat (cached_tokens, reasoning_tokens) or nested usage."""
    inp = int(u.get("input_tokens", 0))
    out = int(u.get("output_tokens", 0))
    cached = u.get("cached_tokens")
    if cached is None:
        cached = (u.get("input_tokens_details") or {}).get("cached_tokens", 0)
    reasoning = u.get("reasoning_tokens")
    if reasoning is None:
        reasoning = (u.get("output_tokens_details") or {}).get(
            "reasoning_tokens", 0)
    details = {"cached_tokens": int(cached)}
    write = u.get("cache_write_tokens")
    if write is None:
        write = (u.get("input_tokens_details") or {}).get("cache_write_tokens")
    if write is not None:
        # Codex 0.169 reads input_tokens_details.cache_write_tokens and
        # reports it as cache_write_input_tokens; left out unless scripted.
        details["cache_write_tokens"] = int(write)
    return {
        "input_tokens": inp,
        "input_tokens_details": details,
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": int(reasoning)},
        "total_tokens": int(u.get("total_tokens", inp + out)),
    }


def _norm_gemini_usage(u: dict) -> dict:
    """usageMetadata as the Gemini API sends it: cached is part of the prompt,
    thoughts are not part of the candidates; total is their sum (plus any
    toolUsePromptTokenCount) unless scripted."""
    out = {k: int(u.get(k, 0)) for k in (
        "promptTokenCount", "candidatesTokenCount", "cachedContentTokenCount",
        "thoughtsTokenCount")}
    if u.get("toolUsePromptTokenCount") is not None:
        out["toolUsePromptTokenCount"] = int(u["toolUsePromptTokenCount"])
    out["totalTokenCount"] = int(u.get("totalTokenCount", sum(out.values())
                                       - out["cachedContentTokenCount"]))
    return out


def _norm_anthropic_usage(u: dict) -> dict:
    out = {
        "input_tokens": int(u.get("input_tokens", 0)),
        "cache_creation_input_tokens": int(
            u.get("cache_creation_input_tokens", 0)),
        "cache_read_input_tokens": int(u.get("cache_read_input_tokens", 0)),
        "output_tokens": int(u.get("output_tokens", 0)),
    }
    cc = u.get("cache_creation")
    if isinstance(cc, dict):
        # the 5m/1h split of the cache write, as the Messages API sends it
        out["cache_creation"] = {
            "ephemeral_5m_input_tokens": int(cc.get("ephemeral_5m_input_tokens", 0)),
            "ephemeral_1h_input_tokens": int(cc.get("ephemeral_1h_input_tokens", 0))}
    return out


# --------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------


class _Stopped(Exception):
    pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True


class MockProvider:
    """Scriptable mock of the Anthropic Messages and OpenAI Responses APIs.

    Use as a context manager (or call ``start()`` / ``stop()``)::

        with MockProvider([tool_call("Bash", {"command": "echo hi"}),
                           answer("done")]) as mp:
            ... run a client against mp.base_url ...
            assert mp.main_requests("anthropic")[1]["body"]["messages"]...

    Attributes:
        base_url: ``http://127.0.0.1:<port>`` (no trailing slash, no /v1).
        requests: every received request, in arrival order.
        served:   per-API list of (step, usage) actually served on main calls.
    """

    def __init__(self, scenario: list | dict | None = None, *,
                 model: str | None = None, host: str = "127.0.0.1",
                 start_output_tokens: int = 1,
                 delta_full_usage: bool = False,
                 chunk_delay: float = 0.0,
                 serve_model: dict | None = None):
        if scenario is None:
            scenario = []
        if isinstance(scenario, list):
            scenario = {"anthropic": list(scenario), "openai": list(scenario),
                        "gemini": list(scenario)}
        self.scripts = {
            "anthropic": list(scenario.get("anthropic", [])),
            "openai": list(scenario.get("openai", [])),
            "gemini": list(scenario.get("gemini", [])),
        }
        self.after = scenario.get("after") or answer(
            "(mock: script exhausted)")
        self.side = scenario.get("side")
        # OpenAI has no side calls by default; `openai_side(body) -> bool` names them
        self.openai_side = scenario.get("openai_side")
        self.model = model
        self.host = host
        # Anthropic: output_tokens reported in message_start (the real API
        # reports a small number there; the final count is in message_delta).
        self.start_output_tokens = start_output_tokens
        # Anthropic: also repeat input/cache figures in message_delta usage.
        self.delta_full_usage = delta_full_usage
        self.chunk_delay = chunk_delay
        # requested model -> the model id the response names (e.g. a dated id)
        self.serve_model = dict(serve_model or {})
        self.requests: list[dict] = []
        self.served: dict[str, list[tuple[dict, dict]]] = {
            "anthropic": [], "openai": [], "gemini": []}
        self._cursor = {"anthropic": 0, "openai": 0, "gemini": 0}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    # ---- lifecycle -------------------------------------------------------

    def start(self) -> "MockProvider":
        provider = self

        class Handler(_Handler):
            mock = provider

        self._server = _Server((self.host, 0), Handler)
        port = self._server.server_address[1]
        self.base_url = f"http://{self.host}:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"mockprovider-{port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "MockProvider":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    # ---- scripting -------------------------------------------------------

    def next_step(self, api: str) -> tuple[dict, dict, int]:
        """Consume the next main-call step for ``api``; returns
        (step, normalised usage, k)."""
        with self._lock:
            i = self._cursor[api]
            self._cursor[api] = i + 1
            script = self.scripts[api]
            step = script[i] if i < len(script) else self.after
            k = i + 1
            usage = step.get("usage") or default_usage(api, k)
            usage = {"anthropic": _norm_anthropic_usage,
                     "gemini": _norm_gemini_usage}.get(
                         api, _norm_openai_usage)(usage)
            self.served[api].append((step, usage))
            return step, usage, k

    def side_step(self) -> dict:
        return self.side or answer("Mock side answer",
                                   usage=dict(SIDE_USAGE_ANTHROPIC))

    def record(self, entry: dict) -> None:
        with self._lock:
            self.requests.append(entry)

    # ---- assertions helpers ----------------------------------------------

    def main_requests(self, api: str | None = None) -> list[dict]:
        return [r for r in self.requests if r.get("kind") == "main"
                and (api is None or r.get("api") == api)]

    def side_requests(self) -> list[dict]:
        return [r for r in self.requests if r.get("kind") == "side"]

    def served_usage(self, api: str, only_ok: bool = True) -> list[dict]:
        """Usage of every main call served (errors excluded by default)."""
        return [u for s, u in self.served[api]
                if not (only_ok and s["kind"] == "error")]

    def total_usage(self, api: str) -> dict:
        """Sum of the usage figures of the successful main calls."""
        tot: dict[str, int] = {}
        for u in self.served_usage(api):
            for key, val in _flatten(u).items():
                tot[key] = tot.get(key, 0) + val
        return tot


def _flatten(u: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in u.items():
        if isinstance(v, dict):
            out.update(_flatten(v, prefix + k + "."))
        elif isinstance(v, int):
            out[prefix + k] = v
    return out


def _new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "MockProvider/1.0"
    mock: MockProvider  # set on the subclass

    def log_message(self, format, *args):  # noqa: A002 - silence
        pass

    # ---- plumbing --------------------------------------------------------

    def _read_body(self) -> bytes:
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            chunks = []
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    # trailers until blank line
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            raw = b"".join(chunks)
        else:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
        enc = (self.headers.get("Content-Encoding") or "").lower()
        if enc == "gzip":
            import gzip
            raw = gzip.decompress(raw)
        elif enc == "deflate":
            import zlib
            raw = zlib.decompress(raw)
        return raw

    def _entry(self, body: Any, raw: bytes) -> dict:
        return {
            "time": time.time(),
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body,
            "raw_len": len(raw),
            "api": None,
            "kind": None,
            "step": None,
            "status": None,
        }

    def _send_json(self, status: int, obj: Any, headers: dict | None = None):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    def _start_sse(self, headers: dict | None = None):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for k, v in (headers or {}).items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data: bytes):
        if self.mock.stopped:
            raise _Stopped()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, name: str | None, obj: Any):
        payload = b""
        if name:
            payload += b"event: " + name.encode() + b"\n"
        payload += b"data: " + json.dumps(obj).encode() + b"\n\n"
        self._chunk(payload)
        if self.mock.chunk_delay:
            time.sleep(self.mock.chunk_delay)

    def _end_sse(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True

    def _stall(self, seconds: float):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.mock.stopped:
                raise _Stopped()
            time.sleep(0.05)

    # ---- dispatch --------------------------------------------------------

    def do_HEAD(self):
        self._probe()

    def do_GET(self):
        self._probe()

    def do_OPTIONS(self):
        self._probe()

    def do_DELETE(self):
        self._probe()

    def do_PUT(self):
        self.do_POST()

    def do_PATCH(self):
        self.do_POST()

    def _probe(self):
        raw = self._read_body()
        entry = self._entry(None, raw)
        path = self.path.split("?")[0].rstrip("/")
        entry["kind"] = "probe"
        if path.endswith("/models"):
            entry["api"] = "models"
            entry["status"] = 200
            self.mock.record(entry)
            self._send_json(200, _models_list(self.mock.model))
            return
        entry["status"] = 200
        self.mock.record(entry)
        self._send_json(200, {"ok": True})

    def do_POST(self):
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = {"_unparsed": raw[:2000].decode("latin-1")}
        entry = self._entry(body, raw)
        path = self.path.split("?")[0].rstrip("/")
        try:
            if path.endswith("/messages/count_tokens"):
                entry.update(api="anthropic", kind="count_tokens", status=200)
                self.mock.record(entry)
                n = max(1, len(raw) // 4)
                self._send_json(200, {"input_tokens": n})
            elif path.endswith("/messages"):
                self._anthropic(entry, body or {})
            elif path.endswith("/responses"):
                self._openai(entry, body or {})
            elif path.endswith(":streamGenerateContent") or path.endswith(
                    ":generateContent"):
                self._gemini(entry, body or {}, path)
            else:
                entry.update(kind="unknown", status=404)
                self.mock.record(entry)
                self._send_json(404, {"error": {
                    "type": "not_found_error",
                    "message": f"mock: no route {self.path}"}})
        except (_Stopped, BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # ---- Anthropic Messages API -----------------------------------------

    def _anthropic(self, entry: dict, body: dict):
        is_main = bool(body.get("tools"))
        if is_main:
            step, usage, k = self.mock.next_step("anthropic")
        else:
            step = self.mock.side_step()
            usage = _norm_anthropic_usage(step.get("usage")
                                          or SIDE_USAGE_ANTHROPIC)
            k = 0
        entry.update(api="anthropic", kind="main" if is_main else "side",
                     step=step["kind"], call=k, usage=usage)
        if step["kind"] == "error":
            status = step["status"]
            entry["status"] = status
            self.mock.record(entry)
            etype = {400: "invalid_request_error", 401: "authentication_error",
                     403: "permission_error", 404: "not_found_error",
                     429: "rate_limit_error", 529: "overloaded_error"}.get(
                status, "api_error")
            self._send_json(status, {"type": "error", "error": {
                "type": etype,
                "message": step.get("message") or f"mock error {status}"}},
                headers=step.get("headers"))
            return
        model = body.get("model") or self.mock.model or "claude-mock"
        model = self.mock.serve_model.get(model, model)
        msg_id = _new_id("msg_mock")
        # what was served (the truth of a capture): message id, model, usage, max_tokens
        entry.update(status=200, message_id=msg_id, model=model,
                     max_tokens=body.get("max_tokens"))
        self.mock.record(entry)
        blocks: list[dict] = []
        if step.get("text"):
            blocks.append({"type": "text", "text": step["text"]})
        if step["kind"] == "tool_call":
            blocks.append({"type": "tool_use", "id": _new_id("toolu_mock"),
                           "name": step["name"], "input": step["input"]})
        stop_reason = "tool_use" if step["kind"] == "tool_call" else "end_turn"
        if step["kind"] == "slow" and not step.get("text"):
            blocks.append({"type": "text", "text": "slow answer"})

        if not body.get("stream"):
            self._send_json(200, {
                "id": msg_id, "type": "message", "role": "assistant",
                "model": model, "content": blocks,
                "stop_reason": stop_reason, "stop_sequence": None,
                "usage": usage})
            return

        self._start_sse({"request-id": _new_id("req_mock")})
        start_usage = dict(usage)
        start_usage["output_tokens"] = min(self.mock.start_output_tokens,
                                           usage["output_tokens"])
        self._event("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": None,
            "stop_sequence": None, "usage": start_usage}})
        self._event("ping", {"type": "ping"})
        for idx, block in enumerate(blocks):
            if block["type"] == "text":
                self._event("content_block_start", {
                    "type": "content_block_start", "index": idx,
                    "content_block": {"type": "text", "text": ""}})
                text = block["text"]
                pieces = _split(text)
                for n, piece in enumerate(pieces):
                    self._event("content_block_delta", {
                        "type": "content_block_delta", "index": idx,
                        "delta": {"type": "text_delta", "text": piece}})
                    if step["kind"] == "slow" and n == 0:
                        self._stall(step["seconds"])
                if step["kind"] == "slow" and not pieces:
                    self._stall(step["seconds"])
            else:
                self._event("content_block_start", {
                    "type": "content_block_start", "index": idx,
                    "content_block": {"type": "tool_use", "id": block["id"],
                                      "name": block["name"], "input": {}}})
                js = json.dumps(block["input"])
                for piece in _split(js, 2):
                    self._event("content_block_delta", {
                        "type": "content_block_delta", "index": idx,
                        "delta": {"type": "input_json_delta",
                                  "partial_json": piece}})
            self._event("content_block_stop", {"type": "content_block_stop",
                                               "index": idx})
        delta_usage = ({k2: v for k2, v in usage.items()}
                       if self.mock.delta_full_usage
                       else {"output_tokens": usage["output_tokens"]})
        self._event("message_delta", {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": delta_usage})
        self._event("message_stop", {"type": "message_stop"})
        self._end_sse()

    # ---- OpenAI Responses API --------------------------------------------

    def _openai(self, entry: dict, body: dict):
        side = self.mock.openai_side
        if side is not None and side(body):
            # a side call (e.g. Codex's thread-title call): the side step, the script untouched
            step = self.mock.side_step()
            usage = _norm_openai_usage(step.get("usage") or dict(SIDE_USAGE_OPENAI))
            entry.update(api="openai", kind="side", step=step["kind"], call=0, usage=usage)
        else:
            step, usage, k = self.mock.next_step("openai")
            entry.update(api="openai", kind="main", step=step["kind"], call=k,
                         usage=usage)
        if step["kind"] == "error":
            status = step["status"]
            entry["status"] = status
            self.mock.record(entry)
            self._send_json(status, {"error": {
                "message": step.get("message") or f"mock error {status}",
                "type": "server_error" if status >= 500 else "invalid_request_error",
                "param": None, "code": None}}, headers=step.get("headers"))
            return
        entry["status"] = 200
        self.mock.record(entry)
        model = body.get("model") or self.mock.model or "gpt-mock"
        resp_id = _new_id("resp_mock")
        created = int(time.time())
        # what was served, for a capture's truth (tests/codexcapture.py)
        entry.update(response_id=resp_id, model=model, service_tier=body.get("service_tier"))
        items: list[dict] = []
        text = step.get("text")
        if step["kind"] == "slow" and not text:
            text = "slow answer"
        if text:
            items.append({"id": _new_id("msg_mock"), "type": "message",
                          "status": "completed", "role": "assistant",
                          "content": [{"type": "output_text", "text": text,
                                       "annotations": []}]})
        if step["kind"] == "tool_call":
            args = step["input"]
            items.append({"id": _new_id("fc_mock"), "type": "function_call",
                          "status": "completed", "call_id": _new_id("call_mock"),
                          "name": step["name"],
                          "arguments": args if isinstance(args, str)
                          else json.dumps(args)})

        def resp(status: str, output: list, usage_obj):
            return {"id": resp_id, "object": "response",
                    "created_at": created, "status": status, "model": model,
                    "output": output, "usage": usage_obj,
                    "error": None, "incomplete_details": None,
                    # the tier asked for is the tier served (only when one was asked for)
                    **({"service_tier": body["service_tier"]} if body.get("service_tier") else {})}

        if body.get("stream") is False:
            self._send_json(200, resp("completed", items, usage))
            return

        seq = iter(range(1_000_000))
        self._start_sse({"x-request-id": _new_id("req_mock")})

        def ev(obj):
            obj["sequence_number"] = next(seq)
            self._event(obj["type"], obj)

        ev({"type": "response.created", "response": resp("in_progress", [], None)})
        ev({"type": "response.in_progress",
            "response": resp("in_progress", [], None)})
        for oi, item in enumerate(items):
            if item["type"] == "message":
                ev({"type": "response.output_item.added", "output_index": oi,
                    "item": {**item, "status": "in_progress", "content": []}})
                part = {"type": "output_text", "text": "", "annotations": []}
                ev({"type": "response.content_part.added",
                    "item_id": item["id"], "output_index": oi,
                    "content_index": 0, "part": part})
                pieces = _split(item["content"][0]["text"])
                for n, piece in enumerate(pieces):
                    ev({"type": "response.output_text.delta",
                        "item_id": item["id"], "output_index": oi,
                        "content_index": 0, "delta": piece})
                    if step["kind"] == "slow" and n == 0:
                        self._stall(step["seconds"])
                ev({"type": "response.output_text.done",
                    "item_id": item["id"], "output_index": oi,
                    "content_index": 0, "text": item["content"][0]["text"]})
                ev({"type": "response.content_part.done",
                    "item_id": item["id"], "output_index": oi,
                    "content_index": 0, "part": item["content"][0]})
            else:
                ev({"type": "response.output_item.added", "output_index": oi,
                    "item": {**item, "status": "in_progress",
                             "arguments": ""}})
                for piece in _split(item["arguments"], 2):
                    ev({"type": "response.function_call_arguments.delta",
                        "item_id": item["id"], "output_index": oi,
                        "delta": piece})
                ev({"type": "response.function_call_arguments.done",
                    "item_id": item["id"], "output_index": oi,
                    "arguments": item["arguments"]})
            ev({"type": "response.output_item.done", "output_index": oi,
                "item": item})
        ev({"type": "response.completed",
            "response": resp("completed", items, usage)})
        self._end_sse()

    # ---- Gemini API (generateContent / streamGenerateContent) ---------------

    def _gemini(self, entry: dict, body: dict, path: str):
        is_main = bool(body.get("tools"))
        if is_main:
            step, usage, k = self.mock.next_step("gemini")
        else:
            step = self.mock.side_step()
            raw_usage = step.get("usage") or {}
            usage = _norm_gemini_usage(raw_usage if "promptTokenCount" in raw_usage
                                       else SIDE_USAGE_GEMINI)
            k = 0
        entry.update(api="gemini", kind="main" if is_main else "side",
                     step=step["kind"], call=k, usage=usage)
        if step["kind"] == "error":
            status = step["status"]
            entry["status"] = status
            self.mock.record(entry)
            self._send_json(status, {"error": {
                "code": status,
                "message": step.get("message") or f"mock error {status}",
                "status": {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED",
                           404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
                           503: "UNAVAILABLE"}.get(status, "INTERNAL")}},
                headers=step.get("headers"))
            return
        entry["status"] = 200
        self.mock.record(entry)
        model = path.rsplit("/", 1)[-1].split(":", 1)[0] or self.mock.model \
            or "gemini-mock"
        text = step.get("text")
        if step["kind"] == "slow" and not text:
            text = "slow answer"
        calls = []
        if step["kind"] == "tool_call":
            calls.append({"functionCall": {"name": step["name"],
                                           "args": step["input"]}})
        response_id = _new_id("mockresp")

        def chunk(parts: list, last: bool) -> dict:
            cand = {"content": {"role": "model", "parts": parts}, "index": 0}
            out = {"candidates": [cand], "modelVersion": model,
                   "responseId": response_id}
            if last:
                cand["finishReason"] = "STOP"
                out["usageMetadata"] = usage
            return out

        if path.endswith(":generateContent"):
            self._send_json(200, chunk(
                ([{"text": text}] if text else []) + calls, True))
            return
        self._start_sse()
        # ``chunks=N`` on a step: its text in N stream chunks (default 3)
        pieces = _split(text or "", step.get("chunks", 3))
        frames = [[{"text": piece}] for piece in pieces] + [[c] for c in calls]
        if not frames:
            frames = [[{"text": ""}]]
        for n, parts in enumerate(frames):
            last = n == len(frames) - 1
            self._event(None, chunk(parts, last))
            if step["kind"] == "slow" and n == 0:
                self._stall(step["seconds"])
        self._end_sse()


SIDE_USAGE_OPENAI = {"input_tokens": 60, "cached_tokens": 0, "output_tokens": 6}
SIDE_USAGE_GEMINI = {"promptTokenCount": 7, "candidatesTokenCount": 3}


def _split(s: str, parts: int = 3) -> list[str]:
    if not s:
        return []
    n = max(1, -(-len(s) // parts))
    return [s[i:i + n] for i in range(0, len(s), n)]


def _models_list(model: str | None) -> dict:
    names = [model] if model else []
    names += ["claude-sonnet-4-5", "gpt-5-codex", "gpt-5"]
    return {
        "object": "list",
        "data": [{"id": m, "object": "model", "type": "model",
                  "display_name": m, "created": 0, "created_at":
                  "2025-01-01T00:00:00Z", "owned_by": "mock"} for m in names],
        "models": [],
        "has_more": False,
        "first_id": names[0],
        "last_id": names[-1],
    }
