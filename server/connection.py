"""A session socket as the session actor sees it (`WsConnection`), and the token bucket that rate-limits it.

The session actor only ever calls `send_nowait`, which writes straight away while the socket keeps
up and otherwise queues behind a task that waits for the transport; when that bounded queue is full
the connection is closed as a slow consumer instead of making anyone wait. An idle connection holds
no task besides its reader (`server/ws.py`).
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, Protocol

from anyio import CancelScope
from anyio.abc import TaskGroup
from starlette.websockets import WebSocket, WebSocketDisconnect

from privates import frame_writer
from schemas.codec import Envelope, WireFormat
from schemas.enums import Role
from schemas.errors import CloseCode, ErrorCode
from schemas.frames import Error

if TYPE_CHECKING:
    from session.actor import SessionActor

_conn_ids = itertools.count(1)


class TokenBucket:
    """Frames allowed per second with a burst; `take()` says whether one more fits now, and
    `violations` counts the frames that did not (the reader closes a connection that keeps on)."""

    __slots__ = ("burst", "rate", "stamp", "tokens", "violations")

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.stamp = time.monotonic()
        self.violations = 0

    def full(self, now: float) -> bool:
        """Refilled to its burst by `now`: the same as a bucket made new, so one may be forgotten."""
        return self.tokens + (now - self.stamp) * self.rate >= self.burst

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


class VoicePart(Protocol):
    """What a connection needs of the voice composed with it (server/voice.py's `ConnectionVoice`)."""

    def observe(self, envelope: Envelope) -> None:
        """Be shown an event once it is written to the socket."""
        ...

    def release(self) -> None:
        """The connection is over: let go of the voice's queues and tasks' ends."""
        ...


class WsConnection:
    """A client socket as the session actor sees it.

    `send_nowait` writes at once while the socket keeps up, so an idle connection holds no task
    and no queue. When the transport pushes back, the write that blocked finishes in a task of
    the connection's task group, and later events wait behind it in a queue of at most `queue`
    events, in order; one more closes the connection as a slow consumer (4430). Nothing the
    session does ever waits on a connection.
    """

    __slots__ = ("_backlog", "_capacity", "_open", "_send", "_spawn", "_write_frame", "actor", "close_code",
                 "close_reason", "conn_id", "fmt", "last_frame", "observe", "on_error", "role", "scope",
                 "session_id", "voice")

    def __init__(self, websocket: WebSocket, role: Role, fmt: WireFormat, session_id: str,
                 queue: int, actor: SessionActor | None = None) -> None:
        self.role = role.value
        self.fmt = fmt
        self.session_id = session_id
        self.actor = actor
        self.conn_id = next(_conn_ids)
        # The raw ASGI send (see `SessionSocketApp`): Starlette's per-message state checks and
        # exception wrappers cost more than the frame itself. Only the send is kept: the Starlette
        # `WebSocket`, with the handshake's parsed query and headers, goes once it is accepted.
        self._send = websocket._send
        # With the lean uvicorn protocol, a frame the socket can take now is written straight to
        # its corked transport, without the ASGI message, uvicorn's `send` coroutine or
        # websockets' frame objects (privates.frame_writer); otherwise it goes through `_send`.
        self._write_frame = frame_writer(self._send)
        self._capacity = queue
        self._backlog: deque[Envelope] | None = None  # only while a write is blocked
        self._spawn: Callable[..., object] | None = None
        self._open = True
        self.close_code: int | None = None
        self.close_reason = ""
        self.scope: CancelScope | None = None
        self.last_frame = time.monotonic()
        self.observe: Callable[[Envelope], None] | None = None  # the metrics' per-event hook (server/metrics.py)
        self.on_error: Callable[[str], None] | None = None  # counts errors by code
        # Its voice, composed with it (server/voice.py): shown every event sent, after it is written.
        self.voice: VoicePart | None = None

    def start(self, tg: TaskGroup) -> None:
        """Writes that block finish in tasks of `tg`; closing cancels it."""
        self.scope = tg.cancel_scope
        self._spawn = tg.start_soon

    @property
    def queued(self) -> int:
        """Events waiting behind a blocked write."""
        return len(self._backlog) if self._backlog is not None else 0

    def send_nowait(self, envelope: Envelope) -> bool:
        sent = self.write(envelope)
        if self.voice is not None:
            self.voice.observe(envelope)
        return sent

    def write(self, envelope: Envelope) -> bool:
        """Send `envelope` as it is (the voice's own audio comes this way, not shown to it again)."""
        if self.close_code is not None or not self._open:
            return False
        if self.observe is not None:
            self.observe(envelope)
        backlog = self._backlog
        if backlog is not None:
            if len(backlog) >= self._capacity:
                self.close_nowait(CloseCode.SLOW_CONSUMER, "outbound queue overflowed")
                return False
            backlog.append(envelope)
            return True
        write_frame = self._write_frame
        if write_frame is not None and write_frame(envelope.encode(self.fmt)):
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
        voice, self.voice = self.voice, None  # it holds this connection: no cycle left for the collector
        if voice is not None:
            voice.release()
        self._open = False
        self._backlog = None
        self._spawn = None

    async def send_close(self) -> None:
        """Send the close frame with `close_code` and `close_reason` (after `release`, as the reader ends)."""
        await self._send({"type": "websocket.close", "code": self.close_code, "reason": self.close_reason})

    def error(self, code: ErrorCode, message: str, frame_id: str | None = None) -> None:
        if self.on_error is not None:
            self.on_error(code.value)
        self.send_nowait(Envelope(Error(session_id=self.session_id, code=code, message=message, id=frame_id)))
