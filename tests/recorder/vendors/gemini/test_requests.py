"""Request translation between Gemini's generateContent and Anthropic Messages.

Every translated body is checked against the official SDKs' request types: Anthropic's
(deep pydantic validation, top-level keys limited to the declared ones) and google-genai's
(each part of the wire body validated from JSON, so unknown keys and bad base64 fail), and
for the pairing rules both APIs enforce. Every translation also checks that the client's
body came through unchanged.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from google.genai import types as genai

from taplog.recorder.vendors.gemini.request_from_neutral import messages_to_gemini
from taplog.recorder.vendors.gemini.request_to_neutral import gemini_to_messages
from taplog.recorder.vendors.gemini.thoughts import SKIP_VALIDATION, tagged
from taplog.recorder.vendors.naming import ClientTool
from taplog.recorder.vendors.translation import Translated, Untranslatable
from tests.builders import CLAUDE_WEATHER, claude, text, tool_use
from tests.recorder.vendors.checks import assert_anthropic_request

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ"
PDF = "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PD4+CmVuZG9iagp0cmFpbGVyCjw8Pj4KJSVFT0YK"
SIG_A, SIG_B, SIG_C = "U0lHQQ==", "U0lHQg==", "U0lHQw=="  # valid base64, as Gemini's are
CLAUDE_SIG = "EqQBCkYIBxgCKkDclaudeSignature=="


# -- checks --------------------------------------------------------------------------------


def assert_paired(messages: list[dict], *, answered: bool = False) -> None:
    """Anthropic's rules: each message's tool results lead it and answer exactly the calls
    of the message before; ids are unique; only an answer may end with calls."""
    asked: list[str] = []
    for message in messages:
        blocks = message["content"]
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        assert all(b["type"] == "tool_result" for b in blocks[: len(results)])
        assert sorted(results) == sorted(asked)
        asked = [b["id"] for b in blocks if b["type"] == "tool_use"]
    assert not asked or answered
    calls = [b["id"] for m in messages for b in m["content"] if b["type"] == "tool_use"]
    assert len(calls) == len(set(calls))


def to_claude(body: dict, **options: Any) -> Translated:
    sent = copy.deepcopy(body)
    translated = gemini_to_messages(body, model="claude-test", **options)
    assert body == sent  # the client's body is never changed
    assert_anthropic_request(translated.body)
    assert_paired(translated.body["messages"], answered=options.get("answered", False))
    return translated


_GEMINI_KEYS = {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig"}
_CLIENT_DATA = {"args", "response", "parametersJsonSchema", "responseJsonSchema"}


def _camel_only(value: Any) -> None:
    """Taplog writes Gemini's own keys in camelCase (not inside the client's data)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            assert "_" not in key, key
            if key not in _CLIENT_DATA:
                _camel_only(inner)
    elif isinstance(value, list):
        for inner in value:
            _camel_only(inner)


def assert_gemini_request(body: dict) -> None:
    assert set(body) <= _GEMINI_KEYS, set(body) - _GEMINI_KEYS
    _camel_only(body)
    for content in body["contents"]:
        genai.Content.model_validate_json(orjson.dumps(content))
        assert content["role"] in ("user", "model") and content["parts"]
    if "systemInstruction" in body:
        genai.Content.model_validate_json(orjson.dumps(body["systemInstruction"]))
    for tool in body.get("tools", []):
        genai.Tool.model_validate_json(orjson.dumps(tool))
    if "toolConfig" in body:
        genai.ToolConfig.model_validate_json(orjson.dumps(body["toolConfig"]))
    if "generationConfig" in body:
        genai.GenerationConfig.model_validate_json(orjson.dumps(body["generationConfig"]))
    _gemini_pairing(body["contents"])


def _gemini_pairing(contents: list[dict]) -> None:
    """Gemini's rules: a model content's first call is signed; all the responses to its
    calls come together, first, in the user content after it."""
    for i, content in enumerate(contents):
        parts = content["parts"]
        responses = [p for p in parts if "functionResponse" in p]
        assert parts[: len(responses)] == responses
        calls = [p["functionCall"] for p in parts if "functionCall" in p]
        if content["role"] != "model" or not calls:
            continue
        assert next(p for p in parts if "functionCall" in p).get("thoughtSignature")
        if i + 1 < len(contents):
            answers = [
                p["functionResponse"]["id"]
                for p in contents[i + 1]["parts"]
                if "functionResponse" in p
            ]
            assert sorted(answers) == sorted(c["id"] for c in calls)


def to_gemini(body: dict, **options: Any) -> Translated:
    sent = copy.deepcopy(body)
    translated = messages_to_gemini(body, model=options.pop("model", "gemini-2.5-flash"), **options)
    assert body == sent  # the client's body is never changed
    assert_gemini_request(translated.body)
    return translated


def user(*parts: dict) -> dict:
    return {"role": "user", "parts": list(parts)}


def model(*parts: dict) -> dict:
    return {"role": "model", "parts": list(parts)}


def call(name: str, args: dict | None = None, call_id: str | None = None, **extra: Any) -> dict:
    fc: dict[str, Any] = {"name": name, "args": {} if args is None else args}
    if call_id is not None:
        fc["id"] = call_id
    return {"functionCall": fc, **extra}


