"""The learner's commands over a real socket: `repeat` and `stop`, their errors, idempotency,
the stream a spectator and the bots' checker see, and a stop that survives a Neo4j restart."""

from __future__ import annotations

import httpx
import pytest

from schemas.enums import Stage
from tests.fakes import ScriptedBrain, decision
from tests.servers import checked, client, create, player, running_server, state

pytestmark = pytest.mark.anyio


async def test_repeat_says_the_last_line_again_and_changes_nothing() -> None:
    async with running_server() as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.recv()
            await c.send({"type": "command", "id": "c0", "name": "repeat"})
            early = await c.until("error")
            assert (early["code"], early["id"]) == ("nothing_to_repeat", "c0")
            said = await c.turn("t1", "Namaste bhaiya, tamatar kitne ka hai?")
            before = await state(served, created["session_id"], created["player_token"])
            await c.send({"type": "command", "id": "c1", "name": "repeat"})
            answer = [await c.recv(), await c.recv()]  # the ack and the event, in either order
            again = next(f for f in answer if f["type"] == "repeat")
            ack = next(f for f in answer if f["type"] == "ack")
            assert again["text"] == said[0]["text"] and again["turn"] == 1 and again["in_reply_to"] == "c1"
            assert again["seq"] == before["seq"] + 1 and ack["id"] == "c1" and ack["duplicate"] is False
            await c.send({"type": "command", "id": "c1", "name": "repeat"})  # the same id: not applied twice
            assert (await c.until("ack"))["duplicate"] is True
            await c.send({"type": "command", "id": "c2", "name": "sing"})
            unknown = await c.until("error")
            assert (unknown["code"], unknown["id"]) == ("unknown_command", "c2")
        after = await state(served, created["session_id"], created["player_token"])
        assert {k: v for k, v in after.items() if k not in ("seq", "updated_at")} == \
            {k: v for k, v in before.items() if k not in ("seq", "updated_at")}
        assert after["seq"] == before["seq"] + 1
        assert checked(c.seen).ok, checked(c.seen).violations


async def test_stop_ends_the_session_with_its_report_and_spectators_see_it() -> None:
    async with running_server() as served:
        created = await create(served)
        async with client(served.ws_url(created["session_id"], created["spectator_token"])) as watcher:
            await watcher.recv()
            await watcher.send({"type": "command", "id": "x", "name": "stop"})
            assert (await watcher.until("error"))["code"] == "forbidden"
            async with await player(served, created) as c:
                await c.recv()
                await c.turn("t1", "Namaste bhaiya")
                await c.send({"type": "command", "id": "c1", "name": "stop"})
                stage = await c.until("stage")
                ended = await c.until("session.ended")
                report = await c.until("session.report")
                assert stage["forced"] is True and stage["to"] == "CLOSURE" and stage["from"] == "GREETING"
                assert ended["outcome"] == "stopped" and report["report"]["outcome"] == "stopped"
                assert report["seq"] == ended["seq"] + 1 == stage["seq"] + 2
                closing = await c.turn("t2", "wait, one more thing")
                assert closing[0]["is_terminal"] is True
                await c.send({"type": "command", "id": "c2", "name": "repeat"})
                assert (await c.until("error"))["code"] == "session_ended"
            await watcher.until("session.report")  # however long the machine takes: no quiet window
            watched = watcher.seen
    assert [f["type"] for f in watched if f["type"] in ("stage", "session.ended", "session.report")][-3:] == [
        "stage", "session.ended", "session.report"]
    assert checked(c.seen).ok, checked(c.seen).violations


async def test_stop_abandons_a_turn_in_flight_and_answers_what_waited_behind_it() -> None:
    brain = ScriptedBrain(lambda r: decision("Tomatoes, 120 a kilo.", 55, Stage.INQUIRY, counter_price=120),
                          delay=0.5)
    async with running_server(brain=brain) as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.recv()
            await c.send({"type": "transcript", "id": "t1", "text": "Tamatar kitne ka?"})
            await c.send({"type": "transcript", "id": "t2", "text": "Hello?"})
            await c.send({"type": "command", "id": "c1", "name": "stop"})
            ended = await c.until("session.ended")
            closing = await c.until("reply", in_reply_to="t2")
            await c.quiet(0.8)  # the abandoned brain call's answer, had it come, would show here
        assert ended["outcome"] == "stopped" and closing["is_terminal"] is True
        assert not [f for f in c.seen if f["type"] == "reply" and f.get("in_reply_to") == "t1"]
        acks = {f["id"] for f in c.seen if f["type"] == "ack"}
        assert {"t1", "t2", "c1"} <= acks  # nothing accepted is left unacknowledged
        snapshot = await state(served, created["session_id"], created["player_token"])
        assert snapshot["stage"] == "CLOSURE" and snapshot["outcome"] == "stopped"


@pytest.mark.neo4j
async def test_a_stop_and_a_repeat_survive_a_restart(neo4j_uri: str) -> None:
    settings = {"USE_MOCKS": False, "MIRROR": "neo4j", "NEO4J_URI": neo4j_uri, "BRAIN": "rules"}
    async with running_server(**settings) as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.recv()
            await c.turn("t1", "Namaste bhaiya, tamatar kitne ka hai?")
            await c.send({"type": "command", "id": "c1", "name": "repeat"})
            await c.until("ack")
            await c.send({"type": "command", "id": "c2", "name": "stop"})
            report = await c.until("session.report")
            await c.until("ack")
    async with running_server(**settings) as served:
        async with httpx.AsyncClient(base_url=served.base_url,
                                     headers={"authorization": f"Bearer {created['player_token']}"}) as http:
            got = await http.get(f"/api/sessions/{created['session_id']}")
            assert got.status_code == 200
            rebuilt = got.json()
            assert rebuilt["outcome"] == "stopped" and rebuilt["stage"] == "CLOSURE"
            assert rebuilt["seq"] == report["seq"]  # a rebuilt session continues after every seq it sent
            again = await http.get(f"/api/sessions/{created['session_id']}/report")
            assert again.json()["outcome"] == "stopped"
        async with await player(served, created) as c:
            welcome = await c.recv()
            assert welcome["state"]["outcome"] == "stopped"
            await c.send({"type": "command", "id": "c2", "name": "stop"})  # the same id: a duplicate
            assert (await c.until("ack"))["duplicate"] is True
