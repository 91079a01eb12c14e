"""Applying a change to a session's state: one function per kind of change, in one table.

`apply(state, change)` is the only way a session's state (`SessionCore`, session/core.py) changes.
The live session calls it for every change its machine decides (`session/negotiation.py`), and the Neo4j mirror calls it
on its own copy of the state as it folds the recorded changes (`server/mirror/fold.py`), so a
session rebuilt from its changes equals the live one: each rule of the state (a quote that binds,
an insult counted, an undo, a quote that went unheard) exists here and nowhere else.

Each function is deterministic and touches nothing but the state it is given: no clock, no I/O,
no randomness. It mutates that state in place rather than copying it, because a session's history
grows with every turn and a copy per change would cost more than the turn. A kind of change with
no function here is a bug, and `apply` says so with `UnknownChange` instead of skipping it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from schemas.brain import StageVisit
from schemas.enums import OfferAssessment, Outcome, Stage
from schemas.review import Evidence
from session.changes import (
    Change,
    ClosingReplied,
    EndedNow,
    HintGiven,
    LearnerTurnTaken,
    Nudged,
    PlaybackHeard,
    Repeated,
    SceneSet,
    SessionStarted,
    SpeechHeard,
    SummaryWritten,
    TurnUndone,
    UnclearAnswered,
    VendorTurnTaken,
    WelcomedBack,
    for_every_kind,
)
from session.coaching import drop_from
from session.core import SessionCore
from session.records import PendingTurn, TurnRecord

__all__ = ["FOLD", "UnknownChange", "apply", "pending_of", "record_of"]

C = TypeVar("C", bound=Change)


class UnknownChange(TypeError):
    """A change of a kind the fold has no function for."""


def apply(state: SessionCore, change: Change) -> None:
    """Apply `change` to `state`: its version, its time, and what the change's kind does."""
    try:
        fold = FOLD[type(change)]
    except KeyError:
        raise UnknownChange(f"no fold for {type(change).__name__} (kind {change.kind!r})") from None
    fold(state, change)
    state.version = change.version
    state.updated_at = change.at


def _session(state: SessionCore, change: SessionStarted) -> None:
    state.scenario_name = change.scenario
    state.scenario_version = change.scenario_version
    state.learner_id = change.learner_id
    state.input_language, state.target_language = change.input_language, change.target_language
    state.level = change.level
    state.stage, state.happiness = change.stage, change.happiness
    state.recall = change.recall
    state.created_at = change.at


def _scene(state: SessionCore, change: SceneSet) -> None:
    if change.id is not None:
        state.remember(change.id)
    state.object_grabbed, state.item = change.object_grabbed, change.item
    state.input_language, state.target_language = change.input_language, change.target_language


def pending_of(change: LearnerTurnTaken) -> PendingTurn:
    """The turn waiting for the vendor that a learner's turn leaves (and a speculative call previews)."""
    return PendingTurn(change.turn, change.text, change.id, change.item, change.offer, change.assessment,
                       change.at, change.reading, change.said)


def record_of(change: LearnerTurnTaken) -> TurnRecord:
    """The learner's line of the history that a learner's turn adds."""
    return TurnRecord(
        turn=change.turn, role="user", text=change.text, stage=change.stage, happiness=change.happiness,
        at=change.at, item=change.item, object_grabbed=change.object_grabbed, offer=change.offer,
        read_from=change.reading.read_from if change.reading else "", quote=change.quote,
        assessment=change.assessment, client_id=change.id)


def _learner_turn(state: SessionCore, change: LearnerTurnTaken) -> None:
    coaching = state.coaching
    coaching.checkpoint(change.before)
    coaching.hint_level = 0
    coaching.consecutive_timeouts = 0
    state.item = change.session_item
    state.pending = pending_of(change)
    state.history.append(record_of(change))
    if change.offer is not None:
        state.last_offer = change.offer
    if change.id is not None:
        state.remember(change.id)


def _vendor_turn(state: SessionCore, change: VendorTurnTaken) -> None:
    item, quote = change.item, change.quote
    state.ledger = state.ledger.add(change.ledger)
    state.stage, state.happiness, state.turn = change.stage, change.happiness, change.turn
    if item and quote is not None:
        state.quotes[item] = quote
        state.first_quotes.setdefault(item, quote)
    if change.assessment is OfferAssessment.INSULT:
        state.insults += 1
    if change.stage is not change.previous_stage:
        state.stage_changes.append(StageVisit(from_stage=change.previous_stage, to_stage=change.stage,
                                              at_turn=change.turn, happiness=change.happiness))
    state.outcome = change.outcome
    state.pending = None
    state.seq = change.seq
    state.history.append(TurnRecord(
        turn=change.turn, role="vendor", text=change.text, stage=change.stage, happiness=change.happiness,
        at=change.at, item=item, object_grabbed=state.object_grabbed, quote=quote, seq=change.reply_seq,
        flags=change.flags, suggestion=change.suggestion, suggestion_english=change.suggestion_english))


def _closing(state: SessionCore, change: ClosingReplied) -> None:
    state.remember(change.id)
    state.seq = change.seq