def response(name: str, value: Any, call_id: str | None = None) -> dict:
    fr: dict[str, Any] = {"name": name, "response": value}
    if call_id is not None:
        fr["id"] = call_id
    return {"functionResponse": fr}


def result(call_id: str, content: Any = "ok", **extra: Any) -> dict:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def thinking(value: str, signature: str) -> dict:
    return {"type": "thinking", "thinking": value, "signature": signature}


def image_block(data: str = PNG) -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def inline(mime: str, data: str = PNG) -> dict:
    return {"inlineData": {"mimeType": mime, "data": data}}


HI = user({"text": "hi"})
USER = {"role": "user", "content": "hi"}


# -- a Gemini client's request for Claude --------------------------------------------------

LIST_DIRECTORY = {
    "name": "list_directory",
    "description": "Lists the names of files and subdirectories in a directory.",
    "parametersJsonSchema": {
        "type": "object",
        "properties": {"dir_path": {"type": "string"}, "ignore": {"type": "array"}},
        "required": ["dir_path"],
    },
}
READ_FILE = {  # OpenAPI style, as older Gemini CLIs and the SDK's Schema write it
    "name": "read_file",
    "description": "Reads a file.",
    "parameters": {
        "type": "OBJECT",
        "properties": {
            "absolute_path": {"type": "STRING", "description": "The file"},
            "limit": {"type": "NUMBER", "nullable": True},
        },
        "required": ["absolute_path"],
    },
}
GEMINI_CLI = {
    "contents": [
        user({"text": "This is the Gemini CLI. Today's date is Monday."}),
        model({"text": "Got it. Thanks for the context!"}),
        user({"text": "Read the README in /repo and the notes."}),
        model(
            {"text": "**Looking around**\n\nI'll list the directory.", "thought": True},
            call("list_directory", {"dir_path": "/repo"}, thoughtSignature=SIG_A),
        ),
        # the CLI answers a call that came without an id under an id of its own
        user(response("list_directory", {"output": "README.md\nNOTES.md"}, "list_directory-1-f3")),
        model(  # parallel calls, with ids (Gemini 3)
            call("read_file", {"absolute_path": "/repo/README.md"}, "fc-1", thoughtSignature=SIG_B),
            call("read_file", {"absolute_path": "/repo/NOTES.md"}, "fc-2"),
        ),
        user(
            response("read_file", {"output": "# Notes"}, "fc-2"),
            response("read_file", {"error": "permission denied"}, "fc-1"),
        ),
        model({"text": "The notes say"}),  # the SDK keeps each streamed chunk as a content
        model({"text": " little.", "thoughtSignature": SIG_C}),
        user({"text": "Thanks. Now run the tests."}),
    ],
    "systemInstruction": {"role": "user", "parts": [{"text": "You are an interactive CLI agent."}]},
    "tools": [{"functionDeclarations": [LIST_DIRECTORY, READ_FILE]}],
    "generationConfig": {
        "temperature": 0,
        "topP": 1,
        "thinkingConfig": {"includeThoughts": True, "thinkingBudget": 8192},
    },
}


def test_a_gemini_cli_request_becomes_a_valid_claude_request():
    translated = to_claude(GEMINI_CLI, stream=True)
    out = translated.body
    assert out["system"] == [text("You are an interactive CLI agent.")]
    assert out["stream"] is True and out["max_tokens"] == 4096
    fs, fc_1, fc_2 = "call_3_0", "fc-1", "fc-2"
    assert out["messages"] == [
        {"role": "user", "content": [text("This is the Gemini CLI. Today's date is Monday.")]},
        {"role": "assistant", "content": [text("Got it. Thanks for the context!")]},
        {"role": "user", "content": [text("Read the README in /repo and the notes.")]},
        {"role": "assistant", "content": [tool_use(fs, "list_directory", {"dir_path": "/repo"})]},
        {"role": "user", "content": [result(fs, "README.md\nNOTES.md")]},
        {
            "role": "assistant",
            "content": [
                tool_use(fc_1, "read_file", {"absolute_path": "/repo/README.md"}),
                tool_use(fc_2, "read_file", {"absolute_path": "/repo/NOTES.md"}),
            ],
        },
        {
            "role": "user",
            "content": [
                result(fc_2, "# Notes"),
                result(fc_1, "permission denied", is_error=True),
            ],
        },
        {"role": "assistant", "content": [text("The notes say"), text(" little.")]},
        {"role": "user", "content": [text("Thanks. Now run the tests.")]},
    ]
    schema = LIST_DIRECTORY["parametersJsonSchema"]
    assert out["tools"] == [
        {
            "name": "list_directory",
            "input_schema": schema,
            "description": LIST_DIRECTORY["description"],
        },
        {
            "name": "read_file",
            "input_schema": {
                "type": "object",
                "properties": {
                    "absolute_path": {"type": "string", "description": "The file"},
                    "limit": {"type": ["number", "null"]},
                },
                "required": ["absolute_path"],
            },
            "description": "Reads a file.",
        },
    ]
    assert out["thinking"] == {"type": "adaptive"}
    assert out["output_config"] == {"effort": "medium"}
    assert "temperature" not in out and "top_p" not in out
    assert translated.dropped == [
        "thought parts (Gemini's own reasoning: Claude cannot use it)",
        "generationConfig.temperature",
        "generationConfig.topP",
    ]


