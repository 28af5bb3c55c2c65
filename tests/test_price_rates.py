"""ledger.price_rates: estimates from kept per-model rates equal genai-prices' own, exactly,
and a command that prices a known model does not import genai-prices."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from decimal import Decimal

import orjson
import pytest

from ledger import price_rates, pricing

CLAUDE_RUN = {"input_tokens": 203, "output_tokens": 43, "cache_read_tokens": 3000, "cache_write_tokens": 150}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("LEDGER_CACHE_DIR", str(d))
    pricing._rates.cache_clear()
    yield d
    pricing._rates.cache_clear()


def _counters(rnd: random.Random, big: bool) -> dict[str, int]:
    """ledger counters of every shape a run or a session stream has (TTL split or not)."""
    top = 400_000 if big else 5_000
    c = {"input_tokens": rnd.randint(0, top), "output_tokens": rnd.randint(0, top // 4)}
    if rnd.random() < 0.7:
        c["cache_read_tokens"] = rnd.randint(0, top)
    r = rnd.random()
    if r < 0.3:
        c["cache_write_tokens"] = rnd.randint(0, top // 2)
    elif r < 0.6:
        c["cache_write_5m_tokens"] = rnd.randint(0, top // 4)
        c["cache_write_1h_tokens"] = rnd.randint(0, top // 4)
        if rnd.random() < 0.5:
            c["cache_write_tokens"] = c["cache_write_5m_tokens"] + c["cache_write_1h_tokens"]
    elif r < 0.7:
        c["cache_write_5m_tokens"] = rnd.randint(0, top // 4)  # (one TTL only: not a split)
    return c


def _models(sample: int) -> list[tuple[str | None, str]]:
    """Every model of the providers ledger names (by provider and without), and a sample of
    the rest of the price table."""
    from genai_prices import data_snapshot

    snap = data_snapshot.get_snapshot()
    ours = [(p.id, m.id) for p in snap.providers if p.id in ("anthropic", "openai", "google") for m in p.models]
    rest = [(None, m.id) for p in snap.providers if p.id not in ("anthropic", "openai", "google") for m in p.models]
    rnd = random.Random(5)
    return ours + [(None, m) for _, m in ours[::7]] + rnd.sample(rest, min(sample, len(rest)))


def test_kept_rates_price_exactly_like_genai_prices(cache):
    models = _models(sample=250)
    rnd = random.Random(7)
    linear = priced = 0
    for provider, model in models:
        for k in range(8):
            counters = _counters(rnd, big=k % 2 == 1)
            got = pricing.estimate_cost(provider, model, counters)
            want = pricing._genai_total(provider, model, pricing._to_usage(counters))
            if want[0] is None:  # (a model genai-prices cannot price by this name)
                assert got[0] is None, (provider, model)
                continue
            assert got == want, (provider, model, counters)
        entry = pricing._rates().get(provider, model)
        linear += "bands" in entry
        priced += "missing" not in entry
    # nearly every model is answered from its kept rates (not a test that passes by never
    # using them): the rest follow the time of day or cannot be reproduced
    assert linear >= priced * 0.95 and priced > 250, (linear, priced)


def test_tier_band_edges_are_exact(cache):
    """Claude Sonnet 4.5 and GPT-5.5 change price past a total input threshold: just below,
    at and just above it."""
    for provider, model in (("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-5.5")):
        pricing.estimate_cost(provider, model, CLAUDE_RUN)
        entry = pricing._rates().get(provider, model)
        assert entry["starts"], entry  # (the tiers were seen)
        for start in entry["starts"]:
            for total in (start - 1, start, start + 1, start + 2):
                for read in (0, 1000):
                    c = {"input_tokens": total - read, "cache_read_tokens": read, "output_tokens": 77}
                    assert pricing.estimate_cost(provider, model, c) == \
                        pricing._genai_total(provider, model, pricing._to_usage(c))


def test_the_hand_checked_claude_run_from_kept_rates(cache):
    assert pricing.estimate_cost("anthropic", "claude-sonnet-4-5", CLAUDE_RUN) == (0.0027165, None)
    assert (cache / "price-rates.json").exists()
    pricing._rates.cache_clear()  # (read back from the file)
    assert pricing._rates().get("anthropic", "claude-sonnet-4-5") is not None
    assert pricing.estimate_cost("anthropic", "claude-sonnet-4-5", CLAUDE_RUN) == (0.0027165, None)


_PROBE = """
import sys
from ledger.pricing import estimate_cost
print(estimate_cost({provider!r}, {model!r}, {counters!r}))
print("genai_prices" in sys.modules)
"""


def _in_process(provider, model, counters, cache_dir) -> tuple[str, str]:
    env = dict(os.environ, LEDGER_CACHE_DIR=str(cache_dir))
    out = subprocess.run([sys.executable, "-c", _PROBE.format(provider=provider, model=model, counters=counters)],
                         env=env, capture_output=True, text=True, check=True).stdout.splitlines()
    return out[0], out[1]


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "no-such-model-x"])
def test_a_later_process_does_not_import_genai_prices(tmp_path, model):
    first = _in_process("anthropic", model, CLAUDE_RUN, tmp_path)
    second = _in_process("anthropic", model, CLAUDE_RUN, tmp_path)
    assert first == (second[0], "True")  # (the first one measured the rates)
    assert second[1] == "False"


def test_damaged_or_foreign_table_is_not_trusted(cache):
    pricing.estimate_cost("anthropic", "claude-sonnet-4-5", CLAUDE_RUN)
    path = cache / "price-rates.json"
    doc = orjson.loads(path.read_bytes())
    key = "anthropic\x00claude-sonnet-4-5"
    for bad in ({"starts": [200000], "bands": [["1"] * 7]},  # a band missing
                {"starts": ["x"], "bands": [["0"] * 7, ["0"] * 7]},
                {"starts": [], "bands": [["NaN"] * 7]},
                {"missing": 3}, "text"):
        doc["entries"][key] = bad
        path.write_bytes(orjson.dumps(doc))
        pricing._rates.cache_clear()
        assert pricing.estimate_cost("anthropic", "claude-sonnet-4-5", CLAUDE_RUN) == (0.0027165, None)
    for junk in (b"", b"\x00\xffnot json", b"[1, 2]"):
        path.write_bytes(junk)
        pricing._rates.cache_clear()
        assert pricing.estimate_cost("anthropic", "claude-sonnet-4-5", CLAUDE_RUN) == (0.0027165, None)
    # another price-data identity (a new genai-prices): its entries are not used
    doc = {"format": 1, "identity": "genai-prices 0.0.0|1|1",
           "entries": {key: {"starts": [], "bands": [["0"] * 7]}}}
    path.write_bytes(orjson.dumps(doc))
    pricing._rates.cache_clear()
    assert pricing.estimate_cost("anthropic", "claude-sonnet-4-5", CLAUDE_RUN) == (0.0027165, None)


def test_unwritable_cache_dir_still_prices(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("LEDGER_CACHE_DIR", str(blocker / "cache"))
    pricing._rates.cache_clear()
    try:
        assert pricing.estimate_cost("anthropic", "claude-sonnet-4-5", CLAUDE_RUN) == (0.0027165, None)
        assert blocker.read_text() == "not a directory"
    finally:
        pricing._rates.cache_clear()


def test_measure_refuses_prices_it_cannot_reproduce():
    """A price that is not per-band linear (here: a square) is left to genai-prices."""
    def square(u):
        return Decimal(u.get("output_tokens", 0)) ** 2 / 10**12

    def linear(u):
        return Decimal(u.get("output_tokens", 0)) * Decimal("0.000015") + Decimal("0.01")

    assert price_rates.measure(square, []) is None
    entry = price_rates.measure(linear, [])
    assert Decimal(entry["bands"][0][0]) == Decimal("0.01") and Decimal(entry["bands"][0][6]) == Decimal("0.000015")
    # a threshold the rates were not told about is caught by the random checks
    def cliff(u):
        rate = Decimal("0.000006") if u.get("input_tokens", 0) > 1000 else Decimal("0.000003")
        return rate * (u.get("input_tokens", 0) - u.get("cache_read_tokens", 0) - u.get("cache_write_tokens", 0))

    assert price_rates.measure(cliff, []) is None
    assert price_rates.measure(cliff, [1000]) is not None


def test_prices_that_start_on_a_date(cache):
    """Claude Opus 4.6 has a price set that started on a date (genai-prices picks by today):
    kept, and equal; a price starting in the future bounds the entry; one by time of day is
    not kept."""
    import datetime as dt

    from genai_prices.types import ConditionalPrice, ModelPrice, StartDateConstraint, TimeOfDateConstraint

    c = dict(CLAUDE_RUN, cache_write_5m_tokens=100, cache_write_1h_tokens=50)
    assert pricing.estimate_cost("anthropic", "claude-opus-4-6", c) == \
        pricing._genai_total("anthropic", "claude-opus-4-6", pricing._to_usage(c))
    assert "bands" in pricing._rates().get("anthropic", "claude-opus-4-6")
    today = dt.date(2026, 12, 1)
    mp = ModelPrice(input_mtok=Decimal(1))
    past, future = StartDateConstraint(dt.date(2026, 3, 1)), StartDateConstraint(dt.date(2027, 1, 5))
    assert pricing._valid_until(mp, today, ModelPrice, StartDateConstraint) is None
    assert pricing._valid_until([ConditionalPrice(prices=mp), ConditionalPrice(prices=mp, constraint=past)],
                                today, ModelPrice, StartDateConstraint) is None
    assert pricing._valid_until([ConditionalPrice(prices=mp), ConditionalPrice(prices=mp, constraint=future)],
                                today, ModelPrice, StartDateConstraint) == "2027-01-05"
    night = TimeOfDateConstraint(start_time=dt.time(16, 30), end_time=dt.time(0, 30))
    assert pricing._valid_until([ConditionalPrice(prices=mp), ConditionalPrice(prices=mp, constraint=night)],
                                today, ModelPrice, StartDateConstraint) is False


def test_an_entry_past_its_date_is_measured_again(cache):
    pricing.estimate_cost("anthropic", "claude-sonnet-4-5", CLAUDE_RUN)
    path = cache / "price-rates.json"
    doc = orjson.loads(path.read_bytes())
    key = "anthropic\x00claude-sonnet-4-5"
    doc["entries"][key] = {"starts": [], "bands": [["0"] * 7], "until": "2020-01-01"}  # (wrong, and expired)
    path.write_bytes(orjson.dumps(doc))
    pricing._rates.cache_clear()
    assert pricing.estimate_cost("anthropic", "claude-sonnet-4-5", CLAUDE_RUN) == (0.0027165, None)
    assert "until" not in orjson.loads(path.read_bytes())["entries"][key]


def _tiered_models() -> list[tuple[str, str, list[str]]]:
    """(provider, model, service tiers it has a price variant for) of the providers ledger names."""
    from genai_prices import data_snapshot

    out = []
    for p in data_snapshot.get_snapshot().providers:
        if p.id not in ("anthropic", "openai", "google"):
            continue
        for m in p.models:
            tiers = sorted({v.when["service_tier"] for v in m.price_variants or () if set(v.when) == {"service_tier"}})
            if tiers:
                out.append((p.id, m.id, tiers))
    return out


def test_a_tiers_kept_rates_price_exactly_like_genai_prices_variant(cache):
    """A service tier's rates are kept as the standard ones are (Codex 0.169's `priority`):
    every estimate equals genai-prices' own with that price context, Decimal for Decimal."""
    models = _tiered_models()
    assert len(models) >= 5, models  # (genai-prices 0.2.3 names priority/flex/... for OpenAI models)
    rnd = random.Random(11)
    kept = 0
    for provider, model, tiers in models:
        for tier in tiers + ["no-such-tier"]:
            for k in range(4):
                counters = _counters(rnd, big=k % 2 == 1)
                want = pricing._genai_total(provider, model, pricing._to_usage(counters),
                                            {"service_tier": tier})
                assert pricing.estimate_cost(provider, model, counters, service_tier=tier) == want, (model, tier)
            entry = pricing._rates().get(provider, pricing._key(model, tier))
            kept += entry is not None and "bands" in entry
    assert kept >= len(models)  # (answered from kept rates, not by asking genai-prices each time)


def test_a_tier_without_a_variant_keeps_no_entry(cache):
    """Any other tier string (a hostile log can hold millions) is the standard rates, as
    genai-prices prices it, and adds nothing to the table."""
    c = {"input_tokens": 1000, "output_tokens": 300}
    std = pricing.estimate_cost("openai", "gpt-5.5", c)
    before = dict(pricing._rates().entries)
    for i in range(50):
        assert pricing.estimate_cost("openai", "gpt-5.5", c, service_tier=f"tier-{i}") == std
    assert pricing._rates().entries == before
    doc = orjson.loads((cache / price_rates.FILE_NAME).read_bytes())
    assert not any(k.count("\x00") > 1 and "tier-" in k for k in doc["entries"])
