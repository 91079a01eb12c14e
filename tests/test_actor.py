"""The session actor: ordering, fan-out, acknowledgement, de-duplication, resume and failure."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import pytest

from schemas.brain import BrainRequest, BrainResult, DeltaSink
from schemas.decision import AIDecision
from schemas.enums import Stage
from schemas.frames import ResumeFrame, SceneFrame, TranscriptFrame
from session.actor import FALLBACK_LINE, ActorLimits, SessionActor
from session.mirror import MemoryMirror
from session.negotiation import Negotiation
from session.protocols import Mirror
from session.registry import SessionRegistry
from tests.fakes import DeferredMirror, FakeConnection, ScriptedBrain, decision, hosted

pytestmark = pytest.mark.anyio


def transcript(fid: str, text: str = "hello", final: bool = True) -> TranscriptFrame:
    return TranscriptFrame(type="transcript", id=fid, text=text, final=final)


@asynccontextmanager
async def running(brain: object, mirror: Mirror | None = None, **limits: object) -> AsyncIterator[SessionActor]:
    """An actor as the server runs it: attached to a registry whose dispatcher drains it (the only
    way an actor runs; there is no loop of its own to test instead)."""
    negotiation = Negotiation(session_id="s1", scenario_name="jaipur-bazaar", created_at=0.0)
    mirror = mirror or MemoryMirror()
    actor = SessionActor(negotiation, brain, mirror, limits=ActorLimits(**limits))  # type: ignore[arg-type]
    async with hosted(actor):
        yield actor


async def until(condition: Callable[[], bool], limit: float = 3.0) -> None:
    """Poll a fake's recorded output; the fakes have no events to wait on, by design."""
    with anyio.fail_after(limit):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.005)


async def test_welcome_then_ack_then_the_turns_events_reach_every_connection_in_order() -> None:
    brain = ScriptedBrain(lambda r: decision("Namaste! 150 a kilo.", 58, Stage.INQUIRY, counter_price=150))
    async with running(brain) as actor:
        player, watcher = FakeConnection("player"), FakeConnection("spectator")
        actor.connect(player)
        actor.connect(watcher)
        actor.submit(player, transcript("t1", "tamatar kitne ka?"))
        await until(lambda: len(watcher.stream()) == 3)
        assert player.sent[0]["type"] == "welcome" and player.sent[0]["role"] == "player"
        assert watcher.sent[0]["role"] == "spectator"
        assert [f["type"] for f in player.sent[1:]] == ["ack", "reply", "mood", "stage"]
        assert player.stream() == watcher.stream()
        assert [f["seq"] for f in watcher.stream()] == [1, 2, 3]


async def test_a_re_sent_id_is_acknowledged_as_a_duplicate_and_not_applied_again() -> None:
    brain = ScriptedBrain()
    async with running(brain) as actor:
        player = FakeConnection()
        actor.connect(player)
        actor.submit(player, transcript("t1"))
        await until(lambda: len(player.of_type("reply")) == 1)
        actor.submit(player, transcript("t1"))
        await until(lambda: len(player.of_type("ack")) == 2)
        await anyio.sleep(0.05)
        assert player.of_type("ack")[1]["duplicate"] is True
        assert len(player.of_type("reply")) == 1 and len(brain.requests) == 1


async def test_transcripts_during_a_turn_wait_and_are_answered_in_order() -> None:
    brain = ScriptedBrain(delay=0.05)
    async with running(brain) as actor:
        player = FakeConnection()
        actor.connect(player)
        for i in range(1, 4):
            actor.submit(player, transcript(f"t{i}", f"line {i}"))
        await until(lambda: len(player.of_type("reply")) == 3)
        assert [r["in_reply_to"] for r in player.of_type("reply")] == ["t1", "t2", "t3"]
        assert [r.transcript for r in brain.requests] == ["line 1", "line 2", "line 3"]
        assert [r["turn"] for r in player.of_type("reply")] == [1, 2, 3]


