"""Silence, welcome back and barge-in over a real socket (docs/coaching.md, docs/protocol.md), with
the timers shortened by settings; and the shared timer heap on its own."""

from __future__ import annotations

import gc
import math
import time
import weakref

import anyio
import pytest

from session.playback import price_heard
from session.timers import COMPACT_AT, SilenceTimers
from tests.servers import checked, create, player, running_server, state

pytestmark = pytest.mark.anyio

FAST = {"SILENCE_TIMEOUT_MS": 300, "SILENCE_EXTENDED_TIMEOUT_MS": 900}


async def test_silences_get_nudges_then_the_third_in_a_row_ends_the_session() -> None:
    async with running_server(**FAST) as served:
        created = await create(served)
        sid, token = created["session_id"], created["player_token"]
        async with await player(served, created) as c:
            await c.recv()
            await c.turn("t1", "Namaste bhaiya, tamatar kitne ka hai?")
            before = await state(served, sid, token)
            first = await c.until("reply", wait=3)
            assert first["mark"] == "nudge" and first["turn"] == 1 and first["in_reply_to"] is None
            # A learner turn starts the count again: two more nudges are needed, then the end.
            await c.turn("t2", "Bahut mehenga hai bhaiya, 40 mein de do?")
            nudges = [await c.until("reply", wait=3, mark="nudge") for _ in range(2)]
            assert nudges[0]["text"] and all(n["negotiation_state"] == "HAGGLING" for n in nudges)
            stage = await c.until("stage", wait=3)
            ended = await c.until("session.ended")
            report = await c.until("session.report")
        assert stage["to"] == "CLOSURE" and stage["forced"] is True and ended["outcome"] == "timed_out"
        counts = report["report"]["coaching"]
        assert counts["timeouts"] == 4 and report["report"]["outcome"] == "timed_out"
        after = await state(served, sid, token)
        assert after["turn"] == before["turn"] + 1 == 2  # nudges are not turns
        assert checked(c.seen).ok, checked(c.seen).violations


async def test_no_timer_without_a_player_and_a_partial_transcript_extends_it() -> None:
    async with running_server(**FAST) as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.recv()
            await anyio.sleep(0.15)
            await c.send({"type": "transcript", "id": "p1", "text": "Namaste bha", "final": False})
            quiet = await c.quiet(0.5)  # past the 300 ms timer, within the extended 900 ms
            assert not [f for f in quiet if f["type"] == "reply"]
            assert (await c.until("reply", wait=2))["mark"] == "nudge"
        async with await player(served, created):
            pass
        await anyio.sleep(0.6)  # nobody connected: no nudges pile up
        async with await player(served, created) as again:
            welcome = await again.recv()
            seen = await again.quiet(0.2)
        assert welcome["seq"] == 1 and not [f for f in seen if f["type"] == "reply"]


async def test_a_silence_frame_is_a_timeout_and_a_beginner_is_offered_a_hint() -> None:
    async with running_server() as served:
        created = await create(served, level="beginner")
        async with await player(served, created) as c:
            await c.recv()
            await c.send({"type": "silence", "id": "s1"})
            nudge = await c.until("reply")
            hint = await c.until("hint")
            assert any(f["type"] == "ack" and f["id"] == "s1" for f in c.seen)
            assert nudge["mark"] == "nudge" and hint["offered"] is True and hint["level"] == 0
            await c.send({"type": "silence", "id": "s1"})
            assert (await c.until("ack", id="s1"))["duplicate"] is True
            await c.send({"type": "command", "id": "h", "name": "hint"})
            asked = await c.until("hint", in_reply_to="h")
            assert asked["level"] == 0 and asked["offered"] is False  # an offered hint is not the learner's


