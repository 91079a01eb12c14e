"""Uploaded playbooks in Neo4j, when the mirror is on: the `PlaybookStore` of `brain.knowledge`.

The graph:

    (:Playbook {playbook_id, scenario, version, number, active, source_file, sha256, ingested_at})
        -[:HAS_CHUNK {position}]->
    (:Chunk {key, chunk_id, text_content, source_file, ingested_at, section, playbook_version})

A chunk's `key` is `<playbook_id>:<chunk_id>`: the same paragraph in two versions of a playbook has
the same `chunk_id` (ids come from the text) but its own node, with its own version's metadata.
One playbook per scenario has `active: true`. `add` runs in one write transaction: it checks for an
active playbook (and refuses unless replacing), deactivates it, and writes the new one with its
chunks, so a failed upload leaves the graph as it was. Old versions stay, for reports that cite
them. Every statement takes its values as parameters.

The store's methods are synchronous and called from worker threads (the library's callers are); each
runs its transaction on the server's one Neo4j driver (`server.graphdb.GraphDriver`, shared with the
mirror) and waits for it, apart from the mirror's write-behind queue: uploads are rare and must
answer, not wait behind session writes. A store built on its own makes a driver of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction

from brain.knowledge.store import PlaybookConflict
from schemas.knowledge import Chunk, ChunkMeta, Playbook
from server.config import Settings
from server.graphdb import GraphDriver

__all__ = ["Neo4jPlaybookStore"]

SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT playbook_id IF NOT EXISTS FOR (p:Playbook) REQUIRE p.playbook_id IS UNIQUE",
    "CREATE CONSTRAINT chunk_key IF NOT EXISTS FOR (c:Chunk) REQUIRE c.key IS UNIQUE",
    "CREATE INDEX playbook_scenario IF NOT EXISTS FOR (p:Playbook) ON (p.scenario, p.active)",
    "CREATE INDEX chunk_id IF NOT EXISTS FOR (c:Chunk) ON (c.chunk_id)",
)

ACTIVE: LiteralString = """
MATCH (p:Playbook {scenario: $scenario, active: true})
OPTIONAL MATCH (p)-[r:HAS_CHUNK]->(c:Chunk)
WITH p, r, c ORDER BY r.position
RETURN p {.*} AS playbook, [x IN collect(c {.*}) WHERE x IS NOT NULL] AS chunks
"""

VERSIONS: LiteralString = """
MATCH (p:Playbook {scenario: $scenario})
RETURN coalesce(max(p.number), 0) AS highest
"""

DEACTIVATE: LiteralString = """
MATCH (p:Playbook {scenario: $scenario, active: true})
SET p.active = false
"""

CREATE: LiteralString = """
CREATE (p:Playbook {playbook_id: $playbook_id, scenario: $scenario, version: $version, number: $number,
                    active: true, source_file: $source_file, sha256: $sha256, ingested_at: $ingested_at})
WITH p
UNWIND $chunks AS chunk
CREATE (p)-[:HAS_CHUNK {position: chunk.position}]->(:Chunk {
    key: $playbook_id + ':' + chunk.chunk_id, chunk_id: chunk.chunk_id, text_content: chunk.text_content,
    source_file: chunk.source_file, ingested_at: chunk.ingested_at, section: chunk.section,
    playbook_version: chunk.playbook_version})
