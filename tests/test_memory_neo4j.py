"""The running summary in Neo4j (server/mirror/memory.py, docs/memory.md): written to the Session node,
restored when the session is rebuilt after a restart, taken back by an undo, and written idempotently."""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, LiteralString

import anyio
import pytest

from schemas.frames import CommandFrame, TranscriptFrame
from server.mirror import Neo4jMirror, SessionFold, plan
from session.actor import SessionActor
from session.changes import Change, SummaryWritten
from session.protocols import Mirror
from session.registry import SessionRegistry
from session.rules import Limits
from session.summary import Memory
from tests.fakes import DeferredMirror, FakeConnection, ScriptedBrain
from tests.neo4j_support import running_mirror, wait_for

pytestmark = [pytest.mark.neo4j, pytest.mark.anyio]

LIMITS = Limits(max_turns=40, wrap_up_after=39)

READ_SUMMARY: LiteralString = """
MATCH (s:Session {session_id: $session_id})
RETURN s.summary AS summary, s.summary_turn AS turn, s.summary_previous AS previous,
       s.summary_previous_turn AS previous_turn, s.summary_version AS version
"""


@asynccontextmanager
async def registry_on(mirror: Mirror) -> AsyncIterator[SessionRegistry]:
    registry = SessionRegistry(ScriptedBrain(), mirror, limits=LIMITS,
                               loader=mirror if hasattr(mirror, "load") else None)  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        yield registry
        tg.cancel_scope.cancel()


async def play(actor: SessionActor, conn: FakeConnection, upto: int) -> None:
    while len(conn.of_type("reply")) < upto:
        n = len(conn.of_type("reply")) + 1
        actor.submit(conn, TranscriptFrame(type="transcript", id=f"t{n}-{len(conn.sent)}", text="Namaste bhaiya!"))
        await wait_for(lambda n=n: len(conn.of_type("reply")) >= n, 5, f"reply {n}", every=0.002)  # type: ignore[misc]


async def undo(actor: SessionActor, conn: FakeConnection) -> None:
    before = len(conn.of_type("undo"))
    actor.submit(conn, CommandFrame(type="command", id=f"undo-{len(conn.sent)}", name="undo"))
    await wait_for(lambda: len(conn.of_type("undo")) > before, 5, "the undo")


def stored(memory: Memory) -> tuple[str, int, str, int]:
    return memory.summary, memory.covers, memory.previous, memory.previous_covers


async def node(mirror: Neo4jMirror, session_id: str) -> dict[str, Any]:
    return (await mirror.read(READ_SUMMARY, session_id=session_id))[0]


async def test_the_summary_is_on_the_session_node_comes_back_after_a_restart_and_an_undo_takes_it_back(
        neo4j_uri: str) -> None:
    async with running_mirror(neo4j_uri) as mirror, registry_on(mirror) as registry:
        actor = registry.create()
        conn = FakeConnection()
        actor.connect(conn)
        await play(actor, conn, 21)
        memory = actor.negotiation.memory
        assert memory.covers == 20 and memory.previous_covers == 10
        assert await mirror.flushed(actor.session_id, 10.0)
        written = await node(mirror, actor.session_id)
    sid = actor.session_id
    assert (written["summary"], written["turn"], written["previous"], written["previous_turn"]) == stored(memory)
    assert written["summary"].startswith("After 20 learner turns")

    # A restart: the session is rebuilt from the graph with its summary, and an undo of turns 21 and 20
    # takes the summary back to the one made at turn 10, in memory and in the graph.
    async with running_mirror(neo4j_uri) as fresh, registry_on(fresh) as registry:
        loaded = await fresh.load(sid, LIMITS)
        assert loaded is not None and stored(loaded[0].memory) == stored(memory)
        recovered = await registry.get(sid)
        assert recovered is not None
        conn = FakeConnection()
        recovered.connect(conn)
        await undo(recovered, conn)
        assert stored(recovered.negotiation.memory) == stored(memory)  # turn 21: the summaries stand
        await undo(recovered, conn)
        after_undo = stored(recovered.negotiation.memory)
        assert after_undo == (memory.previous, 10, "", 0)
        assert await fresh.flushed(sid, 10.0)
        written = await node(fresh, sid)
        assert (written["summary"], written["turn"], written["previous"], written["previous_turn"]) == after_undo

    async with running_mirror(neo4j_uri) as again:
        loaded = await again.load(sid, LIMITS)
        assert loaded is not None and loaded[0].turn == 19 and stored(loaded[0].memory) == after_undo


async def test_summary_writes_replayed_and_reordered_leave_the_newest(neo4j_uri: str) -> None:
    recorder = DeferredMirror()
    async with registry_on(recorder) as registry:
        actor = registry.create()
        conn = FakeConnection()
        actor.connect(conn)
        await play(actor, conn, 21)
        await undo(actor, conn)
        await undo(actor, conn)  # turn 20: the summary goes back to turn 10's
    stream = [c for c in recorder.changes if c.session_id == actor.session_id]
    assert [c.turn for c in stream if isinstance(c, SummaryWritten)] == [10, 20, 10]
    tag = f"mem-{time.time_ns()}"

    def entries(session_id: str) -> list[Any]:
        fold = SessionFold()
        return [plan(fold, c._replace(session_id=session_id), time.perf_counter()) for c in stream]

    async with Neo4jMirror(neo4j_uri) as mirror:
        await mirror.write(entries(f"{tag}-once"))
        backwards = entries(f"{tag}-reversed")
        for entry in reversed(backwards):
            await mirror.write([entry])
        await mirror.write(backwards)
        shuffled = entries(f"{tag}-shuffled")
        random.Random(3).shuffle(shuffled)
        for i in range(0, len(shuffled), 4):
            await mirror.write(shuffled[i:i + 4])
        nodes = [await node(mirror, f"{tag}-{k}") for k in ("once", "reversed", "shuffled")]
    last: Change = next(c for c in reversed(stream) if c.kind == "summary")
    assert nodes[0] == nodes[1] == nodes[2]
    assert (nodes[0]["summary"], nodes[0]["turn"], nodes[0]["version"]) == (
        actor.negotiation.memory.summary, 10, last.version)
