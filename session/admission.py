"""Admission as data: what every client frame must pass before its handler runs, one row per frame type.

Every frame goes through the same steps, in this order, and each row says which apply to its type
(`SessionActor._apply_queued`, session/actor.py):

1. **Idempotent by id.** A re-sent id is acknowledged again (`duplicate: true`), after the
   original's ack if that is not durable yet, and not applied again. A frame queued behind the
   turn in flight is a duplicate too.
2. **Valid in itself.** What can be judged from the frame alone (a command's name): refused with
   its own code (`unknown_command`).
3. **After the end.** Refused with `session_ended`, or, for a transcript, answered with the
   vendor's closing line by its handler.
4. **Mirror room.** Refused with `unavailable` when the mirror's buffer is full, before anything
   changes; the client re-sends it later with the same id.
5. **Behind a turn.** While a turn is in flight the frame waits, in order, and goes through these
   steps again when that turn is answered (its state may have moved on: the session may be over).

What a frame asks of the state itself (a turn to undo, a reply to have heard) is its handler's to
judge, when the frame is applied: only then is the state the one it acts on. A frame that changes
nothing (a partial transcript, a resume) passes no step: it is not remembered by its id and never
waits.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from schemas.errors import ErrorCode
from schemas.frames import CommandFrame, PlaybackFrame, ResumeFrame, SceneFrame, SilenceFrame, TranscriptFrame

__all__ = ["ADMISSION", "COMMANDS", "Admission", "AfterEnd", "Held", "admission"]

COMMANDS = ("hint", "repeat", "undo", "stop")


class AfterEnd(Enum):
    """What a frame gets once the negotiation is over."""

    APPLY = "apply"  # the handler answers it (a transcript gets the closing line; a resume its replay)
    REFUSE = "refuse"  # refused with `session_ended`


def _always(frame: Any) -> bool:
    return True


def _never(frame: Any) -> bool:
    return False


def _nothing(frame: Any) -> None:
    return None


def _unknown_command(frame: CommandFrame) -> tuple[ErrorCode, str] | None:
    if frame.name in COMMANDS:
        return None
    return ErrorCode.UNKNOWN_COMMAND, f"unknown command {frame.name[:32]!r}; this server knows {', '.join(COMMANDS)}"


def _command_waits(frame: CommandFrame) -> bool:
    # A hint is about the line after the turn in flight, and an undo takes that turn back; a repeat
    # says what was said, and a stop abandons the turn.
    return frame.name in ("hint", "undo")


@dataclass(frozen=True, slots=True)
class Admission:
    """One frame type's row: which admission steps apply to it."""

    idempotent: bool
    after_end: AfterEnd
    needs_room: bool
    waits_behind_turn: Callable[[Any], bool] = _never
    refusal: Callable[[Any], tuple[ErrorCode, str] | None] = _nothing  # judged from the frame alone (step 2)


ADMISSION: dict[type[Any], Admission] = {
    TranscriptFrame: Admission(idempotent=True, after_end=AfterEnd.APPLY, needs_room=True,
                               waits_behind_turn=_always),
    CommandFrame: Admission(idempotent=True, after_end=AfterEnd.REFUSE, needs_room=True,
                            waits_behind_turn=_command_waits, refusal=_unknown_command),
    SilenceFrame: Admission(idempotent=True, after_end=AfterEnd.REFUSE, needs_room=True, waits_behind_turn=_always),
    SceneFrame: Admission(idempotent=True, after_end=AfterEnd.REFUSE, needs_room=True),
    PlaybackFrame: Admission(idempotent=True, after_end=AfterEnd.REFUSE, needs_room=True),
    ResumeFrame: Admission(idempotent=False, after_end=AfterEnd.APPLY, needs_room=False),
}

_FREE = Admission(idempotent=False, after_end=AfterEnd.APPLY, needs_room=False)


def admission(frame: Any) -> Admission:
    """The row for `frame`. A partial transcript changes nothing, so it passes no step."""
    if isinstance(frame, TranscriptFrame) and not frame.final:
        return _FREE
    return ADMISSION[type(frame)]


class Held:
    """The frames held behind the turn in flight (step 5), in order, and their ids (a re-sent one is
    a duplicate). Its queue is made with the first frame held: an idle session holds none."""

    __slots__ = ("_frames", "_ids", "count")

    def __init__(self) -> None:
        self._frames: deque[tuple[Any, str | None]] | None = None
        self._ids: set[str] | None = None
        self.count = 0  # how many are held (an attribute: read on every frame a session takes)

    def __len__(self) -> int:
        return self.count

    def __contains__(self, frame_id: str) -> bool:
        return self._ids is not None and frame_id in self._ids

    def hold(self, message: Any, frame_id: str | None) -> None:
        if self._frames is None or self._ids is None:
            self._frames, self._ids = deque(), set()
        self._frames.append((message, frame_id))
        self.count += 1
        if frame_id is not None:
            self._ids.add(frame_id)

    def next(self) -> Any:
        """The oldest frame held (the caller checks there is one)."""
        assert self._frames is not None and self._ids is not None
        message, frame_id = self._frames.popleft()
        self.count -= 1
        if frame_id is not None:
            self._ids.discard(frame_id)
        if not self._frames:
            self._frames = self._ids = None
        return message