"""

CHUNK: LiteralString = """
MATCH (p:Playbook {scenario: $scenario})-[:HAS_CHUNK]->(c:Chunk {chunk_id: $chunk_id})
RETURN c {.*} AS chunk ORDER BY p.number DESC LIMIT 1
"""

SCENARIOS: LiteralString = "MATCH (p:Playbook {active: true}) RETURN DISTINCT p.scenario AS scenario ORDER BY scenario"


def _chunk(row: dict[str, Any]) -> Chunk:
    return Chunk(chunk_id=row["chunk_id"], text_content=row["text_content"], metadata=ChunkMeta(
        source_file=row["source_file"], ingested_at=row["ingested_at"], section=row.get("section") or "",
        playbook_version=row.get("playbook_version") or ""))


async def _single(tx: AsyncManagedTransaction, statement: LiteralString, **params: Any) -> Any:
    return await (await tx.run(statement, params)).single()


async def _active(tx: AsyncManagedTransaction, scenario: str) -> Playbook | None:
    record = await _single(tx, ACTIVE, scenario=scenario)
    if record is None:
        return None
    p = record["playbook"]
    return Playbook(scenario=p["scenario"], version=p["version"], playbook_id=p["playbook_id"],
                    source_file=p["source_file"], sha256=p["sha256"], ingested_at=p["ingested_at"],
                    chunks=tuple(_chunk(c) for c in record["chunks"]))


class Neo4jPlaybookStore:
    def __init__(self, uri: str = "", *, user: str = "neo4j", password: str = "", timeout_s: float = 2.0,
                 graphdb: GraphDriver | None = None) -> None:
        self.timeout_s = timeout_s
        self.graphdb = graphdb or GraphDriver(uri, auth=(user, password) if password else None, timeout_s=timeout_s,
                                              owned=True)

    @classmethod
    def from_settings(cls, settings: Settings, graphdb: GraphDriver | None = None) -> Neo4jPlaybookStore:
        return cls(settings.NEO4J_URI, user=settings.NEO4J_USER, password=settings.NEO4J_PASSWORD,
                   timeout_s=settings.NEO4J_TIMEOUT_MS / 1000, graphdb=graphdb)

    def close(self) -> None:
        """Close the driver if this store made it; a shared one is the application's to close."""
        if self.graphdb.owned:
            self.graphdb.call_blocking_close()

    def _run(self, work: Callable[[AsyncManagedTransaction], Awaitable[Any]], *, write: bool = False) -> Any:
        """`work(tx)` in a managed transaction (with the driver's retries), where the driver lives."""
        return self.graphdb.call_blocking(self._run_here(work, write))

    async def _run_here(self, work: Callable[[AsyncManagedTransaction], Awaitable[Any]], write: bool) -> Any:
        return await self.graphdb.transact_here(work, write=write, schema=SCHEMA, timeout_s=self.timeout_s)

    def active(self, scenario: str) -> Playbook | None:
        return self._run(lambda tx: _active(tx, scenario))  # type: ignore[no-any-return]

    def next_version(self, scenario: str) -> str:
        record = self._run(lambda tx: _single(tx, VERSIONS, scenario=scenario))
        return f"v{int(record['highest']) + 1}"

    def add(self, playbook: Playbook, *, replace: bool) -> None:
        async def work(tx: AsyncManagedTransaction) -> None:
            current = await _active(tx, playbook.scenario)
            if current is not None and not replace:
                raise PlaybookConflict(current)
            await (await tx.run(DEACTIVATE, scenario=playbook.scenario)).consume()
            await (await tx.run(
                CREATE, playbook_id=playbook.playbook_id, scenario=playbook.scenario,
                version=playbook.version, number=int(playbook.version.lstrip("v")),
                source_file=playbook.source_file, sha256=playbook.sha256, ingested_at=playbook.ingested_at,
                chunks=[{"position": i, "chunk_id": c.chunk_id, "text_content": c.text_content,
                         **c.metadata.model_dump()} for i, c in enumerate(playbook.chunks)])).consume()

        self._run(work, write=True)

    def chunk(self, scenario: str, chunk_id: str) -> Chunk | None:
        record = self._run(lambda tx: _single(tx, CHUNK, scenario=scenario, chunk_id=chunk_id))
        return None if record is None else _chunk(record["chunk"])

    def scenarios(self) -> list[str]:
        async def work(tx: AsyncManagedTransaction) -> list[str]:
            return [r["scenario"] async for r in await tx.run(SCENARIOS)]

        return self._run(work)  # type: ignore[no-any-return]
