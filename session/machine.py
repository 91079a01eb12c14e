"""The session machine: every decision about one session, with no I/O, no clock and no awaiting.

h11's `Connection` and websockets' Sans-I/O `Protocol` are the model. `SessionMachine.handle(input,
now)` takes one input (a client frame the actor admitted, a brain's answer, a timer) and returns
a `Step`: the outputs, in order (server events, and what it asks of the actor: session/outputs.py),
and the changes it committed (session/changes.py), which the live session has already applied
with `session/fold.py`'s `apply` and which the actor hands to the mirror, where the same `apply`
folds its copy. Every mutation of a session happens here: turns, commands and undo, playback,
silence, scene, resume, the end, the running summary and the coaching state.

The machine's state is the negotiation (`SessionCore`, through `Negotiation`) and the turn in
flight: its pending turn and the words of it streamed so far (the gate, session/spoken.py). What
is ordering or I/O is the actor's (session/actor.py): the inbox, the frames held behind a turn,
connections, the replay ring, acks, the brain's task, the timers.

The decisions live one module per concern, each a function `(machine, input, now, out)` that
appends its outputs: `turns` (transcripts and the brain's answers), `commands`, `playback`,
`silence` (the timer's expiry, a `silence` frame, a player joining), `scene`, `resume`, `memory`
(the running summary) and `speech` (what the recogniser heard). `HANDLERS` maps each input type to
one, and `FRAMES` each client frame type; a type with no decision fails at import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schemas.frames import CommandFrame, PlaybackFrame, SceneFrame, SilenceFrame, TranscriptFrame
from session import commands, memory, playback, resume, scene, silence, speech, turns
from session.machine_state import MachineState
from session.messages import (
    CLIENT_FRAMES,
    BrainDone,
    Decided,
    Delta,
    Frame,
    PlayerJoined,
    Recognised,
    ResumeAsked,
    SilenceDue,
    Speaking,
    SummaryDone,
    Withdraw,
)
from session.outputs import Output, Step, Think

__all__ = ["FRAMES", "HANDLERS", "Input", "SessionMachine"]

Input = (Frame | ResumeAsked | BrainDone | Delta | Decided | Withdraw | SummaryDone | SilenceDue | PlayerJoined
         | Recognised | Speaking)
"""What the machine takes: a client frame (in the actor's `Frame`, which carries the library
interface's extra context; `resume` as `ResumeAsked`), a brain's answers, a summary, the silence
timer's expiry, a player joining, a recognised utterance."""

Decide = Callable[[Any, Any, float, list[Output]], None]


class SessionMachine(MachineState):
    """One session's decisions. `handle` is the only way in; `negotiation` is read-only outside."""

    __slots__ = ()

    def handle(self, message: Input, now: float) -> Step:
        """Decide `message` at wall-clock time `now`: the outputs, in order, and the changes committed."""
        out: list[Output] = []
        if type(message) is Frame:
            FRAMES[type(message.frame)](self, message, now, out)
        else:
            HANDLERS[type(message)](self, message, now, out)
        return Step(out, self.negotiation.take_changes())

    def resume_pending(self) -> Step:
        """A turn recorded but never answered (rebuilt after a restart, or the actor was stopped
        mid-call): ask the brain again. No output when there is none, or one is in flight."""
        out: list[Output] = []
        pending = self.negotiation.pending
        if pending is not None and self.thinking is None:
            self.start_thinking(pending)
            out.append(Think(pending, self.negotiation.brain_request(pending)))
        return Step(out, self.negotiation.take_changes())


# Each input's decision, by the input's exact type (a client frame's in `FRAMES`).
HANDLERS: dict[type[Any], Decide] = {
    ResumeAsked: resume.on_resume,
    BrainDone: turns.on_brain_done,
    Delta: turns.on_delta,
    Decided: turns.on_decided,
    Withdraw: turns.on_withdraw,
    SummaryDone: memory.on_summary_done,
    SilenceDue: silence.on_silence_due,
    PlayerJoined: silence.on_player_joined,
    Recognised: speech.on_recognised,
    Speaking: silence.on_speaking,
}

# Each client frame's decision, by the frame's exact type (`resume` comes as `ResumeAsked`).
FRAMES: dict[type[Any], Decide] = {
    TranscriptFrame: turns.on_transcript,
    CommandFrame: commands.on_command,
    PlaybackFrame: playback.on_playback,
    SceneFrame: scene.on_scene,
    SilenceFrame: silence.on_silence_frame,
}

_undecided = {t.__name__ for t in CLIENT_FRAMES} - {t.__name__ for t in FRAMES} - {"ResumeFrame"}
if _undecided:
    raise RuntimeError(f"client frames with no decision: {sorted(_undecided)}")
