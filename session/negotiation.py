"""One session's machine as plain synchronous code: inputs in, changes and events out.

`Negotiation` is a session's state (`SessionCore`, session/core.py) with the decisions that change
it. The actor feeds it accepted frames and brain results, in order. Each decision is said as a
typed change (session/changes.py) and committed: applied with `session.fold.apply`, the one
function that changes a session's state, and kept in `outbox` until the actor hands it to the
mirror. It never awaits, never reads the clock (callers pass `now`) and never draws random
numbers, so it is tested without an event loop.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import TypeVar

from schemas.brain import BrainRequest, BrainResult
from schemas.decision import AIDecision
from schemas.enums import LanguageCode, Outcome, Stage
from schemas.frames import (
    MoodChanged,
    Reply,
    ReplyMark,
    SessionEnded,
    StageChanged,
)
from schemas.scenario import load_scenario
from session.changes import (
    Change,
    ClosingReplied,
    LearnerTurnTaken,
    SceneSet,
    SessionStarted,
    TurnUndone,
    VendorTurnTaken,
)
from session.coaching import Checkpoint
from session.context import graph_context
from session.core import SessionCore
from session.fold import apply, pending_of, record_of
from session.numbers import number_lexicon, read_numbers
from session.offers import OfferReading, assess_reading, read_offer, reading_fields
from session.practice import invitations
from session.records import PendingTurn, TurnOutcome, TurnRecord
from session.rules import Limits, Position, Proposal, Verdict, mood_for, validate
from session.spoken import PriceRule, ReplyGate
from session.wording import nothing_said_line, price_rule, unbind_unsaid, words_of

# Lines of history a brain is handed (it keeps the newest that fit HISTORY_TOKEN_BUDGET): twice the
# lines a running summary reads, so that what falls out of them is in the summary, even a late one.
HISTORY_LINES = 40
RETURNING_AFTER_SECONDS = 2 * 3600  # seed 001: a "welcome back" after two hours away
# Learner lines remembered per set of languages, with what was read in them: learners say the same
# short lines again and again ("kitne ka hai?", "theek hai", the same offers), and reading one costs
# tens of microseconds; a few MB at most.
LINES_REMEMBERED = 4096
_WORD = re.compile(r"[a-z]+")
C = TypeVar("C", bound=Change)


@cache
def _item_words(scenario: str, version: int) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """Each item's names and plurals: single words for a set lookup, phrases for a scan."""
    singles: dict[str, str] = {}
    phrases: list[tuple[str, str]] = []
    for item in load_scenario(scenario, version).items:
        for name in (item.name.lower(), item.local.lower()):
            for form in (name, name + "s", name + "es"):
                if " " in form:
                    phrases.append((f" {form} ", item.name))
                else:
                    singles.setdefault(form, item.name)
    return singles, tuple(phrases)


@lru_cache(maxsize=LINES_REMEMBERED)
def _named_item(scenario: str, version: int, text: str) -> str | None:
    """The item a learner line names, if any; kept per line, as `_item_words` is per pack."""
    # Whole words only: "daam" (price) must not read as "aam" (mango), nor "akela" as "kela".
    words = _WORD.findall(text.lower())
    singles, phrases = _item_words(scenario, version)
    for word in words:
        if word in singles:
            return singles[word]
    if phrases:
        padded = f" {' '.join(words)} "
        for phrase, name in phrases:
            if phrase in padded:
                return name
    return None

OfferReader = Callable[[str, int | None, str | None, int | None], tuple[OfferReading | None, tuple[int, ...]]]


@cache
def offer_reader(languages: tuple[LanguageCode, ...]) -> OfferReader:
    """What a learner's line offers in these languages, and every number said in it (rounded), for
    `(text, standing quote, unit, last offer)`. Pure, so what a line gave is remembered: the
    reading is a frozen value of those four inputs and the languages' lexicon."""
    lexicon = number_lexicon(languages)

    @lru_cache(maxsize=LINES_REMEMBERED)
    def read(text: str, standing: int | None, unit: str | None,
             last_offer: int | None) -> tuple[OfferReading | None, tuple[int, ...]]:
        numbers = read_numbers(text, lexicon)  # once: for the offer, and the numbers the vendor may echo
        reading = read_offer(text, standing, lexicon, unit=unit, last_offer=last_offer, numbers=numbers)
        return reading, tuple(round(m.value) for m in numbers[0])

    return read


CLOSING_LINES = {
    Outcome.DEAL: "We already shook on it, friend. Enjoy your purchase and come back soon!",
    Outcome.WALKED_AWAY: "You already left my stall, friend. Come back another day.",
    Outcome.NO_DEAL: "Our bargaining is over for today. Come back another day, friend.",
    Outcome.TURN_LIMIT: "We have talked long enough for today. Come back tomorrow, friend.",
    Outcome.STOPPED: "We stopped for today, friend. Come back any time.",
    Outcome.TIMED_OUT: "You have gone quiet, friend, so we stop here for today. Come back any time.",
}


