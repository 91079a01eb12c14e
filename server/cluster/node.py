"""`ClusterNode`: the leases one node holds, their renewal, handover and drain.

- A session is served here only under a lease: `claim()` takes it (a new session, or one whose next
  connection HAProxy routed here) before the actor is created or rebuilt, and keeps its epoch, which
  every mirror write of the session carries (`FencedMirror`).
- `run()` renews every held lease each `LEASE_RENEW_SECONDS`, in one transaction per 5,000 leases.
  A lease missing from the answer was stolen after it expired (this node was paused or cut off): the
  session is dropped from memory and its sockets are closed with 4307 (moved). A lease another node
  asked for (`wanted`) is handed over: sockets closed with 4307, the session's changes flushed, the
  lease released.
- `drain()`: stop taking sessions, let HAProxy see /health fail, then hand every session over.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, LiteralString, TypeVar

import anyio
from anyio.abc import TaskGroup, TaskStatus
from neo4j import AsyncManagedTransaction, unit_of_work
from neo4j.exceptions import DriverError, Neo4jError

from schemas.errors import CloseCode
from server.cluster.fenced import FencedMirror
from server.cluster.leases import ACQUIRE, RELEASE, RENEW
from session.negotiation import Negotiation
from session.protocols import MirrorUnavailable
from session.registry import SessionLoader, SessionRegistry
from session.rules import Limits

log = logging.getLogger("samvad.cluster")
_T = TypeVar("_T")
POLL_S = 0.2  # how often a connection waiting for a busy lease asks again
WRITE_ATTEMPTS = 5  # a lease statement that deadlocked (transient) is run again, with backoff
RENEW_CHUNK = 5000  # leases per renewal statement (a transaction each), bounded parameter lists


class LeaseBusy(MirrorUnavailable):
    """Another node holds the session's lease (or this node is draining): try again shortly (1013)."""


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    node: str
    ttl_s: float = 6.0
    renew_s: float = 2.0
    wait_s: float = 10.0
    drain_grace_s: float = 3.0


