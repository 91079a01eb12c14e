"""The learner's commands (seed 002), as the session machine decides them: `hint`, `repeat`, `undo`, `stop`.

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
After the end every command gets `session_ended`; an unknown name gets `unknown_command`. Each
decision is a change (`HintGiven`, `Repeated`, `TurnUndone`, `EndedNow`), so a session rebuilt
from the mirror continues its seq, its counts and its undo stack (server/mirror/fold.py).
"""

from __future__ import annotations

from schemas.enums import Outcome
from schemas.errors import ErrorCode
from schemas.frames import CommandFrame, Error, Repeat, Undone
from session.admission import COMMANDS
from session.changes import HintGiven, Repeated
from session.coaching import MAX_UNDO
from session.ending import end_now
from session.hints import build_hint
from session.machine_state import MachineState
from session.memory import summary_undone
from session.messages import Frame
from session.outputs import Abandon, Acknowledge, Answer, Hush, Listen, Output, RunWaiting

__all__ = ["COMMANDS", "on_command"]

LISTEN = Listen()
THINKING = Listen(extended=True)


def on_command(m: MachineState, message: Frame, now: float, out: list[Output]) -> None:
    frame = message.frame
    assert isinstance(frame, CommandFrame) and frame.id is not None
    COMMAND[frame.name](m, frame, now, out)


def _hint(m: MachineState, frame: CommandFrame, now: float, out: list[Output]) -> None:
    negotiation = m.negotiation
    level = negotiation.coaching.hint_level
    assert frame.id is not None
    hint = build_hint(negotiation, negotiation.seq + 1, level, in_reply_to=frame.id)  # the seq it takes
    negotiation.commit(HintGiven(*negotiation.stamp(now), id=frame.id, level=level, seq=negotiation.seq + 1,
                                 situation=hint.situation, text=hint.text if hint.kind == "reveal" else "",
                                 english=hint.english if hint.kind == "reveal" else ""))
    out += (Acknowledge(frame.id), hint, THINKING)  # the learner is thinking: the longer timer


def _undo(m: MachineState, frame: CommandFrame, now: float, out: list[Output]) -> None:
    negotiation = m.negotiation
    assert frame.id is not None
    covered = negotiation.memory.covers
    point = negotiation.undo(now, frame.id)
    if point is None:
        out.append(Answer(Error(session_id=negotiation.session_id, code=ErrorCode.NOTHING_TO_UNDO,
                                message=f"no answered turn to take back (at most {MAX_UNDO} in a row)",
                                id=frame.id)))
        return
    event = Undone(session_id=negotiation.session_id, seq=negotiation.seq, turn=point.turn,
                   state=negotiation.snapshot(), in_reply_to=frame.id)
    summary_undone(negotiation, now, covered)
    out += (Acknowledge(frame.id), event, LISTEN)


def _repeat(m: MachineState, frame: CommandFrame, now: float, out: list[Output]) -> None:
    negotiation = m.negotiation
    assert frame.id is not None
    last = next((r for r in reversed(negotiation.history) if r.role == "vendor"), None)
    if last is None:
        out.append(Answer(Error(session_id=negotiation.session_id, code=ErrorCode.NOTHING_TO_REPEAT,
                                message="the vendor has not said anything yet", id=frame.id)))
        return
    negotiation.commit(Repeated(*negotiation.stamp(now), id=frame.id, seq=negotiation.seq + 1))
    out += (Acknowledge(frame.id), Repeat(session_id=negotiation.session_id, seq=negotiation.seq, turn=last.turn,
                                          text=last.text, in_reply_to=frame.id), LISTEN)


def _stop(m: MachineState, frame: CommandFrame, now: float, out: list[Output]) -> None:
    assert frame.id is not None
    if m.thinking is not None:
        # Abandon the turn in flight: its answer, should it come, no longer matches `thinking`.
        m.stop_thinking()
        out.append(Abandon())
    out.append(Hush())
    events = end_now(m.negotiation, now, Outcome.STOPPED, m.tips, frame.id)
    out.append(Acknowledge(frame.id))
    out += events
    out.append(RunWaiting())  # transcripts held behind the abandoned turn now get closing replies, in order


# Each command's decision, by its name (session/admission.py refuses any other name first).
COMMAND = {"hint": _hint, "repeat": _repeat, "undo": _undo, "stop": _stop}
if set(COMMAND) != set(COMMANDS):
    raise RuntimeError("every command the admission knows needs its decision here")
