"""Typed keys for what the aiohttp app holds, and the process lifecycle flag."""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from aiohttp import web

from proxy.auth import Tokens
from proxy.breaker import Breakers
from proxy.config import Settings
from proxy.fallbacks import Fallbacks
from proxy.responses_history import ResponsesHistory
from recorder.sessions import SessionResolver
from recorder.writer import Recorder


@dataclass
class Lifecycle:
    """Set once shutdown starts, so calls cut by it are not blamed on clients."""

    stopping: bool = False


SETTINGS = web.AppKey("settings", Settings)
RECORDER = web.AppKey("recorder", Recorder)
RESOLVER = web.AppKey("resolver", SessionResolver)
POOL = web.AppKey("pool", aiohttp.ClientSession)
LIFECYCLE = web.AppKey("lifecycle", Lifecycle)
FALLBACKS = web.AppKey("fallbacks", Fallbacks)
BREAKERS = web.AppKey("breakers", Breakers)
TOKENS = web.AppKey("tokens", Tokens)
RESPONSES_HISTORY = web.AppKey("responses_history", ResponsesHistory)
