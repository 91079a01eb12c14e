"""Folding changes into graph rows: a session's running state (`SessionFold`) and `plan()`.

`plan()` folds one change into its session's fold and returns an `Entry`: the Session snapshot as of
that change and the Turn and StageTransition rows it adds. It is pure apart from the fold, so tests and
benchmarks can plan a recorded stream without Neo4j. `server/mirror/batch.py` turns a batch of entries
into `WRITE_BATCH`'s rows.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from schemas.brain import Ledger
from schemas.enums import OfferAssessment
from server.mirror.coaching import COACHING_KINDS, coach
from server.mirror.memory import MEMORY_KINDS
from server.mirror.state import Entry, SessionFold, as_int, as_str, turn_row
from session.coaching import MAX_UNDO, Checkpoint
from session.protocols import Change

log = logging.getLogger("samvad.mirror")


def plan(fold: SessionFold, change: Change, submitted: float, *, snapshot: bool = True) -> Entry:
    """Fold `change` into `fold` and return the rows that write it. Pure apart from `fold`.

    `snapshot=False` leaves the Session snapshot out (an empty dict): for a change followed by a newer
    one of the same session in the same batch, whose snapshot is the only one written (see `batch_rows`)."""
    sid, data = change.session_id, change.data
    stamp = data.get("at")
    at = float(stamp) if isinstance(stamp, int | float) else change.at  # when it happened
    turns: list[dict[str, Any]] = []
    transitions: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    undone_at: list[int] = []
    kind = change.kind
    if kind == "session":
        at = float(data.get("created_at") or at)  # type: ignore[arg-type]
        fold.scenario = as_str(data.get("scenario"))
        fold.learner_id = as_str(data.get("learner_id"))
        fold.input_language = as_str(data.get("input_language"))
        fold.target_language = as_str(data.get("target_language"))
        fold.level = as_str(data.get("level"))
        fold.created_at = at
        fold.stage = str(data.get("stage") or fold.stage)
        happiness = as_int(data.get("happiness"))
        fold.happiness = fold.happiness if happiness is None else happiness
        fold.complete = True
    elif kind == "scene":
        fold.remember(data.get("id"))
        fold.object_grabbed = as_str(data.get("object_grabbed"))
        fold.item = as_str(data.get("item"))
        fold.input_language = as_str(data.get("input_language")) or fold.input_language
        fold.target_language = as_str(data.get("target_language")) or fold.target_language
    elif kind == "learner_turn":
        fold.remember(data.get("id"))
        turn = int(data["turn"])  # type: ignore[call-overload]
        offer = as_int(data.get("offer"))
        if "session_item" in data:
            fold.item = as_str(data.get("session_item"))
        if offer is not None:
            fold.last_offer = offer
        fold.undo_depth = min(MAX_UNDO, fold.undo_depth + 1)
        fold.coaching["hint_level"] = fold.coaching["consecutive_timeouts"] = 0
        before = data.get("before")
        turns.append(turn_row(sid, fold.ordinal(turn), {
            "turn_number": turn, "role": "user", "text": data.get("text"), "stage": data.get("stage"),
            "happiness_score": data.get("happiness"), "object_grabbed": data.get("object_grabbed"),
            "item": data.get("item"), "offer": offer, "read_from": as_str(data.get("read_from")) or None,
            "quote": as_int(data.get("quote")),
            "assessment": data.get("assessment") or OfferAssessment.NONE.value, "client_id": data.get("id"),
            "closing": False, "timestamp": at, "version": change.version,
            "before": json.dumps(before.as_json(), sort_keys=True) if isinstance(before, Checkpoint) else None,
        }))
    elif kind == "vendor_turn":
        turn = int(data["turn"])  # type: ignore[call-overload]
        previous = str(data.get("previous_stage") or fold.stage)
        stage = str(data.get("stage") or fold.stage)
        happiness = int(data.get("happiness", fold.happiness))  # type: ignore[call-overload]
        item = as_str(data.get("item"))
        quote = as_int(data.get("quote"))
        assessment = str(data.get("assessment") or OfferAssessment.NONE.value)
        fold.stage, fold.happiness, fold.turn = stage, happiness, turn
        fold.seq = int(data.get("seq", fold.seq))  # type: ignore[call-overload]
        fold.outcome = as_str(data.get("outcome"))
        if item and quote is not None:
            fold.quoted(item, quote)
        if assessment == OfferAssessment.INSULT.value:
            fold.insults += 1
        ledger = data.get("ledger")
        if isinstance(ledger, dict):
            fold.ledger = fold.ledger.add(Ledger(**ledger))
        reply_seq = as_int(data.get("reply_seq"))
        turns.append(turn_row(sid, fold.ordinal(turn) + 1, {
            "turn_number": turn, "role": "vendor", "text": data.get("text"), "stage": stage,
            "previous_stage": previous, "happiness_score": happiness, "object_grabbed": fold.object_grabbed,
            "item": item, "quote": quote, "assessment": assessment, "flags": [str(f) for f in data.get("flags") or ()],  # type: ignore[attr-defined]
            "forced": bool(data.get("forced")), "seq": reply_seq, "last_seq": fold.seq, "outcome": fold.outcome,
            "closing": False, "timestamp": at, "version": change.version,
            "suggestion": data.get("suggestion") or None, "suggestion_english": data.get("suggestion_english") or None,
        }))
        if stage != previous:
            transitions.append({"at_turn": turn + fold.shift, "version": change.version, "props": {
                "from_stage": previous, "to_stage": stage, "happiness_at_transition": happiness, "timestamp": at,
                "turn_number": turn,
            }})
    elif kind == "closing_reply":
        fold.remember(data.get("id"))
        fold.closings += 1
        fold.seq = int(data.get("seq", fold.seq))  # type: ignore[call-overload]
        base = fold.ordinal(fold.turn) + 1 + 2 * fold.closings
        common = {"turn_number": fold.turn, "stage": fold.stage, "happiness_score": fold.happiness,
                  "object_grabbed": fold.object_grabbed, "item": None, "closing": True, "timestamp": at,
                  "version": change.version}
        turns.append(turn_row(sid, base - 1, {**common, "role": "user", "text": data.get("text"),
                                               "client_id": data.get("id"),
                                               "assessment": OfferAssessment.NONE.value}))
        turns.append(turn_row(sid, base, {**common, "role": "vendor", "text": data.get("reply"),
                                           "seq": fold.seq, "last_seq": fold.seq, "outcome": fold.outcome,
                                           "assessment": OfferAssessment.NONE.value}))
    elif kind in COACHING_KINDS:
        coach(fold, change, at, turns, transitions, updates, undone_at)
    elif kind in MEMORY_KINDS:
        pass  # the running summary: written by server/mirror/memory.py, in the batch's transaction
    elif kind == "ids":
        for client_id in data.get("ids") or ():  # type: ignore[attr-defined]
            fold.remember(client_id)
    else:
        log.warning("unknown change kind %r; only its version is recorded", kind, extra={"session_id": sid})
    fold.updated_at = at
    fold.version = change.version
    return Entry(change, submitted, fold.props() if snapshot else {}, turns, transitions, updates, undone_at)
