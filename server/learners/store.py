"""Where learner profiles live: the `LearnerStore` protocol, and the in-memory store.

Two stores meet the protocol: `MemoryLearnerStore` here, the embedded default, which keeps the
profiles for the life of the process and loses them on a restart, and `Neo4jLearnerStore`
(`server/learners/graph.py`), which keeps them in the graph beside the sessions. Both fold with
`server.learners.profile.fold`, so they hold the same profile for the same sessions, and both
answer the progress series with the report's definitions of score and discount.

Errors: a store that cannot be reached raises `LearnerStoreUnavailable`; everything else is a bug.
"""

from __future__ import annotations

from typing import Protocol

from schemas.learner import LearnerProfile, LearnerRow, ProgressPoint, SessionFigures
from schemas.review import ReviewItem
from server.learners.profile import fold, progress_point, trend
from server.learners.reviews import items_after

__all__ = ["LearnerStore", "LearnerStoreUnavailable", "MemoryLearnerStore"]


class LearnerStoreUnavailable(Exception):
    """The store could not be reached (Neo4j down or slow); the caller carries on without it."""


class LearnerStore(Protocol):
    name: str
    durable: bool  # False: the profiles go with the process
    immediate: bool  # True: answers without waiting on I/O, so callers keep no time limit on it

    async def get(self, learner_id: str) -> LearnerProfile | None:
        """The learner's profile, or None for a learner never seen."""
        ...

    async def record(self, figures: SessionFigures) -> LearnerProfile:
        """Fold one ended session into its learner's profile and link the session to the learner.
        Idempotent: recording a session again changes nothing."""
        ...

    async def progress(self, learner_id: str) -> list[ProgressPoint]:
        """The learner's sessions as a progress series, oldest first."""
        ...

    async def items(self, learner_id: str) -> list[ReviewItem]:
        """The learner's review items with their FSRS state and history (docs/learning.md)."""
        ...

    async def learners(self) -> list[LearnerRow]:
        """Every learner with their latest session and trend, the most recently active first."""
        ...

    async def erase(self, learner_id: str) -> bool:
        """Forget the learner and delete their sessions (docs/memory.md, privacy); False if unknown."""
        ...

    def statistics(self) -> dict[str, object]:
        """The store's own figures for /health (`store` and `durable` at least)."""
        ...

    async def aclose(self) -> None:
        """Let go of what the store holds open (its own driver, if it made one)."""
        ...


class MemoryLearnerStore:
    """Profiles in this process's memory. Nothing survives a restart; /health says so."""

    name = "memory"
    durable = False
    immediate = True  # dict lookups

    def __init__(self) -> None:
        self._profiles: dict[str, LearnerProfile] = {}
        self._sessions: dict[str, list[SessionFigures]] = {}
        self._items: dict[str, dict[str, ReviewItem]] = {}

    async def get(self, learner_id: str) -> LearnerProfile | None:
        return self._profiles.get(learner_id)

    async def record(self, figures: SessionFigures) -> LearnerProfile:
        before = self._profiles.get(figures.learner_id)
        profile = fold(before, figures)
        if profile is not before:
            self._profiles[figures.learner_id] = profile
            self._sessions.setdefault(figures.learner_id, []).append(figures)
            items = self._items.setdefault(figures.learner_id, {})
            items.update((item.item_id, item) for item in items_after(items, figures))
        return profile

    async def items(self, learner_id: str) -> list[ReviewItem]:
        return sorted(self._items.get(learner_id, {}).values(), key=lambda i: i.item_id)

    async def progress(self, learner_id: str) -> list[ProgressPoint]:
        sessions = sorted(self._sessions.get(learner_id, []), key=lambda f: (f.created_at, f.session_id))
        return [progress_point(f) for f in sessions]

    async def learners(self) -> list[LearnerRow]:
        rows = []
        for learner_id, profile in self._profiles.items():
            series = await self.progress(learner_id)
            direction, delta = trend([p.score for p in series])
            rows.append(LearnerRow(learner_id=learner_id, level=profile.level, sessions=profile.sessions,
                                   latest=series[-1] if series else None, trend=direction, trend_delta=delta))
        # As the Neo4j store orders them: the latest session to end first.
        last = {learner_id: profile.last_at for learner_id, profile in self._profiles.items()}
        return sorted(rows, key=lambda r: (-last[r.learner_id], r.learner_id))

    async def erase(self, learner_id: str) -> bool:
        self._sessions.pop(learner_id, None)
        self._items.pop(learner_id, None)
        return self._profiles.pop(learner_id, None) is not None

    def statistics(self) -> dict[str, object]:
        return {"store": self.name, "durable": self.durable, "learners": len(self._profiles)}

    async def aclose(self) -> None:
        """Nothing to close."""
