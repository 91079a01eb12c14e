"""Every reach into another library's internals, in one place, with the versions it was written for.

Each is a speed-up (less memory per socket, fewer writes, fewer reads) that the public API does not
offer. `WRITTEN_FOR` names the versions of each library they were written and tested against;
pyproject.toml pins the same ranges, and tests/test_privates_contract.py exercises every private on
the installed library's real objects and fails, naming the private, when an upgrade moves it.

The privates, what they reach into, who uses them, and what happens when they are gone:

- `LeanWebSocketsSansIOProtocol` (uvicorn, websockets): the `queue`, `writable`, `transport`,
  `conn.parser`, `request`, `response`, `handshake_complete`, `close_sent`, `read_paused` and
  `close_timer` of uvicorn's sans-I/O protocol, and the names of all its attributes (`__slots__`).
  server/cli.py (`UVICORN_WS`). Gone: `protocol_class` hands uvicorn its own protocol.
- `frame_writer` (uvicorn, websockets): the ASGI `send` of a lean protocol is its bound method;
  the frame is written as websockets writes it, after checking websockets' `state`,
  `expect_continuation_frame`, `extensions`, `debug` and pending `writes`. server/connection.py.
  Gone: None, and every frame goes through uvicorn's `send`, as before.
- `LeanHttpToolsProtocol` (uvicorn): the `parser` of uvicorn's httptools protocol, dropped once
  the protocol has handed its socket to a WebSocket protocol, and its `transport`, corked (and
  handed to the WebSocket protocol plain). server/cli.py (`UVICORN_HTTP`).
  Gone: `http_protocol_class` hands uvicorn its own protocol, and each upgraded connection waits
  for the collector's full pass.
- `CalmServer` (uvicorn): `Server.main_loop` replaced, `on_tick` called with uvicorn's 100 ms tick
  count. server/serving.py (`samvad serve`). Its main loop wakes once a second instead of ten times.
- `raw_receive` (starlette): `WebSocket._receive`. For server/ws.py's reader, which still reads
  `websocket._receive` itself until it moves to this (issue #32's socket edge).
- `aiohttp_response` (httpx2, openai's vendored aiohttp transport): `Response.stream._stream.
  _aiohttp_response`. brain/transport.py. Gone: None, and the SDK's own reads.
- `plain_content` (aiohttp): `ClientResponse.content`. brain/transport.py. Gone: the SDK's reads.
- `rest_reading` (aiohttp): `ClientResponse.connection.transport`. voice/openai_speech.py's
  speech reads. Gone: no pause between reads.
- `ReadingRest` (aiohttp): the same transport, paused now and resumed by a timer of the loop's.
  brain/transport.py. Gone: no pause between reads.
- `read_buffered`, `readable` (aiohttp; privates/aio.py): `StreamReader`'s buffer and its
  bookkeeping, taken in one piece. brain/transport.py. Gone: `readany`.
- `fixed_headers`, `http_client`, `status_error` (openai; privates/sdk.py): the SDK client's HTTP
  client and status errors, for a request prepared once. brain/transport.py. Gone: every request
  through `client.post`.

The uvicorn protocol (server/uvicorn_ws.py before it moved here) is uvicorn's websockets sans-I/O
protocol, holding less per idle connection. The stock protocol keeps, for the life of every
connection, the parsed handshake request and response (their header objects: about 5 KiB) and an
`asyncio.Queue` plus an `asyncio.Event`, each owning one or more empty deques of 760 bytes. With
thousands of idle sockets that is a third of what a socket costs the server (benchmarks/load.py,
scenario d). The subclass drops the handshake once it is done and swaps the queue and the event for
list-based equivalents with the same behaviour for uvicorn's single reader, which its `receive`
awaits without a second coroutine. It keeps uvicorn's attributes in slots, not in a dict per
connection, and its keepalive pings go on one timer per second for all sockets (`KeepaliveWheel`),
not on a timer per socket (docs/performance.md, "An idle socket"). It also fails a
connection the way websockets' own server does (see `handle_parser_exception`), so that a client
always reads the close code. Its writes are corked (`CorkedTransport`): the frames one callback of
the event loop sends to a socket go out in one write. A data frame can skip uvicorn's `send` and
websockets' frame objects altogether (`write_data_nowait`, reached through `frame_writer`): while
the socket is open, writable and plain (no extension such as permessage-deflate, nothing of
websockets' own waiting to go), a server's unmasked frame is two bytes of header, or four or ten,
and the payload, which is all `send` would have written. Everything else is uvicorn's own code.
`protocol_class()` returns the stock class unchanged if the installed uvicorn does not look the way
the subclass expects, so an upgrade degrades to the plain protocol instead of breaking.

The lean protocol's own parts (its queue, flag, corked transport and keepalive wheel: our code, no
library's internals) are in `privates/parts.py`.

This package imports nothing of ours: brain/ and server/ both use it (tests/test_layers.py).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn
from starlette.types import Receive
from starlette.websockets import WebSocket
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol  # httptools: uvicorn[standard]
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import OPEN

from privates.aio import read_buffered, readable
from privates.parts import CorkedTransport, KeepaliveWheel, ReceiveQueue, WritableFlag
from privates.sdk import fixed_headers, http_client, status_error

__all__ = [
    "PRIVATES",
    "WRITTEN_FOR",
    "CalmServer",
    "CorkedTransport",
    "KeepaliveWheel",
    "LeanHttpToolsProtocol",
    "LeanWebSocketsSansIOProtocol",
    "ReadingRest",
    "ReceiveQueue",
    "WritableFlag",
    "aiohttp_response",
    "fixed_headers",
    "frame_writer",
    "http_client",
    "http_protocol_class",
    "plain_content",
    "protocol_class",
    "raw_receive",
    "read_buffered",
    "readable",
    "rest_reading",
    "status_error",
]

# The distributions whose internals this module reaches into, with the versions it was written and
# tested for (pyproject.toml pins the same). Widen a range only after tests/test_privates_contract.py
# passes against the new version.
WRITTEN_FOR: dict[str, str] = {
    "uvicorn": ">=0.54,<0.55",
    "websockets": ">=17,<18",
    "starlette": ">=1.10,<2",
    "openai": ">=3.57,<4",
    "httpx2": ">=2.16,<3",
    "aiohttp": ">=3.14,<4",
}

# Each private, and the distributions whose internals it reaches into.
PRIVATES: dict[str, tuple[str, ...]] = {
    "LeanWebSocketsSansIOProtocol": ("uvicorn", "websockets"),
    "frame_writer": ("uvicorn", "websockets"),
    "LeanHttpToolsProtocol": ("uvicorn",),
    "CalmServer": ("uvicorn",),
    "raw_receive": ("starlette",),
    "aiohttp_response": ("openai", "httpx2"),
    "plain_content": ("aiohttp",),
    "rest_reading": ("aiohttp",),
    "ReadingRest": ("aiohttp",),
    "read_buffered": ("aiohttp",),
    "readable": ("aiohttp",),
    "fixed_headers": ("openai",),
    "http_client": ("openai",),
    "status_error": ("openai",),
}


# ---------------------------------------------------------------------------- starlette


def raw_receive(websocket: WebSocket) -> Receive:
    """The ASGI `receive` under a Starlette `WebSocket`: a reader that handles disconnects itself
    skips the state checks of `WebSocket.receive` on every message."""
    return websocket._receive


# ---------------------------------------------------------------------------- openai SDK and aiohttp


def aiohttp_response(response: Any) -> Any | None:
    """The aiohttp response under the SDK's streamed one (None if the SDK is built otherwise)."""
    found: object = response
    for name in ("stream", "_stream", "_aiohttp_response"):
        found = getattr(found, name, None)
        if found is None:
            return None
    return found


