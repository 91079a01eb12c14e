"""`SessionActor.reply_to`: a caller with no socket (the library interface, `POST /api/test`) gets the
reply to its frame, or a reason there is none."""

from __future__ import annotations

import anyio
import pytest

from schemas.frames import Reply, TranscriptFrame
from session.actor import ActorLimits, SessionActor, SessionBusy, SessionStopped
from session.mirror import MemoryMirror
from session.negotiation import Negotiation
from tests.fakes import ScriptedBrain, hosted

pytestmark = pytest.mark.anyio


def transcript(fid: str) -> TranscriptFrame:
    return TranscriptFrame(type="transcript", id=fid, text="hello")


async def until(condition: object, limit: float = 3.0) -> None:
    with anyio.fail_after(limit):
        while not condition():  # type: ignore[operator]  # noqa: ASYNC110
            await anyio.sleep(0.005)


async def test_reply_to_answers_a_caller_without_a_socket_or_says_why_not() -> None:
    """`reply_to` (the library interface and `POST /api/test`): the reply, `SessionBusy` while the
    session holds all the frames it may, `SessionStopped` when the actor stops first."""
    negotiation = Negotiation(session_id="s1", scenario_name="jaipur-bazaar", created_at=0.0)
    actor = SessionActor(negotiation, ScriptedBrain(delay=0.3), MemoryMirror(), limits=ActorLimits(inbox_frames=1))
    async with hosted(actor):
        first: list[Reply] = []

        async def ask() -> None:
            first.append(await actor.reply_to(transcript("r1"), within=5))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await until(lambda: actor.busy)
            with pytest.raises(SessionBusy):
                await actor.reply_to(transcript("r2"), within=5)
        assert first[0].in_reply_to == "r1" and not actor.turn_waiters  # the refused caller left no waiter
        stopped: list[BaseException] = []

        async def ask_then_stop() -> None:
            try:
                await actor.reply_to(transcript("r3"), within=5)
            except SessionStopped as exc:
                stopped.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask_then_stop)
            await until(lambda: actor.busy)
            actor.stop()
        assert len(stopped) == 1
