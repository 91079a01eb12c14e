"""The WebSocket endpoint: authenticate, pick the wire format, then pump frames both ways.

Each connection has a reader (this handler). The session actor only ever calls `send_nowait`,
which writes straight away while the socket keeps up and otherwise queues behind a task that
waits for the transport; when that bounded queue is full the connection is closed as a slow
consumer instead of making anyone wait. An idle connection holds no task besides its reader.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterable
from typing import TYPE_CHECKING, Any

import anyio
from anyio import CancelScope
from anyio.abc import TaskGroup
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from schemas.codec import Envelope, FrameError, WireFormat, decode_frame
from schemas.enums import Role
from schemas.errors import CloseCode, ErrorCode
from schemas.frames import Error, PingFrame, Pong, ResumeFrame, SceneFrame, TranscriptFrame
from server.auth import TokenError
from session.protocols import MirrorUnavailable

if TYPE_CHECKING:
    from server.app import Services
    from session.actor import SessionActor

log = logging.getLogger("samvad.ws")
_conn_ids = itertools.count(1)
SUBPROTOCOLS = {fmt.value: fmt for fmt in WireFormat}
IDLE_CHECK_SECONDS = 15.0


class TokenBucket:
    """Frames allowed per second with a burst; `take()` says whether one more fits now."""

    __slots__ = ("burst", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.stamp = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class _Resume:
    """Awaiting this finishes a coroutine that was started by hand and suspended.

    `WsConnection` drives the ASGI `send` coroutine itself so that a write to a socket that is
    not backed up needs no task. When the transport pushes back the coroutine suspends on
    whatever its event loop yielded (`first`); a task then awaits this object, which hands that
    to the loop and passes every result or exception on, as `await coro` would have done.

    The first part of the send runs in whichever task called `send_nowait` (a session's
    dispatcher, or a socket's reader), the rest in the connection's task. That is sound for
    uvicorn's protocols, whose sends wait only on an event or future before writing; a send
    that entered a timeout or cancel scope before its first suspension would not be.
    """

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, None], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, None]:
        coro = self._coro
        yielded = self._first
        self._first = None
        while True:
            try:
                sent = yield yielded
            except BaseException as exc:  # cancellation (or close) goes to the coroutine
                try:
                    yielded = coro.throw(exc)
                except StopIteration:
                    return
            else:
                try:
                    yielded = coro.send(sent)
                except StopIteration:
                    return


class WsConnection:
    """A client socket as the session actor sees it.

    `send_nowait` writes at once while the socket keeps up, so an idle connection holds no task
    and no queue. When the transport pushes back, the write that blocked finishes in a task of
    the connection's task group, and later events wait behind it in a queue of at most `queue`
    events, in order; one more closes the connection as a slow consumer (4430). Nothing the
    session does ever waits on a connection.
    """

    __slots__ = ("_backlog", "_capacity", "_open", "_send", "_spawn", "actor", "close_code",
                 "close_reason", "conn_id", "fmt", "last_frame", "role", "scope", "session_id",
                 "websocket")

    def __init__(self, websocket: WebSocket, role: Role, fmt: WireFormat, session_id: str,
                 queue: int, actor: SessionActor | None = None) -> None:
        self.websocket = websocket
        self.role = role.value
        self.fmt = fmt
        self.session_id = session_id
        self.actor = actor
        self.conn_id = next(_conn_ids)
        # The raw ASGI send (see `SessionSocketFastPath`): Starlette's per-message state checks
        # and exception wrappers cost more than the frame itself.
        self._send = websocket._send
        self._capacity = queue
        self._backlog: deque[Envelope] | None = None  # only while a write is blocked
        self._spawn: Callable[..., object] | None = None
        self._open = True
        self.close_code: int | None = None
        self.close_reason = ""
        self.scope: CancelScope | None = None
        self.last_frame = time.monotonic()

    def start(self, tg: TaskGroup) -> None:
        """Writes that block finish in tasks of `tg`; closing cancels it."""
        self.scope = tg.cancel_scope
        self._spawn = tg.start_soon

    @property
    def queued(self) -> int:
        """Events waiting behind a blocked write."""
        return len(self._backlog) if self._backlog is not None else 0

    def send_nowait(self, envelope: Envelope) -> bool:
        if self.close_code is not None or not self._open:
            return False
        backlog = self._backlog
        if backlog is not None:
            if len(backlog) >= self._capacity:
                self.close_nowait(CloseCode.SLOW_CONSUMER, "outbound queue overflowed")
                return False
            backlog.append(envelope)
            return True
        pending: Awaitable[None] = self._send(self._message(envelope))
        if isinstance(pending, Coroutine):
            try:
                blocked = pending.send(None)
            except StopIteration:
                return True
            except (OSError, RuntimeError, WebSocketDisconnect):
                # The peer or the server went away mid-send; the reader sees the disconnect too.
                self.close_nowait(CloseCode.GOING_AWAY, "connection lost")
                return True
            pending = _Resume(pending, blocked)
        # The transport is backed up: finish this write, then the ones queued behind it, in a
        # task, and queue everything sent meanwhile.
        self._backlog = deque()
        if self._spawn is None:
            self.close_nowait(CloseCode.GOING_AWAY, "connection not started")
            return True
        self._spawn(self._flush, pending)
        return True

    def _message(self, envelope: Envelope) -> dict[str, Any]:
        payload = envelope.encode(self.fmt)
        if isinstance(payload, str):
            return {"type": "websocket.send", "text": payload}
        return {"type": "websocket.send", "bytes": payload}

    async def _flush(self, blocked: Awaitable[None]) -> None:
        send = self._send
        try:
            await blocked
            backlog = self._backlog
            while backlog:
                message = self._message(backlog.popleft())
                await send(message)
                del message
            # The queue is empty and no await since: the next event is written directly again.
            self._backlog = None
        except (OSError, RuntimeError, WebSocketDisconnect):
            # The peer or the server went away mid-send; the reader sees the disconnect too.
            self.close_nowait(CloseCode.GOING_AWAY, "connection lost")

    def close_nowait(self, code: int, reason: str) -> None:
        if self.close_code is None:
            self.close_code = code
            self.close_reason = reason
        if self.scope is not None:
            self.scope.cancel()

    def release(self) -> None:
        """The connection is over: nothing more is sent, and queued events are let go."""
        self._open = False
        self._backlog = None
        self._spawn = None

    def error(self, code: ErrorCode, message: str, frame_id: str | None = None) -> None:
        self.send_nowait(Envelope(Error(session_id=self.session_id, code=code, message=message, id=frame_id)))


def close_idle_sockets(sockets: Iterable[WsConnection], idle_seconds: float) -> int:
    """Close (4408) every socket quiet for `idle_seconds` whose session was quiet as long."""
    closed = 0
    now, wall = time.monotonic(), time.time()
    for conn in list(sockets):
        session_quiet = wall - conn.actor.last_activity if conn.actor is not None else math.inf
        if min(now - conn.last_frame, session_quiet) > idle_seconds:
            conn.close_nowait(CloseCode.IDLE, "idle")
            closed += 1
    return closed


async def sweep_idle_sockets(services: Services) -> None:
    """One timer for every socket rather than one per socket: see `close_idle_sockets`."""
    while True:
        await anyio.sleep(IDLE_CHECK_SECONDS)
        close_idle_sockets(services.sockets, services.settings.CONNECTION_IDLE_SECONDS)


def _token(websocket: WebSocket) -> str | None:
    token = websocket.query_params.get("token")
    if token:
        return token
    header = websocket.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip()
    return None


def _choose_format(websocket: WebSocket) -> tuple[WireFormat, str | None]:
    offered = websocket.scope.get("subprotocols") or []
    for name in offered:
        if name in SUBPROTOCOLS:
            return SUBPROTOCOLS[name], name
    return WireFormat.JSON, None


async def _refuse(websocket: WebSocket, code: CloseCode, reason: str) -> None:
    """Accept only to close with a code the client can read; no session data is sent.

    The accept names the subprotocol the client offered, as a normal connection would: a browser
    that offered one fails a handshake that answers with none, and then sees only 1006.
    """
    log.info("connection refused", extra={"session_id": websocket.path_params.get("session_id"),
                                          "close_code": int(code), "reason": reason})
    _, subprotocol = _choose_format(websocket)
    await websocket.accept(subprotocol=subprotocol)
    await websocket.close(code=code, reason=reason)


def _peek_id(raw: str | bytes, fmt: WireFormat, max_bytes: int) -> str | None:
    """The id of a frame refused before decoding, so the client knows which one to re-send."""
    try:
        return getattr(decode_frame(raw, fmt, max_bytes=max_bytes), "id", None)
    except FrameError as exc:
        return exc.frame_id


class SessionSocketFastPath:
    """ASGI middleware that hands `/ws/sessions/{id}` to `session_socket` directly.

    Placed outermost, it receives uvicorn's own `receive` and `send`, so the many small frames
    of a session skip Starlette's routing and its exception wrappers, which wrap every message.
    Everything else, and any other path, goes on to the Starlette app unchanged.
    """

    PREFIX = "/ws/sessions/"

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            path: str = scope["path"]
            session_id = path[len(self.PREFIX):] if path.startswith(self.PREFIX) else ""
            if session_id and "/" not in session_id:
                scope["path_params"] = {"session_id": session_id}
                await session_socket(WebSocket(scope, receive, send))
                return
        await self.app(scope, receive, send)


async def session_socket(websocket: WebSocket) -> None:
    services: Services = websocket.app.state.services
    settings = services.settings
    session_id = websocket.path_params["session_id"]
    try:
        claims = services.tokens.verify(_token(websocket))
    except TokenError as exc:
        await _refuse(websocket, CloseCode.UNAUTHORIZED, f"bad token: {exc}"[:120])
        return
    if claims.session_id != session_id:
        await _refuse(websocket, CloseCode.WRONG_SESSION, "token is for another session")
        return
    try:
        actor = await services.registry.get(session_id)
    except MirrorUnavailable as exc:
        await _refuse(websocket, CloseCode.TRY_AGAIN_LATER, str(exc)[:120])
        return
    if actor is None:
        await _refuse(websocket, CloseCode.UNKNOWN_SESSION, "no such session")
        return
    fmt, subprotocol = _choose_format(websocket)
    await websocket.accept(subprotocol=subprotocol)
    conn = WsConnection(websocket, claims.role, fmt, session_id, settings.OUTBOUND_QUEUE, actor)
    services.connections += 1
    services.sockets.add(conn)
    try:
        async with anyio.create_task_group() as tg:
            conn.start(tg)
            actor.connect(conn)
            try:
                await _read(websocket, conn, actor, services)
            finally:
                actor.disconnect(conn)
                tg.cancel_scope.cancel()
    finally:
        services.connections -= 1
        services.sockets.discard(conn)
        conn.release()
        if conn.close_code is not None:
            with anyio.move_on_after(1.0, shield=True):
                try:
                    await websocket.close(code=conn.close_code, reason=conn.close_reason)
                except Exception:  # the peer may be gone already
                    pass


async def _read(websocket: WebSocket, conn: WsConnection, actor: SessionActor,
                services: Services) -> None:
    settings = services.settings
    bucket = TokenBucket(settings.RATE_LIMIT_PER_SECOND, settings.RATE_LIMIT_BURST)
    violations = 0
    receive = websocket._receive  # raw ASGI receive; disconnects are handled right here
    # No timeout here: `sweep_idle_sockets` closes idle connections, all of them on one timer.
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        raw = message.get("text")
        if raw is None:
            raw = message.get("bytes") or b""
        conn.last_frame = time.monotonic()
        if not bucket.take():
            violations += 1
            if violations >= settings.RATE_ABUSE_CLOSE_AFTER:
                conn.close_nowait(CloseCode.RATE_ABUSE, "kept flooding past the rate limit")
                return
            conn.error(ErrorCode.RATE_LIMITED,
                       f"over {settings.RATE_LIMIT_PER_SECOND:g} frames/s",
                       _peek_id(raw, conn.fmt, settings.MAX_FRAME_BYTES))
            continue
        try:
            frame = decode_frame(raw, conn.fmt, max_bytes=settings.MAX_FRAME_BYTES,
                                 max_transcript_chars=settings.MAX_TRANSCRIPT_CHARS)
        except FrameError as exc:
            conn.error(exc.code, exc.message, exc.frame_id)
            continue
        if isinstance(frame, PingFrame):
            conn.send_nowait(Envelope(Pong(session_id=conn.session_id, id=frame.id, t=frame.t)))
            continue
        if isinstance(frame, (TranscriptFrame, SceneFrame)) and conn.role != Role.PLAYER.value:
            conn.error(ErrorCode.FORBIDDEN,
                       f"a {conn.role} connection may not send {frame.type}", frame.id)
            continue
        assert isinstance(frame, (TranscriptFrame, SceneFrame, ResumeFrame))
        if not actor.submit(conn, frame):
            conn.error(ErrorCode.RATE_LIMITED, "the session is busy; retry shortly", frame.id)
