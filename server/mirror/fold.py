"""Folding changes into graph rows: `plan()`, and the rows each kind of change writes (`ROWS`).

`plan()` folds one change into its session's `SessionFold` and returns an `Entry`: the Session
snapshot as of that change and the Turn and StageTransition rows it adds or updates. The session's
state changes only through `session.fold.apply`, the same function the live session applies its
changes with, so the rules live once; what is here is the graph's own shape: a Turn node per line
with its ordinal, the StageTransition of a stage change, the marks an undo and a barge-in leave.

Every kind of change has a row function in `ROWS`, even one that writes no row: a kind without
one fails at import, and a change of an unknown type fails `plan()` (the writer logs it and counts
its version as written, so that one bad change cannot hold back the rest). Pure apart from the
fold, so tests and benchmarks can plan a recorded stream without Neo4j.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from schemas.enums import OfferAssessment, Stage
from server.mirror.state import Entry, SessionFold, turn_key, turn_row
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
from session.fold import UnknownChange, apply
from session.negotiation import Negotiation

__all__ = ["ROWS", "Rows", "plan"]


@dataclass(slots=True)
class Rows:
    """What one change writes besides the Session snapshot."""

    turns: list[dict[str, Any]] = field(default_factory=list)  # Turn nodes to create
    transitions: list[dict[str, Any]] = field(default_factory=list)  # StageTransition nodes
    updates: list[dict[str, Any]] = field(default_factory=list)  # {"key", "props"}: SET on a written Turn
    undone_at: list[int] = field(default_factory=list)  # StageTransition `at_turn`s that an undo took back


def plan(fold: SessionFold, change: Change, submitted: float, *, snapshot: bool = True) -> Entry:
    """Fold `change` into `fold` and return the rows that write it. Pure apart from `fold`.

    `snapshot=False` leaves the Session snapshot out (an empty dict): for a change followed by a newer
    one of the same session in the same batch, whose snapshot is the only one written (see `batch_rows`)."""
    try:
        write = ROWS[type(change)]
    except KeyError:
        raise UnknownChange(f"no rows for {type(change).__name__} (kind {change.kind!r})") from None
    rows = Rows()
    if isinstance(change, SessionStarted):
        fold.state = Negotiation.started(change)
    elif fold.state is not None:
        write(fold, fold.state, change, rows)  # from the state as it was before the change
        apply(fold.state, change)
    fold.version = change.version
    props = fold.props() if snapshot and fold.state is not None else {}
    return Entry(change, submitted, props, rows.turns, rows.transitions, rows.updates, rows.undone_at)


def _nothing(fold: SessionFold, state: Negotiation, change: Change, rows: Rows) -> None:
    """A change that lives on the Session node alone (its counters, its seq, its ids)."""


def _learner_turn(fold: SessionFold, state: Negotiation, change: LearnerTurnTaken, rows: Rows) -> None:
    ordinal = fold.ordinals[change.turn] = fold.next_line()
    rows.turns.append(turn_row(change.session_id, ordinal, {
        "turn_number": change.turn, "role": "user", "text": change.text, "stage": change.stage.value,
        "happiness_score": change.happiness, "object_grabbed": change.object_grabbed, "item": change.item,
        "offer": change.offer, "read_from": change.reading.read_from if change.reading else None,
        "quote": change.quote, "assessment": change.assessment.value, "client_id": change.id, "closing": False,
        "timestamp": change.at, "version": change.version,
        "before": json.dumps(change.before.as_json(), sort_keys=True),  # what an undo of it restores
    }))


def _vendor_turn(fold: SessionFold, state: Negotiation, change: VendorTurnTaken, rows: Rows) -> None:
    turn, stage, previous = change.turn, change.stage.value, change.previous_stage.value
    ordinal = fold.last_ordinal = fold.ordinals[turn] + 1  # right after the learner's line
    rows.turns.append(turn_row(change.session_id, ordinal, {
        "turn_number": turn, "role": "vendor", "text": change.text, "stage": stage, "previous_stage": previous,
        "happiness_score": change.happiness, "object_grabbed": state.object_grabbed, "item": change.item,
        "quote": change.quote, "assessment": change.assessment.value, "flags": list(change.flags),
        "forced": change.forced, "seq": change.reply_seq, "last_seq": change.seq,
        "outcome": change.outcome.value if change.outcome else None, "closing": False, "timestamp": change.at,
        "version": change.version, "suggestion": change.suggestion or None,
        "suggestion_english": change.suggestion_english or None,
    }))
    if stage != previous:
        key = fold.transition_keys[turn] = turn + fold.shift
        rows.transitions.append({"at_turn": key, "version": change.version, "props": {
            "from_stage": previous, "to_stage": stage, "happiness_at_transition": change.happiness,
            "timestamp": change.at, "turn_number": turn,
        }})


def _closing(fold: SessionFold, state: Negotiation, change: ClosingReplied, rows: Rows) -> None:
    """A transcript after the end and its closing line: two Turn nodes after the last ones."""
    fold.closings += 1
    common = {"turn_number": state.turn, "stage": state.stage.value, "happiness_score": state.happiness,
              "object_grabbed": state.object_grabbed, "item": None, "closing": True, "timestamp": change.at,
              "version": change.version, "assessment": OfferAssessment.NONE.value}
    outcome = state.outcome.value if state.outcome else None
    rows.turns.append(turn_row(change.session_id, fold.next_line(), {**common, "role": "user", "text": change.text,
                                                                     "client_id": change.id}))
    rows.turns.append(turn_row(change.session_id, fold.next_line(), {**common, "role": "vendor", "text": change.reply,
                                                         "seq": change.seq, "last_seq": change.seq,
                                                         "outcome": outcome}))


def _undo(fold: SessionFold, state: Negotiation, change: TurnUndone, rows: Rows) -> None:
    """The undone turn's two Turn nodes are marked `undone` and keep their ordinals (later turns come
    after them); its StageTransition likewise. `GET /api/stats` and the rebuild leave them out."""
    ordinal = fold.ordinals.pop(change.turn)
    for key in (turn_key(change.session_id, ordinal), turn_key(change.session_id, ordinal + 1)):
        rows.updates.append({"key": key, "props": {"undone": True, "undone_at": change.at}})
    transition = fold.transition_keys.pop(change.turn, None)
    if transition is not None:
        rows.undone_at.append(transition)
    fold.shift += 1


def _ended(fold: SessionFold, state: Negotiation, change: EndedNow, rows: Rows) -> None:
    rows.transitions.append({"at_turn": state.turn + fold.shift + 1, "version": change.version, "props": {
        "from_stage": change.previous_stage.value, "to_stage": Stage.CLOSURE.value,
        "happiness_at_transition": state.happiness, "timestamp": change.at, "turn_number": state.turn + 1,
    }})


def _playback(fold: SessionFold, state: Negotiation, change: PlaybackHeard, rows: Rows) -> None:
    """The vendor Turn gets what was heard of it, and the quote that stands when its price went unheard."""
    props: dict[str, Any] = {"heard_chars": change.heard_chars, "interrupted": change.interrupted}
    if change.quote_unbound and change.unbound_item is not None:
        props["quote_unbound"] = True
        props["quote"] = change.unbound_to  # as in memory (a null removes it)
    rows.updates.append({"key": turn_key(change.session_id, fold.ordinals[change.turn] + 1), "props": props})


RowWriter = Callable[[SessionFold, Negotiation, Any, Rows], None]


# Each kind of change, and the rows it writes besides the Session snapshot. `SummaryWritten` is
# written by server/mirror/memory.py in the batch's transaction; the others here.
ROWS: dict[type[Change], RowWriter] = for_every_kind({
    SessionStarted: _nothing,
    SceneSet: _nothing,
    LearnerTurnTaken: _learner_turn,
    VendorTurnTaken: _vendor_turn,
    ClosingReplied: _closing,
    UnclearAnswered: _nothing,
    HintGiven: _nothing,
    Repeated: _nothing,
    SpeechHeard: _nothing,
    TurnUndone: _undo,
    Nudged: _nothing,
    EndedNow: _ended,
    WelcomedBack: _nothing,
    PlaybackHeard: _playback,
    SummaryWritten: _nothing,
}, "rows")