def test_snake_case_keys_read_like_camel_case():
    body = {
        "system_instruction": {"parts": [{"text": "be brief"}]},
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "look"},
                    {"inline_data": {"mime_type": "image/png", "data": PNG}},
                ],
            },
            {
                "role": "model",
                "parts": [
                    {
                        "function_call": {"name": "read_file", "args": {"absolute_path": "/a"}},
                        "thought_signature": SIG_A,
                    }
                ],
            },
            {"parts": [{"function_response": {"name": "read_file", "response": {"content": "A"}}}]},
        ],
        "tools": [
            {
                "function_declarations": [
                    {"name": "read_file", "parameters_json_schema": {"type": "object"}}
                ]
            }
        ],
        "tool_config": {
            "function_calling_config": {"mode": "ANY", "allowed_function_names": ["read_file"]}
        },
        "generation_config": {
            "max_output_tokens": 900,
            "stop_sequences": ["END"],
            "response_mime_type": "text/plain",
        },
        "safety_settings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
    }
    translated = to_claude(body)
    out = translated.body
    assert out["system"] == [text("be brief")]
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    assert out["messages"] == [
        {"role": "user", "content": [text("look"), image]},
        {
            "role": "assistant",
            "content": [tool_use("call_1_0", "read_file", {"absolute_path": "/a"})],
        },
        {"role": "user", "content": [result("call_1_0", "A")]},
    ]
    assert out["tools"] == [{"name": "read_file", "input_schema": {"type": "object"}}]
    assert out["tool_choice"] == {"type": "tool", "name": "read_file"}
    assert out["max_tokens"] == 900 and out["stop_sequences"] == ["END"]
    assert translated.dropped == ["safety_settings"]


def test_streamed_model_chunks_merge_and_results_lead_their_user_message():
    body = {
        "contents": [
            HI,
            model({"text": "Checking"}),
            model(call("a"), call("b")),
            model(call("a")),
            user({"text": "also this"}, response("a", {"output": "1"})),
            user(response("b", {"output": "2"}), response("a", {"output": "3"})),
        ]
    }
    messages = to_claude(body).body["messages"]
    assert messages[1]["content"] == [
        text("Checking"),
        tool_use("call_2_0", "a", {}),
        tool_use("call_2_1", "b", {}),
        tool_use("call_3_0", "a", {}),
    ]
    assert messages[2]["content"] == [
        result("call_2_0", "1"),
        result("call_2_1", "2"),
        result("call_3_0", "3"),
        text("also this"),
    ]


@pytest.mark.parametrize(
    ("value", "content", "is_error"),
    [
        ({"output": "done"}, "done", False),
        ({"result": "done"}, "done", False),
        ({"content": "done"}, "done", False),
        ({"error": "boom"}, "boom", True),
        ({"result": {"rows": 2}}, '{"result":{"rows":2}}', False),
        ({"output": "x", "exitCode": 1}, '{"output":"x","exitCode":1}', False),
        ({"error": {"code": 5}}, '{"error":{"code":5}}', True),
        ({}, None, False),
    ],
)
def test_function_responses_become_text_or_compact_json(value, content, is_error):
    body = {"contents": [HI, model(call("f")), user(response("f", value)), user({"text": "go"})]}
    block = to_claude(body).body["messages"][2]["content"][0]
    expected = {"type": "tool_result", "tool_use_id": "call_1_0"}
    if content is not None:
        expected["content"] = content
    if is_error:
        expected["is_error"] = True
    assert block == expected


def test_media_in_a_function_response_goes_inside_the_tool_result():
    answer = response("screenshot", {"output": "taken"})
    answer["functionResponse"]["parts"] = [inline("image/png")]
    body = {"contents": [HI, model(call("screenshot")), user(answer)]}
    block = to_claude(body).body["messages"][2]["content"][0]
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    assert block == {
        "type": "tool_result",
        "tool_use_id": "call_1_0",
        "content": [text("taken"), image],
    }


def test_user_media_become_images_and_documents():
    url_image = {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://x.test/a.jpg"}}
    notes = {"inlineData": {"mimeType": "text/plain", "data": "aGVsbG8_"}}  # URL-safe base64
    body = {
        "contents": [
            user(inline("image/png", "ab-_"), inline("application/pdf", PDF), url_image, notes)
        ]
    }
    blocks = to_claude(body).body["messages"][0]["content"]
    assert blocks == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "ab+/"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
        },
        {"type": "image", "source": {"type": "url", "url": "https://x.test/a.jpg"}},
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "hello?"},
        },
    ]


def test_openapi_schemas_become_json_schemas():
    parameters = {
        "type": "OBJECT",
        "property_ordering": ["type", "tags"],
        "properties": {
            "type": {
                "type": "STRING",
                "enum": ["a", "b"],
                "nullable": True,
            },  # a property named "type"
            "tags": {
                "type": "ARRAY",
                "items": {"type": "STRING"},
                "max_items": "3",
                "example": ["x"],
            },
            "when": {
                "any_of": [{"type": "INTEGER"}, {"type": "STRING", "format": "date-time"}],
                "nullable": True,
            },
            "loose": {"type": "TYPE_UNSPECIFIED", "description": "anything"},
        },
        "required": ["type"],
    }
    body = {
        "contents": [HI],
        "tools": [{"functionDeclarations": [{"name": "f", "parameters": parameters}]}],
    }
    assert to_claude(body).body["tools"][0]["input_schema"] == {
        "type": "object",
        "properties": {
            "type": {"type": ["string", "null"], "enum": ["a", "b", None]},
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "maxItems": 3,
                "examples": [["x"]],
            },
            "when": {
                "anyOf": [
                    {"type": "integer"},
                    {"type": "string", "format": "date-time"},
                    {"type": "null"},
                ]
            },
            "loose": {"description": "anything"},
        },
        "required": ["type"],
    }


