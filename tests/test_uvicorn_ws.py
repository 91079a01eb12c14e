"""The leaner uvicorn WebSocket protocol: its queue and flag, and what a live socket keeps."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref
from typing import Any

import pytest
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request

from clients.bots.steady import collector_paused
from privates import (
    CorkedTransport,
    KeepaliveWheel,
    LeanHttpToolsProtocol,
    LeanWebSocketsSansIOProtocol,
    ReceiveQueue,
    WritableFlag,
    frame_writer,
    protocol_class,
)
from privates.parts import _WHEELS
from tests.servers import bare_uvicorn, client, create, running_server

pytestmark = pytest.mark.anyio


def test_protocol_class_picks_the_lean_protocol_only_for_sans_io() -> None:
    assert protocol_class("auto") is LeanWebSocketsSansIOProtocol
    assert protocol_class("websockets-sansio") is LeanWebSocketsSansIOProtocol
    assert protocol_class("websockets") == "websockets"
    assert protocol_class("wsproto") == "wsproto"
    assert issubclass(LeanWebSocketsSansIOProtocol, WebSocketsSansIOProtocol)


class _Recording(asyncio.Transport):
    """A transport that records its writes, as the kernel would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, bytes]] = []
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.calls.append(("write", bytes(data)))

    def write_eof(self) -> None:
        self.calls.append(("eof", b""))

    def close(self) -> None:
        self.closing = True
        self.calls.append(("close", b""))

    def abort(self) -> None:
        self.closing = True
        self.calls.append(("abort", b""))

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 7


async def test_corked_writes_of_one_callback_leave_as_one_write_in_order() -> None:
    raw = _Recording()
    corked = CorkedTransport(raw, asyncio.get_running_loop())
    corked.write(b"reply|")
    corked.writelines([b"mood|", b"tips"])
    assert raw.calls == [] and corked.get_write_buffer_size() == 7 + 15
    await asyncio.sleep(0)
    assert raw.calls == [("write", b"reply|mood|tips")]
    corked.write(b"delta")
    await asyncio.sleep(0)
    assert raw.calls[-1] == ("write", b"delta")  # a lone frame goes out alone, one iteration on
    corked.write(b"close-frame")
    corked.write_eof()  # what waits goes first
    assert raw.calls[-2:] == [("write", b"close-frame"), ("eof", b"")]
    corked.write(b"last")
    corked.close()
    assert raw.calls[-2:] == [("write", b"last"), ("close", b"")]
    corked.write(b"after close")  # dropped, as the transport itself drops it
    await asyncio.sleep(0)
    assert raw.calls[-1] == ("close", b"")
    assert corked.is_closing()  # anything else is the transport's own


async def test_an_aborted_corked_transport_drops_what_waits() -> None:
    raw = _Recording()
    corked = CorkedTransport(raw, asyncio.get_running_loop())
    corked.write(b"never")
    corked.abort()
    await asyncio.sleep(0)
    assert raw.calls == [("abort", b"")]


async def test_receive_queue_is_fifo_and_wakes_its_reader() -> None:
    q = ReceiveQueue()
    assert q.empty() and q.qsize() == 0
    q.put_nowait(1)
    q.put_nowait(2)
    assert await q.get() == 1
    assert q.get_nowait() == 2
    with pytest.raises(asyncio.QueueEmpty):
        q.get_nowait()
    getter = asyncio.ensure_future(q.get())
    await asyncio.sleep(0)
    q.put_nowait(3)
    assert await getter == 3


async def test_receive_queue_survives_a_cancelled_get() -> None:
    q = ReceiveQueue()
    getter = asyncio.ensure_future(q.get())
    await asyncio.sleep(0)
    getter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await getter
    q.put_nowait("kept")  # nobody waiting now: no error, and the item stays for the next get
    assert await asyncio.wait_for(q.get(), 1) == "kept"


async def test_writable_flag_blocks_while_cleared() -> None:
    flag = WritableFlag()
    assert not flag.is_set()
    flag.set()
    assert await flag.wait() is True
    flag.clear()
    waiters = [asyncio.ensure_future(flag.wait()) for _ in range(2)]
    cancelled = asyncio.ensure_future(flag.wait())
    await asyncio.sleep(0)
    cancelled.cancel()
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters)
    flag.set()
    assert await asyncio.gather(*waiters) == [True, True]
    assert cancelled.cancelled()


