"""Redaction: nothing secret is persisted (DESIGN §1.5, run-record-v1 "Captured stream evidence").

Applied before anything is written: to the raw provider stream copy, event text fields,
tool summaries, the prompt in the manifest, and the stderr / stdout tails. In order:

1. literal secrets, longest first: the values of the child's environment variables whose
   names look secret (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*PASSWD*`,
   `*CREDENTIAL*`, plus names given with `--redact`). Values shorter than `min_length`
   (8) are skipped so that e.g. `TOKEN_LIMIT=100` does not turn every "100" into a mask.
   Each value is also matched in its JSON-escaped form (the raw stream is JSON).
2. known token shapes: `sk-ant-...`, `sk-...`, GitHub tokens (`gh?_...`, `github_pat_...`),
   AWS access key ids, Slack and Google API keys, `Bearer ...` credentials (e.g. in an
   `Authorization:` header), and URL userinfo (`https://user:pass@host`).
3. the string values of sensitive JSON keys (authorization, x-api-key, api_key, token,
   password, cookie, secret, ...), in plain JSON and in JSON embedded in a JSON string, and
   `NAME=value` assignments whose upper-case name looks secret.

The raw stream copy (`Redactor.stream`) gets one more pass before these, line by line: a
literal secret that a client streamed in pieces across consecutive text-delta lines (Gemini
`message` lines with `"delta":true`; Claude Code `stream_event` `content_block_delta` lines with
`--include-partial-messages`) is found in the joined text and each line's piece of it masked
(`DeltaWindow`). Codex's `--json` items carry whole texts and need no such pass.

The environment itself is never persisted by ledger.
"""

from __future__ import annotations

import json
import re
from collections import deque
from json.decoder import scanstring
from typing import Any, Iterable, Mapping, Sequence

import orjson

MASK = "[REDACTED]"
MIN_SECRET_LENGTH = 8


class _Lazy:
    """A regex compiled on first use (most runs never need most patterns; the launch path
    stays fast)."""

    __slots__ = ("_src", "_flags", "_re")

    def __init__(self, src: str, flags: int = 0) -> None:
        self._src, self._flags, self._re = src, flags, None

    def get(self) -> "re.Pattern[str]":
        if self._re is None:
            self._re = re.compile(self._src, self._flags)
        return self._re

    def sub(self, repl: str, s: str) -> str:
        return self.get().sub(repl, s)

    def match(self, s: str, pos: int = 0) -> "re.Match[str] | None":
        return self.get().match(s, pos)

    def finditer(self, s: str):  # type: ignore[no-untyped-def]
        return self.get().finditer(s)

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)

