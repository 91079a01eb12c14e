"""The `resume` frame: bring a reconnecting client level with the session, by replay or snapshot.

A client that reconnects sends the last `seq` it applied, on its new connection, and gets back:

- the events after that `seq`, in order, replayed from the ring of the last `limits.replay_events`
  sequenced events (`ActorFanout._fanout` keeps them, encoded once), when the ring still holds
  every one of them;
- nothing, when it is level with the session and the session holds its recent events, or has sent
  none yet (seq 0);
- a `snapshot` of the whole state (`replayed: false`, with the reason) otherwise: the events it
  missed are no longer held; or it is level with a session rebuilt from storage (after a restart
  or an eviction), which holds nothing for replay and says so explicitly; or it claims a `seq`
  the session never reached, because events it saw were lost in a restart before they were
  stored (its state is ahead of ours, and ours wins).

A snapshot consumes no `seq`. The answer goes to the resuming connection only, with `send_nowait`
like every other send; if that connection overflows during replay it has closed itself as a slow
consumer, and replay stops there. A `resume` with an `id` is then acknowledged at once: it changed
nothing, so there is no durability to wait for. A `resume` from a connection that has gone is
ignored. docs/protocol.md §5 describes the exchange from the client's side.
"""

from __future__ import annotations

from collections.abc import Sequence

from schemas.codec import Envelope
from schemas.frames import Ack, ResumeFrame, Snapshot
from session.fanout import ActorFanout
from session.messages import ClientFrame, Frame, Handler


class ActorResume(ActorFanout):
    """Resume: the part of `SessionActor` that answers `resume` frames from the replay ring."""

    @property
    def replay(self) -> Sequence[Envelope]:
        """The sequenced events kept for `resume`, oldest first (at most `replay_events`)."""
        return tuple(Envelope.from_json(seq, encoded) for seq, encoded in self._replay or ())

    def _on_resume(self, message: Frame) -> None:
        conn, frame = message.conn, message.frame
        assert isinstance(frame, ResumeFrame)
        if conn is None or conn.conn_id not in self.connections:
            return
        latest = self.negotiation.seq
        last = min(frame.last_seq, latest)
        oldest = self._replay[0][0] if self._replay else None
        if frame.last_seq > latest:
            # The client saw events that were never stored (a crash lost them): its state is ahead.
            conn.send_nowait(Envelope(Snapshot(
                session_id=self.session_id, seq=latest, state=self.negotiation.snapshot(), replayed=False,
                reason=f"events after seq {latest} were lost in a restart before they were stored",
            )))
        elif last == latest:
            if not self._replay and latest > 0:
                # Events were sent and none is held for replay: the session was rebuilt from storage
                # (after a restart or an eviction). The client is level with it, and a snapshot says
                # so explicitly. (At seq 0 nothing was ever sent: the client is simply level.)
                conn.send_nowait(Envelope(Snapshot(
                    session_id=self.session_id, seq=latest, state=self.negotiation.snapshot(), replayed=False,
                    reason="the session was rebuilt from storage; nothing is held for replay",
                )))
        elif oldest is not None and oldest <= last + 1:
            for seq, encoded in self._replay or ():
                assert seq is not None
                if seq > last and not conn.send_nowait(Envelope.from_json(seq, encoded)):
                    return
        else:
            missing = latest - last
            conn.send_nowait(Envelope(Snapshot(
                session_id=self.session_id, seq=latest, state=self.negotiation.snapshot(), replayed=False,
                reason=f"{missing} events after seq {last} are no longer held for replay",
            )))
        if frame.id is not None:
            conn.send_nowait(Envelope(Ack(session_id=self.session_id, id=frame.id)))


# This part's entry in the actor's dispatch table for client frames (`session/actor.py`).
FRAME_HANDLERS: dict[type[ClientFrame], Handler] = {
    ResumeFrame: ActorResume._on_resume,
}
