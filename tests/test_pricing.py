"""ledger.pricing: estimates from the pinned price table (genai-prices); unknown is not 0."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ledger.pricing import estimate_cost, price_data_version

# Claude Code's own figures for the recorded tool-then-answer run (tests/data/streams)
CLAUDE_RUN = {"input_tokens": 203, "output_tokens": 43, "cache_read_tokens": 3000, "cache_write_tokens": 150}


def test_claude_run_is_priced_like_claude_code_prices_it():
    cost, why = estimate_cost("anthropic", "claude-sonnet-4-5", CLAUDE_RUN)
    assert why is None
    assert cost == pytest.approx(0.0027165, rel=1e-12)  # Claude Code's total_cost_usd


def test_provider_is_optional():
    assert estimate_cost(None, "claude-sonnet-4-5", CLAUDE_RUN)[0] == pytest.approx(0.0027165, rel=1e-12)


def test_five_minute_split_prices_the_same_as_the_default_write_rate():
    split = dict(CLAUDE_RUN, cache_write_5m_tokens=150, cache_write_1h_tokens=0)
    assert estimate_cost("anthropic", "claude-sonnet-4-5", split)[0] == pytest.approx(0.0027165, rel=1e-12)


def test_one_hour_writes_cost_more():
    five = estimate_cost("anthropic", "claude-sonnet-4-5", dict(CLAUDE_RUN, cache_write_5m_tokens=150,
                                                                 cache_write_1h_tokens=0))[0]
    hour = estimate_cost("anthropic", "claude-sonnet-4-5", dict(CLAUDE_RUN, cache_write_5m_tokens=0,
                                                                 cache_write_1h_tokens=150))[0]
    assert hour > five


def test_codex_run_uncached_plus_cached():
    cost, why = estimate_cost("openai", "gpt-5.5", {"input_tokens": 200, "cache_read_tokens": 203,
                                                    "output_tokens": 63})
    assert why is None and cost > 0
    more, _ = estimate_cost("openai", "gpt-5.5", {"input_tokens": 403, "output_tokens": 63})
    assert more > cost  # cached input is cheaper


@pytest.mark.parametrize("model", ["claude-mock", "nonexistent-model-x"])
def test_unknown_model_is_unknown_not_zero(model):
    cost, why = estimate_cost("anthropic", model, CLAUDE_RUN)
    assert cost is None and model in why and "genai-prices" in why


def test_missing_model_or_counters_is_unknown():
    assert estimate_cost("anthropic", None, CLAUDE_RUN) == (None, "model unknown")
    cost, why = estimate_cost("anthropic", "claude-sonnet-4-5", {"input_tokens": 5})
    assert cost is None and "unknown" in why


def test_measured_zero_costs_zero():
    assert estimate_cost("anthropic", "claude-sonnet-4-5", {"input_tokens": 0, "output_tokens": 0}) == (0.0, None)


def test_bad_counter_is_reported():
    cost, why = estimate_cost("anthropic", "claude-sonnet-4-5", {"input_tokens": -1, "output_tokens": 1})
    assert cost is None and "input_tokens" in why


def test_price_data_version_names_the_package():
    assert price_data_version().startswith("genai-prices 0.2.3")


def test_importing_pricing_does_not_import_the_price_table():
    code = "import sys, ledger.pricing; print('genai_prices' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_service_tier_is_priced_at_genai_prices_variant_for_it():
    """Codex 0.169 writes `service_tier: "priority"` (issue 25): genai-prices 0.2.3 has a
    priority variant for gpt-5.5 ($12.50 / $1.25 / $75 per million input / cached / output,
    standard $5 / $0.50 / $30);
    `default` and None are the standard rates; a tier it has no variant for: the standard."""
    from genai_prices import Usage, calc_price

    c = {"input_tokens": 100_000, "cache_read_tokens": 50_000, "output_tokens": 10_000}
    std, why = estimate_cost("openai", "gpt-5.5", c)
    assert why is None and estimate_cost("openai", "gpt-5.5", c, service_tier="default") == (std, None)
    fast, why = estimate_cost("openai", "gpt-5.5", c, service_tier="priority")
    want = calc_price(Usage(input_tokens=150_000, cache_read_tokens=50_000, output_tokens=10_000), "gpt-5.5",
                      provider_id="openai", price_context={"service_tier": "priority"}).total_price
    assert why is None and fast == pytest.approx(float(want), abs=1e-12) and fast > std
    assert estimate_cost("openai", "gpt-5.5", c, service_tier="no-such-tier") == (pytest.approx(std), None)
    assert estimate_cost("openai", "no-such-model", c, service_tier="priority")[0] is None
