"""One value another step will give: what a caller outside the actor waits on (issue #32).

The actor answers a transcriber's `Consult` and a socketless caller's turn (`reply_to`) in its own
step; the caller awaits the `Answer` it passed in. Nothing here touches the session.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import anyio

__all__ = ["Answer"]

T = TypeVar("T")


class Answer(Generic[T]):
    __slots__ = ("done", "given", "value")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.given = False
        self.value: T | None = None

    def __call__(self, value: T) -> None:
        """Given once, by the actor's step; later calls are ignored."""
        if not self.given:
            self.value, self.given = value, True
            self.done.set()