@pytest.mark.parametrize(
    ("calling", "names", "choice"),
    [
        ({"mode": "AUTO"}, ["a", "b"], None),
        ({"mode": "ANY"}, ["a", "b"], {"type": "any"}),
        ({"mode": "NONE"}, ["a", "b"], {"type": "none"}),
        ({"mode": "ANY", "allowedFunctionNames": ["b"]}, ["b"], {"type": "tool", "name": "b"}),
        ({"mode": "ANY", "allowedFunctionNames": ["a", "b"]}, ["a", "b"], {"type": "any"}),
        ({"mode": "AUTO", "allowedFunctionNames": ["a"]}, ["a"], {"type": "auto"}),
        ({"mode": "VALIDATED"}, ["a", "b"], None),
    ],
)
def test_function_calling_config_becomes_tool_choice(calling, names, choice):
    declarations = [{"name": "a"}, {"name": "b"}]
    body = {
        "contents": [HI],
        "tools": [{"functionDeclarations": declarations}],
        "toolConfig": {"functionCallingConfig": calling},
    }
    translated = to_claude(body)
    assert [t["name"] for t in translated.body["tools"]] == names
    assert translated.body.get("tool_choice") == choice
    if calling["mode"] == "VALIDATED":
        assert "functionCallingConfig mode VALIDATED (sent as auto)" in translated.dropped


@pytest.mark.parametrize(
    ("config", "effort"),
    [
        ({"thinkingLevel": "HIGH"}, "high"),
        ({"thinkingLevel": "minimal"}, "low"),
        ({"thinkingBudget": 1024}, "low"),
        ({"thinkingBudget": 8192}, "medium"),
        ({"thinkingBudget": 24576}, "high"),
        ({"thinkingBudget": -1, "includeThoughts": True}, None),
    ],
)
def test_thinking_config_becomes_adaptive_thinking_with_an_effort(config, effort):
    out = to_claude({"contents": [HI], "generationConfig": {"thinkingConfig": config}}).body
    assert out["thinking"] == {"type": "adaptive"}
    assert out.get("output_config", {}).get("effort") == effort


