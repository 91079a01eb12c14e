"""What a turn's words may say: the engine's ruling on the prices a vendor line names.

`session/spoken.py` judges words against a `PriceRule`; this module makes that rule from a
negotiation's facts and the engine's verdict, reads numbers in the scenario's languages, and
finishes a turn's words: through the gate that streamed them, or afresh. Pure, like the
negotiation it serves (`Negotiation.complete_turn`, `Negotiation.price_rule`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cache, lru_cache

from schemas.enums import LanguageCode, Level
from schemas.learner import LearnerRecall
from schemas.lines import say
from schemas.scenario import Scenario, newest_known
from session.numbers import NumberLexicon, NumberMention, find_numbers, number_lexicon
from session.rules import Override, Position, Proposal, Verdict
from session.spoken import PLAUSIBLE, Finder, PriceRule, ReplyGate, Spoken, spoken

__all__ = ["Words", "nothing_said_line", "price_rule", "reply_gate", "speech_numbers", "unbind_unsaid", "words_of"]


LINES_REMEMBERED = 4096  # per scenario: the rule vendor's lines are its pack's templates and prices


@cache
def speech_numbers(scenario: str) -> tuple[Finder, Finder]:
    """Finders of the numbers and of the prices in a vendor line, in the scenario's languages.

    What a line names is remembered (the mentions are frozen): the same lines come back turn after
    turn, in every session, and reading one costs tens of microseconds (docs/performance.md)."""
    lexicon = _lexicon(scenario)

    @lru_cache(maxsize=LINES_REMEMBERED)
    def numbers(text: str) -> tuple[NumberMention, ...]:
        return tuple(find_numbers(text, lexicon))

    @lru_cache(maxsize=LINES_REMEMBERED)
    def prices(text: str) -> tuple[NumberMention, ...]:
        # Every amount, not just what reads as a price on its own (`price_mentions` passes over a
        # bare "5"): the ruling decides, and a rejected "5" is a price (`PriceRule.names`).
        return tuple(m for m in find_numbers(text, lexicon) if m.kind == "amount" and m.unit is None)

    return numbers, prices


def _lexicon(scenario: str) -> NumberLexicon:
    return number_lexicon(newest_known(scenario).vendor.languages)


def price_rule(scenario: Scenario, item: str | None, position: Position, proposal: Proposal, verdict: Verdict, *,
               quotes: Mapping[str, int], first_quotes: Mapping[str, int], offer: int | None,
               recall: LearnerRecall | None, learner_said: Iterable[int] = ()) -> PriceRule:
    """The prices the vendor's words may name once the engine has ruled on `proposal`: the
    validated quote, and facts of the haggle (the learner's offer and any number in the learner's
    own words, this item's standing and first quotes, other items' standing and opening quotes,
    what the learner paid last time); never a price the engine overruled."""
    facts: list[int | None] = [position.quote, first_quotes.get(item) if item else None, offer]
    facts += learner_said  # "Seventy percent, or seventy rupees?" echoes the learner's numbers
    if recall is not None:
        facts += (recall.last_paid, recall.last_first_quote)
    for other in scenario.items:
        if other.name != item:
            facts += (quotes.get(other.name), other.opening_quote)
    proposed = proposal.counter_price
    rejected = frozenset((proposed,)) if proposed is not None and proposed != verdict.quote else frozenset()
    catalog = scenario.item(item)
    # A bare number reads as a price from a quarter of the floor to four times the opening quote.
    plausible = (max(1, catalog.floor // 4), catalog.opening_quote * 4) if catalog else PLAUSIBLE
    return PriceRule(verdict.quote, frozenset(v for v in facts if v is not None), rejected, plausible)


@cache
def _judge(scenario: str) -> Callable[[str, PriceRule, int], Spoken]:
    """`spoken` in the scenario's languages, what a line gave under a ruling remembered: the rule
    vendor says its pack's lines at the same few prices under the same few rulings, turn after
    turn, in every session (a `Spoken` is frozen, as are the text, the rule and the limit)."""
    numbers, prices = speech_numbers(scenario)

    @lru_cache(maxsize=LINES_REMEMBERED)
    def judge(text: str, rule: PriceRule, max_sentences: int) -> Spoken:
        return spoken(text, rule, numbers, prices, max_sentences)

    return judge


def reply_gate(scenario: str, max_sentences: int) -> ReplyGate:
    """A gate for the words of a turn in flight, streamed as the brain writes them."""
    numbers, prices = speech_numbers(scenario)
    return ReplyGate(numbers, prices, max_sentences)


@dataclass(frozen=True, slots=True)
class Words:
    said: Spoken
    tail: str  # words a streamed reply still held: its last delta
    gated: bool  # the streamed words are the reply's


def words_of(text: str, rule: PriceRule, gate: ReplyGate | None, scenario: str, max_sentences: int,
             *, fallback: bool) -> Words:
    """A turn's words under `rule`: the gate's, when it streamed this text under this ruling (its
    held words become the tail); judged afresh otherwise."""
    if gate is not None and not fallback and gate.rule in (None, rule) and gate.source.strip() == text.strip():
        tail = gate.decide(rule) if gate.rule is None else ""
        tail += gate.finish()
        return Words(gate.result(), tail, True)
    return Words(_judge(scenario)(text, rule, max_sentences), "", False)


def nothing_said_line(scenario: Scenario, language: LanguageCode | None, level: Level, index: int,
                      item: str | None, quote: int | None) -> str:
    """The pack's line for a reply with nothing left to say (all of it links or unsayable prices)."""
    known = scenario.item(item)
    if quote is not None:
        return say(scenario, language, "repeat_quote", index, known, level, price=quote)
    return say(scenario, language, "which_item", index, known, level)


def unbind_unsaid(verdict: Verdict, said: Spoken, position: Position) -> Verdict:
    """A new price that was only in words the learner will not hear does not bind them: the
    standing quote stays (`quote_unsaid`), as after a barge-in (session/playback.py)."""
    if not said.price_cut or said.says_quote or verdict.quote == position.quote:
        return verdict
    unsaid = Override("quote_unsaid", verdict.quote, position.quote)
    return replace(verdict, quote=position.quote, overrides=(*verdict.overrides, unsaid),
                   flags=(*verdict.flags, "quote_unsaid"))
