"""Cost of a call in USD, from litellm's model catalogue read as data.

litellm is never imported (docs/protocols.md §6): its bundled price file is found
with `importlib.util.find_spec`, which does not execute the package, and is
parsed once, on first use, on the writer thread. An unknown model costs None,
never a guess.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from pathlib import Path
from typing import Any, NamedTuple

import orjson

log = logging.getLogger("taplog.prices")

CATALOGUE_FILE = "model_prices_and_context_window_backup.json"


class ModelFacts(NamedTuple):
    """What taplog reads of a model in the catalogue: its prices per token, whether it
    takes an assistant prefill (proxy.failover.continuation), its context window (a rejection
    for length moves to a larger one, proxy.chain). Kept whole, the catalogue's
    entries held about 5 MB for as long as taplog ran."""

    input_cost: float | None
    output_cost: float | None
    cache_read_cost: float | None
    cache_write_cost: float | None
    assistant_prefill: bool
    context_window: int | None  # input tokens it takes (`max_input_tokens`)

    @classmethod
    def of(cls, info: dict[str, Any]) -> ModelFacts:
        window = info.get("max_input_tokens")
        return cls(
            info.get("input_cost_per_token"),
            info.get("output_cost_per_token"),
            info.get("cache_read_input_token_cost"),
            info.get("cache_creation_input_token_cost"),
            info.get("supports_assistant_prefill") is True,
            window if type(window) is int else None,
        )


@functools.cache
def catalogue() -> dict[str, ModelFacts]:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        log.warning("litellm is not installed: costs will be empty")
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / CATALOGUE_FILE
    try:
        models = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        log.warning("cannot read model prices from %s: %s", path, exc)
        return {}
    return {name: ModelFacts.of(info) for name, info in models.items() if isinstance(info, dict)}


def model_info(provider: str, model: str | None) -> ModelFacts | None:
    if not model:
        return None
    models = catalogue()
    return models.get(model) or models.get(f"{provider}/{model}")


COST_DIGITS = 12  # a millionth of a millionth of a dollar: far below any price


def cost_usd(
    provider: str,
    model: str | None,
    input_tokens: int | None,
    output_tokens: int | None,
    cached_tokens: int | None = None,
    cache_write_tokens: int | None = None,
) -> float | None:
    """Price of one call; `input_tokens` counts all input, cached included."""
    info = model_info(provider, model)
    if info is None or input_tokens is None or output_tokens is None:
        return None
    input_price, output_price = info.input_cost, info.output_cost
    if input_price is None or output_price is None:
        return None
    cached, written = cached_tokens or 0, cache_write_tokens or 0
    uncached = max(0, input_tokens - cached - written)
    cost = (
        uncached * input_price
        + cached * (info.cache_read_cost or input_price)
        + written * (info.cache_write_cost or input_price)
        + output_tokens * output_price
    )
    # per-token prices are binary fractions: the sum carries noise (0.0070480000000000004)
    return round(cost, COST_DIGITS)