def test_no_thinking_for_budget_zero_a_forced_tool_or_an_unthought_tool_turn():
    off = to_claude(
        {"contents": [HI], "generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}}
    )
    assert "thinking" not in off.body and off.dropped == []
    forced = {
        "contents": [HI],
        "tools": [{"functionDeclarations": [{"name": "a"}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
        "generationConfig": {"thinkingConfig": {"thinkingLevel": "high"}},
    }
    translated = to_claude(forced)
    assert "thinking" not in translated.body
    assert (
        "generationConfig.thinkingConfig (Claude cannot think while a tool is forced)"
        in translated.dropped
    )
    loop = {
        "contents": [
            HI,
            model(call("a", thoughtSignature=SIG_A)),
            user(response("a", {"output": "1"})),
        ],
        "generationConfig": {"thinkingConfig": {"thinkingLevel": "high"}},
    }
    translated = to_claude(loop)
    assert "thinking" not in translated.body
    assert (
        "generationConfig.thinkingConfig (the current tool turn has no thinking block)"
        in translated.dropped
    )


def test_sampling_is_dropped_unless_enabled_and_then_clamped():
    config = {"temperature": 1.5, "topP": 0.9, "topK": 40}
    body = {"contents": [HI], "generationConfig": config}
    dropped = ["generationConfig.topK", "generationConfig.temperature", "generationConfig.topP"]
    assert to_claude(body).dropped == dropped
    out = to_claude(body, sampling=True)
    assert out.body["temperature"] == 1.0
    assert "top_p" not in out.body and "top_k" not in out.body
    assert out.dropped == [
        "generationConfig.topK",
        "generationConfig.topP (Anthropic refuses it next to temperature)",
    ]


def test_json_output_with_a_schema_becomes_output_config_and_without_an_instruction():
    schema = {"type": "OBJECT", "properties": {"n": {"type": "INTEGER"}}}
    body = {
        "contents": [HI],
        "generationConfig": {"responseMimeType": "application/json", "responseSchema": schema},
    }
    fmt = to_claude(body).body["output_config"]["format"]
    assert fmt == {
        "type": "json_schema",
        "schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
    }
    body["generationConfig"] = {
        "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "array"},
    }
    assert to_claude(body).body["output_config"]["format"]["schema"] == {"type": "array"}
    bare = to_claude(
        {"contents": [HI], "generationConfig": {"responseMimeType": "application/json"}}
    )
    assert bare.body["system"] == [text("Respond with valid JSON and nothing else.")]
    assert "output_config" not in bare.body


def test_a_trailing_model_turn_is_refused_unless_prefill_is_allowed_or_answered():
    body = {"contents": [HI, model({"text": "The answer is "})]}
    with pytest.raises(Untranslatable, match="prefill"):
        gemini_to_messages(body, model="claude-test")
    prefill = to_claude(body, allow_prefill=True).body["messages"][-1]
    assert prefill == {"role": "assistant", "content": [text("The answer is")]}
    calling = {"contents": [HI, model(call("a"))]}
    with pytest.raises(Untranslatable, match="responses are missing"):
        gemini_to_messages(calling, model="claude-test", allow_prefill=True)
    kept = to_claude(calling, answered=True).body["messages"][-1]
    assert kept == {"role": "assistant", "content": [tool_use("call_1_0", "a", {})]}


def test_tool_names_and_ids_are_fitted_for_anthropic_and_mapped_back():
    name = "mcp.github:create_issue"  # Gemini allows dots and colons, Anthropic does not
    body = {
        "contents": [
            HI,
            model(call(name, call_id="id with spaces")),
            user(response(name, {"output": "ok"})),
        ],
        "tools": [{"functionDeclarations": [{"name": name}]}],
    }
    translated = to_claude(body)
    wire = translated.body["tools"][0]["name"]
    assert wire != name and translated.tools[wire] == ClientTool(name)
    call_block, answer = (translated.body["messages"][i]["content"][0] for i in (1, 2))
    assert call_block["name"] == wire and answer["tool_use_id"] == call_block["id"]
    assert translated.tool_ids[call_block["id"]] == "id with spaces"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"cachedContent": "cachedContents/abc"}, "cached content"),
        ({"tools": [{"googleSearch": {}}]}, "googleSearch"),
        ({"tools": [{"codeExecution": {}}]}, "codeExecution"),
        ({"generationConfig": {"candidateCount": 2}}, "candidateCount 2"),
        ({"generationConfig": {"responseLogprobs": True, "logprobs": 3}}, "logprobs"),
        ({"generationConfig": {"responseModalities": ["TEXT", "IMAGE"]}}, "responseModalities"),
        ({"generationConfig": {"responseMimeType": "text/x.enum"}}, "text/x.enum"),
        ({"contents": [user({"text": "hear"}, inline("audio/mpeg"))]}, "audio/mpeg"),
        ({"contents": [user({"text": "see"}, inline("video/mp4"))]}, "video/mp4"),
        (
            {
                "contents": [
                    user(
                        {"text": "a"},
                        {
                            "fileData": {
                                "mimeType": "image/png",
                                "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/f1",
                            }
                        },
                    )
                ]
            },
            "fileData",
        ),
        (
            {
                "contents": [
                    user(
                        {"text": "a"},
                        {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/a.pdf"}},
                    )
                ]
            },
            "fileData",
        ),
        (
            {
                "contents": [
                    HI,
                    model({"text": "ran"}, {"executableCode": {"language": "PYTHON", "code": "1"}}),
                    user({"text": "ok"}),
                ]
            },
            "code Gemini ran itself",
        ),
        (
            {
                "contents": [
                    HI,
                    model({"text": "ran"}, {"codeExecutionResult": {"outcome": "OUTCOME_OK"}}),
                    user({"text": "ok"}),
                ]
            },
            "the result of code Gemini ran itself",
        ),
        (
            {"contents": [HI, model({"text": "drew"}, inline("image/png")), user({"text": "ok"})]},
            "media in a model turn",
        ),
        (
            {
                "contents": [
                    HI,
                    model({"text": "x"}),
                    user(response("f", {"output": "1"}), {"text": "go"}),
                ]
            },
            "functionResponse 'f'",
        ),
        (
            {"contents": [HI, model({"text": "x"}, call("f")), user({"text": "never mind"})]},
            "functionCall without a response",
        ),
    ],
)
def test_what_claude_cannot_take_is_refused_by_name_or_left_out_and_recorded(change, named):
    body = {"contents": [HI], **change}
    with pytest.raises(Untranslatable, match=named):
        gemini_to_messages(body, model="claude-test")
    translated = to_claude(body, leave_out=True)
    assert any(named in line and "left out" in line for line in translated.dropped), (
        translated.dropped
    )


def test_left_out_calls_take_nothing_else_with_them():
    body = {
        "contents": [HI, model({"text": "Let me look."}, call("f")), user({"text": "never mind"})]
    }
    out = to_claude(body, leave_out=True).body
    assert out["messages"][1:] == [
        {"role": "assistant", "content": [text("Let me look.")]},
        {"role": "user", "content": [text("never mind")]},
    ]
    only_call = {"contents": [HI, model(call("f")), user({"text": "never mind"})]}
    assert to_claude(only_call, leave_out=True).body["messages"] == [
        {"role": "user", "content": [text("hi"), text("never mind")]}
    ]


# -- an Anthropic client's request for Gemini ----------------------------------------------

BASH = {
    "name": "Bash",
    "description": "Executes a bash command.",
    "input_schema": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
        "additionalProperties": False,
    },
}
READ = {
    "name": "Read",
    "description": "Reads a file.",
    "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
    "cache_control": {"type": "ephemeral"},
}
CLAUDE_CODE = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 32000,
    "stream": True,
    "system": [
        {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Working directory: /repo"},
    ],
    "messages": [
        {
            "role": "user",
            "content": [
                text("<system-reminder>Be careful.</system-reminder>"),
                text("What is in this screenshot?"),
                image_block(),
            ],
        },
        {  # a turn Claude served: its thinking means nothing to Gemini
            "role": "assistant",
            "content": [
                thinking("The user wants the files.", CLAUDE_SIG),
                text("I'll list the files."),
                tool_use("toolu_01", "Bash", {"command": "ls"}),
            ],
        },
        {"role": "user", "content": [result("toolu_01", "a.py\nb.py")]},
        {  # a turn Gemini served, as taplog gave it to the client
            "role": "assistant",
            "content": [
                thinking("Reading both files.", tagged(None)),
                thinking("", tagged(SIG_A)),
                tool_use("toolu_02", "Read", {"file_path": "a.py"}),
                tool_use("toolu_03", "Read", {"file_path": "b.py"}),
            ],
        },
        {
            "role": "user",
            "content": [
                result("toolu_02", [text("print(1)")]),
                result("toolu_03", [text("a chart"), image_block()]),
                {"type": "text", "text": "continue", "cache_control": {"type": "ephemeral"}},
            ],
        },
        {
            "role": "assistant",
            "content": [text("Both files print."), thinking("", tagged(SIG_B))],
        },
        USER,
    ],
    "tools": [BASH, READ],
    "tool_choice": {"type": "auto"},
    "thinking": {"type": "enabled", "budget_tokens": 31999},
    "metadata": {"user_id": "user_abc_account_x_session_y"},
}


