"""Where classes and assignments live: `ClassStore`, in memory or in Neo4j (server/classes/graph.py).

Errors, by who is at fault (the routes answer each with its code, docs/studio.md):

- `ClassFull`: the request would put more than `MAX_LEARNERS` in a class (409 `class_full`);
- `ClassStoreError`: the store cannot answer (503 `unavailable`); `NoGraph`, a kind of it, when the
  figures need the graph and there is none (503 `no_graph_store`).
"""

from __future__ import annotations

from typing import Protocol

from server.classes.core import MAX_ASSIGNMENTS, MAX_LEARNERS, Played, StoredAssignment, StoredClass

__all__ = ["ClassFull", "ClassStore", "ClassStoreError", "MemoryClassStore", "NoGraph"]

NO_GRAPH = "class figures are read from the session graph: set NEO4J_URI"


class ClassStoreError(Exception):
    """The class store cannot answer."""


class NoGraph(ClassStoreError):
    """There is no session graph to read a class's figures from."""


class ClassFull(Exception):
    """A class would hold more learners, or assignments, than it may."""


class ClassStore(Protocol):
    async def create_class(self, klass: StoredClass) -> None: ...

    async def get_class(self, class_id: str) -> StoredClass | None: ...

    async def classes(self, teacher_id: str | None) -> list[StoredClass]:
        """The classes of `teacher_id`, oldest first; every class for None (the admin)."""
        ...

    async def add_learners(self, class_id: str, learner_ids: list[str]) -> StoredClass | None:
        """The class with the learners added (None: no such class); ClassFull past MAX_LEARNERS."""
        ...

    async def add_assignment(self, assignment: StoredAssignment) -> bool:
        """False when the class does not exist; ClassFull past MAX_ASSIGNMENTS."""
        ...

    async def assignments(self, class_id: str) -> list[StoredAssignment]: ...

    async def sessions(self, class_id: str) -> list[Played]:
        """The ended sessions of the class's learners (`fair` unset: the routes look it up)."""
        ...


class MemoryClassStore:
    """Classes in this process, for development and tests without Neo4j: no figures (`NoGraph`)."""

    def __init__(self) -> None:
        self._classes: dict[str, StoredClass] = {}
        self._assignments: dict[str, list[StoredAssignment]] = {}

    async def create_class(self, klass: StoredClass) -> None:
        self._classes[klass.class_id] = klass
        self._assignments[klass.class_id] = []

    async def get_class(self, class_id: str) -> StoredClass | None:
        return self._classes.get(class_id)

    async def classes(self, teacher_id: str | None) -> list[StoredClass]:
        found = [c for c in self._classes.values() if teacher_id is None or c.teacher_id == teacher_id]
        return sorted(found, key=lambda c: (c.created_at, c.class_id))

    async def add_learners(self, class_id: str, learner_ids: list[str]) -> StoredClass | None:
        klass = self._classes.get(class_id)
        if klass is None:
            return None
        merged = tuple(dict.fromkeys([*klass.learner_ids, *learner_ids]))
        if len(merged) > MAX_LEARNERS:
            raise ClassFull(f"a class holds {MAX_LEARNERS} learners at most")
        klass = self._classes[class_id] = StoredClass(klass.class_id, klass.name, klass.teacher_id, merged,
                                                      klass.created_at)
        return klass

    async def add_assignment(self, assignment: StoredAssignment) -> bool:
        held = self._assignments.get(assignment.class_id)
        if held is None:
            return False
        if len(held) >= MAX_ASSIGNMENTS:
            raise ClassFull(f"a class holds {MAX_ASSIGNMENTS} assignments at most")
        held.append(assignment)
        return True

    async def assignments(self, class_id: str) -> list[StoredAssignment]:
        return list(self._assignments.get(class_id, []))

    async def sessions(self, class_id: str) -> list[Played]:
        raise NoGraph(NO_GRAPH)