async def test_a_live_socket_drops_its_handshake_and_uses_the_lean_queue() -> None:
    async with running_server() as served:
        created = await create(served)
        url = served.ws_url(created["session_id"], created["player_token"])
        async with client(url) as c:
            await c.recv()  # the welcome
            got = await c.turn("t1", "namaste bhaiya")
            assert got[0]["type"] == "reply"
            # `type(o) is`, not isinstance: a dead weakref.proxy left by an earlier test raises on isinstance.
            protocols = [o for o in gc.get_objects() if type(o) is LeanWebSocketsSansIOProtocol]
            assert len(protocols) == 1
            proto = protocols[0]
            assert proto.request is None and proto.response is None
            # Every attribute uvicorn sets is in a slot: no instance dict of its own.
            assert proto.__dict__ == {}
            # The request itself lives on in websockets' parser; its headers and its path, with
            # the token in its query, do not.
            request = proto.conn.parser.gi_frame.f_locals["request"]
            assert type(request) is Request
            assert len(request.headers) == 0 and request.path == ""
            # Nor does the ASGI scope, which uvicorn keeps, hold the handshake's headers and query.
            assert proto.scope["headers"] == [] and proto.scope["query_string"] == b""
            assert isinstance(proto.queue, ReceiveQueue)
            assert isinstance(proto.writable, WritableFlag) and proto.writable.is_set()
            # Corked once: the HTTP protocol, corked itself, hands the upgraded socket over plain.
            assert isinstance(proto.transport, CorkedTransport)
            assert not isinstance(proto.transport._transport, CorkedTransport)




def _awaiting(coro: Any) -> list[str]:
    """The names of the coroutines `coro` is suspended in, outermost first."""
    names = []
    while coro is not None and hasattr(coro, "cr_code"):
        names.append(coro.cr_code.co_name)
        coro = coro.cr_await
    return names


async def test_an_idle_sockets_reader_waits_in_as_few_coroutines_as_the_server_needs() -> None:
    """What an idle socket keeps is its waiting coroutines: uvicorn's task, the app's entry that
    serves session sockets before Starlette's middleware, the reader, and the lean receive."""
    async with running_server() as served:
        created = await create(served)
        url = served.ws_url(created["session_id"], created["player_token"])
        async with client(url) as c:
            await c.recv()  # the welcome
            protocols = [o for o in gc.get_objects() if type(o) is LeanWebSocketsSansIOProtocol]
            assert len(protocols) == 1
            tasks = list(protocols[0].tasks)
            assert len(tasks) == 1
            assert _awaiting(tasks[0].get_coro()) == ["run_asgi", "__call__", "session_socket", "receive"]

async def test_a_closed_socket_frees_websockets_protocol_without_the_collector() -> None:
    """websockets' parser keeps its protocol in a cycle after the close, and server/gcpolicy.py
    freezes long-lived objects: the lean protocol closes the parser when the connection is lost."""
    async with running_server() as served:
        created = await create(served)
        url = served.ws_url(created["session_id"], created["player_token"])
        with collector_paused():
            async with client(url) as c:
                await c.recv()  # the welcome
                protocols = [o for o in gc.get_objects() if type(o) is LeanWebSocketsSansIOProtocol]
                assert len(protocols) == 1
                conn = weakref.ref(protocols[0].conn)
                del protocols
            for _ in range(100):  # the server side sees the close a few loop passes later
                if conn() is None:
                    break
                await asyncio.sleep(0.01)
            assert conn() is None, "the closed connection's websockets protocol waits for the collector"


class _Pinged:
    """What the wheel calls of a protocol: `send_keepalive_ping`, and its `ping_second` cleared first."""

    def __init__(self) -> None:
        self.ping_second: int | None = -1
        self.pings = 0

    def send_keepalive_ping(self) -> None:
        assert self.ping_second is None
        self.pings += 1


async def test_the_keepalive_wheel_pings_each_due_socket_once_and_forgets_a_discarded_one() -> None:
    loop = asyncio.get_running_loop()
    wheel = KeepaliveWheel.of(loop)
    due, gone = _Pinged(), _Pinged()
    first = wheel.add(due, 0.0)
    second = wheel.add(gone, 0.0)
    assert first == second  # one timer for the second, however many sockets are due in it
    wheel.discard(gone, second)
    for _ in range(150):
        if due.pings:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    assert (due.pings, gone.pings) == (1, 0)
    assert loop not in _WHEELS  # nothing due: the wheel lets go of its loop


