"""An ended session nobody has open is kept as a record of bytes after a grace (issue #33): the
registry swaps its actor for a few fields and the negotiation serialised (session/ended.py), and
rebuilds an actor from it for a late reconnect or a report. What must not change: the report, the
welcome's final state, the room it holds, and that erasure, the metrics and the lobby find it.
"""

from __future__ import annotations

import gc
import zlib
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from schemas.enums import LanguageCode, Level, Stage
from schemas.frames import CommandFrame, ResumeFrame, TranscriptFrame
from server.spectate import Lobby
from session.actor import SessionActor
from session.changes import SessionStarted
from session.ended import EndedSession, from_bytes, to_bytes
from session.ended import _pickled as pickled
from session.fanout import Replay, pack_replay, unpack_replay
from session.mirror import MemoryMirror
from session.negotiation import Negotiation
from session.registry import RECORDS_SWEEP_S, SessionRegistry
from session.report import learner_report
from session.rules import Limits
from tests.fakes import DeferredMirror, FakeConnection, ScriptedBrain
from tests.servers import create, player, running_server

pytestmark = pytest.mark.anyio
ADMIN = "admin-key-for-compact-tests-0123456789"


async def until(condition: Callable[[], bool]) -> None:
    """Poll the fakes, which have no events to wait on."""
    with anyio.fail_after(5):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.01)


async def play(actor: SessionActor, *, end: bool, ring: list[tuple[int | None, str]] | None = None) -> None:
    """A turn, then `stop` when `end`; the player leaves (`ring`: the events kept for replay then)."""
    player_conn = FakeConnection()
    actor.connect(player_conn)
    actor.submit(player_conn, TranscriptFrame(type="transcript", id="t1", text="tamatar kitne ka?", final=True))
    await until(lambda: len(player_conn.of_type("reply")) == 1)
    if end:
        actor.submit(player_conn, CommandFrame(type="command", id="stop", name="stop"))
        await until(lambda: actor.negotiation.is_terminal and not actor.busy)
    if ring is not None:
        ring.extend(event.kept() for event in actor.fanout.replay)
    actor.disconnect(player_conn)
    await until(lambda: not actor.connections)


def registry_at(now: list[float], **kw: Any) -> SessionRegistry:
    return SessionRegistry(ScriptedBrain(), MemoryMirror(), idle_seconds=1800, ended_grace_seconds=60,
                           clock=lambda: now[0], **kw)


async def test_an_ended_session_left_alone_becomes_a_record_and_a_late_reconnect_gets_its_final_state() -> None:
    now = [1000.0]
    registry = registry_at(now)
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        live, ended = registry.create(learner_id="asha"), registry.create(learner_id="asha")
        await play(live, end=False)
        await play(ended, end=True)
        final, report = ended.negotiation.snapshot(), learner_report(ended.negotiation, None)
        sid, seq = ended.session_id, ended.negotiation.seq

        now[0] = ended.last_activity + 30  # within the grace: a reconnect could still replay
        registry.evict_idle()
        assert registry.live(sid) is None and registry.statistics()["replays_in_grace"] == 1

        now[0] = max(ended.last_activity, live.last_activity) + 61
        assert registry.evict_idle() == 0  # kept for its report, not evicted
        assert registry.statistics()["replays_in_grace"] == 0  # its grace is over: the ring has gone
        assert registry.live(sid) is None and sid in registry and len(registry) == 2
        assert registry.live(live.session_id) is live and live.fanout.replay_len > 0  # a live one stays as it is
        [record] = registry.ended()
        assert record.session_id == sid and record.stage is Stage.CLOSURE and record.learner_id == "asha"
        assert registry.statistics()["ended_records"] == 1 and registry.statistics()["live"] == 2
        gc.collect()  # the pass that finds the packed record holds atoms only, and stops tracking it
        assert [gc.is_tracked(packed) for packed in registry._ended.values()] == [False]

        back = await registry.get(sid)
        assert back is not None and back is not ended and registry.live(sid) is back and not registry.ended()
        assert back.negotiation.snapshot() == final and learner_report(back.negotiation, None) == report
        assert back.fanout.replay_len == 0  # rebuilt without its replay ring, as after a restart

        late = FakeConnection()
        back.connect(late)
        back.submit(late, ResumeFrame(type="resume", last_seq=seq - 1, id="r1"))
        await until(lambda: len(late.of_type("snapshot")) == 1)
        welcome, snapshot = late.sent[0], late.of_type("snapshot")[0]
        assert welcome["type"] == "welcome" and welcome["seq"] == seq
        assert welcome["state"] == final.model_dump(mode="json")
        assert snapshot["seq"] == seq and snapshot["replayed"] is False and snapshot["state"] == welcome["state"]
        tg.cancel_scope.cancel()


