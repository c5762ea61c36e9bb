"""Costs as a user reads them: in the call line, `taplog sessions` and the SQL views."""

from __future__ import annotations

from decimal import Decimal

from taplog.recorder.prices import COST_DIGITS, cost_usd, model_info


def test_a_cost_is_the_exact_sum_of_its_prices_without_float_noise():
    info = model_info("openai", "gpt-4.1")
    assert info is not None and info.input_cost and info.output_cost
    for input_tokens in range(0, 5000, 7):
        for output_tokens in (0, 1, 131, 4096):
            cost = cost_usd("openai", "gpt-4.1", input_tokens, output_tokens)
            exact = Decimal(input_tokens) * Decimal(str(info.input_cost)) + Decimal(
                output_tokens
            ) * Decimal(str(info.output_cost))
            assert cost == float(round(exact, COST_DIGITS))
            assert len(repr(cost).partition(".")[2]) <= COST_DIGITS  # no 0.0070480000000000004