def test_a_claude_code_request_becomes_a_valid_gemini_request():
    translated = to_gemini(CLAUDE_CODE)
    out = translated.body
    png = inline("image/png")
    assert out["systemInstruction"] == {
        "parts": [{"text": "You are Claude Code."}, {"text": "Working directory: /repo"}]
    }
    assert out["contents"] == [
        user(
            {"text": "<system-reminder>Be careful.</system-reminder>"},
            {"text": "What is in this screenshot?"},
            png,
        ),
        model(
            {"text": "I'll list the files."},
            call("Bash", {"command": "ls"}, "toolu_01", thoughtSignature=SKIP_VALIDATION),
        ),
        user(response("Bash", {"output": "a.py\nb.py"}, "toolu_01")),
        model(
            {"text": "Reading both files.", "thought": True},
            call("Read", {"file_path": "a.py"}, "toolu_02", thoughtSignature=SIG_A),
            call("Read", {"file_path": "b.py"}, "toolu_03"),
        ),
        user(
            response("Read", {"output": "print(1)"}, "toolu_02"),
            response("Read", {"output": "a chart"}, "toolu_03"),
            png,
            {"text": "continue"},
        ),
        model({"text": "Both files print."}, {"text": "", "thoughtSignature": SIG_B}),
        user({"text": "hi"}),
    ]
    assert out["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "Bash",
                    "description": BASH["description"],
                    "parametersJsonSchema": BASH["input_schema"],
                },
                {
                    "name": "Read",
                    "description": READ["description"],
                    "parametersJsonSchema": READ["input_schema"],
                },
            ]
        }
    ]
    assert out["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
    assert out["generationConfig"] == {
        "maxOutputTokens": 32000,
        "thinkingConfig": {"thinkingBudget": 24576, "includeThoughts": True},
    }
    assert translated.dropped == [
        "metadata",
        "cache_control (Gemini caches prompts by itself)",
        "thinking blocks (Claude's signatures mean nothing to Gemini)",
        "thinking.budget_tokens above 24576 (the model's limit; sent as 24576)",
    ]


@pytest.mark.parametrize(
    ("blocks", "parts"),
    [
        ([thinking("", tagged(SIG_A)), text("a")], [{"text": "a", "thoughtSignature": SIG_A}]),
        (
            [thinking("t", tagged(SIG_A))],
            [{"text": "t", "thought": True, "thoughtSignature": SIG_A}],
        ),
        ([thinking("t", tagged(None)), text("a")], [{"text": "t", "thought": True}, {"text": "a"}]),
        (
            [text("a"), thinking("", tagged(SIG_A))],
            [{"text": "a"}, {"text": "", "thoughtSignature": SIG_A}],
        ),
        (
            [thinking("", tagged(SIG_A)), thinking("", CLAUDE_SIG), text(""), text("a")],
            [{"text": "a", "thoughtSignature": SIG_A}],
        ),
        (
            [thinking("", tagged(SIG_A)), thinking("", tagged(SIG_B)), text("a")],
            [{"text": "", "thoughtSignature": SIG_A}, {"text": "a", "thoughtSignature": SIG_B}],
        ),
        (
            [thinking("", tagged(SIG_A)), thinking("t", tagged(None))],
            [{"text": "t", "thought": True, "thoughtSignature": SIG_A}],
        ),
        ([{"type": "redacted_thinking", "data": "xyz"}, text("a")], [{"text": "a"}]),
    ],
)
def test_gemini_signatures_go_back_on_the_part_they_signed(blocks, parts):
    body = claude(USER, {"role": "assistant", "content": blocks}, {"role": "user", "content": "go"})
    assert to_gemini(body).body["contents"][1]["parts"] == parts


@pytest.mark.parametrize(
    ("blocks", "signatures"),
    [
        ([tool_use("t1"), tool_use("t2")], [SKIP_VALIDATION, None]),
        ([thinking("", tagged(SIG_A)), tool_use("t1"), tool_use("t2")], [SIG_A, None]),
        ([tool_use("t1"), thinking("", tagged(SIG_A)), tool_use("t2")], [SKIP_VALIDATION, SIG_A]),
        ([thinking("why", CLAUDE_SIG), tool_use("t1"), tool_use("t2")], [SKIP_VALIDATION, None]),
    ],
)
def test_the_first_call_of_each_model_content_is_signed(blocks, signatures):
    body = claude(
        USER,
        {"role": "assistant", "content": blocks},
        {"role": "user", "content": [result("t1"), result("t2")]},
    )
    parts = to_gemini(body).body["contents"][1]["parts"]
    assert [p.get("thoughtSignature") for p in parts if "functionCall" in p] == signatures


def test_tool_results_become_function_responses_named_after_their_calls():
    calls = [text("Three."), tool_use("t1"), tool_use("t2", "now", {}), tool_use("t3", "now", {})]
    body = claude(
        USER,
        {"role": "assistant", "content": calls},
        {
            "role": "user",
            "content": [
                text("and hurry"),
                result("t2", "12:00"),
                result("t1", [text("rain"), text("wind")], is_error=True),
                {"type": "tool_result", "tool_use_id": "t3"},
            ],
        },
    )
    contents = to_gemini(body).body["contents"]
    assert contents[2] == user(
        response("now", {"output": "12:00"}, "t2"),
        response("weather", {"error": "rain\nwind"}, "t1"),
        response("now", {"output": ""}, "t3"),
        {"text": "and hurry"},
    )


def test_settings_become_generation_config():
    body = claude(
        USER,
        max_tokens=128000,
        stop_sequences=["a", "b", "c", "d", "e", "f"],
        temperature=0.2,
        top_p=0.9,
        top_k=20,
        output_config={
            "format": {"type": "json_schema", "schema": {"type": "object"}},
            "effort": "high",
        },
        service_tier="auto",
    )
    translated = to_gemini(body)
    assert translated.body["generationConfig"] == {
        "maxOutputTokens": 65536,
        "stopSequences": ["a", "b", "c", "d", "e"],
        "temperature": 0.2,
        "topP": 0.9,
        "topK": 20,
        "responseMimeType": "application/json",
        "responseJsonSchema": {"type": "object"},
    }
    assert translated.dropped == [
        "service_tier",
        "max_tokens above 65536 (Gemini's limit; sent as 65536)",
        "stop_sequences[5:] (Gemini takes at most 5)",
        "output_config.effort",
    ]
    assert "model" not in translated.body and "stream" not in translated.body


@pytest.mark.parametrize(
    ("setting", "model_name", "config"),
    [
        (
            {"type": "enabled", "budget_tokens": 4000},
            "gemini-2.5-flash",
            {"thinkingBudget": 4000, "includeThoughts": True},
        ),
        (
            {"type": "enabled", "budget_tokens": 31999},
            "gemini-2.5-pro",
            {"thinkingBudget": 31999, "includeThoughts": True},
        ),
        (
            {"type": "adaptive"},
            "gemini-3-pro-preview",
            {"thinkingBudget": -1, "includeThoughts": True},
        ),
        (
            {"type": "adaptive", "display": "omitted"},
            "gemini-3-pro-preview",
            {"thinkingBudget": -1, "includeThoughts": False},
        ),
        ({"type": "disabled"}, "gemini-2.5-flash", None),
    ],
)
def test_thinking_becomes_a_thinking_config(setting, model_name, config):
    out = to_gemini(claude(USER, thinking=setting), model=model_name).body
    assert out["generationConfig"].get("thinkingConfig") == config


@pytest.mark.parametrize(
    ("choice", "calling"),
    [
        ({"type": "auto"}, {"mode": "AUTO"}),
        ({"type": "any"}, {"mode": "ANY"}),
        ({"type": "none"}, {"mode": "NONE"}),
        ({"type": "tool", "name": "weather"}, {"mode": "ANY", "allowedFunctionNames": ["weather"]}),
    ],
)
def test_tool_choice_becomes_a_function_calling_config(choice, calling):
    out = to_gemini(claude(USER, tools=[CLAUDE_WEATHER], tool_choice=choice)).body
    assert out["toolConfig"] == {"functionCallingConfig": calling}


def test_disable_parallel_tool_use_and_a_choice_without_tools_are_recorded():
    choice = {"type": "any", "disable_parallel_tool_use": True}
    translated = to_gemini(claude(USER, tools=[CLAUDE_WEATHER], tool_choice=choice))
    assert translated.dropped == [
        "tool_choice.disable_parallel_tool_use (Gemini has no such switch)"
    ]
    alone = to_gemini(claude(USER, tool_choice={"type": "auto"}))
    assert "toolConfig" not in alone.body and alone.dropped == ["tool_choice (no tools)"]


def test_documents_and_a_mid_conversation_system_message():
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
        "title": "Spec",
    }
    plain = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "notes"},
    }
    body = claude(
        {"role": "user", "content": [pdf, plain, text("summarize")]},
        {"role": "assistant", "content": "Sure."},
        {"role": "system", "content": "Agents: explore, plan."},
        {"role": "user", "content": "go"},
        system="Be brief.",
    )
    translated = to_gemini(body)
    assert translated.body["systemInstruction"] == {
        "parts": [{"text": "Be brief."}, {"text": "Agents: explore, plan."}]
    }
    assert translated.body["contents"][0] == user(
        inline("application/pdf", PDF), {"text": "notes"}, {"text": "summarize"}
    )
    assert [c["role"] for c in translated.body["contents"]] == ["user", "model", "user"]
    assert translated.dropped == [
        "document title",
        "system messages inside messages (moved to systemInstruction)",
    ]


