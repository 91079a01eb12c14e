"""The live sessions of one server process: creation, lookup, recovery and idle eviction.

An ended session stays in memory for `idle_seconds` after its last activity, for its report and
a late reconnect. Ended sessions do not hold the server's room for new ones: at `max_sessions`,
creating a session first drops the ended one idle longest that nobody is connected to. An ended
session is swapped as its last socket leaves (else at a look, four times a grace) for a record
of a few fields and its negotiation as bytes (`EndedSession`, session/ended.py; issue #33): about 3
KiB instead of 21 (benchmarks/ended_memory.py). `get` rebuilds an actor from it, as from storage
after a restart: a late reconnect gets its welcome with the final state. For `ended_grace_seconds`
after its last activity the record keeps the actor's replay ring, which the rebuilt actor gets
back (a `resume` replays as the actor would have); after it, a `resume` gets a snapshot. At churn
the ended actors waiting out their grace were most of what a server held for its ended sessions,
and the heap kept their room after they went (docs/performance.md): hence the swap at once.

The registry holds each record packed, as a tuple of atoms that CPython's collector stops tracking
(`EndedSession.pack`), so that the planned full pass does not walk the tens of thousands a busy
server keeps (server/gcpolicy.py).

Sessions in memory are the live actors (`actors`, `live`) and those records (`ended`, `record`);
`len`, `in`, `of_learner` and `by_stage` count both, so that a session swapped for its record is
never taken for one that has gone.

The registry owns a task group, and one dispatcher task in it applies every session's messages:
an actor with something in its inbox asks to be drained, and the dispatcher drains the actors
in the order they asked. Each actor's messages are still applied one at a time and in order, by
one task, but an idle session holds no task of its own (a task, its task group and its wait
were ~5 KiB each, measured with benchmarks/load.py scenario d). Brain calls run in the
registry's task group, so nothing outlives the server.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from typing import Protocol

import anyio
from anyio.abc import TaskGroup, TaskStatus

from schemas.enums import LanguageCode, Level, Stage
from schemas.errors import CloseCode
from schemas.learner import LearnerRecall
from schemas.scenario import DEFAULT_SCENARIO
from session.actor import ActorLimits, SessionActor
from session.changes import SessionStarted
from session.core import START_HAPPINESS
from session.ended import EndedSession, Packed, last_activity_of, learner_of, stage_of
from session.fanout import PackedReplay, pack_replay, unpack_replay
from session.negotiation import Negotiation
from session.protocols import Brain, Mirror, TipSource
from session.rules import Limits
from session.timers import SilenceTimers

log = logging.getLogger("samvad.registry")

# Idle records are looked for at most this often: a short grace sweeps every few seconds, and a
# walk over the tens of thousands of records a busy server keeps takes milliseconds each time.
RECORDS_SWEEP_S = 30.0


class CapacityError(Exception):
    """The server holds MAX_SESSIONS sessions already, and none of them has ended unwatched."""


class SessionLoader(Protocol):
    """Rebuilds a session that is not live in this process (after a restart), or returns None."""

    async def load(self, session_id: str, limits: Limits) -> tuple[Negotiation, int] | None:
        """The negotiation and the mirror version it was rebuilt at."""
        ...


class SessionRegistry:
    def __init__(
        self,
        brain: Brain,
        mirror: Mirror,
        *,
        limits: Limits = Limits(),
        actor_limits: ActorLimits = ActorLimits(),
        idle_seconds: float = 1800.0,
        live_idle_seconds: float | None = None,
        sweep_seconds: float = 30.0,
        ended_grace_seconds: float = 60.0,
        max_sessions: int = 10_000,
        loader: SessionLoader | None = None,
        clock: Callable[[], float] = time.time,
        tips: TipSource | None = None,
    ) -> None:
        self.brain = brain
        self.mirror = mirror
        self.tips = tips
        self.limits = limits
        self.actor_limits = actor_limits
        self.idle_seconds = idle_seconds  # an ended session's time in memory after its last activity
        self.live_idle_seconds = idle_seconds if live_idle_seconds is None else live_idle_seconds  # a live one's
        # Every session's silence timer, in one heap served by one task (session/timers.py);
        # none when the limits turn silence off.
        self.timers = SilenceTimers() if actor_limits.silence_s > 0 else None
        self.sweep_seconds = sweep_seconds
        # The ended actors not swapped as their last socket left are looked at four times a grace,
        # as are the rings kept in a grace (issue #33, docs/performance.md); only they are walked
        # that often (`swap_ended`), every actor at the sweep's own period (`evict_idle`).
        self.swap_seconds = min(sweep_seconds, ended_grace_seconds / 4)
        # An ended session nobody has had open this long has no replay ring (`_swap`).
        self.ended_grace_seconds = ended_grace_seconds
        self.max_sessions = max_sessions
        self.loader = loader
        self.clock = clock
        self.listeners: list[Callable[[SessionActor], None]] = []
        self._actors: dict[str, SessionActor] = {}
        self._ended: dict[str, Packed] = {}  # ended sessions swapped for their records, packed (untracked)
        self._ending: dict[str, SessionActor] = {}  # actors seen ended by a change, not yet swapped
        # The replay rings of records swapped within their grace, packed, and when each grace ends (`_swap`).
        self._graced: dict[str, tuple[float, PackedReplay]] = {}
        self._asked: set[str] = set()  # ended actors `get` gave out: not swapped before their grace is over
        self._recovering: dict[str, anyio.Event] = {}
        self._tg: TaskGroup | None = None
        self._ready: deque[SessionActor] = deque()  # actors with messages, in the order they asked
        self._ready_event: anyio.Event | None = None  # set to wake the dispatcher
        self._spare: deque[str] = deque()  # ended sessions to make room with, idle longest first
        self._no_spare_until = float("-inf")  # a pass found no spare session: none looked for till then
        self._records_swept_at = float("-inf")  # idle records last looked for (RECORDS_SWEEP_S)
        self.created = 0
        self.evicted = 0
        self.evicted_for_room = 0
        self.recovered = 0
        self.swapped = 0  # ended sessions swapped for their records
        self.revived = 0  # and rebuilt from them
        mirror.subscribe_durable(self._on_durable)

    # ------------------------------------------------------------------ lifecycle

    async def run(
        self, *, keep_actors: bool = False, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run every actor until cancelled.

        With `keep_actors` the sessions survive the cancellation and the next `run()` restarts
        them (the library interface does this per call); otherwise they are released.
        """
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._dispatch)
                if self.timers is not None:
                    tg.start_soon(self.timers.run)
                for actor in self._actors.values():
                    actor.attach(tg, self._wake)
                tg.start_soon(self._sweep)
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._tg = None
            self._ready.clear()
            self._ready_event = None
            for actor in self._actors.values():
                actor.detach()
            if not keep_actors:
                for actor in self._actors.values():
                    actor.close()
                self._actors.clear()
                self._ended.clear()
                self._graced.clear()
                self._asked.clear()

    def close_all(self, code: int = CloseCode.GOING_AWAY, reason: str = "server shutting down") -> None:
        """Close every connection of every session (the actors keep their state)."""
        for actor in self._actors.values():
            actor.close_connections(code, reason)

    def host(self, actor: SessionActor) -> None:
        """Drive an actor made elsewhere, as this registry's own (tests build one by hand)."""
        self._start(actor)

    def _start(self, actor: SessionActor) -> None:
        if self._tg is None:
            raise RuntimeError("the registry is not running")
        self._actors[actor.session_id] = actor
        actor.attach(self._tg, self._wake)

    def _wake(self, actor: SessionActor) -> None:
        self._ready.append(actor)
        event = self._ready_event
        if event is not None:
            self._ready_event = None
            event.set()

    async def _dispatch(self) -> None:
        """Drain each actor that asked, in order; sleep when none has anything to do."""
        ready = self._ready
        # `anyio.Event()` looks the running backend up (sniffio) on every call, a few microseconds
        # per wake-up of this loop; the backend's own class, found once, makes the same event.
        new_event = type(anyio.Event())
        while True:
            while ready:
                actor = ready.popleft()
                try:
                    actor.drain()
                    if self._ending.get(actor.session_id) is actor and not actor.fanout.connections:
                        self._swap(actor, self.clock())  # an ended session its last socket left
                except Exception:  # drain already guards each message; this guards the loop
                    log.exception("session dispatch failed", extra={"session_id": actor.session_id})
            event = self._ready_event = new_event()
            await event.wait()

    def _on_durable(self, session_id: str, version: int) -> None:
        actor = self._actors.get(session_id)
        if actor is not None:
            actor.notify_durable(version)

    def _on_change(self, actor: SessionActor) -> None:
        if actor.negotiation.is_terminal:
            self._ending[actor.session_id] = actor
        for listener in self.listeners:
            listener(actor)

    # ------------------------------------------------------------------ sessions

    def create(
        self,
        *,
        scenario: str = DEFAULT_SCENARIO,
        learner_id: str | None = None,
        input_language: LanguageCode = LanguageCode.EN_IN,
        target_language: LanguageCode = LanguageCode.EN_IN,
        session_id: str | None = None,
        level: Level = Level.INTERMEDIATE,
        recall: LearnerRecall | None = None,
        scenario_version: int = 1,
    ) -> SessionActor:
        """A new live session. `recall` is what the vendor remembers of a known learner: the brain is
        told it, and the vendor's mood starts where it says (docs/memory.md)."""
        if len(self) >= self.max_sessions and not self._make_room():
            raise CapacityError(f"{self.max_sessions} sessions already, none of them ended and unwatched")
        sid = session_id or uuid.uuid4().hex
        happiness = START_HAPPINESS if recall is None or recall.start_happiness is None else recall.start_happiness
        started = SessionStarted(
            session_id=sid, version=1, at=self.clock(), scenario=scenario, learner_id=learner_id,
            input_language=input_language, target_language=target_language, level=level, stage=Stage.GREETING,
            happiness=happiness, recall=recall,
            scenario_version=scenario_version)
        negotiation = Negotiation.started(started, self.limits)
        actor = self._new_actor(negotiation)
        self._start(actor)
        self.mirror.submit(started)
        self.created += 1
        log.info("session created", extra={"session_id": sid, "scenario": scenario})
        self._on_change(actor)
        return actor

    def _new_actor(self, negotiation: Negotiation) -> SessionActor:
        return SessionActor(
            negotiation, self.brain, self.mirror, limits=self.actor_limits, clock=self.clock,
            on_change=self._on_change, tips=self.tips, timers=self.timers,
        )

    def live(self, session_id: str) -> SessionActor | None:
        """The session's actor, if it has one now (an ended session swapped for its record has none:
        `session_id in registry` says whether the session is in memory at all)."""
        return self._actors.get(session_id)

    async def get(self, session_id: str) -> SessionActor | None:
        """A live session, one rebuilt from its record or by the loader; None when none exists.

        Whoever asks is about to use the session (a socket, a report): an ended one counts that as
        activity, and is not swapped before its grace is over, so that the sweep does not swap it
        between this answer and the caller's `connect`.
        """
        actor = self._actors.get(session_id)
        if actor is not None:
            if actor.negotiation.is_terminal:
                actor.last_activity = max(actor.last_activity, self.clock())
                self._asked.add(session_id)
            return actor
        packed = self._ended.get(session_id)
        if packed is not None:
            self._asked.add(session_id)
            return self._revive(EndedSession.unpack(packed))
        if self.loader is None:
            return None
        waiting = self._recovering.get(session_id)
        if waiting is not None:
            await waiting.wait()
            return self._actors.get(session_id)
        done = self._recovering[session_id] = anyio.Event()
        try:
            loaded = await self.loader.load(session_id, self.limits)
            if loaded is None:
                return None
            if len(self) >= self.max_sessions:
                # A learner's own session is never refused for room, but an ended one may give its place.
                self._make_room()
            negotiation, _ = loaded  # at the version it was rebuilt at (`Negotiation.version`)
            actor = self._new_actor(negotiation)
            self._start(actor)
            self.recovered += 1
            log.info("session recovered", extra={"session_id": session_id, "seq": negotiation.seq,
                                                 "turn": negotiation.turn})
            return actor
        finally:
            done.set()
            del self._recovering[session_id]

    def _revive(self, record: EndedSession) -> SessionActor:
        """An actor for an ended session kept as its record: the final state, and the replay ring
        the record kept if its grace is not over (none after it, as after a restart)."""
        actor = self._new_actor(record.negotiation(self.limits))
        graced = self._graced.pop(record.session_id, None)
        if graced is not None and self.clock() < graced[0]:
            actor.fanout.restore_replay(unpack_replay(graced[1]))
        self._start(actor)
        del self._ended[record.session_id]
        self.revived += 1
        log.debug("ended session rebuilt from its record", extra={"session_id": record.session_id})
        return actor

    def _swap(self, actor: SessionActor, now: float) -> bool:
        """Keep an ended session nobody has open as its record, with its replay ring till its grace is
        over; False (nothing changed) when it is live, open, busy or has mail waiting, or within its
        grace when `get` gave it out or an ack waits on the mirror (only the actor can send it to a
        player who comes back)."""
        until = actor.last_activity + self.ended_grace_seconds
        if now < until and (actor.fanout.unacked or actor.session_id in self._asked):
            return False
        ring = actor.fanout.take_replay() if now < until else None
        if not actor.compact():
            if ring is not None:
                actor.fanout.restore_replay(ring)
            return False
        record = EndedSession.of(actor.negotiation, actor.last_activity)
        del self._actors[actor.session_id]
        self._ending.pop(actor.session_id, None)
        self._asked.discard(actor.session_id)
        self._ended[record.session_id] = record.pack()
        if ring:
            self._graced[record.session_id] = (until, pack_replay(ring))
        actor.detach()
        actor.close()  # anything still holding the actor posts into a closed inbox, which drops it
        self.swapped += 1
        return True

    def remove(self, session_id: str, code: int = CloseCode.EVICTED, reason: str = "session removed") -> bool:
        """End a session now and drop it from memory (erasing a learner); False if not in memory."""
        actor = self._actors.pop(session_id, None)
        self._ending.pop(session_id, None)
        self._graced.pop(session_id, None)
        self._asked.discard(session_id)
        if actor is not None:
            actor.stop(code, reason)
        elif self._ended.pop(session_id, None) is None:
            return False
        self.mirror.forget(session_id)
        return True

    def actors(self) -> list[SessionActor]:
        """The sessions with an actor now: live ones, and ended ones not yet swapped for a record."""
        return list(self._actors.values())

    def ended(self) -> list[EndedSession]:
        """The ended sessions kept as records (`actors` lists the rest)."""
        return [EndedSession.unpack(packed) for packed in self._ended.values()]

    def of_learner(self, learner_id: str) -> list[str]:
        """The ids of every session in memory of the learner, with an actor or as a record."""
        ids = [sid for sid, a in self._actors.items() if a.negotiation.learner_id == learner_id]
        ids.extend(sid for sid, packed in self._ended.items() if learner_of(packed) == learner_id)
        return ids

    def by_stage(self) -> Counter[Stage]:
        """Sessions in memory by stage, records included."""
        stages = Counter(a.negotiation.stage for a in self._actors.values())
        stages.update(stage_of(packed) for packed in self._ended.values())
        return stages

    def record(self, session_id: str) -> EndedSession | None:
        """The record an ended session is kept as; None when it has an actor, or is not in memory."""
        packed = self._ended.get(session_id)
        return None if packed is None else EndedSession.unpack(packed)

    def __len__(self) -> int:
        return len(self._actors) + len(self._ended)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._actors or session_id in self._ended

    async def _sweep(self) -> None:
        swept = anyio.current_time()
        while True:
            await anyio.sleep(self.swap_seconds)
            if anyio.current_time() - swept >= self.sweep_seconds:
                swept = anyio.current_time()
                self.evict_idle()
            else:
                self.swap_ended()

    def swap_ended(self) -> int:
        """Swap the ended actors seen by a change that nobody has open for their records (with their
        replay rings while in their grace), and let go of the rings whose grace is over; the number
        swapped. (`evict_idle` finds any other actor, at the sweep's own period.)"""
        now, swapped = self.clock(), 0
        for sid, actor in list(self._ending.items()):
            if self._actors.get(sid) is not actor:
                del self._ending[sid]  # dropped, or replaced by a rebuilt actor
            elif self._swap(actor, now):
                swapped += 1
        self._end_graces(now)
        return swapped

    def _end_graces(self, now: float) -> None:
        """Let go of the replay rings kept with records whose grace is over."""
        self._graced = {sid: kept for sid, kept in self._graced.items() if kept[0] > now}

    def evict_idle(self) -> int:
        """Drop the sessions idle too long; swap the ended ones nobody has had open for the grace
        for their records. The number dropped. Idle records are looked for every RECORDS_SWEEP_S."""
        now = self.clock()
        evicted = 0
        for actor in list(self._actors.values()):
            ended = actor.negotiation.is_terminal
            idle = self.idle_seconds if ended else self.live_idle_seconds
            if actor.connections or actor.busy or now - actor.last_activity < idle:
                if ended:
                    self._swap(actor, now)
                continue
            self._evict(actor, "session idle")
            evicted += 1
        self._end_graces(now)
        if now - self._records_swept_at < RECORDS_SWEEP_S:
            return evicted
        self._records_swept_at = now
        for sid in [s for s, p in self._ended.items() if now - last_activity_of(p) >= self.idle_seconds]:
            self._drop_record(sid, "session idle")
            evicted += 1
        return evicted

    def _make_room(self) -> bool:
        """Drop the ended session idle longest that nobody is connected to; False if there is none.

        The candidates are found by one pass over the sessions, sorted by last activity, and used
        up one per session created; each is checked again when its turn comes (a learner may have
        reconnected to read the report). When a pass finds none, the next is at least a second
        later: a full server that refuses a burst of creations does not walk every session for each.
        """
        spare = self._spare
        while True:
            if not spare:
                now = self.clock()
                if now < self._no_spare_until:
                    return False
                ended = [(a.last_activity, sid) for sid, a in self._actors.items() if _spare(a)]
                ended.extend((last_activity_of(p), sid) for sid, p in self._ended.items())
                ended.sort()
                if not ended:
                    self._no_spare_until = now + 1.0
                    return False
                spare.extend(sid for _, sid in ended)
            sid = spare.popleft()
            if sid in self._ended:
                self._drop_record(sid, "room for a new session")
                self.evicted_for_room += 1
                return True
            actor = self._actors.get(sid)
            if actor is not None and _spare(actor):
                self._evict(actor, "room for a new session")
                self.evicted_for_room += 1
                return True

    def _evict(self, actor: SessionActor, reason: str) -> None:
        self.remove(actor.session_id, CloseCode.EVICTED, reason)
        self.evicted += 1
        log.info("session evicted", extra={"session_id": actor.session_id, "reason": reason})

    def _drop_record(self, session_id: str, reason: str) -> None:
        self.remove(session_id, CloseCode.EVICTED, reason)
        self.evicted += 1
        log.info("session evicted", extra={"session_id": session_id, "reason": reason})

    def statistics(self) -> dict[str, int]:
        return {
            "live": len(self),  # every session in memory, records included
            "ended_records": len(self._ended),
            "connections": sum(len(a.connections) for a in self._actors.values()),
            "created": self.created,
            "evicted": self.evicted,
            "evicted_for_room": self.evicted_for_room,
            "recovered": self.recovered,
            "swapped": self.swapped,
            "ended_actors": sum(1 for sid, a in self._ending.items() if self._actors.get(sid) is a),  # not swapped yet
            "replays_in_grace": len(self._graced),  # records swapped within their grace, with their rings
            "revived": self.revived,
        }


def _spare(actor: SessionActor) -> bool:
    """An ended session nobody is connected to or waiting on: the first to go when room is short."""
    return actor.negotiation.is_terminal and not actor.connections and not actor.busy
