"""Admission as data: every frame passes the same steps in the same order (session/admission.py).

The steps' order used to differ by handler (a `silence` frame got `unavailable` before
`session_ended`, a `scene` frame the reverse). Here each frame type meets two refusals at once and
must get the same one as every other type.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
from anyio.abc import TaskGroup

from brain.rules_vendor import RuleBasedVendor
from schemas.enums import LanguageCode, Level, Stage
from schemas.frames import CommandFrame, PlaybackFrame, ResumeFrame, SceneFrame, SilenceFrame, TranscriptFrame
from session.actor import SessionActor
from session.admission import ADMISSION, AfterEnd
from session.changes import SessionStarted
from session.messages import CLIENT_FRAMES
from session.negotiation import Negotiation
from tests.fakes import DeferredMirror, FakeConnection

FRAMES: dict[str, Any] = {
    "transcript": TranscriptFrame(type="transcript", id="x1", text="How much for the tomatoes?"),
    "command": CommandFrame(type="command", id="x1", name="hint"),
    "silence": SilenceFrame(type="silence", id="x1"),
    "scene": SceneFrame(type="scene", id="x1", object_grabbed="tomato"),
    "playback": PlaybackFrame(type="playback", id="x1", turn=1, heard_chars=3, interrupted=True),
}


def session(mirror: DeferredMirror) -> tuple[SessionActor, FakeConnection]:
    started = SessionStarted(session_id="a1", version=1, at=0.0, scenario="jaipur-bazaar", learner_id=None,
                             input_language=LanguageCode.EN_IN, target_language=LanguageCode.EN_IN,
                             level=Level.INTERMEDIATE, stage=Stage.GREETING, happiness=50)
    actor = SessionActor(Negotiation.started(started), RuleBasedVendor(), mirror, clock=lambda: 10.0)
    actor.attach(cast(TaskGroup, None), lambda a: None)  # the test drains it, as the dispatcher would
    player = FakeConnection()
    actor.connect(player)
    actor.drain()
    return actor, player


def durable(actor: SessionActor, mirror: DeferredMirror) -> None:
    """Everything so far stored, and the actor told (as the registry tells it)."""
    mirror.flush()
    actor.notify_durable(actor.negotiation.version)
    actor.drain()


def send(actor: SessionActor, player: FakeConnection, frame: Any) -> list[dict[str, Any]]:
    before = len(player.sent)
    assert actor.submit(player, frame)
    actor.drain()
    return player.sent[before:]


def test_every_client_frame_has_its_row() -> None:
    assert set(ADMISSION) == set(CLIENT_FRAMES)


@pytest.mark.parametrize("kind", sorted(FRAMES))
def test_after_the_end_with_a_full_mirror_every_frame_gets_the_same_answer(kind: str) -> None:
    mirror = DeferredMirror()
    actor, player = session(mirror)
    send(actor, player, TranscriptFrame(type="transcript", id="t1", text="Namaste bhaiya"))
    send(actor, player, CommandFrame(type="command", id="stop", name="stop"))
    durable(actor, mirror)
    assert actor.negotiation.is_terminal
    mirror.room = 0  # full: a frame that needs room is refused with `unavailable`, unless refused before
    seq = actor.negotiation.seq
    answers = send(actor, player, FRAMES[kind])
    row = ADMISSION[type(FRAMES[kind])]
    if row.after_end is AfterEnd.REFUSE:
        assert [(a["type"], a["code"]) for a in answers] == [("error", "session_ended")]
    else:  # a transcript after the end is answered with the closing line, which needs room first
        assert [(a["type"], a["code"]) for a in answers] == [("error", "unavailable")]
    assert actor.negotiation.seq == seq  # refused: nothing changed


@pytest.mark.parametrize("kind", sorted(FRAMES))
def test_a_re_sent_id_is_a_duplicate_before_any_other_step(kind: str) -> None:
    mirror = DeferredMirror()
    actor, player = session(mirror)
    send(actor, player, TranscriptFrame(type="transcript", id="x1", text="Namaste bhaiya"))
    send(actor, player, CommandFrame(type="command", id="stop", name="stop"))
    durable(actor, mirror)
    mirror.room = 0
    answers = send(actor, player, FRAMES[kind])  # the id of the first transcript, re-sent
    assert [(a["type"], a.get("duplicate")) for a in answers] == [("ack", True)]


def test_a_resume_passes_no_step() -> None:
    mirror = DeferredMirror()
    actor, player = session(mirror)
    mirror.room = 0
    answers = send(actor, player, ResumeFrame(type="resume", id="r1", last_seq=0))
    assert [a["type"] for a in answers] == ["ack"]
