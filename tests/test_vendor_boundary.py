"""The vendor boundary: every vendor wire fact lives in recorder/vendors/, which stands alone.

Outside recorder/vendors/, no string constant of proxy/ or recorder/ (docstrings are prose
and not read) may be one of the wire facts below. The lists are short on purpose: they hold
what only a vendor's wire says, never a word taplog's own events, columns or options use
too. `model`, `stream`, `usage`, `input_tokens`, `finish_reason`, `tool_calls` or
`authorization` (taplog's own token header) are not listed: taplog writes them itself.

    paths     an API path, or the `/v1` every one of them lives under
    headers   a vendor's key and version headers, and what agents send as their session
    fields    body fields, event types and markers no taplog event uses

recorder/vendors/ imports nothing of taplog outside itself, and recorder/ never imports the
proxy or aiohttp: the recorder runs without a server, the vendor package without either.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
VENDORS = ROOT / "recorder" / "vendors"

VENDOR_PATHS = ("/v1", "/messages", "/chat/completions", "/responses")
VENDOR_HEADERS = frozenset(
    {
        "x-api-key",  # Anthropic's key
        "api-key",  # Azure OpenAI's key
        "anthropic-version",
        "retry-after-ms",  # the wait the vendors ask for, in milliseconds
        "x-stainless-retry-count",  # the official SDKs' retry counter
        "x-claude-code-session-id",  # Claude Code's session
        "x-opencode-session",  # opencode's
    }
)
VENDOR_FIELDS = frozenset(
    {
        "previous_response_id",  # Responses chaining
        "instructions",  # Responses' system prompt
        "prompt_cache_key",  # what Codex sends as its conversation
        "stream_options",
        "tool_use_id",  # Anthropic's tool results
        "tool_call_id",  # Chat's
        "content_block_start",  # Anthropic stream events
        "text_delta",
        "stop_reason",
        "choices",  # Chat answers and chunks
        "[DONE]",  # Chat's end marker
        "insufficient_quota",  # error codes
        "context_length_exceeded",
        "invalid_request_error",  # error types
    }
)


def _modules(root: Path) -> Iterator[Path]:
    yield from sorted(root.rglob("*.py"))


def _outside_vendors() -> Iterator[Path]:
    for folder in ("proxy", "recorder"):
        for path in _modules(ROOT / folder):
            if VENDORS not in path.parents:
                yield path


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _strings(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    prose = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in prose:
            if isinstance(node.value, bytes):
                yield node.lineno, node.value.decode(errors="replace")
            elif isinstance(node.value, str):
                yield node.lineno, node.value


def vendor_fact(text: str) -> str | None:
    """What vendor fact a string constant is, or None."""
    if any(text == path or text.startswith(f"{path}/") for path in VENDOR_PATHS):
        return "a vendor path"
    if text.lower() in VENDOR_HEADERS:
        return "a vendor header"
    words = set(text.replace(":", " ").split())  # b"data: [DONE]\n\n" names the marker too
    if text in VENDOR_FIELDS or words & VENDOR_FIELDS:
        return "a vendor body field"
    return None


def test_the_lists_catch_what_they_name():
    assert vendor_fact("/v1/messages") == "a vendor path"
    assert vendor_fact("/responses") == "a vendor path"
    assert vendor_fact("X-Api-Key") == "a vendor header"
    assert vendor_fact("data: [DONE]\n\n") == "a vendor body field"
    assert vendor_fact("previous_response_id") == "a vendor body field"
    for own in ("/api/sessions", "model", "input_tokens", "authorization", "/v10"):
        assert vendor_fact(own) is None, own


def test_no_vendor_fact_outside_recorder_vendors():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text!r} is {fact}"
        for path in _outside_vendors()
        for line, text in _strings(path)
        if (fact := vendor_fact(text)) is not None
    ]
    assert not found, "vendor facts belong in recorder/vendors/:\n" + "\n".join(found)


def _imports(path: Path, package: str) -> Iterator[str]:
    """The absolute names a module imports (relative imports resolved against `package`)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                yield f"{base}.{node.module}" if node.module else base
            else:
                yield node.module or ""


def _package(path: Path) -> str:
    """`recorder/vendors/anthropic/wire.py` -> `taplog.recorder.vendors.anthropic`."""
    return ".".join(("taplog", *path.parent.relative_to(ROOT).parts))


@pytest.mark.parametrize(
    "folder, allowed, refused",
    [
        ("recorder/vendors", ("taplog.recorder.vendors",), ("taplog",)),
        ("recorder", ("taplog.recorder",), ("taplog", "aiohttp")),
    ],
)
def test_imports_stay_inside(folder: str, allowed: tuple[str, ...], refused: tuple[str, ...]):
    wrong = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _modules(ROOT / folder)
        for name in _imports(path, _package(path))
        if any(name == r or name.startswith(f"{r}.") for r in refused)
        and not any(name == a or name.startswith(f"{a}.") for a in allowed)
    ]
    assert not wrong, "\n".join(wrong)