def plain_content(response: Any, aiohttp_response: Any | None) -> Any | None:
    """aiohttp's reader of the body when the body is sent as it is (no content-encoding), else None."""
    content = getattr(aiohttp_response, "content", None)
    encoding = response.headers.get("content-encoding", "identity")
    return content if content is not None and encoding.strip().lower() == "identity" else None


async def rest_reading(aiohttp_response: Any, seconds: float) -> None:
    """Leave the model's socket unread for `seconds`, so that what it sends meanwhile is one read.

    Only while the response still holds its connection: once the body is complete, aiohttp hands
    the connection back to its pool, and another call may be reading it.
    """
    resting = ReadingRest(aiohttp_response)
    resting.rest(seconds)
    if not resting.resting:
        return
    try:
        await asyncio.sleep(seconds)  # aiohttp's transport is asyncio's; anyio.sleep would look that up
    finally:
        resting.close()


class ReadingRest:
    """Rests a streamed response's socket between reads without a wake-up of the reader.

    `rest_reading` pauses the socket and sleeps, so every rest is two wake-ups of the reading
    task: the sleep's end, then the data. `rest(seconds)` pauses the socket and returns at once;
    a timer of the loop's resumes it, and the reader, already waiting in its next read, wakes
    once, when what arrived meanwhile is in aiohttp's buffer. Nothing can arrive while the socket
    rests, so the body cannot end (and aiohttp cannot hand the connection back to its pool) before
    the timer has resumed it; a rest is not started once the connection has gone. `close()` ends a
    rest early (the reader stops, or is cancelled) so that a socket is never left paused.
    """

    __slots__ = ("_handle", "_response", "_transport")

    def __init__(self, aiohttp_response: Any) -> None:
        self._response = aiohttp_response
        self._transport: Any | None = None
        self._handle: asyncio.TimerHandle | None = None

    def rest(self, seconds: float) -> None:
        """Leave the socket unread for `seconds` from now (a rest under way is replaced)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        else:
            transport = getattr(getattr(self._response, "connection", None), "transport", None)
            if seconds <= 0 or transport is None or transport.is_closing():
                return
            transport.pause_reading()
            self._transport = transport
        if seconds <= 0:
            self._resume()
            return
        self._handle = asyncio.get_running_loop().call_later(seconds, self._resume)

    @property
    def resting(self) -> bool:
        return self._handle is not None

    def _resume(self) -> None:
        self._handle = None
        transport, self._transport = self._transport, None
        if transport is not None and not transport.is_closing():
            transport.resume_reading()

    def close(self) -> None:
        """End a rest under way now."""
        if self._handle is not None:
            self._handle.cancel()
            self._resume()


# ---------------------------------------------------------------------------- uvicorn


UVICORN_METHODS = ("handle_connect", "start_keepalive", "connection_lost", "receive", "send", "pause_writing",
                   "resume_writing", "data_received", "handle_parser_exception", "schedule_ping",
                   "stop_keepalive", "send_keepalive_ping")


def _looks_compatible() -> bool:
    """Whether uvicorn's protocol still has the methods the subclass overrides or calls."""
    return all(callable(getattr(WebSocketsSansIOProtocol, name, None)) for name in UVICORN_METHODS)