async def test_welcome_back_after_a_long_absence_recaps_the_haggle() -> None:
    async with running_server(SESSION_RESTART_SECONDS=0.4) as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.recv()
            assert not [f for f in await c.quiet(0.5) if f["type"] == "reply"]  # a new session: no recap
            said = await c.turn("t1", "Namaste bhaiya, tamatar kitne ka hai?")
        quote = said[0]["counter_price"]
        await anyio.sleep(0.6)
        async with await player(served, created) as back:
            welcome = await back.recv()
            recap = await back.until("reply")
        assert recap["mark"] == "welcome_back" and str(quote) in recap["text"] and recap["seq"] == welcome["seq"] + 1
        assert recap["counter_price"] == quote and recap["turn"] == 1


async def test_barge_in_unbinds_a_price_the_learner_did_not_hear() -> None:
    async with running_server() as served:
        created = await create(served)
        sid, token = created["session_id"], created["player_token"]
        async with await player(served, created) as c:
            await c.recv()
            said = await c.turn("t1", "Namaste bhaiya, tamatar kitne ka hai?")
            reply = said[0]
            quote = reply["counter_price"]
            where = reply["text"].index(str(quote))
            assert quote is not None and where > 0
            await c.send({"type": "playback", "id": "p0", "turn": 9, "heard_chars": 1, "interrupted": True})
            assert (await c.until("error", id="p0"))["code"] == "unknown_turn"
            await c.send({"type": "playback", "id": "p1", "turn": 1, "heard_chars": len(reply["text"]) + 1,
                          "interrupted": True})
            assert (await c.until("error", id="p1"))["code"] == "heard_out_of_range"
            assert (await state(served, sid, token))["vendor_quote"] == quote
            await c.send({"type": "playback", "id": "p2", "turn": 1, "heard_chars": where, "interrupted": True})
            heard = await c.until("heard", in_reply_to="p2")
            assert heard["quote_unbound"] is True and heard["vendor_quote"] is None
            assert heard["heard_text"] == reply["text"][:where]
            snapshot = await state(served, sid, token)
            assert snapshot["vendor_quote"] is None and snapshot["first_quote"] is None
            assert snapshot["happiness_score"] == reply["happiness_score"]  # the learner's own effect stands
        assert checked(c.seen).ok, checked(c.seen).violations


async def test_a_price_heard_in_full_binds() -> None:
    async with running_server() as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.recv()
            reply = (await c.turn("t1", "Namaste bhaiya, tamatar kitne ka hai?"))[0]
            end = reply["text"].index(str(reply["counter_price"])) + len(str(reply["counter_price"]))
            await c.send({"type": "playback", "id": "p", "turn": 1, "heard_chars": end, "interrupted": True})
            heard = await c.until("heard")
            assert heard["quote_unbound"] is False and heard["vendor_quote"] == reply["counter_price"]


def test_price_heard_needs_every_digit() -> None:
    text = "For you, 1,200 yen, and 120 for the small one."
    assert price_heard(text, 1200, text.index("yen"))
    assert not price_heard(text, 1200, text.index(",200"))
    assert price_heard(text, 120, text.index(" for the"))
    assert not price_heard(text, 120, text.index("120"))
    assert not price_heard("Only fifty, ji.", 50, 5) and price_heard("Only fifty, ji.", 50, 15)


class _Client:
    def __init__(self) -> None:
        self._silence_due: float | None = None
        self._silence_queued: float | None = None
        self.fired = 0
        self.rang: anyio.Event | None = None

    def silence_due(self) -> None:
        self.fired += 1
        if self.rang is not None:
            self.rang.set()


def test_the_timer_heap_keeps_one_entry_per_session_and_skips_moved_deadlines() -> None:
    now = [100.0]
    timers = SilenceTimers(clock=lambda: now[0])
    clients = [_Client() for _ in range(1000)]
    for client in clients:
        timers.arm(client, 30)
    for client in clients:  # re-armed later: no new entries
        timers.arm(client, 60)
    assert len(timers) == 1000
    now[0] = 131.0
    assert timers.fire_due() == 160.0  # moved on, not fired
    assert sum(c.fired for c in clients) == 0 and len(timers) == 1000
    SilenceTimers.disarm(clients[0])
    timers.arm(clients[1], 1)  # earlier than its entry: one more entry, the old one goes stale
    assert len(timers) == 1001
    now[0] = 132.5
    timers.fire_due()
    assert clients[1].fired == 1 and len(timers) == 1000
    now[0] = 161.0
    assert timers.fire_due() is None
    assert clients[0].fired == 0 and sum(c.fired for c in clients) == 999 and len(timers) == 0