def test_long_tool_names_are_fitted_for_gemini_and_mapped_back():
    name = "mcp__a_very_long_server_name__and_an_even_longer_tool_name_that_goes_on"
    body = claude(
        USER,
        {"role": "assistant", "content": [tool_use("t1", name, {})]},
        {"role": "user", "content": [result("t1")]},
        tools=[{"name": name, "input_schema": {"type": "object"}}],
        tool_choice={"type": "tool", "name": name},
    )
    translated = to_gemini(body)
    wire = translated.body["tools"][0]["functionDeclarations"][0]["name"]
    assert len(wire) <= 64 and translated.tools[wire] == ClientTool(name)
    contents = translated.body["contents"]
    assert contents[1]["parts"][0]["functionCall"]["name"] == wire
    assert contents[2]["parts"][0]["functionResponse"]["name"] == wire
    assert translated.body["toolConfig"]["functionCallingConfig"]["allowedFunctionNames"] == [wire]


def test_a_trailing_assistant_message_is_refused_unless_prefill_is_allowed():
    body = claude(USER, {"role": "assistant", "content": "{"})
    with pytest.raises(Untranslatable, match="prefill"):
        messages_to_gemini(body, model="gemini-2.5-flash")
    kept = to_gemini(body, allow_prefill=True)
    assert kept.body["contents"][-1] == model({"text": "{"})
    assert kept.dropped == ["prefill (sent as a finished model turn)"]
    assert to_gemini(body, answered=True).dropped == []


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (
            {"tools": [CLAUDE_WEATHER, {"type": "web_search_20250305", "name": "web_search"}]},
            "web_search_20250305",
        ),
        ({"mcp_servers": [{"type": "url", "url": "https://mcp.test", "name": "m"}]}, "MCP servers"),
        ({"container": "container_01"}, "container"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {"type": "url", "url": "https://x.test/a.png"},
                            },
                            text("see"),
                        ],
                    }
                ]
            },
            "images by url",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "document",
                                "source": {"type": "url", "url": "https://x.test/a.pdf"},
                            },
                            text("read"),
                        ],
                    }
                ]
            },
            "documents by url",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image", "source": {"type": "file", "file_id": "file_01"}},
                            text("see"),
                        ],
                    }
                ]
            },
            "images by file",
        ),
        (
            {"messages": [{"role": "user", "content": [result("toolu_gone"), text("go on")]}]},
            "tool_result 'toolu_gone'",
        ),
    ],
)
def test_what_gemini_cannot_take_is_refused_by_name_or_left_out_and_recorded(change, named):
    body = {**claude(USER), **change}
    with pytest.raises(Untranslatable, match=named):
        messages_to_gemini(body, model="gemini-2.5-flash")
    translated = to_gemini(body, leave_out=True)
    assert any(named in line and "left out" in line for line in translated.dropped), (
        translated.dropped
    )