@dataclass(slots=True)
class Negotiation(SessionCore):
    """The session machine: decides each change from the state and an input, commits it (applies it
    and keeps it for the mirror) and returns the events it makes. It never awaits, never reads the
    clock (callers pass `now`) and never draws random numbers."""

    @classmethod
    def started(cls, change: SessionStarted, limits: Limits | None = None) -> Negotiation:
        """A session as its first change says it began: how the live session and its fold start."""
        state = cls(session_id=change.session_id, scenario_name=change.scenario, created_at=change.at,
                    scenario_version=change.scenario_version, limits=limits or Limits())
        apply(state, change)
        return state

    # ------------------------------------------------------------------ changes

    def commit(self, change: C) -> C:
        """Apply a change this session decided, and keep it for the mirror (`take_changes`)."""
        apply(self, change)
        self.outbox.append(change)
        return change

    def take_changes(self) -> list[Change]:
        """The changes made since the last call, oldest first."""
        changes, self.outbox = self.outbox, []
        return changes

    def stamp(self, at: float) -> tuple[str, int, float]:
        """The fields every change of this session has, in their order (session, version, time), for
        the next change made at `at`: `Change(*stamp(at), ...)`."""
        return self.session_id, self.version + 1, at

    # ------------------------------------------------------------------ facts

    def apply_scene(
        self,
        *,
        object_grabbed: str | None,
        input_language: LanguageCode | None,
        target_language: LanguageCode | None,
        now: float,
        client_id: str | None = None,
    ) -> SceneSet:
        """Scene updates change context only; they never produce a vendor turn."""
        item = self.item
        known = self.scenario.item(object_grabbed)
        if known is not None and not self.is_terminal and self.stage in (Stage.GREETING, Stage.INQUIRY):
            item = known.name
        return self.commit(SceneSet(
            *self.stamp(now), id=client_id, object_grabbed=object_grabbed, item=item,
            input_language=input_language or self.input_language,
            target_language=target_language or self.target_language))

    def _mentioned_item(self, text: str) -> str | None:
        named = _named_item(self.scenario_name, self.scenario_version, text)
        if named is not None:
            return named
        found = self.scenario.item(self.object_grabbed)
        return found.name if found else None

    def begin_turn(self, text: str, client_id: str | None, now: float) -> PendingTurn:
        """Record the learner's turn and judge any offer in it. Call only when not terminal."""
        assert not self.is_terminal and self.pending is None
        self.commit(self._learner_turn(text, client_id, now))
        assert self.pending is not None
        return self.pending

    def _learner_turn(self, text: str, client_id: str | None, now: float) -> LearnerTurnTaken:
        """The change `begin_turn` commits for `text` at `now`, made and not committed."""
        before = Checkpoint(
            turn=self.turn + 1, stage=self.stage, happiness=self.happiness, item=self.item,
            object_grabbed=self.object_grabbed, quotes=dict(self.quotes), first_quotes=dict(self.first_quotes),
            last_offer=self.last_offer, insults=self.insults,
        )
        item = self._mentioned_item(text) or self.item
        session_item = item if item and item != self.item and self.stage in (Stage.GREETING, Stage.INQUIRY) \
            else self.item
        standing = self.quotes.get(item) if item else None
        catalog = self.scenario.item(item)
        reading, said = offer_reader(self.scenario.vendor.languages)(
            text, standing, catalog.unit if catalog else None, self.last_offer)
        return LearnerTurnTaken(
            *self.stamp(now), id=client_id, turn=self.turn + 1, text=text, item=item,
            offer=reading.price if reading is not None and reading.sure else None,
            assessment=assess_reading(reading, standing, self.scenario.rules.offer_bands), reading=reading,
            said=said, session_item=session_item, quote=standing,
            stage=self.stage, happiness=self.happiness, object_grabbed=self.object_grabbed, before=before)

    def preview_request(self, text: str, now: float) -> BrainRequest:
        """The brain request a turn of `text` at `now` would make (`begin_turn`, then `brain_request`),
        changing nothing: what a speculative call asks (session/speculation.py). Call only when no
        turn is in flight and the session is not over."""
        assert not self.is_terminal and self.pending is None
        change = self._learner_turn(text, None, now)
        return self._request(pending_of(change), [*self.history, record_of(change)])

    def undo(self, now: float, client_id: str | None = None) -> Checkpoint | None:
        """Take back the last answered learner turn: the state exactly as before it (seq and the
        brain's cost excepted: events are never erased, and what was spent was spent), and the seq
        of the `undo` event that says so. None when there is nothing to undo. Call only when no
        turn is in flight and the session is not over."""
        assert self.pending is None and not self.is_terminal
        if not self.coaching.checkpoints:
            return None
        point = self.coaching.checkpoints[-1]
        self.commit(TurnUndone(*self.stamp(now), id=client_id, turn=point.turn, seq=self.seq + 1, restored=point))
        return point

    def brain_request(self, pending: PendingTurn, *, rag_context: str = "", context_block: str = "") -> BrainRequest:
        for h in self.history[-HISTORY_LINES - 3 : -HISTORY_LINES - 1]:
            h._line = None  # out of the window for good (a turn adds two records): keep no copy
        return self._request(pending, self.history, rag_context=rag_context, context_block=context_block)

    def _request(self, pending: PendingTurn, history: list[TurnRecord], *, rag_context: str = "",
                 context_block: str = "") -> BrainRequest:
        """The request for `pending`, whose learner record ends `history`."""
        last_vendor = next((h.at for h in reversed(history) if h.role == "vendor"), None)
        lines = tuple(h.as_line() for h in history[-HISTORY_LINES - 1 : -1])
        return BrainRequest(
            session_id=self.session_id,
            scenario=self.scenario_name,
            scenario_version=self.scenario_version,
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
            graph=graph_context(history, self.stage, self.stage_changes),
            context_block=context_block,
            rag_context=rag_context,
            learner=self.recall,
            practice=invitations(self.recall, self.history),
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
                      gate: ReplyGate | None = None, tips: bool = False, report: bool = False) -> TurnOutcome:
        """Validate the brain's proposal, apply what stands and return the events, in seq order.
        `gate`: the words streamed for this turn, if any went out (`session.wording.words_of`).
        `tips`, `report`: the caller sends a `tips` event after the reply, and a report after an
        end; their seqs are taken with the turn's (`TurnOutcome.tips_seq`, `report_seq`)."""
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
        previous_stage, previous_happiness = self.stage, self.happiness
        moved, staged, ended = verdict.happiness != previous_happiness, verdict.stage is not previous_stage, \
            verdict.is_terminal
        first = self.seq + 1
        after = first + moved + staged + ended  # the seq after the negotiation's own events
        tips_seq = after + 1 if tips else None
        report_seq = after + 1 + tips if report and ended else None
        flags = verdict.flags + said.flags + (("fallback",) if result.fallback else ())
        self.commit(VendorTurnTaken(
            *self.stamp(now), turn=pending.turn, text=text, stage=verdict.stage, previous_stage=previous_stage,
            happiness=verdict.happiness, quote=verdict.quote, item=item, flags=flags,
            assessment=verdict.assessment, forced=verdict.forced_closure,
            seq=report_seq or tips_seq or after, reply_seq=first,
            outcome=_outcome(previous_stage, verdict) if ended else None, ledger=result.ledger,
            suggestion=proposal.suggested_user_response,
            suggestion_english=proposal.suggested_user_response_english))

        # Validated constructors, not `model_construct`: pydantic-core checks a model in Rust faster
        # than `model_construct` fills one in Python (4 us against 11 for a Reply).
        reply = Reply(
            session_id=self.session_id,
            seq=first,
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
            flags=flags,
            policy=result.policy,
            sources=result.sources,
        )
        events: list[Reply | MoodChanged | StageChanged | SessionEnded] = [reply]
        seq = first
        if moved:
            seq += 1
            events.append(
                MoodChanged(
                    session_id=self.session_id, seq=seq, turn=pending.turn,
                    happiness_score=verdict.happiness, vendor_mood=verdict.mood,
                    delta=verdict.happiness - previous_happiness,
                )
            )
        if staged:
            seq += 1
            events.append(
                StageChanged(
                    session_id=self.session_id, seq=seq, turn=pending.turn,
                    from_=previous_stage, to=verdict.stage, forced=verdict.forced_closure,
                )
            )
        if ended:
            summary = self.summary()
            assert summary is not None
            events.append(
                SessionEnded(session_id=self.session_id, seq=seq + 1, outcome=summary.outcome, summary=summary)
            )
        return TurnOutcome(events=tuple(events), verdict=verdict, overrides=verdict.overrides,
                           rewrites=said.rewrites, tail=words.tail, gated=words.gated, tips_seq=tips_seq,
                           report_seq=report_seq)

    def closing_reply(
        self, client_id: str, now: float, learner_text: str | None = None
    ) -> Reply:
        """The answer to a transcript after the end: no brain call, no state change but the seq."""
        assert self.outcome is not None
        line = CLOSING_LINES[self.outcome]
        self.commit(ClosingReplied(*self.stamp(now), id=client_id, seq=self.seq + 1, text=learner_text or "",
                                   reply=line))
        return self.standing_reply(line, client_id, learner_text)

    def standing_reply(self, text: str, client_id: str | None, learner_text: str | None = None,
                       mark: ReplyMark | None = None, seq: int | None = None) -> Reply:
        """A reply that is not a turn, made after the change that took its seq (the latest, unless
        `seq` says otherwise): the state as it stands, and nothing else."""
        return Reply(
            session_id=self.session_id, seq=self.seq if seq is None else seq, turn=self.turn,
            text=text, happiness_score=self.happiness,
            negotiation_state=self.stage, vendor_mood=mood_for(self.happiness),
            counter_price=self.quote, suggested_user_response="", is_terminal=self.is_terminal,
            in_reply_to=client_id, learner_text=learner_text, item=self.item, mark=mark,
        )

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
