"""What the actor sends: connections, fan-out of events, the events kept for replay, and acks.

Connections. A `Connect` adds the connection and sends it a `Welcome` with the current state; a
new player connection supersedes the old one, which is closed (`superseded`). Spectators are any
number of further connections that only receive.

Fan-out. Every event goes to every connection with `send_nowait`: the actor never waits on a
socket. A connection whose bounded queue is full closes itself as a slow consumer and is dropped
here, so no spectator can delay the player (the `websockets` docs on broadcasting say why). An
event with a `seq` is also kept, encoded once (`Envelope.kept()`), in a ring of
`limits.replay_events` events, which is what `resume` replays (`session/resume.py`). An answer to
one connection (an ack, an error) goes only to it, and only if it is still connected.

Durability and acknowledgements. Each change of state (session/changes.py) is handed to the mirror
in order (`_store`), and the frame that caused it is acknowledged only when the mirror
says that version is durable: at once without a mirror, a few milliseconds later with Neo4j, when
a `Durable` message flushes the acks queued up to its version, in version order. That is what lets
a client that re-sends every unacknowledged frame after a crash lose nothing. A re-sent frame id
is acknowledged as a duplicate and not applied again (`_duplicate`); its ack waits behind the
original's if that is not durable yet. An ack owed to the player goes to its newest connection if
it reconnected meanwhile. When the mirror's buffer is full a frame is refused with `unavailable`
before it changes anything (`_mirror_has_room`), and the client re-sends it later.

`ActorFanout` is the bottom part of `SessionActor` (`session/actor.py`): the other parts
(`session/turns.py`, `session/scene.py`, `session/resume.py`) build on it. It declares the state
it reads; the actor's `__init__` sets it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from schemas.codec import Envelope
from schemas.enums import Role
from schemas.errors import CloseCode, ErrorCode
from schemas.frames import Ack, Error, Welcome
from session.messages import ActorLimits, Connect, Disconnect, Durable, Handler, Message
from session.negotiation import Negotiation
from session.protocols import Connection, Mirror, TipSource

log = logging.getLogger("samvad.session")


class ActorFanout:
    """Connections, fan-out, the replay ring, durability and acks: the part of `SessionActor` that sends."""

    session_id: str
    negotiation: Negotiation
    mirror: Mirror
    tips: TipSource | None  # coaching cards after each learner turn (session/tips.py); None: no tips
    limits: ActorLimits
    clock: Callable[[], float]
    connections: dict[int, Connection]  # by conn_id
    player: Connection | None
    last_activity: float  # wall clock
    _replay: deque[tuple[int | None, str]] | None  # Envelope.kept() of each sequenced event, for resume
    _unacked: deque[tuple[int, Connection | None, str, bool]] | None  # (version, conn, frame id, duplicate)
    _unacked_ids: dict[str, int]  # frame id -> the version its ack waits for (originals only)
    _waiting_ids: set[str] | None  # ids of transcripts queued behind the turn in flight (session/turns.py)
    _changed: Callable[[], None]  # the actor's: tell the registry the session changed

    # ------------------------------------------------------------------ connections

    def _on_connect(self, message: Connect) -> None:
        conn = message.conn
        if conn.role == Role.PLAYER.value:
            if self.player is not None and self.player.conn_id in self.connections:
                old = self.connections.pop(self.player.conn_id)
                old.close_nowait(CloseCode.SUPERSEDED, "a newer player connection took over")
            self.player = conn
        self.connections[conn.conn_id] = conn
        self.last_activity = self.clock()
        welcome = Welcome(
            session_id=self.session_id,
            role=Role(conn.role),
            seq=self.negotiation.seq,
            state=self.negotiation.snapshot(),
            limits={"replay_events": self.limits.replay_events, "max_consecutive_timeouts": self.limits.max_timeouts,
                    "silence_timeout_ms": round(self.limits.silence_s * 1000),
                    "silence_extended_timeout_ms": round(self.limits.silence_extended_s * 1000)},
        )
        conn.send_nowait(Envelope(welcome))
        log.info("connection opened", extra={"session_id": self.session_id, "role": conn.role,
                                             "connections": len(self.connections)})
        self._changed()
        if self.player is conn:
            self._player_joined()

    def _on_disconnect(self, message: Disconnect) -> None:
        conn = message.conn
        if self.connections.pop(conn.conn_id, None) is None:
            return
        if self.player is conn:
            self.player = None
            self._player_left()
        log.info("connection closed", extra={"session_id": self.session_id, "role": conn.role,
                                             "connections": len(self.connections)})
        self._changed()

    def _close_all(self, code: int, reason: str) -> None:
        for conn in list(self.connections.values()):
            conn.close_nowait(code, reason)
        self.connections.clear()
        self.player = None
        self._player_left()

    def _player_joined(self) -> None:
        """A player connected (after its `welcome`); the silence part overrides this (session/silence.py)."""

    def _player_left(self) -> None:
        """The player is gone; the silence part overrides this."""

    # ------------------------------------------------------------------ fan-out

    def _fanout(self, envelope: Envelope) -> None:
        if envelope.seq is not None:
            if self._replay is None:
                self._replay = deque(maxlen=self.limits.replay_events)
            self._replay.append(envelope.kept())
        for conn_id, conn in list(self.connections.items()):
            if not conn.send_nowait(envelope):
                # Its queue overflowed: the connection closes itself as a slow consumer.
                self.connections.pop(conn_id, None)
                if self.player is conn:
                    self.player = None
                    self._player_left()
                log.warning("slow consumer dropped", extra={"session_id": self.session_id, "role": conn.role})

    def _reply_to(self, conn: Connection | None, event: Any) -> None:
        if conn is not None and conn.conn_id in self.connections:
            conn.send_nowait(Envelope(event))

    def _error(self, conn: Connection | None, code: ErrorCode, message: str, frame_id: str | None) -> None:
        self._reply_to(conn, Error(session_id=self.session_id, code=code, message=message, id=frame_id))

    # ------------------------------------------------------------------ durability and acks

    def _store(self) -> int:
        """Hand the changes the session just made to the mirror, in order; returns the version of the
        last, which the frame that caused them is acknowledged at (`_ack_when_durable`)."""
        negotiation = self.negotiation
        submit = self.mirror.submit
        for change in negotiation.take_changes():
            submit(change)
        return negotiation.version

    def _mirror_has_room(self, conn: Connection | None, frame_id: str) -> bool:
        if self.mirror.has_room():
            return True
        self._error(conn, ErrorCode.UNAVAILABLE,
                    "the session store is unreachable and its buffer is full; re-send later with the same id",
                    frame_id)
        return False

    def _ack(self, conn: Connection | None, frame_id: str, duplicate: bool) -> None:
        if conn is not None and conn.conn_id not in self.connections and conn.role == Role.PLAYER.value:
            conn = self.player  # the player reconnected since sending it: ack on the new socket
        self._reply_to(conn, Ack(session_id=self.session_id, id=frame_id, duplicate=duplicate))

    def _ack_when_durable(self, version: int, conn: Connection | None, frame_id: str, duplicate: bool) -> None:
        if self.mirror.durable_version(self.session_id) >= version:
            self._ack(conn, frame_id, duplicate)
            return
        self._queue_ack(version, conn, frame_id, duplicate)
        if not duplicate:
            self._unacked_ids[frame_id] = version

    def _queue_ack(self, version: int, conn: Connection | None, frame_id: str, duplicate: bool) -> None:
        if self._unacked is None:
            self._unacked = deque()
        self._unacked.append((version, conn, frame_id, duplicate))

    def _on_durable(self, message: Durable) -> None:
        self._flush_acks(message.version)

    def _flush_acks(self, durable: int) -> None:
        unacked = self._unacked
        while unacked and unacked[0][0] <= durable:
            _, conn, frame_id, duplicate = unacked.popleft()
            if not duplicate:
                self._unacked_ids.pop(frame_id, None)
            self._ack(conn, frame_id, duplicate)
        if unacked is not None and not unacked and self._unacked is unacked:
            self._unacked = None

    def _duplicate(self, conn: Connection | None, frame_id: str) -> bool:
        """Answer a re-sent id; True when the frame must not be applied again."""
        if self._waiting_ids is not None and frame_id in self._waiting_ids:
            return True  # queued behind the turn in flight; its ack comes when it starts
        if not self.negotiation.seen(frame_id):
            return False
        pending = self._unacked_ids.get(frame_id)
        if pending is not None:
            self._queue_ack(pending, conn, frame_id, True)
        else:
            self._ack(conn, frame_id, True)
        return True


# This part's entries in the actor's dispatch table (`session/actor.py`).
MESSAGE_HANDLERS: dict[type[Message], Handler] = {
    Connect: ActorFanout._on_connect,
    Disconnect: ActorFanout._on_disconnect,
    Durable: ActorFanout._on_durable,
}
