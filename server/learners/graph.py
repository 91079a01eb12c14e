"""`Neo4jLearnerStore`: learner profiles in the graph, beside the sessions they link to.

It runs on the server's one Neo4j driver (`server.graphdb.GraphDriver`, shared with the mirror), on
the driver's I/O thread; a store built on its own makes a driver of its own. Its transactions use the
driver's managed retries (the mirror's writer retries its own way). Folding happens in Python
inside the write transaction (lock and read, `add` unless the session is linked already, write):
the transaction's first statement write-locks the Learner node before it reads the profile, so two
servers recording sessions of one learner at once fold one after the other and neither loses the
other's session.

Every Neo4j or network failure is translated here, once, into `LearnerStoreUnavailable`.
"""

from __future__ import annotations

import json
from typing import Any, LiteralString

import anyio
from neo4j import AsyncManagedTransaction, unit_of_work
from neo4j.exceptions import DriverError, Neo4jError

from schemas.learner import LearnerProfile, LearnerRow, ProgressPoint, SessionFigures, profile_from_json
from schemas.review import ReviewItem
from server.graphdb import GraphDriver
from server.learners.cypher import (
    DELETE_LEARNER,
    DELETE_LEARNER_SESSIONS,
    GET_DUE_ITEMS,
    GET_ITEMS,
    GET_PROFILE,
    LEARNER_SCHEMA,
    LIST_LEARNERS,
    LOCK_PROFILE,
    PROGRESS,
    RECORD_SESSION,
    WRITE_ITEMS,
)
from server.learners.profile import add, trend
from server.learners.reviews import items_after
from server.learners.store import LearnerStoreUnavailable

__all__ = ["Neo4jLearnerStore", "SessionNotStored"]

LIST_LIMIT = 500  # learners on the teacher's list


class SessionNotStored(LearnerStoreUnavailable):
    """The Session node is not in the graph yet (the mirror has not written it): try again later."""


def _profile(records: list[dict[str, Any]]) -> LearnerProfile | None:
    raw = records[0]["profile"] if records else None
    return profile_from_json(raw) if raw else None


