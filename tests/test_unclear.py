"""Unclear speech: a transcript below the confidence threshold is asked again, and changes nothing."""

from __future__ import annotations

import pytest

from clients.bots.checker import SessionChecker
from tests.servers import create, player, running_server, state

pytestmark = pytest.mark.anyio


async def test_a_mumble_is_asked_again_acknowledged_and_changes_nothing() -> None:
    async with running_server() as served:
        created = await create(served, scenario="kyoto-antiques")
        async with await player(served, created) as c:
            await c.recv()
            await c.turn("t1", "Konnichiwa, sumimasen")
            before = await state(served, created["session_id"], created["player_token"])
            await c.send({"type": "transcript", "id": "t2", "text": "mmh ikura... desu", "confidence": 0.41})
            asked = await c.until("reply", in_reply_to="t2")
            assert asked["mark"] == "clarify" and asked["turn"] == 1 and asked["is_terminal"] is False
            assert "repeat" in asked["text"] or "once more" in asked["text"] or "hear" in asked["text"]
            assert asked["happiness_score"] == before["happiness_score"]
            assert asked["negotiation_state"] == before["stage"] and asked["counter_price"] == before["vendor_quote"]
            assert any(f["type"] == "ack" and f["id"] == "t2" and f["duplicate"] is False for f in c.seen)
            quiet = await c.quiet(0.3)
            assert not [f for f in quiet if f["type"] in ("mood", "stage", "tips")]  # not a turn
            after = await state(served, created["session_id"], created["player_token"])
            assert after["turn"] == before["turn"] and after["seq"] == before["seq"] + 1
            # At the threshold or without a confidence it is a turn like any other.
            clear = await c.turn("t3", "Sumimasen, kono chawan wa ikura desu ka?")
            assert clear[0].get("mark") is None and clear[0]["turn"] == 2
            assert (await c.turn("t4", "Kirei desu ne"))[0]["turn"] == 3
            await c.send({"type": "transcript", "id": "t5", "text": "Chotto takai", "confidence": 0.7})
            assert (await c.until("reply", in_reply_to="t5"))["turn"] == 4
            await c.quiet(0.3)  # the turn's mood, stage and tips
        checker = SessionChecker()
        for frame in c.seen:
            checker.feed(frame)
        checker.finish()
        assert checker.ok, checker.violations


async def test_the_threshold_is_a_setting() -> None:
    async with running_server(CONFIDENCE_CLARIFY_THRESHOLD=0.2) as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.recv()
            await c.send({"type": "transcript", "id": "t1", "text": "Namaste bhaiya", "confidence": 0.41})
            reply = await c.until("reply", in_reply_to="t1")
            assert reply.get("mark") is None and reply["turn"] == 1
