"""Non-streaming answers between Anthropic Messages and OpenAI Responses (protocols.md 2, 3, 5.4).

Anthropic message -> ``response``, one item per block in block order:

=========================  ==================================================================
Anthropic block            Responses output item
=========================  ==================================================================
``text`` (not empty)       ``message`` with one ``output_text`` part; web search citations
                           -> ``url_citation`` annotations over the whole part
                           (`responses_vocab.url_citations`)
``tool_use``               ``function_call`` (``arguments`` = compact JSON of ``input``, with
                           ``namespace`` for a namespaced tool) or, for a freeform tool,
                           ``custom_tool_call`` (``input`` = the string unwrapped); ``call_id``
                           = the tool_use id fitted to OpenAI's rules
``server_tool_use``        one ``web_search_call`` with the query and, from its
(web_search) and its       ``web_search_tool_result``, the urls found as ``action.sources``
``web_search_tool_result``
thinking, redacted         nothing: a reasoning item without OpenAI's encrypted state would
thinking, other server     be useless to replay; the upstream answer is in the log
tools
=========================  ==================================================================

Status, usage and ids come from `vocab`, which also echoes the request fields a
client reads back (``instructions``, ``tools``, ``tool_choice``, ...). ``model`` is the model
that served the answer.

``response`` -> Anthropic message: each ``message`` item becomes one ``text`` block (its
output_text and refusal parts joined; none if empty; annotations left out), each
``function_call`` a ``tool_use`` with ``input`` parsed from ``arguments``. A call whose
arguments are no JSON object (cut by the token limit, 5.8.11) is left out, as in the Chat
translation. A ``web_search_call`` that searched becomes a ``server_tool_use`` (name
web_search, input ``{query}``) and its ``web_search_tool_result``: one result per
``action.sources`` url (its title when the source has one, else the url;
``encrypted_content: ""``, ``page_age: null``), or an ``unavailable`` error for a failed
search (`web_search_blocks`); one that opened a page or searched in one has no Anthropic
block and is left out. Reasoning and other hosted-tool items are left out (taplog never
asks for those tools).

Tools go back to the client's own names, namespaces and kinds (``tools`` =
`Translated.tools`).
"""

from __future__ import annotations

import re
from typing import Any

from taplog.recorder.vendors.naming import (
    ANTHROPIC_ID_LIMIT,
    OPENAI_ID_LIMIT,
    ClientTools,
    client_name,
    client_tool,
    fit,
)
from taplog.recorder.vendors.openai_chat.vocab import anthropic_message
from taplog.recorder.vendors.openai_responses.vocab import (
    anthropic_usage,
    call_item,
    freeform_input,
    message_id,
    message_item,
    response_object,
    response_status,
    responses_usage,
    stop_from_status,
    url_citations,
    web_search_item,
)
from taplog.recorder.vendors.sse import as_list, as_str, dig
from taplog.recorder.vendors.translation import compact_json, parse_object

__all__ = [
    "message_text",
    "messages_answer_to_responses",
    "responses_answer_to_messages",
    "web_search_blocks",
]

_NOT_ID = re.compile(r"[^A-Za-z0-9_]")  # Anthropic's server tool ids: srvtoolu_[A-Za-z0-9_]+


def messages_answer_to_responses(
    answer: dict,
    *,
    response_id: str,
    created_at: int,
    request: dict,
    tools: ClientTools | None = None,
) -> dict:
    """An Anthropic message as the ``response`` object a Responses client expects."""
    blocks = as_list(answer.get("content"))
    results = {
        block.get("tool_use_id"): block.get("content")
        for block in blocks
        if dig(block, "type") == "web_search_tool_result"
    }
    output: list[dict] = []
    for block in blocks:
        kind, index = dig(block, "type"), len(output)
        if kind == "text" and as_str(text := block.get("text")):
            annotations = url_citations(text, block.get("citations"))
            output.append(message_item(response_id, index, text, annotations))
        elif kind == "tool_use":
            output.append(_tool_call_item(response_id, index, block, tools))
        elif kind == "server_tool_use" and block.get("name") == "web_search":
            query = as_str(dig(block, "input", "query"))
            output.append(web_search_item(response_id, index, query, results.get(block.get("id"))))
    status, incomplete = response_status(answer.get("stop_reason"))
    return response_object(
        request,
        response_id=response_id,
        created_at=created_at,
        model=as_str(answer.get("model")) or "",
        status=status,
        incomplete=incomplete,
        output=output,
        usage=responses_usage(answer.get("usage")),
    )