# -- round trips ---------------------------------------------------------------------------


def test_anthropic_to_gemini_and_back_keeps_the_conversation():
    messages = [
        {"role": "user", "content": [text("Weather in Oslo and the time?"), image_block()]},
        {
            "role": "assistant",
            "content": [
                text("Checking both."),
                tool_use("toolu_1"),
                tool_use("toolu_2", "now", {"tz": "CET"}),
            ],
        },
        {
            "role": "user",
            "content": [
                result("toolu_1", "sunny"),
                result("toolu_2", "clock broken", is_error=True),
            ],
        },
        {"role": "assistant", "content": [text("Sunny; the clock is broken.")]},
        {"role": "user", "content": [text("Thanks!")]},
    ]
    body = claude(
        *messages,
        system="Be brief.",
        tools=[CLAUDE_WEATHER],
        max_tokens=700,
        stop_sequences=["END"],
    )
    there = to_gemini(body)
    back = to_claude(there.body).body
    assert back["messages"] == messages
    assert back["system"] == [text("Be brief.")]
    assert back["tools"] == [CLAUDE_WEATHER]
    assert (back["max_tokens"], back["stop_sequences"]) == (700, ["END"])


def test_gemini_to_anthropic_and_back_keeps_text_calls_and_responses():
    body = {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            HI,
            model({"text": "Looking."}, call("f", {"q": 1}, "c1"), call("g", {}, "c2")),
            user(response("f", {"output": "one"}, "c1"), response("g", {"error": "no"}, "c2")),
            model({"text": "Done."}),
            user({"text": "ok"}),
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "f", "parametersJsonSchema": {"type": "object"}},
                    {"name": "g"},
                ]
            }
        ],
    }
    back = to_gemini(to_claude(body).body).body
    assert back["contents"] == [
        HI,
        model(
            {"text": "Looking."},
            call("f", {"q": 1}, "c1", thoughtSignature=SKIP_VALIDATION),
            call("g", {}, "c2"),
        ),
        user(response("f", {"output": "one"}, "c1"), response("g", {"error": "no"}, "c2")),
        model({"text": "Done."}),
        user({"text": "ok"}),
    ]
    assert back["systemInstruction"] == body["systemInstruction"]
    declared = back["tools"][0]["functionDeclarations"]
    assert declared == [
        {"name": "f", "parametersJsonSchema": {"type": "object"}},
        {"name": "g", "parametersJsonSchema": {"type": "object"}},
    ]
