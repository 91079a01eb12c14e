"""Classes and assignments in Neo4j, and the class page's figures read from the session graph.

    (:Class {class_id, name, teacher_id, learner_ids, created_at})-[:SETS]->
        (:Assignment {assignment_id, class_id, spec, created_at})

`learner_ids` is a list property, not a link to `:Learner`: a learner is added by id before they
have played, and a `:Learner` node stands for a profile (server/learners/cypher.py). The figures
seek the Class by its unique constraint and each learner's sessions by the `Session.learner_id`
index (tests/test_classes_neo4j.py checks the plan with EXPLAIN). Every value is a parameter;
every Neo4j or network failure becomes `ClassStoreError` here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, LiteralString

from neo4j import AsyncManagedTransaction
from neo4j.exceptions import DriverError, Neo4jError

from server.classes.core import MAX_ASSIGNMENTS, MAX_LEARNERS, AssignmentIn, Played, StoredAssignment, StoredClass
from server.classes.store import ClassFull, ClassStoreError
from server.graphdb import GraphDriver

__all__ = ["CLASS_SCHEMA", "CLASS_SESSIONS", "Neo4jClassStore"]

CLASS_SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT samvad_class_id IF NOT EXISTS FOR (c:Class) REQUIRE c.class_id IS UNIQUE",
    "CREATE INDEX samvad_class_teacher IF NOT EXISTS FOR (c:Class) ON (c.teacher_id)",
    "CREATE CONSTRAINT samvad_assignment_id IF NOT EXISTS FOR (a:Assignment) REQUIRE a.assignment_id IS UNIQUE",
    "CREATE INDEX samvad_session_learner IF NOT EXISTS FOR (s:Session) ON (s.learner_id)",
)

CREATE_CLASS: LiteralString = """
CREATE (:Class {class_id: $class_id, name: $name, teacher_id: $teacher_id, learner_ids: [], created_at: $now})
"""

GET_CLASS: LiteralString = "MATCH (c:Class {class_id: $class_id}) RETURN c {.*} AS c"

CLASSES_OF: LiteralString = """
MATCH (c:Class {teacher_id: $teacher_id}) RETURN c {.*} AS c ORDER BY c.created_at, c.class_id
"""

ALL_CLASSES: LiteralString = "MATCH (c:Class) RETURN c {.*} AS c ORDER BY c.created_at, c.class_id LIMIT $limit"

SET_LEARNERS: LiteralString = "MATCH (c:Class {class_id: $class_id}) SET c.learner_ids = $learner_ids"

COUNT_ASSIGNMENTS: LiteralString = """
MATCH (c:Class {class_id: $class_id})
OPTIONAL MATCH (c)-[:SETS]->(a:Assignment)
RETURN count(a) AS held
"""

ADD_ASSIGNMENT: LiteralString = """
MATCH (c:Class {class_id: $class_id})
CREATE (c)-[:SETS]->(:Assignment {assignment_id: $assignment_id, class_id: $class_id, spec: $spec,
                                   created_at: $now})
"""

ASSIGNMENTS: LiteralString = """
MATCH (:Class {class_id: $class_id})-[:SETS]->(a:Assignment)
RETURN a {.*} AS a ORDER BY a.created_at, a.assignment_id
"""

# Every ended session of the class's learners, with the score and slips the learner store put on
# PLAYED (absent until it has recorded the session) and the hints the mirror counts on the Session.
CLASS_SESSIONS: LiteralString = """
MATCH (c:Class {class_id: $class_id})
UNWIND c.learner_ids AS learner_id
MATCH (s:Session {learner_id: learner_id})
WHERE s.outcome IS NOT NULL
OPTIONAL MATCH (l:Learner)-[p:PLAYED]->(s) WHERE l.learner_id = learner_id
RETURN learner_id, s.session_id AS session_id, s.scenario AS scenario,
       coalesce(s.scenario_version, 1) AS version, s.level AS level, s.outcome AS outcome,
       s.vendor_quote AS price, s.item AS item, coalesce(s.insults, 0) AS insults,
       coalesce(s.coaching_hints_0, 0) + coalesce(s.coaching_hints_1, 0) + coalesce(s.coaching_hints_2, 0) AS hints,
       p.score AS score, coalesce(p.slips, []) AS slips, s.created_at AS at,
       coalesce(s.updated_at, s.created_at) AS ended_at
