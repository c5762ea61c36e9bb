"""Cost of a call in USD, from litellm's model catalogue read as data.

litellm is never imported (PROTOCOLS.md §6): its bundled price file is found
with `importlib.util.find_spec`, which does not execute the package, and is
parsed once, on first use, on the writer thread. An unknown model costs None,
never a guess.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger("taplog.prices")

CATALOGUE_FILE = "model_prices_and_context_window_backup.json"


@functools.cache
def catalogue() -> dict[str, dict[str, Any]]:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        log.warning("litellm is not installed: costs will be empty")
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / CATALOGUE_FILE
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        log.warning("cannot read model prices from %s: %s", path, exc)
        return {}


def model_info(provider: str, model: str | None) -> dict[str, Any] | None:
    if not model:
        return None
    models = catalogue()
    return models.get(model) or models.get(f"{provider}/{model}")


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
    input_price = info.get("input_cost_per_token")
    output_price = info.get("output_cost_per_token")
    if input_price is None or output_price is None:
        return None
    cached, written = cached_tokens or 0, cache_write_tokens or 0
    uncached = max(0, input_tokens - cached - written)
    return (
        uncached * input_price
        + cached * (info.get("cache_read_input_token_cost") or input_price)
        + written * (info.get("cache_creation_input_token_cost") or input_price)
        + output_tokens * output_price
    )
