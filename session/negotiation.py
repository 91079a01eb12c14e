"""One session's negotiation as plain synchronous code: inputs in, state and events out.

`Negotiation` holds the authoritative state of a session. The actor feeds it accepted frames and
brain results, in order, and fans out the events it returns. It never awaits, never reads the
clock (callers pass `now`) and never draws random numbers, so it is tested without an event loop.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from functools import cache

from schemas.brain import BrainRequest, BrainResult, GraphContext, StageVisit
from schemas.decision import AIDecision
from schemas.enums import LanguageCode, Level, OfferAssessment, Outcome, Stage
from schemas.frames import (
    LedgerTotals,
    MoodChanged,
    Point,
    Reply,
    ReplyMark,
    SessionEnded,
    SessionState,
    StageChange,
    StageChanged,
    Summary,
    TranscriptLine,
)
from schemas.learner import LearnerRecall
from schemas.pack import LevelParams
from schemas.scenario import Scenario, load_scenario
from session.coaching import Checkpoint, Coaching, drop_from
from session.context import graph_context
from session.numbers import number_lexicon, read_numbers
from session.offers import assess_reading, read_offer, reading_fields
from session.records import PendingTurn, TurnOutcome, TurnRecord
from session.rules import Limits, Position, Proposal, Verdict, mood_for, validate
from session.spoken import PriceRule, ReplyGate
from session.summary import Memory
from session.wording import nothing_said_line, price_rule, unbind_unsaid, words_of

START_HAPPINESS = 50
# Lines of history a brain is handed (it keeps the newest that fit HISTORY_TOKEN_BUDGET): twice the
# lines a running summary reads, so that what falls out of them is in the summary, even a late one.
HISTORY_LINES = 40
RETURNING_AFTER_SECONDS = 2 * 3600  # seed 001: a "welcome back" after two hours away
REMEMBERED_IDS = 512  # accepted client ids kept for de-duplication
SNIPPET_CHARS = 150
TRANSCRIPT_LINES = 60  # conversation lines a snapshot carries for late or resumed viewers
_WORD = re.compile(r"[a-z]+")


@cache
def _item_words(scenario: str) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """Each item's names and plurals: single words for a set lookup, phrases for a scan."""
    singles: dict[str, str] = {}
    phrases: list[tuple[str, str]] = []
    for item in load_scenario(scenario).items:
        for name in (item.name.lower(), item.local.lower()):
            for form in (name, name + "s", name + "es"):
                if " " in form:
                    phrases.append((f" {form} ", item.name))
                else:
                    singles.setdefault(form, item.name)
    return singles, tuple(phrases)

CLOSING_LINES = {
    Outcome.DEAL: "We already shook on it, friend. Enjoy your purchase and come back soon!",
    Outcome.WALKED_AWAY: "You already left my stall, friend. Come back another day.",
    Outcome.NO_DEAL: "Our bargaining is over for today. Come back another day, friend.",
    Outcome.TURN_LIMIT: "We have talked long enough for today. Come back tomorrow, friend.",
    Outcome.STOPPED: "We stopped for today, friend. Come back any time.",
    Outcome.TIMED_OUT: "You have gone quiet, friend, so we stop here for today. Come back any time.",
}