def _unclear(state: SessionCore, change: UnclearAnswered) -> None:
    state.remember(change.id)
    state.coaching.unclear += 1
    if change.text.strip():
        state.coaching.evidence.append(Evidence(source="unclear", key="unclear", turn=state.turn + 1,
                                                text=change.text))
    state.seq = change.seq


def _hint(state: SessionCore, change: HintGiven) -> None:
    state.remember(change.id)
    coaching = state.coaching
    coaching.consecutive_timeouts = 0
    by_level = list(coaching.hints)
    by_level[min(change.level, 2)] += 1
    coaching.hints = (by_level[0], by_level[1], by_level[2])
    coaching.hint_level = change.level + 1
    if change.level >= 2 and change.text:
        coaching.evidence.append(Evidence(source="hint", key=change.situation, turn=state.turn + 1,
                                          text=change.text, english=change.english))
    state.seq = change.seq


def _repeat(state: SessionCore, change: Repeated) -> None:
    state.remember(change.id)
    state.coaching.consecutive_timeouts = 0
    state.coaching.repeats += 1
    state.seq = change.seq


def _speech(state: SessionCore, change: SpeechHeard) -> None:
    state.seq = change.seq
    if change.fluency is not None:
        state.fluency = change.fluency if state.fluency is None else state.fluency.plus(change.fluency)


def _undo(state: SessionCore, change: TurnUndone) -> None:
    """Back to the checkpoint before learner turn `turn` (seq and the brain's cost excepted: events are
    never erased, and what was spent was spent)."""
    point = change.restored
    coaching = state.coaching
    if coaching.checkpoints and coaching.checkpoints[-1].turn == point.turn:
        coaching.checkpoints.pop()
    state.stage, state.happiness, state.turn = point.stage, point.happiness, point.turn - 1
    state.item, state.object_grabbed, state.last_offer = point.item, point.object_grabbed, point.last_offer
    state.quotes, state.first_quotes, state.insults = dict(point.quotes), dict(point.first_quotes), point.insults
    state.outcome = None
    state.history = [h for h in state.history if h.turn < point.turn]
    state.stage_changes = drop_from(point.turn, state.stage_changes)
    state.memory.undo(point.turn)
    coaching.undos += 1
    coaching.hint_level = coaching.consecutive_timeouts = 0
    if change.id is not None:
        state.remember(change.id)
    state.seq = change.seq


def _nudge(state: SessionCore, change: Nudged) -> None:
    coaching = state.coaching
    coaching.timeouts += 1
    coaching.consecutive_timeouts += 1
    if change.offered_hint:
        coaching.hints_offered += 1
    if change.id is not None:
        state.remember(change.id)
    state.seq = change.seq


def _ended(state: SessionCore, change: EndedNow) -> None:
    """The end outside a turn: a forced CLOSURE, recorded at the next turn (the end comes before the
    learner turn that never happens). A turn in flight is abandoned."""
    coaching = state.coaching
    if change.outcome is Outcome.TIMED_OUT:
        coaching.timeouts += 1
        coaching.consecutive_timeouts += 1
    else:
        coaching.consecutive_timeouts = 0
    state.pending = None
    state.outcome = change.outcome
    state.stage = Stage.CLOSURE
    state.stage_changes.append(StageVisit(from_stage=change.previous_stage, to_stage=Stage.CLOSURE,
                                          at_turn=state.turn + 1, happiness=state.happiness))
    if change.id is not None:
        state.remember(change.id)
    state.seq = change.seq


def _welcome_back(state: SessionCore, change: WelcomedBack) -> None:
    state.coaching.welcome_backs += 1
    state.seq = change.seq


def _playback(state: SessionCore, change: PlaybackHeard) -> None:
    """What the learner heard of the vendor's answer to `turn`; an unheard price stops binding."""
    record = next((h for h in reversed(state.history) if h.role == "vendor" and h.turn == change.turn), None)
    if record is not None:
        record.heard = change.heard_chars if change.interrupted else None
        record._line = None  # the brain sees the heard part from now on
        if change.quote_unbound:
            record.quote = change.unbound_to  # the curves and the report follow the quote that stands
    item = change.unbound_item
    if change.quote_unbound and item is not None:
        if change.unbound_to is None:
            dropped = state.quotes.pop(item, None)
            if dropped is not None and state.first_quotes.get(item) == dropped:
                del state.first_quotes[item]
        else:
            state.quotes[item] = change.unbound_to
    state.remember(change.id)
    state.seq = change.seq


def _summary(state: SessionCore, change: SummaryWritten) -> None:
    state.memory.written(change.text, change.turn, change.previous, change.previous_turn)


# Each kind of change, and what applying it does.
FOLD: dict[type[Change], Callable[[SessionCore, Any], None]] = for_every_kind({
    SessionStarted: _session,
    SceneSet: _scene,
    LearnerTurnTaken: _learner_turn,
    VendorTurnTaken: _vendor_turn,
    ClosingReplied: _closing,
    UnclearAnswered: _unclear,
    HintGiven: _hint,
    Repeated: _repeat,
    SpeechHeard: _speech,
    TurnUndone: _undo,
    Nudged: _nudge,
    EndedNow: _ended,
    WelcomedBack: _welcome_back,
    PlaybackHeard: _playback,
    SummaryWritten: _summary,
}, "fold")
