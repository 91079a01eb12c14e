"""A relative offer over real sockets, in every pack: "70 percent of your price" is read as 70 % of
the standing quote and gets a counter-offer, never the insult that "70" would have been; a number
the engine cannot place gets a question, and no insult clamp."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.brain import BrainRequest
from schemas.decision import AIDecision
from schemas.enums import OfferAssessment, Stage
from tests.fakes import ScriptedBrain, decision
from tests.servers import create, player, running_server

pytestmark = pytest.mark.anyio

# Each pack, an item, and a bare number far below that item's price.
PACKS = [("jaipur-bazaar", "Tomato", "5"), ("kyoto-antiques", "Tea bowl", "seventy"),
         ("marrakech-souk", "Brass lantern", "twenty")]


async def _opening(c: Any, item: str) -> dict[str, Any]:
    await c.recv()  # welcome
    await c.send({"type": "scene", "id": "s1", "object_grabbed": item})
    await c.until("ack", id="s1")
    got: list[dict[str, Any]] = await c.turn("t1", "Hello! How much is this?")
    return got[0]


@pytest.mark.parametrize(("scenario", "item", "far"), PACKS)
async def test_seventy_percent_of_the_price_gets_a_counter_offer_not_offence(scenario: str, item: str,
                                                                              far: str) -> None:
    async with running_server() as served:
        created = await create(served, scenario=scenario)
        async with await player(served, created) as c:
            first = await _opening(c, item)
            quote = first["counter_price"]
            assert quote, first
            got = await c.turn("t2", "How about 70 percent of your price?")
            reply = got[0]
            assert reply["learner_offer"] == round(quote * 0.7)
            assert reply["offer_read_from"] == "70 percent"
            assert reply["offer_assessment"] != OfferAssessment.INSULT.value
            assert "insult_min_drop" not in reply["flags"]
            assert reply["negotiation_state"] == Stage.HAGGLING.value
            assert reply["counter_price"] is not None and reply["counter_price"] <= quote
            assert reply["happiness_score"] > first["happiness_score"] - 15

            # A bare number far from the price: the vendor asks what was meant, in character.
            unsure = (await c.turn("t3", f"{far}?"))[0]
            assert unsure["learner_offer"] is None and unsure["offer_read_from"] == far
            assert unsure["offer_assessment"] == OfferAssessment.NONE.value
            assert far in unsure["text"]
            assert unsure["happiness_score"] >= reply["happiness_score"] - 2


def offended(request: BrainRequest) -> AIDecision:
    """A brain that takes any number as an insult, as the issue's LLM did with "70"."""
    stage = Stage.HAGGLING if request.stage is not Stage.GREETING else Stage.INQUIRY
    return decision("That is an insult.", request.happiness_score - 4, stage,
                    offer_assessment=OfferAssessment.INSULT, counter_price=request.vendor_quote or 18000)


async def test_an_unsure_reading_sets_the_brains_insult_aside() -> None:
    async with running_server(brain=ScriptedBrain(offended)) as served:
        created = await create(served, scenario="kyoto-antiques")
        async with await player(served, created) as c:
            await _opening(c, "Tea bowl")
            before = (await c.turn("t2", "Sumimasen"))[0]["happiness_score"]
            reply = (await c.turn("t3", "70?"))[0]
            assert reply["learner_offer"] is None and reply["offer_read_from"] == "70"
            assert reply["offer_assessment"] == OfferAssessment.NONE.value
            assert "insult_min_drop" not in reply["flags"] and "offer_assessment" in reply["flags"]
            assert reply["happiness_score"] == before - 4  # the brain's own step, no 15-point clamp