@dataclass(slots=True)
class Negotiation:
    session_id: str
    scenario_name: str
    created_at: float
    limits: Limits = field(default_factory=Limits)
    learner_id: str | None = None
    input_language: LanguageCode = LanguageCode.EN_IN
    target_language: LanguageCode = LanguageCode.EN_IN
    stage: Stage = Stage.GREETING
    happiness: int = START_HAPPINESS
    turn: int = 0  # learner turns answered
    seq: int = 0  # the last event sequence number issued
    item: str | None = None
    object_grabbed: str | None = None
    quotes: dict[str, int] = field(default_factory=dict)  # standing quote per item
    first_quotes: dict[str, int] = field(default_factory=dict)  # opening quote per item
    last_offer: int | None = None
    outcome: Outcome | None = None
    updated_at: float = 0.0
    history: list[TurnRecord] = field(default_factory=list)
    stage_changes: list[StageVisit] = field(default_factory=list)
    accepted_ids: OrderedDict[str, None] = field(default_factory=OrderedDict)
    pending: PendingTurn | None = None
    insults: int = 0
    ledger: LedgerTotals = field(default_factory=LedgerTotals)  # the brain's cost, summed per session
    level: Level = Level.INTERMEDIATE
    coaching: Coaching = field(default_factory=Coaching)  # hints, undos, silences (session/coaching.py)
    memory: Memory = field(default_factory=Memory)  # the running summary (session/summary.py)
    recall: LearnerRecall | None = None  # what the vendor remembers of the learner (docs/memory.md)
    _rule_limits: Limits | None = field(default=None, init=False, repr=False, compare=False)  # `rule_limits`, once

    def __post_init__(self) -> None:
        self.updated_at = self.updated_at or self.created_at

    # ------------------------------------------------------------------ facts

    @property
    def scenario(self) -> Scenario:
        return load_scenario(self.scenario_name)

    @property
    def level_params(self) -> LevelParams:
        return _level(self.scenario_name, self.level)

    @property
    def rule_limits(self) -> Limits:
        """The engine's limits for this learner: the session's, with the level's gentler lowball."""
        limits = self._rule_limits
        if limits is None:
            limits = self._rule_limits = _rule_limits(self.limits, self.scenario_name, self.level)
        return limits

    @property
    def is_terminal(self) -> bool:
        return self.stage.is_terminal

    @property
    def quote(self) -> int | None:
        return self.quotes.get(self.item) if self.item else None

    @property
    def first_quote(self) -> int | None:
        return self.first_quotes.get(self.item) if self.item else None

    def seen(self, client_id: str) -> bool:
        return client_id in self.accepted_ids

    def remember(self, client_id: str) -> None:
        self.accepted_ids[client_id] = None
        self.accepted_ids.move_to_end(client_id)
        while len(self.accepted_ids) > REMEMBERED_IDS:
            self.accepted_ids.popitem(last=False)

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    # ------------------------------------------------------------------ inputs

    def apply_scene(
        self,
        *,
        object_grabbed: str | None,
        input_language: LanguageCode | None,
        target_language: LanguageCode | None,
        now: float,
    ) -> None:
        """Scene updates change context only; they never produce a vendor turn."""
        self.object_grabbed = object_grabbed
        known = self.scenario.item(object_grabbed)
        if known is not None and not self.is_terminal and self.stage in (Stage.GREETING, Stage.INQUIRY):
            self.item = known.name
        if input_language is not None:
            self.input_language = input_language
        if target_language is not None:
            self.target_language = target_language
        self.updated_at = now

    def _mentioned_item(self, text: str) -> str | None:
        # Whole words only: "daam" (price) must not read as "aam" (mango), nor "akela" as "kela".
        words = _WORD.findall(text.lower())
        singles, phrases = _item_words(self.scenario_name)
        for word in words:
            if word in singles:
                return singles[word]
        if phrases:
            padded = f" {' '.join(words)} "
            for phrase, name in phrases:
                if phrase in padded:
                    return name
        found = self.scenario.item(self.object_grabbed)
        return found.name if found else None

    def begin_turn(self, text: str, client_id: str | None, now: float) -> PendingTurn:
        """Record the learner's turn and judge any offer in it. Call only when not terminal."""
        assert not self.is_terminal and self.pending is None
        self.coaching.checkpoint(Checkpoint(
            turn=self.turn + 1, stage=self.stage, happiness=self.happiness, item=self.item,
            object_grabbed=self.object_grabbed, quotes=dict(self.quotes), first_quotes=dict(self.first_quotes),
            last_offer=self.last_offer, insults=self.insults,
        ))
        self.coaching.hint_level = 0
        self.coaching.learner_acted()
        item = self._mentioned_item(text) or self.item
        if item and item != self.item and self.stage in (Stage.GREETING, Stage.INQUIRY):
            self.item = item
        standing = self.quotes.get(item) if item else None
        catalog = self.scenario.item(item)
        lexicon = number_lexicon(self.scenario.vendor.languages)
        read = read_numbers(text, lexicon)  # once: for the offer, and the numbers the vendor may echo
        reading = read_offer(text, standing, lexicon, unit=catalog.unit if catalog else None,
                             last_offer=self.last_offer, numbers=read)
        offer = reading.price if reading is not None and reading.sure else None
        assessment = assess_reading(reading, standing, self.scenario.rules.offer_bands)
        turn = self.turn + 1
        self.pending = PendingTurn(turn, text, client_id, item, offer, assessment, now, reading,
                                   tuple(round(m.value) for m in read[0]))
        self.history.append(TurnRecord(
            turn=turn, role="user", text=text, stage=self.stage, happiness=self.happiness, at=now, item=item,
            object_grabbed=self.object_grabbed, offer=offer, read_from=reading.read_from if reading else "",
            quote=standing, assessment=assessment, client_id=client_id))
        if offer is not None:
            self.last_offer = offer
        self.updated_at = now
        return self.pending

    def undo(self, now: float) -> Checkpoint | None:
        """Take back the last answered learner turn: the state exactly as before it (seq and the
        brain's cost excepted: events are never erased, and what was spent was spent). None when
        there is nothing to undo. Call only when no turn is in flight and the session is not over."""
        assert self.pending is None and not self.is_terminal
        if not self.coaching.checkpoints:
            return None
        point = self.coaching.checkpoints.pop()
        self.stage, self.happiness, self.turn = point.stage, point.happiness, point.turn - 1
        self.item, self.object_grabbed, self.last_offer = point.item, point.object_grabbed, point.last_offer
        self.quotes, self.first_quotes, self.insults = dict(point.quotes), dict(point.first_quotes), point.insults
        self.history = [h for h in self.history if h.turn < point.turn]
        self.stage_changes = drop_from(point.turn, self.stage_changes)
        self.memory.undo(point.turn)
        self.coaching.undos += 1
        self.coaching.hint_level = 0
        self.updated_at = now
        return point

    def brain_request(self, pending: PendingTurn, *, rag_context: str = "", context_block: str = "") -> BrainRequest:
        last_vendor = next((h.at for h in reversed(self.history) if h.role == "vendor"), None)
        lines = tuple(h.as_line() for h in self.history[-HISTORY_LINES - 1 : -1])
        for h in self.history[-HISTORY_LINES - 3 : -HISTORY_LINES - 1]:
            h._line = None  # out of the window for good (a turn adds two records): keep no copy
        return BrainRequest(
            session_id=self.session_id,
            scenario=self.scenario_name,
            turn=pending.turn,
            max_turns=self.limits.max_turns,
            transcript=pending.text,
            input_language=self.input_language,
            target_language=self.target_language,
            stage=self.stage,
            happiness_score=self.happiness,
            vendor_mood=mood_for(self.happiness),
            item=pending.item,
            object_grabbed=self.object_grabbed,
            vendor_quote=self.quotes.get(pending.item) if pending.item else None,
            first_quote=self.first_quotes.get(pending.item) if pending.item else None,
            learner_offer=pending.offer,
            offer_assessment=pending.assessment,
            **reading_fields(pending.reading),
            wrap_up=pending.turn > self.limits.wrap_up_after,
            returning_after_pause=(
                last_vendor is not None and pending.received_at - last_vendor > RETURNING_AFTER_SECONDS
            ),
            history=lines,
            summary=self.memory.summary,
            level=self.level,
            graph=self.graph_context(),
            context_block=context_block,
            rag_context=rag_context,
            learner=self.recall,
        )

    def _position(self, pending: PendingTurn) -> Position:
        catalog = self.scenario.item(pending.item)
        return Position(stage=self.stage, happiness=self.happiness, turn=pending.turn,
                        quote=self.quotes.get(pending.item) if pending.item else None,
                        floor=catalog.floor if catalog else None, learner_offer=pending.offer,
                        server_assessment=pending.assessment,
                        offer_unsure=pending.reading is not None and not pending.reading.sure)

    def _price_rule(self, pending: PendingTurn, position: Position, proposal: Proposal, verdict: Verdict) -> PriceRule:
        return price_rule(self.scenario, pending.item, position, proposal, verdict, quotes=self.quotes,
                          first_quotes=self.first_quotes, offer=pending.offer, recall=self.recall,
                          learner_said=pending.said)

    def price_rule(self, pending: PendingTurn, proposal: Proposal) -> PriceRule:
        """What the words of the turn in flight may say, given the numbers a streaming brain has
        written so far (`schemas.decision.DecisionHead`): the ruling `complete_turn` makes on the
        same numbers. Changes nothing."""
        assert self.pending is pending
        position = self._position(pending)
        return self._price_rule(pending, position, proposal, validate(position, proposal, self.rule_limits))

    def complete_turn(self, pending: PendingTurn, result: BrainResult, now: float, *, withdrawn_stream: bool = False,
                      gate: ReplyGate | None = None) -> TurnOutcome:
        """Validate the brain's proposal, apply what stands and return the events, in seq order.
        `gate`: the words streamed for this turn, if any went out (`session.wording.words_of`)."""
        assert self.pending is pending
        proposal = result.decision
        if result.fallback:
            # A failed brain never moves the negotiation; only server-judged offers still count.
            proposal = proposal.model_copy(
                update={"negotiation_state": self.stage, "happiness_score": self.happiness}
            )
        item = pending.item
        position = self._position(pending)
        verdict = validate(position, proposal, self.rule_limits)
        level = self.level_params
        words = words_of(proposal.reply_text, self._price_rule(pending, position, proposal, verdict), gate,
                         self.scenario_name, level.max_sentences, fallback=result.fallback)
        said, withdrawn_stream = words.said, withdrawn_stream or (gate is not None and not words.gated)
        verdict = unbind_unsaid(verdict, said, position)
        text = said.text or nothing_said_line(self.scenario, self.target_language, self.level, pending.turn,
                                              item, verdict.quote)
        self.ledger = self.ledger.add(result.ledger)
        previous_stage, previous_happiness = self.stage, self.happiness
        self.stage, self.happiness, self.turn = verdict.stage, verdict.happiness, pending.turn
        if item and verdict.quote is not None:
            self.quotes[item] = verdict.quote
            self.first_quotes.setdefault(item, verdict.quote)
        if verdict.assessment is OfferAssessment.INSULT:
            self.insults += 1
        if verdict.stage is not previous_stage:
            self.stage_changes.append(
                StageVisit(from_stage=previous_stage, to_stage=verdict.stage, at_turn=pending.turn,
                           happiness=verdict.happiness)
            )
        if verdict.is_terminal:
            self.outcome = _outcome(previous_stage, verdict)
        self.pending = None
        self.updated_at = now

        # Validated constructors, not `model_construct`: pydantic-core checks a model in Rust faster
        # than `model_construct` fills one in Python (4 us against 11 for a Reply).
        reply = Reply(
            session_id=self.session_id,
            seq=self.next_seq(),
            turn=pending.turn,
            text=text,
            happiness_score=verdict.happiness,
            negotiation_state=verdict.stage,
            vendor_mood=verdict.mood,
            counter_price=verdict.quote,
            # A level without unprompted hints keeps the suggestion for the hint command only.
            suggested_user_response=proposal.suggested_user_response if level.unprompted_hints else "",
            suggested_user_response_english=(
                proposal.suggested_user_response_english if level.unprompted_hints else ""),
            # Only while the line is the brain's own words: a rewritten line has no English yet.
            text_english=proposal.reply_text_english if text == proposal.reply_text else "",
            is_terminal=verdict.is_terminal,
            in_reply_to=pending.client_id,
            learner_text=pending.text,
            item=item,
            learner_offer=pending.offer,
            offer_read_from=pending.reading.read_from if pending.reading else "",
            offer_assessment=verdict.assessment,
            fallback=result.fallback,
            withdrawn_stream=withdrawn_stream,
            flags=verdict.flags + said.flags + (("fallback",) if result.fallback else ()),
            policy=result.policy,
            sources=result.sources,
        )
        self.history.append(
            TurnRecord(
                turn=pending.turn, role="vendor", text=text, stage=verdict.stage,
                happiness=verdict.happiness, at=now, item=item, object_grabbed=self.object_grabbed,
                quote=verdict.quote, seq=reply.seq, flags=reply.flags,
                suggestion=proposal.suggested_user_response,
                suggestion_english=proposal.suggested_user_response_english,
            )
        )
        events: list[Reply | MoodChanged | StageChanged | SessionEnded] = [reply]
        if verdict.happiness != previous_happiness:
            events.append(
                MoodChanged(
                    session_id=self.session_id, seq=self.next_seq(), turn=pending.turn,
                    happiness_score=verdict.happiness, vendor_mood=verdict.mood,
                    delta=verdict.happiness - previous_happiness,
                )
            )
        if verdict.stage is not previous_stage:
            events.append(
                StageChanged(
                    session_id=self.session_id, seq=self.next_seq(), turn=pending.turn,
                    from_=previous_stage, to=verdict.stage, forced=verdict.forced_closure,
                )
            )
        if verdict.is_terminal:
            summary = self.summary()
            assert summary is not None
            events.append(
                SessionEnded(session_id=self.session_id, seq=self.next_seq(), outcome=summary.outcome, summary=summary)
            )
        return TurnOutcome(events=tuple(events), verdict=verdict, overrides=verdict.overrides,
                           rewrites=said.rewrites, tail=words.tail, gated=words.gated)

    def closing_reply(
        self, client_id: str | None, now: float, learner_text: str | None = None
    ) -> Reply:
        """The answer to a transcript after the end: no brain call, no state change but the seq."""
        assert self.outcome is not None
        return self.standing_reply(CLOSING_LINES[self.outcome], client_id, now, learner_text)

    def standing_reply(self, text: str, client_id: str | None, now: float, learner_text: str | None = None,
                       mark: ReplyMark | None = None) -> Reply:
        """A reply that is not a turn: the state as it stands, the next seq, and nothing else."""
        self.updated_at = now
        return Reply(
            session_id=self.session_id, seq=self.next_seq(), turn=self.turn,
            text=text, happiness_score=self.happiness,
            negotiation_state=self.stage, vendor_mood=mood_for(self.happiness),
            counter_price=self.quote, suggested_user_response="", is_terminal=self.is_terminal,
            in_reply_to=client_id, learner_text=learner_text, item=self.item, mark=mark,
        )

    # ------------------------------------------------------------------ views

    def summary(self) -> Summary | None:
        if self.outcome is None:
            return None
        final = self.quote if self.outcome is Outcome.DEAL else None
        discount = None
        if final is not None and self.first_quote:
            discount = round(100.0 * (1 - final / self.first_quote), 1)
        stages: list[Stage] = [Stage.GREETING] + [c.to_stage for c in self.stage_changes]
        return Summary(
            outcome=self.outcome, turns=self.turn, item=self.item, first_quote=self.first_quote,
            final_price=final, discount_pct=discount, final_happiness=self.happiness,
            insults=self.insults, stages=tuple(stages), ledger=self.ledger,
        )

    def graph_context(self) -> GraphContext:
        return graph_context(self.history, self.stage, self.stage_changes)

    def snapshot(self) -> SessionState:
        vendor = [h for h in self.history if h.role == "vendor"]
        return SessionState(
            session_id=self.session_id, scenario=self.scenario_name, learner_id=self.learner_id,
            input_language=self.input_language, target_language=self.target_language,
            stage=self.stage, happiness_score=self.happiness, vendor_mood=mood_for(self.happiness),
            turn=self.turn, max_turns=self.limits.max_turns, item=self.item,
            object_grabbed=self.object_grabbed, vendor_quote=self.quote, first_quote=self.first_quote,
            last_offer=self.last_offer, is_terminal=self.is_terminal, outcome=self.outcome,
            seq=self.seq, created_at=self.created_at, updated_at=self.updated_at,
            happiness_history=tuple(Point(turn=h.turn, value=h.happiness) for h in vendor),
            quotes=tuple(Point(turn=h.turn, value=h.quote) for h in vendor if h.quote is not None),
            offers=tuple(
                Point(turn=h.turn, value=h.offer) for h in self.history if h.role == "user" and h.offer is not None
            ),
            stage_changes=tuple(
                StageChange(turn=c.at_turn, from_stage=c.from_stage, to_stage=c.to_stage) for c in self.stage_changes
            ),
            summary=self.summary(),
            ledger=self.ledger,
            transcript=tuple(
                TranscriptLine(turn=h.turn, role="learner" if h.role == "user" else "vendor",
                               text=h.text)
                for h in self.history[-TRANSCRIPT_LINES:]
            ),
            level=self.level,
        )


@cache
def _level(scenario: str, level: Level) -> LevelParams:
    return load_scenario(scenario).levels[level]


@cache
def _rule_limits(limits: Limits, scenario: str, level: Level) -> Limits:
    cost = load_scenario(scenario).levels[level].lowball_cost
    if cost is None or cost >= limits.lowball_min_drop:
        return limits
    return replace(limits, lowball_min_drop=cost)


def _outcome(previous: Stage, verdict: Verdict) -> Outcome:
    if verdict.stage is Stage.DEAL:
        return Outcome.DEAL
    if verdict.forced_closure:
        return Outcome.TURN_LIMIT
    if previous is Stage.WALKAWAY:
        return Outcome.WALKED_AWAY
    return Outcome.NO_DEAL


def fallback_decision(position_stage: Stage, happiness: int, text: str) -> AIDecision:
    """A decision that changes nothing but says `text`: what a failing brain falls back to."""
    return AIDecision(
        reply_text=text, happiness_score=happiness, negotiation_state=position_stage,
        vendor_mood=mood_for(happiness), internal_reasoning="fallback",
    )
