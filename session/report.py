"""The learner report, computed from a session's record when it ends (docs/coaching.md).

`learner_report(negotiation, tips)` is deterministic: the same session gives the same report. It
reads only what the session keeps, the turns in `negotiation.history` (each learner line with
its offer and the server's judgement of it, each vendor reply with the quote, happiness and stage
after it) and the scenario pack, so it is the same when the session was rebuilt from Neo4j. The
cards earned are the grounded tip cards of the learner's turns, from the same `TipSource` that
sent them; the cards are a pure function of the words and the knowledge.

The score (0-100) is the sum of four parts, each documented in docs/coaching.md:

- price, up to 40: a deal at or under the bottom of the fair range earns 40, at its top 30, and
  then linearly less up to the first quote; no deal earns 0;
- respect, up to 25: the share of learner turns that used a respectful form of address or a
  polite word;
- goodwill, up to 20: the vendor's final happiness, out of 100;
- manners, up to 15: 15, less 5 for each insult and 2 for each lowball.

Hints, repeats, undos, silences and unclear turns are counted (`coaching`) but cost nothing:
asking for help is what a practice tool is for. Every flag on a vendor reply is listed with its
plain words (`clamps`, from `schemas.flags`), so a teacher sees where the rules overrode the brain.

The three suggestions come from fixed rules, first applicable first, in the order below.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar, cast

from schemas.enums import OfferAssessment, Outcome, Stage
from schemas.flags import explain
from schemas.report import (
    Clamp,
    CoachingCounts,
    CurvePoint,
    EarnedCard,
    Etiquette,
    LearnerReport,
    LevelEstimate,
    Practised,
    Price,
    SessionReport,
    StageSpan,
)
from schemas.scenario import Scenario, load_scenario
from session.level_estimate import estimate
from session.negotiation import Negotiation
from session.practice import judge, learner_lines
from session.protocols import TipSource
from session.records import TurnRecord

__all__ = ["learner_report", "report_event", "report_figures", "score", "total_score"]

FALLBACK_SUGGESTIONS = (
    "Ask about the item's quality before its price: it shows interest and respect.",
    "Reuse the phrases from your tip cards next time, out loud.",
    "Play the same item again and aim for the bottom of the fair range.",
)


LINES_REMEMBERED = 4096  # learner lines whose manners are kept (`_manners`)
_NOT_ALNUM = re.compile(r"[\W_]+")  # \w is str.isalnum() and the underscore


def _words(text: str) -> str:
    """The text's words, lowercased, one space apart and padded, for whole-word lookups."""
    return f" {' '.join(w for w in _NOT_ALNUM.split(text.lower()) if w)} "


def _respect_used(padded: str, scenario: Scenario) -> list[str]:
    polite = ("please", "thank you", "thanks")
    return [w for w in (*scenario.rules.respectful_address, *polite) if f" {w.lower()} " in padded]


@lru_cache(maxsize=LINES_REMEMBERED)
def _manners(text: str, scenario: str, version: int) -> tuple[tuple[str, ...], bool]:
    """A learner line's respectful words, and whether it holds a taboo phrase. Kept per line: a pure
    function of the line and the pack, and learners say the same short lines again and again."""
    pack = load_scenario(scenario, version)
    padded = _words(text)
    taboo = any(f" {p.lower()} " in padded for p in pack.rules.taboo_phrases)
    return tuple(_respect_used(padded, pack)), taboo


def _price(negotiation: Negotiation, scenario: Scenario) -> Price:
    item = scenario.item(negotiation.item)
    paid = negotiation.quote if negotiation.outcome is Outcome.DEAL else None
    fair = item.fair if item else None
    versus = None
    if paid is not None and fair is not None:
        versus = "below" if paid < fair[0] else "within" if paid <= fair[1] else "above"
    summary = negotiation.summary()
    return Price(paid=paid, first_quote=negotiation.first_quote, fair=fair, floor=item.floor if item else None,
                 discount_pct=summary.discount_pct if summary else None, versus_fair=versus)


