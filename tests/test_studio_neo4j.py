"""The studio's packs in Neo4j (issue #35, docs/studio.md): the store's numbering and races, and two
`samvad serve` processes on one Neo4j: a version published on one node serves the other's next
session without a restart, a live session keeps its version, and a session rebuilt after a restart
plays the version it started with. Each run uses a scenario id of its own, so that the versions it
publishes change nothing for the other tests sharing the database."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from neo4j import AsyncGraphDatabase
from websockets.asyncio.client import connect

from server.graphdb import GraphDriver
from server.studio.graph import Neo4jPackStore
from server.studio.store import PackConflict, PackNotFound
from tests.neo4j_support import ServerProcess
from tests.test_studio import dearer_tomatoes, shipped

pytestmark = [pytest.mark.neo4j]

ADMIN = "studio-neo4j-admin-" + "n" * 24
AUTH = {"authorization": f"Bearer {ADMIN}"}


def fresh_id() -> str:
    return f"studio-{uuid.uuid4().hex[:10]}"


@pytest.mark.anyio
async def test_the_store_numbers_versions_above_the_shipped_one_and_one_publish_wins(neo4j_uri: str) -> None:
    store = Neo4jPackStore(GraphDriver(neo4j_uri, owned=True), timeout_s=5)
    try:
        scenario = fresh_id()

        def text(n: int) -> str:  # a manifest of this scenario, told apart by its title
            return json.dumps({**shipped(), "scenario": scenario, "title": f"take {n}"})

        assert await store.latest(scenario) == 0
        await store.save_draft(scenario, text(1), 1.0, create=True)
        with pytest.raises(PackConflict):
            await store.save_draft(scenario, text(2), 2.0, create=True)
        # floor 1: as for a shipped pack, whose version 1 is the package's
        first = await store.publish(scenario, 3.0, floor=1)
        assert (first.version, first.manifest) == (2, text(1))
        assert await store.draft(scenario) is None
        with pytest.raises(PackNotFound):
            await store.publish(scenario, 4.0, floor=1)
        # Two publishes of one draft at once: one version, the other is refused.
        await store.save_draft(scenario, text(3), 5.0, create=False)
        results: list[Any] = []

        async def publish() -> None:
            try:
                results.append(await store.publish(scenario, 6.0, floor=1))
            except (PackNotFound, PackConflict) as exc:
                results.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(publish)
            tg.start_soon(publish)
        assert sorted(type(r).__name__ for r in results)[-1] == "StoredVersion"
        assert sum(1 for r in results if not isinstance(r, Exception)) == 1
        back = await store.republish(scenario, 2, 7.0, floor=1)
        assert (back.version, back.from_version, back.manifest) == (4, 2, text(1))
        assert [(v.version, v.manifest) for v in await store.versions(scenario)] == [
            (2, text(1)), (3, text(3)), (4, text(1))]
        assert await store.latest(scenario) == 4  # the auto-commit read sees every committed publish
        assert scenario in await store.scenarios()
        with pytest.raises(PackNotFound):
            await store.republish(scenario, 9, 8.0, floor=1)
    finally:
        await store.graphdb.aclose()


@pytest.fixture
def two_nodes(neo4j_uri: str, tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    nodes = tuple(ServerProcess(tmp_path / f"node{n}.log", NEO4J_URI=neo4j_uri, ADMIN_KEY=ADMIN,
                                KNOWLEDGE_DIR=str(tmp_path / f"k{n}"), SESSION_CREATE_PER_SECOND=1000,
                                SESSION_CREATE_BURST=1000) for n in (1, 2))
    try:
        for node in nodes:
            node.start()
        yield nodes[0], nodes[1]
    finally:
        for node in nodes:
            node.stop()


async def new_session(node: ServerProcess, scenario: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await http.post(f"{node.http}/api/sessions", json={"scenario": scenario})
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


async def quote(node: ServerProcess, created: dict[str, Any]) -> int:
    """Ask for the tomatoes on the session's socket; the vendor's quote."""
    async with connect(f"{node.ws}/ws/sessions/{created['session_id']}?token={created['player_token']}") as ws:
        with anyio.fail_after(10):
            async def until(kind: str, **fields: Any) -> dict[str, Any]:
                while True:
                    frame: dict[str, Any] = json.loads(await ws.recv())
                    if frame["type"] == kind and all(frame.get(k) == v for k, v in fields.items()):
                        return frame

            await until("welcome")
            await ws.send(json.dumps({"type": "scene", "id": "hold", "object_grabbed": "Tomato"}))
            await until("ack", id="hold")
            await ws.send(json.dumps({"type": "transcript", "id": "ask",
                                      "text": "Namaste bhaiya, how much are the tomatoes?"}))
            await until("reply", in_reply_to="ask")
    async with httpx.AsyncClient(timeout=10) as http:
        got = (await http.get(f"{node.http}/api/sessions/{created['session_id']}",
                              headers={"authorization": f"Bearer {created['player_token']}"})).json()
    assert isinstance(got["vendor_quote"], int)
    return int(got["vendor_quote"])


async def admin(node: ServerProcess, method: str, path: str, body: Any = None) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.request(method, f"{node.http}{path}", json=body, headers=AUTH)


async def session_versions(uri: str, ids: list[str]) -> dict[str, int]:
    driver = AsyncGraphDatabase.driver(uri)
    try:
        records, _, _ = await driver.execute_query(
            "UNWIND $ids AS id MATCH (s:Session {session_id: id}) RETURN id, s.scenario_version AS v", ids=ids)
        return {r["id"]: r["v"] for r in records}
    finally:
        await driver.close()


@pytest.mark.anyio
async def test_a_version_published_on_one_node_serves_the_other_and_survives_a_restart(
        neo4j_uri: str, two_nodes: tuple[ServerProcess, ServerProcess]) -> None:
    one, two = two_nodes
    scenario = fresh_id()
    made = await admin(one, "POST", "/api/scenarios", {**shipped(), "scenario": scenario})
    assert made.status_code == 201, made.text
    assert (await admin(one, "POST", f"/api/scenarios/{scenario}/publish")).json()["version"] == 1
    # Node two never saw the scenario: it reads the published version when a session is created.
    early = await new_session(two, scenario)
    untouched = await new_session(two, scenario)  # created at version 1, played only after the restart
    assert await quote(two, early) == 150
    edited = await admin(one, "PUT", f"/api/scenarios/{scenario}",
                         {**dearer_tomatoes(shipped(), 190), "scenario": scenario})
    assert edited.status_code == 200, edited.text
    assert (await admin(one, "POST", f"/api/scenarios/{scenario}/publish")).json()["version"] == 2
    late = await new_session(two, scenario)
    assert await quote(two, late) == 190  # no restart of node two
    listed = (await admin(two, "GET", "/api/scenarios")).json()["scenarios"]
    assert next(p for p in listed if p["id"] == scenario)["version"] == 2
    versions = (await admin(two, "GET", f"/api/scenarios/{scenario}/versions")).json()
    assert [v["version"] for v in versions["versions"]] == [1, 2]
    # The Session nodes name the version each session plays.
    assert await session_versions(neo4j_uri, [early["session_id"], untouched["session_id"], late["session_id"]]) == {
        early["session_id"]: 1, untouched["session_id"]: 1, late["session_id"]: 2}
    # Node two restarts: the session created at version 1 is rebuilt from Neo4j and plays version 1.
    two.stop()
    two.start()
    assert await quote(two, untouched) == 150
    assert await quote(two, await new_session(two, scenario)) == 190
