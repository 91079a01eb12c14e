"""The vendor without a language model: deterministic and keyword-driven, for every scenario pack.

This is the default brain when no OpenAI key is set, and the one load tests hammer. It reads cue
words (`brain.intents`, plus the pack's own), takes the server's own judgement of any offer from
the request, and plays a simple haggling policy: quote high, concede a share of the gap each turn
(more when happy), never below an acceptable price that falls with good mood and with the clock,
accept anything at or above it, and call the learner back when they walk.

What differs between cultures comes from the pack (`schemas.pack.RuleParams`): what a lowball,
an insult or a taboo phrase costs, how fast he concedes, what respect earns, and whether walking
away is part of the game (if not, he lets the learner go at the same price and soon closes). His
words are the pack's lines in the session's language, and his suggestions the pack's hints.

It proposes moves the session's rules would allow (it mirrors their limits below) so that
validation rarely has to overrule it; the rules engine stays the authority either way. No
randomness and no clock in the decision: the same request always gets the same answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from brain.intents import Intents, read_intents
from brain.practice import vendor_line
from schemas.brain import BrainRequest, BrainResult, DeltaSink, Ledger
from schemas.decision import AIDecision
from schemas.enums import LanguageCode, Mood, OfferAssessment, Stage
from schemas.lines import say, spoken_items
from schemas.policy import (
    DEFAULT_MAX_MOOD_DELTA,
    INSULT_MIN_DROP,
    LOWBALL_MIN_DROP,
    OPENING_HINT,
    REENTRY_HAPPINESS,
    TRANSITIONS,
    mood_for,
    round_price,
    suggested_offer,
)
from schemas.scenario import Item, Scenario, load_scenario

# The session's published limits, so the vendor proposes what the rules engine will accept.
MAX_STEP = DEFAULT_MAX_MOOD_DELTA
INSULT_DROP = INSULT_MIN_DROP
LOWBALL_DROP = LOWBALL_MIN_DROP

CLOSE_AT = 10  # at or below this happiness Ramesh sends the learner away
WALKAWAY_PATIENCE = 3  # idle turns in WALKAWAY before he gives up calling
EAGER_UNTIL = 8  # before this turn he holds out for more than his usual price
EAGER_PREMIUM = 0.3  # how much more, at turn 2, shrinking to nothing by EAGER_UNTIL

# Share of the gap between quote and offer that Ramesh gives up, by the server's label.
CONCESSION = {OfferAssessment.INSULT: 0.0, OfferAssessment.LOWBALL: 0.12, OfferAssessment.FAIR: 0.3,
              OfferAssessment.GOOD: 0.4, OfferAssessment.EXCELLENT: 0.5, OfferAssessment.NONE: 0.25}
# How a fair or better offer moves his mood; what an insult or a lowball costs is the pack's
# (`RuleParams.insult_cost`, `lowball_cost`, never under the session's minimum drops).
OFFER_MOOD = {OfferAssessment.FAIR: 0, OfferAssessment.GOOD: 2, OfferAssessment.EXCELLENT: 4, OfferAssessment.NONE: 0}
DEAL_JOY = 5
RETURN_JOY = 6


def mood_band(score: int) -> Mood:
    return mood_for(score)


def acceptable_price(item: Item, happiness: int, turn: int, wrap_up: bool, said: Intents) -> int:
    """The lowest price Ramesh takes right now: high when cross or early, nearer fair when happy
    or late in the day, a little lower for a bulk or cash buyer, never under the floor."""
    low, high = item.fair
    if happiness <= 20:
        price = high * 1.15
    elif happiness <= 40:
        price = float(high)
    else:
        warmth = min(1.0, (happiness - 40) / 50)
        price = high - (high - low) * 0.5 * warmth
    if turn < EAGER_UNTIL:
        # Nobody sells at the fair price in the first breath of a haggle.
        price *= 1 + EAGER_PREMIUM * (EAGER_UNTIL - turn) / (EAGER_UNTIL - 2)
    if wrap_up:
        price = low + (price - low) * 0.4  # he would rather sell than carry it home
    if said.bulk:
        price *= 0.9
    if said.cash:
        price *= 0.97
    return max(item.floor, round(price))


def concede(quote: int, toward: int, share: float, lowest: int) -> int:
    """Move `share` of the way from `quote` to `toward`, never under `lowest` nor over `quote`."""
    return min(quote, max(lowest, round_price(quote - (quote - toward) * share)))


@dataclass(frozen=True, slots=True)
class _Turn:
    req: BrainRequest
    scenario: Scenario
    item: Item | None
    said: Intents
    happiness: int  # after this turn's words, before the move's own bonus
    quote: int | None
    offer: int | None
    accept_at: int | None


class Suggestion(NamedTuple):
    """The learner's next line the vendor suggests (a pack hint), its English and its situation."""

    text: str
    english: str
    situation: str = ""