def _curve(history: list[TurnRecord]) -> tuple[CurvePoint, ...]:
    said = {r.turn: r for r in history if r.role == "user"}
    points = []
    for record in history:
        if record.role == "vendor":
            learner = said.get(record.turn)
            points.append(CurvePoint(turn=record.turn, quote=record.quote, offer=learner.offer if learner else None,
                                     offer_read_from=learner.read_from if learner else "",
                                     happiness=record.happiness))
    return tuple(points)


def _stages(negotiation: Negotiation) -> tuple[StageSpan, ...]:
    spans: list[StageSpan] = []
    stage, since, turns = Stage.GREETING, negotiation.created_at, 0
    for record in negotiation.history:
        if record.role != "vendor":
            continue
        turns += 1
        if record.stage is not stage:
            spans.append(StageSpan(stage=stage, turns=turns, seconds=round(max(0.0, record.at - since), 1)))
            stage, since, turns = record.stage, record.at, 0
    spans.append(StageSpan(stage=stage, turns=turns,
                           seconds=round(max(0.0, negotiation.updated_at - since), 1)))
    return tuple(spans)


def _etiquette(negotiation: Negotiation) -> Etiquette:
    learner = [r for r in negotiation.history if r.role == "user"]
    manners = [_manners(r.text, negotiation.scenario_name, negotiation.scenario_version) for r in learner]
    used = [found for found, _ in manners]
    words = sorted({w for found in used for w in found})
    visited = [c.to_stage for c in negotiation.stage_changes]
    walked = Stage.WALKAWAY in visited
    came_back = walked and any(a is Stage.WALKAWAY and b is Stage.HAGGLING for a, b in zip(
        [Stage.GREETING, *visited], visited, strict=False))
    return Etiquette(
        respectful_turns=sum(1 for found in used if found), respectful_words=tuple(words),
        insults=negotiation.insults,
        taboo=sum(1 for _, taboo in manners if taboo),
        lowballs=sum(1 for r in learner if r.assessment is OfferAssessment.LOWBALL),
        walked_away=walked, came_back=came_back,
    )


def score(price: Price, etiquette: Etiquette, learner_turns: int, happiness: int) -> dict[str, int]:
    """The four parts of the score (docs/coaching.md); their sum is the score."""
    price_part = 0
    if price.paid is not None and price.fair is not None:
        low, high = price.fair
        top = max(price.first_quote or high, high + 1)
        if price.paid <= low:
            price_part = 40
        elif price.paid <= high:
            price_part = round(40 - 10 * (price.paid - low) / max(1, high - low))
        else:
            price_part = round(max(0.0, 30 * (top - price.paid) / (top - high)))
    respect = round(25 * etiquette.respectful_turns / learner_turns) if learner_turns else 0
    manners = max(0, 15 - 5 * etiquette.insults - 2 * etiquette.lowballs)
    return {"price": price_part, "respect": respect, "goodwill": round(20 * happiness / 100), "manners": manners}


