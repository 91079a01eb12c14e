"""One timer structure for every session's silence timer: a heap of deadlines and one task.

10,000 idle sessions must not mean 10,000 sleeping tasks (a task and its wait are kilobytes each).
Each actor holds at most one entry in the heap: `arm` moves its deadline, and only when the new
deadline is earlier than its entry does a new entry go in (the old one is then stale and skipped).
When an entry comes due, the deadline the actor holds *now* decides: disarmed, it is dropped;
moved later, the entry goes back in at the new time; due, the actor is told (`SilenceClient.due`),
which posts a message into its inbox. The timer task never touches a session's state.

Disarming is `disarm`: it only clears the actor's deadline, so it costs nothing; the entry, if
any, is dropped when it comes up. An entry is a 3-tuple and a weak reference (~150 bytes), so the
idle memory of a session grows by that much at most. The reference is weak so that an entry does
not keep alive an actor the registry has let go (evicted, or an ended session swapped for its
record, session/ended.py) until the entry comes up, up to a minute later. Its entry would still
stay that long, a session's last entry after it ended, thousands at churn (issue #33): the
reference's callback counts the entries whose session has gone, and once they are most of the
heap (and at least `COMPACT_AT`), the next `arm` or `fire_due` rebuilds the heap without them.

The task sleeps until the earliest entry comes due, but never less than a tick (`TICK`, 0.25 s),
and handles everything that came due since: a timer fires up to a tick late, which a 30-second
silence does not notice. `arm` wakes the task only for a deadline more than a tick earlier than
the planned wake-up, which at churn is rare: a new timer runs as long as the ones already queued,
so it comes due after them (waking for each new earliest deadline cost about 2 % of the server's
CPU at benchmarks/load.py scenario b's churn). A server with no timers set never wakes for them;
a fixed four ticks a second cost an idle server 0.4 ms of CPU every second (docs/performance.md).
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
import weakref
from collections.abc import Callable
from typing import Protocol

import anyio

__all__ = ["COMPACT_AT", "TICK", "SilenceClient", "SilenceTimers"]

TICK = 0.25  # seconds between the timer task's wake-ups
COMPACT_AT = 64  # entries of sessions gone before the heap is rebuilt without them (and half of it)


class SilenceClient(Protocol):
    """What the timers need of an actor: two slots and a callback."""

    _silence_due: float | None  # when its timer fires (the timers' clock), or None when disarmed
    _silence_queued: float | None  # the deadline of its entry in the heap, if it has one

    def silence_due(self) -> None:
        """The deadline passed: post the timeout into the inbox (called on the event loop)."""
        ...


class SilenceTimers:
    def __init__(self, clock: Callable[[], float] = time.monotonic, tick: float = TICK) -> None:
        self.clock = clock
        self.tick = tick
        self._heap: list[tuple[float, int, weakref.ref[SilenceClient]]] = []
        self._order = itertools.count()  # ties never compare actors
        self.fired = 0
        self._wake: anyio.Event | None = None  # set to wake the task before `_wake_at`
        self._wake_at = math.inf  # when the task plans to wake (the timers' clock)
        self._gone = 0  # entries in the heap whose session has gone (the references' callback counts)

    def _on_gone(self, _ref: weakref.ref[SilenceClient]) -> None:
        """A session with an entry was let go: count it (the heap is rebuilt at a safe point)."""
        self._gone += 1

    def _compact(self) -> None:
        if self._gone >= COMPACT_AT and 2 * self._gone >= len(self._heap):
            self._heap = [entry for entry in self._heap if entry[2]() is not None]
            heapq.heapify(self._heap)
            self._gone = 0

    def __len__(self) -> int:
        return len(self._heap)

    def arm(self, client: SilenceClient, seconds: float) -> None:
        """(Re)start `client`'s timer: it fires `seconds` from now unless armed again or disarmed."""
        due = self.clock() + seconds
        client._silence_due = due
        queued = client._silence_queued
        if queued is not None and queued <= due:
            return  # its entry comes up first and will be moved to `due` then
        client._silence_queued = due
        self._compact()
        heapq.heappush(self._heap, (due, next(self._order), weakref.ref(client, self._on_gone)))
        if self._wake is not None and due < self._wake_at - self.tick:
            self._wake.set()  # it would fire more than a tick late

    @staticmethod
    def disarm(client: SilenceClient) -> None:
        client._silence_due = None

    def fire_due(self) -> float | None:
        """Handle every entry that has come due; return when the next one does (None: none left)."""
        self._compact()
        heap = self._heap
        now = self.clock()
        while heap and heap[0][0] <= now:
            queued, _, ref = heapq.heappop(heap)
            client = ref()
            if client is None:
                self._gone = max(0, self._gone - 1)
                continue
            if client._silence_queued != queued:
                continue  # stale: a newer, earlier entry replaced this one
            client._silence_queued = None
            due = client._silence_due
            if due is None:
                continue
            if due > now:
                client._silence_queued = due
                heapq.heappush(heap, (due, next(self._order), ref))
                continue
            client._silence_due = None
            self.fired += 1
            client.silence_due()
        return heap[0][0] if heap else None

    async def run(self) -> None:
        """Serve the heap until cancelled, sleeping until the next entry is due."""
        while True:
            upcoming = self.fire_due()
            now = self.clock()
            self._wake_at = math.inf if upcoming is None else max(upcoming, now + self.tick)
            self._wake = wake = anyio.Event()
            with anyio.move_on_after(self._wake_at - now):
                await wake.wait()
