"""Streams of calls taplog passes through without parsing them (a Responses stream resumed by
id, an Anthropic session's events): whole when the vendor's body ended whole, broken when it
broke off; either way as the client saw it, in the log."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest
from aiohttp import web

from tests.fakes.harness import start_taplog
from tests.fakes.recording_vendor import RecordingVendor
from tests.fakes.servers import ServerThread

EVENT = b'event: response.created\ndata: {"type":"response.created"}\n\n'


@pytest.fixture
def passing_through(servers: ServerThread, tmp_path):
    vendor = RecordingVendor("openai")
    vendor.url = servers.serve(vendor.app())
    anthropic_vendor = RecordingVendor("anthropic")
    anthropic_vendor.url = servers.serve(anthropic_vendor.app())
    return start_taplog(
        servers, tmp_path, openai_base=f"{vendor.url}/v1", anthropic_base=anthropic_vendor.url
    )


def _outcomes(taplog) -> list[tuple[str, str]]:
    taplog.wait_responses(1)
    return [(e["api"], e["outcome"]) for e in taplog.events("llm.response")]


def test_a_responses_stream_resumed_by_id_ends_whole(passing_through):
    client = openai.OpenAI(
        base_url=f"{passing_through.url}/v1", api_key="sk-test-0123456789", max_retries=0
    )
    events = list(client.responses.retrieve("resp_1", stream=True))
    assert events and events[-1].type == "response.completed"
    assert _outcomes(passing_through) == [("passthrough", "ok")]


def test_an_anthropic_sessions_event_stream_ends_whole(passing_through):
    client = anthropic.Anthropic(
        base_url=passing_through.url, api_key="sk-ant-0123456789", max_retries=0
    )
    events = list(client.beta.sessions.events.stream("sesn_1"))
    assert events
    assert _outcomes(passing_through) == [("passthrough", "ok")]


def test_a_pass_through_stream_that_breaks_off_is_broken_for_the_client_too(servers, tmp_path):
    async def breaks_off(request: web.Request) -> web.StreamResponse:
        answer = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await answer.prepare(request)
        await answer.write(EVENT)
        request.transport.close()  # no last chunk: the body is cut
        return answer

    app = web.Application()
    app.router.add_get("/v1/responses/resp_1", breaks_off)
    vendor = servers.serve(app)
    taplog = start_taplog(servers, tmp_path, openai_base=f"{vendor}/v1", anthropic_base=vendor)
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("GET", f"{taplog.url}/v1/responses/resp_1?stream=true") as answer,
    ):
        answer.read()
    assert _outcomes(taplog) == [("passthrough", "upstream_cut")]