def test_an_entry_in_the_heap_does_not_keep_a_session_the_registry_let_go() -> None:
    now = [100.0]
    timers = SilenceTimers(clock=lambda: now[0])
    kept, gone = _Client(), _Client()
    timers.arm(kept, 30)
    timers.arm(gone, 30)
    watch = weakref.ref(gone)
    del gone  # evicted, or swapped for its record (session/ended.py), with its timer still queued
    gc.collect()
    assert watch() is None and len(timers) == 2
    now[0] = 131.0
    assert timers.fire_due() is None and kept.fired == 1 and len(timers) == 0


def test_the_entries_of_sessions_let_go_leave_the_heap_once_they_are_most_of_it() -> None:
    """An ended session's last entry must not stay for its whole silence after the registry let the
    session go: at churn that was thousands of entries (issue #33)."""
    now = [100.0]
    timers = SilenceTimers(clock=lambda: now[0])
    kept = [_Client() for _ in range(10)]
    gone = [_Client() for _ in range(2 * COMPACT_AT)]
    for client in [*kept, *gone]:
        timers.arm(client, 30)
    del client
    del gone[:COMPACT_AT - 1]  # fewer than COMPACT_AT gone: nothing is rebuilt for them
    gc.collect()
    assert timers.fire_due() == 130.0 and len(timers) == 10 + 2 * COMPACT_AT
    gone.clear()
    gc.collect()
    assert timers.fire_due() == 130.0 and len(timers) == 10  # most of the heap: rebuilt without them
    now[0] = 131.0
    assert timers.fire_due() is None and all(c.fired == 1 for c in kept) and len(timers) == 0


async def test_the_timer_task_sleeps_until_the_earliest_deadline_and_wakes_for_an_earlier_one() -> None:
    timers = SilenceTimers(tick=0.02)
    late, early = _Client(), _Client()
    async with anyio.create_task_group() as tg:
        tg.start_soon(timers.run)
        await anyio.sleep(0.05)
        assert timers._wake_at == math.inf  # nothing armed: no wake-ups planned at all
        timers.arm(late, 30)
        await anyio.sleep(0.05)
        assert timers._wake_at == late._silence_queued  # asleep until the only deadline
        started = time.monotonic()
        early.rang = anyio.Event()
        timers.arm(early, 0.1)  # more than a tick earlier: the task wakes and re-plans
        with anyio.fail_after(2):
            await early.rang.wait()
        assert time.monotonic() - started >= 0.1  # not before its deadline; fail_after: not 30 s later
        assert late.fired == 0 and timers._wake_at == late._silence_queued
        tg.cancel_scope.cancel()


async def test_a_nudge_names_the_silence_frame_and_playback_after_the_end_is_refused() -> None:
    async with running_server() as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.recv()
            await c.turn("t1", "Namaste bhaiya, tamatar kitne ka hai?")
            await c.send({"type": "silence", "id": "quiet-1"})
            nudge = await c.until("reply", mark="nudge")
            assert nudge["in_reply_to"] == "quiet-1"
            await c.send({"type": "command", "id": "stop", "name": "stop"})
            await c.until("session.report")
            await c.send({"type": "playback", "id": "late", "turn": 1, "heard_chars": 1, "interrupted": True})
            assert (await c.until("error", id="late"))["code"] == "session_ended"
            await c.send({"type": "silence", "id": "quiet-2"})
            assert (await c.until("error", id="quiet-2"))["code"] == "session_ended"
        assert checked(c.seen).ok, checked(c.seen).violations
