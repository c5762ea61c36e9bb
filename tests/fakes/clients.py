"""The tests' side of taplog: SDK clients that keep what they saw, a call that collects the text
as the client sees it, a scraper of `/metrics`, `taplog sql` as a user runs it, and a caller
waiting on the log.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import orjson
from click.testing import CliRunner
from google import genai
from google.genai import types as genai_types
from prometheus_client.parser import text_string_to_metric_families

from taplog.proxy.cli.main import main
from taplog.recorder.store.writer import Recorder
from tests.fakes.keys import ANTHROPIC_KEY, GEMINI_KEY, OPENAI_KEY

_DROP = ("content-encoding", "content-length", "transfer-encoding")


def openai_at(url: str, **options: Any) -> openai.OpenAI:
    """The OpenAI SDK for taplog (or a fake vendor) at `url`: the test key, no retries."""
    return openai.OpenAI(base_url=f"{url}/v1", api_key=OPENAI_KEY, max_retries=0, **options)


def anthropic_at(url: str, **options: Any) -> anthropic.Anthropic:
    """The Anthropic SDK for taplog (or a fake vendor) at `url`: the test key, no retries."""
    return anthropic.Anthropic(base_url=url, api_key=ANTHROPIC_KEY, max_retries=0, **options)


def gemini_at(url: str, api_version: str | None = None) -> genai.Client:
    """Google's `google-genai` SDK for taplog (or a fake vendor) at `url` (as
    GOOGLE_GEMINI_BASE_URL names it), the test key, no retries; `api_version` as the SDK
    chooses it (`v1`) unless given (`v1beta`, the Gemini CLI's)."""
    options = genai_types.HttpOptions(
        base_url=url,
        api_version=api_version,
        retry_options=genai_types.HttpRetryOptions(attempts=1),
    )
    return genai.Client(api_key=GEMINI_KEY, http_options=options)


class Capture:
    """Every exchange the SDK made: path, request body, status, answer bytes.

    A transport of the SDK's own HTTP library (the anthropic SDK ships `httpx2`).
    """

    def __init__(self) -> None:
        self.seen: list[tuple[str, bytes, int, bytes]] = []

    def transport(self, http: Any) -> Any:
        seen = self.seen

        class Transport(http.HTTPTransport):
            def handle_request(self, request: Any) -> Any:
                response = super().handle_request(request)
                content = response.read()
                seen.append((request.url.path, request.content, response.status_code, content))
                headers = [(k, v) for k, v in response.headers.items() if k.lower() not in _DROP]
                return http.Response(response.status_code, headers=headers, content=content)

        return Transport()


def sdk_client(api: str, base: str, capture: Capture | None = None):
    """The official SDK for `api` at `base`, through a capturing transport if one is given."""
    http = httpx2 if api == "anthropic" else httpx
    transport = capture.transport(http) if capture else http.HTTPTransport()
    http_client = http.Client(transport=transport)
    if api == "anthropic":
        return anthropic_at(base, http_client=http_client)
    return openai_at(base, http_client=http_client)


# -- one call, the text collected as the client sees it ----------------------------------

STORY_PROMPT = "tell me a long story about the sea !events=6"
STORY_ANSWER = "Echo: tell me a long story about the sea"
OWN_VENDOR = {
    "openai.chat": "openai",
    "openai.responses": "openai",
    "anthropic.messages": "anthropic",
    "gemini.generate": "gemini",
}
OTHER_VENDOR = {"openai": "anthropic", "anthropic": "openai", "gemini": "anthropic"}
VENDOR_MODEL = {"openai": "gpt-4.1", "anthropic": "claude-sonnet-4-6", "gemini": "gemini-2.5-flash"}


@dataclass
class SdkAnswer:
    """What the client got: the text it was given, and what its SDK raised (if anything)."""

    text: str
    error: BaseException | None
    usage: int | None = None  # output tokens the answer reported


def ask_sdk(url: str, api: str, stream: bool, prompt: str = STORY_PROMPT, **extra) -> SdkAnswer:
    """One call with the official SDK, the text collected as the client sees it."""
    text: list[str] = []
    usage = None
    try:
        if api == "gemini.generate":
            client = gemini_at(url)  # held: a client collected closes its connections
            models = client.models
            ask = {"model": VENDOR_MODEL["gemini"], "contents": prompt, **extra}
            if stream:
                for chunk in models.generate_content_stream(**ask):
                    text.append(chunk.text or "")
                    if chunk.usage_metadata and chunk.usage_metadata.candidates_token_count:
                        usage = chunk.usage_metadata.candidates_token_count
            else:
                text.append(models.generate_content(**ask).text or "")
        elif api == "anthropic.messages":
            client = anthropic.Anthropic(base_url=url, api_key=ANTHROPIC_KEY, max_retries=0)
            kwargs = dict(model=VENDOR_MODEL["anthropic"], max_tokens=200, **extra)
            kwargs["messages"] = [{"role": "user", "content": prompt}]
            if stream:
                with client.messages.stream(**kwargs) as events:
                    text.extend(events.text_stream)
                    usage = events.get_final_message().usage.output_tokens
            else:
                message = client.messages.create(**kwargs)
                text.append(message.content[0].text)
        else:
            client = openai.OpenAI(base_url=f"{url}/v1", api_key=OPENAI_KEY, max_retries=0)
            if api == "openai.chat":
                messages = [{"role": "user", "content": prompt}]
                if stream:
                    for chunk in client.chat.completions.create(
                        model=VENDOR_MODEL["openai"],
                        messages=messages,
                        stream=True,
                        stream_options={"include_usage": True},
                        **extra,
                    ):
                        if chunk.choices and chunk.choices[0].delta.content:
                            text.append(chunk.choices[0].delta.content)
                        if chunk.usage is not None:
                            usage = chunk.usage.completion_tokens
                else:
                    answer = client.chat.completions.create(
                        model=VENDOR_MODEL["openai"], messages=messages
                    )
                    text.append(answer.choices[0].message.content)
            elif stream:
                for event in client.responses.create(
                    model=VENDOR_MODEL["openai"], input=prompt, stream=True
                ):
                    if event.type == "response.output_text.delta":
                        text.append(event.delta)
                    elif event.type == "error":  # the API's own way to say the stream failed
                        raise openai.APIError(event.message, request=None, body=None)
            else:
                text.append(
                    client.responses.create(model=VENDOR_MODEL["openai"], input=prompt).output_text
                )
    except Exception as exc:  # any raise counts: the SDK did not take the answer for whole
        return SdkAnswer("".join(text), exc, usage)
    return SdkAnswer("".join(text), None, usage)


# -- /metrics, parsed ----------------------------------------------------------------------


class Scrape:
    """One parsed scrape: families by name, and sums over samples that match labels."""

    def __init__(self, url: str) -> None:
        response = httpx.get(f"{url}/metrics")
        assert response.status_code == 200
        self.content_type = response.headers["content-type"]
        self.text = response.text
        self.families = {f.name: f for f in text_string_to_metric_families(self.text)}
        self.samples = [s for f in self.families.values() for s in f.samples]

    def value(self, sample: str, **labels: str) -> float:
        return sum(
            s.value
            for s in self.samples
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
        )

    def label_values(self, sample: str, label: str) -> set[str]:
        return {s.labels[label] for s in self.samples if s.name == sample}

    def label_names(self, family: str) -> set[str]:
        found = {frozenset(s.labels) - {"le"} for s in self.families[family].samples}
        assert len(found) == 1, found
        return set(next(iter(found)))


def scrape(taplog) -> Scrape:
    taplog.flush()  # metrics come from written events: wait for the writer
    return Scrape(taplog.url)


# -- the command line and the log -----------------------------------------------------------


def sql_rows(data_dir: Path, sql: str) -> list:
    """`taplog sql` as a user runs it, its JSON rows; the command must succeed."""
    result = CliRunner().invoke(main, ["sql", sql, "--data-dir", str(data_dir), "--format", "json"])
    assert result.exit_code == 0, result.output
    return orjson.loads(result.output)


def wait_written(rec: Recorder) -> bool:
    """Wait for what the writer tells a caller waiting on the log: written, or failed."""
    told: list[bool] = []
    done = threading.Event()
    rec.when_written(lambda ok: (told.append(ok), done.set()))
    assert done.wait(10)
    return told[0]
