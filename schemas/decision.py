"""What a brain proposes for one vendor turn (the seed's `AIDecision`).

A proposal is only a proposal: the session's rules engine validates every field before anything
reaches a client. A streaming brain reports the decision's numbers and stage (`DecisionHead`) as
soon as the model has written them, so that the engine can rule on them while the words still
stream; words that name a number wait for that ruling (`session/spoken.py`, docs/llm.md).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from schemas.enums import Mood, OfferAssessment, Stage

MAX_REPLY_CHARS = 600


class AIDecision(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    reply_text: str = Field(min_length=1, max_length=MAX_REPLY_CHARS)
    happiness_score: int = Field(ge=0, le=100)
    negotiation_state: Stage
    vendor_mood: Mood
    internal_reasoning: str = Field(default="", max_length=2000)
    counter_price: int | None = Field(default=None, ge=0, le=10_000_000)
    offer_assessment: OfferAssessment = OfferAssessment.NONE
    suggested_user_response: str = Field(default="", max_length=300)
    suggested_user_response_english: str = Field(default="", max_length=300)
    # reply_text in English, when the brain knows it (the rule vendor's pack lines); "" otherwise.
    reply_text_english: str = Field(default="", max_length=MAX_REPLY_CHARS)


# The fields the engine rules on before any number in the words may be said, in the order the
# prompt asks for them right after `reply_text` (brain/prompt.py, OUTPUT_SCHEMA).
HEAD_FIELDS = ("counter_price", "negotiation_state", "happiness_score")


class DecisionHead(BaseModel):
    """The numbers and stage of a decision still being written: what a streaming brain reports
    once it has read every one of `HEAD_FIELDS`. Validated as strictly as an `AIDecision`'s."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    happiness_score: int = Field(ge=0, le=100)
    negotiation_state: Stage
    counter_price: int | None = Field(ge=0, le=10_000_000)
    offer_assessment: OfferAssessment = OfferAssessment.NONE
    vendor_mood: Mood | None = None


def decision_json_schema() -> dict[str, object]:
    """The JSON schema a model is asked to fill, in field order (reply_text first)."""
    return AIDecision.model_json_schema()
