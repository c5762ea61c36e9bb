"""The official SDKs' whole surface, found in the installed SDK and called with made-up
arguments, for tests/e2e/test_sdk_surface.py.

    surface(client)     every public method of every resource under the client: the
                        attributes that are the SDK's own `SyncAPIResource` /
                        `AsyncAPIResource`, walked down (`with_raw_response` and
                        `with_streaming_response` are the same methods again, not walked)
    calls_of(method)    a call per overload (its required parameters, values made from
                        their types: ids `<name>_1`, containers empty, files a few bytes,
                        a Literal its first value; a realistic model call where a parameter
                        is `model`, `messages`, `max_tokens` or `input`), and `stream=True`
                        for an overload that streams
    drive(sdk, mode)    every call made, what it returned consumed (a stream read to its
                        end, a stream manager entered), and what each sent and raised

What is not called, or called but not counted as a request method, by rule:

    websocket    a method that returns a connection (realtime, live): not HTTP
    client-side  a call that sent nothing (a helper that builds a local object, such as a
                 message thread or an environment worker), or a helper without request
                 options that raised before sending anything (webhook signature checks of
                 a made-up payload, a wrapper of an earlier call's result)
"""

from __future__ import annotations

import asyncio
import builtins
import collections.abc as abc
import inspect
import os
import random
import string
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import anthropic
import anthropic._resource
import httpx2
import openai
import openai._resource