def _suggestions(
    negotiation: Negotiation, scenario: Scenario, price: Price, etiquette: Etiquette
) -> tuple[str, str, str]:
    rules = scenario.rules
    learner = [r for r in negotiation.history if r.role == "user"]
    first_offer = next((r for r in learner if r.offer is not None), None)
    said: list[str] = []
    if etiquette.taboo:
        said.append(f"Some words give offence here ({', '.join(rules.taboo_phrases[:3])}): say what you "
                    "mean about the goods politely instead.")
    if etiquette.insults:
        said.append(f"Keep criticism factual and polite: {etiquette.insults} of your turns were taken as "
                    "insults, and each cost the vendor's goodwill.")
    if not etiquette.respectful_turns and rules.respectful_address:
        said.append(f"Address the vendor respectfully, for example \"{rules.respectful_address[0]}\": "
                    "respect earns goodwill here.")
    if first_offer is not None and price.first_quote:
        share = first_offer.offer / price.first_quote if first_offer.offer is not None else 0
        if share < rules.offer_bands.insult_below:
            said.append(f"Your first offer was {round(100 * share)}% of the quote, which reads as an insult "
                        f"here; open nearer {round(100 * rules.offer_bands.lowball_below)}%.")
    if price.paid is not None and price.first_quote is not None and price.paid >= price.first_quote:
        said.append("You paid the first price asked: a counter-offer with a reason is expected here.")
    elif price.versus_fair == "above" and price.fair is not None:
        said.append(f"You paid {price.paid}, above the fair range of {price.fair[0]}-{price.fair[1]}; "
                    "come down in smaller steps and hold your number.")
    if negotiation.outcome is not Outcome.DEAL:
        said.append("No deal this time: meet the vendor partway once the prices are close, and say yes clearly.")
    if rules.walkaway_expected and not etiquette.walked_away and price.versus_fair == "above":
        said.append("Walking away politely is a strong lever here, once you have shown interest.")
    if negotiation.turn > 12:
        said.append(f"The haggle took {negotiation.turn} turns: make a clear counter-offer earlier.")
    coaching = negotiation.coaching
    if coaching.hints[2] >= 2:
        said.append(f"You asked for the whole line {coaching.hints[2]} times: next time stop at the sentence "
                    "frame (the second hint) and fill in the blanks yourself.")
    if coaching.timeouts >= 2:
        said.append("You fell silent several times: a short \"one moment\" keeps the conversation going while "
                    "you think.")
    for fallback in FALLBACK_SUGGESTIONS:
        if len(said) >= 3:
            break
        said.append(fallback)
    return said[0], said[1], said[2]


def earned_cards(negotiation: Negotiation, tips: TipSource | None) -> tuple[EarnedCard, ...]:
    """The grounded cards the learner's turns earned, each at the first turn that earned it."""
    if tips is None:
        return ()
    earned: dict[str, EarnedCard] = {}
    for record in negotiation.history:
        if record.role != "user":
            continue
        window = f"{record.text} {record.item or ''}".strip()
        for card in tips.cards(negotiation.scenario_name, window):
            if card.grounded and card.card_id not in earned:
                earned[card.card_id] = EarnedCard(card_id=card.card_id, title=card.title, turn=record.turn,
                                                  source_chunk_ids=card.source_chunk_ids)
    return tuple(earned.values())


def total_score(parts: dict[str, int]) -> int:
    """The session's score: its parts added up, kept within 0..100."""
    return max(0, min(100, sum(parts.values())))


# The last ended session's derived figures, each worked out once: a session that ends asks for
# them twice in the same handler, for its report and for its learner's profile. Kept while the
# session is unchanged (`_ended_key`); a new key drops them all.
T = TypeVar("T")
_kept: tuple[tuple[object, ...], dict[object, Any]] | None = None


def _ended_key(negotiation: Negotiation) -> tuple[object, ...]:
    """What an ended session's derived figures read that may still change: its id, last update,
    history length, outcome, happiness and turn, the coaching counters and the spoken figures."""
    c = negotiation.coaching
    return (negotiation.session_id, negotiation.updated_at, len(negotiation.history), negotiation.outcome,
            negotiation.happiness, negotiation.turn, c.hints, c.hints_offered, c.unclear, c.repeats, c.undos,
            negotiation.fluency, negotiation.target_language, negotiation.scenario_version)


def _once(negotiation: Negotiation, what: object, make: Callable[[], T]) -> T:
    """`make()` for an ended session, kept under `what` while it is the last ended one, unchanged;
    a live session's is always worked out (frozen models and tuples: callers may share them)."""
    global _kept
    if negotiation.outcome is None:
        return make()
    key = _ended_key(negotiation)
    if _kept is None or _kept[0] != key:
        _kept = key, {}
    memo = _kept[1]
    if what not in memo:
        memo[what] = make()
    return cast(T, memo[what])