NO_SUGGESTION = Suggestion("", "")


@dataclass(frozen=True, slots=True)
class _Move:
    stage: Stage
    key: str  # which pool of lines to speak from
    price: int | None
    reason: str
    bonus: int = 0
    hint: Suggestion = NO_SUGGESTION  # the suggested learner reply


class RuleBasedVendor:
    """The `Brain` protocol, answered by rules. Stateless, so one instance serves every session."""

    name = "rules"

    async def propose(
        self, request: BrainRequest, on_delta: DeltaSink | None = None
    ) -> BrainResult:
        """Decide at once; nothing is streamed, so `on_delta` is never called."""
        return self.propose_now(request)

    @property
    def propose_inline(self) -> Callable[[BrainRequest], BrainResult]:
        """`propose_now`: this brain always answers at once."""
        return self.propose_now

    write_summary = None  # the session writes its own running summary from its record

    async def aclose(self) -> None:
        """Nothing to close: the vendor is stateless."""

    def propose_now(self, request: BrainRequest) -> BrainResult:
        """The same answer without a coroutine: the actor calls this inline, saving a task."""
        started = time.perf_counter()  # for the ledger only; the decision never sees it
        decision = self.decide(request)
        return BrainResult(decision=decision, ledger=Ledger(brain_ms=(time.perf_counter() - started) * 1000.0))

    def decide(self, req: BrainRequest) -> AIDecision:
        """The whole policy, synchronously: one request in, one proposal out."""
        scenario = load_scenario(req.scenario, req.scenario_version)
        item = scenario.item(req.item) or scenario.item(req.object_grabbed)
        said = read_intents(req.transcript, scenario)
        happiness = _clamp(req.happiness_score + _mood_shift(req, said, scenario))
        accept_at = acceptable_price(item, happiness, req.turn, req.wrap_up, said) if item else None
        turn = _Turn(req, scenario, item, said, happiness, req.vendor_quote, req.learner_offer, accept_at)
        move = _HANDLERS.get(req.stage, _over)(turn)
        if req.turn >= req.max_turns and move.stage is not Stage.DEAL and move.key != "over":
            # The session closes this turn: say goodbye (CLOSURE where legal, else the limit closes it).
            closing = Stage.CLOSURE if Stage.CLOSURE in TRANSITIONS[req.stage] else req.stage
            move = _Move(closing, "close_late", move.price, "turn limit", 0, _hint(turn, "goodbye_late"))
        shift = _bounded(happiness - req.happiness_score + move.bonus, req.offer_assessment, scenario, req)
        score = _clamp(req.happiness_score + shift)
        key, remembered = vendor_line(req, scenario, move.key, move.hint.situation, move.price)  # met, or practice
        # `heard`: a number the server could not place ("seventy"), for the line that asks about it
        fields = {"price": move.price, "offer": req.learner_offer, "qty": said.quantity, "heard": req.offer_heard,
                  **remembered}
        return AIDecision(
            reply_text=say(scenario, req.target_language, key, req.turn, item, req.level, **fields),
            # The same line of the pack's English pool (the Unity build's `replyEnglish`), if it has one.
            reply_text_english=_english(scenario, key, req, item, fields),
            happiness_score=score,
            negotiation_state=move.stage,
            vendor_mood=mood_band(score),
            internal_reasoning=(
                f"{req.stage.value}->{move.stage.value}: {move.reason}; quote {req.vendor_quote}"
                f"->{move.price}, accepts at {accept_at}, mood {req.happiness_score}->{score}"
            ),
            counter_price=move.price,
            offer_assessment=req.offer_assessment,  # the server's label; NONE when it had no number
            suggested_user_response=move.hint.text,
            suggested_user_response_english=move.hint.english,
        )


