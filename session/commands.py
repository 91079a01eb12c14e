"""The learner's commands (seed 002): `repeat` and `stop`, a part of the session actor.

A `command` frame is idempotent by its id like every frame (a re-sent id is acknowledged as a
duplicate and not applied again), refused with `unavailable` when the mirror has no room, and
acknowledged once its change is durable. Its result is a session event with a `seq`, so
spectators see it and a resuming client gets it on replay.

- `repeat`: the vendor's last line again, exactly, as a `repeat` event. No state change, no brain
  call. Before the vendor has said anything: `nothing_to_repeat`.
- `stop`: ends the session at once with outcome `stopped`: a forced `stage` event to CLOSURE,
  `session.ended` and the learner report. A turn in flight is abandoned (its brain call is
  cancelled and its answer, should one come, is dropped).

After the end either command gets `session_ended`; any other name gets `unknown_command`. The
mirror records `command` (the seq a repeat took) and `stopped` changes, so a rebuilt session
continues its seq and stays stopped (server/mirror/fold.py).
"""

from __future__ import annotations

from schemas.brain import StageVisit
from schemas.codec import Envelope
from schemas.enums import Outcome, Stage
from schemas.errors import ErrorCode
from schemas.frames import CommandFrame, Repeat, SessionEnded, StageChanged
from session.messages import ClientFrame, Frame, Handler
from session.negotiation import Negotiation
from session.report import report_event
from session.turns import ActorTurns

__all__ = ["COMMANDS", "FRAME_HANDLERS", "ActorCommands", "stop_negotiation"]

COMMANDS = ("repeat", "stop")


def stop_negotiation(negotiation: Negotiation, now: float) -> list[StageChanged | SessionEnded]:
    """End the negotiation as stopped: CLOSURE (forced), then the end. Pure apart from `negotiation`."""
    previous = negotiation.stage
    negotiation.pending = None
    negotiation.outcome = Outcome.STOPPED
    negotiation.stage = Stage.CLOSURE
    negotiation.updated_at = now
    # Recorded at the next turn: the stop comes before the learner turn that never happens.
    negotiation.stage_changes.append(StageVisit(from_stage=previous, to_stage=Stage.CLOSURE,
                                                at_turn=negotiation.turn + 1, happiness=negotiation.happiness))
    sid = negotiation.session_id
    changed = StageChanged(session_id=sid, seq=negotiation.next_seq(), turn=negotiation.turn,
                           from_=previous, to=Stage.CLOSURE, forced=True)
    summary = negotiation.summary()
    assert summary is not None
    ended = SessionEnded(session_id=sid, seq=negotiation.next_seq(), outcome=summary.outcome, summary=summary)
    return [changed, ended]


class ActorCommands(ActorTurns):
    """Commands: the part of `SessionActor` that applies `command` frames. It builds on the turn
    pipeline's part, because `stop` must abandon a turn in flight and answer those queued behind it."""

    def _on_command(self, message: Frame) -> None:
        frame = message.frame
        assert isinstance(frame, CommandFrame)
        if self._duplicate(message.conn, frame.id):
            return
        if frame.name not in COMMANDS:
            self._error(message.conn, ErrorCode.UNKNOWN_COMMAND,
                        f"unknown command {frame.name[:32]!r}; this server knows {', '.join(COMMANDS)}", frame.id)
            return
        negotiation = self.negotiation
        if negotiation.is_terminal:
            self._error(message.conn, ErrorCode.SESSION_ENDED, "the negotiation is over", frame.id)
            return
        if not self._mirror_has_room(message.conn, frame.id):
            return
        if frame.name == "repeat":
            self._repeat(message, frame)
        else:
            self._stop(message, frame)

    def _repeat(self, message: Frame, frame: CommandFrame) -> None:
        negotiation = self.negotiation
        last = next((r for r in reversed(negotiation.history) if r.role == "vendor"), None)
        if last is None:
            self._error(message.conn, ErrorCode.NOTHING_TO_REPEAT, "the vendor has not said anything yet", frame.id)
            return
        negotiation.remember(frame.id)
        event = Repeat(session_id=self.session_id, seq=negotiation.next_seq(), turn=last.turn, text=last.text,
                       in_reply_to=frame.id)
        version = self._record("command", {"id": frame.id, "name": "repeat", "seq": event.seq,
                                           "at": message.received_at})
        self._ack_when_durable(version, message.conn, frame.id, False)
        self._fanout(Envelope(event))
        self._changed()

    def _stop(self, message: Frame, frame: CommandFrame) -> None:
        negotiation = self.negotiation
        if self._thinking is not None:
            # Abandon the turn in flight: its answer, should it come, no longer matches `_thinking`.
            if self._brain_scope is not None:
                self._brain_scope.cancel()
            self._thinking = None
            self._streamed = []
        negotiation.remember(frame.id)
        previous = negotiation.stage
        events = [*stop_negotiation(negotiation, message.received_at), report_event(negotiation, self.tips)]
        version = self._record("stopped", {"id": frame.id, "seq": negotiation.seq, "stage": Stage.CLOSURE.value,
                                           "previous_stage": previous.value, "at": message.received_at})
        self._ack_when_durable(version, message.conn, frame.id, False)
        for event in events:
            self._fanout(Envelope(event))
        self._changed()
        # Transcripts queued behind the abandoned turn now get closing replies, in order.
        waiting, self._waiting, self._waiting_ids = self._waiting, None, None
        for queued in waiting or ():
            self._on_transcript(queued)


# This part's entry in the actor's dispatch table for client frames (`session/actor.py`).
FRAME_HANDLERS: dict[type[ClientFrame], Handler] = {
    CommandFrame: ActorCommands._on_command,
}
