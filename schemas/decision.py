"""What a brain proposes for one vendor turn (the seed's `AIDecision`).

A proposal is only a proposal: the session's rules engine validates every field before anything
reaches a client. `reply_text` comes first so that a streaming brain can speak before the rest of
the object has arrived.
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


def decision_json_schema() -> dict[str, object]:
    """The JSON schema a model is asked to fill, in field order (reply_text first)."""
    return AIDecision.model_json_schema()