def report_figures(negotiation: Negotiation) -> tuple[Price, Etiquette, dict[str, int]]:
    """The price, the etiquette and the score's parts of an ended session: the part of its report
    that a learner's profile keeps (`server/learners`), for half the cost of the whole report;
    worked out once per ended session (`_once`). Each caller gets its own parts."""
    price, etiquette, parts = _once(negotiation, "figures", lambda: _report_figures(negotiation))
    return price, etiquette, dict(parts)


def _report_figures(negotiation: Negotiation) -> tuple[Price, Etiquette, dict[str, int]]:
    scenario = negotiation.scenario
    price = _price(negotiation, scenario)
    etiquette = _etiquette(negotiation)
    learner_turns = sum(1 for r in negotiation.history if r.role == "user")
    return price, etiquette, score(price, etiquette, learner_turns, negotiation.happiness)


def ended_estimate(negotiation: Negotiation) -> LevelEstimate | None:
    """`estimate` of a session, worked out once per ended session (`_once`)."""
    return _once(negotiation, "estimate", lambda: estimate(negotiation))


def ended_cards(negotiation: Negotiation, tips: TipSource | None) -> tuple[EarnedCard, ...]:
    """`earned_cards`, worked out once per ended session and tips (`_once`)."""
    return _once(negotiation, ("cards", id(tips)), lambda: earned_cards(negotiation, tips))


def learner_report(negotiation: Negotiation, tips: TipSource | None) -> LearnerReport:
    """The report of an ended session."""
    assert negotiation.outcome is not None, "a report is made when the session has ended"
    scenario = negotiation.scenario
    price, etiquette, parts = report_figures(negotiation)
    cards = ended_cards(negotiation, tips)
    return LearnerReport(
        session_id=negotiation.session_id, scenario=negotiation.scenario_name,
        scenario_version=negotiation.scenario_version, outcome=negotiation.outcome,
        item=negotiation.item, turns=negotiation.turn, price=price, curve=_curve(negotiation.history),
        stages=_stages(negotiation), etiquette=etiquette, score=total_score(parts),
        score_parts=parts, suggestions=_suggestions(negotiation, scenario, price, etiquette),
        cards_earned=cards, level=negotiation.level,
        coaching=CoachingCounts(hints=negotiation.coaching.hints, hints_offered=negotiation.coaching.hints_offered,
                                repeats=negotiation.coaching.repeats, undos=negotiation.coaching.undos,
                                timeouts=negotiation.coaching.timeouts, unclear=negotiation.coaching.unclear),
        clamps=tuple(Clamp(turn=r.turn, flag=flag, explanation=explain(flag))
                     for r in negotiation.history if r.role == "vendor" for flag in r.flags),
        fluency=negotiation.fluency, estimate=ended_estimate(negotiation),
        practised=practised(negotiation, cards),
    )


def practised(negotiation: Negotiation, cards: tuple[EarnedCard, ...] = ()) -> tuple[Practised, ...]:
    """The review items the session brought back, judged as the learner's profile will take them."""
    targets = negotiation.recall.practice if negotiation.recall is not None else ()
    judged = judge(targets, learner_lines(negotiation.history), negotiation.coaching.evidence,
                   {card.card_id: card.turn for card in cards})
    return tuple(Practised(item_id=t.item_id, kind=t.kind, phrase=t.phrase, recalled=p.recalled, turn=p.turn,
                           said=p.said, rating=p.rating) for t, p in zip(targets, judged, strict=True))


def report_event(negotiation: Negotiation, tips: TipSource | None, seq: int) -> SessionReport:
    """The `session.report` event that follows `session.ended` (and the last turn's tips), with the
    seq the end took for it."""
    report = learner_report(negotiation, tips)
    return SessionReport(session_id=negotiation.session_id, seq=seq, report=report)
