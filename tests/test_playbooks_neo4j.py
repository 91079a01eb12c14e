"""Playbooks stored in the real Neo4j: versions, one active, 409, replace, citations, a restart."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import anyio
import httpx
import pytest
from neo4j import GraphDatabase

from brain.knowledge.library import KnowledgeLibrary
from brain.knowledge.store import PlaybookConflict
from server.playbooks import Neo4jPlaybookStore
from tests.servers import running_server

pytestmark = [pytest.mark.neo4j]

ADMIN = "teacher-key-" + "n" * 24
GOLD = b"""Q: Does Ramesh sell on credit?
A: Ramesh writes regulars into a green ledger and they settle every Sunday after the temple.

Q: What does the red thread on the scale mean?
A: The red thread marks the scale Ramesh trusts for saffron and silver.
"""
FORGET = "MATCH (p:Playbook {scenario: $scenario}) OPTIONAL MATCH (p)-[:HAS_CHUNK]->(c:Chunk) DETACH DELETE p, c"


def forget(uri: str, scenario: str) -> None:
    with GraphDatabase.driver(uri, auth=None) as driver, driver.session() as session:
        session.run(FORGET, scenario=scenario).consume()


@pytest.fixture
def store(neo4j_uri: str) -> Iterator[Neo4jPlaybookStore]:
    opened = Neo4jPlaybookStore(neo4j_uri, user="neo4j", password="", timeout_s=5.0)
    yield opened
    opened.close()


def test_versions_one_active_conflict_replace_and_old_citations(neo4j_uri: str, store: Neo4jPlaybookStore) -> None:
    scenario = f"test-{uuid.uuid4().hex[:12]}"
    try:
        library = KnowledgeLibrary(store)
        first = library.ingest(scenario, "gold.md", GOLD, replace=False)
        assert first.version == "v1" and len(first.chunks) == 2
        assert store.active(scenario) == first
        with pytest.raises(PlaybookConflict):
            library.ingest(scenario, "other.md", b"Something else.", replace=False)
        assert store.active(scenario) == first  # the refused upload changed nothing
        second = library.ingest(scenario, "other.md", b"Bring small notes.\n\n" + GOLD.split(b"\n\n")[0],
                                replace=True)
        assert second.version == "v2" and store.active(scenario) == second
        assert scenario in store.scenarios()
        # The shared paragraph keeps its id in both versions; each version keeps its own metadata.
        assert second.chunks[1].chunk_id == first.chunks[0].chunk_id
        old = first.chunks[1]
        assert store.chunk(scenario, old.chunk_id) == old
        assert store.chunk(scenario, second.chunks[1].chunk_id).metadata.playbook_version == "v2"  # type: ignore[union-attr]
        # A new store over the same database (a restart) sees the same active version.
        reborn = Neo4jPlaybookStore(neo4j_uri, user="neo4j", password="", timeout_s=5.0)
        try:
            assert reborn.active(scenario) == second
            assert reborn.next_version(scenario) == "v3"
        finally:
            reborn.close()
    finally:
        forget(neo4j_uri, scenario)


@pytest.mark.anyio
async def test_an_upload_through_the_server_survives_a_restart(neo4j_uri: str) -> None:
    await anyio.to_thread.run_sync(forget, neo4j_uri, "jaipur-bazaar")
    settings = {"USE_MOCKS": False, "MIRROR": "neo4j", "NEO4J_URI": neo4j_uri, "BRAIN": "rules", "ADMIN_KEY": ADMIN}
    try:
        async with running_server(**settings) as served, httpx.AsyncClient(base_url=served.base_url) as client:
            created = await client.post("/api/scenarios/jaipur-bazaar/knowledge", files={"file": ("gold.txt", GOLD)},
                                        headers={"authorization": f"Bearer {ADMIN}"})
            assert created.status_code == 201, created.text
            ledger_chunk = created.json()["chunks"][0]["chunk_id"]
        async with running_server(**settings) as served, httpx.AsyncClient(base_url=served.base_url) as client:
            hits = (await client.post("/retrieve", json={"query": "does Ramesh sell on credit, the ledger?"},
                                      headers={"authorization": f"Bearer {ADMIN}"})).json()
            assert hits["chunks"][0]["chunk_id"] == ledger_chunk
            again = await client.post("/api/scenarios/jaipur-bazaar/knowledge", files={"file": ("x.txt", b"x y z")},
                                      headers={"authorization": f"Bearer {ADMIN}"})
            assert again.status_code == 409
    finally:
        await anyio.to_thread.run_sync(forget, neo4j_uri, "jaipur-bazaar")