class LeanWebSocketsSansIOProtocol(WebSocketsSansIOProtocol):
    # Every attribute uvicorn's protocol sets, in slots: it sets 37, past the 30 that CPython's
    # key-sharing instance dicts hold, so each connection had a dict of its own (about 1.5 KiB).
    # An attribute a later uvicorn adds still works: it goes to the instance dict. `ping_second` is
    # ours: the second its next ping is due on the `KeepaliveWheel`.
    __slots__ = ("app", "app_state", "asgi_version", "client", "close_sent", "close_timeout", "close_timer",
                 "config", "conn", "connections", "curr_msg_data_type", "default_headers", "disconnected",
                 "frames", "handshake_complete", "handshake_initiated", "initial_response", "last_ping_rtt",
                 "logger", "loop", "pending_ping_payload", "ping_interval", "ping_second", "ping_sent_at",
                 "ping_timeout", "ping_timer", "pong_timer", "queue", "read_paused", "request", "response",
                 "root_path", "scheme", "scope", "server", "tasks", "transport", "writable")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.ping_second: int | None = None
        super().__init__(*args, **kwargs)
        if isinstance(self.queue, asyncio.Queue) and self.queue.empty():
            self.queue = ReceiveQueue()  # type: ignore[assignment]
        if isinstance(self.writable, asyncio.Event):
            flag = WritableFlag()
            if self.writable.is_set():
                flag.set()
            self.writable = flag  # type: ignore[assignment]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.transport = CorkedTransport(self.transport, self.loop)  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        # websockets' sans-I/O protocol keeps its parser, a generator suspended in one of its own
        # methods, after the close: protocol -> parser -> frame -> protocol, a cycle that only the
        # collector frees, and server/gcpolicy.py freezes what has lived through two young passes.
        # Nothing is read after the connection is lost: closing the parser frees it at once.
        parser = getattr(self.conn, "parser", None)
        if parser is not None and hasattr(parser, "close"):
            parser.close()

    def start_keepalive(self) -> None:
        # Called once the handshake response has been written: the request and response are
        # never read again, so let their headers go.
        super().start_keepalive()
        if getattr(self, "handshake_complete", False):
            request = getattr(self, "request", None)
            if request is not None:
                # websockets' parser generator keeps the request in a local for as long as the
                # connection lasts: empty its headers and its path (with the query, often a token),
                # the bulk of it, as well as letting go.
                request.headers.clear()
                request.path = ""
            self.request = None  # type: ignore[assignment]
            self.response = None  # type: ignore[assignment]

    def schedule_ping(self) -> None:
        # uvicorn's own: `loop.call_later(delay, self.send_keepalive_ping)`, a timer per socket.
        assert self.ping_interval is not None
        self.ping_second = KeepaliveWheel.of(self.loop).add(self, max(0.0, self.ping_interval - self.last_ping_rtt))

    def stop_keepalive(self) -> None:
        second, self.ping_second = self.ping_second, None
        if second is not None:
            KeepaliveWheel.of(self.loop).discard(self, second)
        super().stop_keepalive()

    async def receive(self) -> Any:
        """uvicorn's `receive`, which awaits `queue.get()`, in one coroutine instead of two: an idle
        socket's reader keeps its chain of coroutines for as long as it waits."""
        queue = self.queue
        if not isinstance(queue, ReceiveQueue):
            return await super().receive()
        items = queue._items
        while not items:
            waiter = queue._waiter = self.loop.create_future()
            try:
                await waiter
            finally:
                if queue._waiter is waiter:
                    queue._waiter = None
        message = items.pop(0)
        if self.read_paused and not items:
            self.read_paused = False
            self.transport.resume_reading()
        return message

    def write_data_nowait(self, payload: str | bytes) -> bool:
        """Write `payload` as one text (a str) or binary frame at once, as `send` would have written
        it; False, with nothing written, when `send` must do it instead: the transport is backed up
        (`send` waits), the handshake or the close is under way, or websockets would change or
        add to the frame (an extension, a fragmented message, debug logging, bytes of its own
        waiting to go). Only for a server's frames: they are never masked (RFC 6455, 5.1)."""
        conn = self.conn
        if (not self.writable.is_set() or self.disconnected or not self.handshake_complete or self.close_sent
                or self.initial_response is not None or conn.state is not OPEN or conn.extensions
                or conn.expect_continuation_frame or conn.debug or conn.writes):
            return False
        if isinstance(payload, str):
            data, head = payload.encode(), 0x81  # FIN and the text opcode
        else:
            data, head = payload, 0x82  # FIN and the binary opcode
        length = len(data)
        if length < 126:
            header = struct.pack("!BB", head, length)
        elif length < 65536:
            header = struct.pack("!BBH", head, 126, length)
        else:
            header = struct.pack("!BBQ", head, 127, length)
        transport = self.transport
        transport.write(header)  # corked: header and payload leave in one write, with the callback's other frames
        transport.write(data)
        return True

    def handle_parser_exception(self) -> None:
        """The client broke the protocol (a frame over `ws_max_size`: 1009, text that is not
        UTF-8: 1007, a malformed frame: 1002): websockets' `fail()` has queued the close frame and
        the end of our stream. Write both, then go on reading, and discarding, until the client
        closes its side, for `close_timeout` at most.

        uvicorn closes the socket at once instead. With the rest of an oversized frame unread in
        the kernel, closing makes it send a reset, which throws away the close frame still in
        flight: a client that writes its whole frame before reading saw 1006, not 1009.
        """
        if not self.close_sent:
            close = self.conn.close_sent
            assert close is not None
            self.queue.put_nowait({"type": "websocket.disconnect", "code": close.code, "reason": close.reason})
            self.close_sent = True
        for data in self.conn.data_to_send():  # b"" stands for the end of the stream
            if data:
                self.transport.write(data)
            elif self.transport.can_write_eof() and not self.transport.is_closing():
                self.transport.write_eof()
        # websockets' parser now discards whatever arrives; it must keep arriving.
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()
        if self.close_timer is None:
            self.close_timer = self.loop.call_later(self.close_timeout, self.transport.close)


