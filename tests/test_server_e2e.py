"""The whole server through real sockets: uvicorn on a loopback port and `websockets` clients."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import httpx
import pytest
from starlette.responses import JSONResponse
from websockets.asyncio.client import connect

from schemas.brain import BrainRequest
from schemas.decision import AIDecision
from schemas.enums import Role, Stage
from tests.fakes import ScriptedBrain, decision
from tests.servers import client, close_code, create, player, running_server, state

pytestmark = pytest.mark.anyio
NEXT = {Stage.GREETING: Stage.INQUIRY, Stage.INQUIRY: Stage.HAGGLING}


def climb(request: BrainRequest) -> AIDecision:
    """Moves one stage a turn up to HAGGLING, and happiness up 5 a turn."""
    return decision(f"Turn {request.turn}, friend.", min(100, request.happiness_score + 5),
                    NEXT.get(request.stage, request.stage))


def wobble(request: BrainRequest) -> AIDecision:
    """Keeps the stage; happiness goes up and down by 3, so every turn makes reply + mood."""
    step = 3 if request.turn % 2 else -3
    return decision(f"Turn {request.turn}.", request.happiness_score + step, request.stage)


def sequenced(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in frames if f["type"] in ("reply", "mood", "stage", "session.ended", "tips")]


# ---------------------------------------------------------------------------- the happy path


async def test_create_connect_scene_transcript_reply_mood_and_stage() -> None:
    async with running_server(brain=ScriptedBrain(climb)) as served:
        created = await create(served, learner_id="asha")
        assert set(created) >= {"session_id", "player_token", "spectator_token", "expires_in",
                                "ws_url"}
        async with await player(served, created) as c:
            assert c.ws.subprotocol == "samvad.v1.json"
            welcome = await c.recv()
            assert welcome["type"] == "welcome" and welcome["role"] == "player"
            assert welcome["seq"] == 0 and welcome["state"]["learner_id"] == "asha"
            await c.send({"type": "scene", "id": "s1", "object_grabbed": "Tomato"})
            assert await c.recv() == {"type": "ack", "session_id": created["session_id"],
                                      "id": "s1", "duplicate": False}
            got = await c.turn("t1", "Namaste bhaiya, tamatar kitne ka hai?")
            kinds = [f["type"] for f in c.seen[2:] if f["type"] != "pong"]
            assert kinds == ["ack", "reply", "mood", "stage", "tips"], kinds
            reply, mood, stage, tips = got[0], got[1], got[2], got[3]
            assert reply["seq"] == 1 and reply["turn"] == 1 and reply["in_reply_to"] == "t1"
            assert reply["item"] == "Tomato" and reply["negotiation_state"] == "INQUIRY"
            assert reply["timings"]["brain"] == "scripted"
            assert mood == {**mood, "seq": 2, "delta": 5, "happiness_score": 55}
            assert stage == {**stage, "seq": 3, "from": "GREETING", "to": "INQUIRY",
                             "forced": False}
            assert tips["seq"] == 4 and tips["turn"] == 1
            assert "kitne ka hai" in tips["cards"][0]["body"] and tips["cards"][0]["grounded"] is True


async def test_the_default_rule_brain_answers_over_the_socket() -> None:
    async with running_server() as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.recv()
            got = await c.turn("t1", "Namaste bhaiya! Tamatar kitne ka hai?")
            assert got[0]["type"] == "reply" and got[0]["text"]
            assert got[0]["timings"]["brain"] == "rules"


async def test_a_spectator_sees_the_same_events_in_the_same_order() -> None:
    async with running_server(brain=ScriptedBrain(climb)) as served:
        created = await create(served)
        sid = created["session_id"]
        async with client(served.ws_url(sid, created["spectator_token"])) as spectator:
            welcome = await spectator.recv()
            assert welcome["role"] == "spectator" and welcome["seq"] == 0
            async with await player(served, created) as c:
                await c.recv()
                for i in range(4):
                    await c.turn(f"t{i}", "Bhaiya, kitne ka hai?")
            played = sequenced(c.seen)
            # read as many as the player saw, however long that takes; then anything extra would show
            while len(sequenced(spectator.seen)) < len(played):
                await spectator.recv()
            await spectator.quiet(0.3)
            watched = sequenced(spectator.seen)
        assert len(played) >= 6
        assert watched == played
        assert [f["seq"] for f in played] == list(range(1, len(played) + 1))


async def test_a_spectator_is_read_only() -> None:
    async with running_server() as served:
        created = await create(served)
        before = await state(served, created["session_id"], created["player_token"])
        async with client(served.ws_url(created["session_id"], created["spectator_token"])) as s:
            await s.recv()
            await s.send({"type": "transcript", "id": "t1", "text": "hello"})
            error = await s.recv()
            assert error["type"] == "error" and error["code"] == "forbidden" and error["id"] == "t1"
            await s.send({"type": "scene", "id": "s1", "object_grabbed": "Apple"})
            assert (await s.recv())["code"] == "forbidden"
            await s.send({"type": "ping", "id": "p1", "t": 1.5})
            assert await s.recv() == {"type": "pong", "session_id": created["session_id"],
                                      "id": "p1", "t": 1.5}
        assert await state(served, created["session_id"], created["player_token"]) == before


async def test_a_second_player_connection_supersedes_the_first() -> None:
    async with running_server() as served:
        created = await create(served)
        async with await player(served, created) as first:
            await first.recv()
            async with await player(served, created) as second:
                assert (await second.recv())["type"] == "welcome"
                assert await close_code(first) == 4409
                got = await second.turn("t1", "Namaste bhaiya")
                assert got[0]["type"] == "reply"


# ---------------------------------------------------------------------------- resume


async def test_resume_replays_the_missed_events_in_order() -> None:
    async with running_server(brain=ScriptedBrain(climb)) as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.recv()
            await c.turn("t1", "hello")
            kept = sequenced(c.seen)[-1]["seq"]  # what this client applied
            for i in range(2, 5):
                await c.turn(f"t{i}", "hello")
        everything = sequenced(c.seen)
        async with await player(served, created) as again:
            welcome = await again.recv()
            assert welcome["seq"] == everything[-1]["seq"]
            await again.send({"type": "resume", "id": "r1", "last_seq": kept})
            replayed = []
            while True:
                frame = await again.recv()
                if frame["type"] == "ack":
                    assert frame["id"] == "r1"
                    break
                replayed.append(frame)
        assert replayed == [f for f in everything if f["seq"] > kept]
        assert [f["seq"] for f in replayed] == list(range(kept + 1, everything[-1]["seq"] + 1))


async def test_resume_beyond_the_replay_buffer_gets_a_snapshot() -> None:
    async with running_server(brain=ScriptedBrain(wobble), REPLAY_EVENTS=16) as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.recv()
            for i in range(12):  # three events a turn (reply, mood, tips): 36, more than 16 are held
                await c.turn(f"t{i}", "hello")
            latest = sequenced(c.seen)[-1]["seq"]
            assert latest == 36
            await c.send({"type": "resume", "id": "r1", "last_seq": 2})
            snapshot = await c.recv()
            assert snapshot["type"] == "snapshot" and snapshot["replayed"] is False
            assert snapshot["seq"] == latest and snapshot["state"]["seq"] == latest
            assert snapshot["reason"]
            assert (await c.recv()) == {**(c.seen[-1]), "type": "ack", "id": "r1"}
            # and a resume within the buffer replays instead
            await c.send({"type": "resume", "last_seq": latest - 4})
            replay = [await c.recv() for _ in range(4)]
            assert [f["seq"] for f in replay] == [latest - 3, latest - 2, latest - 1, latest]


# ---------------------------------------------------------------------------- idempotency, end


async def test_a_duplicate_transcript_id_is_acked_again_and_not_replayed() -> None:
    brain = ScriptedBrain(climb)
    async with running_server(brain=brain) as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.recv()
            await c.turn("t1", "hello")
            await c.send({"type": "transcript", "id": "t1", "text": "hello"})
            ack = await c.recv()
            assert ack["type"] == "ack" and ack["id"] == "t1" and ack["duplicate"] is True
            assert await c.quiet(0.3) == []
        assert len(brain.requests) == 1


async def test_a_transcript_after_the_end_gets_a_closing_reply_without_the_brain() -> None:
    brain = ScriptedBrain()
    async with running_server(brain=brain, MAX_TURNS=2) as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.recv()
            await c.turn("t1", "hello")
            got = await c.turn("t2", "hello again")
            assert got[0]["is_terminal"] is True
            ended = [f for f in got if f["type"] == "session.ended"]
            assert ended and ended[0]["outcome"] == "turn_limit"
            stage = next(f for f in got if f["type"] == "stage")
            assert stage["forced"] is True and stage["to"] == "CLOSURE"
            closing = await c.turn("t3", "one more thing?")
            assert closing[0]["is_terminal"] is True and closing[0]["turn"] == 2
            tips, report = got[-2], got[-1]
            assert tips["type"] == "tips" and tips["seq"] == ended[0]["seq"] + 1  # the last turn's cards
            assert report["type"] == "session.report" and report["seq"] == tips["seq"] + 1
            assert report["report"]["outcome"] == "turn_limit" and len(report["report"]["suggestions"]) == 3
            assert closing[0]["in_reply_to"] == "t3" and closing[0]["seq"] == report["seq"] + 1
            assert closing[1:] == [] or [f["type"] for f in closing[1:]] == ["ack"]
            await c.send({"type": "scene", "id": "s9", "object_grabbed": "Apple"})
            assert (await c.until("error"))["code"] == "session_ended"
        assert len(brain.requests) == 2


# ---------------------------------------------------------------------------- refusals


async def test_socket_refusals_close_with_4401_4403_and_4404() -> None:
    async with running_server() as served:
        a = await create(served)
        b = await create(served)
        async with client(served.ws_url(a["session_id"], "not-a-token")) as c:
            assert await close_code(c) == 4401
        async with client(served.ws_url(a["session_id"])) as c:  # no token at all
            assert await close_code(c) == 4401
        async with client(served.ws_url(a["session_id"], b["player_token"])) as c:
            assert await close_code(c) == 4403
        assert served.services is not None
        ghost = served.services.tokens.issue("0" * 32, Role.PLAYER)
        async with client(served.ws_url("0" * 32, ghost)) as c:
            assert await close_code(c) == 4404
        assert c.seen == []  # no session data before the refusal


async def test_the_socket_takes_an_authorization_bearer_header() -> None:
    async with running_server() as served:
        created = await create(served)
        url = served.ws_url(created["session_id"])
        headers = {"Authorization": f"Bearer {created['player_token']}"}
        async with client(url, headers=headers) as c:
            welcome = await c.recv()
            assert welcome["type"] == "welcome" and welcome["role"] == "player"
            assert (await c.turn("t1", "Namaste"))[0]["type"] == "reply"


async def test_the_msgpack_subprotocol_round_trip() -> None:
    async with running_server(brain=ScriptedBrain(climb)) as served:
        created = await create(served)
        async with await player(served, created, subprotocol="samvad.v1.msgpack") as c:
            assert c.ws.subprotocol == "samvad.v1.msgpack"
            raw = await asyncio.wait_for(c.ws.recv(), 5)
            assert isinstance(raw, bytes)
            import msgpack

            assert msgpack.unpackb(raw, raw=False)["type"] == "welcome"
            got = await c.turn("t1", "hello")
            assert got[0]["type"] == "reply" and got[0]["in_reply_to"] == "t1"
            assert [f["type"] for f in got[1:]] == ["mood", "stage", "tips"]
            assert got[-1]["cards"] and isinstance(got[-1]["cards"][0]["source_chunk_ids"], list)
            await c.ws.send('{"type": "ping"}')  # a text frame on a msgpack connection
            assert (await c.recv())["code"] == "bad_frame"


# ---------------------------------------------------------------------------- HTTP


async def test_get_session_state_needs_a_token_of_that_session() -> None:
    async with running_server() as served:
        a = await create(served)
        b = await create(served)
        sid = a["session_id"]
        async with httpx.AsyncClient(base_url=served.base_url) as http:
            assert (await http.get(f"/api/sessions/{sid}")).status_code == 401
            bad = await http.get(f"/api/sessions/{sid}", headers={"Authorization": "Bearer x"})
            assert bad.status_code == 401 and bad.json()["error"]["code"] == "unauthorized"
            other = await http.get(f"/api/sessions/{sid}",
                                   headers={"Authorization": f"Bearer {b['player_token']}"})
            assert other.status_code == 403 and other.json()["error"]["code"] == "forbidden"
            for token in (a["player_token"], a["spectator_token"]):
                ok = await http.get(f"/api/sessions/{sid}",
                                    headers={"Authorization": f"Bearer {token}"})
                assert ok.status_code == 200
                assert ok.json()["session_id"] == sid and ok.json()["seq"] == 0
            # A token in the URL is not read by an HTTP route (report links aside): URLs end up in
            # history, proxy logs and Referer headers (docs/security.md).
            by_query = await http.get(f"/api/sessions/{sid}", params={"token": a["player_token"]})
            assert by_query.status_code == 401


async def test_health() -> None:
    async with running_server() as served:
        await create(served)
        async with httpx.AsyncClient(base_url=served.base_url) as http:
            health = await http.get("/health")
        assert health.status_code == 200
        body = health.json()
        assert body["status"] == "ok" and body["brain"] == "rules"
        assert body["sessions"]["live"] == 1 and body["connections"] == 0


async def test_a_single_node_is_alive_and_ready_and_samvad_drain_says_it_is_not_clustered(
        capsys: pytest.CaptureFixture[str]) -> None:
    """/livez and /readyz (a pod's probes, deploy/helm/samvad) on a node outside a cluster; a node that
    drains answers /readyz 503 and /livez 200 (tests/test_helm_loopback.py)."""
    from server.cli import main

    async with running_server() as served:
        async with httpx.AsyncClient(base_url=served.base_url) as http:
            live, ready = await http.get("/livez"), await http.get("/readyz")
        assert (live.status_code, live.json()) == (200, {"status": "alive"})
        assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
        # The preStop command: a node outside a cluster has nothing to drain, and the hook says so.
        code = await asyncio.to_thread(main, ["drain", "--url", served.base_url])
        assert code == 1 and "409" in capsys.readouterr().err
    with socket.socket() as probe:  # and with nobody listening, it fails rather than hangs
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    assert await asyncio.to_thread(main, ["drain", "--url", f"http://127.0.0.1:{closed}"]) == 1
    assert "drain failed" in capsys.readouterr().err


async def test_session_creation_validates_its_body() -> None:
    async with running_server() as served:
        async with httpx.AsyncClient(base_url=served.base_url) as http:
            for body in ({"scenario": "no-such-place"}, {"target_language": "xx"},
                         {"input_language": "fr-FR"}, {"color": "blue"},
                         {"learner_id": "x" * 65}):
                response = await http.post("/api/sessions", json=body)
                assert response.status_code == 422, body
                assert response.json()["error"]["code"] == "invalid"
            garbage = await http.post("/api/sessions", content=b"{nope",
                                      headers={"content-type": "application/json"})
            assert garbage.status_code == 422
            fine = await http.post("/api/sessions", json={"target_language": "hi-IN"})
            assert fine.status_code == 201
            # The answer is written with orjson: the same bytes and type as Starlette's JSONResponse.
            assert fine.headers["content-type"] == "application/json"
            assert fine.content == JSONResponse(fine.json()).body


# ---------------------------------------------------------------------------- slow consumer


async def test_a_spectator_that_never_reads_is_dropped_and_the_player_is_not() -> None:
    big = "Arre bhaiya, " + "bahut accha tamatar hai, " * 22  # replies near the 600-char cap

    def chatty(request: BrainRequest) -> AIDecision:
        return decision(big[:590], request.happiness_score + (3 if request.turn % 2 else -3),
                        request.stage)

    async with running_server(brain=ScriptedBrain(chatty), OUTBOUND_QUEUE=8,
                              RATE_LIMIT_PER_SECOND=100_000, RATE_LIMIT_BURST=100_000,
                              MAX_TURNS=500) as served:
        assert served.services is not None
        created = await create(served)
        sid = created["session_id"]
        # A spectator whose kernel receive buffer is tiny and whose client stops reading after
        # one queued message: the server's socket buffers fill, then its outbound queue.
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        raw.setblocking(False)
        port = int(served.base_url.rsplit(":", 1)[1])
        await asyncio.get_running_loop().sock_connect(raw, ("127.0.0.1", port))
        async with connect(served.ws_url(sid, created["spectator_token"]), sock=raw,
                           subprotocols=["samvad.v1.json"], max_queue=1, compression=None,  # type: ignore[list-item]
                           ping_interval=None, close_timeout=1) as spectator:
            actor = served.services.registry.live(sid)
            assert actor is not None
            async with await player(served, created) as c:
                await c.recv()
                latencies = []
                dropped_at = None
                # ~4,000 events fill the loopback buffers here; send two turns at a time so the
                # test pays half the round trips (two turns queue at most 6 frames for the
                # player, under its own OUTBOUND_QUEUE of 8).
                for batch in range(0, 10_000, 2):
                    start = time.perf_counter()
                    for i in range(batch, batch + 2):
                        await c.send({"type": "transcript", "id": f"t{i}", "text": "hello"})
                    await c.until("reply", in_reply_to=f"t{batch + 1}")
                    latencies.append(time.perf_counter() - start)
                    if len(actor.connections) == 1:
                        dropped_at = batch
                        break
                assert dropped_at is not None, "the spectator was never dropped"
                # Read the spectator now: its buffered events, then the 4430 close.
                code = None
                from websockets.exceptions import ConnectionClosed

                try:
                    async with asyncio.timeout(5):
                        while True:
                            await spectator.recv()
                except ConnectionClosed as exc:
                    code = exc.rcvd.code if exc.rcvd is not None else None
                assert code == 4430
                # The player never noticed: more turns, no errors, replies still prompt.
                for i in range(3):
                    got = await c.turn(f"after{i}", "hello")
                    assert got[0]["type"] == "reply"
                assert not [f for f in c.seen if f["type"] == "error"]
                # Measured: the slowest of ~1,400 round trips took 38-50 ms. A player held up by the
                # spectator would wait for its socket to drain, which never happens; 1 s is 20x the
                # measured worst.
                assert max(latencies) < 1.0


async def test_the_graph_endpoint_and_the_stats_are_503_without_neo4j() -> None:
    """No database needed: without the Neo4j mirror these routes say they are unavailable."""
    async with running_server(MIRROR="none") as served, httpx.AsyncClient(base_url=served.base_url) as http:
        created = await create(served)
        answer = await http.get(f"/api/sessions/{created['session_id']}/graph",
                                headers={"authorization": f"Bearer {created['player_token']}"})
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "unavailable"
        assert (await http.get("/api/stats")).status_code == 503
