"""The lean uvicorn protocol's own parts (privates/__init__.py's `LeanWebSocketsSansIOProtocol`):
a list-based receive queue and writable flag for its single reader, a transport that corks the
writes of one event-loop callback into one, and one keepalive timer per second for every socket.
Our code, reaching into no library: kept apart from the privates so that the contract test's
subject stays the reaches themselves.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

__all__ = ["CorkedTransport", "KeepaliveWheel", "ReceiveQueue", "WritableFlag"]


class ReceiveQueue:
    """What uvicorn's protocol uses of `asyncio.Queue`: one consumer, unbounded, no deque."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: list[Any] = []  # uvicorn pauses reading per message: 0 or 1 item, rarely more
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: Any) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def get(self) -> Any:
        while not self._items:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                if self._waiter is waiter:
                    self._waiter = None
        return self._items.pop(0)

    def get_nowait(self) -> Any:
        if not self._items:
            raise asyncio.QueueEmpty
        return self._items.pop(0)

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items)


class WritableFlag:
    """What the protocol uses of `asyncio.Event`, with waiters in a list made only when waiting."""

    __slots__ = ("_set", "_waiters")

    def __init__(self) -> None:
        self._set = False
        self._waiters: list[asyncio.Future[bool]] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        waiters, self._waiters = self._waiters, None
        for fut in waiters or ():
            if not fut.done():
                fut.set_result(True)

    def clear(self) -> None:
        self._set = False

    async def wait(self) -> bool:
        if self._set:
            return True
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(fut)
        try:
            return await fut
        finally:
            if self._waiters is not None and fut in self._waiters:
                self._waiters.remove(fut)


class CorkedTransport:
    """The socket's transport, with the writes of one turn of the event loop joined into one.

    The end of a learner turn sends four or five frames at once (the reply, mood, stage, tips),
    each one `transport.write`, and uvloop makes every write a `write(2)` at once. On loopback a
    write is the costliest thing the server does per frame: the kernel runs the receiving side's
    TCP work in the writer's time (about a fifth of the server's CPU per streamed LLM turn,
    docs/performance.md). Corked, the frames wait for the rest of the current callback and leave
    together, one loop iteration later, in order. `close`, `write_eof` and `abort` see to the
    frames still waiting first; anything else is the transport's own.
    """

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] | None = None

    def write(self, data: bytes) -> None:
        pending = self._pending
        if pending is None:
            self._pending = [data]
            self._loop.call_soon(self.flush)
        else:
            pending.append(data)

    def writelines(self, list_of_data: Any) -> None:
        for data in list_of_data:
            self.write(data)

    def flush(self) -> None:
        pending, self._pending = self._pending, None
        if pending and not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def get_write_buffer_size(self) -> int:
        waiting = sum(map(len, self._pending)) if self._pending else 0
        return self._transport.get_write_buffer_size() + waiting

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._pending = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class KeepaliveWheel:
    """The keepalive pings of every socket on one event loop, on one timer per second that has
    pings due, instead of one timer per socket (a uvloop timer handle, its libuv timer, a bound
    method and a context: about 0.6 KiB of every idle socket). A ping leaves at most a second after
    its socket's interval has passed; the pong's deadline is uvicorn's own timer, as before.
    """

    __slots__ = ("_due", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._due: dict[int, set[Any]] = {}  # a whole second of the loop's clock -> the sockets due then

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> KeepaliveWheel:
        wheel = _WHEELS.get(loop)
        if wheel is None:
            wheel = _WHEELS[loop] = cls(loop)
        return wheel

    def add(self, protocol: Any, delay: float) -> int:
        """Ping `protocol` (its `send_keepalive_ping`) `delay` seconds from now, rounded up to the
        second; the second is what `discard` takes."""
        second = math.ceil(self._loop.time() + delay)
        due = self._due.get(second)
        if due is None:
            due = self._due[second] = set()
            self._loop.call_at(second, self._ping, second)
        due.add(protocol)
        return second

    def discard(self, protocol: Any, second: int) -> None:
        due = self._due.get(second)
        if due is None:
            return
        due.discard(protocol)
        if not due:
            self._drop(second)

    def _drop(self, second: int) -> None:
        # A wheel with nothing due lets go of its loop: a loop that closes keeps no wheel alive.
        self._due.pop(second, None)
        if not self._due and _WHEELS.get(self._loop) is self:
            del _WHEELS[self._loop]

    def _ping(self, second: int) -> None:
        due = self._due.get(second)
        if due is None:
            return
        self._drop(second)
        for protocol in due:
            protocol.ping_second = None
            protocol.send_keepalive_ping()


_WHEELS: dict[asyncio.AbstractEventLoop, KeepaliveWheel] = {}
