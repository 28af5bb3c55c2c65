"""JSON encoding for records: orjson (fast, rejects NaN/Infinity on read)."""

from __future__ import annotations

from typing import Any

# orjson is imported where it is used: its import (dataclasses, inspect, uuid, platform) costs
# ~44 M instructions, and a warm `ledger show` or `runs` reads and writes no record JSON.


def __getattr__(name: str) -> Any:
    if name == "JSONDecodeError":  # (`except jsonio.JSONDecodeError` looks it up only on an error)
        import orjson

        return orjson.JSONDecodeError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def loads(data: bytes | str) -> Any:
    import orjson

    return orjson.loads(data)


def dumps_compact(obj: Any) -> bytes:
    """One compact line (no trailing newline): the events.jsonl form."""
    import orjson

    try:
        return orjson.dumps(obj)
    except TypeError:
        return orjson.dumps(storable(obj))  # (TypeError again: a value JSON cannot hold at all)


def dumps_pretty(obj: Any) -> bytes:
    """Pretty JSON with a trailing newline: manifest, context, terminal (as Loopflow writes them)."""
    import orjson

    try:
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n"
    except TypeError:
        return orjson.dumps(storable(obj), option=orjson.OPT_INDENT_2) + b"\n"


I64_MIN, U64_MAX = -2**63, 2**64 - 1  # the integers orjson writes


def storable(obj: Any) -> Any:
    """`obj` with what JSON text cannot hold written as it can (issue 32), only when orjson
    refused it: a lone surrogate (a byte of an argv, a cwd or a path that is not UTF-8,
    decoded by Python's surrogateescape) becomes the text `\\x9b` (other lone surrogates
    `\\udXXX`), the way ledger prints them; an integer beyond 64 bits becomes a float (1e30:
    what orjson itself reads back for such a number, and what the reader counts as an overflow
    gap), or null past a float's range. Anything else is left for orjson to refuse."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
            return obj
        except UnicodeEncodeError:
            return "".join(ch if not 0xD800 <= ord(ch) <= 0xDFFF else
                           f"\\x{ord(ch) - 0xDC00:02x}" if ord(ch) >= 0xDC80 and ord(ch) <= 0xDCFF else
                           f"\\u{ord(ch):04x}" for ch in obj)
    if isinstance(obj, bool) or obj is None:
        return obj
    if isinstance(obj, int):
        if I64_MIN <= obj <= U64_MAX:
            return obj
        try:
            return float(obj)
        except OverflowError:
            return None
    if isinstance(obj, dict):
        return {storable(k) if isinstance(k, str) else k: storable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [storable(v) for v in obj]
    return obj
