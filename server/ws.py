"""The WebSocket endpoint: authenticate, pick the wire format, then pump frames both ways.

Each connection has a reader (`session_socket`) and a `WsConnection` (`server/connection.py`) that
the session actor writes to without waiting. One timer for all of them closes the idle ones. The reader
rate-limits and decodes each frame, then looks up what to do with it in one table (`EDGE`, by the
frame's type): whether a spectator may send it, and its handler (a pong, audio for the voice, and
the session's frames to the actor).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from privates import raw_receive
from schemas.codec import Envelope, FrameError, WireFormat, decode_frame
from schemas.enums import Role
from schemas.errors import CloseCode, ErrorCode
from schemas.frames import (
    AudioFrame,
    CommandFrame,
    PingFrame,
    PlaybackFrame,
    Pong,
    ResumeFrame,
    SceneFrame,
    SilenceFrame,
    TranscriptFrame,
)
from server.auth import TokenError
from server.config import Settings
from server.connection import TokenBucket, WsConnection
from server.services import Services
from server.voice import wants_speech, wants_visemes
from server.voice_socket import ConnectionVoice
from session.messages import ClientFrame
from session.protocols import MirrorUnavailable

if TYPE_CHECKING:
    from session.actor import SessionActor

log = logging.getLogger("samvad.ws")
SUBPROTOCOLS = {fmt.value: fmt for fmt in WireFormat}
IDLE_CHECK_SECONDS = 15.0


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
    metrics = websocket.app.state.metrics  # None when metrics are off
    if metrics is not None:
        metrics.closed(int(code))
    _, subprotocol = _choose_format(websocket)
    await websocket.accept(subprotocol=subprotocol)
    await websocket.close(code=code, reason=reason)


def _peek_id(raw: str | bytes, fmt: WireFormat, max_bytes: int) -> str | None:
    """The id of a frame refused before decoding, so the client knows which one to re-send."""
    try:
        frame: Any = decode_frame(raw, fmt, max_bytes=max_bytes)  # one of EDGE's types: each has an `id`
        return frame.id  # type: ignore[no-any-return]
    except FrameError as exc:
        return exc.frame_id


class SessionSocketApp(Starlette):
    """The Starlette app, which serves `/ws/sessions/{id}` itself, before its middleware and routing.

    The many small frames of a session skip Starlette's routing and its exception wrappers, which
    wrap every message, and an idle socket keeps none of their coroutines waiting (two frames of
    about 0.3 KiB each, per socket). Everything else, and any other path, goes to Starlette
    unchanged; `scope["app"]` is set as Starlette sets it.
    """

    PREFIX = "/ws/sessions/"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            path: str = scope["path"]
            session_id = path[len(self.PREFIX):] if path.startswith(self.PREFIX) else ""
            if session_id and "/" not in session_id:
                scope["app"] = self
                scope["path_params"] = {"session_id": session_id}
                await session_socket(WebSocket(scope, receive, send))
                return
        await super().__call__(scope, receive, send)


async def session_socket(websocket: WebSocket) -> None:
    """A session socket from its handshake to its close, in one coroutine.

    What an idle socket costs the server is mostly what it keeps while it waits for a frame
    (docs/performance.md, "An idle socket"): this coroutine and the ones under it, so the reader
    is this loop itself, each frame is taken by plain functions, and the handshake's objects are
    let go before the wait.
    """
    services: Services = websocket.app.state.services
    metrics = websocket.app.state.metrics  # None when metrics are off
    conn = await _admit(websocket, services)
    if conn is None:
        return
    receive = raw_receive(websocket)  # raw ASGI receive; disconnects are handled right here
    del websocket  # with its parsed query and headers: nothing past the handshake reads them
    actor = conn.actor
    assert actor is not None
    settings = services.settings
    bucket = TokenBucket(settings.RATE_LIMIT_PER_SECOND, settings.RATE_LIMIT_BURST)
    services.connections += 1
    services.sockets.add(conn)
    try:
        async with anyio.create_task_group() as tg:
            conn.start(tg)
            if isinstance(conn.voice, ConnectionVoice):
                conn.voice.start(tg, services)
            actor.connect(conn)
            try:
                # No timeout here: `sweep_idle_sockets` closes idle connections, all of them on one timer.
                while True:
                    message = await receive()
                    if message["type"] == "websocket.disconnect" or not _take(conn, actor, message, bucket,
                                                                             settings):
                        break
            finally:
                actor.disconnect(conn)
                tg.cancel_scope.cancel()
    finally:
        services.connections -= 1
        services.sockets.discard(conn)
        conn.release()
        if conn.close_code is not None:
            if metrics is not None:
                metrics.closed(conn.close_code)
            with anyio.move_on_after(1.0, shield=True):
                try:
                    await conn.send_close()
                except Exception:  # the peer may be gone already
                    pass


async def _admit(websocket: WebSocket, services: Services) -> WsConnection | None:
    """Check the token and the session, accept, and make the connection (None: refused and closed)."""
    session_id = websocket.path_params["session_id"]
    try:
        claims = services.tokens.verify(_token(websocket))
    except TokenError as exc:
        await _refuse(websocket, CloseCode.UNAUTHORIZED, f"bad token: {exc}"[:120])
        return None
    if claims.session_id != session_id:
        await _refuse(websocket, CloseCode.WRONG_SESSION, "token is for another session")
        return None
    try:
        actor = await services.registry.get(session_id)
    except MirrorUnavailable as exc:
        await _refuse(websocket, CloseCode.TRY_AGAIN_LATER, str(exc)[:120])
        return None
    if actor is None:
        await _refuse(websocket, CloseCode.UNKNOWN_SESSION, "no such session")
        return None
    fmt, subprotocol = _choose_format(websocket)
    await websocket.accept(subprotocol=subprotocol)
    voice = services.voice
    conn = WsConnection(websocket, claims.role, fmt, session_id, services.settings.OUTBOUND_QUEUE, actor)
    if ((claims.role is Role.PLAYER and (voice.stt is not None or voice.tts is not None))
            or (voice.tts is not None and wants_speech(websocket))):
        conn.voice = ConnectionVoice(conn, voice, speak=wants_speech(websocket), visemes=wants_visemes(websocket))
    metrics = websocket.app.state.metrics  # None when metrics are off
    if metrics is not None:
        conn.on_error = metrics.error
        if conn.role == Role.PLAYER.value:  # one player per session: each turn is counted once
            conn.observe = metrics.observe
    # The server keeps the ASGI scope for the connection's life: its headers and query (the token
    # among them), about 1.5 KiB, have been read and are not read again.
    websocket.scope["headers"] = []
    websocket.scope["query_string"] = b""
    return conn


def _take(conn: WsConnection, actor: SessionActor, message: Any, bucket: TokenBucket, settings: Settings) -> bool:
    """Take one message from the client; False when the connection is to close."""
    raw = message.get("text")
    if raw is None:
        raw = message.get("bytes") or b""
    conn.last_frame = time.monotonic()
    if not bucket.take():
        bucket.violations += 1
        # RATE_ABUSE_CLOSE_AFTER errors are sent; a frame over the limit after that closes.
        if bucket.violations > settings.RATE_ABUSE_CLOSE_AFTER:
            conn.close_nowait(CloseCode.RATE_ABUSE, "kept flooding past the rate limit")
            return False
        conn.error(ErrorCode.RATE_LIMITED, f"over {settings.RATE_LIMIT_PER_SECOND:g} frames/s",
                   _peek_id(raw, conn.fmt, settings.MAX_FRAME_BYTES))
        return True
    try:
        frame = decode_frame(raw, conn.fmt, max_bytes=settings.MAX_FRAME_BYTES,
                             max_transcript_chars=settings.MAX_TRANSCRIPT_CHARS,
                             max_audio_bytes=settings.audio_frame_bytes)
    except FrameError as exc:
        conn.error(exc.code, exc.message, exc.frame_id)
        return True
    row = EDGE[type(frame)]
    decoded: Any = frame  # one of the table's types: each has its wire `type` and its `id`
    if not row.spectators and conn.role != Role.PLAYER.value:
        # Only `resume` and `ping` are a spectator's: everything else speaks for the learner.
        conn.error(ErrorCode.FORBIDDEN, f"a {conn.role} connection may not send {decoded.type}", decoded.id)
        return True
    row.handle(conn, decoded, actor, settings)
    return True


# ---------------------------------------------------------------------------- the edge's table


def _pong(conn: WsConnection, frame: PingFrame, actor: SessionActor, settings: Settings) -> None:
    conn.send_nowait(Envelope(Pong(session_id=conn.session_id, id=frame.id, t=frame.t)))


def _submit(conn: WsConnection, frame: ClientFrame, actor: SessionActor, settings: Settings) -> None:
    if not actor.submit(conn, frame):
        conn.error(ErrorCode.RATE_LIMITED, "the session is busy; retry shortly", frame.id)


def _audio(conn: WsConnection, frame: AudioFrame, actor: SessionActor, settings: Settings) -> None:
    if isinstance(conn.voice, ConnectionVoice):
        conn.voice.on_audio(frame, settings)
    else:
        conn.error(ErrorCode.SPEECH_UNAVAILABLE, "this server has no speech backends; send transcript frames",
                   frame.id)


def _playback(conn: WsConnection, frame: PlaybackFrame, actor: SessionActor, settings: Settings) -> None:
    if isinstance(conn.voice, ConnectionVoice):
        conn.voice.on_playback(frame)  # a barge-in stops the vendor's voice at once
    _submit(conn, frame, actor, settings)


@dataclass(frozen=True, slots=True)
class EdgeRow:
    """What the socket's reader does with one frame type: whether a spectator may send it, and the
    function that takes it (the session's frames go on to the actor, `SessionActor.submit`)."""

    spectators: bool
    handle: Callable[[WsConnection, Any, SessionActor, Settings], None]


# Every frame the codec decodes (`schemas.codec.decode_frame`), by its exact type.
EDGE: dict[type[Any], EdgeRow] = {
    PingFrame: EdgeRow(spectators=True, handle=_pong),
    ResumeFrame: EdgeRow(spectators=True, handle=_submit),
    TranscriptFrame: EdgeRow(spectators=False, handle=_submit),
    SceneFrame: EdgeRow(spectators=False, handle=_submit),
    CommandFrame: EdgeRow(spectators=False, handle=_submit),
    SilenceFrame: EdgeRow(spectators=False, handle=_submit),
    PlaybackFrame: EdgeRow(spectators=False, handle=_playback),
    AudioFrame: EdgeRow(spectators=False, handle=_audio),
}