async def test_an_idle_session_holds_no_queues_until_it_needs_them() -> None:
    mirror = DeferredMirror()
    async with running(ScriptedBrain(delay=0.05), mirror) as actor:
        mirror.subscribe_durable(lambda sid, v: actor.notify_durable(v))
        assert actor.fanout._replay is None and actor.held._frames is None and actor.fanout._unacked is None
        assert actor.replay == ()
        player = FakeConnection()
        actor.connect(player)
        actor.submit(player, transcript("t1"))
        actor.submit(player, transcript("t2"))  # waits behind t1
        await until(lambda: len(actor.held) > 0)
        await until(lambda: len(player.of_type("reply")) == 2)
        assert actor.held._frames is None and actor.held._ids is None
        assert [r["in_reply_to"] for r in player.of_type("reply")] == ["t1", "t2"]
        assert actor.fanout.unacked == 2  # not durable yet
        mirror.flush()
        await until(lambda: len(player.of_type("ack")) == 2)
        assert actor.fanout._unacked is None
        assert [e.seq for e in actor.replay] == [f["seq"] for f in player.stream()]
        assert actor.statistics()["replay_events"] == len(player.stream())


async def test_non_final_transcripts_change_nothing() -> None:
    brain = ScriptedBrain()
    async with running(brain) as actor:
        player = FakeConnection()
        actor.connect(player)
        actor.submit(player, transcript("p1", "tama", final=False))
        actor.submit(player, SceneFrame(type="scene", id="s1", object_grabbed="Tomato"))
        await until(lambda: len(player.of_type("ack")) == 1)
        assert brain.requests == [] and actor.negotiation.turn == 0 and actor.negotiation.seq == 0


async def test_acks_wait_for_durability_but_replies_do_not() -> None:
    mirror = DeferredMirror()
    async with running(ScriptedBrain(), mirror) as actor:
        mirror.subscribe_durable(lambda sid, v: actor.notify_durable(v))
        player = FakeConnection()
        actor.connect(player)
        actor.submit(player, transcript("t1"))
        await until(lambda: len(player.of_type("reply")) == 1)
        assert player.of_type("ack") == []
        assert [c.kind for c in mirror.changes] == ["learner_turn", "vendor_turn"]
        mirror.flush()
        await until(lambda: len(player.of_type("ack")) == 1)
        assert player.of_type("ack")[0]["id"] == "t1"


async def test_a_slow_spectator_is_dropped_and_the_player_carries_on() -> None:
    async with running(ScriptedBrain()) as actor:
        player, slow = FakeConnection(), FakeConnection("spectator", capacity=3)
        actor.connect(player)
        actor.connect(slow)
        for i in range(5):
            actor.submit(player, transcript(f"t{i}"))
        await until(lambda: len(player.of_type("reply")) == 5)
        assert slow.closed is not None and slow.closed[0] == 4430
        assert slow.conn_id not in actor.connections and player.conn_id in actor.connections


async def test_a_new_player_supersedes_the_old_one() -> None:
    async with running(ScriptedBrain()) as actor:
        first, second = FakeConnection(), FakeConnection()
        actor.connect(first)
        actor.connect(second)
        await until(lambda: len(second.sent) == 1)
        assert first.closed is not None and first.closed[0] == 4409
        assert actor.player is second


async def test_resume_replays_the_gap_in_order_or_sends_a_snapshot() -> None:
    brain = ScriptedBrain(lambda r: decision("ok", r.happiness_score + 1, r.stage))
    async with running(brain, replay_events=4) as actor:
        player = FakeConnection()
        actor.connect(player)
        for i in range(4):
            actor.submit(player, transcript(f"t{i}"))
        await until(lambda: len(player.of_type("reply")) == 4)
        assert actor.negotiation.seq == 8  # reply + mood per turn
        late = FakeConnection("spectator")
        actor.connect(late)
        actor.submit(late, ResumeFrame(type="resume", last_seq=5))
        await until(lambda: len(late.stream()) == 3)
        assert [f["seq"] for f in late.stream()] == [6, 7, 8]
        old = FakeConnection("spectator")
        actor.connect(old)
        actor.submit(old, ResumeFrame(type="resume", last_seq=1, id="r1"))
        await until(lambda: len(old.of_type("snapshot")) == 1)
        snap = old.of_type("snapshot")[0]
        assert snap["seq"] == 8 and snap["replayed"] is False and snap["state"]["turn"] == 4  # type: ignore[index]
        assert actor.negotiation.seq == 8  # a snapshot consumes no seq


async def test_a_resume_from_ahead_of_the_session_gets_a_snapshot_to_fall_back_to() -> None:
    """After a crash the session continues from its last stored event; a client that saw later ones resets."""
    async with running(ScriptedBrain()) as actor:
        player = FakeConnection()
        actor.connect(player)
        actor.submit(player, transcript("t1"))
        await until(lambda: len(player.of_type("reply")) == 1)
        actor.submit(player, ResumeFrame(type="resume", last_seq=5, id="r1"))
        await until(lambda: len(player.of_type("snapshot")) == 1)
        snap = player.of_type("snapshot")[0]
        assert snap["seq"] == actor.negotiation.seq == 1 and "lost" in str(snap["reason"])