def frame_writer(send: Any) -> Callable[[str | bytes], bool] | None:
    """The lean protocol's `write_data_nowait` when `send` is that protocol's ASGI send (its bound
    `send`, with no middleware between), else None: then every frame goes through `send`."""
    protocol = getattr(send, "__self__", None)
    if isinstance(protocol, LeanWebSocketsSansIOProtocol) and getattr(send, "__func__", None) is (
            LeanWebSocketsSansIOProtocol.send):
        return protocol.write_data_nowait
    return None


def protocol_class(name: str) -> Any:
    """What to hand uvicorn as `ws=` for the setting UVICORN_WS=`name`."""
    if name in ("auto", "websockets-sansio") and _looks_compatible():
        return LeanWebSocketsSansIOProtocol
    return name


# ---------------------------------------------------------------------------- uvicorn's HTTP protocol
# httptools' parser calls its protocol back through bound methods it holds: protocol -> parser ->
# method -> protocol, a cycle. uvicorn breaks it in `connection_lost`, which the HTTP protocol of a
# connection upgraded to a WebSocket never gets: the transport now belongs to the WebSocket
# protocol. So every WebSocket connection left its HTTP protocol, with the transport and its
# socket object, to the cyclic collector, and server/gcpolicy.py froze them (they live through
# two young passes) until its planned full pass: with scenario b's load, about 17 objects per
# session, nearly all the cyclic garbage the full pass found. Nothing reads the parser after the
# upgrade (the transport hands its data to the new protocol), so the subclass drops it there.