class ClusterNode:
    """This node's leases (see the module docstring). The session loader wraps the mirror's."""

    def __init__(self, settings: LeaseSettings, mirror: FencedMirror, registry: SessionRegistry) -> None:
        self.settings = settings
        self.node = settings.node
        self.mirror = mirror
        self.registry = registry
        self.epochs: dict[str, int] = {}  # the sessions this node owns, with the epoch it holds
        self._loading: set[str] = set()  # claimed and being rebuilt: not in the registry yet
        self._moving: set[str] = set()  # being handed over
        self._tg: TaskGroup | None = None
        self.draining = False
        self.acquired = 0  # leases taken
        self.takeovers = 0  # leases taken from another node (expired or released)
        self.lost = 0  # leases found stolen at renewal
        self.handed_over = 0
        self.renewals = 0  # renewal transactions
        self.renewal_failures = 0
        self.last_renewal_ms = 0.0
        self._inner: SessionLoader | None = registry.loader
        registry.loader = self  # claim the lease before a session is rebuilt here
        mirror.epoch_of = self.epochs.get
        mirror.on_fenced = self._fenced

    # ------------------------------------------------------------------ Neo4j

    async def _write(self, statement: LiteralString, **params: Any) -> list[dict[str, Any]]:
        """Run a lease statement; a transient failure (a deadlock between lease locks) is retried."""
        for attempt in range(WRITE_ATTEMPTS):
            try:
                return await self.mirror.graphdb.call(self._write_here(statement, params))
            except Neo4jError as exc:
                if not exc.is_retryable() or attempt == WRITE_ATTEMPTS - 1:
                    raise
                await anyio.sleep(0.02 * 2**attempt)
        raise AssertionError("unreachable")

    async def _write_here(self, statement: LiteralString, params: dict[str, Any]) -> list[dict[str, Any]]:
        driver = await self.mirror.graphdb.driver_here()
        timeout = self.mirror.timeout_s

        async def work(tx: AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(statement, params)
            return [record.data() async for record in result]

        with anyio.fail_after(timeout * 2 + 1):
            async with driver.session(database=self.mirror.database) as session:
                return await session.execute_write(unit_of_work(timeout=timeout)(work))

    async def _guarded(self, coro: Coroutine[Any, Any, _T]) -> _T:
        try:
            return await coro
        except (Neo4jError, DriverError, OSError, TimeoutError) as exc:
            raise MirrorUnavailable(f"lease: {type(exc).__name__}: {exc}"[:300]) from exc

    # ------------------------------------------------------------------ claiming

    async def claim(self, session_id: str, *, wait_s: float | None = None) -> int:
        """Take the session's lease (waiting up to `wait_s` for another owner to let go); its epoch."""
        if self.draining:
            raise LeaseBusy("this node is draining")
        deadline = time.monotonic() + (self.settings.wait_s if wait_s is None else wait_s)
        while True:
            rows = await self._guarded(self._write(ACQUIRE, session_id=session_id, node=self.node,
                                                   ttl_ms=int(self.settings.ttl_s * 1000)))
            row = rows[0]
            if row["free"]:
                epoch = int(row["epoch"])
                self.epochs[session_id] = epoch
                self.acquired += 1
                if row["previous"] is not None and row["previous"] != self.node:
                    self.takeovers += 1
                    log.info("lease taken over", extra={"session_id": session_id, "epoch": epoch,
                                                        "previous": row["previous"]})
                return epoch
            remaining = max(POLL_S, min(float(row["remaining_ms"]) / 1000, 1.0))
            if time.monotonic() + POLL_S > deadline:
                raise LeaseBusy(f"session is owned by {row['owner']} for {row['remaining_ms']} ms more")
            await anyio.sleep(min(POLL_S, remaining))

    async def load(self, session_id: str, limits: Limits) -> tuple[Negotiation, int] | None:
        """The registry's loader here: claim the lease, then rebuild from Neo4j."""
        if self._inner is None:
            return None
        await self.claim(session_id)
        self._loading.add(session_id)
        try:
            loaded = await self._inner.load(session_id, limits)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._release([session_id])
            raise
        finally:
            self._loading.discard(session_id)
        if loaded is None:
            await self._release([session_id])
        return loaded

    # ------------------------------------------------------------------ renewal and handover

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Renew every `renew_s`; handovers run beside the renewals, so a slow flush delays no renewal."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            try:
                while True:
                    await anyio.sleep(self.settings.renew_s)
                    await self.renew()
            finally:
                self._tg = None

    async def renew(self) -> None:
        """Renew every held lease in one transaction; drop lost sessions, hand over wanted ones."""
        held = dict(self.epochs)
        if not held:
            return
        started = time.perf_counter()
        try:
            renewed = await self.renew_leases(held)
        except (Neo4jError, DriverError, OSError, TimeoutError) as exc:
            self.renewal_failures += 1
            log.warning("lease renewal failed: %s", exc, extra={"node": self.node})
            return
        self.renewals += 1
        self.last_renewal_ms = (time.perf_counter() - started) * 1000
        # Sessions evicted from memory (idle) give their lease back once their changes are stored.
        # (An ended session kept as its record is in memory: `in`, not `live`, says so.)
        idle = [sid for sid in renewed if sid not in self.registry and sid not in self._loading
                and not self.mirror._pending(sid)]
        if idle:
            await self._release(idle)
        lost = [sid for sid in held if sid not in renewed and self.epochs.get(sid) == held[sid]]
        for sid in lost:
            self.lost += 1
            log.warning("lease lost: another node owns the session now", extra={"session_id": sid})
            self._drop(sid, "the session moved to another node")
        wanted = [sid for sid, want in renewed.items() if want and sid not in self._moving]
        if wanted:
            if self._tg is not None:
                self._tg.start_soon(self.hand_over, wanted)
            else:
                await self.hand_over(wanted)

    async def renew_leases(self, held: dict[str, int]) -> dict[str, bool]:
        """One transaction (per RENEW_CHUNK leases) renewing `held`; the renewed ones, and if wanted."""
        leases = [{"session_id": sid, "epoch": held[sid]} for sid in sorted(held)]
        renewed: dict[str, bool] = {}
        for k in range(0, len(leases), RENEW_CHUNK):
            rows = await self._write(RENEW, leases=leases[k:k + RENEW_CHUNK], node=self.node,
                                     ttl_ms=int(self.settings.ttl_s * 1000))
            renewed.update((r["session_id"], bool(r["wanted"])) for r in rows)
        return renewed

    def _fenced(self, session_id: str) -> None:
        """Neo4j refused the session's writes: whatever this node holds of it is stale."""
        self.lost += 1
        self._drop(session_id, "the session moved to another node")

    def _drop(self, session_id: str, reason: str) -> None:
        self.epochs.pop(session_id, None)
        self.registry.remove(session_id, code=CloseCode.MOVED, reason=reason)
        self.mirror.discard(session_id)

    async def hand_over(self, session_ids: list[str]) -> int:
        """Close the sessions' sockets (4307), flush their changes, release their leases."""
        moving = [sid for sid in session_ids if sid in self.epochs and sid not in self._moving]
        self._moving.update(moving)
        connected = sum(len(a.connections) for sid in moving if (a := self.registry.live(sid)) is not None)
        for sid in moving:
            self.registry.remove(sid, code=CloseCode.MOVED, reason="the session moved to another node")
        try:
            flushed = await self._flushed(moving)
            released = [sid for sid in moving if flushed.get(sid)]
            await self._release(released)
        finally:
            self._moving.difference_update(moving)
        self.handed_over += len(released)
        if moving:
            log.info("sessions handed over", extra={"node": self.node, "sessions": len(moving),
                                                    "connections": connected, "released": len(released)})
        return len(released)

    async def _flushed(self, session_ids: list[str]) -> dict[str, bool]:
        done: dict[str, bool] = {}

        async def one(sid: str) -> None:
            done[sid] = await self.mirror.flushed(sid, self.settings.ttl_s)

        async with anyio.create_task_group() as tg:
            for sid in session_ids:
                tg.start_soon(one, sid)
        return done

    async def _release(self, session_ids: list[str]) -> None:
        held = {sid: self.epochs.pop(sid) for sid in session_ids if sid in self.epochs}
        if not held:
            return
        leases = [{"session_id": sid, "epoch": held[sid]} for sid in sorted(held)]
        try:
            await self._write(RELEASE, leases=leases, node=self.node)
        except (Neo4jError, DriverError, OSError, TimeoutError) as exc:
            log.warning("lease release failed (the leases expire on their own): %s", exc)

    async def drain(self) -> int:
        """Stop taking sessions, give HAProxy time to see /health fail, hand every session over."""
        self.draining = True
        await anyio.sleep(self.settings.drain_grace_s)
        return await self.hand_over(sorted(self.epochs))

    def statistics(self) -> dict[str, Any]:
        return {"node": self.node, "leases": len(self.epochs), "draining": self.draining,
                "acquired": self.acquired, "takeovers": self.takeovers, "lost": self.lost,
                "handed_over": self.handed_over, "renewals": self.renewals,
                "renewal_failures": self.renewal_failures, "last_renewal_ms": round(self.last_renewal_ms, 2),
                "fenced_changes": self.mirror.fenced_changes}
