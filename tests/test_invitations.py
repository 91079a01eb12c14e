"""Which invitation the rule vendor speaks for a learner's due review items (brain/practice.py,
`choose`; docs/learning.md, The vendor brings them back): the target that fits the moment, never
in place of a line whose news the invitation would not carry, and never a change to the numbers."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from brain.practice import MOMENTS, OPENINGS, PRICE_NEWS, choose
from brain.rules_vendor import RuleBasedVendor
from schemas.brain import BrainRequest
from schemas.enums import Level, OfferAssessment, Outcome, Stage
from schemas.learner import LearnerRecall
from schemas.pack import HINT_KEYS, INVITE_FIELDS, LINE_KEYS
from schemas.policy import mood_for
from schemas.review import PracticeTarget
from schemas.scenario import available_scenarios, load_scenario

TARGET_KEYS = ("greet", "ask", "open", "counter", "take_callback", "return", "accept", "respect", "lowball",
               "insult", "taboo", "unclear:kitne", "card:c1")


def target(key: str) -> PracticeTarget:
    kind = "respect" if key == "respect" else "avoid" if key in ("lowball", "insult", "taboo") else \
        "card" if key.startswith("card:") else "phrase"
    return PracticeTarget(item_id=key, kind=kind, key=key, phrase=f"the {key} item", cues=("kitne",))


targets_st = st.lists(st.sampled_from(TARGET_KEYS), max_size=3, unique=True).map(lambda ks: tuple(map(target, ks)))
pools_st = st.sets(st.sampled_from(sorted(INVITE_FIELDS)))


@settings(max_examples=300, deadline=None)
@given(targets_st, st.sampled_from(LINE_KEYS), st.sampled_from(("", *HINT_KEYS)), pools_st,
       st.integers(1, 12))
def test_an_invitation_is_for_a_due_target_and_keeps_the_news(targets: tuple[PracticeTarget, ...], key: str,
                                                                moment: str, pools: set[str], turn: int) -> None:
    chosen = choose(targets, key, moment, pools, turn)
    if chosen is None:
        return
    assert chosen in pools  # a pack without the pool does not invite
    assert any(chosen == choose((t,), key, moment, pools, turn) for t in targets)  # one target's pool
    assert not (key in OPENINGS and turn < 2)  # turn 1's greeting is the remembered learner's welcome
    assert key in OPENINGS | {"hold", "repeat_quote"} | PRICE_NEWS  # nothing else carries so little
    if key in PRICE_NEWS:
        # A new price gives way only to an invitation that says it and opens the learner's next move.
        assert chosen in ("invite_offer", "invite_accept") and moment in MOMENTS[chosen]


@settings(max_examples=200, deadline=None)
@given(targets_st, st.sampled_from(LINE_KEYS), st.sampled_from(HINT_KEYS), st.integers(2, 12))
def test_the_phrase_of_this_very_moment_wins(targets: tuple[PracticeTarget, ...], key: str, moment: str,
                                             turn: int) -> None:
    pools = set(INVITE_FIELDS)
    mine = [t for t in targets if t.key == moment and choose((t,), key, moment, pools, turn) is not None]
    if mine:
        assert choose(targets, key, moment, pools, turn) == choose((mine[0],), key, moment, pools, turn)


def test_no_target_no_invitation_and_a_taboo_or_a_card_is_never_invited_by_a_line() -> None:
    pools = set(INVITE_FIELDS)
    assert choose((), "hold", "open", pools, 5) is None
    assert choose((target("taboo"), target("card:c1")), "hold", "open", pools, 5) is None


def request(pack: str, turn: int, stage: Stage, targets: tuple[PracticeTarget, ...], transcript: str,
            quote: int | None, offer: int | None, assessment: OfferAssessment, level: Level) -> BrainRequest:
    scenario = load_scenario(pack)
    item = scenario.items[0]
    return BrainRequest(
        session_id="t", scenario=pack, turn=turn, max_turns=30, transcript=transcript, stage=stage,
        happiness_score=50, vendor_mood=mood_for(50), item=item.name, level=level, vendor_quote=quote,
        first_quote=quote, learner_offer=offer, offer_assessment=assessment if offer is not None else
        OfferAssessment.NONE, practice=targets,
        learner=LearnerRecall(sessions=1, last_outcome=Outcome.DEAL, last_item=item.name, last_paid=70))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(available_scenarios()), st.integers(1, 14),
       st.sampled_from((Stage.GREETING, Stage.INQUIRY, Stage.HAGGLING, Stage.WALKAWAY)), targets_st,
       st.sampled_from(("hello", "how much is this?", "hmm", "too expensive", "ok deal", "I will pay 60",
                        "bye")),
       st.one_of(st.none(), st.integers(40, 400)), st.one_of(st.none(), st.integers(5, 400)),
       st.sampled_from(tuple(OfferAssessment)), st.sampled_from(tuple(Level)))
# Found by this test after the merge: a held quote that the learner never heard (no standing quote)
# was given up to an invitation to address him respectfully, and its price went unsaid.
@example("jaipur-bazaar", 1, Stage.HAGGLING, (target("respect"),), "hello", None, None, OfferAssessment.INSULT,
         Level.BEGINNER)
def test_an_invitation_changes_the_words_only(pack: str, turn: int, stage: Stage,
                                              targets: tuple[PracticeTarget, ...], transcript: str,
                                              quote: int | None, offer: int | None,
                                              assessment: OfferAssessment, level: Level) -> None:
    vendor = RuleBasedVendor()
    invited = vendor.decide(request(pack, turn, stage, targets, transcript, quote, offer, assessment, level))
    plain = vendor.decide(request(pack, turn, stage, (), transcript, quote, offer, assessment, level))
    same = ("happiness_score", "negotiation_state", "vendor_mood", "counter_price", "offer_assessment",
            "suggested_user_response")
    assert invited.model_dump(include=set(same)) == plain.model_dump(include=set(same))
    price = invited.counter_price
    if price is not None and price != quote and str(price) in plain.reply_text:
        assert str(price) in invited.reply_text  # a new price is still said (a standing one may go unsaid)


def test_a_quote_gives_way_to_an_invitation_to_offer_when_an_opening_offer_is_due() -> None:
    vendor = RuleBasedVendor()
    pools = load_scenario("jaipur-bazaar").lines_for(None)
    opening = target("open")
    asked = request("jaipur-bazaar", 1, Stage.GREETING, (opening,), "how much is this?", None, None,
                    OfferAssessment.NONE, Level.INTERMEDIATE)
    quoted = vendor.decide(asked)
    assert quoted.counter_price is not None
    assert quoted.reply_text == pools["invite_offer"][1].format(price=quoted.counter_price)  # turn 1's line
    # The same quote with only an `accept` phrase due: the invitation would not fit, the quote stands.
    usual = vendor.decide(asked.model_copy(update={"practice": (target("accept"),)}))
    assert usual.reply_text not in {line.format(price=quoted.counter_price) for line in pools["invite_accept"]}
    # A lowball is answered as one: its counter carries the judgement and is never replaced.
    low = vendor.decide(request("jaipur-bazaar", 4, Stage.HAGGLING, (opening, target("counter")), "I will pay 5",
                                120, 5, OfferAssessment.LOWBALL, Level.INTERMEDIATE))
    assert low.reply_text not in {line.format(price=low.counter_price) for line in pools["invite_offer"]}