class Failing:
    propose_inline = None  # the parts of a brain it does not have
    write_summary = None
    name = "failing"

    async def propose(self, request: BrainRequest, on_delta: DeltaSink | None = None) -> BrainResult:
        raise RuntimeError("boom")


class Hanging:
    propose_inline = None  # the parts of a brain it does not have
    write_summary = None
    name = "hanging"

    async def propose(self, request: BrainRequest, on_delta: DeltaSink | None = None) -> BrainResult:
        await anyio.sleep(60)
        raise AssertionError("unreachable")


@pytest.mark.parametrize("brain", [Failing(), Hanging()], ids=["raises", "hangs"])
async def test_a_failing_brain_falls_back_and_keeps_the_stage(brain: object) -> None:
    async with running(brain, brain_deadline_s=0.2) as actor:
        player = FakeConnection()
        actor.connect(player)
        actor.submit(player, transcript("t1", "tamatar kitne ka?"))
        await until(lambda: len(player.of_type("reply")) == 1)
        reply = player.of_type("reply")[0]
        assert reply["text"] == FALLBACK_LINE and reply["fallback"] is True
        assert reply["negotiation_state"] == "GREETING" and actor.negotiation.stage is Stage.GREETING


async def test_deltas_stream_before_the_reply_and_are_withdrawn_when_the_reply_differs() -> None:
    class Changing(ScriptedBrain):
        async def propose(self, request: BrainRequest, on_delta: DeltaSink | None = None) -> BrainResult:
            assert on_delta is not None
            await on_delta.delta("Arre? ")
            await on_delta.delta("Never!")
            return BrainResult(decision=decision("Fine, ninety.", 50, Stage.GREETING), streamed=True)

    def words(request: BrainRequest) -> AIDecision:  # no number: each clause goes out once whole
        return decision("Namaste ji, come, look, everything is fresh today.", 50, Stage.GREETING)

    async with running(ScriptedBrain(words, stream=True)) as actor:
        player = FakeConnection()
        actor.connect(player)
        actor.submit(player, transcript("t1"))
        await until(lambda: len(player.of_type("reply")) == 1)
        kinds = [f["type"] for f in player.sent if f["type"] in ("reply.delta", "reply")]
        assert kinds[-1] == "reply" and kinds.count("reply.delta") >= 2
        text = "".join(str(f["text"]) for f in player.of_type("reply.delta"))
        assert text.strip() == player.of_type("reply")[0]["text"]
        assert player.of_type("reply.withdrawn") == []
    async with running(Changing()) as actor:
        player = FakeConnection()
        actor.connect(player)
        actor.submit(player, transcript("t1"))
        await until(lambda: len(player.of_type("reply")) == 1)
        kinds = [f["type"] for f in player.sent if f["type"].startswith("reply")]
        assert kinds == ["reply.delta", "reply.withdrawn", "reply"]
        assert [f["text"] for f in player.of_type("reply.delta")] == ["Arre?"]
        assert player.of_type("reply")[0]["withdrawn_stream"] is True


async def test_after_the_end_transcripts_get_a_closing_reply_without_the_brain() -> None:
    script: Callable[[BrainRequest], AIDecision] = lambda r: decision(  # noqa: E731
        "bye", 50, {Stage.GREETING: Stage.INQUIRY, Stage.INQUIRY: Stage.WALKAWAY}.get(r.stage, Stage.CLOSURE))
    brain = ScriptedBrain(script)
    async with running(brain) as actor:
        player = FakeConnection()
        actor.connect(player)
        for i in range(3):
            actor.submit(player, transcript(f"t{i}"))
        await until(lambda: len(player.of_type("session.ended")) == 1)
        actor.submit(player, transcript("late"))
        await until(lambda: len(player.of_type("reply")) == 4)
        closing = player.of_type("reply")[-1]
        assert closing["is_terminal"] is True and closing["in_reply_to"] == "late"
        assert len(brain.requests) == 3
        actor.submit(player, SceneFrame(type="scene", id="s9", object_grabbed="Apple"))
        await until(lambda: len(player.of_type("error")) == 1)
        assert player.of_type("error")[0]["code"] == "session_ended"