def _tool_call_item(response_id: str, index: int, block: dict, tools: ClientTools | None) -> dict:
    """A whole ``tool_use`` block as the client's function or custom tool call."""
    tool = client_tool(as_str(block.get("name")) or "", tools)
    value = block.get("input") if block.get("input") is not None else {}
    call_id = fit(as_str(block.get("id")) or "toolu", OPENAI_ID_LIMIT)
    text = freeform_input(value) if tool.freeform else compact_json(value)
    return call_item(response_id, index, call_id, tool, text)


def responses_answer_to_messages(answer: dict, *, tools: ClientTools | None = None) -> dict:
    """A ``response`` object as the message an Anthropic client expects."""
    content: list[dict] = []
    refused = False
    for item in as_list(answer.get("output")):
        kind = dig(item, "type")
        if kind == "message":
            text, refusal = message_text(item)
            refused = refused or refusal
            if text:
                content.append({"type": "text", "text": text})
        elif kind == "function_call" and (block := _tool_use(item, tools)) is not None:
            content.append(block)
        elif kind == "web_search_call":
            content.extend(web_search_blocks(item))
    stop = stop_from_status(
        answer.get("status"),
        dig(answer, "incomplete_details", "reason"),
        refused=refused,
        called=any(block["type"] == "tool_use" for block in content),
    )
    usage = anthropic_usage(answer.get("usage"))
    return anthropic_message(
        message_id(answer.get("id")), answer.get("model"), content, stop, usage
    )


def message_text(item: Any) -> tuple[str, bool]:
    """(the text of a message item's output_text and refusal parts, whether one refused)."""
    texts: list[str] = []
    refused = False
    for part in as_list(dig(item, "content")):
        kind = dig(part, "type")
        if kind == "output_text":
            texts.append(as_str(part.get("text")) or "")
        elif kind == "refusal" and (refusal := as_str(part.get("refusal"))):
            refused = True
            texts.append(refusal)
    return "".join(texts), refused


def _tool_use(item: dict, tools: ClientTools | None) -> dict | None:
    value = parse_object(item.get("arguments"))
    if value is None:
        return None
    return {
        "type": "tool_use",
        "id": fit(as_str(item.get("call_id")) or "call", ANTHROPIC_ID_LIMIT),
        "name": client_name(as_str(item.get("name")) or "", tools),
        "input": value,
    }


def web_search_blocks(item: Any) -> list[dict]:
    """A ``web_search_call`` item as Claude's web search blocks; none unless it searched."""
    action = dig(item, "action")
    if dig(action, "type") != "search":
        return []
    queries = [query for query in as_list(action.get("queries")) if isinstance(query, str)]
    query = as_str(action.get("query")) or (queries[0] if queries else "")
    block_id = "srvtoolu_" + _NOT_ID.sub("_", (as_str(item.get("id")) or "").removeprefix("ws_"))
    use = {"type": "server_tool_use", "id": block_id, "name": "web_search"}
    content: Any = [
        {
            "type": "web_search_result",
            "url": source["url"],
            "title": as_str(source.get("title")) or source["url"],
            "encrypted_content": "",
            "page_age": None,
        }
        for source in as_list(action.get("sources"))
        if as_str(dig(source, "url"))
    ]
    if item.get("status") == "failed":
        content = {"type": "web_search_tool_result_error", "error_code": "unavailable"}
    result = {"type": "web_search_tool_result", "tool_use_id": block_id, "content": content}
    return [{**use, "input": {"query": query}}, result]
