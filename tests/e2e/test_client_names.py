"""The libraries people build agents with, the real ones against the fake vendors through
taplog: `taplog sessions` names the client of each session by what it sends (`user-agent`).

litellm's own HTTP client (its Anthropic and Responses routes) says `litellm/<version>`;
its OpenAI Chat route is the OpenAI Python SDK, sent exactly as the SDK sends it, so it is
named that. langchain-anthropic is the Anthropic SDK under its own user agent, the OpenAI
Agents SDK the OpenAI SDK under its own.
"""

from __future__ import annotations

import json

import openai
from agents import Agent, OpenAIResponsesModel, Runner, set_tracing_disabled
from click.testing import CliRunner
from langchain_anthropic import ChatAnthropic

from taplog.proxy.cli.main import main
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY

set_tracing_disabled(True)  # the Agents SDK would send its traces to OpenAI


def _clients(taplog) -> dict[str, str | None]:
    """`taplog sessions`: each session's prompt -> its client."""
    taplog.flush()
    data = ["--data-dir", str(taplog.data_dir), "--format", "jsonl"]
    listed = CliRunner().invoke(main, ["sessions", *data])
    assert listed.exit_code == 0, listed.output
    return {r["prompt"]: r["client"] for r in map(json.loads, listed.output.splitlines())}


def test_litellm_langchain_and_the_agents_sdk_are_named_in_the_session_list(taplog, monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of its prices
    import litellm

    def ask(prompt: str, model: str, **route: str) -> None:
        messages = [{"role": "user", "content": prompt}]
        litellm.completion(model=model, messages=messages, max_tokens=64, **route)

    ask(
        "To Anthropic by litellm",
        "anthropic/claude-sonnet-4-6",
        api_base=taplog.url,
        api_key=ANTHROPIC_KEY,
    )
    ask("To OpenAI by litellm", "openai/gpt-4.1", api_base=f"{taplog.url}/v1", api_key=OPENAI_KEY)
    litellm.responses(
        model="openai/gpt-4.1",
        input="To Responses by litellm",
        api_base=f"{taplog.url}/v1",
        api_key=OPENAI_KEY,
    )
    chat = ChatAnthropic(
        model="claude-sonnet-4-6", base_url=taplog.url, api_key=ANTHROPIC_KEY, max_retries=0
    )
    chat.invoke("To Anthropic by LangChain")
    client = openai.AsyncOpenAI(base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    model = OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
    Runner.run_sync(Agent(name="echo", model=model), "To Responses by the Agents SDK")
    taplog.wait_answers(5)

    assert _clients(taplog) == {
        "To Anthropic by litellm": "litellm",
        "To OpenAI by litellm": "OpenAI Python SDK",
        "To Responses by litellm": "litellm",
        "To Anthropic by LangChain": "langchain-anthropic",
        "To Responses by the Agents SDK": "OpenAI Agents SDK",
    }
