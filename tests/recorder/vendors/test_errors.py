"""Error mapping (docs/protocols.md 5.7), each table row both ways, shapes checked with the SDKs."""

from __future__ import annotations

import anthropic
import openai
import pytest

from taplog.recorder.vendors.errors import (
    ErrorKind,
    anthropic_error_kind,
    anthropic_error_to_openai,
    openai_error_kind,
    openai_error_to_anthropic,
)


def anthropic_body(kind: str, message: str = "the message", **error: object) -> dict:
    return {
        "type": "error",
        "error": {"type": kind, "message": message, **error},
        "request_id": "req_1",
    }


def openai_body(kind: str | None, code: str | None = None, message: str = "the message") -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


@pytest.mark.parametrize(
    ("status", "kind", "expected_status", "expected_code"),
    [
        (400, "invalid_request_error", 400, None),
        (401, "authentication_error", 401, "invalid_api_key"),
        (402, "billing_error", 429, "insufficient_quota"),
        (403, "permission_error", 403, None),
        (404, "not_found_error", 404, "model_not_found"),
        (413, "request_too_large", 400, "context_length_exceeded"),
        (429, "rate_limit_error", 429, "rate_limit_exceeded"),
        (500, "api_error", 500, None),
        (504, "timeout_error", 504, "timeout"),
        (529, "overloaded_error", 503, None),
    ],
)
def test_anthropic_errors_for_openai_clients(status, kind, expected_status, expected_code):
    new_status, body = anthropic_error_to_openai(status, anthropic_body(kind))
    assert new_status == expected_status
    assert body["error"]["message"] == "the message"
    assert body["error"]["code"] == expected_code
    assert set(body) == {"error"}
    openai.types.shared.ErrorObject.model_validate(body["error"])


@pytest.mark.parametrize(
    ("status", "body", "expected_status", "expected_type"),
    [
        (400, openai_body("invalid_request_error"), 400, "invalid_request_error"),
        (422, openai_body("invalid_request_error"), 400, "invalid_request_error"),
        (401, openai_body("invalid_request_error", "invalid_api_key"), 401, "authentication_error"),
        (429, openai_body("insufficient_quota", "insufficient_quota"), 402, "billing_error"),
        (403, openai_body("invalid_request_error"), 403, "permission_error"),
        (404, openai_body("invalid_request_error", "model_not_found"), 404, "not_found_error"),
        (413, openai_body("invalid_request_error"), 413, "request_too_large"),
        (429, openai_body("requests", "rate_limit_exceeded"), 429, "rate_limit_error"),
        (500, openai_body("server_error"), 500, "api_error"),
        (503, openai_body("server_error"), 529, "overloaded_error"),
        (504, openai_body("server_error"), 504, "timeout_error"),
        (408, openai_body("timeout"), 504, "timeout_error"),
        (502, None, 500, "api_error"),
    ],
)
def test_openai_errors_for_anthropic_clients(status, body, expected_status, expected_type):
    new_status, out = openai_error_to_anthropic(status, body)
    assert new_status == expected_status
    assert out["type"] == "error" and out["error"]["type"] == expected_type
    expected = "the message" if body else f"upstream error (HTTP {status})"
    assert out["error"]["message"] == expected
    if expected_type != "request_too_large":  # docs/protocols.md 3 names it; the SDK union lacks it
        anthropic.types.ErrorResponse.model_validate(out)


def test_the_spend_limit_variant_of_429_is_a_billing_error():
    body = anthropic_body("rate_limit_error", details={"error_code": "spend_limit_reached"})
    assert anthropic_error_kind(429, body) is ErrorKind.BILLING
    assert anthropic_error_to_openai(429, body)[1]["error"]["code"] == "insufficient_quota"
    assert not ErrorKind.BILLING.transient and ErrorKind.RATE_LIMIT.transient


def test_status_decides_when_the_body_is_unreadable():
    assert anthropic_error_kind(529, None) is ErrorKind.OVERLOADED
    assert anthropic_error_kind(418, {"odd": True}) is ErrorKind.INVALID
    assert anthropic_error_to_openai(502, None) == (
        500,
        {
            "error": {
                "message": "upstream error (HTTP 502)",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        },
    )


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (openai_body("server_error"), ErrorKind.SERVER),
        (openai_body(None, "rate_limit_exceeded"), ErrorKind.RATE_LIMIT),
        (openai_body("insufficient_quota"), ErrorKind.BILLING),
        ({"error": "plain text"}, ErrorKind.SERVER),
    ],
)
def test_edge_16_in_band_openai_errors_are_classified_by_type_or_code(body, kind):
    assert openai_error_kind(200, body) is kind
    assert openai_error_to_anthropic(200, body)[1]["error"]["message"] in (
        "the message",
        "plain text",
    )


def test_edge_16_in_band_anthropic_errors_keep_their_type():
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert anthropic_error_to_openai(200, body) == (
        503,
        {"error": {"message": "Overloaded", "type": "server_error", "param": None, "code": None}},
    )
