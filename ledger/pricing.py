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
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from ledger import price_rates

PACKAGE = "genai-prices"

# ledger provider names -> genai-prices provider ids (same names today; kept explicit).
_PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "google": "google"}


@lru_cache(maxsize=1)
def price_data_version() -> str:
    """The price table's identity, e.g. "genai-prices 0.2.3" (recorded next to estimates)."""
    found = _dist_info_version("genai_prices")
    if found is not None:
        return f"{PACKAGE} {found}"
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{PACKAGE} {version(PACKAGE)}"
    except PackageNotFoundError:  # pragma: no cover - it is a hard dependency
        return f"{PACKAGE} (unknown version)"


def _dist_info_version(name: str) -> str | None:
    """The version in the name of the `<name>-<version>.dist-info` directory that
    importlib.metadata would read (the first sys.path entry holding one), without importing
    it: importlib.metadata and the email parser it loads cost ~70 M instructions, more than a
    tenth of a warm `ledger report` (issue 15). None (importlib.metadata decides) when that
    entry holds none for `name` but an .egg-info, or several."""
    import os
    import sys

    prefix = name.lower() + "-"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # (a zip file, a missing directory)
            continue
        hits = [n for n in names if n.lower().startswith(prefix)
                and n.endswith((".dist-info", ".egg-info", ".egg-link"))]
        if not hits:
            continue
        if len(hits) == 1 and hits[0].endswith(".dist-info"):
            return hits[0][len(prefix):-len(".dist-info")]
        return None
    return None


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


def estimate_cost(provider: str | None, model: str | None, counters: Mapping[str, Any],
                  service_tier: str | None = None) -> tuple[float | None, str | None]:
    """(cost in USD, None) or (None, why it is unknown). Never 0 for an unknown model.

    `provider` narrows the lookup ("anthropic", "openai", "google"); when the model is not
    found under it, every provider is tried. Input and output tokens must both be known.
    `service_tier` (OpenAI's `priority`, `flex`, ...; None or `default`: the standard rates)
    selects genai-prices' price variant for that tier where it has one; where it has none the
    standard rates apply (genai-prices 0.2.3 knows `priority` / `flex` / `fast` for the OpenAI
    models that publish them).
    """
    if not model:
        return None, "model unknown"
    try:
        if _count(counters, "input_tokens") is None or _count(counters, "output_tokens") is None:
            return None, "input or output tokens unknown"
        usage_kwargs = _to_usage(counters)
    except ValueError as exc:
        return None, str(exc)
    from ledger import price_rates  # (with orjson and decimal: not loaded by a report that prices nothing)

    provider_id = _PROVIDERS.get(provider or "")
    tier = service_tier if service_tier and service_tier != "default" else None
    context = {"service_tier": tier} if tier else None
    if "\x00" in model:  # (not a key of the table: see _key)
        return _genai_total(provider_id, model, usage_kwargs, context)
    table = _rates()
    entry = table.get(provider_id, model)
    if entry is None:
        entry = _measure(table, provider_id, model)
    # a tier with a price variant of its own has its rates kept as the standard ones are (half
    # the responses of a Codex 0.169 history run at `priority`: ~45 % of its first report was
    # genai-prices pricing them one by one); any other tier is priced at the standard rates,
    # as genai-prices does, so the table holds no more tiers than genai-prices names
    if tier is not None and tier in entry.get("tiers", ()):
        entry = table.get(provider_id, _key(model, tier)) or _measure(table, provider_id, model, tier)
    if "missing" in entry:
        return None, entry["missing"]
    if "bands" in entry:
        return float(price_rates.apply(entry, usage_kwargs)), None
    return _genai_total(provider_id, model, usage_kwargs, context)


def _key(model: str, tier: str | None) -> str:
    """The rate table's model key: the model, and a tier's after a NUL (neither holds one)."""
    return model if tier is None else f"{model}\x00{tier}"


# -- genai-prices, when the kept rates do not answer (ledger.price_rates) -----------------

@lru_cache(maxsize=1)
def _rates() -> price_rates.RateTable:
    from ledger import price_rates

    return price_rates.RateTable(price_rates.data_identity(price_data_version()))


