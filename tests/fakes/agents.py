"""Scripted agents driven by the official SDKs: the tool loop a real agent runs, one per API.

Each agent asks for two tools in parallel, then one tool that fails, then gets its answer, then
talks five more turns (resending the whole history where the API is stateless). The fake vendor
plans the tool calls from the prompt (`!plan=…`); the tools answer from `OUTCOMES`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from google.genai import types as genai_types

PLAN = "Plan my trip to Paris. !plan=get_weather+get_time,read_file,text"
TOOL_NAMES = ("get_weather", "get_time", "read_file")
# What each of the agent's tools returns, and whether it failed.
OUTCOMES = {
    "get_weather": ("sunny, 21°C", False),
    "get_time": ("12:00", False),
    "read_file": ("error: README.md: no such file", True),
}
TOOL_SECONDS = 0.02


def run_tool(name: str) -> tuple[str, bool]:
    time.sleep(TOOL_SECONDS)
    return OUTCOMES[name]


# -- one agent per API -----------------------------------------------------------------


def chat_agent(client, stream: bool) -> None:
    tools = [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
        for n in TOOL_NAMES
    ]
    messages = [{"role": "user", "content": PLAN}]

    def turn():
        kwargs = dict(model="gpt-4.1", messages=messages, tools=tools)
        if stream:
            with client.chat.completions.stream(**kwargs) as answer:
                return answer.get_final_completion().choices[0].message
        return client.chat.completions.create(**kwargs).choices[0].message

    while (message := turn()).tool_calls:
        messages.append(message.model_dump(exclude_none=True, exclude={"parsed"}))
        for call in message.tool_calls:
            output, _ = run_tool(call.function.name)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    for n in range(5):
        messages += [{"role": "assistant", "content": message.content}]
        messages += [{"role": "user", "content": f"More, please ({n})."}]
        message = turn()


def anthropic_agent(client, stream: bool) -> None:
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in TOOL_NAMES]
    messages = [{"role": "user", "content": PLAN}]

    def turn():
        kwargs = dict(model="claude-sonnet-4-6", max_tokens=1024, messages=messages, tools=tools)
        if stream:
            with client.messages.stream(**kwargs) as answer:
                return answer.get_final_message()
        return client.messages.create(**kwargs)

    while (answer := turn()).stop_reason == "tool_use":
        messages.append({"role": "assistant", "content": [b.model_dump() for b in answer.content]})
        results = []
        for use in (b for b in answer.content if b.type == "tool_use"):
            output, failed = run_tool(use.name)
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": use.id,
                    "content": output,
                    "is_error": failed,
                }
            )
        messages.append({"role": "user", "content": results})
    for n in range(5):
        messages.append({"role": "assistant", "content": answer.content[0].text})
        messages.append({"role": "user", "content": f"More, please ({n})."})
        answer = turn()


def responses_agent(client, stream: bool) -> None:
    """Non-stream: resends the whole history (store=false, like Codex). Stream: chains ids."""
    tools = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in TOOL_NAMES]
    history: list = [{"role": "user", "content": PLAN}]
    previous = None

    def turn(new_items):
        kwargs = dict(model="gpt-4.1", tools=tools)
        if stream:
            with client.responses.stream(
                input=new_items, previous_response_id=previous, **kwargs
            ) as answer:
                return answer.get_final_response()
        history.extend(new_items)
        return client.responses.create(input=list(history), store=False, **kwargs)

    answer = turn([history.pop()])
    while calls := [item for item in answer.output if item.type == "function_call"]:
        previous = answer.id
        if not stream:
            history.extend(item.model_dump(exclude_none=True) for item in answer.output)
        outputs = [
            {"type": "function_call_output", "call_id": c.call_id, "output": run_tool(c.name)[0]}
            for c in calls
        ]
        answer = turn(outputs)
    for n in range(5):
        previous = answer.id
        if not stream:
            history.append({"role": "assistant", "content": answer.output_text})
        answer = turn([{"role": "user", "content": f"More, please ({n})."}])


GEMINI_MODEL = "gemini-2.5-flash"


def gemini_agent(client, stream: bool, asynchronous: bool = False) -> list[str]:
    """The Gemini CLI's loop with the `google-genai` SDK: function declarations, the
    model's calls run by the agent and answered with `functionResponse` parts (ids echoed
    when the model gave them), each streamed chunk kept as its own model content (as the
    SDK's chats do). Returns the answers' texts."""
    declarations = [
        genai_types.FunctionDeclaration(name=n, parameters_json_schema={"type": "object"})
        for n in TOOL_NAMES
    ]
    config = genai_types.GenerateContentConfig(
        tools=[genai_types.Tool(function_declarations=declarations)],
        automatic_function_calling=genai_types.AutomaticFunctionCallingConfig(disable=True),
    )
    contents: list[Any] = [genai_types.Content(role="user", parts=[genai_types.Part(text=PLAN)])]
    texts: list[str] = []

    async def generate() -> list[Any]:
        kwargs = {"model": GEMINI_MODEL, "contents": contents, "config": config}
        if asynchronous and stream:
            chunks = await client.aio.models.generate_content_stream(**kwargs)
            return [chunk async for chunk in chunks]
        if asynchronous:
            return [await client.aio.models.generate_content(**kwargs)]
        if stream:
            return list(client.models.generate_content_stream(**kwargs))
        return [client.models.generate_content(**kwargs)]

    async def turn() -> list[Any]:
        answers = await generate()
        contents.extend(a.candidates[0].content for a in answers if a.candidates[0].content.parts)
        texts.append("".join(a.text or "" for a in answers))
        return [call for a in answers for call in a.function_calls or []]

    async def loop() -> None:
        while calls := await turn():
            responses = []
            for call in calls:
                output, failed = run_tool(call.name)
                response = genai_types.FunctionResponse(
                    id=call.id, name=call.name, response={"error" if failed else "output": output}
                )
                responses.append(genai_types.Part(function_response=response))
            contents.append(genai_types.Content(role="user", parts=responses))
        for n in range(5):
            more = genai_types.Part(text=f"More, please ({n}).")
            contents.append(genai_types.Content(role="user", parts=[more]))
            await turn()

    asyncio.run(loop())
    return texts


# agent, client fixture, model, whether the API can say a tool failed
AGENTS = {
    "chat": (chat_agent, "oai", "gpt-4.1", False),
    "anthropic": (anthropic_agent, "ant", "claude-sonnet-4-6", True),
    "responses": (responses_agent, "oai", "gpt-4.1", False),
}
