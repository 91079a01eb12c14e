"""The wiring of the backends (server/wiring.py, server/backends.py): in memory, every part of the mirror's
protocol is there as a no-op; with Neo4j, one driver serves the mirror, learners, playbooks and leases,
and the application's lifespan opens it and closes it."""

from __future__ import annotations

import httpx
import pytest

from server.backends import InMemoryMirror
from server.learners.graph import Neo4jLearnerStore
from server.playbooks import Neo4jPlaybookStore
from tests.servers import create, running_server

pytestmark = pytest.mark.anyio


async def test_in_memory_the_mirror_has_every_part_as_a_no_op() -> None:
    async with running_server() as served, httpx.AsyncClient(base_url=served.base_url) as client:
        assert served.services is not None
        backends = served.services.backends
        assert isinstance(backends.mirror, InMemoryMirror) and backends.graphdb is None and backends.loader is None
        created = await create(served)
        assert created["durable"] is False  # flushed(): never durable
        graph = await client.get(f"/api/sessions/{created['session_id']}/graph",
                                 headers={"authorization": f"Bearer {created['player_token']}"})
        assert graph.status_code == 503 and graph.json()["error"]["code"] == "unavailable"
        assert "NEO4J_URI" in graph.json()["error"]["message"]


@pytest.mark.neo4j
@pytest.mark.slow
async def test_one_neo4j_driver_serves_every_store_and_the_lifespan_closes_it(neo4j_uri: str) -> None:
    settings = {"USE_MOCKS": False, "MIRROR": "neo4j", "NEO4J_URI": neo4j_uri, "BRAIN": "rules",
                "CLUSTER_NODE_ID": "solo"}
    async with running_server(**settings) as served:
        assert served.services is not None
        services = served.services
        graphdb = services.backends.graphdb
        assert graphdb is not None and not graphdb.owned and graphdb.running
        assert services.mirror.graphdb is graphdb  # type: ignore[attr-defined]
        assert isinstance(services.learners.store, Neo4jLearnerStore) and services.learners.store.graphdb is graphdb
        assert isinstance(services.knowledge.store, Neo4jPlaybookStore) and services.knowledge.store.graphdb is graphdb
        assert services.cluster is not None and services.cluster.mirror.graphdb is graphdb  # the leases
        created = await create(served)
        assert created["durable"] is True  # written through the shared driver
        assert services.backends.loader is services.mirror
    assert not graphdb.running  # closed by the lifespan's exit stack, after everything that used it
