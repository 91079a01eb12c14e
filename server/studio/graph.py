"""Studio packs in Neo4j, beside the mirror: `Neo4jPackStore`, the `PackStore` every node of a
cluster shares, so a version published on one node serves new sessions on all of them.

The graph:

    (:ScenarioVersion {key, scenario, version, manifest, published_at, from_version})
    (:ScenarioDraft {scenario, manifest, updated_at})

`key` is `<scenario>:<version>`, unique: two nodes publishing at once cannot both take a number
(the loser's transaction fails on the constraint and is answered 409). Publishing reads the draft,
numbers the version above every stored one and above `$floor` (1 for a shipped pack), creates it
and deletes the draft, in one write transaction. The Session node's `scenario_version` names the
version a session plays; a session rebuilt after a restart finds its manifest by the same key
(server/mirror/reads.py). Every statement takes its values as parameters.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction
from neo4j.exceptions import ConstraintError, Neo4jError

from server.graphdb import GraphDriver
from server.studio.store import PackConflict, PackNotFound, PackStoreError, StoredDraft, StoredVersion

__all__ = ["STUDIO_SCHEMA", "Neo4jPackStore"]

# Also run with the mirror's schema at start-up (server/mirror/schema.py): a rebuild looks versions up.
STUDIO_SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT samvad_scenario_version_key IF NOT EXISTS FOR (v:ScenarioVersion) REQUIRE v.key IS UNIQUE",
    "CREATE CONSTRAINT samvad_scenario_draft IF NOT EXISTS FOR (d:ScenarioDraft) REQUIRE d.scenario IS UNIQUE",
    "CREATE INDEX samvad_scenario_version_scenario IF NOT EXISTS FOR (v:ScenarioVersion) ON (v.scenario)",
)

LATEST: LiteralString = """
MATCH (v:ScenarioVersion {scenario: $scenario})
RETURN coalesce(max(v.version), 0) AS latest
"""

VERSION: LiteralString = """
MATCH (v:ScenarioVersion {key: $key})
RETURN v {.*} AS v
"""

VERSIONS: LiteralString = """
MATCH (v:ScenarioVersion {scenario: $scenario})
RETURN v {.*} AS v ORDER BY v.version
"""

DRAFT: LiteralString = """
MATCH (d:ScenarioDraft {scenario: $scenario})
RETURN d {.*} AS d
"""

SCENARIOS: LiteralString = """
CALL () { MATCH (v:ScenarioVersion) RETURN v.scenario AS scenario
          UNION MATCH (d:ScenarioDraft) RETURN d.scenario AS scenario }
RETURN DISTINCT scenario ORDER BY scenario
"""

EXISTS: LiteralString = """
OPTIONAL MATCH (d:ScenarioDraft {scenario: $scenario})
OPTIONAL MATCH (v:ScenarioVersion {scenario: $scenario})
RETURN count(d) + count(v) AS found
"""

SAVE_DRAFT: LiteralString = """
MERGE (d:ScenarioDraft {scenario: $scenario})
SET d.manifest = $manifest, d.updated_at = $now
"""

# The next number: above every stored version and above `$floor` (a shipped pack is version 1).
NEXT: LiteralString = """
OPTIONAL MATCH (v:ScenarioVersion {scenario: $scenario})
WITH coalesce(max(v.version), 0) AS highest
RETURN CASE WHEN highest > $floor THEN highest ELSE $floor END + 1 AS next
"""

CREATE: LiteralString = """
CREATE (v:ScenarioVersion {key: $scenario + ':' + toString($version), scenario: $scenario, version: $version,
                           manifest: $manifest, published_at: $now, from_version: $from_version})
