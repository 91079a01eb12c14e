"""The mirror's I/O thread and everything that runs on it: the driver, the schema, writes and reads.

The Neo4j driver lives on an event loop of its own, in its own thread (`IoThread`), and every call
that touches it goes through `Neo4jIo._on_io`. Here too: how a failure is classified (worth a retry,
a timeout) and the retry timings that the writer and the reads share.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine
from typing import Any, LiteralString, Self, TypeVar

import anyio
from neo4j import AsyncDriver, AsyncGraphDatabase, AsyncManagedTransaction, NotificationMinimumSeverity, unit_of_work
from neo4j.exceptions import DriverError, Neo4jError

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


class IoThread:
    """The mirror's own event loop, in its own thread, where the Neo4j driver lives.

    The server's loop is busy with sockets under load; a transaction makes several round trips, and
    on a shared loop each would wait for a whole pass over every ready socket. Here they do not: the
    server's loop only hands over a batch and is woken once, when it is stored.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="samvad-neo4j", daemon=True)
        self.thread.start()

    async def call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run `coro` on the mirror's loop; cancelling the caller cancels it there too."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


class Neo4jIo:
    """The driver on the I/O thread: opening and closing it, creating the schema, one batch's write, reads."""

    uri: str
    auth: tuple[str, str] | None
    timeout_s: float
    database: str | None
    _driver: AsyncDriver | None  # lives on self._io's loop
    _io: IoThread | None
    _schema_ready: bool
    connected: bool
    last_error: str | None

    async def _on_io(self, coro: Coroutine[Any, Any, _T]) -> _T:
        if self._io is None:
            self._io = IoThread()
        return await self._io.call(coro)

    async def open(self) -> None:
        """Start the mirror's I/O thread and its driver (connections are made when first needed)."""
        await self._on_io(self._driver_here())

    async def _driver_here(self) -> AsyncDriver:
        """The driver; call only on the I/O loop."""
        if self._driver is None:
            self._driver = AsyncGraphDatabase.driver(
                self.uri, auth=self.auth,
                notifications_min_severity=NotificationMinimumSeverity.WARNING,
                connection_timeout=self.timeout_s,
                connection_acquisition_timeout=self.timeout_s * 2,
                max_transaction_retry_time=0,  # this class retries, with its own backoff and figures
            )
        return self._driver

    async def _close_driver(self) -> None:
        driver, self._driver = self._driver, None
        if driver is not None:
            await driver.close()

    async def aclose(self) -> None:
        io, self._io = self._io, None
        if io is not None:
            try:
                await io.call(self._close_driver())
            finally:
                io.close()

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
