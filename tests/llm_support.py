"""What the LLM brain's tests share: a decision as the model writes it, a recording `DeltaSink`,
an `OpenAIBrain` on the fake OpenAI server (tests/openai_server.py), requests and negotiations,
and one turn played through a negotiation and the brain."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from brain.llm import OpenAIBrain
from schemas.brain import BrainRequest, BrainResult
from schemas.enums import Stage
from session.negotiation import Negotiation
from session.records import TurnOutcome
from session.rules import Limits
from tests.openai_server import FakeOpenAI

FAST = (0.05, 0.1)  # the backoff in tests: the retry policy, without the seconds of waiting


def decision(text: str = "Namaste ji, come and see my tomatoes.", happiness: int = 50,
             stage: str = "GREETING", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {  # in the prompt's order: the words, then the numbers and stage
        "reply_text": text, "counter_price": None, "negotiation_state": stage, "happiness_score": happiness,
        "vendor_mood": "neutral", "offer_assessment": "none",
        "internal_reasoning": "Being friendly.", "suggested_user_response": "How much is this?",
    }
    out.update(extra)
    return out


class Sink:
    """A DeltaSink that records what it is given, and when."""

    spoken = False  # a reader of text

    def __init__(self) -> None:
        self.events: list[tuple[str, str, float]] = []
        self.heads: list[dict[str, object]] = []

    async def delta(self, text: str) -> None:
        self.events.append(("delta", text, time.perf_counter()))

    async def withdraw(self, reason: str) -> None:
        self.events.append(("withdraw", reason, time.perf_counter()))

    async def end(self) -> None:
        self.events.append(("end", "", time.perf_counter()))

    async def decided(self, head: Mapping[str, object]) -> None:
        self.heads.append(dict(head))
        self.events.append(("decided", json.dumps(dict(head), sort_keys=True), time.perf_counter()))

    @property
    def deltas(self) -> list[str]:
        return [text for kind, text, _ in self.events if kind == "delta"]

    @property
    def withdrawals(self) -> list[str]:
        return [text for kind, text, _ in self.events if kind == "withdraw"]

    def standing(self) -> str:
        """The text a client shows: deltas since the last withdrawal."""
        shown: list[str] = []
        for kind, text, _ in self.events:
            if kind == "withdraw":
                shown.clear()
            elif kind == "delta":
                shown.append(text)
        return "".join(shown)


@asynccontextmanager
async def brain(fake: FakeOpenAI, **options: Any) -> AsyncIterator[OpenAIBrain]:
    options.setdefault("backoff", FAST)
    options.setdefault("timeout_ms", 5000)
    instance = OpenAIBrain(api_key="test", base_url=fake.base_url, **options)
    try:
        yield instance
    finally:
        await instance.aclose()


def request(**changes: Any) -> BrainRequest:
    base: dict[str, Any] = {
        "session_id": "s1", "scenario": "jaipur-bazaar", "turn": 1, "max_turns": 30,
        "transcript": "Namaste bhaiya!", "stage": Stage.GREETING, "happiness_score": 50,
        "vendor_mood": "neutral",
    }
    base.update(changes)
    return BrainRequest.model_validate(base)


def negotiation(stage: Stage = Stage.GREETING, happiness: int = 50, item: str | None = None,
                quote: int | None = None, limits: Limits | None = None) -> Negotiation:
    n = Negotiation(session_id="s1", scenario_name="jaipur-bazaar", created_at=0.0,
                    limits=limits or Limits())
    n.stage, n.happiness = stage, happiness
    if item is not None:
        n.item = item
        if quote is not None:
            n.quotes[item] = quote
            n.first_quotes[item] = quote
    return n


async def play(n: Negotiation, the_brain: OpenAIBrain, text: str,
               sink: Sink | None = None) -> tuple[BrainRequest, BrainResult, TurnOutcome]:
    now = float(n.turn + 1)
    pending = n.begin_turn(text, f"c{n.turn + 1}", now)
    req = n.brain_request(pending)
    result = await the_brain.propose(req, sink)
    return req, result, n.complete_turn(pending, result, now + 0.5)


def gaps(fake: FakeOpenAI) -> list[float]:
    times = [r.received_at for r in fake.requests]
    return [b - a for a, b in itertools.pairwise(times)]