"""

DELETE_DRAFT: LiteralString = """
MATCH (d:ScenarioDraft {scenario: $scenario})
DELETE d
"""


def version_key(scenario: str, version: int) -> str:
    return f"{scenario}:{version}"


def _version(row: dict[str, Any]) -> StoredVersion:
    return StoredVersion(scenario=row["scenario"], version=int(row["version"]), manifest=row["manifest"],
                         published_at=float(row["published_at"]), from_version=row.get("from_version"))


async def _single(tx: AsyncManagedTransaction, statement: LiteralString, **params: Any) -> Any:
    return await (await tx.run(statement, params)).single()


class Neo4jPackStore:
    """The studio's packs on the server's one Neo4j driver (shared with the mirror)."""

    def __init__(self, graphdb: GraphDriver, *, timeout_s: float = 2.0) -> None:
        self.graphdb = graphdb
        self.timeout_s = timeout_s

    async def _run(self, work: Callable[[AsyncManagedTransaction], Awaitable[Any]], *, write: bool = False) -> Any:
        return await self._call(self._run_here(work, write))

    async def _call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """`coro` where the driver lives, with the driver's failures as this store's."""
        try:
            return await self.graphdb.call(coro)
        except ConstraintError as exc:
            raise PackConflict("another publish took this version number; try again") from exc
        except (Neo4jError, OSError) as exc:
            raise PackStoreError(f"the pack store is unreachable: {exc}") from exc
        except Exception as exc:  # the driver's own (ServiceUnavailable, SessionExpired): not ours to name
            if type(exc).__module__.startswith("neo4j"):
                raise PackStoreError(f"the pack store is unreachable: {exc}") from exc
            raise

    async def _run_here(self, work: Callable[[AsyncManagedTransaction], Awaitable[Any]], write: bool) -> Any:
        return await self.graphdb.transact_here(work, write=write, schema=STUDIO_SCHEMA, timeout_s=self.timeout_s)

    async def latest(self, scenario: str) -> int:
        # Asked on every session's creation (server/studio/catalog.py): one auto-commit read.
        record = await self._call(self.graphdb.read_one_here(LATEST, {"scenario": scenario}, schema=STUDIO_SCHEMA))
        return int(record["latest"]) if record is not None else 0

    async def version(self, scenario: str, number: int) -> StoredVersion | None:
        record = await self._run(lambda tx: _single(tx, VERSION, key=version_key(scenario, number)))
        return None if record is None else _version(record["v"])

    async def versions(self, scenario: str) -> list[StoredVersion]:
        async def work(tx: AsyncManagedTransaction) -> list[StoredVersion]:
            return [_version(r["v"]) async for r in await tx.run(VERSIONS, scenario=scenario)]

        return await self._run(work)  # type: ignore[no-any-return]

    async def draft(self, scenario: str) -> StoredDraft | None:
        record = await self._run(lambda tx: _single(tx, DRAFT, scenario=scenario))
        if record is None:
            return None
        d = record["d"]
        return StoredDraft(scenario=d["scenario"], manifest=d["manifest"], updated_at=float(d["updated_at"]))

    async def scenarios(self) -> list[str]:
        async def work(tx: AsyncManagedTransaction) -> list[str]:
            return [r["scenario"] async for r in await tx.run(SCENARIOS)]

        return await self._run(work)  # type: ignore[no-any-return]

    async def save_draft(self, scenario: str, manifest: str, now: float, *, create: bool) -> None:
        async def work(tx: AsyncManagedTransaction) -> None:
            if create and int((await _single(tx, EXISTS, scenario=scenario))["found"]):
                raise PackConflict(f"{scenario!r} exists already")
            await (await tx.run(SAVE_DRAFT, scenario=scenario, manifest=manifest, now=now)).consume()

        await self._run(work, write=True)

    async def _add(self, tx: AsyncManagedTransaction, scenario: str, manifest: str, now: float, floor: int,
                   from_version: int | None) -> StoredVersion:
        number = int((await _single(tx, NEXT, scenario=scenario, floor=floor))["next"])
        await (await tx.run(CREATE, scenario=scenario, version=number, manifest=manifest, now=now,
                            from_version=from_version)).consume()
        return StoredVersion(scenario=scenario, version=number, manifest=manifest, published_at=now,
                             from_version=from_version)

    async def publish(self, scenario: str, now: float, *, floor: int) -> StoredVersion:
        async def work(tx: AsyncManagedTransaction) -> StoredVersion:
            record = await _single(tx, DRAFT, scenario=scenario)
            if record is None:
                raise PackNotFound(f"{scenario!r} has no draft to publish")
            stored = await self._add(tx, scenario, record["d"]["manifest"], now, floor, None)
            await (await tx.run(DELETE_DRAFT, scenario=scenario)).consume()
            return stored

        return await self._run(work, write=True)  # type: ignore[no-any-return]

    async def republish(self, scenario: str, number: int, now: float, *, floor: int,
                        manifest: str | None = None) -> StoredVersion:
        async def work(tx: AsyncManagedTransaction) -> StoredVersion:
            text = manifest
            if text is None:
                record = await _single(tx, VERSION, key=version_key(scenario, number))
                if record is None:
                    raise PackNotFound(f"{scenario!r} has no version {number}")
                text = record["v"]["manifest"]
            return await self._add(tx, scenario, text, now, floor, number)

        return await self._run(work, write=True)  # type: ignore[no-any-return]
