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
from starlette.websockets import WebSocket

from schemas.codec import Envelope, FrameError, WireFormat, decode_frame
from schemas.enums import Role
from schemas.errors import CloseCode, ErrorCode
from schemas.frames import Error, PingFrame, Pong, ResumeFrame, SceneFrame, TranscriptFrame
from server.auth import TokenError

if TYPE_CHECKING:
    from server.app import Services

log = logging.getLogger("samvad.ws")
_conn_ids = itertools.count(1)
SUBPROTOCOLS = {fmt.value: fmt for fmt in WireFormat}
IDLE_CHECK_SECONDS = 15.0


class TokenBucket:
    """Frames allowed per second with a burst; `take()` says whether one more fits now."""

    __slots__ = ("rate", "burst", "tokens", "stamp")

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
        self._send, self._receive = anyio.create_memory_object_stream[Envelope](queue)
        self.close_code: int | None = None
        self.close_reason = ""
        self.scope: CancelScope | None = None
        self.last_frame = time.monotonic()

    def send_nowait(self, envelope: Envelope) -> bool:
        if self.close_code is not None:
            return False
        try:
            self._send.send_nowait(envelope)
            return True
        except anyio.WouldBlock:
            self.close_nowait(CloseCode.SLOW_CONSUMER, "outbound queue overflowed")
            return False
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False

    def close_nowait(self, code: int, reason: str) -> None:
        if self.close_code is None:
            self.close_code = code
            self.close_reason = reason
        if self.scope is not None:
            self.scope.cancel()

    def error(self, code: ErrorCode, message: str, frame_id: str | None = None) -> None:
        self.send_nowait(Envelope(Error(session_id=self.session_id, code=code, message=message, id=frame_id)))

    async def write(self) -> None:
        send_text, send_bytes = self.websocket.send_text, self.websocket.send_bytes
        async with self._receive:
            async for envelope in self._receive:
                payload = envelope.encode(self.fmt)
                if isinstance(payload, str):
                    await send_text(payload)
                else:
                    await send_bytes(payload)


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
    """Accept only to close with a code the client can read; no session data is sent."""
    await websocket.accept()
    await websocket.close(code=code, reason=reason)


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
    actor = await services.registry.get(session_id)
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
    receive = websocket.receive
    while True:
        message = None
        with anyio.move_on_after(IDLE_CHECK_SECONDS):
            message = await receive()
        if message is None:
            quiet = time.monotonic() - conn.last_frame
            session_quiet = time.time() - actor.last_activity
            if min(quiet, session_quiet) > settings.CONNECTION_IDLE_SECONDS:
                conn.close_nowait(CloseCode.IDLE, "idle")
                return
            continue
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
            conn.error(ErrorCode.RATE_LIMITED, f"over {settings.RATE_LIMIT_PER_SECOND:g} frames/s")
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
            conn.error(ErrorCode.FORBIDDEN, f"a {conn.role} connection may not send {frame.type}",
                       frame.id)
            continue
        assert isinstance(frame, (TranscriptFrame, SceneFrame, ResumeFrame))
        if not actor.submit(conn, frame):
            conn.error(ErrorCode.RATE_LIMITED, "the session is busy; retry shortly", frame.id)