ORDER BY ended_at, session_id
"""

LIST_LIMIT = 500


def _class(row: dict[str, Any]) -> StoredClass:
    return StoredClass(class_id=row["class_id"], name=row["name"], teacher_id=row["teacher_id"],
                       learner_ids=tuple(row.get("learner_ids") or ()), created_at=float(row["created_at"]))


class Neo4jClassStore:
    """The `ClassStore` on the server's one Neo4j driver (shared with the mirror)."""

    def __init__(self, graphdb: GraphDriver, *, timeout_s: float = 2.0) -> None:
        self.graphdb = graphdb
        self.timeout_s = timeout_s

    async def _run(self, work: Callable[[AsyncManagedTransaction], Awaitable[Any]], *, write: bool = False) -> Any:
        try:
            return await self.graphdb.call(self._run_here(work, write))
        except (Neo4jError, DriverError, OSError) as exc:
            raise ClassStoreError(f"the class store is unreachable: {exc}") from exc

    async def _run_here(self, work: Callable[[AsyncManagedTransaction], Awaitable[Any]], write: bool) -> Any:
        return await self.graphdb.transact_here(work, write=write, schema=CLASS_SCHEMA, timeout_s=self.timeout_s)

    async def create_class(self, klass: StoredClass) -> None:
        async def work(tx: AsyncManagedTransaction) -> None:
            await (await tx.run(CREATE_CLASS, class_id=klass.class_id, name=klass.name,
                                teacher_id=klass.teacher_id, now=klass.created_at)).consume()

        await self._run(work, write=True)

    async def get_class(self, class_id: str) -> StoredClass | None:
        async def work(tx: AsyncManagedTransaction) -> StoredClass | None:
            record = await (await tx.run(GET_CLASS, class_id=class_id)).single()
            return None if record is None else _class(record["c"])

        return await self._run(work)  # type: ignore[no-any-return]

    async def classes(self, teacher_id: str | None) -> list[StoredClass]:
        async def work(tx: AsyncManagedTransaction) -> list[StoredClass]:
            result = (await tx.run(CLASSES_OF, teacher_id=teacher_id) if teacher_id is not None
                      else await tx.run(ALL_CLASSES, limit=LIST_LIMIT))
            return [_class(r["c"]) async for r in result]

        return await self._run(work)  # type: ignore[no-any-return]

    async def add_learners(self, class_id: str, learner_ids: list[str]) -> StoredClass | None:
        async def work(tx: AsyncManagedTransaction) -> StoredClass | None:
            record = await (await tx.run(GET_CLASS, class_id=class_id)).single()
            if record is None:
                return None
            klass = _class(record["c"])
            merged = list(dict.fromkeys([*klass.learner_ids, *learner_ids]))
            if len(merged) > MAX_LEARNERS:
                raise ClassFull(f"a class holds {MAX_LEARNERS} learners at most")
            await (await tx.run(SET_LEARNERS, class_id=class_id, learner_ids=merged)).consume()
            return StoredClass(klass.class_id, klass.name, klass.teacher_id, tuple(merged), klass.created_at)

        return await self._run(work, write=True)  # type: ignore[no-any-return]

    async def add_assignment(self, assignment: StoredAssignment) -> bool:
        async def work(tx: AsyncManagedTransaction) -> bool:
            record = await (await tx.run(COUNT_ASSIGNMENTS, class_id=assignment.class_id)).single()
            if record is None:
                return False
            if int(record["held"]) >= MAX_ASSIGNMENTS:
                raise ClassFull(f"a class holds {MAX_ASSIGNMENTS} assignments at most")
            await (await tx.run(ADD_ASSIGNMENT, class_id=assignment.class_id,
                                assignment_id=assignment.assignment_id, spec=assignment.spec.model_dump_json(),
                                now=assignment.created_at)).consume()
            return True

        return await self._run(work, write=True)  # type: ignore[no-any-return]

    async def assignments(self, class_id: str) -> list[StoredAssignment]:
        async def work(tx: AsyncManagedTransaction) -> list[StoredAssignment]:
            return [StoredAssignment(assignment_id=r["a"]["assignment_id"], class_id=r["a"]["class_id"],
                                     spec=AssignmentIn.model_validate_json(r["a"]["spec"]),
                                     created_at=float(r["a"]["created_at"]))
                    async for r in await tx.run(ASSIGNMENTS, class_id=class_id)]

        return await self._run(work)  # type: ignore[no-any-return]

    async def sessions(self, class_id: str) -> list[Played]:
        async def work(tx: AsyncManagedTransaction) -> list[Played]:
            return [Played(learner_id=r["learner_id"], session_id=r["session_id"], scenario=r["scenario"],
                           version=int(r["version"]), level=str(r["level"]), outcome=r["outcome"], item=r["item"],
                           price=None if r["price"] is None else float(r["price"]), fair=None,
                           insults=int(r["insults"]), hints=int(r["hints"]),
                           score=None if r["score"] is None else int(r["score"]),
                           slips=tuple(r["slips"]), at=float(r["at"]), ended_at=float(r["ended_at"]))
                    async for r in await tx.run(CLASS_SESSIONS, class_id=class_id)]

        return await self._run(work)  # type: ignore[no-any-return]
