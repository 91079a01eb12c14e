"""The `scene` frame, as the session machine decides it: what the learner holds and which languages
are in play.

A scene frame changes the session's context and never makes the vendor speak: the item grabbed
becomes the item under negotiation while the talk is still at greeting or inquiry, and the input
and target languages change when given (`Negotiation.apply_scene`, a `SceneChanged` change). Like
a transcript it is idempotent by its id, refused with `unavailable` when the mirror has no room,
and acknowledged once durable; after the end it is refused with `session_ended`
(session/admission.py). It is the smallest of the machine's decisions: one change, one ack.
"""

from __future__ import annotations

from schemas.frames import SceneFrame
from session.machine_state import MachineState
from session.messages import Frame
from session.outputs import Acknowledge, Output

__all__ = ["on_scene"]


def on_scene(m: MachineState, message: Frame, now: float, out: list[Output]) -> None:
    frame = message.frame
    assert isinstance(frame, SceneFrame)
    m.negotiation.apply_scene(object_grabbed=frame.object_grabbed, input_language=frame.input_language,
                              target_language=frame.target_language, now=now, client_id=frame.id)
    if frame.id is not None:
        out.append(Acknowledge(frame.id))