def _genai_total(provider_id: str | None, model: str, usage_kwargs: Mapping[str, int],
                 context: dict[str, str] | None = None) -> tuple[float | None, str | None]:
    from genai_prices import Usage, calc_price  # lazy: ~0.7 G instructions (pydantic, httpx)

    usage = Usage(**usage_kwargs)
    for pid in ([provider_id, None] if provider_id else [None]):
        try:
            calc = (calc_price(usage, model, provider_id=pid, price_context=context) if pid
                    else calc_price(usage, model, price_context=context))
        except LookupError:
            continue
        return float(calc.total_price), None
    return None, f"no price for model {model!r} in {price_data_version()}"


def _measure(table: price_rates.RateTable, provider_id: str | None, model: str,
             tier: str | None = None) -> dict[str, Any]:
    """Find the model as estimate_cost always did (under `provider_id`, else any provider),
    measure its rates from genai-prices (at `tier`'s price variant, as calc_price picks it)
    and keep the entry."""
    from datetime import datetime, timezone

    from genai_prices import Usage, calc_price, data_snapshot
    from genai_prices.types import ModelPrice, StartDateConstraint, TieredPrices

    snapshot = data_snapshot.get_snapshot()
    context = {"service_tier": tier} if tier else None
    for pid in ([provider_id, None] if provider_id else [None]):
        try:
            _prov, info = snapshot.find_provider_model(model, None, pid, None)
        except LookupError:
            continue
        entry: dict[str, Any] | None = None
        now = datetime.now(tz=timezone.utc)
        until = _valid_until(info.prices, now.date(), ModelPrice, StartDateConstraint)
        if until is not False and context:
            until = _variants_until(info.price_variants or (), context, until, now.date(), StartDateConstraint)
        if until is not False:
            prices = info.get_prices(now, context)
            starts = [t.start for v in vars(prices).values() if isinstance(v, TieredPrices) for t in v.tiers]

            def calc(u: Mapping[str, int], pid: str | None = pid) -> Any:
                usage = Usage(**u)
                return (calc_price(usage, model, provider_id=pid, price_context=context) if pid
                        else calc_price(usage, model, price_context=context)).total_price

            try:
                from ledger import price_rates

                entry = price_rates.measure(calc, starts)
            except (ArithmeticError, LookupError, ValueError, TypeError):
                entry = None
            if entry is not None and until is not None:
                entry["until"] = until
        entry = entry if entry is not None else {"genai": True}
        if tier is None:  # (the tiers with a price variant of their own: see estimate_cost)
            entry["tiers"] = sorted({v.when["service_tier"] for v in info.price_variants or ()
                                     if set(v.when) == {"service_tier"}})
        break
    else:
        entry = {"missing": f"no price for model {model!r} in {price_data_version()}"}
    table.put(provider_id, _key(model, tier), entry)
    return entry


def _variants_until(variants: Any, context: dict[str, str], until: str | None, today: Any,
                    start_date: type) -> str | None | bool:
    """_valid_until with the price variants `context` selects: one that starts on a later date
    ends the entry then; one that follows the time of day (or anything else) is not kept."""
    upcoming = [until] if until is not None else []
    for v in variants:
        if not all(context.get(k) == val for k, val in v.when.items()):
            continue
        c = v.constraint
        if c is None:
            continue
        if type(c) is not start_date:
            return False
        if c.start_date > today:
            upcoming.append(c.start_date.isoformat())
    return min(upcoming) if upcoming else None


def _valid_until(prices: Any, today: Any, model_price: type, start_date: type) -> str | None | bool:
    """How long the prices in force today stay in force: None (for good: one price set, or
    only prices that started in the past), the ISO date the next one starts, or False
    (prices that follow the time of day or other conditions: not kept)."""
    if isinstance(prices, model_price):
        return None
    upcoming = []
    for cp in prices:
        c = cp.constraint
        if c is None:
            continue
        if type(c) is not start_date:
            return False
        if c.start_date > today:
            upcoming.append(c.start_date)
    return min(upcoming).isoformat() if upcoming else None
