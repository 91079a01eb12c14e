"""Scenario packs: validation that names the file and field, the list endpoint, each pack's norms
played by the rule brain, and the load bots on every pack without errors or violations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import resources
from typing import Any

import httpx
import pytest

from brain.rules_vendor import RuleBasedVendor
from clients.bots.runner import RunConfig, run
from schemas.brain import BrainRequest
from schemas.enums import OfferAssessment, Stage
from schemas.scenario import ScenarioError, available_scenarios, load_scenario, parse_manifest
from session.offers import assess_offer
from tests.servers import Served, server_process

PACKS = ("jaipur-bazaar", "kyoto-antiques", "marrakech-souk")


def manifest(name: str) -> dict[str, Any]:
    text = resources.files("schemas").joinpath("data", name, "manifest.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def test_three_packs_ship_and_validate() -> None:
    assert set(PACKS) <= set(available_scenarios())
    for name in PACKS:
        scenario = load_scenario(name)
        assert scenario.scenario == name and scenario.items and scenario.vendor.voice


@pytest.mark.parametrize(("break_it", "field"), [
    (lambda m: m["items"][0].pop("floor"), "items[0].floor"),
    (lambda m: m["lines"]["en-IN"].pop("deal"), "lines.en-IN: missing deal"),
    (lambda m: m["lines"]["en-IN"]["hold"].append("Only {offer} today."), "lines.en-IN.hold"),
    # An invitation is one sentence: a beginner's level may say no more, and a cut one invites nothing.
    (lambda m: m["lines"]["en-IN"]["invite_offer"].append("It is {price}. Make an offer."),
     "lines.en-IN.invite_offer: 'It is {price}. Make an offer.' is more than one sentence"),
    (lambda m: m["policy"]["safety"].pop("self_harm"), "policy.safety: missing self_harm"),
    (lambda m: m["rules"].update(insult_cost=2), "rules.insult_cost"),
    (lambda m: m["rules"]["offer_bands"].update(insult_below=0.95), "the bands must rise"),
    (lambda m: m["vendor"].update(languages=["xx-YY"]), "vendor.languages[0]"),
    (lambda m: m["hints"].pop("accept"), "hints: missing accept"),
    (lambda m: m.pop("fillers"), "fillers: Field required"),
    (lambda m: m["fillers"].pop("hi-EN"), "fillers: missing hi-EN"),
    (lambda m: m["backchannels"].update({"ja-JP": ["hai"]}), "backchannels: ja-JP is not a language the vendor"),
    (lambda m: m["backchannels"]["hi-EN"].append("Haan!"), "backchannels.hi-EN: 'Haan!' is not"),
    (lambda m: m["fillers"]["en-IN"].append("umm"), "fillers.en-IN: umm given twice"),
    (lambda m: m["thinking_sounds"].update({"ja-JP": ["Eto..."]}), "thinking_sounds: ja-JP is not a language"),
    (lambda m: m["thinking_sounds"]["hi-EN"].append("Hmm..."), "thinking_sounds.hi-EN: Hmm... given twice"),
    (lambda m: m["thinking_sounds"]["hi-EN"].append("ek do teen char paanch"), "thinking_sounds.hi-EN: 'ek do"),
])
def test_a_broken_pack_is_refused_naming_the_file_and_the_field(break_it: Any, field: str) -> None:
    data = manifest("jaipur-bazaar")
    break_it(data)
    with pytest.raises(ScenarioError) as refused:
        parse_manifest(json.dumps(data), "schemas/data/jaipur-bazaar/manifest.json")
    message = str(refused.value)
    assert message.startswith("schemas/data/jaipur-bazaar/manifest.json: ") and field in message, message


def test_not_json_is_refused_too() -> None:
    with pytest.raises(ScenarioError, match=r"where\.json: not JSON"):
        parse_manifest("{", "where.json")


def request(pack: str, **changes: Any) -> BrainRequest:
    scenario = load_scenario(pack)
    item = scenario.items[0]
    base: dict[str, Any] = {"session_id": "s", "scenario": pack, "turn": 3, "max_turns": 30,
                            "transcript": "", "stage": Stage.HAGGLING, "happiness_score": 60,
                            "vendor_mood": "neutral", "item": item.name, "vendor_quote": item.opening_quote}
    base.update(changes)
    return BrainRequest.model_validate(base)


def test_the_packs_judge_the_same_offer_differently() -> None:
    # Half the opening quote: fair in the Jaipur bazaar, an insult in Kyoto, good in Marrakech.
    labels = {pack: assess_offer(50, 100, load_scenario(pack).rules.offer_bands) for pack in PACKS}
    assert labels == {"jaipur-bazaar": OfferAssessment.FAIR, "kyoto-antiques": OfferAssessment.INSULT,
                      "marrakech-souk": OfferAssessment.GOOD}


def test_a_lowball_costs_far_more_in_kyoto_and_walking_away_only_pays_in_the_bazaars() -> None:
    vendor = RuleBasedVendor()
    drops = {}
    for pack in PACKS:
        quote = load_scenario(pack).items[0].opening_quote
        decision = vendor.decide(request(pack, learner_offer=round(quote * 0.3),
                                         offer_assessment=OfferAssessment.LOWBALL))
        drops[pack] = 60 - decision.happiness_score
    assert drops["kyoto-antiques"] > drops["jaipur-bazaar"] >= 6
    for pack, calls_back in (("jaipur-bazaar", True), ("kyoto-antiques", False), ("marrakech-souk", True)):
        quote = load_scenario(pack).items[0].opening_quote
        walked = vendor.decide(request(pack, transcript="no thanks, I am leaving, bye", vendor_quote=quote))
        assert walked.negotiation_state is Stage.WALKAWAY
        assert (walked.counter_price is not None and walked.counter_price < quote) is calls_back, pack


def test_each_pack_speaks_its_own_words() -> None:
    vendor = RuleBasedVendor()
    hello = {pack: vendor.decide(request(pack, stage=Stage.GREETING, transcript="hello", vendor_quote=None,
                                         item=None)).reply_text for pack in PACKS}
    assert "Namaste" in hello["jaipur-bazaar"] or "Ram ram" in hello["jaipur-bazaar"] or "Aao" in hello["jaipur-bazaar"]
    assert "Irasshaimase" in hello["kyoto-antiques"] or "Welcome" in hello["kyoto-antiques"]
    assert "tea" in hello["marrakech-souk"]
    asked = vendor.decide(request("kyoto-antiques", stage=Stage.GREETING, transcript="Sumimasen, ikura desu ka?",
                                  vendor_quote=None))
    assert asked.negotiation_state is Stage.INQUIRY and "yen" in asked.reply_text
    assert "ikura desu ka" in asked.suggested_user_response or "kudasai" in asked.suggested_user_response \
        or "possible" in asked.suggested_user_response


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with server_process() as s:
        yield s


def test_the_scenario_list_names_every_pack(served: Served) -> None:
    listed = httpx.get(f"{served.base_url}/api/scenarios", timeout=10).json()["scenarios"]
    by_id = {s["id"]: s for s in listed}
    assert set(PACKS) <= set(by_id)
    assert by_id["kyoto-antiques"]["vendor"] == "Tanaka-san" and by_id["kyoto-antiques"]["currency"] == "JPY"
    assert by_id["marrakech-souk"]["knowledge"]["pack_chunks"] > 5


@pytest.mark.anyio
@pytest.mark.parametrize("pack", PACKS)
async def test_the_bots_play_every_pack_without_errors_or_violations(served: Served, pack: str) -> None:
    config = RunConfig(url=served.base_url, sessions=8, personas=("polite", "lowballer", "walker", "rude"),
                       think_ms=10, duration_s=2.5, ramp_s=0.3, scenario=pack)
    summary = (await run(config)).summary()
    assert summary["errors"]["count"] == 0, summary["errors"]
    assert summary["violations"]["count"] == 0, summary["violations"]
    assert summary["sessions_completed"] >= 8
    finished = {p: {k: v for k, v in c.items() if k != "unfinished"} for p, c in summary["outcomes"].items()}
    assert "deal" not in finished["rude"], finished
    if pack == "kyoto-antiques":
        assert "deal" not in finished["walker"], finished  # nobody calls a walker back in Kyoto
    else:
        assert "deal" in finished["walker"], finished
