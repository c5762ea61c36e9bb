"""The writer remembers a bounded number of sessions; one it forgot resumes correctly.

A long-running proxy sees a new session per agent run; the writer keeps per-session
tool-call state for the idle ones only up to `MAX_SESSION_STATES`, then restores a
session that comes back from its log, as after a restart. Driven by the real SDK.
"""

from __future__ import annotations

import openai

from taplog.proxy.keys import RECORDER
from taplog.recorder.store import writer
from tests.fakes.keys import OPENAI_KEY


def test_a_forgotten_session_resumes_with_its_tool_calls_paired_exactly_once(taplog, monkeypatch):
    monkeypatch.setattr(writer, "MAX_SESSION_STATES", 4)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]

    def client(session: str) -> openai.OpenAI:
        headers = {"X-Taplog-Session": session}
        return openai.OpenAI(
            base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY, max_retries=0, default_headers=headers
        )

    agent = client("agent")
    messages = [{"role": "user", "content": "Weather in Paris? !plan=get_weather,text"}]
    asked = agent.chat.completions.create(model="gpt-4.1", messages=messages, tools=tools)
    call = asked.choices[0].message.tool_calls[0]
    messages.append(asked.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny"})
    done = agent.chat.completions.create(model="gpt-4.1", messages=messages, tools=tools)

    for n in range(12):  # other sessions push the agent's idle state out of memory
        client(f"other-{n}").chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": f"hello {n}"}]
        )
    taplog.wait_responses(14)
    assert "agent" not in taplog.app[RECORDER]._states  # the premise: it was forgotten

    messages.append({"role": "assistant", "content": done.choices[0].message.content})
    messages.append({"role": "user", "content": "Thanks!"})  # resends the tool result
    agent.chat.completions.create(model="gpt-4.1", messages=messages, tools=tools)
    sessions = taplog.wait_responses(15)
    events = sessions["agent"]
    pres = [e for e in events if e["type"] == "tool.pre"]
    posts = [e for e in events if e["type"] == "tool.post"]
    assert [p["call_id"] for p in pres] == [call.id]
    assert [p["call_id"] for p in posts] == [call.id]  # not again, not as an orphan
    assert posts[0]["flags"] == [] and posts[0]["result"] == "sunny"
