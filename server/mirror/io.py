"""What the mirror runs where the Neo4j driver lives: the schema, writes and reads.

The driver is the server's one `GraphDriver` (server/graphdb.py), on its own I/O thread, and every
call that touches it goes through `Neo4jIo._on_io`. Here too: how a failure is classified (worth a
retry, a timeout) and the retry timings that the writer and the reads share.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine
from typing import Any, LiteralString, Self, TypeVar

import anyio
from neo4j import AsyncDriver, AsyncManagedTransaction, unit_of_work
from neo4j.exceptions import DriverError, Neo4jError

from server.graphdb import GraphDriver
from server.mirror.batch import write_batch
from server.mirror.schema import create_schema
from server.mirror.state import Entry
from session.protocols import MirrorUnavailable

BACKOFF_BASE_S = 0.05
BACKOFF_CAP_S = 2.0
MAX_TX_TIMEOUT_S = 60.0  # the most a retried transaction is given (each timeout doubles the next one's)
READ_PATIENCE = 8  # reads give up (MirrorUnavailable) after this many NEO4J_TIMEOUT_MS


def is_retryable(exc: BaseException) -> bool:
    """Worth another try: the server or the network failed, or the transaction ran out of time."""
    if isinstance(exc, DriverError | OSError | TimeoutError):
        return True
    return isinstance(exc, Neo4jError) and (exc.is_retryable() or "TransactionTimedOut" in str(exc.code))


def timed_out(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or (isinstance(exc, Neo4jError) and "TimedOut" in str(exc.code))


_T = TypeVar("_T")


class Neo4jIo:
    """The shared driver on its I/O thread: opening it (and closing it when the mirror made it), creating
    the schema, one batch's write, reads."""

    graphdb: GraphDriver  # the driver, on its I/O thread
    timeout_s: float
    _schema_ready: bool
    connected: bool
    last_error: str | None

    @property
    def database(self) -> str | None:
        return self.graphdb.database

    async def _on_io(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return await self.graphdb.call(coro)

    async def open(self) -> None:
        """Start the driver's I/O thread and the driver (connections are made when first needed)."""
        await self.graphdb.open()

    async def _driver_here(self) -> AsyncDriver:
        """The driver; call only on the I/O loop."""
        return await self.graphdb.driver_here()

    async def aclose(self) -> None:
        """Close the driver if this mirror made it; a shared one is the application's to close."""
        if self.graphdb.owned:
            await self.graphdb.aclose()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def ensure_schema(self, time_limit: float | None = None) -> None:
        """Create the constraints and indexes (IF NOT EXISTS: a no-op when they are there)."""
        await self._on_io(self._ensure_schema(time_limit))

    async def _ensure_schema(self, time_limit: float | None) -> None:
        driver = await self._driver_here()
        await create_schema(driver, self.database, time_limit or self.timeout_s)
        self._schema_ready = True
        self.connected = True

    async def write(self, batch: list[Entry], *, time_limit: float | None = None) -> None:
        """Write `batch` in one managed transaction. Idempotent: writing it again changes nothing."""
        await self._on_io(self._write(batch, time_limit or self.timeout_s))

    async def _write(self, batch: list[Entry], seconds: float) -> None:
        timeout = seconds
        if not self._schema_ready:
            await self._ensure_schema(timeout)
        driver = await self._driver_here()
        await write_batch(driver, self.database, batch, timeout)

    @staticmethod
    async def _tx_read(tx: AsyncManagedTransaction, statement: LiteralString,
                       params: dict[str, Any]) -> list[dict[str, Any]]:
        result = await tx.run(statement, params)
        return [record.data() async for record in result]

    async def read(self, statement: LiteralString, **params: Any) -> list[dict[str, Any]]:
        """Run a read query, retrying failures (with more time after a timeout) for a while."""
        return await self._on_io(self._read(statement, params))

    async def _read(self, statement: LiteralString, params: dict[str, Any]) -> list[dict[str, Any]]:
        driver = await self._driver_here()
        deadline = time.monotonic() + READ_PATIENCE * self.timeout_s
        attempt = slow = 0
        while True:
            timeout = min(MAX_TX_TIMEOUT_S, self.timeout_s * 2**slow)
            try:
                with anyio.fail_after(timeout * 2 + 1):
                    async with driver.session(database=self.database) as session:
                        return await session.execute_read(unit_of_work(timeout=timeout)(self._tx_read),
                                                          statement, params)
            except (Neo4jError, DriverError, OSError, TimeoutError) as exc:
                if not is_retryable(exc) or time.monotonic() >= deadline:
                    raise MirrorUnavailable(f"Neo4j read failed: {type(exc).__name__}: {exc}"[:500]) from exc
                slow += timed_out(exc)
                await anyio.sleep(min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt))
                attempt += 1
