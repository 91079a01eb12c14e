"""`FencedMirror`: the Neo4j mirror with a fencing token on every write.

Each batch's transaction first runs `FENCE` with the epoch this node holds for each of the batch's
sessions (its `ClusterNode`), which locks those leases and names the sessions whose lease has moved on
(another owner, a newer epoch). Their rows are left out of the batch's write, in the same transaction,
so a node that was paused or cut off and comes back cannot overwrite the new owner's state. Their
changes never become durable (never acknowledged), are dropped with everything buffered for the
session, counted (`fenced_changes`), and the node is told (`on_fenced`): it drops the session and
closes its sockets with 4307.

A session this node holds no epoch for (dropped already) is refused without asking Neo4j.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
from neo4j import AsyncManagedTransaction, unit_of_work

from server.cluster.leases import FENCE, LEASE_SCHEMA, STAMP_WRITER
from server.mirror import Neo4jMirror
from server.mirror.batch import WRITE_BATCH, batch_rows
from server.mirror.memory import WRITE_SUMMARIES, summary_rows
from server.mirror.state import Entry
from server.mirror.writer import Lane

log = logging.getLogger("samvad.cluster")


class FencedMirror(Neo4jMirror):
    """A `Neo4jMirror` whose writes carry their sessions' lease epochs (see the module docstring)."""

    name = "neo4j"

    def __init__(self, uri: str, *, node: str, **options: Any) -> None:
        super().__init__(uri, **options)
        self.node = node
        self.epoch_of: Callable[[str], int | None] = lambda _sid: None
        self.on_fenced: Callable[[str], None] = lambda _sid: None
        self.fenced_changes = 0  # changes refused by the fence (a stale epoch), never written
        self.fenced_batches = 0  # transactions in which the fence refused at least one session
        self._refused: dict[int, set[str]] = {}  # id(batch) -> its sessions the fence refused

    async def _ensure_schema(self, time_limit: float | None) -> None:
        await super()._ensure_schema(time_limit)
        driver = await self._driver_here()
        async with driver.session(database=self.database) as session:
            await session.run(LEASE_SCHEMA)

    async def _write(self, batch: list[Entry], seconds: float) -> None:
        if not self._schema_ready:
            await self._ensure_schema(seconds)
        driver = await self._driver_here()
        epochs: dict[str, int] = {}
        local: set[str] = set()
        for entry in batch:
            sid = entry.change.session_id
            epoch = self.epoch_of(sid)
            if epoch is None:
                local.add(sid)
            else:
                epochs[sid] = epoch
        leases = [{"session_id": sid, "epoch": epochs[sid]} for sid in sorted(epochs)]
        kept = [e for e in batch if e.change.session_id not in local]
        work = unit_of_work(timeout=seconds)(self._tx_fenced)
        with anyio.fail_after(seconds * 2 + 1):
            async with driver.session(database=self.database) as session:
                refused = await session.execute_write(work, leases, kept)
        self._refused[id(batch)] = refused | local

    async def _tx_fenced(self, tx: AsyncManagedTransaction, leases: list[dict[str, Any]],
                         batch: list[Entry]) -> set[str]:
        refused: set[str] = set()
        if leases:
            result = await tx.run(FENCE, leases=leases, node=self.node)
            refused = {record["session_id"] async for record in result}
        batch = [e for e in batch if e.change.session_id not in refused]
        if batch:
            await (await tx.run(WRITE_BATCH, rows=batch_rows(batch))).consume()
            summaries = summary_rows(batch)
            if summaries:
                await (await tx.run(WRITE_SUMMARIES, rows=summaries)).consume()
            stamps = [x for x in leases if x["session_id"] not in refused]
            await (await tx.run(STAMP_WRITER, leases=stamps, node=self.node)).consume()
        return refused

    def _committed(self, lane: Lane, batch: list[Entry]) -> None:
        refused = self._refused.pop(id(batch), set())
        if not refused:
            super()._committed(lane, batch)
            return
        kept = [e for e in batch if e.change.session_id not in refused]
        dropped = len(batch) - len(kept)
        self._depth -= dropped
        self.fenced_changes += dropped
        self.fenced_batches += 1
        log.warning("fenced: %d changes of %d sessions not written (their lease moved on, or the session was "
                    "dropped here)", dropped, len(refused), extra={"node": self.node})
        super()._committed(lane, kept)
        for sid in refused:
            self.discard(sid)
            self.on_fenced(sid)

    def discard(self, session_id: str) -> None:
        """Forget `session_id` now, with its changes still waiting: they will never be written."""
        for lane in self._lanes:
            if not any(c.session_id == session_id for c in lane.changes):
                continue
            pairs = [(c, t) for c, t in zip(lane.changes, lane.stamps, strict=True) if c.session_id != session_id]
            self._depth -= len(lane.changes) - len(pairs)
            self.fenced_changes += len(lane.changes) - len(pairs)
            lane.changes.clear()
            lane.stamps.clear()
            for change, stamp in pairs:
                lane.changes.append(change)
                lane.stamps.append(stamp)
        self._drop(session_id)
        for event in self._flush_waiters.pop(session_id, ()):
            event.set()

    def statistics(self) -> dict[str, Any]:
        stats = dict(super().statistics())
        stats.update(fenced_changes=self.fenced_changes, fenced_batches=self.fenced_batches)
        return stats
