"""The backends of one running server as a typed record (`Backends`), and the complete protocol of
the mirror as the server uses it (`MirrorBackend`).

Every part a route or the lifespan calls is in the protocol, so nothing asks an object what it
has: the in-memory mirror (`InMemoryMirror`) implements the parts it lacks as no-ops: it has
nothing to run, nothing to wait for, and no graph to read (`MirrorUnavailable`, a 503 at the edge).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from anyio.abc import TaskStatus

from brain.knowledge.store import PlaybookStore
from server.classes.store import ClassStore, MemoryClassStore
from server.graphdb import GraphDriver
from server.learners.store import LearnerStore
from server.studio.store import PackStore
from session.mirror import MemoryMirror
from session.protocols import Mirror, MirrorUnavailable
from session.registry import SessionLoader

__all__ = ["NO_GRAPH", "Backends", "InMemoryMirror", "MirrorBackend"]

NO_GRAPH = "no graph store is configured (set NEO4J_URI)"


class MirrorBackend(Mirror, SessionLoader, Protocol):
    """The session's `Mirror`, and what the server asks of it besides."""

    name: str
    durable: bool  # True: sessions outlive the process and are rebuilt from it (`load`)
    rows: int  # changes written so far (a Prometheus counter)

    def forget(self, session_id: str) -> None:
        """Drop what is kept of a session that has left memory."""
        ...

    def statistics(self) -> dict[str, object]:
        """Figures for /health and /metrics."""
        ...

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Write until cancelled; `task_status.started()` once changes can be taken."""
        ...

    async def flushed(self, session_id: str, within: float) -> bool:
        """Wait up to `within` seconds for everything submitted of a session to be stored; whether it is."""
        ...

    async def graph(self, session_id: str) -> dict[str, Any] | None:
        """A session's stored subgraph, None for none; `MirrorUnavailable` when there is no graph."""
        ...

    async def stats(self, *, since: float = 0.0, scenario: str | None = None, limit: int = 20) -> dict[str, Any]:
        """Figures across stored sessions; `MirrorUnavailable` when there is no graph."""
        ...


class InMemoryMirror(MemoryMirror):
    """The in-memory mirror with the server's parts: no-ops, for it stores nothing."""

    durable = False
    rows = 0

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()  # nothing to write in the background

    async def load(self, session_id: str, limits: Any) -> None:
        return None  # nothing outlives the process

    async def flushed(self, session_id: str, within: float) -> bool:
        return False  # never durable: a restart loses it

    async def graph(self, session_id: str) -> dict[str, Any] | None:
        raise MirrorUnavailable(NO_GRAPH)

    async def stats(self, *, since: float = 0.0, scenario: str | None = None, limit: int = 20) -> dict[str, Any]:
        raise MirrorUnavailable(NO_GRAPH)


@dataclass(frozen=True, slots=True)
class Backends:
    """What `server/wiring.py` built for the settings: in memory, or on the one shared Neo4j driver."""

    mirror: MirrorBackend
    playbooks: PlaybookStore
    learners: LearnerStore
    packs: PackStore  # the studio's scenario versions (server/studio/)
    graphdb: GraphDriver | None = None  # the one Neo4j driver; the lifespan opens and closes it
    classes: ClassStore = field(default_factory=MemoryClassStore)  # teachers' classes (server/classes/)

    @property
    def loader(self) -> SessionLoader | None:
        """What rebuilds a session after a restart: the durable mirror, else nothing."""
        return self.mirror if self.mirror.durable else None