async def test_an_idle_socket_is_pinged_and_answers_without_a_timer_of_its_own() -> None:
    import websockets

    async with bare_uvicorn(ws=protocol_class("auto"), ws_ping_interval=0.2, ws_ping_timeout=5.0) as port:
        async with websockets.connect(f"ws://127.0.0.1:{port}/"):  # answers pings by itself
            await asyncio.sleep(0.05)
            protocols = [o for o in gc.get_objects() if type(o) is LeanWebSocketsSansIOProtocol]
            assert len(protocols) == 1
            proto = protocols[0]
            for _ in range(300):  # the first ping leaves within a second of the interval
                if proto.last_ping_rtt > 0 and proto.ping_second is not None:
                    break
                await asyncio.sleep(0.01)
            assert proto.last_ping_rtt > 0, "no pong came back to a ping"
            assert proto.ping_timer is None and proto.ping_second is not None  # the next ping, on the wheel
        for _ in range(100):  # the server side sees the close a few loop passes later
            if asyncio.get_running_loop() not in _WHEELS:
                break
            await asyncio.sleep(0.01)
        assert asyncio.get_running_loop() not in _WHEELS, "a closed socket is still due a ping"


# Lengths on each side of the header's three sizes (7 bits, 16 bits, 64 bits), and UTF-8 text
# whose encoding is longer than its characters.
_PAYLOADS: list[str | bytes] = ["", "a" * 125, "b" * 126, "c" * 65535, "d" * 65536, "\u0915" * 30000,
                                b"\x00\xff" * 40000, b"\x81\x7e"]


async def _writing_app(scope: Any, receive: Any, send: Any) -> None:
    """Accept, write every payload in one callback straight to the transport where it can (through
    uvicorn's `send` where it cannot), then say which went which way, through `send`."""
    if scope["type"] != "websocket":
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    write = frame_writer(send)
    assert write is not None
    proto = send.__self__
    proto.writable.clear()  # as when the transport is backed up: `send` must wait, so no direct write
    backed_up = write("while backed up")
    proto.writable.set()
    direct = []
    for payload in _PAYLOADS:
        direct.append(write(payload))
        if not direct[-1]:
            key = "text" if isinstance(payload, str) else "bytes"
            await send({"type": "websocket.send", key: payload})
    await send({"type": "websocket.send", "text": json.dumps({"direct": direct, "backed_up": backed_up})})
    await receive()  # until the client closes


@pytest.mark.parametrize("compression", [None, "deflate"])
async def test_frames_written_straight_to_the_transport_arrive_whole_and_in_order(compression: str | None) -> None:
    """Several frames written in one callback leave in one corked write, and the client still reads
    each as its own message, in order, text as text and bytes as bytes. With permessage-deflate the
    frames must be compressed, so every one goes through uvicorn's `send` instead."""
    import websockets

    async with bare_uvicorn(_writing_app, ws=protocol_class("auto")) as port:
        async with websockets.connect(f"ws://127.0.0.1:{port}/", compression=compression, max_size=None) as ws:
            got = [await asyncio.wait_for(ws.recv(), 10) for _ in _PAYLOADS]
            told = json.loads(await asyncio.wait_for(ws.recv(), 10))
    assert got == _PAYLOADS
    assert told["backed_up"] is False
    assert told["direct"] == [compression is None] * len(_PAYLOADS)


def test_frame_writer_is_only_for_the_lean_protocols_own_send() -> None:
    async def send(message: Any) -> None:
        """An ASGI send of some other server, or one wrapped by middleware."""

    assert frame_writer(send) is None
    assert frame_writer(WebSocketsSansIOProtocol.send) is None


class _RecordingSocket(_Recording):
    """What uvicorn's HTTP protocol also calls of its transport."""

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _created(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 201,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"13")]})
    await send({"type": "http.response.body", "body": b'{"ok": true} '})


@pytest.mark.parametrize("keep_alive", [True, False])
async def test_an_http_responses_head_and_body_leave_in_one_write(keep_alive: bool) -> None:
    import uvicorn
    from uvicorn.server import ServerState

    config = uvicorn.Config(_created, lifespan="off", log_config=None)
    config.load()
    proto = LeanHttpToolsProtocol(config, ServerState(), {}, _loop=asyncio.get_running_loop())
    raw = _RecordingSocket()
    proto.connection_made(raw)
    closing = b"" if keep_alive else b"Connection: close\r\n"
    request = b"POST /api/sessions HTTP/1.1\r\nHost: x\r\n" + closing + b"Content-Length: 0\r\n\r\n"
    try:
        for _ in range(2 if keep_alive else 1):  # a kept-alive connection answers the next request alike
            before = len(raw.calls)
            proto.data_received(request)
            for _ in range(50):
                if len(raw.calls) > before:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.01)
            calls = raw.calls[before:]
            assert calls[0][0] == "write" and [kind for kind, _ in calls[1:]] == ([] if keep_alive else ["close"])
            written = calls[0][1]
            assert written.startswith(b"HTTP/1.1 201 Created\r\n") and written.endswith(b'\r\n\r\n{"ok": true} ')
    finally:
        proto.connection_lost(None)
