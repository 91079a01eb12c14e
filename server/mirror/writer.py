"""The write-behind queue: lanes, batches, retries with backoff, and what a commit makes durable.

`submit()` never waits: it appends the change to its session's lane (sessions are spread over
`MIRROR_WRITERS` lanes, a session always to the same one). Each lane has a writer task that takes a
batch once `batch_max` changes wait or the oldest has waited `flush_s`, plans it (`server/mirror/fold.py`)
and writes it in one transaction (`server/mirror/batch.py`). A failed batch stays at the head of its lane,
planned as it was, and is written again after an exponential backoff. After a commit each session's
durable version moves up, the subscribers are told, and `flushed()` waiters wake.
"""

from __future__ import annotations

import logging
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
from neo4j.exceptions import ConstraintError, DriverError, Neo4jError

from server.mirror.fold import plan
from server.mirror.io import BACKOFF_BASE_S, BACKOFF_CAP_S, MAX_TX_TIMEOUT_S, Neo4jIo, is_retryable, timed_out
from server.mirror.state import Entry, SessionFold
from session.changes import Change, SessionStarted

log = logging.getLogger("samvad.mirror")

ROOM_AGAIN_FRACTION = 0.9  # a full-buffer episode ends when the buffer is back under this share


@dataclass(slots=True, eq=False)
class Lane:
    """One writer's share of the sessions: a FIFO of changes not yet planned, and the planned batch
    being written (kept as it is until it commits, so a retry writes exactly the same rows).

    A session always maps to the same lane, so its changes are written in order by one writer; the
    lanes' writers run their transactions concurrently (they touch disjoint sessions' nodes)."""

    index: int
    changes: deque[Change] = field(default_factory=deque)
    stamps: deque[float] = field(default_factory=deque)  # perf_counter at submit, parallel to `changes`
    batch: list[Entry] = field(default_factory=list)
    wake: anyio.Event | None = None

    def __len__(self) -> int:
        return len(self.changes) + len(self.batch)

    def oldest(self) -> float | None:
        """When the oldest change still to be written was submitted (perf_counter)."""
        if self.batch:
            return self.batch[0].submitted
        return self.stamps[0] if self.stamps else None


