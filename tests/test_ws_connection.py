"""WsConnection: direct writes, the queue behind a blocked write, 4430, and the idle sweep."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from schemas.codec import Envelope, WireFormat
from schemas.enums import Role
from schemas.errors import CloseCode
from schemas.frames import Pong
from server.connection import WsConnection
from server.ws import close_idle_sockets

pytestmark = pytest.mark.anyio


class Transport:
    """An ASGI `send` that completes at once unless `block()` was called."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.gate: anyio.Event | None = None
        self.fail: Exception | None = None
        self.calls = 0

    def block(self) -> None:
        self.gate = anyio.Event()

    def unblock(self) -> None:
        assert self.gate is not None
        gate, self.gate = self.gate, None
        gate.set()

    async def send(self, message: dict[str, Any]) -> None:
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        if self.gate is not None:
            await self.gate.wait()
        self.sent.append(message["text"])


def pong(i: int) -> Envelope:
    return Envelope(Pong(session_id="s1", id=f"p{i}"))


def ids(transport: Transport) -> list[str]:
    import orjson

    return [orjson.loads(t)["id"] for t in transport.sent]


def connection(transport: Transport, queue: int = 4, actor: Any = None) -> WsConnection:
    websocket: Any = SimpleNamespace(_send=transport.send)
    return WsConnection(websocket, Role.PLAYER, WireFormat.JSON, "s1", queue, actor)


async def test_a_socket_that_keeps_up_is_written_directly_without_a_task() -> None:
    transport = Transport()
    async with anyio.create_task_group() as tg:
        conn = connection(transport)
        conn.start(tg)
        for i in range(5):
            assert conn.send_nowait(pong(i))
        # Written before any task could run: nothing was queued, nothing spawned.
        assert ids(transport) == [f"p{i}" for i in range(5)]
        assert conn.queued == 0
        tg.cancel_scope.cancel()


async def test_a_blocked_write_queues_the_rest_in_order_then_writes_directly_again() -> None:
    transport = Transport()
    async with anyio.create_task_group() as tg:
        conn = connection(transport, queue=4)
        conn.start(tg)
        assert conn.send_nowait(pong(0))
        transport.block()
        assert conn.send_nowait(pong(1))  # blocks in the transport: finished by a task
        for i in range(2, 6):
            assert conn.send_nowait(pong(i))  # the queue holds 4
        assert conn.queued == 4
        assert ids(transport) == ["p0"]
        await anyio.sleep(0.01)
        assert ids(transport) == ["p0"]  # still blocked
        transport.unblock()
        with anyio.fail_after(2):
            while conn.queued or len(transport.sent) < 6:  # noqa: ASYNC110 (polling a plain attribute)
                await anyio.sleep(0.001)
        assert ids(transport) == [f"p{i}" for i in range(6)]
        await anyio.sleep(0.01)
        calls = transport.calls
        assert conn.send_nowait(pong(6))
        assert transport.calls == calls + 1 and ids(transport)[-1] == "p6"  # direct again
        assert conn.close_code is None
        tg.cancel_scope.cancel()


async def test_a_consumer_that_stays_blocked_is_closed_as_slow_with_4430() -> None:
    transport = Transport()
    async with anyio.create_task_group() as tg:
        conn = connection(transport, queue=3)
        conn.start(tg)
        transport.block()
        assert conn.send_nowait(pong(0))
        for i in range(1, 4):
            assert conn.send_nowait(pong(i))
        assert not conn.send_nowait(pong(4))  # the fourth queued one overflows
        assert conn.close_code == CloseCode.SLOW_CONSUMER
        assert not conn.send_nowait(pong(5))
    # Closing cancelled the task group, and with it the blocked write.
    assert tg.cancel_scope.cancel_called
    assert transport.sent == []


async def test_a_failed_write_closes_the_connection_as_lost() -> None:
    transport = Transport()
    async with anyio.create_task_group() as tg:
        conn = connection(transport)
        conn.start(tg)
        transport.fail = OSError("gone")
        assert conn.send_nowait(pong(0))
        assert conn.close_code == CloseCode.GOING_AWAY
    assert tg.cancel_scope.cancel_called


async def test_a_failure_after_blocking_closes_the_connection_as_lost() -> None:
    transport = Transport()
    async with anyio.create_task_group() as tg:
        conn = connection(transport)
        conn.start(tg)
        transport.block()
        assert conn.send_nowait(pong(0))
        assert conn.send_nowait(pong(1))
        transport.fail = OSError("gone")
        transport.unblock()  # p0 completes, then p1 fails
        with anyio.fail_after(2):
            while conn.close_code is None:  # noqa: ASYNC110 (polling a plain attribute)
                await anyio.sleep(0.001)
    assert conn.close_code == CloseCode.GOING_AWAY
    assert ids(transport) == ["p0"]


async def test_nothing_is_sent_after_release() -> None:
    transport = Transport()
    async with anyio.create_task_group() as tg:
        conn = connection(transport)
        conn.start(tg)
        conn.release()
        assert not conn.send_nowait(pong(0))
        assert transport.calls == 0
        tg.cancel_scope.cancel()


async def test_idle_sockets_close_with_4408_only_when_their_session_is_quiet_too() -> None:
    quiet_session = SimpleNamespace(last_activity=time.time() - 100)
    busy_session = SimpleNamespace(last_activity=time.time())
    idle = connection(Transport(), actor=quiet_session)
    idle.last_frame = time.monotonic() - 100
    watching = connection(Transport(), actor=busy_session)
    watching.last_frame = time.monotonic() - 100
    talking = connection(Transport(), actor=quiet_session)
    assert close_idle_sockets({idle, watching, talking}, idle_seconds=50) == 1
    assert idle.close_code == CloseCode.IDLE
    assert watching.close_code is None and talking.close_code is None


async def test_the_server_closes_an_idle_socket_with_4408(monkeypatch: pytest.MonkeyPatch) -> None:
    from server import ws
    from tests.servers import client, close_code, create, running_server

    monkeypatch.setattr(ws, "IDLE_CHECK_SECONDS", 0.05)
    async with running_server(CONNECTION_IDLE_SECONDS=0.3) as served:
        created = await create(served)
        async with client(served.ws_url(created["session_id"], created["player_token"])) as c:
            assert (await c.recv())["type"] == "welcome"
            started = time.monotonic()
            assert await close_code(c, wait=5) == CloseCode.IDLE
            assert time.monotonic() - started >= 0.25
