from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def neo4j_uri() -> str:
    """The test Neo4j's Bolt URI (SAMVAD_TEST_NEO4J_URI); skips without it, fails without it in CI."""
    from tests.neo4j_support import neo4j_uri as uri

    return uri()