def _english(scenario: Scenario, key: str, req: BrainRequest, item: Item | None, fields: dict[str, Any]) -> str:
    """The line `say` picks, from the pack's English pool; "" for a pack without English lines."""
    english = next((lang for lang in (LanguageCode.EN_IN, LanguageCode.EN) if lang in scenario.lines), None)
    return say(scenario, english, key, req.turn, item, req.level, **fields) if english is not None else ""


# --------------------------------------------------------------------------- mood


def _clamp(score: int) -> int:
    return max(0, min(100, score))


def _lowball_cost(req: BrainRequest, scenario: Scenario) -> int:
    """What a lowball costs this learner: the level's cost if the pack sets one, else the scenario's."""
    cost = scenario.levels[req.level].lowball_cost
    return scenario.rules.lowball_cost if cost is None else cost


def _concession(t: _Turn) -> float:
    """How fast the vendor gives ground: the scenario's speed times the learner level's."""
    return t.scenario.rules.concession * t.scenario.levels[t.req.level].concession


def _bounded(delta: int, assessment: OfferAssessment, scenario: Scenario, req: BrainRequest) -> int:
    """Honour the pack's costs (never under the session's minimum drops) and the per-turn step."""
    if assessment is OfferAssessment.INSULT:
        delta = min(delta, -max(INSULT_DROP, scenario.rules.insult_cost))
    elif assessment is OfferAssessment.LOWBALL:
        delta = min(delta, -_lowball_cost(req, scenario))  # the session's minimum drop is never above it
    return max(-MAX_STEP, min(MAX_STEP, delta))


def _respectful(said: Intents, scenario: Scenario) -> bool:
    return said.polite or any(said.mentions(word) for word in scenario.rules.respectful_address)


def _taboo(said: Intents, scenario: Scenario) -> bool:
    return any(said.mentions(phrase) for phrase in scenario.rules.taboo_phrases)


