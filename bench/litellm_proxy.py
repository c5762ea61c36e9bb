"""LiteLLM's proxy server in front of the fake vendor, for comparison (the `bench` extra).

`start_litellm` runs `litellm --config CFG` as a process of its own on 127.0.0.1:
one uvicorn worker, no database, no master key, telemetry off and the model
price map read from the package (its default fetches it from GitHub). The config
routes the bench's two models to the fake vendor with dummy keys: `gpt-4.1` as an
OpenAI model at the fake's /v1, `claude-sonnet-4-6` as an Anthropic model.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

import orjson

from bench.common import KEYS, PYTHON, Service, free_port

INSTALL = "pip install -e '.[bench]'"
# Modules the proxy server needs that plain `litellm` does not bring.
PROXY_MODULES = ("fastapi", "uvicorn", "litellm_proxy_extras")
LITELLM = "import sys; from litellm import run_server; sys.argv[0] = 'litellm'; run_server()"
# Without a master key LiteLLM refuses to start unless told this is local use, as here.
ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY_DISABLED": "true",
    "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true",
}
UNSET = ("DATABASE_URL", "LITELLM_MASTER_KEY", "REDIS_HOST", "REDIS_URL")
START_SECONDS = 90  # it imports a lot: about 10 s on 2 cores


def installed() -> bool:
    """True when `litellm[proxy]` is importable (the `bench` extra)."""
    return all(importlib.util.find_spec(name) is not None for name in PROXY_MODULES)


def config(fake_url: str) -> dict[str, object]:
    """The model_list routing the bench's models to the fake vendor (YAML reads JSON)."""
    return {
        "model_list": [
            {
                "model_name": "gpt-4.1",
                "litellm_params": {
                    "model": "openai/gpt-4.1",
                    "api_base": f"{fake_url}/v1",
                    "api_key": KEYS["OPENAI_API_KEY"],
                },
            },
            {
                "model_name": "claude-sonnet-4-6",
                "litellm_params": {
                    "model": "anthropic/claude-sonnet-4-6",
                    "api_base": fake_url,
                    "api_key": KEYS["ANTHROPIC_API_KEY"],
                },
            },
        ],
    }


def start_litellm(fake_url: str) -> Service:
    path = Path(tempfile.mkdtemp(prefix="litellm-bench-")) / "config.yaml"
    path.write_bytes(orjson.dumps(config(fake_url), option=orjson.OPT_INDENT_2))
    port = free_port()
    command = [PYTHON, "-c", LITELLM, "--config", str(path), "--host", "127.0.0.1"]
    command += ["--port", str(port), "--num_workers", "1"]
    env = {k: v for k, v in os.environ.items() if k not in UNSET} | ENV
    return Service(command, port, "/health/liveliness", wait=START_SECONDS, env=env)