async def test_a_full_inbox_refuses_frames() -> None:
    async with running(ScriptedBrain(delay=0.5), inbox_frames=2) as actor:
        player = FakeConnection()
        actor.connect(player)
        results = [actor.submit(player, transcript(f"t{i}")) for i in range(4)]
        assert results == [True, True, False, False]


async def test_frames_held_behind_a_turn_count_against_the_inbox() -> None:
    # Spread over loop passes, so that each is taken before the next arrives: only what is held
    # (the turn in flight and the frames waiting behind it) bounds them, not the inbox alone.
    async with running(ScriptedBrain(delay=1.0), inbox_frames=3) as actor:
        player = FakeConnection()
        actor.connect(player)
        results = []
        for i in range(5):
            results.append(actor.submit(player, transcript(f"t{i}")))
            await anyio.sleep(0.02)
        assert results == [True, True, True, False, False]
        assert actor.statistics()["waiting_turns"] == 2 and actor.statistics()["thinking"]
        await until(lambda: len(player.of_type("reply")) == 3, limit=10)
        assert [r["in_reply_to"] for r in player.of_type("reply")] == ["t0", "t1", "t2"]
        assert actor.submit(player, transcript("t5"))  # room again once they are answered


async def test_a_dispatched_actor_applies_a_frame_with_nothing_before_it_at_once() -> None:
    async with running(ScriptedBrain(delay=0.5)) as actor:
        player = FakeConnection()
        actor.connect(player)
        await until(lambda: len(player.sent) >= 1)  # the welcome: the inbox is empty again
        assert actor.submit(player, transcript("t0"))
        # Dispatched, the turn has begun before `submit` returns; in its own task, the actor
        # takes the frame on its next pass.
        assert actor.statistics()["thinking"] is True
        await until(lambda: actor.statistics()["thinking"])


async def test_the_registry_evicts_idle_sessions_but_never_closes_an_open_socket() -> None:
    """An idle session nobody watches goes; one with a socket open stays, its socket untouched, however
    long it has been idle, and goes at the next sweep once that socket has left."""
    now = [1000.0]
    registry = SessionRegistry(ScriptedBrain(), MemoryMirror(), idle_seconds=60, clock=lambda: now[0])
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        idle = registry.create()
        watched = registry.create()
        watcher = FakeConnection("spectator")
        watched.connect(watcher)
        await until(lambda: len(watcher.sent) == 1)
        now[0] += 61
        assert registry.evict_idle() == 1
        assert registry.live(idle.session_id) is None and registry.live(watched.session_id) is watched
        assert watcher.closed is None and watched.connections
        watched.disconnect(watcher)
        await until(lambda: not watched.connections)
        now[0] += 61
        assert registry.evict_idle() == 1
        assert registry.live(watched.session_id) is None
        assert watcher.closed is None  # it had left before: nothing was closed under it
        tg.cancel_scope.cancel()


async def test_a_full_mirror_buffer_refuses_new_frames_without_applying_them() -> None:
    mirror = DeferredMirror()
    brain = ScriptedBrain()
    async with running(brain, mirror) as actor:
        player = FakeConnection()
        actor.connect(player)
        mirror.room = 0
        actor.submit(player, transcript("t1"))
        await until(lambda: len(player.of_type("error")) == 1)
        assert player.of_type("error")[0]["code"] == "unavailable" and player.of_type("error")[0]["id"] == "t1"
        assert brain.requests == [] and actor.negotiation.turn == 0 and not actor.negotiation.seen("t1")
        mirror.room = 100
        actor.submit(player, transcript("t1"))
        await until(lambda: len(player.of_type("reply")) == 1)


async def test_a_queued_transcripts_ack_follows_the_player_to_its_new_socket() -> None:
    async with running(ScriptedBrain(delay=0.1)) as actor:
        old = FakeConnection()
        actor.connect(old)
        actor.submit(old, transcript("t1"))
        actor.submit(old, transcript("t2"))  # waits behind t1
        await until(lambda: len(old.of_type("ack")) == 1)
        actor.disconnect(old)
        new = FakeConnection()
        actor.connect(new)
        actor.submit(new, transcript("t2"))  # the client re-sends what it never saw acknowledged
        await until(lambda: len(new.of_type("reply")) == 2)
        await until(lambda: [a["id"] for a in new.of_type("ack")] == ["t2"])
        assert [r["in_reply_to"] for r in new.of_type("reply")] == ["t1", "t2"]


