"""What the actor sends: connections, fan-out of events, the events kept for replay, and acks.

`Fanout` is a part the actor holds (session/actor.py), not a base class of it: it is all I/O, and
decides nothing about the session.

Connections. `add` takes a new connection; a new player connection supersedes the old one, which
is closed (`superseded`). Spectators are any number of further connections that only receive.

Fan-out. Every event goes to every connection with `send_nowait`: the actor never waits on a
socket. A connection whose bounded queue is full closes itself as a slow consumer and is dropped
here, so no spectator can delay the player (the `websockets` docs on broadcasting say why). An
event with a `seq` is also kept, encoded once (`Envelope.kept()`), in a ring of
`limits.replay_events` events, which is what a `resume` replays. An answer to one connection (an
ack, an error) goes only to it, and only if it is still connected.

Durability and acknowledgements. The actor hands each step's changes to the mirror in order, and
the frame that caused them is acknowledged only when the mirror says that version is durable: at
once without a mirror, a few milliseconds later with Neo4j, when a `Durable` message flushes the
acks queued up to its version, in version order. That is what lets a client that re-sends every
unacknowledged frame after a crash lose nothing. A re-sent frame id is acknowledged as a
duplicate and not applied again (`duplicate`); its ack waits behind the original's if that is not
durable yet. An ack owed to the player goes to its newest connection if it reconnected meanwhile.
"""

from __future__ import annotations

import logging
import zlib
from collections import deque
from collections.abc import Iterator
from typing import Any

from schemas.codec import Envelope
from schemas.enums import Role
from schemas.errors import CloseCode
from schemas.frames import Ack, Welcome
from session.messages import ActorLimits
from session.negotiation import Negotiation
from session.protocols import Connection, Mirror

__all__ = ["Fanout", "PackedReplay", "Replay", "pack_replay", "unpack_replay"]

Replay = deque[tuple[int | None, str]]  # each sequenced event's seq and `Envelope.kept()`, oldest first
# A ring's size, its seqs, each event's length in bytes, and the events' UTF-8 deflated in one run.
PackedReplay = tuple[int | None, tuple[int | None, ...], tuple[int, ...], bytes]
REPLAY_LEVEL = 1  # the events repeat their field names and state: level 1 finds most of it, fastest


def pack_replay(ring: Replay) -> PackedReplay:
    """The ring's events as one deflated `bytes` beside their seqs and lengths, for `unpack_replay`:
    how an ended session's record keeps its replay through its grace (session/registry.py), some
    7 KB of strings as about a fifth of that, for the rare reconnect that needs them back."""
    parts = [encoded.encode() for _, encoded in ring]
    return (ring.maxlen, tuple(seq for seq, _ in ring), tuple(map(len, parts)),
            zlib.compress(b"".join(parts), REPLAY_LEVEL))


def unpack_replay(packed: PackedReplay) -> Replay:
    """The ring `pack_replay` was given, equal event for event."""
    maxlen, seqs, lengths, data = packed
    raw, at = zlib.decompress(data), 0
    ring: Replay = deque(maxlen=maxlen)
    for seq, length in zip(seqs, lengths, strict=True):
        ring.append((seq, raw[at:at + length].decode()))
        at += length
    return ring

log = logging.getLogger("samvad.session")


