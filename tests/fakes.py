"""Test doubles that implement the project's real interfaces (no patching of internals)."""

from __future__ import annotations

from collections.abc import Callable

import anyio

from schemas.brain import BrainRequest, BrainResult, Ledger
from schemas.decision import AIDecision
from schemas.enums import Mood, Stage
from session.protocols import DeltaSink

Script = Callable[[BrainRequest], AIDecision]


def stay(request: BrainRequest) -> AIDecision:
    """A brain that says something and changes nothing."""
    return AIDecision(reply_text=f"Turn {request.turn}, friend.",
                      happiness_score=request.happiness_score,
                      negotiation_state=request.stage, vendor_mood=request.vendor_mood)


class ScriptedBrain:
    """Answers with whatever `script` proposes; optionally streams and waits first."""

    name = "scripted"

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
