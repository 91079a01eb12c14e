"""The WebSocket endpoint: authenticate, pick the wire format, then pump frames both ways.

Each connection has a reader (this handler) and a writer task draining a bounded queue. The
session actor only ever calls `send_nowait`; when the queue is full the connection is closed as a
slow consumer instead of making anyone wait.
"""

from __future__ import annotations

import itertools
import logging
import time
from typing import TYPE_CHECKING

import anyio
from anyio import CancelScope
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from schemas.codec import Envelope, FrameError, WireFormat, decode_frame
from schemas.enums import Role
from schemas.errors import CloseCode, ErrorCode
from schemas.frames import Error, PingFrame, Pong, ResumeFrame, SceneFrame, TranscriptFrame
from server.auth import TokenError
from session.mailbox import Mailbox
from session.protocols import MirrorUnavailable

if TYPE_CHECKING:
    from server.app import Services

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


class WsConnection:
    """A client socket as the session actor sees it."""

    def __init__(self, websocket: WebSocket, role: Role, fmt: WireFormat, session_id: str, queue: int) -> None:
        self.websocket = websocket
        self.role = role.value
        self.fmt = fmt
        self.session_id = session_id
        self.conn_id = next(_conn_ids)
        self._outbox: Mailbox[Envelope] = Mailbox(queue)
        self.close_code: int | None = None
        self.close_reason = ""
        self.scope: CancelScope | None = None
        self.last_frame = time.monotonic()

    def send_nowait(self, envelope: Envelope) -> bool:
        if self.close_code is not None:
            return False
        try:
            self._outbox.send_nowait(envelope)
            return True
        except anyio.WouldBlock:
            self.close_nowait(CloseCode.SLOW_CONSUMER, "outbound queue overflowed")
            return False
        except anyio.ClosedResourceError:
            return False

    def close_nowait(self, code: int, reason: str) -> None:
        if self.close_code is None:
            self.close_code = code
            self.close_reason = reason
        if self.scope is not None:
            self.scope.cancel()

    def release(self) -> None:
        self._outbox.close()

    def error(self, code: ErrorCode, message: str, frame_id: str | None = None) -> None:
        self.send_nowait(Envelope(Error(session_id=self.session_id, code=code, message=message, id=frame_id)))

    async def write(self) -> None:
        # The raw ASGI send (see `SessionSocketFastPath`): Starlette's per-message state checks
        # and exception wrappers cost more than the frame itself.
        send = self.websocket._send
        receive = self._outbox.receive
        try:
            while True:
                try:
                    envelope = await receive()
                except anyio.EndOfStream:
                    return
                payload = envelope.encode(self.fmt)
                # Let go of the event before waiting again: an idle socket would otherwise keep
                # its last one (often the welcome, with a full snapshot) alive.
                del envelope
                if isinstance(payload, str):
                    await send({"type": "websocket.send", "text": payload})
                else:
                    await send({"type": "websocket.send", "bytes": payload})
                del payload
        except (OSError, RuntimeError, WebSocketDisconnect):
            # The peer or the server went away mid-send; the reader sees the disconnect too.
            self.close_nowait(CloseCode.GOING_AWAY, "connection lost")


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
    conn = WsConnection(websocket, claims.role, fmt, session_id, settings.OUTBOUND_QUEUE)
    services.connections += 1
    try:
        async with anyio.create_task_group() as tg:
            conn.scope = tg.cancel_scope
            tg.start_soon(conn.write)
            actor.connect(conn)
            try:
                await _read(websocket, conn, actor, services)
            finally:
                actor.disconnect(conn)
                tg.cancel_scope.cancel()
    finally:
        services.connections -= 1
        conn.release()
        if conn.close_code is not None:
            with anyio.move_on_after(1.0, shield=True):
                try:
                    await websocket.close(code=conn.close_code, reason=conn.close_reason)
                except Exception:  # the peer may be gone already
                    pass


async def _read(websocket: WebSocket, conn: WsConnection, actor: object, services: Services) -> None:
    from session.actor import SessionActor

    assert isinstance(actor, SessionActor)
    settings = services.settings
    bucket = TokenBucket(settings.RATE_LIMIT_PER_SECOND, settings.RATE_LIMIT_BURST)
    violations = 0
    receive = websocket._receive  # raw ASGI receive; disconnects are handled right here
    while True:
        # One cancel scope per idle-check window rather than one per frame: entering and leaving
        # a scope costs more than handling a small frame. `receive()` is the only await inside.
        with anyio.move_on_after(IDLE_CHECK_SECONDS):
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
                    conn.send_nowait(Envelope(Pong(session_id=conn.session_id, id=frame.id,
                                                   t=frame.t)))
                    continue
                if isinstance(frame, (TranscriptFrame, SceneFrame)) and conn.role != Role.PLAYER.value:
                    conn.error(ErrorCode.FORBIDDEN,
                               f"a {conn.role} connection may not send {frame.type}", frame.id)
                    continue
                assert isinstance(frame, (TranscriptFrame, SceneFrame, ResumeFrame))
                if not actor.submit(conn, frame):
                    conn.error(ErrorCode.RATE_LIMITED, "the session is busy; retry shortly",
                               frame.id)
        # A window passed: close only if neither this connection nor its session did anything.
        quiet = time.monotonic() - conn.last_frame
        session_quiet = time.time() - actor.last_activity
        if min(quiet, session_quiet) > settings.CONNECTION_IDLE_SECONDS:
            conn.close_nowait(CloseCode.IDLE, "idle")
            return
