"""A call of a session that another live instance owns goes to that instance, as it came.

When the load balancer's membership changes (an instance joins, or comes back), some
sessions land on an instance that does not own them. Writing them there would fork
them, so the call is sent on to the owner's URL (`--advertise-url`) with its path,
headers and body untouched, and the owner's answer streams back byte for byte. This
instance records nothing of it: the owner does. `X-Taplog-Forwarded-By` tells the owner
not to send it on again (it serves such a call whatever Redis says).

An owner that cannot be reached (its process died, its lease has not yet run out) is
not waited for: `Unreachable` is raised before anything reached the client, and the
caller takes the session over (`proxy.coordination.leases`, a claim with `take`).
"""

from __future__ import annotations

import logging

import aiohttp
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy
from prometheus_client import Counter
from yarl import URL

from taplog.proxy.config import Settings
from taplog.proxy.coordination.leases import Claim, SessionLeases
from taplog.proxy.end_guard import cut_off
from taplog.proxy.upstream import HOP_BY_HOP, response_headers

log = logging.getLogger("taplog")

FORWARDED_BY = "x-taplog-forwarded-by"
_NOT_FORWARDED = HOP_BY_HOP | {"host", "content-length", "accept-encoding"}


class Unreachable(Exception):
    """The owner did not take the call: nothing was sent to the client."""


def forwarded_headers(incoming: CIMultiDictProxy[str], instance: str) -> CIMultiDict[str]:
    """The client's headers as the owner gets them (taplog's own kept: they name the
    session), and who sent them on."""
    headers = CIMultiDict(
        (name, value) for name, value in incoming.items() if name.lower() not in _NOT_FORWARDED
    )
    headers[FORWARDED_BY] = instance
    return headers


async def forward(
    request: web.Request,
    body: bytes,
    owner_url: str,
    pool: aiohttp.ClientSession,
    instance: str,
    connect_timeout: float,
) -> web.StreamResponse:
    """Send the call to its session's owner and stream the owner's answer back."""
    url = URL(owner_url.rstrip("/") + request.raw_path, encoded=True)
    try:
        upstream = await pool.request(
            request.method,
            url,
            data=body or None,
            headers=forwarded_headers(request.headers, instance),
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=None, connect=connect_timeout),
        )
    except (aiohttp.ClientConnectionError, TimeoutError) as exc:
        raise Unreachable(f"{owner_url}: {type(exc).__name__}") from exc
    try:
        response = web.StreamResponse(status=upstream.status, headers=response_headers(upstream))
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
        except (aiohttp.ClientError, TimeoutError):
            cut_off(request)  # the owner's answer broke off: no clean end for the client
            return response
        await response.write_eof()
        return response
    finally:
        upstream.release()


class FleetOwnership:
    """The request path's side of the fleet's session leases (`Services.ownership`)."""

    def __init__(
        self,
        leases: SessionLeases,
        pool: aiohttp.ClientSession,
        settings: Settings,
        counted: Counter,
    ) -> None:
        self.leases = leases
        self._pool = pool
        self._settings = settings
        self._counted = counted  # by outcome (`Metrics.ownership`)

    async def serve_here(
        self, request: web.Request, body: bytes, session: str, new: bool
    ) -> Claim | web.StreamResponse:
        """Under which lease this instance serves a call of `session` (`new`: a session
        taplog has just named), or the owner's answer when another live instance owns it."""
        leases = self.leases
        epoch = leases.held(session)
        if epoch is not None:
            return Claim(epoch)
        settings = self._settings
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        url = settings.reachable_url(sockname[1] if sockname else settings.port)
        if new:
            self._counted.labels("claimed").inc()
            return leases.claim_new(session, url)
        claim = await leases.claim(session, url, take=FORWARDED_BY in request.headers)
        if claim.owner_url is not None:
            try:
                answer = await forward(
                    request,
                    body,
                    claim.owner_url,
                    self._pool,
                    leases.instance,
                    settings.connect_timeout,
                )
            except Unreachable as exc:
                log.warning(
                    "coordination: the owner of session %s cannot be reached (%s); taking it over",
                    session,
                    exc,
                )
                claim = await leases.claim(session, url, take=True)
            else:
                self._counted.labels("forwarded").inc()
                return answer
        outcome = "unleased" if claim.epoch is None else "claimed"
        self._counted.labels("taken_over" if claim.resumed else outcome).inc()
        return claim

    def started(self, session: str) -> None:
        self.leases.started(session)

    def ended(self, session: str) -> None:
        self.leases.ended(session)
