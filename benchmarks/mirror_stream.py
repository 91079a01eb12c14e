"""The recorded stream of real negotiations that benchmarks/mirror.py (a) and mirror_cost.py (d)
write to Neo4j: rule-brain sessions played by the bots' personas, every change the actors made."""

from __future__ import annotations

import asyncio
from typing import Any

from brain.rules_vendor import RuleBasedVendor
from clients.bots.personas import PERSONAS, LearnerView
from schemas.frames import SceneFrame, TranscriptFrame
from session.changes import Change
from session.mirror import MemoryMirror
from session.registry import SessionRegistry

ITEMS = ("Tomato", "Apple", "Orange", "Pumpkin", "Watermelon")


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(0, min(len(ordered) - 1, -(-int(q * len(ordered) * 1000) // 1000) - 1))], 2)


# ---------------------------------------------------------------------------- (a) throughput


class Recorder(MemoryMirror):
    """Durable at once (like the memory mirror), and keeps every change."""

    def __init__(self) -> None:
        super().__init__()
        self.stream: list[Change] = []

    def submit(self, change: Change) -> None:
        super().submit(change)
        self.stream.append(change)


class _Conn:
    role, conn_id = "player", 0

    def __init__(self) -> None:
        self.replies: list[dict[str, Any]] = []

    def send_nowait(self, envelope: Any) -> bool:
        event = envelope.event
        if event.type == "reply":
            self.replies.append(event.model_dump(mode="json"))
        return True

    def close_nowait(self, code: int, reason: str) -> None:
        pass


async def record_stream(turns: int) -> list[Change]:
    """Play personas through real actors until `turns` learner turns are recorded."""
    recorder = Recorder()
    registry = SessionRegistry(RuleBasedVendor(), recorder)
    names = sorted(PERSONAS)
    task = asyncio.ensure_future(registry.run())
    await asyncio.sleep(0)
    played, n = 0, 0
    while played < turns:
        persona = PERSONAS[names[n % len(names)]](ITEMS[n % len(ITEMS)])
        actor = registry.create(learner_id=persona.name)
        conn = _Conn()
        conn.conn_id = n + 1
        actor.connect(conn)  # type: ignore[arg-type]
        actor.submit(conn, SceneFrame(type="scene", id="scene", object_grabbed=persona.item))  # type: ignore[arg-type]
        view, k = LearnerView(), 0
        while not view.is_over and k < 30 and played < turns:
            k += 1
            actor.submit(conn, TranscriptFrame(type="transcript", id=f"t{k}", text=persona.next_line(view)))  # type: ignore[arg-type]
            while len(conn.replies) < k:  # noqa: ASYNC110 - the fake connection has nothing to wait on
                await asyncio.sleep(0)
            view = LearnerView.from_reply(conn.replies[-1])
            played += 1
        n += 1
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    return recorder.stream


def renamed(stream: list[Change], tag: str) -> list[Change]:
    return [c._replace(session_id=f"{tag}-{c.session_id}") for c in stream]
