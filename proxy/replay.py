"""`taplog replay`: answer model calls from a recording instead of the vendor (strict mode).

A small aiohttp app of its own, separate from the recording proxy: it reads
no keys, calls no vendor and writes nothing. Each POST to a model API is
matched to a recorded call by `recorder.replay_index.signature`; the recorded
answer goes back byte for byte (status, the vendor's headers, the body), a
stream event by event with its original pacing divided by `speed` (0: no
waiting). A miss is a 404 in the client's API shape (`x-taplog-error:
replay_miss`) naming the closest recorded request and the first field where it
differs, so a test fails with a reason instead of a hang.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
from aiohttp import web

from proxy.errors import error_response
from proxy.routing import provider_for
from recorder.replay_index import ReplayIndex, api_of_path, load_index

INDEX = web.AppKey("replay_index", ReplayIndex)
SPEED = web.AppKey("replay_speed", float)
MAX_BODY = 64 * 2**20


def create_replay_app(source: Path, speed: float = 1.0) -> web.Application:
    """The replay server's app over a data dir or one session file."""
    app = web.Application(client_max_size=MAX_BODY)
    app[INDEX] = load_index(source)
    app[SPEED] = speed
    app.router.add_route("*", "/{tail:.*}", _replay)
    return app


async def _replay(request: web.Request) -> web.StreamResponse:
    provider = provider_for(request.raw_path)
    api = api_of_path(request.path)
    if request.method != "POST" or api is None:
        message = f"replay serves model calls only, not {request.method} {request.path}"
        return error_response(provider, 404, message, "replay_not_recorded")
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        return error_response(provider, 400, "the body is not JSON", "replay_bad_body")
    index = request.app[INDEX]
    recorded = index.take(api, body)
    if recorded is None:
        return error_response(provider, 404, _miss(index, api, body), "replay_miss")
    headers = {**recorded.headers, "x-taplog-replayed": recorded.where()}
    if recorded.sse is None:
        return web.Response(status=recorded.status, body=recorded.body, headers=headers)
    response = web.StreamResponse(status=recorded.status, headers=headers)
    await response.prepare(request)
    speed, last = request.app[SPEED], 0.0
    for t_ms, raw in recorded.sse:
        if speed > 0 and t_ms > last:
            await asyncio.sleep((t_ms - last) / 1000 / speed)
        last = max(last, t_ms)
        await response.write(raw)
    await response.write_eof()
    return response


def _miss(index: ReplayIndex, api: str, body: object) -> str:
    closest = index.closest(api, body)
    if closest is None:
        return f"replay miss: no {api} call recorded ({len(index)} calls in the recording)"
    recorded, difference = closest
    return (
        f"replay miss: no recorded {api} request matches this one; the closest is "
        f"{recorded.where()}, which differs at {difference}"
    )


async def run_replay(source: Path, host: str, port: int, speed: float) -> None:
    """Serve until interrupted; prints the URL once listening."""
    runner = web.AppRunner(create_replay_app(source, speed), handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0]
    url = f"http://{bound[0]}:{bound[1]}"
    print(f"taplog replay: {len(runner.app[INDEX])} calls on {url}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
