"""`OpenAIBrain`'s model answers (brain/decision.py) through the real openai SDK, over real HTTP,
against tests/openai_server.py: the response format asked for, the corrective re-ask, and the
fallback when the answer stays unusable."""

from __future__ import annotations

import json

import pytest

from brain.llm import FALLBACK_LINES
from schemas.enums import Stage
from tests.llm_support import Sink, brain, decision, negotiation, play, request
from tests.openai_server import FakeOpenAI, reply

pytestmark = pytest.mark.anyio


# --------------------------------------------------------------------------- the format asked for


async def test_strict_json_schema_is_optional(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(reply(decision()))
    async with brain(openai_fake, json_schema=True) as b:
        await b.propose(request())
    fmt = openai_fake.requests[0].response_format
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert next(iter(fmt["json_schema"]["schema"]["properties"])) == "reply_text"


# --------------------------------------------------------------------------- invalid answers


async def test_invalid_json_gets_one_corrective_re_ask(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(reply("{'reply_text': 'single quotes'"), reply(decision("Fixed, ji.")))
    async with brain(openai_fake) as b:
        result = await b.propose(request())
    assert not result.fallback and result.decision.reply_text == "Fixed, ji."
    assert openai_fake.calls == 2 and result.ledger.corrective_asks == 1
    again = openai_fake.requests[1].messages
    assert [m["role"] for m in again] == ["system", "user", "assistant", "user"]
    assert again[2]["content"] == "{'reply_text': 'single quotes'"
    assert "not valid JSON" in again[3]["content"]
    assert again[:2] == openai_fake.requests[0].messages


async def test_schema_violation_withdraws_the_streamed_text_before_re_asking(
        openai_fake: FakeOpenAI) -> None:
    bad = decision("Deal, deal, deal!", happiness=150, stage="PARTY")
    openai_fake.script(reply(bad), reply(decision("Let us talk properly, ji.")))
    sink = Sink()
    async with brain(openai_fake) as b:
        result = await b.propose(request(), sink)
    assert not result.fallback and result.ledger.corrective_asks == 1
    assert sink.withdrawals == ["corrective re-ask"]
    kinds = [kind for kind, _, _ in sink.events]
    # end: the text is complete; then the numbers it was written with, for the session to rule on
    assert kinds.index("withdraw") > 0 and kinds[-3:] == ["delta", "end", "decided"]
    assert sink.heads == [{"counter_price": None, "negotiation_state": "PARTY", "happiness_score": 150},
                          {"counter_price": None, "negotiation_state": "GREETING", "happiness_score": 50}]
    assert sink.standing() == "Let us talk properly, ji."
    feedback = openai_fake.requests[1].last_user
    assert "happiness_score" in feedback and "less than or equal to 100" in feedback
    assert "negotiation_state" in feedback and '"PARTY"' in feedback


async def test_two_invalid_answers_fall_back_and_raw_text_goes_nowhere(
        openai_fake: FakeOpenAI) -> None:
    openai_fake.script(reply("I am a language model and I refuse."),
                       reply(json.dumps({"reply_text": "SECRET RAW", "happiness_score": "lots"})))
    sink = Sink()
    n = negotiation(stage=Stage.INQUIRY, happiness=58)
    async with brain(openai_fake) as b:
        _, result, outcome = await play(n, b, "Tell me about the mangoes", sink)
    assert openai_fake.calls == 2 and result.ledger.corrective_asks == 1
    assert result.fallback and "re-ask" in (result.error or "")
    assert sink.standing() == ""  # streamed text was withdrawn
    assert sink.withdrawals == ["fallback"]
    assert outcome.events[0].text in FALLBACK_LINES
    assert "SECRET" not in outcome.events[0].text and "language model" not in outcome.events[0].text
    assert n.stage is Stage.INQUIRY and n.happiness == 58