def _random(length: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(random.SystemRandom().choice(alphabet) for _ in range(length))


# Each SDK's credentials by the name it takes them under: realistic, distinct, new each run.
PREFIXES = ("sk-proj-", "sk-admin-", "sk-ant-api03-", "sk-ant-env01-")  # common to such keys
_ANTHROPIC_ALPHABET = string.ascii_letters + string.digits + "-_"
KEYS = {
    "openai": {"api_key": "sk-proj-" + _random(40), "admin_api_key": "sk-admin-" + _random(40)},
    "anthropic": {
        "api_key": "sk-ant-api03-" + _random(60, _ANTHROPIC_ALPHABET),
        # the self-hosted environments' key, which their poller sends instead of the API key
        "environment_key": "sk-ant-env01-" + _random(60, _ANTHROPIC_ALPHABET),
    },
}
MODEL = {"openai": "gpt-4.1", "anthropic": "claude-sonnet-4-6"}
# Values by parameter name where a placeholder of the type would not make a real call.
NAMED: dict[str, Any] = {
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 16,
    "path": "/workspace/x.txt",  # agents' files: absolute, under /workspace
    "include": ["*.txt"],  # which files of a directory to upload
    "destination": "/workspace",
}
REQUEST_OPTIONS = ("extra_headers", "timeout")
CALL_SECONDS = 20
ITEMS = 10


# -- the SDKs' surface, found by introspection ---------------------------------------------


@dataclass(frozen=True)
class Sdk:
    """One official SDK: its clients and its resources' base classes, by mode."""

    provider: str
    client: dict[str, type]
    resource: dict[str, type]

    def make(self, mode: str, url: str, http: Any) -> Any:
        """This SDK's client at `url` (taplog or a vendor), with its keys, without retries."""
        # the client's own keys (a method takes the environment key as a parameter)
        keys = {k: v for k, v in KEYS[self.provider].items() if k.endswith("api_key")}
        base_url = f"{url}/v1" if self.provider == "openai" else url
        return self.client[mode](
            base_url=base_url, max_retries=0, http_client=http, timeout=10, **keys
        )


SDKS = {
    "openai": Sdk(
        "openai",
        {"sync": openai.OpenAI, "async": openai.AsyncOpenAI},
        {"sync": openai._resource.SyncAPIResource, "async": openai._resource.AsyncAPIResource},
    ),
    "anthropic": Sdk(
        "anthropic",
        {"sync": anthropic.Anthropic, "async": anthropic.AsyncAnthropic},
        {
            "sync": anthropic._resource.SyncAPIResource,
            "async": anthropic._resource.AsyncAPIResource,
        },
    ),
}


def surface(node: Any, resource: type, path: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    """Every public method of every resource under `node`, by dotted name."""
    found = []
    for name in sorted(dir(type(node))):
        if name.startswith("_") or name in ("with_raw_response", "with_streaming_response"):
            continue
        value = getattr(node, name)
        if isinstance(value, resource):
            found += surface(value, resource, (*path, name))
        elif callable(value) and isinstance(node, resource):
            found.append((".".join((*path, name)), value))
    return found


@dataclass(frozen=True)
class Call:
    """One call of a method: its arguments, and whether it asks for a stream."""

    method: str
    kwargs: dict[str, Any]
    stream: bool = False

    @property
    def label(self) -> str:
        return f"{self.method}({', '.join(self.kwargs)})" + (" stream" if self.stream else "")


def calls_of(method: str, fn: Any, provider: str, files: Path) -> list[Call]:
    """A call per overload of `fn` (its required parameters): with `stream=True` for the
    overloads that stream. Overloads the SDK marks deprecated, it refuses (unless all are)."""
    overloads = typing.get_overloads(getattr(fn, "__func__", fn))
    current = [o for o in overloads if not getattr(o, "__deprecated__", None)]
    found: list[Call] = []
    for variant in current or overloads or [fn]:
        hints = _hints(variant)
        required = [
            name
            for name, p in inspect.signature(variant).parameters.items()
            if p.default is inspect.Parameter.empty
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            and name != "self"
        ]
        kwargs = {
            name: True if name == "stream" else _value(name, hints.get(name, str), provider, files)
            for name in required
        }
        if all(call.kwargs.keys() != kwargs.keys() for call in found):
            found.append(Call(method, kwargs, "stream" in kwargs))
    return found


class _Unknown(dict[str, Any]):
    """A namespace for annotations: a name the SDK imports only for type checkers is the
    module of that name, else the `typing` name, else an opaque type."""

    def __missing__(self, name: str) -> Any:
        return sys.modules.get(name) or getattr(typing, name, _Opaque)


class _Opaque:
    """A type only named for type checkers (subscripted, it is itself)."""

    def __class_getitem__(cls, item: Any) -> type[_Opaque]:
        return cls


def _hints(fn: Any) -> dict[str, Any]:
    """`fn`'s annotations resolved, also those naming what the SDK imports only for type
    checkers (`if TYPE_CHECKING:`), so every required parameter gets a value of its type."""
    try:
        return typing.get_type_hints(fn)
    except NameError:
        function = inspect.unwrap(fn)
        annotations = inspect.get_annotations(function)
        known = _Unknown({**vars(builtins), **function.__globals__})
        return {k: eval(a, {}, known) for k, a in annotations.items()}


def _value(name: str, hint: Any, provider: str, files: Path) -> Any:
    if name in KEYS[provider]:
        return KEYS[provider][name]
    if name == "model":
        return MODEL[provider]
    if name == "input" and _accepts(hint, str):
        return "hi"
    if name in NAMED:
        return NAMED[name]
    return _placeholder(name, hint, files)


def _accepts(hint: Any, kind: type) -> bool:
    return hint is kind or kind in get_args(hint)


def _placeholder(name: str, hint: Any, files: Path) -> Any:
    """A value of type `hint`: ids are `<name>_1`, containers empty, files a few bytes."""
    origin = get_origin(hint)
    if origin is Literal:
        return get_args(hint)[0]
    if origin in (Union, types.UnionType):
        if type(None) in get_args(hint):
            return None
        members = list(get_args(hint))
        if bytes in members:  # a file: (name, bytes, type) where a tuple is taken
            return ("x.txt", b"x", "text/plain") if tuple in map(get_origin, members) else b"x"
        preferred = [m for m in members if m is str or get_origin(m) is Literal]
        preferred = [m for m in members if get_origin(m) is os.PathLike] or preferred
        return _placeholder(name, (preferred or members)[0], files)
    if hint is os.PathLike or origin is os.PathLike:
        return files if name == "root" else files / "x.txt"
    if origin in (dict, abc.Mapping):
        value_type = get_args(hint)[1] if get_args(hint) else None
        if value_type is not None and os.PathLike in map(get_origin, get_args(value_type)):
            return {"/workspace/x.txt": files / "x.txt"}
        return {}
    simple = {str: f"{name}_1", bool: True, int: 1, float: 1.0, bytes: b"x"}
    if hint in simple:
        return simple[hint]
    if origin in (list, tuple, abc.Iterable, abc.Sequence) or "Sequence" in str(origin):
        return []
    return {}  # a TypedDict, a mapping, a model: the empty one


# -- calling them --------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one call did: the requests its SDK sent, and what went wrong (if anything)."""

    call: Call
    requests: list[httpx2.Request] = field(default_factory=list)
    error: str | None = None
    skipped: str | None = None


def _skip_rule(fn: Any) -> str | None:
    """Why a method is not called at all: it opens a connection (`…ConnectionManager`)."""
    if "Connection" in str(inspect.signature(fn).return_annotation):
        return "websocket"
    return None


def _has_request_options(fn: Any) -> bool:
    return any(option in inspect.signature(fn).parameters for option in REQUEST_OPTIONS)


def _judged(outcome: Outcome, fn: Any) -> Outcome:
    """A call that sent nothing is client-side; so is a helper without request options that
    raised before sending anything (a webhook check of a made-up payload)."""
    if outcome.requests or (outcome.error and _has_request_options(fn)):
        return outcome
    reason = "client-side" + (f" ({outcome.error})" if outcome.error else "")
    return Outcome(outcome.call, skipped=reason)


def _drain(result: Any) -> None:
    """Consume what a call returned: enter a stream manager, read a stream to its end (a
    poller, endless by design, for `ITEMS` items)."""
    if hasattr(result, "__enter__") and hasattr(result, "__exit__"):
        with result as entered:
            _drain_items(entered)
    else:
        _drain_items(result)


def _drain_items(result: Any) -> None:
    if isinstance(result, str | bytes | dict) or not hasattr(result, "__iter__"):
        return
    for count, _ in enumerate(result, 1):
        if count == ITEMS:
            break
    if inspect.isgenerator(result):
        result.close()


async def _drain_async(result: Any) -> None:
    if inspect.isawaitable(result):
        result = await result
    if hasattr(result, "__aenter__"):
        async with result as entered:
            await _drain_async_items(entered)
    else:
        await _drain_async_items(result)


async def _drain_async_items(result: Any) -> None:
    if not hasattr(result, "__aiter__"):
        return _drain(result)
    count = 0
    async for _ in result:
        count += 1
        if count == ITEMS:
            break
    if hasattr(result, "aclose"):  # a generator: its cleanup's requests belong to this call
        await result.aclose()


def drive(sdk: Sdk, mode: str, url: str, files: Path) -> list[Outcome]:
    """Call every method of `sdk`'s `mode` client at `url`; what each call did. `files`: a
    folder with `x.txt`, for the helpers that upload from disk."""
    sent: list[httpx2.Request] = []

    async def keep(request: httpx2.Request) -> None:
        sent.append(request)

    if mode == "sync":
        http: Any = httpx2.Client(event_hooks={"request": [sent.append]})
    else:
        http = httpx2.AsyncClient(event_hooks={"request": [keep]})
    client = sdk.make(mode, url, http)
    planned = [
        (call, fn)
        for name, fn in surface(client, sdk.resource[mode])
        for call in calls_of(name, fn, sdk.provider, files)
    ]
    if mode == "async":
        return asyncio.run(_call_async(planned, sent, http))
    outcomes = []
    for call, fn in planned:
        if skipped := _skip_rule(fn):
            outcomes.append(Outcome(call, skipped=skipped))
            continue
        before, error = len(sent), None
        try:
            _drain(fn(**call.kwargs))
        except Exception as exc:
            error = repr(exc)[:300]
        outcomes.append(_judged(Outcome(call, sent[before:], error), fn))
    http.close()
    return outcomes


async def _call_async(planned: list[tuple[Call, Any]], sent: list, http: Any) -> list[Outcome]:
    outcomes = []
    for call, fn in planned:
        if skipped := _skip_rule(fn):
            outcomes.append(Outcome(call, skipped=skipped))
            continue
        before, error = len(sent), None
        try:
            await asyncio.wait_for(_drain_async(fn(**call.kwargs)), CALL_SECONDS)
        except Exception as exc:
            error = repr(exc)[:300]
        outcomes.append(_judged(Outcome(call, sent[before:], error), fn))
    await http.aclose()
    return outcomes
