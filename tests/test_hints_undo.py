"""The `hint` and `undo` commands over a real socket (docs/coaching.md): hint levels and their
content, that hints change nothing, that an undo restores the exact state (3 in a row at most),
its errors, and the bots' checker over the stream."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from neo4j import AsyncGraphDatabase

from schemas.enums import Stage
from tests.fakes import ScriptedBrain, decision
from tests.servers import checked, create, player, running_server, state, without

pytestmark = pytest.mark.anyio

VOLATILE = ("seq", "updated_at", "ledger")  # what an undo does not take back: events and cost


async def command(c: Any, frame_id: str, name: str, kind: str) -> dict[str, Any]:
    """Send a command; return its event (of `kind`) once its ack has come too."""
    await c.send({"type": "command", "id": frame_id, "name": name})
    event = await c.until(kind, in_reply_to=frame_id)
    if not any(f["type"] == "ack" and f["id"] == frame_id for f in c.seen):
        await c.until("ack", id=frame_id)
    return event


async def test_hints_rise_by_level_change_nothing_and_reset_with_the_next_turn() -> None:
    async with running_server() as served:
        created = await create(served)
        sid, token = created["session_id"], created["player_token"]
        async with await player(served, created) as c:
            await c.recv()
            first = await command(c, "h0", "hint", "hint")
            assert (first["level"], first["kind"], first["situation"], first["turn"]) == (0, "contextual", "greet", 1)
            assert "bhaiya" in first["text"] and first["english"] == ""
            await c.turn("t1", "Namaste bhaiya, tamatar kitne ka hai?")
            before = await state(served, sid, token)
            hints = [await command(c, f"h{i}", "hint", "hint") for i in range(1, 5)]
            assert [h["level"] for h in hints] == [0, 1, 2, 3]
            assert [h["kind"] for h in hints] == ["contextual", "structural", "reveal", "reveal"]
            assert all(h["situation"] == "open" and h["turn"] == 2 for h in hints)
            frame = hints[1]
            assert "____" in frame["text"] and "____" in frame["english"]
            reveal = hints[2]
            # The reveal is the brain's own suggestion from its last reply, with its English.
            last_reply = next(f for f in reversed(c.seen) if f["type"] == "reply")
            assert reveal["text"] == last_reply["suggested_user_response"] != ""
            assert reveal["english"] == last_reply["suggested_user_response_english"] != ""
            assert [h["seq"] for h in hints] == list(range(before["seq"] + 1, before["seq"] + 5))
            after = await state(served, sid, token)
            assert without(after, "seq", "updated_at") == without(before, "seq", "updated_at")
            await c.turn("t2", reveal["text"])
            again = await command(c, "h5", "hint", "hint")
            assert again["level"] == 0 and again["turn"] == 3
        assert checked(c.seen).ok, checked(c.seen).violations


async def test_undo_restores_the_exact_state_three_times_in_a_row_then_refuses() -> None:
    async with running_server() as served:
        created = await create(served)
        sid, token = created["session_id"], created["player_token"]
        said = ["Namaste bhaiya, tamatar kitne ka hai?", "Bahut mehenga hai bhaiya, 40 mein de do?",
                "Thoda kam karo bhaiya, 60 mein de do?", "Bhaiya, aapke tamatar acche hain."]
        async with await player(served, created) as c:
            await c.recv()
            snapshots = [await state(served, sid, token)]
            for i, text in enumerate(said, start=1):
                await c.turn(f"t{i}", text)
                snapshots.append(await state(served, sid, token))
            assert snapshots[-1]["turn"] == 4 and snapshots[-1]["vendor_quote"] is not None
            for back in (3, 2, 1):
                undone = await command(c, f"u{back}", "undo", "undo")
                now = await state(served, sid, token)
                assert undone["turn"] == back + 1
                assert without(now, *VOLATILE) == without(snapshots[back], *VOLATILE)
                assert without(undone["state"], *VOLATILE) == without(snapshots[back], *VOLATILE)
                assert undone["seq"] == now["seq"]
            await c.send({"type": "command", "id": "u0", "name": "undo"})
            refused = await c.until("error")
            assert (refused["code"], refused["id"]) == ("nothing_to_undo", "u0")
            assert without(await state(served, sid, token), *VOLATILE) == without(snapshots[1], *VOLATILE)
            # The same id again is a duplicate, not a fourth undo.
            await c.send({"type": "command", "id": "u1", "name": "undo"})
            assert (await c.until("ack", id="u1"))["duplicate"] is True
            # Played again from the restored state: turn 2 once more, and the undo stack refills.
            replay = await c.turn("t5", said[1])
            assert replay[0]["turn"] == 2
            assert (await command(c, "u9", "undo", "undo"))["turn"] == 2
        assert checked(c.seen).ok, checked(c.seen).violations


async def test_undo_waits_for_a_turn_in_flight_and_takes_it_back() -> None:
    brain = ScriptedBrain(lambda r: decision("Tomatoes, 120 a kilo.", 55, Stage.INQUIRY, counter_price=120),
                          delay=0.3)
    async with running_server(brain=brain) as served:
        created = await create(served)
        sid, token = created["session_id"], created["player_token"]
        async with await player(served, created) as c:
            await c.recv()
            before = await state(served, sid, token)
            await c.send({"type": "transcript", "id": "t1", "text": "Tamatar kitne ka?"})
            await c.send({"type": "command", "id": "u1", "name": "undo"})
            reply = await c.until("reply", in_reply_to="t1")
            undone = await c.until("undo", in_reply_to="u1")
            assert reply["seq"] < undone["seq"] and undone["turn"] == 1
            after = await state(served, sid, token)
            assert without(after, *VOLATILE) == without(before, *VOLATILE)


async def test_undo_after_the_end_is_refused() -> None:
    async with running_server() as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.recv()
            await c.turn("t1", "Namaste bhaiya")
            await c.send({"type": "command", "id": "s", "name": "stop"})
            await c.until("session.report")
            for name in ("undo", "hint"):
                await c.send({"type": "command", "id": f"x-{name}", "name": name})
                assert (await c.until("error", id=f"x-{name}"))["code"] == "session_ended"


async def test_a_level_without_unprompted_hints_still_reveals_on_request() -> None:
    async with running_server() as served:
        created = await create(served, level="advanced")
        async with await player(served, created) as c:
            welcome = await c.recv()
            assert welcome["state"]["level"] == "advanced"
            said = await c.turn("t1", "Namaste bhaiya, tamatar kitne ka hai?")
            assert said[0]["suggested_user_response"] == "" and said[0]["suggested_user_response_english"] == ""
            for i in range(3):
                reveal = await command(c, f"h{i}", "hint", "hint")
            assert reveal["kind"] == "reveal" and reveal["text"] and reveal["english"]


@pytest.mark.neo4j
async def test_undo_barge_in_and_the_counts_survive_a_restart(neo4j_uri: str) -> None:
    """An undone turn stays in the graph marked undone, the state restored; a barge-in's unbound
    quote and the coaching counts are rebuilt; the undo stack is rebuilt too; stats leave undone
    turns out."""
    settings = {"USE_MOCKS": False, "MIRROR": "neo4j", "NEO4J_URI": neo4j_uri, "BRAIN": "rules"}
    async with running_server(**settings) as served:
        created = await create(served)
        sid, token = created["session_id"], created["player_token"]
        async with await player(served, created) as c:
            await c.recv()
            await c.turn("t1", "Namaste bhaiya, tamatar kitne ka hai?")
            before_two = await state(served, sid, token)
            await c.turn("t2", "Bahut mehenga hai bhaiya, 40 mein de do?")
            await command(c, "h1", "hint", "hint")
            await command(c, "u1", "undo", "undo")  # takes back turn 2
            reply = (await c.turn("t3", "Thoda kam karo bhaiya, 60 mein de do?"))[0]  # turn 2 again
            quote = reply["counter_price"]
            cut = reply["text"].index(str(quote))
            await c.send({"type": "playback", "id": "p1", "turn": 2, "heard_chars": cut, "interrupted": True})
            heard = await c.until("heard")
            await c.until("ack", id="p1")
            live = await state(served, sid, token)
        assert heard["quote_unbound"] is True and live["vendor_quote"] == before_two["vendor_quote"]
    async with running_server(**settings) as served:
        rebuilt = await state(served, sid, token)
        assert without(rebuilt, *VOLATILE) == without(live, *VOLATILE)
        assert rebuilt["seq"] == live["seq"]
        async with await player(served, created) as c:
            await c.recv()
            # The rebuilt history has turn 1 and the replayed turn 2: the undo stack holds both.
            assert (await command(c, "u2", "undo", "undo"))["turn"] == 2
            assert without(await state(served, sid, token), *VOLATILE) == without(before_two, *VOLATILE)
            await c.send({"type": "command", "id": "s", "name": "stop"})
            report = (await c.until("session.report"))["report"]
        assert report["coaching"]["undos"] == 2 and report["coaching"]["hints"] == [1, 0, 0]
    async with AsyncGraphDatabase.driver(neo4j_uri, auth=None) as driver, driver.session() as session:
        rows = await (await session.run(
            "MATCH (:Session {session_id: $sid})-[:HAS_TURN]->(t:Turn) "
            "RETURN t.turn_number AS turn, t.role AS role, t.undone AS undone, t.heard_chars AS heard "
            "ORDER BY t.ordinal", sid=sid)).data()
    marks = [(r["turn"], r["role"], bool(r["undone"])) for r in rows]
    assert marks == [(1, "user", False), (1, "vendor", False), (2, "user", True), (2, "vendor", True),
                     (2, "user", True), (2, "vendor", True)]
    assert [r["heard"] for r in rows][5] == cut


async def test_the_report_counts_the_coaching_and_explains_every_clamp() -> None:
    proposals = {
        "Namaste bhaiya, tamatar kitne ka hai?": decision("Tomatoes, 120 a kilo.", 55, Stage.INQUIRY,
                                                           counter_price=120),
        "60 rupees?": decision("Okay, 90 then.", 52, Stage.HAGGLING, counter_price=90),
        # Below the floor, and far too happy: two clamps.
        "50 rupees, bhaiya?": decision("Make it 20, friend!", 99, Stage.DEAL, counter_price=20),
    }
    brain = ScriptedBrain(lambda r: proposals[r.transcript])
    async with running_server(brain=brain) as served:
        created = await create(served)
        sid, token = created["session_id"], created["player_token"]
        async with await player(served, created) as c:
            await c.recv()
            await command(c, "h1", "hint", "hint")
            await c.turn("t1", "Namaste bhaiya, tamatar kitne ka hai?")
            await command(c, "h2", "hint", "hint")
            await command(c, "h3", "hint", "hint")
            await command(c, "h4", "hint", "hint")
            await command(c, "r1", "repeat", "repeat")
            await c.send({"type": "transcript", "id": "m1", "text": "mmh tamtr", "confidence": 0.2})
            assert (await c.until("reply", in_reply_to="m1"))["mark"] == "clarify"
            await c.send({"type": "silence", "id": "s1"})
            await c.until("reply", mark="nudge")
            await c.turn("t2", "60 rupees?")
            await command(c, "u1", "undo", "undo")
            last = (await c.turn("t3", "50 rupees, bhaiya?"))[0]
            await c.send({"type": "command", "id": "end", "name": "stop"})
            report = (await c.until("session.report"))["report"]
        # After the undo the stage is INQUIRY again: DEAL is out of reach, and two more clamps.
        assert {"below_floor", "max_mood_delta", "illegal_transition"} <= set(last["flags"])
        assert report["coaching"] == {"hints": [2, 1, 1], "hints_offered": 0, "repeats": 1, "undos": 1,
                                      "timeouts": 1, "unclear": 1}
        clamps = {(k["turn"], k["flag"]): k["explanation"] for k in report["clamps"]}
        assert clamps[(2, "below_floor")].startswith("The vendor will not go below his floor price")
        assert (2, "max_mood_delta") in clamps and (2, "illegal_transition") in clamps
        assert not any(turn == 3 for turn, _ in clamps)
        async with httpx.AsyncClient(base_url=served.base_url) as http:
            page = (await http.get(f"/api/sessions/{sid}/report?format=html",
                                   headers={"authorization": f"Bearer {token}"})).text
        assert "Where the rules stepped in" in page and "floor price" in page
        assert "2 about the situation, 1 sentence frames, 1 whole lines" in page