HTTPTOOLS_METHODS = ("data_received", "handle_websocket_upgrade", "connection_lost", "connection_made")


def _http_looks_compatible() -> bool:
    """Whether uvicorn's httptools protocol still has the methods the subclass overrides or calls."""
    return all(callable(getattr(HttpToolsProtocol, name, None)) for name in HTTPTOOLS_METHODS)


class LeanHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, which lets go of its parser once a WebSocket has the socket,
    and whose writes are corked (`CorkedTransport`): uvicorn writes a response's head and its body
    in two writes, two `write(2)`s for every `POST /api/sessions`, and now they leave as one.
    `close` sends what waits first, so `Connection: close` and the refusals are unchanged."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CorkedTransport(transport, self.loop))  # type: ignore[arg-type]

    def handle_websocket_upgrade(self) -> None:
        # The WebSocket protocol corks the socket itself: it gets the plain transport (nothing
        # of this protocol's waits in the cork by then; a flush makes sure).
        corked = self.transport
        if isinstance(corked, CorkedTransport):
            corked.flush()
            self.transport = corked._transport
        super().handle_websocket_upgrade()
        self.parser = None  # type: ignore[assignment]  # as uvicorn's own connection_lost does


def http_protocol_class(name: str) -> Any:
    """What to hand uvicorn as `http=` for the setting UVICORN_HTTP=`name`."""
    if name in ("auto", "httptools") and _http_looks_compatible():
        return LeanHttpToolsProtocol
    return name


# ---------------------------------------------------------------------------- uvicorn's server loop
# (server/serving.py before it moved here) uvicorn's main loop wakes every 100 ms to refresh the
# `date` header (which changes once a second) and to see whether a signal asked it to stop. On an
# idle server those ten wake-ups a second are most of the process's CPU (docs/performance.md).
# `CalmServer` ticks once a second, with the same `on_tick` (so the `date` header is as fresh as
# uvicorn keeps it), and a stop signal wakes the loop at once instead of waiting for the next tick.

TICK_S = 1.0
_TICKS_PER_SECOND = 10  # uvicorn's `on_tick` counts 100 ms ticks: every tenth refreshes the headers


class CalmServer(uvicorn.Server):
    """A `uvicorn.Server` whose main loop ticks every `TICK_S` and wakes at once on a stop signal."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + _TICKS_PER_SECOND) % 864000
            try:
                await asyncio.wait_for(self._stop.wait(), TICK_S)
            except TimeoutError:
                pass

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)  # a signal handler may not touch the loop directly