async def test_an_ended_session_is_a_record_at_once_and_a_reconnect_in_its_grace_still_replays() -> None:
    """An ended session is swapped as its last socket leaves, not after its grace, and the record
    keeps the replay ring until the grace is over, so a resume then replays the events the client
    missed, as the actor would have (docs/protocol.md); after the grace, a snapshot."""
    now = [1000.0]
    registry = registry_at(now)
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        ended, ring = registry.create(), list[tuple[int | None, str]]()
        await play(ended, end=True, ring=ring)
        sid = ended.session_id
        assert len(ring) >= 2 and ring[-1][0] == ended.negotiation.seq
        assert registry.live(sid) is None and registry.record(sid) is not None  # no look was needed
        assert registry.statistics()["ended_actors"] == 0 and registry.swap_ended() == 0
        packed = registry._graced[sid][1]  # the ring is kept deflated: a fifth to a third of its strings
        assert len(packed[-1]) * 2 < sum(len(encoded) for _, encoded in ring)

        back = await registry.get(sid)  # a reconnect within the grace
        assert back is not None and back is not ended and [event.kept() for event in back.fanout.replay] == ring
        late = FakeConnection()
        back.connect(late)
        back.submit(late, ResumeFrame(type="resume", last_seq=ring[-3][0] or 0, id="r1"))
        await until(lambda: len(late.of_type("ack")) == 1)
        assert not late.of_type("snapshot")  # the events it missed, replayed
        assert [frame.get("seq") for frame in late.sent[1:-1]] == [seq for seq, _ in ring[-2:]]
        back.disconnect(late)
        await until(lambda: not back.connections)

        assert registry.swap_ended() == 0  # `get` gave it out: kept through its grace
        now[0] = back.last_activity + 60  # nobody has had it open for the grace: swapped, without a ring
        assert registry.swap_ended() == 1 and registry.statistics()["replays_in_grace"] == 0
        again = await registry.get(sid)
        assert again is not None and again.fanout.replay_len == 0
        tg.cancel_scope.cancel()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.none() | st.integers(0, 2**40), st.text()), max_size=12), st.integers(1, 16))
def test_a_packed_replay_ring_unpacks_to_the_same_ring(events: list[tuple[int | None, str]], size: int) -> None:
    ring: Replay = deque(events, maxlen=size)
    back = unpack_replay(pack_replay(ring))
    assert back == ring and back.maxlen == size


async def test_an_ack_owed_keeps_the_actor_through_its_grace() -> None:
    """An ack waiting on the mirror goes to the player's new socket if they come back: only the actor
    can send it, so an actor owing one is not swapped before its grace is over."""
    now = [1000.0]
    mirror = DeferredMirror()
    registry = SessionRegistry(ScriptedBrain(), mirror, idle_seconds=1800, ended_grace_seconds=60,
                               clock=lambda: now[0])
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        actor = registry.create()
        conn = FakeConnection()
        actor.connect(conn)
        actor.submit(conn, CommandFrame(type="command", id="stop", name="stop"))
        await until(lambda: actor.negotiation.is_terminal and not actor.busy)
        actor.disconnect(conn)
        await until(lambda: not actor.connections)
        assert actor.fanout.unacked == 1
        now[0] += 1
        assert registry.swap_ended() == 0 and registry.live(actor.session_id) is actor
        back = FakeConnection()
        actor.connect(back)
        mirror.flush()
        await until(lambda: len(back.of_type("ack")) == 1)
        assert back.of_type("ack")[0]["id"] == "stop"
        actor.disconnect(back)
        await until(lambda: registry.live(actor.session_id) is None)  # nothing owed: swapped as it left
        now[0] += 60
        assert registry.swap_ended() == 0 and registry.statistics()["replays_in_grace"] == 0
        tg.cancel_scope.cancel()