# ---------------------------------------------------------------------------- the registry's dispatcher


def tasks() -> int:
    import asyncio

    return len(asyncio.all_tasks())


async def test_idle_sessions_hold_no_task_and_a_woken_one_lets_go_of_its_work() -> None:
    registry = SessionRegistry(ScriptedBrain(), MemoryMirror())
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        before = tasks()
        actors = [registry.create() for _ in range(20)]
        assert tasks() == before
        player = FakeConnection()
        actors[3].connect(player)
        actors[3].submit(player, transcript("t1"))
        await until(lambda: len(player.of_type("reply")) == 1)
        await until(lambda: tasks() == before)  # the brain call's task is done, nothing else
        assert not actors[3]._scheduled and actors[3].running
        tg.cancel_scope.cancel()
    assert not any(a.running for a in actors)


async def test_sessions_drained_by_one_dispatcher_each_keep_their_own_order() -> None:
    registry = SessionRegistry(ScriptedBrain(delay=0.01), MemoryMirror())
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        actors = [registry.create() for _ in range(3)]
        players = [FakeConnection() for _ in actors]
        for actor, player in zip(actors, players, strict=True):
            actor.connect(player)
        for i in range(4):
            for actor, player in zip(actors, players, strict=True):
                assert actor.submit(player, transcript(f"{actor.session_id}-{i}", f"line {i}"))
        for actor, player in zip(actors, players, strict=True):
            await until(lambda p=player: len(p.of_type("reply")) == 4)  # type: ignore[misc]
            assert [r["in_reply_to"] for r in player.of_type("reply")] == [
                f"{actor.session_id}-{i}" for i in range(4)]
            assert [f["seq"] for f in player.stream()] == sorted(f["seq"] for f in player.stream())
        tg.cancel_scope.cancel()


async def test_stopping_an_attached_actor_cancels_its_brain_call_and_no_other() -> None:
    brain = ScriptedBrain(delay=30)
    registry = SessionRegistry(brain, MemoryMirror())
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        doomed, other = registry.create(), registry.create()
        for actor in (doomed, other):
            p = FakeConnection()
            actor.connect(p)
            actor.submit(p, transcript("t1"))
        await until(lambda: len(brain.requests) == 2)
        before = tasks()
        resolved: list[object] = []
        doomed.wait_turn("t1", resolved.append)
        doomed.stop()
        await until(lambda: tasks() == before - 1)
        assert resolved == [None] and not doomed.running
        assert other.running and other.machine.thinking is not None
        tg.cancel_scope.cancel()


async def test_a_registry_run_again_answers_the_turn_its_last_run_left_pending() -> None:
    brain = ScriptedBrain(delay=0.2)
    registry = SessionRegistry(brain, MemoryMirror())
    player = FakeConnection()
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: registry.run(keep_actors=True, task_status=task_status))
        actor = registry.create()
        actor.connect(player)
        actor.submit(player, transcript("t1"))
        await until(lambda: len(brain.requests) == 1)
        tg.cancel_scope.cancel()  # mid-turn
    assert not actor.running and player.of_type("reply") == []
    actor.submit(player, transcript("t2"))  # posted while no dispatcher runs: kept
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: registry.run(keep_actors=True, task_status=task_status))
        await until(lambda: len(player.of_type("reply")) == 2)
        assert [r["in_reply_to"] for r in player.of_type("reply")] == ["t1", "t2"]
        tg.cancel_scope.cancel()


async def test_without_a_store_a_live_session_stays_as_long_as_a_token_can_reach_it() -> None:
    """Welcome back needs the session after two hours: without a loader a live session is kept for
    `live_idle_seconds` (the token's lifetime), an ended one only for `idle_seconds`."""
    now = [1000.0]
    registry = SessionRegistry(ScriptedBrain(), MemoryMirror(), idle_seconds=60, live_idle_seconds=4 * 3600,
                               clock=lambda: now[0])
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        live = registry.create()
        ended = registry.create()
        ended.negotiation.stage = Stage.CLOSURE
        now[0] += 2 * 3600 + 1
        assert registry.evict_idle() == 1
        assert registry.live(live.session_id) is live and registry.live(ended.session_id) is None
        now[0] += 2 * 3600
        assert registry.evict_idle() == 1 and registry.live(live.session_id) is None
        tg.cancel_scope.cancel()

