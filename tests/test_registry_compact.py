"""An ended session nobody has open drops its replay ring after a grace (issue #33): it is the
largest part of what an ended session holds, and a late reconnect is served by a snapshot instead.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from schemas.frames import CommandFrame, ResumeFrame, TranscriptFrame
from session.mirror import MemoryMirror
from session.registry import SessionRegistry
from tests.fakes import FakeConnection, ScriptedBrain

pytestmark = pytest.mark.anyio


async def until(condition: Callable[[], bool]) -> None:
    """Poll the fakes, which have no events to wait on."""
    with anyio.fail_after(5):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.01)


async def test_an_ended_session_left_alone_drops_its_replay_and_a_late_resume_gets_a_snapshot() -> None:
    now = [1000.0]
    registry = SessionRegistry(ScriptedBrain(), MemoryMirror(), idle_seconds=1800, ended_grace_seconds=60,
                               clock=lambda: now[0])
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        live, ended = registry.create(), registry.create()
        for actor in (live, ended):
            player = FakeConnection()
            actor.connect(player)
            actor.submit(player, TranscriptFrame(type="transcript", id="t1", text="tamatar kitne ka?", final=True))
            await until(lambda p=player: len(p.of_type("reply")) == 1)  # type: ignore[misc]
            if actor is ended:
                actor.submit(player, CommandFrame(type="command", id="stop", name="stop"))
                await until(lambda a=actor: a.negotiation.is_terminal)  # type: ignore[misc]
            actor.disconnect(player)
            await until(lambda a=actor: not a.connections)  # type: ignore[misc]
        kept = ended.fanout.replay_len
        assert kept > 0 and live.fanout.replay_len > 0
        seq = ended.negotiation.seq

        now[0] = ended.last_activity + 30  # within the grace: a reconnect could still replay
        registry.evict_idle()
        assert ended.fanout.replay_len == kept

        now[0] = max(ended.last_activity, live.last_activity) + 61
        assert registry.evict_idle() == 0  # kept for its report, not evicted
        assert ended.fanout.replay_len == 0
        assert live.fanout.replay_len > 0  # a live session keeps its ring
        assert await registry.get(ended.session_id) is ended and ended.negotiation.seq == seq

        late = FakeConnection()
        ended.connect(late)
        ended.submit(late, ResumeFrame(type="resume", last_seq=seq - 1, id="r1"))
        await until(lambda: len(late.of_type("snapshot")) == 1)
        welcome, snapshot = late.sent[0], late.of_type("snapshot")[0]
        assert welcome["type"] == "welcome" and welcome["seq"] == seq
        assert snapshot["seq"] == seq and snapshot["replayed"] is False
        assert snapshot["state"] == welcome["state"]  # the final state, as the welcome gave it
        tg.cancel_scope.cancel()