# (needles, case_insensitive, pattern, replacement): a pattern runs only when one of its
# needles occurs in the text (in the lower-cased text when case_insensitive), which keeps
# redaction of a multi-MiB stream fast.
_PATTERNS: list[tuple[tuple[str, ...], bool, _Lazy, str]] = [
    # Anthropic / OpenAI style keys
    (("sk-ant-",), False, _Lazy(r"(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_\-]{6,}"), MASK),
    (("sk-",), False, _Lazy(r"(?<![A-Za-z0-9_\-])sk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{16,}"), MASK),
    # GitHub
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), False,
     _Lazy(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}"), MASK),
    (("github_pat_",), False, _Lazy(r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{20,}"), MASK),
    # AWS access key id, Slack, Google API key
    (("AKIA", "ASIA"), False, _Lazy(r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Z0-9])"), MASK),
    (("xox",), False, _Lazy(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9\-]{10,}"), MASK),
    (("AIza",), False, _Lazy(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}"), MASK),
    # Authorization: Bearer/Basic/Token <credential>  and bare "Bearer <credential>"
    (("authorization",), True,
     _Lazy(r"(?i)(authorization\s*[:=]\s*\\?\"?\s*(?:bearer|basic|token)\s+)[^\s\"'\\,;]+"),
     r"\1" + MASK),
    (("bearer",), True, _Lazy(r"(?i)(\bbearer\s+)(?!\[REDACTED\])[A-Za-z0-9._~+/=\-]{8,}"), r"\1" + MASK),
    # URL userinfo: scheme://user:pass@host -> scheme://[REDACTED]@host
    (("://",), False, _Lazy(r"(://)(?!\[REDACTED\]@)[^\s/?#@\"'\\<>]+@"), r"\1" + MASK + "@"),
    # NAME=value where NAME looks secret (env dumps, .env files, shell traces)
    (("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"), False,
     _Lazy(r"((?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)[A-Z0-9_]*\s*=\s*)"
                r"(?:(\"|')(?!\[REDACTED\])[^\"'\n\\]+(\2)|(?![\"'\[])[^\s\"'\\]{8,})"),
     r"\1\2" + MASK + r"\3"),
]

_ANY_NEEDLE = re.compile("|".join(
    ("(?i:" + re.escape(n) + ")") if ci else re.escape(n) for needles, ci, _, _ in _PATTERNS for n in needles))

# Sensitive JSON keys, compared after lower-casing and dropping everything but [a-z0-9].
_SENSITIVE_KEYS = frozenset({
    "authorization", "proxyauthorization", "xapikey", "apikey", "token", "accesstoken",
    "refreshtoken", "idtoken", "authtoken", "sessiontoken", "bearertoken", "password", "passwd",
    "cookie", "setcookie", "secret", "clientsecret", "privatekey", "secretkey", "accesskey",
    "credentials", "credential",
})
_SENSITIVE_SUFFIXES = ("token", "secret", "password", "passwd", "apikey", "authorization", "cookie",
                       "credential", "credentials", "privatekey", "secretkey", "accesskey")

# A JSON key ending in a sensitive word followed by a string value, found in the lower-cased
# text: `...token": "` (plain JSON) or `...token\": \"` (JSON inside a JSON string).
_KV_HINT = _Lazy(r'(?:token|secret|passw(?:or)?d|key|authorization|cookie|credentials?)(\\?)"\s*:\s*\1"')
_KEY_CHARS = _Lazy(r"[A-Za-z0-9_\-]{1,64}\Z")
_PLAIN_VALUE = _Lazy(r'(?:[^"\\]|\\.)*(?=")')
_ESCAPED_VALUE = _Lazy(r'.*?(?=(?<!\\)\\")', re.S)
_NORM = re.compile(r"[^a-z0-9]")


def is_secret_name(name: str) -> bool:
    """Does an environment variable name look like it holds a secret?"""
    return bool(_SECRET_NAME.search(name))


def is_sensitive_key(key: str) -> bool:
    k = _NORM.sub("", key.lower())
    if k in _SENSITIVE_KEYS:
        return True
    return k.endswith(_SENSITIVE_SUFFIXES) and not k.endswith("tokens")


def _redact_kv(s: str) -> str:
    """Mask the string values of sensitive JSON keys (plain and one level escaped)."""
    low = s.lower()
    if len(low) != len(s):  # lower() changed lengths (rare Unicode): positions would not map
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in s)
    out: list[str] = []
    pos = 0
    for m in _KV_HINT.finditer(low):
        escaped = bool(m.group(1))
        kw_end = m.start(1)  # end of the key text
        q = s.rfind('\\"' if escaped else '"', max(0, kw_end - 70), kw_end)
        if q < 0 or q < pos:
            continue
        key = s[q + (2 if escaped else 1):kw_end]
        if not _KEY_CHARS.match(key) or not is_sensitive_key(key):
            continue
        vm = (_ESCAPED_VALUE if escaped else _PLAIN_VALUE).match(s, m.end())
        if vm is None or vm.end() == vm.start() or vm.group(0) == MASK:
            continue
        out.append(s[pos:vm.start()])
        out.append(MASK)
        pos = vm.end()
    if not out:
        return s
    out.append(s[pos:])
    return "".join(out)


class Redactor:
    """Replace secrets in text before it is persisted.

    >>> r = Redactor(["hunter2-very-secret"])
    >>> r.text('{"password": "x", "note": "hunter2-very-secret"}')
    '{"password": "[REDACTED]", "note": "[REDACTED]"}'
    """

    def __init__(self, secrets: Iterable[str] = (), *, min_length: int = MIN_SECRET_LENGTH) -> None:
        forms: set[str] = set()
        for s in secrets:
            if not isinstance(s, str) or len(s) < min_length:
                continue
            forms.add(s)
            escaped = json.dumps(s, ensure_ascii=False)[1:-1]
            if escaped != s:
                forms.add(escaped)
            ascii_escaped = json.dumps(s)[1:-1]
            if ascii_escaped != s:
                forms.add(ascii_escaped)
        self.secret_count = len(forms)
        ordered = sorted(forms, key=lambda v: (-len(v), v))
        self._forms = tuple(ordered)
        self._literal = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    @classmethod
    def from_env(cls, env: Mapping[str, str], extra_names: Iterable[str] = (),
                 extra_values: Iterable[str] = (), *, min_length: int = MIN_SECRET_LENGTH) -> "Redactor":
        """Secrets = values of env vars with secret-looking names, plus `extra_names`."""
        extra = set(extra_names)
        values = [v for k, v in env.items() if k in extra or is_secret_name(k)]
        values.extend(extra_values)
        return cls(values, min_length=min_length)

    def text(self, s: str) -> str:
        if not s:
            return s
        if self._literal is not None:
            s = self._literal.sub(MASK, s)
        # fast path: one search for every needle; most text has none of them
        if _ANY_NEEDLE.search(s) is not None:
            low: str | None = None
            for needles, ci, pattern, repl in _PATTERNS:
                if ci:
                    if low is None:
                        low = s.lower()
                    hay = low
                else:
                    hay = s
                for n in needles:
                    if n in hay:
                        s = pattern.sub(repl, s)
                        break
        if '"' in s and (':' in s):
            s = _redact_kv(s)
        return s

    def bytes(self, data: bytes) -> bytes:
        """Redact raw bytes; invalid UTF-8 is kept byte for byte (surrogateescape)."""
        if not data:
            return data
        return self.text(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def stream(self, data: bytes) -> bytes:
        """Redact a raw JSONL stream copy: `bytes`, after masking the pieces of secrets split
        across streamed delta lines (lines that take no part stay byte for byte)."""
        if self._forms and b"delta" in data:
            window = DeltaWindow(self._forms)
            out: list[bytes] = []
            for line in data.split(b"\n"):
                if window.idle and b"delta" not in line:  # the common line: nothing held, no delta
                    out.append(line)
                else:
                    out.extend(window.feed(line))
            out.extend(window.finish())
            if window.rewritten:
                data = b"\n".join(out)
        return self.bytes(data)

    def value(self, obj: Any) -> Any:
        """Redact a JSON-like value: strings via `text`, sensitive keys' strings masked."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                if isinstance(v, str) and isinstance(k, str) and is_sensitive_key(k) and v:
                    out[k] = MASK
                else:
                    out[k] = self.value(v)
            return out
        if isinstance(obj, (list, tuple)):
            return [self.value(v) for v in obj]
        return obj


# -- secrets split across streamed delta lines -------------------------------------------------

_DELTA_FIELDS = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _plain(v: Any) -> Any:
    return v if v is None or isinstance(v, (str, int)) else repr(v)


def delta_text(line: bytes) -> tuple[tuple[Any, ...], tuple[str, ...], str] | None:
    """(channel, path to the text, text) of a streamed text-delta line, else None. Consecutive
    delta lines of one channel are pieces of one text."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    kind = obj.get("type")
    if kind == "message" and obj.get("delta") is True:  # Gemini CLI
        text = obj.get("content")
        if isinstance(text, str):
            return ("gemini", _plain(obj.get("role"))), ("content",), text
    elif kind == "stream_event":  # Claude Code --include-partial-messages
        ev = obj.get("event")
        if isinstance(ev, dict) and ev.get("type") == "content_block_delta" and isinstance(ev.get("delta"), dict):
            dtype = ev["delta"].get("type")
            field = _DELTA_FIELDS.get(dtype) if isinstance(dtype, str) else None
            text = ev["delta"].get(field) if field else None
            if isinstance(text, str):
                return (("claude", _plain(obj.get("parent_tool_use_id")), _plain(ev.get("index")), dtype),
                        ("event", "delta", field), text)
    return None


def _string_span(s: str, path: Sequence[str]) -> tuple[int, int] | None:
    """Where, in the JSON object text `s`, the string literal at `path` (keys) is, quotes
    included; the last of duplicate keys, as the parsers read it. None if it is not there."""
    try:
        pos = _WS.match(s).end()
        found: tuple[int, int] | None = None
        for key in path:
            if s[pos] != "{":
                return None
            pos = _WS.match(s, pos + 1).end()
            found = None
            while s[pos] != "}":
                if s[pos] != '"':
                    return None
                k, pos = scanstring(s, pos + 1)
                pos = _WS.match(s, pos).end()
                if s[pos] != ":":
                    return None
                start = pos = _WS.match(s, pos + 1).end()
                _, pos = _DECODER.raw_decode(s, pos)
                if k == key:
                    found = (start, pos)
                pos = _WS.match(s, pos).end()
                if s[pos] == ",":
                    pos = _WS.match(s, pos + 1).end()
                elif s[pos] != "}":
                    return None
            if found is None:
                return None
            pos = found[0]
        return found if found is not None and s[found[0]] == '"' else None
    except (ValueError, IndexError):
        return None


def _set_text(line: bytes, path: Sequence[str], old: str, new: str) -> bytes:
    """`line` with the string at `path` (now `old`) replaced by `new`; every other byte kept."""
    s = line.decode("utf-8")
    span = _string_span(s, path)
    if span is not None and scanstring(s, span[0] + 1)[0] == old:
        return (s[:span[0]] + json.dumps(new, ensure_ascii=False) + s[span[1]:]).encode("utf-8")
    obj = orjson.loads(line)  # not found where expected (e.g. nesting too deep to walk): write it anew
    inner = obj
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = new
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class _Held:
    __slots__ = ("line", "path", "text", "start")

    def __init__(self, line: bytes, path: tuple[str, ...], text: str, start: int) -> None:
        self.line, self.path, self.text, self.start = line, path, text, start


class DeltaWindow:
    """Mask the pieces of literal secrets split across consecutive delta lines of a stream.

    Feed lines in order; each call returns the lines that can be written now. Offsets count
    characters of the joined delta text of the current chain (consecutive delta lines of one
    channel; any other line ends it). A line is held back while the joined text ends in a
    proper prefix of a secret that reaches into it (the next piece could complete the secret),
    so at most about as many lines as the longest secret has characters are held; lines that
    take part in no split occurrence come out as they went in. A partial match that never
    completes (the chain ends, the stream ends) is not a secret and is left as it is. Only an
    absurd run of empty deltas inside a partial match (more than `max_held` lines) forces lines
    out early; their part of the partial match is masked then, as if it completed.
    """

    def __init__(self, forms: Sequence[str], max_held: int | None = None) -> None:
        forms = [f for f in forms if f]
        self._forms = tuple(forms)
        alt = "|".join(map(re.escape, sorted(forms, key=lambda f: (-len(f), f))))
        # every start position, longest form first there (overlapping occurrences are all found)
        self._find = re.compile("(?=(" + alt + "))") if forms else None
        self._maxlen = max(map(len, forms), default=0)
        self.max_held = max_held if max_held is not None else self._maxlen + 16
        self.rewritten = 0  # lines written with a piece masked
        self._held: deque[_Held] = deque()
        self._reset()

    def _reset(self) -> None:
        self._channel: tuple[Any, ...] | None = None
        self._text = ""  # joined text of the chain from offset _base to _end
        self._base = self._end = 0
        self._partial = 0  # length of the longest suffix of the text that is a proper prefix of a secret
        self._spans: list[tuple[int, int]] = []  # occurrences across a line boundary, [start, end)

    @property
    def idle(self) -> bool:
        return self._channel is None

    def feed(self, line: bytes) -> list[bytes]:
        out: list[bytes] = []
        found = delta_text(line) if self._find is not None and b"delta" in line else None
        if found is None:
            self._flush(out)
            out.append(line)
            return out
        channel, path, text = found
        if channel != self._channel:
            self._flush(out)
            self._channel = channel
        start = self._end
        reach = start - self._partial  # an occurrence crossing into this line starts here or later
        self._held.append(_Held(line, path, text, start))
        self._text += text
        self._end += len(text)
        if self._partial and text:
            for m in self._find.finditer(self._text, reach - self._base):  # type: ignore[union-attr]
                s = self._base + m.start()
                e = s + len(m.group(1))
                if s >= start:
                    break
                if e > start:
                    self._spans.append((s, e))
        self._partial = self._suffix_prefix()
        safe = self._end - self._partial
        held = self._held
        while held and held[0].start + len(held[0].text) <= safe:
            out.append(self._release(held.popleft()))
        while len(held) > self.max_held:
            out.append(self._release(held.popleft(), (safe, self._end)))
        first = held[0].start if held else self._end
        keep = min(first, safe)
        if keep > self._base:
            self._text = self._text[keep - self._base:]
            self._base = keep
        if self._spans:
            self._spans = [sp for sp in self._spans if sp[1] > first]
        return out

    def finish(self) -> list[bytes]:
        out: list[bytes] = []
        self._flush(out)
        return out

    def _flush(self, out: list[bytes]) -> None:
        while self._held:
            out.append(self._release(self._held.popleft()))
        self._reset()

    def _suffix_prefix(self) -> int:
        t = self._text
        n = len(t)
        best = 0
        for f in self._forms:
            c = f[0]
            i = t.find(c, max(0, n - len(f) + 1))  # a proper prefix: shorter than the form
            while i >= 0 and n - i > best:
                if f.startswith(t[i:]):
                    best = n - i
                    break
                i = t.find(c, i + 1)
        return best

    def _release(self, h: _Held, extra: tuple[int, int] | None = None) -> bytes:
        a, b = h.start, h.start + len(h.text)
        spans = self._spans + [extra] if extra else self._spans
        cuts = sorted((max(s, a) - a, min(e, b) - a) for s, e in spans if s < b and e > a)
        if not cuts:
            return h.line
        parts: list[str] = []
        pos = 0
        for lo, hi in cuts:
            if lo > pos or not parts:  # a new masked stretch; overlapping ones merge
                parts += (h.text[pos:lo], MASK)
            pos = max(pos, hi)
        parts.append(h.text[pos:])
        self.rewritten += 1
        return _set_text(h.line, h.path, h.text, "".join(parts))
