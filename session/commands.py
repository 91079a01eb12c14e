"""The learner's commands (seed 002): `hint`, `repeat`, `undo` and `stop`, a part of the session actor.

A `command` frame is idempotent by its id like every frame (a re-sent id is acknowledged as a
duplicate and not applied again), refused with `unavailable` when the mirror has no room, and
acknowledged once its change is durable. Its result is a session event with a `seq`, so
spectators see it and a resuming client gets it on replay. Any command starts the learner's
silence count again (session/silence.py).

- `hint`: a `hint` event for the learner's next line (session/hints.py); the level rises with each
  hint in the same turn and goes back to 0 with the next turn. No state change, no brain call.
  The silence timer gets its extended length: the learner is thinking.
- `repeat`: the vendor's last line again, exactly, as a `repeat` event. No state change, no brain
  call. Before the vendor has said anything: `nothing_to_repeat`.
- `undo`: takes back the last answered learner turn: an `undo` event with the state exactly as
  before it (`Negotiation.undo`). Up to `MAX_UNDO` (3) in a row; then, or before any turn:
  `nothing_to_undo`.
- `stop`: ends the session at once with outcome `stopped`: a forced `stage` event to CLOSURE,
  `session.ended` and the learner report. A turn in flight is abandoned (its brain call is
  cancelled and its answer, should one come, is dropped).

A `hint` or `undo` sent while a turn is in flight waits for that turn's answer, in order with the
transcripts behind it: the hint is then about the new line, and the undo takes that turn back.
After the end every command gets `session_ended`; an unknown name gets `unknown_command`. The
mirror records `command` (a hint's level, the seq each took), `undo` (the state restored) and
`stopped` changes, so a rebuilt session continues its seq, its counts and its undo stack
(server/mirror/fold.py).
"""

from __future__ import annotations

from schemas.codec import Envelope
from schemas.enums import Outcome
from schemas.errors import ErrorCode
from schemas.frames import CommandFrame, Repeat, Undone
from session.admission import COMMANDS
from session.changes import HintGiven, Repeated
from session.coaching import MAX_UNDO
from session.ending import end_now
from session.hints import build_hint
from session.messages import ClientFrame, Frame, Handler
from session.turns import ActorTurns

__all__ = ["COMMANDS", "FRAME_HANDLERS", "ActorCommands"]



class ActorCommands(ActorTurns):
    """Commands: the part of `SessionActor` that applies `command` frames. It builds on the turn
    pipeline's part, because `stop` must abandon a turn in flight and answer those queued behind it."""

    def _on_command(self, message: Frame) -> None:
        frame = message.frame
        assert isinstance(frame, CommandFrame)
        if frame.name == "hint":
            self._hint(message, frame)
        elif frame.name == "repeat":
            self._repeat(message, frame)
        elif frame.name == "undo":
            self._undo(message, frame)
        else:
            self._stop(message, frame)

    def _hint(self, message: Frame, frame: CommandFrame) -> None:
        negotiation = self.negotiation
        level = negotiation.coaching.hint_level
        negotiation.commit(HintGiven(*negotiation.stamp(message.received_at), id=frame.id, level=level,
                                     seq=negotiation.seq + 1))
        event = build_hint(negotiation, negotiation.seq, level, in_reply_to=frame.id)
        self._ack_when_durable(self._store(), message.conn, frame.id, False)
        self._fanout(Envelope(event))
        self._changed()
        self._listen(extended=True)

    def _undo(self, message: Frame, frame: CommandFrame) -> None:
        negotiation = self.negotiation
        covered = negotiation.memory.covers
        point = negotiation.undo(message.received_at, frame.id)
        if point is None:
            self._error(message.conn, ErrorCode.NOTHING_TO_UNDO,
                        f"no answered turn to take back (at most {MAX_UNDO} in a row)", frame.id)
            return
        event = Undone(session_id=self.session_id, seq=negotiation.seq, turn=point.turn,
                       state=negotiation.snapshot(), in_reply_to=frame.id)
        self._summary_undone(covered)
        self._ack_when_durable(self._store(), message.conn, frame.id, False)
        self._fanout(Envelope(event))
        self._changed()
        self._listen()

    def _repeat(self, message: Frame, frame: CommandFrame) -> None:
        negotiation = self.negotiation
        last = next((r for r in reversed(negotiation.history) if r.role == "vendor"), None)
        if last is None:
            self._error(message.conn, ErrorCode.NOTHING_TO_REPEAT, "the vendor has not said anything yet", frame.id)
            return
        negotiation.commit(Repeated(*negotiation.stamp(message.received_at), id=frame.id, seq=negotiation.seq + 1))
        event = Repeat(session_id=self.session_id, seq=negotiation.seq, turn=last.turn, text=last.text,
                       in_reply_to=frame.id)
        self._ack_when_durable(self._store(), message.conn, frame.id, False)
        self._fanout(Envelope(event))
        self._changed()
        self._listen()

    def _stop(self, message: Frame, frame: CommandFrame) -> None:
        negotiation = self.negotiation
        if self._thinking is not None:
            # Abandon the turn in flight: its answer, should it come, no longer matches `_thinking`.
            if self._brain_scope is not None:
                self._brain_scope.cancel()
            self._thinking = None
            self._streamed = []
            self._gate = None
        self._hush()
        events = end_now(negotiation, message.received_at, Outcome.STOPPED, self.tips, frame.id)
        self._ack_when_durable(self._store(), message.conn, frame.id, False)
        for event in events:
            self._fanout(Envelope(event))
        self._changed()
        # Transcripts queued behind the abandoned turn now get closing replies, in order.
        waiting, self._waiting, self._waiting_ids = self._waiting, None, None
        for queued in waiting or ():
            self._apply_queued(queued)


# This part's entry in the actor's dispatch table for client frames (`session/actor.py`).
FRAME_HANDLERS: dict[type[ClientFrame], Handler] = {
    CommandFrame: ActorCommands._on_command,
}
