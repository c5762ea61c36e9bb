"""The fake vendors, driven directly by the official SDKs.

If these pass, a difference seen through taplog is taplog's doing: the fake
answers every call the SDKs make, in shapes they reassemble without complaint.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from tests.fakes.encoded import Encoding, encoding_sdk
from tests.fakes.harness import serve_fake
from tests.fakes.servers import ServerThread
from tests.fakes.vendor import FakeVendor

MODEL, CLAUDE = "gpt-4o-mini", "claude-sonnet-5-5"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture(scope="module")
def fake_thread() -> Iterator[ServerThread]:
    with ServerThread() as servers:
        yield servers


@pytest.fixture
def lone_fake(fake_thread: ServerThread) -> FakeVendor:
    return serve_fake(fake_thread)


@pytest.fixture
def fake_oai(lone_fake: FakeVendor) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{lone_fake.url}/v1", api_key="sk-test", max_retries=0) as client:
        yield client


@pytest.fixture
def fake_ant(lone_fake: FakeVendor) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        base_url=lone_fake.url, api_key="sk-ant-test", max_retries=0
    ) as client:
        yield client


def event_names(raw: bytes) -> list[str]:
    return [line[7:] for line in raw.decode().splitlines() if line.startswith("event: ")]


def data_lines(raw: bytes) -> list[str]:
    return [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]


# ---------------------------------------------------------------- OpenAI Chat


def test_chat_text_usage_and_headers(lone_fake: FakeVendor, fake_oai: openai.OpenAI) -> None:
    raw = fake_oai.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "hello !cached=4 world"}]
    )
    answer = raw.parse()
    assert answer.choices[0].message.content == "Echo: hello world"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.id.startswith("chatcmpl-") and answer.created == 1767225600
    usage = answer.usage
    assert usage and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details and usage.prompt_tokens_details.cached_tokens == 4
    assert raw.headers["x-request-id"].startswith("req_")
    assert raw.headers["x-ratelimit-remaining-requests"] == "9999"
    got = lone_fake.requests[0]
    assert (got.method, got.path) == ("POST", "/v1/chat/completions")
    assert got.headers["authorization"] == "Bearer sk-test"


def test_chat_stream_framing(lone_fake: FakeVendor, fake_oai: openai.OpenAI) -> None:
    with fake_oai.chat.completions.stream(
        model=MODEL,
        messages=[{"role": "user", "content": "stream me !events=4"}],
        stream_options={"include_usage": True},
    ) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "Echo: stream me"
    assert final.usage and final.usage.completion_tokens > 0
    chunks = data_lines(lone_fake.sent[0])
    assert chunks[-1] == "[DONE]"
    parsed = [json.loads(c) for c in chunks[:-1]]
    assert parsed[0]["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    assert sum("content" in p["choices"][0]["delta"] for p in parsed[1:-1]) == 4
    assert parsed[-2]["choices"][0]["finish_reason"] == "stop"
    assert parsed[-1]["choices"] == [] and parsed[-1]["usage"]["total_tokens"] > 0
    assert all(p["usage"] is None for p in parsed[:-1])
    assert len({p["id"] for p in parsed}) == 1


def test_chat_parallel_tool_calls_stream(fake_oai: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": "weather? !plan=get_weather+read_file"}]
    with fake_oai.chat.completions.stream(
        model=MODEL, messages=messages, tools=[WEATHER_TOOL]
    ) as stream:  # type: ignore[list-item]
        final = stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    calls = choice.message.tool_calls or []
    assert [c.function.name for c in calls] == ["get_weather", "read_file"]
    assert [json.loads(c.function.arguments) for c in calls] == [
        {"city": "Paris"},
        {"path": "README.md"},
    ]
    assert all(c.id.startswith("call_") for c in calls)


def test_chat_tool_loop_follows_the_plan(fake_oai: openai.OpenAI) -> None:
    messages: list[dict] = [{"role": "user", "content": "go !plan=get_weather+get_time,read_file"}]
    results = iter(["sunny", "noon", "# README"])
    for expected in (["get_weather", "get_time"], ["read_file"]):
        message = (
            fake_oai.chat.completions.create(model=MODEL, messages=messages).choices[0].message
        )
        assert [c.function.name for c in message.tool_calls or []] == expected
        messages.append(message.model_dump(exclude_none=True))
        messages += [
            {"role": "tool", "tool_call_id": c.id, "content": next(results)}
            for c in message.tool_calls or []
        ]
    final = fake_oai.chat.completions.create(model=MODEL, messages=messages)
    assert final.choices[0].message.content == "Done: # README"


def test_chat_noargs(lone_fake: FakeVendor, fake_oai: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": "!plan=list_files !noargs"}]
    call = (
        fake_oai.chat.completions.create(model=MODEL, messages=messages)
        .choices[0]
        .message.tool_calls
        or []
    )[0]
    assert call.function.arguments == "{}"
    with fake_oai.chat.completions.stream(model=MODEL, messages=messages) as stream:
        streamed = stream.get_final_completion().choices[0].message.tool_calls or []
    assert streamed[0].function.arguments == ""  # the stream carries no argument fragments


# ---------------------------------------------------------------- OpenAI Responses


def test_responses_text_stream_order(lone_fake: FakeVendor, fake_oai: openai.OpenAI) -> None:
    with fake_oai.responses.stream(model=MODEL, input="hi there") as stream:
        final = stream.get_final_response()
    assert final.output_text == "Echo: hi there" and final.status == "completed"
    assert final.usage and final.usage.total_tokens > 0
    names = event_names(lone_fake.sent[0])
    assert names == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * 3,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    numbers = [json.loads(d)["sequence_number"] for d in data_lines(lone_fake.sent[0])]
    assert numbers == list(range(len(names)))
    plain = fake_oai.responses.create(model=MODEL, input="hi there")
    assert plain.output_text == final.output_text and plain.id.startswith("resp_")


def test_responses_function_calls_and_reasoning(
    lone_fake: FakeVendor, fake_oai: openai.OpenAI
) -> None:
    with fake_oai.responses.stream(
        model=MODEL, input="!thinking !plan=get_weather+get_time"
    ) as stream:
        final = stream.get_final_response()
    kinds = [item.type for item in final.output]
    assert kinds == ["reasoning", "function_call", "function_call"]
    calls = [item for item in final.output if item.type == "function_call"]
    assert [json.loads(c.arguments) for c in calls] == [{"city": "Paris"}, {"q": "get_time"}]
    assert calls[0].call_id.startswith("call_") and (calls[0].id or "").startswith("fc_")
    assert final.usage and final.usage.output_tokens_details.reasoning_tokens > 0
    names = event_names(lone_fake.sent[0])
    assert "response.reasoning_summary_text.delta" in names
    assert names.count("response.function_call_arguments.done") == 2


def test_responses_tool_loop_replayed_and_chained(fake_oai: openai.OpenAI) -> None:
    prompt = "loop !plan=read_file"
    first = fake_oai.responses.create(model=MODEL, input=prompt)
    call = first.output[0]
    assert call.type == "function_call"
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "# README"}
    replayed = fake_oai.responses.create(
        model=MODEL,
        input=[{"role": "user", "content": prompt}, call.model_dump(exclude_none=True), result],
    )
    assert replayed.output_text == "Done: # README"
    chained = fake_oai.responses.create(model=MODEL, previous_response_id=first.id, input=[result])
    assert chained.output_text == "Done: # README"


# ---------------------------------------------------------------- Anthropic Messages


def test_messages_text_and_usage(lone_fake: FakeVendor, fake_ant: anthropic.Anthropic) -> None:
    raw = fake_ant.messages.with_raw_response.create(
        model=CLAUDE, max_tokens=100, messages=[{"role": "user", "content": "hey !cached=3"}]
    )
    message = raw.parse()
    assert message.content[0].type == "text" and message.content[0].text == "Echo: hey"
    assert message.stop_reason == "end_turn" and message.id.startswith("msg_01")
    assert message.usage.cache_read_input_tokens == 3 and message.usage.output_tokens > 0
    assert raw.headers["request-id"].startswith("req_")
    assert "anthropic-ratelimit-requests-remaining" in raw.headers


def test_messages_stream_thinking_and_tools(
    lone_fake: FakeVendor, fake_ant: anthropic.Anthropic
) -> None:
    with fake_ant.messages.stream(
        model=CLAUDE,
        max_tokens=100,
        messages=[{"role": "user", "content": "!thinking !plan=get_weather+read_file"}],
    ) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "tool_use", "tool_use"]
    thinking = final.content[0]
    assert thinking.type == "thinking" and thinking.thinking and thinking.signature
    assert [b.input for b in final.content if b.type == "tool_use"] == [
        {"city": "Paris"},
        {"path": "README.md"},
    ]
    assert final.stop_reason == "tool_use" and final.usage.output_tokens > 1
    names = event_names(lone_fake.sent[0])
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert "signature_delta" in lone_fake.sent[0].decode()


def test_messages_tool_loop(fake_ant: anthropic.Anthropic) -> None:
    messages: list[dict] = [{"role": "user", "content": "weather !plan=get_weather,text"}]
    first = fake_ant.messages.create(model=CLAUDE, max_tokens=50, messages=messages)
    use = first.content[0]
    assert use.type == "tool_use" and use.id.startswith("toolu_")
    messages += [
        {"role": "assistant", "content": [use.model_dump(exclude_none=True)]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}],
        },
    ]
    second = fake_ant.messages.create(model=CLAUDE, max_tokens=50, messages=messages)
    assert second.content[0].type == "text" and second.content[0].text == "Echo: weather"
    messages += [
        {"role": "assistant", "content": "Echo: weather"},
        {"role": "user", "content": "more"},
    ]
    third = fake_ant.messages.create(model=CLAUDE, max_tokens=50, messages=messages)
    assert third.content[0].type == "text" and third.content[0].text == "Done: "


def test_messages_noargs_sends_no_json_delta(
    lone_fake: FakeVendor, fake_ant: anthropic.Anthropic
) -> None:
    with fake_ant.messages.stream(
        model=CLAUDE,
        max_tokens=50,
        messages=[{"role": "user", "content": "!plan=list_files !noargs"}],
    ) as stream:
        final = stream.get_final_message()
    assert final.content[0].type == "tool_use" and final.content[0].input == {}
    assert b"input_json_delta" not in lone_fake.sent[0]


def test_count_tokens_models_embeddings(
    fake_ant: anthropic.Anthropic, fake_oai: openai.OpenAI
) -> None:
    count = fake_ant.messages.count_tokens(
        model=CLAUDE, messages=[{"role": "user", "content": "x"}]
    )
    assert count.input_tokens > 0
    assert [m.id for m in fake_oai.models.list()] == ["gpt-4o-mini", "gpt-4.1"]
    vectors = fake_oai.embeddings.create(model="text-embedding-3-small", input=["a", "b"]).data
    assert len(vectors) == 2 and len(vectors[0].embedding) == 8


# ---------------------------------------------------------------- scripted failures


def test_status_errors_raise_the_sdk_exceptions(
    lone_fake: FakeVendor, fake_oai: openai.OpenAI, fake_ant: anthropic.Anthropic
) -> None:
    with pytest.raises(openai.InternalServerError) as oerr:
        fake_oai.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "!status=500"}]
        )
    assert "fake" in oerr.value.message and oerr.value.body["type"] == "server_error"
    with pytest.raises(anthropic.OverloadedError) as aerr:
        fake_ant.messages.create(
            model=CLAUDE,
            max_tokens=9,
            messages=[
                {"role": "user", "content": "!status=529 !retry_after=3 !should_retry=false"}
            ],
        )
    assert aerr.value.body["error"]["type"] == "overloaded_error"
    assert aerr.value.response.headers["retry-after"] == "3"
    assert aerr.value.response.headers["x-should-retry"] == "false"
    with pytest.raises(openai.RateLimitError) as rerr:
        fake_oai.responses.create(model=MODEL, input="!status=429")
    assert "x-should-retry" not in rerr.value.response.headers
    bad = openai.OpenAI(base_url=f"{lone_fake.url}/v1", api_key="sk-bad", max_retries=0)
    with bad, pytest.raises(openai.AuthenticationError):
        bad.models.list()
    missing = httpx.post(f"{lone_fake.url}/v1/messages", json={})
    assert missing.status_code == 401 and missing.json()["error"]["type"] == "authentication_error"


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd", "gzip, br"])
def test_request_bodies_are_read_as_their_content_encoding_says(
    lone_fake: FakeVendor, coding: str
) -> None:
    encoding = Encoding(coding)
    oai = encoding_sdk("openai", lone_fake.url, encoding)
    answer = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == "Echo: hi"
    assert lone_fake.requests[-1].body == encoding.sent[-1]  # kept as it arrived
    with pytest.raises(openai.BadRequestError, match="not in its Content-Encoding"):
        openai.OpenAI(
            base_url=f"{lone_fake.url}/v1",
            api_key="sk-test",
            max_retries=0,
            default_headers={"content-encoding": coding},  # over the SDK's plain JSON
        ).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])


def test_gzip_bodies_and_streams(
    lone_fake: FakeVendor, fake_oai: openai.OpenAI, fake_ant: anthropic.Anthropic
) -> None:
    text = "zip it !gzip"
    plain = fake_oai.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": text}]
    )
    assert plain.headers["content-encoding"] == "gzip"
    assert plain.parse().choices[0].message.content == "Echo: zip it"
    with fake_ant.messages.stream(
        model=CLAUDE, max_tokens=9, messages=[{"role": "user", "content": text}]
    ) as stream:
        assert stream.get_final_text() == "Echo: zip it"
    assert lone_fake.sent[1].startswith(b"event: message_start")  # recorded before compression


def test_inband_error_and_cut(
    lone_fake: FakeVendor, fake_oai: openai.OpenAI, fake_ant: anthropic.Anthropic
) -> None:
    with (
        pytest.raises(anthropic.APIStatusError, match="fake"),
        fake_ant.messages.stream(
            model=CLAUDE, max_tokens=9, messages=[{"role": "user", "content": "!inband_error"}]
        ) as stream,
    ):
        stream.get_final_message()
    assert event_names(lone_fake.sent[0]) == ["message_start", "content_block_start", "error"]
    with pytest.raises(openai.APIError, match="fake"):
        list(
            fake_oai.chat.completions.create(
                model=MODEL, stream=True, messages=[{"role": "user", "content": "!inband_error"}]
            )
        )
    with pytest.raises(openai.APIConnectionError):
        list(
            fake_oai.chat.completions.create(
                model=MODEL, stream=True, messages=[{"role": "user", "content": "!cut=2"}]
            )
        )
    assert len(data_lines(lone_fake.sent[2])) == 2
    with pytest.raises(openai.APIConnectionError):
        fake_oai.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "!cut"}]
        )
    with pytest.raises(json.JSONDecodeError):  # only half of the body was sent
        json.loads(lone_fake.sent[3])


def test_hang_ends_when_the_client_gives_up(lone_fake: FakeVendor) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "!hang"}]}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{lone_fake.url}/v1/chat/completions",
            json=body,
            timeout=0.3,
            headers={"Authorization": "Bearer sk-test"},
        )
    assert lone_fake.sent == [b""]


def test_big_delay_and_ttfb(lone_fake: FakeVendor, fake_ant: anthropic.Anthropic) -> None:
    started = time.monotonic()
    with fake_ant.messages.stream(
        model=CLAUDE,
        max_tokens=9,
        messages=[{"role": "user", "content": "!big=5000 !events=2 !delay=0.05 !ttfb=0.1"}],
    ) as stream:
        text = stream.get_final_text()
    assert len(text.encode()) == 5000 and text.startswith("Echo:")
    assert time.monotonic() - started >= 0.15


def test_identical_requests_give_identical_bytes(
    lone_fake: FakeVendor, fake_oai: openai.OpenAI, fake_ant: anthropic.Anthropic
) -> None:
    for _ in range(2):
        list(
            fake_oai.responses.create(
                model=MODEL, input="same !thinking !plan=get_weather", stream=True
            )
        )
        list(
            fake_oai.chat.completions.create(
                model=MODEL, stream=True, messages=[{"role": "user", "content": "same"}]
            )
        )
        fake_ant.messages.create(
            model=CLAUDE,
            max_tokens=9,
            messages=[{"role": "user", "content": "same !plan=read_file"}],
        )
    assert lone_fake.sent[:3] == lone_fake.sent[3:]
    assert all(lone_fake.sent)
