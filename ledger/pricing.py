"""Estimate what a run cost from its tokens, with a pinned, versioned price table.

The price data is the `genai-prices` package (pinned in pyproject.toml); it is imported
lazily because the import costs ~0.1-0.2 s and most commands never price anything.

Counters use ledger's token shape (DESIGN §3)::

    input_tokens           uncached input
    cache_read_tokens      input read from the prompt cache
    cache_write_tokens     input written to the prompt cache (all TTLs)
    cache_write_5m_tokens, cache_write_1h_tokens   the TTL split, when known
    output_tokens          output, reasoning included

genai-prices expects `Usage.input_tokens` to count ALL input (cache reads and writes
included) and prices the cache parts at their own rates; `_to_usage` does that conversion.
A model genai-prices does not know gives `(None, reason)`, never a cost of 0.

    >>> estimate_cost("anthropic", "claude-sonnet-4-5",
    ...               {"input_tokens": 203, "cache_read_tokens": 3000,
    ...                "cache_write_tokens": 150, "output_tokens": 43})
    (0.0027165, None)
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping

PACKAGE = "genai-prices"

# ledger provider names -> genai-prices provider ids (same names today; kept explicit).
_PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "google": "google"}


@lru_cache(maxsize=1)
def price_data_version() -> str:
    """The price table's identity, e.g. "genai-prices 0.2.3" (recorded next to estimates)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{PACKAGE} {version(PACKAGE)}"
    except PackageNotFoundError:  # pragma: no cover - it is a hard dependency
        return f"{PACKAGE} (unknown version)"


def _count(counters: Mapping[str, Any], name: str) -> int | None:
    v = counters.get(name)
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int) and v >= 0:
        return v
    raise ValueError(f"{name} must be a non-negative integer, got {v!r}")


def _to_usage(counters: Mapping[str, Any]) -> dict[str, int]:
    """ledger counters -> genai-prices Usage keyword arguments (input counts all input)."""
    inp = _count(counters, "input_tokens")
    out = _count(counters, "output_tokens")
    read = _count(counters, "cache_read_tokens") or 0
    write = _count(counters, "cache_write_tokens")
    w5m = _count(counters, "cache_write_5m_tokens")
    w1h = _count(counters, "cache_write_1h_tokens")
    if write is None and (w5m is not None or w1h is not None):
        write = (w5m or 0) + (w1h or 0)
    write = write or 0
    usage = {"input_tokens": (inp or 0) + read + write, "output_tokens": out or 0}
    if read:
        usage["cache_read_tokens"] = read
    if write:
        usage["cache_write_tokens"] = write
        # the split is only used when it accounts for every cache write
        if w5m is not None and w1h is not None and w5m + w1h == write:
            if w5m:
                usage["cache_write_5m_tokens"] = w5m
            if w1h:
                usage["cache_write_1h_tokens"] = w1h
    return usage


def estimate_cost(provider: str | None, model: str | None, counters: Mapping[str, Any]
                  ) -> tuple[float | None, str | None]:
    """(cost in USD, None) or (None, why it is unknown). Never 0 for an unknown model.

    `provider` narrows the lookup ("anthropic", "openai", "google"); when the model is not
    found under it, every provider is tried. Input and output tokens must both be known.
    """
    if not model:
        return None, "model unknown"
    try:
        if _count(counters, "input_tokens") is None or _count(counters, "output_tokens") is None:
            return None, "input or output tokens unknown"
        usage_kwargs = _to_usage(counters)
    except ValueError as exc:
        return None, str(exc)
    from genai_prices import Usage, calc_price  # lazy: ~0.1-0.2 s

    usage = Usage(**usage_kwargs)
    provider_id = _PROVIDERS.get(provider or "")
    attempts = [provider_id, None] if provider_id else [None]
    for pid in attempts:
        try:
            calc = calc_price(usage, model, provider_id=pid) if pid else calc_price(usage, model)
        except LookupError:
            continue
        return float(calc.total_price), None
    return None, f"no price for model {model!r} in {price_data_version()}"
