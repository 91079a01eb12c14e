"""From the model's text to an `AIDecision`: the output format asked for, validation, the re-ask.

Every call asks for one JSON object, either in plain JSON mode (`{"type": "json_object"}`) or,
for models that support structured outputs, with the strict `json_schema` of
`decision_schema_format`. Either way the whole answer is then validated by `parse_decision`
against `schemas.decision.AIDecision`; a code fence around the JSON (some local models add one
even in JSON mode) is tolerated, anything else that is wrong raises `BrainOutputError` naming the
fault in words the model can act on (`happiness_score: Input should be less than or equal to 100
(got 150)`).

A bad answer gets one corrective re-ask: `reask_messages` extends the conversation with the
model's own answer (cut to `MAX_ECHO_CHARS`) and `corrective_message`, which names the error.

Nothing here does I/O. The raw model text goes back to the model in a re-ask and nowhere else;
only the `reply_text` of a validated decision ever reaches a client.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from brain.errors import BrainOutputError
from schemas.decision import AIDecision
from schemas.enums import Mood, OfferAssessment, Stage

MAX_FEEDBACK_CHARS = 600  # how much of the error is named in a re-ask
MAX_ECHO_CHARS = 4000  # how much of a bad answer is shown back to the model in a re-ask


def decision_schema_format() -> dict[str, Any]:
    """A strict `json_schema` response format for models that support structured outputs.

    Strict mode wants every property listed as required and no extra ones; ranges are left to the
    pydantic validation that follows every call. Models write the properties in the order given,
    so the decision's numbers and stage follow the words at once (docs/llm.md).
    """

    def one_of(values: type[Stage] | type[Mood] | type[OfferAssessment]) -> dict[str, Any]:
        return {"type": "string", "enum": [v.value for v in values]}

    properties: dict[str, Any] = {
        "reply_text": {"type": "string"},
        "counter_price": {"type": ["integer", "null"]},
        "negotiation_state": one_of(Stage),
        "happiness_score": {"type": "integer"},
        "vendor_mood": one_of(Mood),
        "offer_assessment": one_of(OfferAssessment),
        "internal_reasoning": {"type": "string"},
        "suggested_user_response": {"type": "string"},
    }
    return {
        "type": "json_schema",
        "json_schema": {
            "name": "vendor_decision",
            "strict": True,
            "schema": {"type": "object", "properties": properties,
                       "required": list(properties), "additionalProperties": False},
        },
    }


def response_format(json_schema: bool) -> dict[str, Any]:
    """The `response_format` sent with every call: strict structured outputs, or JSON mode."""
    return decision_schema_format() if json_schema else {"type": "json_object"}


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:6]:
        where = ".".join(str(p) for p in err["loc"]) or "object"
        got = err.get("input")
        shown = ""
        if err["type"] != "missing" and isinstance(got, int | float | bool | type(None)):
            shown = f" (got {json.dumps(got)})"
        elif err["type"] != "missing" and isinstance(got, str) and len(got) <= 40:
            shown = f" (got {json.dumps(got)})"
        parts.append(f"{where}: {err['msg']}{shown}")
    return "; ".join(parts)


def parse_decision(text: str) -> AIDecision:
    """Validate a model's whole answer, or raise `BrainOutputError` saying what is wrong."""
    body = text.strip()
    if body.startswith("```"):  # some local models fence JSON even in JSON mode
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0].strip()
    if not body:
        raise BrainOutputError("the answer was empty; it must be one JSON object")
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise BrainOutputError(f"the answer is not valid JSON: {exc.msg} at {where}") from None
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise BrainOutputError(f"the answer must be a JSON object, not a JSON {kind}")
    try:
        decision = AIDecision.model_validate(data)
    except ValidationError as exc:
        raise BrainOutputError(f"the JSON breaks the schema: {_describe(exc)}") from None
    if not decision.reply_text.strip():
        raise BrainOutputError("the JSON breaks the schema: reply_text is blank")
    try:
        decision.reply_text.encode("utf-8")
    except UnicodeEncodeError:
        raise BrainOutputError(
            "the JSON breaks the schema: reply_text has an unpaired surrogate") from None
    return decision


def corrective_message(feedback: str) -> str:
    return (
        "Your previous answer could not be used: "
        f"{feedback[:MAX_FEEDBACK_CHARS]}. "
        "Answer again with only the corrected JSON object: every key from OUTPUT_SCHEMA, in the "
        "same order with reply_text first, the values within the stated limits, and nothing "
        "before or after the object. Keep what Ramesh says if it was fine."
    )


def reask_messages(messages: Sequence[dict[str, str]], answer: str,
                   feedback: str) -> list[dict[str, str]]:
    """The conversation for the corrective re-ask: the model's bad answer, then what was wrong."""
    return [*messages,
            {"role": "assistant", "content": answer[:MAX_ECHO_CHARS]},
            {"role": "user", "content": corrective_message(feedback)}]
