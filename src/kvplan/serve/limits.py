"""What one client of ``kvplan serve`` can hold: connections, time to send a request's head and body, and a place in
the queue of plans, so that slow or many clients cannot make the page answer 503 to everyone.

Before (issue #22): uvicorn's ``limit_concurrency=32`` counted open connections, and nothing timed out a request
head that never ended: 150 connections sending their headers one byte at a time made every request 503 for 20 s,
and a burst of 50 ``/api/view`` got 36 × 503. Now

* a connection must send a complete request head within ``HEADER_TIMEOUT_S`` of opening (or of its previous
  response, on keep-alive; bytes trickling in do not extend it), else it is closed;
* one client address holds at most ``MAX_PER_CLIENT`` connections (further ones are answered 503 and closed; on
  127.0.0.1 every local process shares the address, so this is also the server's total), uvicorn's own limit being
  a last backstop (``MAX_CONNECTIONS``);
* a request body must arrive within ``BODY_TIMEOUT_S`` (408), and only then does the request wait for one of the
  ``MAX_PLANNING`` planning slots; requests queue for a slot (first come, first served) and are refused (503) only
  past ``MAX_WAITING`` waiting or ``QUEUE_WAIT_S`` of waiting.
"""

from __future__ import annotations

import asyncio
from typing import Any

HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 10.0
MAX_PER_CLIENT = 256
MAX_CONNECTIONS = 1024
MAX_PLANNING = 4
MAX_WAITING = 256
QUEUE_WAIT_S = 60.0


_TOO_MANY = b'{"error": "too many connections from this client"}'


class Busy(Exception):
    """No planning slot (503)."""


class PlanSlots:
    """At most ``MAX_PLANNING`` plans at once; the others wait in order, boundedly."""

    def __init__(self, slots: int = MAX_PLANNING, waiting: int = MAX_WAITING, wait_s: float = QUEUE_WAIT_S):
        self.slots, self.max_waiting, self.wait_s = slots, waiting, wait_s
        self._sem: asyncio.Semaphore | None = None  # made on the server's loop, at first use
        self.waiting = 0

    async def __aenter__(self) -> PlanSlots:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.slots)
        if self.waiting >= self.max_waiting:
            raise Busy(f"{self.waiting} requests are waiting already")
        self.waiting += 1
        try:
            await asyncio.wait_for(self._sem.acquire(), self.wait_s)
        except asyncio.TimeoutError:
            raise Busy(f"no planning slot within {self.wait_s:g} s") from None
        finally:
            self.waiting -= 1
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._sem is not None
        self._sem.release()


def protocol_class(header_timeout_s: float = HEADER_TIMEOUT_S, max_per_client: int = MAX_PER_CLIENT) -> type:
    """uvicorn's h11 protocol with a deadline for each request head and a bound on connections per client."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            ip = self.client[0] if self.client else None
            peers: list[Any] = [getattr(c, "client", None) for c in self.connections]
            same = sum(1 for peer in peers if peer and peer[0] == ip)
            if same > max_per_client:
                transport.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
                                b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_TOO_MANY), _TOO_MANY))
                transport.close()
                return
            self._arm()

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(header_timeout_s, self._head_late)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_late(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()  # no complete request head in time: slow or idle

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state is not h11.IDLE:
                self._disarm()  # the head is in: the app's own deadlines take over

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._arm()  # keep-alive: the next head has the same deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return GuardedH11Protocol


def uvicorn_config(app: Any, header_timeout_s: float = HEADER_TIMEOUT_S, max_per_client: int = MAX_PER_CLIENT
                   ) -> Any:
    """The server's uvicorn settings (kvplan.serve.server and the tests use the same)."""
    import uvicorn

    return uvicorn.Config(app, log_level="warning", access_log=False, limit_concurrency=MAX_CONNECTIONS,
                          timeout_keep_alive=5, h11_max_incomplete_event_size=64 * 1024, lifespan="off",
                          http=protocol_class(header_timeout_s, max_per_client))