async def test_a_session_someone_is_about_to_open_is_not_swapped() -> None:
    """A `Connect` posted and not yet applied, or a `get` just answered, keeps the actor: the caller
    would otherwise connect to an actor the registry had let go."""
    now = [1000.0]
    registry = registry_at(now)
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        first = registry.create()
        await play(first, end=True)  # swapped as its socket left
        ended = await registry.get(first.session_id)  # rebuilt from its record
        assert ended is not None and ended is not first
        now[0] = ended.last_activity + 61
        ended.connect(FakeConnection())  # posted; the dispatcher applies it after this step
        registry.evict_idle()
        assert registry.live(ended.session_id) is ended
        await until(lambda: bool(ended.connections))

        other = registry.create()
        await play(other, end=True)
        revived = await registry.get(other.session_id)  # a socket or a report is on its way
        assert revived is not None and await registry.get(other.session_id) is revived
        now[0] = revived.last_activity + 30  # within the grace, where one nobody has open would go
        assert registry.swap_ended() == 0 and registry.evict_idle() == 0 and registry.live(other.session_id) is revived
        now[0] += 61
        assert await registry.get(other.session_id) is revived  # asked again: activity again
        registry.evict_idle()
        assert registry.live(other.session_id) is revived
        now[0] += 61
        registry.evict_idle()
        assert registry.live(other.session_id) is None and other.session_id in registry

        third = registry.create()  # given out while its player is still connected
        conn = FakeConnection()
        third.connect(conn)
        third.submit(conn, CommandFrame(type="command", id="stop", name="stop"))
        await until(lambda: third.negotiation.is_terminal and not third.busy)
        assert await registry.get(third.session_id) is third
        third.disconnect(conn)
        await until(lambda: not third.connections)
        assert registry.swap_ended() == 0 and registry.live(third.session_id) is third
        tg.cancel_scope.cancel()


async def test_records_hold_their_place_make_room_first_and_go_when_idle() -> None:
    now = [1000.0]
    registry = registry_at(now, max_sessions=3)
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        older, newer = registry.create(), registry.create()
        for actor in (older, newer):
            await play(actor, end=True)
            now[0] += 5
        playing = registry.create()
        now[0] += 61
        registry.evict_idle()
        assert {r.session_id for r in registry.ended()} == {older.session_id, newer.session_id}
        assert len(registry) == 3  # records count against MAX_SESSIONS

        registry.create()  # room made by the record idle longest
        assert older.session_id not in registry and newer.session_id in registry
        assert registry.statistics()["evicted_for_room"] == 1
        assert registry.live(playing.session_id) is playing

        now[0] = newer.last_activity + 1800
        assert registry.evict_idle() == 1  # an idle record goes like an idle ended actor
        assert newer.session_id not in registry and await registry.get(newer.session_id) is None
        assert registry.remove(newer.session_id) is False
        tg.cancel_scope.cancel()


