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

The environment itself is never persisted by ledger.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping

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