class MirrorWriter(Neo4jIo):
    """The lanes and their writers, and the bookkeeping of what is submitted and what is durable."""

    buffer_limit: int
    batch_max: int
    flush_s: float
    writers: int
    _lanes: list[Lane]
    _depth: int  # changes submitted and not yet stored, over every lane
    _folds: dict[str, SessionFold]
    _submitted: dict[str, int]
    _durable: dict[str, int]
    _forget_when_written: set[str]
    _callbacks: list[Callable[[str, int], None]]
    _flush_waiters: dict[str, list[anyio.Event]]
    _running: bool  # the writers are running (submit wakes them)
    _lag_at: deque[float]  # when a change became durable (time.time)
    _lag_ms: deque[float]  # and how long after its submit
    _batch_ms: deque[float]  # the last batches' transaction times
    _full_since: float | None
    _down_since: float | None
    batches: int
    rows: int  # changes written
    turns_written: int
    failures: int
    retries: int
    full_episodes: int

    def submit(self, change: Change) -> None:
        """Buffer `change` (never waits, never raises); its lane's writer plans and stores it.

        Only a reference and a timestamp are kept here: the change is folded into its session's state
        and turned into rows when its batch is formed, off the actor's path and once per batch."""
        sid = change.session_id
        lane = self._lanes[hash(sid) % len(self._lanes)]
        lane.changes.append(change)
        lane.stamps.append(time.perf_counter())
        self._depth += 1
        if self._submitted.get(sid, 0) < change.version:
            self._submitted[sid] = change.version
        if self._running and lane.wake is not None:
            waiting = len(lane)
            if waiting == 1 or waiting >= self.batch_max:
                lane.wake.set()
        if self._depth >= self.buffer_limit:
            self._check_room()

    def _plan(self, change: Change, submitted: float, snapshot: bool) -> Entry:
        sid = change.session_id
        try:
            fold = self._folds.get(sid)
            if fold is None:
                fold = self._folds[sid] = SessionFold()
            if fold.state is None and not isinstance(change, SessionStarted):
                log.error("change for a session this mirror never saw start nor rebuilt; only its version is "
                          "recorded", extra={"session_id": sid, "version": change.version})
            return plan(fold, change, submitted, snapshot=snapshot)
        except Exception:  # a malformed change must not lose the others: keep its version at least
            log.exception("could not plan a %s change", change.kind, extra={"session_id": sid})
            return Entry(change, submitted, {}, [], [])

    def _batch(self, lane: Lane) -> list[Entry]:
        """The lane's batch: the one that failed last time, else the next `batch_max` changes, planned in
        order. Only each session's last change in the batch carries a Session snapshot (`batch_rows`)."""
        if lane.batch or not lane.changes:
            return lane.batch
        count = min(self.batch_max, len(lane.changes))
        changes = [lane.changes.popleft() for _ in range(count)]
        stamps = [lane.stamps.popleft() for _ in range(count)]
        last = {change.session_id: k for k, change in enumerate(changes)}
        lane.batch = [self._plan(change, stamp, last[change.session_id] == k)
                      for k, (change, stamp) in enumerate(zip(changes, stamps, strict=True))]
        return lane.batch

    def has_room(self) -> bool:
        return self._check_room()

    def durable_version(self, session_id: str) -> int:
        return self._durable.get(session_id, 0)

    def subscribe_durable(self, callback: Callable[[str, int], None]) -> None:
        self._callbacks.append(callback)

    def forget(self, session_id: str) -> None:
        """The session left memory (evicted); drop what we keep for it once it is all written."""
        if self._pending(session_id):
            self._forget_when_written.add(session_id)
        else:
            self._drop(session_id)

    def _drop(self, session_id: str) -> None:
        self._folds.pop(session_id, None)
        self._submitted.pop(session_id, None)
        self._durable.pop(session_id, None)
        self._forget_when_written.discard(session_id)

    def _pending(self, session_id: str) -> bool:
        return self._submitted.get(session_id, 0) > self._durable.get(session_id, 0)

    def _check_room(self) -> bool:
        depth = self._depth
        if depth < self.buffer_limit:
            return True
        if self._full_since is None:
            self._full_since = time.monotonic()
            self.full_episodes += 1
            log.warning(
                "Neo4j mirror buffer is FULL: %d changes are waiting to be written (MIRROR_BUFFER_CHANGES=%d); "
                "new frames are refused with 'unavailable' and /health reports 'degraded' until Neo4j "
                "catches up. Last error: %s", depth, self.buffer_limit, self.last_error,
                extra={"queue_depth": depth, "buffer_limit": self.buffer_limit})
        return False

    async def _drain(self, lane: Lane) -> None:
        while len(lane):
            await self._write_next(lane)

    async def _write_loop(self) -> None:
        try:
            await self.ensure_schema()
        except (Neo4jError, DriverError, OSError, TimeoutError) as exc:
            self._failed(exc, 0)  # the first batch tries again
        async with anyio.create_task_group() as tg:
            for lane in self._lanes:
                tg.start_soon(self._lane_loop, lane)

    async def _lane_loop(self, lane: Lane) -> None:
        """One writer: a batch once `batch_max` changes wait or the oldest has waited `flush_s`."""
        while True:
            oldest = lane.oldest()
            if oldest is None:
                lane.wake = anyio.Event()
                await lane.wake.wait()
                continue
            waited = time.perf_counter() - oldest
            if len(lane) < self.batch_max and waited < self.flush_s:
                with anyio.move_on_after(self.flush_s - waited):
                    while len(lane) < self.batch_max:
                        lane.wake = anyio.Event()
                        await lane.wake.wait()
            await self._write_next(lane)

    async def _write_next(self, lane: Lane) -> None:
        """Write the head of the buffer, retrying with backoff until it is stored.

        A transaction that runs out of time is retried with twice the time (up to MAX_TX_TIMEOUT_S): a
        Neo4j that has just (re)started plans its queries slowly, and must not be timed out forever.
        """
        attempt = slow = 0
        while True:
            batch = self._batch(lane)
            if not batch:
                return
            started = time.perf_counter()
            try:
                await self.write(batch, time_limit=min(MAX_TX_TIMEOUT_S, self.timeout_s * 2**slow))
            except (Neo4jError, DriverError, OSError, TimeoutError) as exc:
                self._failed(exc, attempt, after_timeout=slow > 0)
                slow += timed_out(exc)
                delay = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt) * random.uniform(0.75, 1.0)
                attempt += 1
                self.retries += 1
                await anyio.sleep(delay)
                continue
            self._batch_ms.append((time.perf_counter() - started) * 1000)
            self._committed(lane, batch)
            return

    def _failed(self, exc: BaseException, attempt: int, *, after_timeout: bool = False) -> None:
        self.failures += 1
        self.last_error = f"{type(exc).__name__}: {exc}"[:500]
        retryable = is_retryable(exc)
        if isinstance(exc, DriverError | OSError | TimeoutError):
            self.connected = False
        if after_timeout and isinstance(exc, ConstraintError):
            # The timed-out attempt committed after all (Neo4j stalled, then woke): this one read the
            # old stored version and collided with it. The next attempt reads the new one and skips.
            log.warning("Neo4j write conflicted with a write that committed after its timeout; retrying",
                        extra={"queue_depth": self._depth, "attempt": attempt})
        elif not retryable:
            # Not expected to pass on a retry (a bug in a query, a constraint). Keep the data and keep trying.
            log.error("Neo4j refused a batch: %s", self.last_error, extra={"queue_depth": self._depth})
        elif self._down_since is None:
            self._down_since = time.monotonic()
            log.warning("Neo4j write failed; sessions keep playing and changes wait in memory "
                        "(acknowledgements pause): %s", self.last_error,
                        extra={"queue_depth": self._depth, "attempt": attempt})

    def _committed(self, lane: Lane, batch: list[Entry]) -> None:
        now_perf, now = time.perf_counter(), time.time()
        lane.batch = []
        self._depth -= len(batch)
        self.batches += 1
        self.rows += len(batch)
        self.connected = True
        if self._down_since is not None:
            log.warning("Neo4j writes resumed after %.1f s", time.monotonic() - self._down_since,
                        extra={"queue_depth": self._depth})
            self._down_since = None
        advanced: dict[str, int] = {}
        for entry in batch:
            self._lag_at.append(now)
            self._lag_ms.append((now_perf - entry.submitted) * 1000)
            self.turns_written += entry.turn_count
            sid = entry.change.session_id
            if entry.change.version > self._durable.get(sid, 0):
                advanced[sid] = entry.change.version
        self._durable.update(advanced)
        if self._full_since is not None and self._depth < self.buffer_limit * ROOM_AGAIN_FRACTION:
            log.warning("Neo4j mirror buffer has room again after %.1f s (%d changes waiting)",
                        time.monotonic() - self._full_since, self._depth)
            self._full_since = None
        for sid, version in advanced.items():
            for callback in self._callbacks:
                try:
                    callback(sid, version)
                except Exception:
                    log.exception("durable callback failed", extra={"session_id": sid})
            if not self._pending(sid):
                for event in self._flush_waiters.pop(sid, ()):
                    event.set()
                if sid in self._forget_when_written:
                    self._drop(sid)

    async def flushed(self, session_id: str, within: float) -> bool:
        """Wait until every change submitted for `session_id` is stored; False if `within` s pass first."""
        with anyio.move_on_after(within):
            while self._pending(session_id):
                event = anyio.Event()
                self._flush_waiters.setdefault(session_id, []).append(event)
                await event.wait()
            return True
        return False