async def test_idle_records_are_looked_for_every_records_sweep_not_at_every_sweep() -> None:
    """A short grace sweeps every few seconds; the walk over every record is made far less often."""
    now = [1000.0]
    registry = SessionRegistry(ScriptedBrain(), MemoryMirror(), idle_seconds=20, ended_grace_seconds=10,
                               clock=lambda: now[0])
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        ended = registry.create()
        await play(ended, end=True)
        now[0] = ended.last_activity + 11
        assert registry.evict_idle() == 0  # swapped for its record; the records looked for now
        sid = ended.session_id
        assert registry.record(sid) is not None
        now[0] = ended.last_activity + 20  # idle, but the records were looked for 9 s ago
        assert registry.evict_idle() == 0 and sid in registry
        now[0] += RECORDS_SWEEP_S
        assert registry.evict_idle() == 1 and sid not in registry
        tg.cancel_scope.cancel()


async def test_the_registrys_views_count_records_with_the_actors() -> None:
    now = [1000.0]
    registry = registry_at(now)
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        ravi_live, ravi_ended, asha_ended = (registry.create(learner_id=n) for n in ("ravi", "ravi", "asha"))
        await play(ravi_ended, end=True)
        await play(asha_ended, end=True)
        before = registry.by_stage()
        now[0] += 61
        registry.evict_idle()
        assert len(registry.ended()) == 2 and registry.actors() == [ravi_live]
        assert registry.by_stage() == before == {Stage.GREETING: 1, Stage.CLOSURE: 2}
        assert sorted(registry.of_learner("ravi")) == sorted([ravi_live.session_id, ravi_ended.session_id])
        record = registry.record(asha_ended.session_id)
        assert record is not None and record.learner_id == "asha" and record.is_terminal
        assert registry.record(ravi_live.session_id) is None  # it has an actor
        assert registry.remove(ravi_ended.session_id) is True and ravi_ended.session_id not in registry
        tg.cancel_scope.cancel()


def test_a_record_is_only_of_an_ended_session_and_the_bytes_keep_no_unsent_change() -> None:
    started = SessionStarted(session_id="s1", version=1, at=5.0, scenario="jaipur-bazaar", learner_id=None,
                             input_language=LanguageCode.EN_IN, target_language=LanguageCode.EN_IN,
                             level=Level.INTERMEDIATE, stage=Stage.GREETING, happiness=50)
    negotiation = Negotiation.started(started, Limits())
    with pytest.raises(ValueError, match="only an ended session"):
        EndedSession.of(negotiation, 5.0)
    negotiation.outbox.append(started)
    with pytest.raises(ValueError, match="handed to the mirror"):
        to_bytes(negotiation)
    negotiation.outbox.clear()
    limits = Limits(max_turns=7)
    rebuilt = from_bytes(to_bytes(negotiation), limits)
    assert rebuilt == negotiation and rebuilt.limits is limits


async def test_a_packed_record_is_untracked_by_the_collector_and_unpacks_to_the_same_record() -> None:
    now = [1000.0]
    registry = registry_at(now)
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        ended = registry.create(learner_id="asha")
        await play(ended, end=True)
        record = EndedSession.of(ended.negotiation, ended.last_activity)
        tg.cancel_scope.cancel()
    assert gc.is_tracked(record)  # a slotted instance always is
    packed = record.pack()
    gc.collect()
    assert not gc.is_tracked(packed)
    back = EndedSession.unpack(packed)
    assert back == record and back.stage is Stage.CLOSURE and back.outcome is record.outcome is not None
    assert back.negotiation(Limits()) == ended.negotiation
    # Deflated against a started negotiation's pickle: what zlib alone would keep of what every
    # record repeats (module and class names, the fields a session starts with) is not kept.
    alone = zlib.compress(pickled(ended.negotiation), 9)
    assert len(record.state) < 0.85 * len(alone)


