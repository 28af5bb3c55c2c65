"""JSON encoding for records: orjson (fast, rejects NaN/Infinity on read)."""

from __future__ import annotations

from typing import Any

import orjson

JSONDecodeError = orjson.JSONDecodeError


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def dumps_compact(obj: Any) -> bytes:
    """One compact line (no trailing newline): the events.jsonl form."""
    return orjson.dumps(obj)


def dumps_pretty(obj: Any) -> bytes:
    """Pretty JSON with a trailing newline: manifest, context, terminal (as Loopflow writes them)."""
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n"
