"""The `scene` frame: what the learner holds and which languages are in play.

A scene frame changes the session's context and never makes the vendor speak: the item grabbed
becomes the item under negotiation while the talk is still at greeting or inquiry, and the input
and target languages change when given (`Negotiation.apply_scene`). Like a transcript it is
idempotent by its id (a re-sent id is acknowledged as a duplicate), refused with `unavailable`
when the mirror has no room, recorded for the mirror (`scene`) and acknowledged once durable
(`session/fanout.py`). After the negotiation has ended it is refused with `session_ended`.

It is also the smallest example of a client command with a module of its own: a part of
`SessionActor` with one handler, and that handler's entry in `FRAME_HANDLERS`, which the actor
merges into its dispatch table (`session/actor.py`). A new command (a hint, a repeat) can follow it.
"""

from __future__ import annotations

from schemas.frames import SceneFrame
from session.fanout import ActorFanout
from session.messages import ClientFrame, Frame, Handler


class ActorScene(ActorFanout):
    """Scene updates: the part of `SessionActor` that applies `scene` frames."""

    def _on_scene(self, message: Frame) -> None:
        frame = message.frame
        assert isinstance(frame, SceneFrame)
        self.negotiation.apply_scene(
            object_grabbed=frame.object_grabbed,
            input_language=frame.input_language,
            target_language=frame.target_language,
            now=message.received_at,
            client_id=frame.id,
        )
        self._ack_when_durable(self._store(), message.conn, frame.id, False)
        self._changed()


# This part's entry in the actor's dispatch table for client frames (`session/actor.py`).
FRAME_HANDLERS: dict[type[ClientFrame], Handler] = {
    SceneFrame: ActorScene._on_scene,
}
