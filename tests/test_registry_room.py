"""MAX_SESSIONS counts every session in memory, but an ended one does not hold the room: when the
server is full, creating a session drops the ended session idle longest that nobody is connected to.

Without this, a server at scenario b's churn (about 230 sessions a second, each ending after a
quick deal) refused every new learner with 503 `capacity` after about 90 s, while nearly all of
its 20,000 places held sessions that had ended and that nobody would look at again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import httpx
import pytest

from schemas.enums import Stage
from session.actor import SessionActor
from session.mirror import MemoryMirror
from session.negotiation import Negotiation
from session.registry import CapacityError, SessionRegistry
from session.rules import Limits
from tests.fakes import FakeConnection, ScriptedBrain
from tests.servers import create, player, running_server

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def registry_of(max_sessions: int, now: list[float]) -> AsyncIterator[SessionRegistry]:
    registry = SessionRegistry(ScriptedBrain(), MemoryMirror(), max_sessions=max_sessions, idle_seconds=1800,
                               clock=lambda: now[0])
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        yield registry
        tg.cancel_scope.cancel()


def ended_at(actor: SessionActor, when: float) -> SessionActor:
    actor.negotiation.stage = Stage.CLOSURE
    actor.last_activity = when
    return actor


async def until(condition: Callable[[], bool]) -> None:
    """Poll the fakes and the registry, which have no events to wait on."""
    with anyio.fail_after(5):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.01)


async def test_a_full_server_makes_room_by_dropping_the_ended_session_idle_longest() -> None:
    now = [1000.0]
    async with registry_of(4, now) as registry:
        live = registry.create()
        newer = ended_at(registry.create(), 990.0)
        older = ended_at(registry.create(), 900.0)
        watched = ended_at(registry.create(), 800.0)  # ended first, but a spectator still has it open
        spectator = FakeConnection("spectator")
        watched.connect(spectator)
        await until(lambda: len(spectator.sent) == 1)

        first = registry.create()
        assert registry.live(older.session_id) is None, "the unwatched session idle longest goes first"
        assert {a.session_id for a in registry.actors()} == {live.session_id, newer.session_id,
                                                               watched.session_id, first.session_id}
        registry.create()
        assert registry.live(newer.session_id) is None
        with pytest.raises(CapacityError):
            registry.create()  # what is left is live, or watched
        assert registry.live(live.session_id) is live and registry.live(watched.session_id) is watched
        stats = registry.statistics()
        assert stats["live"] == 4 and stats["evicted_for_room"] == 2 and stats["evicted"] == 2
        assert spectator.closed is None


async def test_a_candidate_that_was_reconnected_meanwhile_is_kept() -> None:
    """The candidates are found once and used up over several creations: each is checked again."""
    now = [1000.0]
    async with registry_of(3, now) as registry:
        a = ended_at(registry.create(), 100.0)
        b = ended_at(registry.create(), 200.0)
        c = ended_at(registry.create(), 300.0)
        registry.create()  # the pass finds a, b and c; a goes
        assert registry.live(a.session_id) is None
        learner = FakeConnection()
        b.connect(learner)  # the learner comes back for the report
        await until(lambda: len(learner.sent) == 1)
        registry.create()
        assert registry.live(b.session_id) is b and registry.live(c.session_id) is None


async def test_a_full_server_of_live_sessions_refuses_and_looks_again_a_second_later() -> None:
    now = [1000.0]
    async with registry_of(2, now) as registry:
        first = registry.create()
        registry.create()
        with pytest.raises(CapacityError):
            registry.create()
        ended_at(first, now[0])
        with pytest.raises(CapacityError):  # a refusal burst does not walk every session each time
            registry.create()
        now[0] += 1.0
        registry.create()
        assert registry.live(first.session_id) is None and len(registry) == 2


async def test_over_http_an_ended_session_gives_its_place_to_a_new_learner() -> None:
    async with running_server(MAX_SESSIONS=2, MAX_TURNS=2) as served:
        done = await create(served)
        async with await player(served, done) as c:
            await c.recv()
            await c.turn("t1", "Namaste bhaiya")
            got = await c.turn("t2", "Tamatar kitne ka hai?")
            assert any(f["type"] == "session.ended" for f in got)
        assert served.services is not None
        registry = served.services.registry
        # Its socket closed: the ended session is a record now (swapped as its last socket left).
        await until(lambda: (a := registry.live(done["session_id"])) is None or not a.connections)

        playing = await create(served)
        newcomer = await create(served)  # 503 `capacity` before: the ended session held a place
        assert registry.live(done["session_id"]) is None
        assert {a.session_id for a in registry.actors()} == {playing["session_id"], newcomer["session_id"]}
        async with httpx.AsyncClient(base_url=served.base_url) as http:
            refused = await http.post("/api/sessions", json={})
            assert refused.status_code == 503 and refused.json()["error"]["code"] == "capacity"
            metrics = (await http.get("/metrics")).text
        assert "samvad_sessions_evicted_for_room_total 1.0" in metrics


async def test_using_up_the_candidates_does_not_hold_back_a_session_that_ends_later() -> None:
    """Only a pass that found nothing waits a second; one that found some may look again at once."""
    now = [1000.0]
    async with registry_of(2, now) as registry:
        a = ended_at(registry.create(), 100.0)
        b = registry.create()
        registry.create()  # the pass finds only a
        ended_at(b, 200.0)
        registry.create()  # the same second: a new pass finds b
        assert registry.live(a.session_id) is None and registry.live(b.session_id) is None
        assert registry.statistics()["evicted_for_room"] == 2


class OneSessionStore:
    """A loader that rebuilds one session, as the Neo4j mirror rebuilds an evicted one."""

    def __init__(self, negotiation: Negotiation) -> None:
        self.negotiation = negotiation

    async def load(self, session_id: str, limits: Limits) -> tuple[Negotiation, int] | None:
        return (self.negotiation, 3) if session_id == self.negotiation.session_id else None


async def test_a_session_rebuilt_from_the_store_takes_an_ended_sessions_place_or_comes_back_anyway() -> None:
    now = [1000.0]
    stored = Negotiation(session_id="stored", scenario_name="jaipur-bazaar", created_at=now[0])
    registry = SessionRegistry(ScriptedBrain(), MemoryMirror(), max_sessions=2, clock=lambda: now[0],
                               loader=OneSessionStore(stored))
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        live = registry.create()
        ended = ended_at(registry.create(), 500.0)
        back = await registry.get("stored")
        assert back is not None and registry.live(ended.session_id) is None and len(registry) == 2
        assert await registry.get("nowhere") is None and len(registry) == 2
        registry.remove("stored")
        registry.create()  # full again, of live sessions only
        assert await registry.get("stored") is not None, "the learner's own session is never refused"
        assert len(registry) == 3 and registry.live(live.session_id) is live
        tg.cancel_scope.cancel()