class Neo4jLearnerStore:
    """The `LearnerStore` in Neo4j: a `:Learner` node per learner, `[:PLAYED]` to each of their sessions."""

    name = "neo4j"
    durable = True
    immediate = False

    def __init__(self, uri: str = "", *, auth: tuple[str, str] | None = None, database: str | None = None,
                 timeout_s: float = 2.0, graphdb: GraphDriver | None = None) -> None:
        self.graphdb = graphdb or GraphDriver(uri, auth=auth, database=database, timeout_s=timeout_s, owned=True)
        self.timeout_s = timeout_s
        self._schema_ready = False
        self.recorded = 0
        self.failures = 0

    async def aclose(self) -> None:
        """Close the driver if this store made it; a shared one is the application's to close."""
        if self.graphdb.owned:
            await self.graphdb.aclose()

    async def _run(self, work: Any, *args: Any, write: bool = False) -> Any:
        """Run `work(tx, *args)` in a managed transaction, within a bounded time; failures translated."""
        try:
            return await self.graphdb.call(self._run_here(work, args, write))
        except LearnerStoreUnavailable:
            self.failures += 1
            raise
        except (Neo4jError, DriverError, OSError, TimeoutError) as exc:
            self.failures += 1
            raise LearnerStoreUnavailable(f"Neo4j learner store: {type(exc).__name__}: {exc}"[:500]) from exc

    async def _run_here(self, work: Any, args: tuple[Any, ...], write: bool) -> Any:
        """`_run`'s transaction, where the driver lives."""
        driver = await self.graphdb.driver_here()
        database = self.graphdb.database
        with anyio.fail_after(self.timeout_s * 8 + 1):
            async with driver.session(database=database, max_transaction_retry_time=self.timeout_s * 4) as session:
                if not self._schema_ready:
                    schema = unit_of_work(timeout=self.timeout_s * 4)(self._schema)
                    for statement in LEARNER_SCHEMA:
                        await session.execute_write(schema, statement)
                    self._schema_ready = True
                run = session.execute_write if write else session.execute_read
                return await run(work, *args)

    @staticmethod
    async def _schema(tx: AsyncManagedTransaction, statement: LiteralString) -> None:
        await (await tx.run(statement)).consume()

    @staticmethod
    async def _rows(tx: AsyncManagedTransaction, statement: LiteralString,
                    params: dict[str, Any]) -> list[dict[str, Any]]:
        result = await tx.run(statement, params)
        return [record.data() async for record in result]

    async def read(self, statement: LiteralString, **params: Any) -> list[dict[str, Any]]:
        """Any read statement, parameterised (the tests use it for EXPLAIN and for looking around)."""
        rows: list[dict[str, Any]] = await self._run(self._rows, statement, params)
        return rows

    # ------------------------------------------------------------------ the protocol

    async def get(self, learner_id: str) -> LearnerProfile | None:
        return _profile(await self.read(GET_PROFILE, learner_id=learner_id))

    async def record(self, figures: SessionFigures) -> LearnerProfile:
        profile: LearnerProfile = await self._run(self._record, figures, write=True)
        self.recorded += 1
        return profile

    @classmethod
    async def _record(cls, tx: AsyncManagedTransaction, f: SessionFigures) -> LearnerProfile:
        locked = await cls._rows(tx, LOCK_PROFILE, {"learner_id": f.learner_id, "session_id": f.session_id})
        before = _profile(locked)
        # The graph knows every session it folded in (PLAYED is written with the profile), so it
        # asks that rather than the profile's bounded window (server/learners/profile.py).
        profile = before if before is not None and locked[0]["played"] else add(before, f)
        linked = await cls._rows(tx, RECORD_SESSION, {
            "learner_id": f.learner_id, "profile": profile.model_dump_json(), "level": profile.level.value,
            "input_language": profile.input_language.value, "target_language": profile.target_language.value,
            "languages": [language.value for language in profile.languages], "sessions": profile.sessions,
            "pending": json.dumps({name: p.model_dump() for name, p in profile.pending.items()}, sort_keys=True),
            "updated_at": profile.last_at, "session_id": f.session_id, "score": f.score,
            "session_level": f.level.value, "slips": list(f.slips), "ended_at": f.ended_at,
            "estimated_band": f.estimate.band if f.estimate else None,
            "estimate_confidence": f.estimate.confidence if f.estimate else None,
        })
        if not linked:
            raise SessionNotStored(f"session {f.session_id} is not in the graph yet")
        if profile is not before:  # a session folded in already has its reviews already
            await cls._write_items(tx, f)
        return profile

    @classmethod
    async def _write_items(cls, tx: AsyncManagedTransaction, f: SessionFigures) -> None:
        rows = await cls._rows(tx, GET_ITEMS, {"learner_id": f.learner_id})
        known = {item.item_id: item for item in (ReviewItem.model_validate_json(r["record"]) for r in rows)}
        changed = items_after(known, f)
        if not changed:
            return
        await cls._rows(tx, WRITE_ITEMS, {"learner_id": f.learner_id, "session_id": f.session_id, "items": [{
            "item_id": i.item_id, "scenario": i.scenario, "language": i.language.value, "kind": i.kind,
            "key": i.key, "phrase": i.phrase, "due": i.due, "stability": i.stability, "difficulty": i.difficulty,
            "reps": i.reps, "lapses": i.lapses, "last_review": i.last_review, "record": i.model_dump_json(),
            "rating": i.history[-1].rating, "recalled": i.history[-1].recalled, "at": i.history[-1].at,
        } for i in changed]})

    async def items(self, learner_id: str) -> list[ReviewItem]:
        rows = await self.read(GET_ITEMS, learner_id=learner_id)
        return [ReviewItem.model_validate_json(row["record"]) for row in rows]

    async def due_items(self, learner_id: str, scenario: str, at: float) -> list[ReviewItem]:
        rows = await self.read(GET_DUE_ITEMS, learner_id=learner_id, scenario=scenario, at=at)
        return [ReviewItem.model_validate_json(row["record"]) for row in rows]

    async def progress(self, learner_id: str) -> list[ProgressPoint]:
        rows = await self.read(PROGRESS, learner_id=learner_id)
        return [ProgressPoint.model_validate(row["point"]) for row in rows]

    async def learners(self) -> list[LearnerRow]:
        rows = []
        for row in await self.read(LIST_LEARNERS, limit=LIST_LIMIT):
            series = [ProgressPoint.model_validate(p) for p in row["series"] if p is not None]
            direction, delta = trend([p.score for p in series])
            rows.append(LearnerRow(learner_id=row["learner_id"], level=row["level"], sessions=row["sessions"] or 0,
                                   latest=series[-1] if series else None, trend=direction, trend_delta=delta))
        return rows

    async def erase(self, learner_id: str) -> bool:
        counts: dict[str, int] = await self._run(self._erase, learner_id, write=True)
        return counts["learners"] > 0 or counts["sessions"] > 0

    @classmethod
    async def _erase(cls, tx: AsyncManagedTransaction, learner_id: str) -> dict[str, int]:
        sessions = (await cls._rows(tx, DELETE_LEARNER_SESSIONS, {"learner_id": learner_id}))[0]["sessions"]
        learner = (await cls._rows(tx, DELETE_LEARNER, {"learner_id": learner_id}))
        return {"learners": learner[0]["learners"] if learner else 0,
                "sessions": int(sessions) + (learner[0]["sessions"] if learner else 0)}

    def statistics(self) -> dict[str, object]:
        return {"store": self.name, "durable": self.durable, "recorded": self.recorded, "failures": self.failures}
