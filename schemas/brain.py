"""The contract between the session and any brain: what it is told, and what it returns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from schemas.decision import AIDecision
from schemas.enums import LanguageCode, Level, Mood, OfferAssessment, Stage
from schemas.learner import LearnerRecall
from schemas.review import PracticeTarget


class HistoryLine(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    turn: int
    role: str  # "user" or "vendor"
    text: str


class StageVisit(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    from_stage: Stage
    to_stage: Stage
    at_turn: int
    happiness: int


class GraphContext(BaseModel):
    """The seed's conversation-graph context, computed from the session's own history."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    turns_per_stage: dict[Stage, int] = Field(default_factory=dict)
    happiness_trend: tuple[int, ...] = ()
    trend_direction: str = "steady"  # rising, falling or steady
    items_discussed: dict[str, int] = Field(default_factory=dict)
    transitions: tuple[StageVisit, ...] = ()
    turns_in_current_stage: int = 0
    stability_hint: str = ""


class BrainRequest(BaseModel):
    """Everything a brain may use to propose the vendor's next turn."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    scenario: str
    scenario_version: int = Field(1, ge=1)  # which published version of the pack (docs/studio.md)
    turn: int  # the learner turn being answered, 1-based
    max_turns: int
    transcript: str
    input_language: LanguageCode = LanguageCode.EN_IN
    target_language: LanguageCode = LanguageCode.EN_IN
    stage: Stage
    happiness_score: int
    vendor_mood: Mood
    item: str | None = None
    object_grabbed: str | None = None
    vendor_quote: int | None = None
    first_quote: int | None = None
    learner_offer: int | None = None  # parsed by the server from the transcript
    offer_assessment: OfferAssessment = OfferAssessment.NONE  # the server's, when it had a number
    # How the server read the offer (session/offers.py): the words it came from, the number as said
    # and how sure it is. An unsure reading has no `learner_offer`: the vendor asks what was meant.
    offer_read_from: str = ""
    offer_heard: str = ""
    offer_confidence: float = Field(0.0, ge=0, le=1)
    offer_unsure: bool = False
    wrap_up: bool = False
    returning_after_pause: bool = False
    history: tuple[HistoryLine, ...] = ()  # the latest lines, oldest first; the brain keeps what fits its budget
    summary: str = ""  # the session's running summary of the conversation, data only (docs/memory.md)
    graph: GraphContext = Field(default_factory=GraphContext)
    level: Level = Level.INTERMEDIATE  # the learner's level (the pack's `levels` say what it changes)
    context_block: str = ""  # caller-supplied conversation memory (library interface)
    rag_context: str = ""  # retrieved cultural context, data only
    # What the vendor remembers of a known learner from earlier sessions at his stall (docs/memory.md);
    # None for a learner he has not met. Facts from the server's records, rendered as data.
    learner: LearnerRecall | None = None
    # The learner's due review items not yet produced this session, for the vendor to bring back
    # (docs/learning.md): data, like `learner`; empty when REVIEWS_INVITE is off.
    practice: tuple[PracticeTarget, ...] = ()


class Ledger(BaseModel):
    """Per-turn accounting of what the brain cost, in the spirit of a request ledger."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    llm_calls: int = 0
    retries: int = 0
    corrective_asks: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    first_token_ms: float | None = None
    first_delta_ms: float | None = None
    brain_ms: float = 0.0
    prompt_version: str | None = None
    # Calls made for the running summary (docs/memory.md) that finished since the last reply; their
    # calls, retries and tokens are included in the counts above.
    summary_calls: int = 0


class DeltaSink(Protocol):
    """Where a streaming brain pushes `reply_text` as it arrives, and takes it back if it must."""

    @property
    def spoken(self) -> bool:
        """A voice speaks the words as they come: the brain reads the model eagerly until the voice
        can cut its first piece (brain/turn.py), where a reader of text needs only the first words."""
        ...

    async def delta(self, text: str) -> None:
        """Push the next piece of the reply text (not the whole text so far)."""
        ...

    async def withdraw(self, reason: str) -> None:
        """Everything pushed so far for this turn will not stand (a re-ask or a fallback)."""
        ...

    async def end(self) -> None:
        """The reply text is complete (the rest of the decision is still coming): a speaking
        client may say its last sentence now (docs/voice.md)."""
        ...

    async def decided(self, head: Mapping[str, object]) -> None:
        """The model has written the decision's numbers and stage (`schemas.decision.HEAD_FIELDS`),
        as they stand in its JSON, unvalidated: the session rules on them and says the words
        that name a price (session/spoken.py)."""
        ...


Policy = Literal["P0", "P1", "P2", "P3"]


class BrainResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    decision: AIDecision
    fallback: bool = False  # True when the brain gave up and answered with its safe line
    streamed: bool = False  # True when reply.delta text was pushed before this result
    ledger: Ledger = Field(default_factory=Ledger)
    error: str | None = None
    # Which rule of the response policy answered (docs/knowledge.md): P0 safety, P1 grounded in
    # the scenario's knowledge, P2 an objection template, P3 the safe default. `sources` are the
    # chunk ids a P1 answer was given.
    policy: Policy = "P3"
    sources: tuple[str, ...] = ()
