"""Failures with the server as a real process: Neo4j going away mid-session, a full write buffer, and
`kill -9` of the server in the middle of a load of resuming clients."""

from __future__ import annotations

import itertools
import json
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest
from websockets.asyncio.client import ClientConnection, connect

from clients.bots.personas import Lowballer, Persona, Polite, Rude, Walker
from clients.bots.resuming import ResumingClient
from server.mirror import Neo4jMirror
from tests import neo4j_control
from tests.neo4j_support import COUNT_TURNS_BY_CLIENT_ID, ServerProcess, free_port, wait_for

pytestmark = pytest.mark.anyio


class Socket:
    """A player socket that records every frame it receives, read by a background task."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.frames: list[dict[str, Any]] = []

    async def pump(self) -> None:
        async for raw in self.ws:
            self.frames.append(orjson.loads(raw))

    async def send(self, frame: dict[str, Any]) -> None:
        await self.ws.send(orjson.dumps(frame).decode())

    def of(self, kind: str, **match: object) -> list[dict[str, Any]]:
        return [f for f in self.frames if f["type"] == kind and all(f.get(k) == v for k, v in match.items())]

    def acked(self, fid: str) -> bool:
        return bool(self.of("ack", id=fid))

    def replied(self, fid: str) -> bool:
        return bool(self.of("reply", in_reply_to=fid))


async def create(http: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as client:
        answer = await client.post(f"{http}/api/sessions", json={"learner_id": "outage"})
        assert answer.status_code == 201, answer.text
        return dict(answer.json())


# No offers: the negotiation stays open however long the test talks.
LINES = ["Namaste bhaiya!", "Aap kaise ho?", "Aaj bazaar mein bheed hai.", "Aapki dukaan kitni purani hai?",
         "Mausam accha hai.", "Aapke bachche kya karte hain?", "Chai piyoge, bhaiya?"]


# ---------------------------------------------------------------------------- Neo4j goes away


@pytest.mark.neo4j
@pytest.mark.slow
async def test_play_continues_while_neo4j_is_down_and_nothing_is_lost_when_it_returns(
        neo4j_uri: str, tmp_path: Path) -> None:
    neo4j_control.instance_env()  # learn the data directory while Neo4j runs
    server = ServerProcess(tmp_path / "server.log", NEO4J_URI=neo4j_uri, NEO4J_TIMEOUT_MS=1000, MIRROR_FLUSH_MS=10,
                           MIRROR_BUFFER_CHANGES=8)
    server.start()
    try:
        created = await create(server.http)
        sid, token = created["session_id"], created["player_token"]
        async with connect(f"{server.ws}/ws/sessions/{sid}?token={token}") as ws, anyio.create_task_group() as tg:
            sock = Socket(ws)
            tg.start_soon(sock.pump)
            for n in (1, 2):  # Neo4j up: every frame is acknowledged
                await sock.send({"type": "transcript", "id": f"t{n}", "text": LINES[n - 1]})
                await wait_for(lambda n=n: sock.acked(f"t{n}") and sock.replied(f"t{n}"), 10, f"t{n}")  # type: ignore[misc]
            await anyio.to_thread.run_sync(neo4j_control.stop)
            try:
                # Neo4j down: replies keep coming, acknowledgements wait. 5 changes were stored; the
                # buffer holds 8, so four more turns (two changes each) fill it.
                for n in (3, 4, 5, 6):
                    await sock.send({"type": "transcript", "id": f"t{n}", "text": LINES[n - 1]})
                    await wait_for(lambda n=n: sock.replied(f"t{n}"), 10, f"the reply to t{n}")  # type: ignore[misc]
                await anyio.sleep(1.5)
                assert not any(sock.acked(f"t{n}") for n in (3, 4, 5, 6))
                health = server.health()
                assert health["status"] == "degraded" and health["mirror"]["buffer_full"] is True, health["mirror"]
                assert health["mirror"]["connected"] is False and health["mirror"]["queue_depth"] == 8
                assert health["mirror"]["failures"] >= 1 and health["mirror"]["last_error"]
                # Full: a new frame is refused, not applied.
                await sock.send({"type": "transcript", "id": "t7", "text": LINES[6]})
                await wait_for(lambda: sock.of("error", id="t7"), 5, "t7 to be refused")
                assert sock.of("error", id="t7")[0]["code"] == "unavailable" and not sock.replied("t7")
            finally:
                await anyio.to_thread.run_sync(neo4j_control.start)
            await wait_for(lambda: all(sock.acked(f"t{n}") for n in (3, 4, 5, 6)), 30, "the paused acks")
            await wait_for(lambda: server.health()["status"] == "ok", 10, "health to recover", every=0.2)
            await sock.send({"type": "transcript", "id": "t7", "text": LINES[6]})  # the same id, re-sent
            await wait_for(lambda: sock.acked("t7") and sock.replied("t7"), 10, "t7 to be applied")
            health = server.health()["mirror"]
            assert health["queue_depth"] == 0 and health["connected"] is True and health["buffer_full"] is False
            tg.cancel_scope.cancel()
        async with httpx.AsyncClient() as client:
            graph = (await client.get(f"{server.http}/api/sessions/{sid}/graph",
                                      headers={"authorization": f"Bearer {token}"})).json()
        users = [t["client_id"] for t in graph["turns"] if t["role"] == "user"]
        assert users == [f"t{n}" for n in range(1, 8)]  # each turn exactly once, in order
        assert graph["chains"] == 1 and [t["ordinal"] for t in graph["turns"]] == list(range(1, 15))
        log = server.log()
        assert log.count("Neo4j mirror buffer is FULL") == 1 and "Neo4j writes resumed" in log
    finally:
        server.stop()
        if not neo4j_control.running():
            neo4j_control.start()


# ---------------------------------------------------------------------------- Neo4j hangs


@pytest.mark.neo4j
@pytest.mark.slow
async def test_a_hung_neo4j_times_out_play_goes_on_and_every_turn_is_stored_once_after_it_wakes(
        neo4j_uri: str, tmp_path: Path) -> None:
    # A stopped process is worse than a dead one: the connection stays open and a write sent to it
    # neither fails nor finishes. The mirror must give up on it by its own clock and write again later,
    # and the write that hung, which Neo4j may still commit when it wakes, must not store a turn twice.
    neo4j_control.instance_env()
    server = ServerProcess(tmp_path / "server.log", NEO4J_URI=neo4j_uri, NEO4J_TIMEOUT_MS=500, MIRROR_FLUSH_MS=10)
    server.start()
    try:
        created = await create(server.http)
        sid, token = created["session_id"], created["player_token"]
        async with connect(f"{server.ws}/ws/sessions/{sid}?token={token}") as ws, anyio.create_task_group() as tg:
            sock = Socket(ws)
            tg.start_soon(sock.pump)
            await sock.send({"type": "transcript", "id": "t1", "text": LINES[0]})
            await wait_for(lambda: sock.acked("t1") and sock.replied("t1"), 10, "t1")
            failures_before = server.health()["mirror"]["failures"]
            neo4j_control.freeze()
            try:
                for n in (2, 3, 4):
                    await sock.send({"type": "transcript", "id": f"t{n}", "text": LINES[n - 1]})
                    await wait_for(lambda n=n: sock.replied(f"t{n}"), 5, f"the reply to t{n}")  # type: ignore[misc]
                # Past the write's own limit (2 x 0.5 s + 1 s): the mirror has given up on the hung write.
                await wait_for(lambda: server.health()["mirror"]["failures"] > failures_before, 15,
                               "the hung write to time out", every=0.2)
                assert not any(sock.acked(f"t{n}") for n in (2, 3, 4))
                mirror = server.health()["mirror"]
                assert mirror["queue_depth"] >= 6 and "Timeout" in mirror["last_error"], mirror
                await sock.send({"type": "ping"})
                await wait_for(lambda: sock.of("pong"), 5, "a pong while Neo4j hangs")
            finally:
                neo4j_control.thaw()
            await wait_for(lambda: all(sock.acked(f"t{n}") for n in (2, 3, 4)), 60, "the paused acks")
            await sock.send({"type": "transcript", "id": "t5", "text": LINES[4]})
            await wait_for(lambda: sock.acked("t5") and sock.replied("t5"), 10, "t5")
            assert server.health()["mirror"]["queue_depth"] == 0
            tg.cancel_scope.cancel()
        async with httpx.AsyncClient() as client:
            graph = (await client.get(f"{server.http}/api/sessions/{sid}/graph",
                                      headers={"authorization": f"Bearer {token}"})).json()
        users = [t["client_id"] for t in graph["turns"] if t["role"] == "user"]
        assert users == ["t1", "t2", "t3", "t4", "t5"]  # each exactly once, in order
        assert graph["chains"] == 1 and [t["ordinal"] for t in graph["turns"]] == list(range(1, 11))
    finally:
        server.stop()
        neo4j_control.thaw()  # never leave the shared Neo4j stopped


# ---------------------------------------------------------------------------- a full buffer, no database at all


async def test_a_full_buffer_refuses_frames_with_unavailable_and_health_says_degraded(tmp_path: Path) -> None:
    dead = free_port()  # nothing listens here
    server = ServerProcess(tmp_path / "server.log", NEO4J_URI=f"bolt://127.0.0.1:{dead}", NEO4J_TIMEOUT_MS=300,
                           MIRROR_BUFFER_CHANGES=4)
    server.start()
    try:
        created = await create(server.http)  # change 1
        sid, token = created["session_id"], created["player_token"]
        async with connect(f"{server.ws}/ws/sessions/{sid}?token={token}") as ws, anyio.create_task_group() as tg:
            sock = Socket(ws)
            tg.start_soon(sock.pump)
            await sock.send({"type": "scene", "id": "s1", "object_grabbed": "Tomato"})  # change 2
            await sock.send({"type": "transcript", "id": "t1", "text": "Namaste, tamatar kitne ka?"})  # 3 and 4
            await wait_for(lambda: sock.replied("t1"), 10, "the reply to t1")
            for fid, frame in (("t2", {"type": "transcript", "text": "Bahut mehenga"}),
                               ("s2", {"type": "scene", "object_grabbed": "Apple"}),
                               ("t2", {"type": "transcript", "text": "Bahut mehenga"})):
                await sock.send({**frame, "id": fid})
            await wait_for(lambda: len(sock.of("error", code="unavailable")) == 3, 10, "three refusals")
            assert [e["id"] for e in sock.of("error")] == ["t2", "s2", "t2"]
            assert not sock.replied("t2")
            assert sock.of("ack") == []  # nothing was durable, so nothing was acknowledged
            tg.cancel_scope.cancel()
        health = server.health()
        assert health["status"] == "degraded"
        assert health["mirror"]["buffer_full"] is True and health["mirror"]["queue_depth"] == 4
        assert health["mirror"]["connected"] is False and "ServiceUnavailable" in health["mirror"]["last_error"]
        async with httpx.AsyncClient() as client:
            refused = await client.post(f"{server.http}/api/sessions", json={})
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "unavailable"
        warnings = [json.loads(line) for line in server.log().splitlines()
                    if line.startswith("{") and "buffer is FULL" in line]
        assert len(warnings) == 1 and warnings[0]["level"] == "WARNING"  # once per episode, not per frame
    finally:
        server.stop()


# ---------------------------------------------------------------------------- kill -9 mid-load


PERSONAS: list[tuple[type[Persona], str]] = [(Polite, "Tomato"), (Walker, "Apple"), (Lowballer, "Orange"),
                                             (Rude, "Pumpkin"), (Polite, "Watermelon"), (Walker, "Tomato")]


@pytest.mark.neo4j
@pytest.mark.slow
async def test_kill_9_mid_load_loses_no_acknowledged_turn_and_applies_every_resent_one_once(
        neo4j_uri: str, tmp_path: Path) -> None:
    # Acks trail replies by ~150 ms here, so at any moment some transcripts are applied but unacknowledged.
    server = ServerProcess(tmp_path / "server.log", NEO4J_URI=neo4j_uri, MIRROR_FLUSH_MS=150)
    server.start()
    run = uuid.uuid4().hex[:8]
    clients = [
        ResumingClient(server.http, server.ws, persona(item), tag=f"{run}-{i}", think=0.08, item=item)
        for i, (persona, item) in zip(range(18), itertools.cycle(PERSONAS), strict=False)
    ]
    try:
        for client in clients:
            await client.create()
        async with anyio.create_task_group() as tg:
            for client in clients:
                tg.start_soon(client.run, 90.0)

            def mid_load() -> bool:
                busy = [c for c in clients if not c.finished]
                acked = sum(1 for c in clients for fid in c.transcripts if c.sent[fid].acked)
                return (acked >= 2 * len(clients) and len(busy) >= len(clients) // 2
                        and any(fid for c in busy for fid in c.unacked() if "-t" in fid))

            await wait_for(mid_load, 30, "the load to be under way", every=0.005)
            server.kill9()  # synchronous: no ack can slip in between the check and the kill
            unacked_at_kill = {c.tag: [f for f in c.unacked() if "-t" in f] for c in clients}
            unfinished_at_kill = [c.tag for c in clients if not c.finished]
            await anyio.sleep(0.3)
            await anyio.to_thread.run_sync(server.start)
        # Every client finished, with every frame acknowledged.
        resent = [fid for ids in unacked_at_kill.values() for fid in ids]
        assert resent, "some transcripts were unacknowledged at the kill"
        by_tag = {c.tag: c for c in clients}
        # Re-sent after the restart and applied then (not just found applied already).
        assert any(by_tag[fid.rsplit("-t", 1)[0]].sent[fid].duplicate is False for fid in resent)
        async with httpx.AsyncClient() as http:
            for client in clients:
                assert client.finished and client.unacked() == []
                assert client.gaps == 0 and client.contiguous(), client.applied
                if client.tag in unfinished_at_kill:
                    assert client.epoch >= 2  # reconnected and resumed
                for fid in unacked_at_kill[client.tag]:
                    assert client.sent[fid].acked and client.sent[fid].acked_epoch >= 2  # type: ignore[operator]
                # Tokens issued before the restart still work, and the graph holds each transcript once.
                answer = await http.get(f"{server.http}/api/sessions/{client.session_id}/graph",
                                        headers={"authorization": f"Bearer {client.token}"})
                assert answer.status_code == 200, answer.text
                graph = answer.json()
                users = [t["client_id"] for t in graph["turns"] if t["role"] == "user" and not t["closing"]]
                assert users == client.transcripts, (client.tag, users, client.transcripts)
                assert graph["chains"] == 1
                assert [t["ordinal"] for t in graph["turns"]] == list(range(1, len(graph["turns"]) + 1))
                session = graph["session"]
                assert session["last_seq"] == client.last_seq and session["turn_count"] == client.view.turn
                assert session["negotiation_state"] == client.view.stage and session["outcome"]
                assert f"{client.tag}-scene" in session["accepted_ids"]
                state = await http.get(f"{server.http}/api/sessions/{client.session_id}",
                                       headers={"authorization": f"Bearer {client.token}"})
                assert state.status_code == 200 and state.json()["seq"] == client.last_seq
        async with Neo4jMirror(neo4j_uri) as mirror:
            for client in clients:
                counts = await mirror.read(COUNT_TURNS_BY_CLIENT_ID, ids=client.transcripts,
                                           session_id=client.session_id)
                assert {r["id"]: r["turns"] for r in counts} == dict.fromkeys(client.transcripts, 1)
        assert "session recovered" in server.log()
    finally:
        server.stop()


# ---------------------------------------------------------------------------- a write that committed late


def test_a_constraint_clash_after_a_timeout_is_a_warning_and_any_other_is_an_error(
        caplog: pytest.LogCaptureFixture) -> None:
    from neo4j.exceptions import Neo4jError

    mirror = Neo4jMirror("bolt://127.0.0.1:1")  # never opened: only its bookkeeping is used
    clash = Neo4jError._hydrate_neo4j(code="Neo.ClientError.Schema.ConstraintValidationFailed",
                                      message="Node(7) already exists with label `Turn` and property `turn_key`")
    with caplog.at_level("WARNING", logger="samvad.mirror"):
        mirror._failed(clash, 1, after_timeout=True)  # the attempt before it timed out
        mirror._failed(clash, 0)  # no timeout before: a real refusal
    levels = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "samvad.mirror"]
    assert levels[0][0] == "WARNING" and "committed after its timeout" in levels[0][1]
    assert levels[1][0] == "ERROR" and "refused a batch" in levels[1][1]
    assert mirror.failures == 2 and "ConstraintError" in mirror.last_error