async def test_over_http_a_swapped_session_gives_the_same_report_lobby_row_and_metrics_and_erasure_finds_it() -> None:
    async with running_server(ADMIN_KEY=ADMIN, METRICS_KEY=ADMIN) as served, \
            httpx.AsyncClient(base_url=served.base_url) as http:
        assert served.services is not None
        registry = served.services.registry
        created = await create(served, learner_id="meera")
        sid, bearer = created["session_id"], {"authorization": f"Bearer {created['player_token']}"}
        admin = {"authorization": f"Bearer {ADMIN}"}
        async with await player(served, created) as c:
            await c.until("welcome")
            await c.turn("t1", "Namaste bhaiya, tamatar kitne ka hai?")
            await c.send({"type": "command", "id": "stop", "name": "stop"})
            ended = await c.until("session.ended")
        await until(lambda: registry.live(sid) is None and sid in registry)  # swapped as its socket left
        assert await registry.get(sid) is not None  # rebuilt, and given out: an actor through its grace

        async def seen() -> tuple[Any, ...]:
            lobby = (await http.get("/api/lobby", headers=admin)).json()["sessions"]
            metrics = (await http.get("/metrics", headers=admin)).text
            stages = {s.labels["stage"]: s.value for f in text_string_to_metric_families(metrics)
                      for s in f.samples if s.name == "samvad_sessions"}
            return lobby, stages

        lobby, stages = await seen()
        watching = Lobby(served.services)  # a lobby socket's view: the update it sends for a changed session
        update = watching.update_message([sid])
        state = (await http.get(f"/api/sessions/{sid}", headers=bearer)).json()
        report = (await http.get(f"/api/sessions/{sid}/report", headers=bearer)).json()
        registry.ended_grace_seconds = 0.0
        registry.evict_idle()
        assert registry.live(sid) is None and sid in registry

        assert await seen() == (lobby, stages)  # neither rebuilds the session
        again = watching.update_message([sid])
        assert again["sessions"] == update["sessions"] and again["removed"] == [] and len(update["sessions"]) == 1
        assert registry.live(sid) is None
        assert ended["outcome"] == "stopped" and state["is_terminal"]
        assert [row["session_id"] for row in lobby] == [sid] and stages == {state["stage"]: 1.0}
        assert (await http.get(f"/api/sessions/{sid}/report", headers=bearer)).json() == report
        assert registry.live(sid) is not None  # the report rebuilt it

        registry.evict_idle()
        async with await player(served, created) as late:
            welcome = await late.until("welcome")
            assert welcome["state"] == state and welcome["seq"] == state["seq"]
        await until(lambda: registry.live(sid) is None and sid in registry)  # no grace left: swapped as it left
        erased = await http.delete("/api/learners/meera", headers=admin)
        assert erased.status_code == 200, erased.text
        assert sid not in registry
        assert (await http.get(f"/api/sessions/{sid}/report", headers=bearer)).status_code == 404


async def test_ended_actors_are_swapped_four_times_a_grace_and_only_they_are_walked_that_often() -> None:
    """An ended actor nobody has open is swapped as its last socket leaves, and its ring goes at most
    a quarter grace after its grace, not up to a second sweep period: at churn the sessions waiting
    are most of what a server holds for its ended sessions (issue #33, docs/performance.md). The
    frequent look walks the ended actors only."""
    now = [1000.0]
    registry = registry_at(now, live_idle_seconds=5)
    assert registry.swap_seconds == 15.0  # a quarter of the registry's 60 s grace
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        ended, idle = registry.create(), registry.create()
        await play(ended, end=True)
        await play(idle, end=False)
        assert registry.live(ended.session_id) is None  # swapped as its socket left
        assert registry.record(ended.session_id) is not None and registry.statistics()["replays_in_grace"] == 1
        now[0] += 60
        assert registry.swap_ended() == 0 and registry.statistics()["replays_in_grace"] == 0  # its grace is over
        assert registry.live(idle.session_id) is idle  # idle past its time, but left to `evict_idle`
        assert registry.evict_idle() == 1 and registry.live(idle.session_id) is None
        assert registry.swap_ended() == 0
        tg.cancel_scope.cancel()
    async with running_server(SESSION_ENDED_GRACE_SECONDS=2.0) as served:
        assert served.services is not None
        assert (served.services.registry.swap_seconds, served.services.registry.sweep_seconds) == (0.5, 2.0)
