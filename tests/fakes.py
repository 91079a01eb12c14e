"""Test doubles that implement the project's real interfaces (no patching of internals)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel
import orjson

from schemas.brain import BrainRequest, BrainResult, DeltaSink, Ledger
from schemas.codec import Envelope, WireFormat
from schemas.decision import AIDecision
from schemas.enums import Mood, Stage
from session.actor import SessionActor
from session.changes import Change
from session.mirror import MemoryMirror
from session.registry import SessionRegistry

Script = Callable[[BrainRequest], AIDecision]


def stay(request: BrainRequest) -> AIDecision:
    """A brain that says something and changes nothing."""
    return AIDecision(reply_text=f"Turn {request.turn}, friend.",
                      happiness_score=request.happiness_score,
                      negotiation_state=request.stage, vendor_mood=request.vendor_mood)


class ScriptedBrain:
    """Answers with whatever `script` proposes; optionally streams and waits first."""

    name = "scripted"
    propose_inline = None  # the parts of `brain.policy.Brain` it does not have
    write_summary = None

    async def aclose(self) -> None:
        """Nothing to close."""

    def __init__(self, script: Script = stay, *, delay: float = 0.0, stream: bool = False) -> None:
        self.script = script
        self.delay = delay
        self.stream = stream
        self.requests: list[BrainRequest] = []

    async def propose(
        self, request: BrainRequest, on_delta: DeltaSink | None = None
    ) -> BrainResult:
        self.requests.append(request)
        decision = self.script(request)
        if self.delay:
            await anyio.sleep(self.delay)
        if self.stream and on_delta is not None:
            for word in decision.reply_text.split(" "):
                await on_delta.delta(word + " ")
        ledger = Ledger(brain_ms=self.delay * 1000)
        return BrainResult(decision=decision, streamed=self.stream, ledger=ledger)


def decision(text: str, happiness: int, stage: Stage, **extra: object) -> AIDecision:
    return AIDecision(reply_text=text, happiness_score=happiness, negotiation_state=stage,
                      vendor_mood=Mood.NEUTRAL, **extra)  # type: ignore[arg-type]


class FakeConnection:
    """A Connection that records what the actor sends; `capacity` models a bounded queue."""

    _ids = iter(range(1, 1_000_000))

    def __init__(self, role: str = "player", capacity: int = 10_000) -> None:
        self.role = role
        self.conn_id = next(self._ids)
        self.capacity = capacity
        self.sent: list[dict[str, object]] = []
        self.closed: tuple[int, str] | None = None

    def send_nowait(self, envelope: Envelope) -> bool:
        if self.closed is not None:
            return False
        if len(self.sent) >= self.capacity:
            self.close_nowait(4430, "slow")
            return False
        self.sent.append(orjson.loads(envelope.encode(WireFormat.JSON)))
        return True

    def close_nowait(self, code: int, reason: str) -> None:
        self.closed = self.closed or (code, reason)

    def of_type(self, *kinds: str) -> list[dict[str, object]]:
        return [f for f in self.sent if f["type"] in kinds]

    def stream(self) -> list[dict[str, object]]:
        return [f for f in self.sent if "seq" in f and f["type"] != "welcome"]


class RecordingMirror(MemoryMirror):
    """The in-memory mirror (every change durable at once), keeping every change it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[Change] = []

    def submit(self, change: Change) -> None:
        super().submit(change)
        self.log.append(change)


class DeferredMirror:
    """A mirror whose changes become durable only when the test says so."""

    name = "deferred"

    def __init__(self) -> None:
        self.changes: list[Change] = []
        self.durable: dict[str, int] = {}
        self.room = 1_000_000
        self._callbacks: list[Callable[[str, int], None]] = []

    def submit(self, change: Change) -> None:
        self.changes.append(change)

    def has_room(self) -> bool:
        return len(self.changes) < self.room

    def durable_version(self, session_id: str) -> int:
        return self.durable.get(session_id, 0)

    def subscribe_durable(self, callback: Callable[[str, int], None]) -> None:
        self._callbacks.append(callback)

    def forget(self, session_id: str) -> None:
        self.durable.pop(session_id, None)

    def flush(self) -> None:
        for change in self.changes:
            self.durable[change.session_id] = max(self.durable.get(change.session_id, 0), change.version)
        for sid, version in self.durable.items():
            for callback in self._callbacks:
                callback(sid, version)


@asynccontextmanager
async def hosted(actor: SessionActor) -> AsyncIterator[SessionActor]:
    """`actor` driven as the server drives every session: attached to a running registry's
    dispatcher, which drains it whenever it has mail. Stopped on the way out."""
    registry = SessionRegistry(actor.brain, actor.mirror)
    async with anyio.create_task_group() as tg:
        await tg.start(registry.run)
        registry.host(actor)
        try:
            yield actor
        finally:
            actor.stop()
            await anyio.lowlevel.checkpoint()  # the dispatcher applies the stop
            tg.cancel_scope.cancel()
