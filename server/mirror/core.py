"""`Neo4jMirror`, assembled from the parts, with its state and its lifecycle.

`__init__` sets every field the parts use (each part declares the ones it reads); `run()` starts the
writers and the loader, and on the way out flushes what is left within a bounded, shielded time.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskStatus

from server.graphdb import GraphDriver
from server.mirror.health import LAG_SAMPLES, MirrorHealth
from server.mirror.reads import MirrorReads
from server.mirror.writer import Lane

if TYPE_CHECKING:
    from server.config import Settings

log = logging.getLogger("samvad.mirror")

FINAL_FLUSH_MIN_S = 5.0


class Neo4jMirror(MirrorReads, MirrorHealth):
    """The durable `Mirror`: a write-behind copy of every session change in Neo4j, and recovery from it."""

    name = "neo4j"
    durable = True  # sessions are rebuilt from it after a restart (`load`)

    def __init__(
        self,
        uri: str,
        *,
        user: str = "neo4j",
        password: str = "",
        timeout_ms: int = 2000,
        buffer_changes: int = 50_000,
        batch_max: int = 500,
        flush_ms: float = 100.0,
        writers: int = 1,
        database: str | None = None,
        graphdb: GraphDriver | None = None,
    ) -> None:
        # The application's shared driver (server/app.py); without one, the mirror makes and closes its own.
        self.graphdb = graphdb or GraphDriver(uri, auth=(user, password) if password else None, database=database,
                                            timeout_s=timeout_ms / 1000, owned=True)
        self.timeout_s = timeout_ms / 1000
        self.buffer_limit = buffer_changes
        self.batch_max = batch_max
        self.flush_s = flush_ms / 1000
        self._schema_ready = False
        self.writers = max(1, writers)
        self._lanes = [Lane(k) for k in range(self.writers)]
        self._depth = 0
        self._folds = {}
        self._submitted = {}
        self._durable = {}
        self._forget_when_written = set()
        self._callbacks = []
        self._flush_waiters = {}
        self._load_wake = None
        self._load_pending = []
        self._load_slots = {}
        self._running = False
        self._lag_at = deque(maxlen=LAG_SAMPLES)
        self._lag_ms = deque(maxlen=LAG_SAMPLES)
        self._batch_ms = deque(maxlen=1000)
        self._full_since = None
        self._down_since = None
        self.connected = False
        self.batches = 0
        self.rows = 0
        self.turns_written = 0
        self.failures = 0
        self.retries = 0
        self.full_episodes = 0
        self.last_error = None

    @classmethod
    def from_settings(cls, settings: Settings, graphdb: GraphDriver | None = None) -> Neo4jMirror:
        return cls(
            settings.NEO4J_URI, user=settings.NEO4J_USER, password=settings.NEO4J_PASSWORD,
            timeout_ms=settings.NEO4J_TIMEOUT_MS, buffer_changes=settings.MIRROR_BUFFER_CHANGES,
            batch_max=settings.MIRROR_BATCH_MAX, flush_ms=settings.MIRROR_FLUSH_MS,
            writers=settings.MIRROR_WRITERS, graphdb=graphdb,
        )

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Write the buffer until cancelled, then flush what is left (bounded, shielded)."""
        await self.open()
        self._running = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._load_loop)
                task_status.started()
                await self._write_loop()
        finally:
            self._load_wake = None
            with anyio.CancelScope(shield=True):
                budget = max(FINAL_FLUSH_MIN_S, 2 * self.timeout_s)
                with anyio.move_on_after(budget):
                    async with anyio.create_task_group() as tg:
                        for lane in self._lanes:
                            tg.start_soon(self._drain, lane)
                if self._depth:
                    log.error("shutting down with %d changes not written to Neo4j (their frames were never "
                              "acknowledged; clients re-send them)", self._depth,
                              extra={"queue_depth": self._depth, "last_error": self.last_error})
                self._running = False
                await self.aclose()