class Fanout:
    """Connections, fan-out, the replay ring, durability and acks of one session."""

    __slots__ = ("_replay", "_replay_events", "_unacked", "_unacked_ids", "connections", "mirror", "player",
                 "session_id")

    def __init__(self, session_id: str, mirror: Mirror, replay_events: int) -> None:
        self.session_id = session_id
        self.mirror = mirror
        self.connections: dict[int, Connection] = {}  # by conn_id
        self.player: Connection | None = None
        self._replay_events = replay_events
        # Made when first needed: an empty deque is 760 bytes, and an idle session holds several
        # thousand of them between its peers (benchmarks/load.py, d).
        self._replay: Replay | None = None  # Envelope.kept() of each sequenced event
        self._unacked: deque[tuple[int, Connection | None, str, bool]] | None = None  # (version, conn, id, dup)
        self._unacked_ids: dict[str, int] = {}  # frame id -> the version its ack waits for (originals only)

    # ------------------------------------------------------------------ connections

    def add(self, conn: Connection, negotiation: Negotiation, limits: ActorLimits) -> None:
        """Take `conn` and send it its `welcome`: the session as it stands, and the limits it works within."""
        if conn.role == Role.PLAYER.value:
            if self.player is not None and self.player.conn_id in self.connections:
                old = self.connections.pop(self.player.conn_id)
                old.close_nowait(CloseCode.SUPERSEDED, "a newer player connection took over")
            self.player = conn
        self.connections[conn.conn_id] = conn
        conn.send_nowait(Envelope(Welcome(
            session_id=self.session_id, role=Role(conn.role), seq=negotiation.seq, state=negotiation.snapshot(),
            limits={"replay_events": limits.replay_events, "max_consecutive_timeouts": limits.max_timeouts,
                    "silence_timeout_ms": round(limits.silence_s * 1000),
                    "silence_extended_timeout_ms": round(limits.silence_extended_s * 1000)},
        )))
        log.info("connection opened", extra={"session_id": self.session_id, "role": conn.role,
                                             "connections": len(self.connections)})

    def remove(self, conn: Connection) -> bool:
        """Forget `conn`; False if it was not connected."""
        if self.connections.pop(conn.conn_id, None) is None:
            return False
        if self.player is conn:
            self.player = None
        log.info("connection closed", extra={"session_id": self.session_id, "role": conn.role,
                                             "connections": len(self.connections)})
        return True

    def close_all(self, code: int, reason: str) -> None:
        for conn in list(self.connections.values()):
            conn.close_nowait(code, reason)
        self.connections.clear()
        self.player = None

    # ------------------------------------------------------------------ sends

    def broadcast(self, envelope: Envelope) -> None:
        if envelope.seq is not None:
            if self._replay is None:
                self._replay = deque(maxlen=self._replay_events)
            self._replay.append(envelope.kept())
        for conn_id, conn in list(self.connections.items()):
            if not conn.send_nowait(envelope):
                # Its queue overflowed: the connection closes itself as a slow consumer.
                self.connections.pop(conn_id, None)
                if self.player is conn:
                    self.player = None  # its silence timer, when due, finds no player and does nothing
                log.warning("slow consumer dropped", extra={"session_id": self.session_id, "role": conn.role})

    def to_spectators(self, envelope: Envelope) -> None:
        """Send an unsequenced event to every connection but the player's."""
        for conn_id, conn in list(self.connections.items()):
            if conn is not self.player and not conn.send_nowait(envelope):
                self.connections.pop(conn_id, None)
                log.warning("slow consumer dropped", extra={"session_id": self.session_id, "role": conn.role})

    def send(self, conn: Connection | None, event: Any) -> bool:
        """Send `event` to `conn` alone, if it is still connected; False if it could not take it."""
        if conn is not None and conn.conn_id in self.connections:
            return conn.send_nowait(Envelope(event))
        return False

    @property
    def oldest_kept(self) -> int | None:
        """The seq of the oldest event kept for replay; None when none is."""
        return self._replay[0][0] if self._replay else None

    def kept(self, after: int) -> Iterator[Envelope]:
        """The kept events after seq `after`, oldest first."""
        for seq, encoded in self._replay or ():
            assert seq is not None
            if seq > after:
                yield Envelope.from_json(seq, encoded)

    @property
    def replay(self) -> tuple[Envelope, ...]:
        """Every kept event, oldest first (at most `replay_events`)."""
        return tuple(Envelope.from_json(seq, encoded) for seq, encoded in self._replay or ())

    @property
    def replay_len(self) -> int:
        return len(self._replay or ())

    def forget_replay(self) -> None:
        """Drop the kept events (an ended session nobody has open): a later `resume` gets a snapshot."""
        self._replay = None

    def take_replay(self) -> Replay | None:
        """The kept events, dropped from here: what an ended session's record keeps for its grace
        (session/registry.py), for `restore_replay` on the actor rebuilt from it."""
        ring, self._replay = self._replay, None
        return ring

    def restore_replay(self, ring: Replay) -> None:
        """Keep `ring` (a `take_replay` of the same session) as this fan-out's replay: a resume then
        replays as the actor it came from would have."""
        if ring.maxlen != self._replay_events:
            raise ValueError("a replay ring of another size")
        self._replay = ring

    # ------------------------------------------------------------------ durability and acks

    def ack(self, conn: Connection | None, frame_id: str, duplicate: bool) -> None:
        if conn is not None and conn.conn_id not in self.connections and conn.role == Role.PLAYER.value:
            conn = self.player  # the player reconnected since sending it: ack on the new socket
        self.send(conn, Ack(session_id=self.session_id, id=frame_id, duplicate=duplicate))

    def ack_when_durable(self, version: int, conn: Connection | None, frame_id: str, duplicate: bool) -> None:
        if self.mirror.durable_version(self.session_id) >= version:
            self.ack(conn, frame_id, duplicate)
            return
        self._queue_ack(version, conn, frame_id, duplicate)
        if not duplicate:
            self._unacked_ids[frame_id] = version

    def _queue_ack(self, version: int, conn: Connection | None, frame_id: str, duplicate: bool) -> None:
        if self._unacked is None:
            self._unacked = deque()
        self._unacked.append((version, conn, frame_id, duplicate))

    def flush_acks(self, durable: int) -> None:
        unacked = self._unacked
        while unacked and unacked[0][0] <= durable:
            _, conn, frame_id, duplicate = unacked.popleft()
            if not duplicate:
                self._unacked_ids.pop(frame_id, None)
            self.ack(conn, frame_id, duplicate)
        if unacked is not None and not unacked and self._unacked is unacked:
            self._unacked = None

    @property
    def unacked(self) -> int:
        return len(self._unacked or ())

    def duplicate(self, conn: Connection | None, frame_id: str) -> None:
        """Acknowledge a re-sent id (the session has it): after the original's ack if that is still queued."""
        pending = self._unacked_ids.get(frame_id)
        if pending is not None:
            self._queue_ack(pending, conn, frame_id, True)
        else:
            self.ack(conn, frame_id, True)
