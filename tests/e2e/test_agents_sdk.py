"""The OpenAI Agents SDK (pip `openai-agents`) finishes its tool loop through an OpenAI
outage, served by Anthropic through taplog's Responses translation, stream and non-stream."""

from __future__ import annotations

import asyncio

import openai
import pytest
from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

from tests.fakes.harness import model_requests
from tests.fakes.keys import OPENAI_KEY

set_tracing_disabled(True)  # the SDK would send its traces to OpenAI


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _agent(proxy) -> Agent:
    client = openai.AsyncOpenAI(base_url=f"{proxy.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    model = OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
    return Agent(name="weather", instructions="Use your tools.", tools=[get_weather], model=model)


async def _run_agent(agent: Agent, stream: bool) -> str:
    prompt = "What is the weather in Paris? !plan=get_weather"
    if not stream:
        return (await Runner.run(agent, prompt)).final_output
    result = Runner.run_streamed(agent, prompt)
    async for _ in result.stream_events():
        pass
    return result.final_output


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
def test_an_agents_sdk_agent_finishes_its_tool_loop_while_openai_is_down(
    servers, vendors, tmp_path, stream
):
    rule = {"model": "gpt-*", "to": ["anthropic:claude-sonnet-4-6"]}
    proxy = vendors.proxy(servers, tmp_path / "data", {"fallback": [rule]})
    vendors.openai.down = {"status": "503"}

    answer = asyncio.run(_run_agent(_agent(proxy), stream))

    assert answer == "Done: sunny in Paris"
    assert len(model_requests(vendors.anthropic)) == 2  # the tool call, then the answer
    sessions = proxy.wait_for(
        lambda s: any(e["type"] == "tool.post" for v in s.values() for e in v)
    )
    (events,) = sessions.values()  # one session, chained by previous_response_id or stitched
    assert [e["name"] for e in events if e["type"] == "tool.pre"] == ["get_weather"]