def _mood_shift(req: BrainRequest, said: Intents, scenario: Scenario) -> int:
    """How the learner's words move the vendor's mood this turn, before any deal."""
    rules = scenario.rules
    if req.offer_assessment is OfferAssessment.INSULT:
        delta = -rules.insult_cost
    elif req.offer_assessment is OfferAssessment.LOWBALL:
        delta = -_lowball_cost(req, scenario)
    else:
        delta = OFFER_MOOD[req.offer_assessment]
    if _respectful(said, scenario) or said.greeting:
        # rapport helps, with diminishing returns
        delta += rules.rapport if req.happiness_score < 70 else max(1, rules.rapport // 2)
    if said.compliment:
        delta += 3
    if said.rude:
        delta -= 12
    if _taboo(said, scenario):
        delta -= rules.insult_cost
    if said.bulk:
        delta += 2
    if said.cash:
        delta += 1
    if said.walk and req.stage in (Stage.INQUIRY, Stage.HAGGLING):
        delta -= 3
    returning = said.reengage or said.accept or req.learner_offer is not None
    if req.stage is Stage.WALKAWAY and returning and not said.walk and not said.rude:
        delta += RETURN_JOY
    if req.turn > 20 and req.learner_offer is None and not said.accept:
        delta -= 2  # a long haggle without numbers wears his patience
    return _bounded(delta, req.offer_assessment, scenario, req)


# --------------------------------------------------------------------------- hints


def _local(t: _Turn) -> str:
    if t.item is not None:
        return t.item.local
    scene = [i for i in t.scenario.items if i.in_scene] or list(t.scenario.items)
    return scene[t.req.turn % len(scene)].local


def _hint(t: _Turn, key: str, **fields: object) -> Suggestion:
    """The pack's suggested next line for the learner (`schemas.pack.HINT_KEYS`) and its English, filled in."""
    values: dict[str, object] = {"local": _local(t), "items": spoken_items(t.item, t.scenario), **fields}
    return Suggestion(t.scenario.hints[key].format(**values), t.scenario.coaching[key].english.format(**values), key)


def _ask_hint(t: _Turn) -> Suggestion:
    return _hint(t, "ask")


def _offer_hint(t: _Turn, price: int) -> Suggestion:
    """A next offer a third of the way from the learner's last one up to the vendor's price."""
    if t.accept_at is not None and price <= t.accept_at:
        return _hint(t, "accept")
    suggestion = suggested_offer(price, t.offer)
    if suggestion >= price:
        return _hint(t, "accept")
    return _hint(t, "counter", offer=suggestion)


# --------------------------------------------------------------------------- stages


def _greeting(t: _Turn) -> _Move:
    said, item = t.said, t.item
    named = item is not None and (
        said.mentions(item.name) or said.mentions(item.local) or said.mentions(spoken_items(item, t.scenario))
    )
    asks = said.inquiry or said.pushback or t.offer is not None or named or t.req.wrap_up
    if asks and item is None:
        return _Move(Stage.INQUIRY, "which_item", None, "asked, item unknown", hint=_ask_hint(t))
    if asks and item is not None:
        price = t.quote or item.opening_quote
        hint = _hint(t, "open", offer=round_price(price * OPENING_HINT))
        return _Move(Stage.INQUIRY, "quote", price, "asked, opening quote", hint=hint)
    if said.rude:
        return _Move(Stage.GREETING, "greet_cold", t.quote, "rude greeting", hint=_ask_hint(t))
    key = "greet_item" if item is not None else "greet"
    return _Move(Stage.GREETING, key, t.quote, "greeting", hint=_hint(t, "greet"))


def _inquiry(t: _Turn) -> _Move:
    said, item, req = t.said, t.item, t.req
    if item is None:
        if said.walk:
            return _Move(Stage.WALKAWAY, "callback_plain", None, "left before asking",
                         hint=_ask_hint(t))
        return _Move(Stage.INQUIRY, "which_item", None, "item unknown", hint=_ask_hint(t))
    assert t.accept_at is not None
    if t.quote is None:
        price = item.opening_quote
        hint = _hint(t, "open", offer=round_price(price * OPENING_HINT))
        return _Move(Stage.INQUIRY, "quote", price, "opening quote", hint=hint)
    quote = t.quote
    if t.happiness <= CLOSE_AT:
        return _Move(Stage.WALKAWAY, "shoo", quote, "too cross to sell",
                     hint=_hint(t, "apologise"))
    if said.walk:
        if not t.scenario.rules.walkaway_expected:
            return _Move(Stage.WALKAWAY, "callback", quote, "learner leaving; no call-back price here",
                         hint=_hint(t, "return", price=quote))
        price = concede(quote, t.accept_at, 0.3, t.accept_at)
        return _Move(Stage.WALKAWAY, "callback", price, "learner leaving, call back",
                     hint=_hint(t, "take_callback", price=price))
    if t.offer is not None:
        if _takes(t, quote):
            price = min(t.offer, quote)
            return _Move(Stage.HAGGLING, "agree_pending", price, "offer acceptable",
                         hint=_hint(t, "accept"))
        return _counter(t, quote, Stage.HAGGLING)
    if said.accept:
        return _Move(Stage.HAGGLING, "inquiry_accept", quote, "accepts the quote",
                     hint=_hint(t, "accept"))
    if said.pushback or said.bulk or req.wrap_up:
        return _nudge(t, quote, Stage.HAGGLING)
    if said.rude:
        return _Move(Stage.INQUIRY, "rude_hold", quote, "rude, holds", hint=_offer_hint(t, quote))
    return _Move(Stage.INQUIRY, "repeat_quote", quote, "repeats quote", hint=_offer_hint(t, quote))


def _haggling(t: _Turn) -> _Move:
    said, item, req = t.said, t.item, t.req
    if item is None:
        return _Move(Stage.HAGGLING, "which_item", None, "item unknown", hint=_ask_hint(t))
    assert t.accept_at is not None
    quote = t.quote or item.opening_quote
    if t.happiness <= CLOSE_AT:
        return _Move(Stage.CLOSURE, "close_angry", quote, "too cross to go on",
                     hint=_hint(t, "apologise"))
    if said.walk:
        if req.wrap_up:
            return _Move(Stage.CLOSURE, "close_late", quote, "leaving late in the day",
                         hint=_hint(t, "goodbye_late"))
        if not t.scenario.rules.walkaway_expected:
            return _Move(Stage.WALKAWAY, "callback", quote, "learner leaving; no call-back price here",
                         hint=_hint(t, "return", price=quote))
        lowest = max(item.floor, round(t.accept_at * 0.95))  # walking away is the best lever
        price = concede(quote, lowest, 0.5, lowest)
        return _Move(Stage.WALKAWAY, "callback", price, "learner leaving, call back",
                     hint=_hint(t, "take_callback", price=price))
    if t.offer is not None:
        if _takes(t, quote):
            return _deal(t, min(t.offer, quote), "offer acceptable")
        return _counter(t, quote, Stage.HAGGLING)
    if req.offer_unsure and req.offer_heard:  # a number the server cannot place: ask, take nothing amiss
        return _Move(Stage.HAGGLING, "offer_unclear", quote, "offer unclear, asks", hint=_offer_hint(t, quote))
    if said.accept:
        return _deal(t, quote, "accepts the standing quote")
    if said.rude:
        return _Move(Stage.HAGGLING, "rude_hold", quote, "rude, holds", hint=_offer_hint(t, quote))
    if said.pushback or said.bulk or req.wrap_up:
        return _nudge(t, quote, Stage.HAGGLING)
    return _Move(Stage.HAGGLING, "hold", quote, "no new offer", hint=_offer_hint(t, quote))


def _walkaway(t: _Turn) -> _Move:
    said, item, req = t.said, t.item, t.req
    quote = t.quote
    if t.happiness <= CLOSE_AT or (said.rude and t.happiness <= 30):
        return _Move(Stage.CLOSURE, "close_angry", quote, "too cross to call back",
                     hint=_hint(t, "apologise"))
    if said.walk:
        return _Move(Stage.CLOSURE, "close_walk", quote, "left for good",
                     hint=_hint(t, "goodbye"))
    returning = (said.reengage or said.accept or t.offer is not None or said.pushback
                 or said.inquiry or said.compliment or said.polite)
    if req.wrap_up and t.offer is None and not said.accept:
        return _Move(Stage.CLOSURE, "close_late", quote, "late, stops calling",
                     hint=_hint(t, "goodbye_late"))
    if not returning or item is None or quote is None or t.accept_at is None:
        patience = WALKAWAY_PATIENCE if t.scenario.rules.walkaway_expected else 1
        if req.graph.turns_in_current_stage >= patience:
            return _Move(Stage.CLOSURE, "close_walk", quote, "gave up calling",
                         hint=_hint(t, "goodbye"))
        key = "walk_wait" if quote is not None else "callback_plain"
        return _Move(Stage.WALKAWAY, key, quote, "still calling", hint=_ask_hint(t))
    # Mirror the session's re-entry rule so the line fits the stage that will stand.
    stage = Stage.HAGGLING if t.happiness > REENTRY_HAPPINESS else Stage.WALKAWAY
    sorry = _hint(t, "return", price=quote)
    if t.offer is not None and _takes(t, quote):
        price = min(t.offer, quote)
        return _Move(stage, "agree_pending", price, "back with an acceptable offer",
                     hint=_hint(t, "accept") if stage is Stage.HAGGLING else sorry)
    if said.accept:
        return _Move(stage, "agree_pending", quote, "back, takes the call-back price",
                     hint=_hint(t, "accept") if stage is Stage.HAGGLING else sorry)
    if t.offer is not None:
        move = _counter(t, quote, stage)
        key = move.key if stage is Stage.HAGGLING else "walk_wait"
        return _Move(stage, key, move.price, "back with a low offer", hint=move.hint)
    key = "reengage" if stage is Stage.HAGGLING else "walk_wait"
    hint = _offer_hint(t, quote) if stage is Stage.HAGGLING else sorry
    return _Move(stage, key, quote, "learner turns back", hint=hint)


def _over(t: _Turn) -> _Move:
    return _Move(t.req.stage, "over", t.quote, "already ended", hint=_hint(t, "thanks"))


_HANDLERS = {
    Stage.GREETING: _greeting,
    Stage.INQUIRY: _inquiry,
    Stage.HAGGLING: _haggling,
    Stage.WALKAWAY: _walkaway,
}


# --------------------------------------------------------------------------- price moves


def _takes(t: _Turn, quote: int) -> bool:
    """Whether the learner's offer is good enough to shake on (an insult never is)."""
    if t.offer is None or t.accept_at is None:
        return False
    if t.req.offer_assessment is OfferAssessment.INSULT:
        return False
    return t.offer >= t.accept_at or t.offer >= quote


def _deal(t: _Turn, price: int, reason: str) -> _Move:
    return _Move(Stage.DEAL, "deal", price, reason, DEAL_JOY, _hint(t, "thanks"))


# The line pool that answers an offer countered with a smaller quote. An excellent offer is
# countered only when the vendor's mood has raised his price above it; the packs' "good" lines fit.
COUNTER_LINES = {
    OfferAssessment.LOWBALL: "counter_lowball", OfferAssessment.FAIR: "counter_fair",
    OfferAssessment.GOOD: "counter_good", OfferAssessment.EXCELLENT: "counter_good",
    OfferAssessment.NONE: "counter_fair",
}


def _counter(t: _Turn, quote: int, stage: Stage) -> _Move:
    """Answer an offer below the acceptable price with a smaller quote (or none, for an insult)."""
    assert t.offer is not None and t.accept_at is not None
    label = t.req.offer_assessment
    if label is OfferAssessment.INSULT:
        return _Move(stage, "counter_insult", quote, "insulting offer, holds",
                     hint=_offer_hint(t, quote))
    warmth = max(0.0, min(1.0, (t.happiness - 40) / 50))
    share = CONCESSION[label] * _concession(t) + 0.15 * warmth + (0.2 if t.req.wrap_up else 0.0)
    price = concede(quote, t.offer, share, t.accept_at)
    if t.req.wrap_up:
        key = "wrap_final"
    elif price >= quote or price <= t.accept_at:
        key = "last_price"
    else:
        key = COUNTER_LINES[label]
    return _Move(stage, key, price, f"{label.value} offer, concedes {quote - price}",
                 hint=_offer_hint(t, price))


def _nudge(t: _Turn, quote: int, stage: Stage) -> _Move:
    """A concession without an offer: for "too expensive", a bulk order, or late in the day."""
    assert t.accept_at is not None
    if t.req.wrap_up:
        price = concede(quote, t.accept_at, 0.6, t.accept_at)
        return _Move(stage, "wrap_final", price, "late, final price", hint=_hint(t, "accept"))
    share = (0.25 if t.said.bulk else 0.15) * _concession(t)
    price = concede(quote, t.accept_at, share, t.accept_at)
    key = "bulk" if t.said.bulk else "pushback"
    if price >= quote:
        key = "last_price"
    return _Move(stage, key, price, f"{key}, concedes {quote - price}", hint=_offer_hint(t, price))
