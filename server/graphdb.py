"""`GraphDriver`: the server's one Neo4j driver, shared by the mirror, learners, playbooks and leases.

The driver lives on an event loop of its own, in its own thread (`IoThread`). The server's loop is
busy with sockets under load; a transaction makes several round trips, and on a shared loop each
would wait for a whole pass over every ready socket. Here they do not: the server's loop hands a
coroutine over and is woken once, when it is done. Everything that touches the driver runs there:
`call` from the server's loop, `call_blocking` from a worker thread (the playbook store's callers).

The application opens one in its lifespan (server/app.py, through an `AsyncExitStack`) and closes it
after everything that uses it has stopped. A part built on its own (a test's `Neo4jMirror(uri)`)
makes a driver of its own and closes it itself (`owned`).

Every user keeps its own retry policy: the driver retries no transaction (`max_transaction_retry_time`
0, the mirror's writer retries with its own backoff and figures); a part that wants the driver's
managed retries asks for them when it opens a session (`driver.session(max_transaction_retry_time=...)`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, LiteralString, Self, TypeVar

from neo4j import (
    READ_ACCESS,
    AsyncDriver,
    AsyncGraphDatabase,
    AsyncManagedTransaction,
    AsyncSession,
    NotificationMinimumSeverity,
    Record,
)

if TYPE_CHECKING:
    from server.config import Settings

__all__ = ["GraphDriver", "IoThread"]

_T = TypeVar("_T")


class IoThread:
    """An event loop of its own, in a thread of its own, where the Neo4j driver lives."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="samvad-neo4j", daemon=True)
        self.thread.start()

    async def call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run `coro` on this loop; cancelling the caller cancels it there too."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def call_blocking(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run `coro` on this loop from another thread (not an event loop's), and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


class GraphDriver:
    """One Neo4j driver on its I/O thread; both are started when first needed, so a driver never
    used costs nothing (no thread, no connection)."""

    def __init__(self, uri: str, *, auth: tuple[str, str] | None = None, database: str | None = None,
                 timeout_s: float = 2.0, owned: bool = False) -> None:
        self.uri = uri
        self.auth = auth
        self.database = database
        self.timeout_s = timeout_s
        self.owned = owned  # closed by the part that made it, not by the application's lifespan
        self._io: IoThread | None = None
        self._driver: AsyncDriver | None = None  # lives on self._io's loop
        self._lock = threading.Lock()
        self._schemas: set[tuple[str, ...]] = set()  # the schemas `transact_here` has run

    @classmethod
    def from_settings(cls, settings: Settings) -> GraphDriver:
        return cls(settings.NEO4J_URI, auth=(settings.NEO4J_USER, settings.NEO4J_PASSWORD)
                   if settings.NEO4J_PASSWORD else None, timeout_s=settings.NEO4J_TIMEOUT_MS / 1000)

    @property
    def running(self) -> bool:
        """Whether the I/O thread (and with it the driver, once asked for) is up."""
        return self._io is not None

    def _thread(self) -> IoThread:
        with self._lock:  # the playbook store's worker threads may be first
            if self._io is None:
                self._io = IoThread()
            return self._io

    async def call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run `coro` where the driver lives."""
        return await self._thread().call(coro)

    def call_blocking(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run `coro` where the driver lives, from a worker thread, and wait for it."""
        return self._thread().call_blocking(coro)

    async def driver_here(self) -> AsyncDriver:
        """The driver; call only where it lives (inside a coroutine given to `call`)."""
        if self._driver is None:
            self._driver = AsyncGraphDatabase.driver(
                self.uri, auth=self.auth,
                notifications_min_severity=NotificationMinimumSeverity.WARNING,
                connection_timeout=self.timeout_s,
                connection_acquisition_timeout=self.timeout_s * 2,
                max_transaction_retry_time=0,  # each user retries its own way (see the module docstring)
            )
        return self._driver

    async def transact_here(self, work: Callable[[AsyncManagedTransaction], Awaitable[_T]], *, write: bool,
                            schema: Sequence[LiteralString], timeout_s: float) -> _T:
        """`work(tx)` in a managed transaction (the driver's retries, up to `timeout_s`), with the
        statements of `schema` run first, once per driver: the stores that keep their nodes on this
        driver (playbooks, studio packs, classes) share it. Call only where the driver lives."""
        driver = await self.driver_here()
        async with driver.session(database=self.database, max_transaction_retry_time=timeout_s) as session:
            await self._ensure_schema(session, schema)
            run = session.execute_write if write else session.execute_read
            return await run(work)

    async def read_one_here(self, statement: LiteralString, params: dict[str, Any], *,
                            schema: Sequence[LiteralString]) -> Record | None:
        """The first record of one read statement, run in an auto-commit transaction; call only where
        the driver lives. For a lookup made on a hot path (a session's creation asks for its pack's
        newest version): a managed transaction adds BEGIN and COMMIT to the statement's RUN and
        PULL, about a third of the driver's CPU for one indexed read (0.75 against 1.1 ms,
        docs/performance.md). No retries: the caller has an answer of its own when the store fails."""
        driver = await self.driver_here()
        if tuple(schema) not in self._schemas:  # schema statements write: not in a read session
            async with driver.session(database=self.database) as session:
                await self._ensure_schema(session, schema)
        async with driver.session(database=self.database, default_access_mode=READ_ACCESS) as session:
            return await (await session.run(statement, params)).single()

    async def _ensure_schema(self, session: AsyncSession, schema: Sequence[LiteralString]) -> None:
        """The statements of `schema`, run once per driver."""
        key = tuple(schema)
        if key not in self._schemas:
            for statement in schema:
                await (await session.run(statement)).consume()
            self._schemas.add(key)

    async def open(self) -> None:
        """Start the I/O thread and the driver (connections are made when first needed)."""
        await self.call(self.driver_here())

    async def _close_driver(self) -> None:
        driver, self._driver = self._driver, None
        if driver is not None:
            await driver.close()

    async def aclose(self) -> None:
        with self._lock:
            io, self._io = self._io, None
        if io is not None:
            try:
                await io.call(self._close_driver())
            finally:
                io.close()

    def call_blocking_close(self) -> None:
        """`aclose`, from a worker thread (a synchronous owner's `close`)."""
        with self._lock:
            io, self._io = self._io, None
        if io is not None:
            try:
                io.call_blocking(self._close_driver())
            finally:
                io.close()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
