"""The in-memory mirror: keeps nothing, so every change is durable as soon as it is made.

It is the default when no database is configured: acknowledgements then mean "accepted by this
process", which a restart loses. `server.mirror` is the durable implementation.
"""

from __future__ import annotations

from collections.abc import Callable

from session.changes import Change


class MemoryMirror:
    name = "memory"

    def __init__(self) -> None:
        self._versions: dict[str, int] = {}
        self.changes = 0

    def submit(self, change: Change) -> None:
        self._versions[change.session_id] = change.version
        self.changes += 1

    def has_room(self) -> bool:
        return True

    def durable_version(self, session_id: str) -> int:
        return self._versions.get(session_id, 0)

    def subscribe_durable(self, callback: Callable[[str, int], None]) -> None:
        """Never needed: every change is durable on arrival."""

    def forget(self, session_id: str) -> None:
        self._versions.pop(session_id, None)

    def statistics(self) -> dict[str, object]:
        return {"kind": self.name, "changes": self.changes, "lag_ms": 0.0, "queue_depth": 0,
                "batches": 0, "failures": 0, "buffer_full": False}
