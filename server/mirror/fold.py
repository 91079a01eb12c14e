"""Folding changes into graph rows: a session's running state (`SessionFold`) and `plan()`.

`plan()` folds one change into its session's fold and returns an `Entry`: the Session snapshot as of
that change and the Turn and StageTransition rows it adds. It is pure apart from the fold, so tests and
benchmarks can plan a recorded stream without Neo4j. `server/mirror/batch.py` turns a batch of entries
into `WRITE_BATCH`'s rows.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from schemas.brain import Ledger
from schemas.enums import OfferAssessment, Stage
from schemas.frames import LedgerTotals
from session.negotiation import REMEMBERED_IDS, SNIPPET_CHARS
from session.protocols import Change

log = logging.getLogger("samvad.mirror")


def turn_key(session_id: str, ordinal: int) -> str:
    """Unambiguous even if the session id holds ':' (the ordinal after the last ':' is all digits)."""
    return f"{session_id}:{ordinal}"


@dataclass(slots=True)
class SessionFold:
    """A session's Session-node scalars as of the last change submitted, kept so each change can
    carry a complete snapshot (a version-guarded write of a partial one could lose fields)."""

    scenario: str | None = None
    learner_id: str | None = None
    input_language: str | None = None
    target_language: str | None = None
    created_at: float | None = None
    updated_at: float | None = None
    stage: str = Stage.GREETING.value
    happiness: int = 50
    turn: int = 0
    seq: int = 0
    item: str | None = None
    object_grabbed: str | None = None
    quotes: dict[str, int] = field(default_factory=dict)
    first_quotes: dict[str, int] = field(default_factory=dict)
    last_offer: int | None = None
    outcome: str | None = None
    insults: int = 0
    ledger: LedgerTotals = field(default_factory=LedgerTotals)
    accepted_ids: OrderedDict[str, None] = field(default_factory=OrderedDict)
    closings: int = 0
    version: int = 0
    quotes_json: str | None = "{}"  # `quotes` and `first_quotes` as stored; None: redo at the next snapshot
    first_quotes_json: str | None = "{}"
    complete: bool = True  # False when changes arrive for a session this process never saw start

    def remember(self, client_id: object) -> None:
        if not isinstance(client_id, str):
            return
        self.accepted_ids[client_id] = None
        self.accepted_ids.move_to_end(client_id)
        while len(self.accepted_ids) > REMEMBERED_IDS:
            self.accepted_ids.popitem(last=False)

    def quoted(self, item: str, quote: int) -> None:
        self.quotes[item] = quote
        self.quotes_json = None
        if item not in self.first_quotes:
            self.first_quotes[item] = quote
            self.first_quotes_json = None

    def props(self) -> dict[str, Any]:
        item = self.item
        if self.quotes_json is None:
            self.quotes_json = json.dumps(self.quotes, sort_keys=True)
        if self.first_quotes_json is None:
            self.first_quotes_json = json.dumps(self.first_quotes, sort_keys=True)
        props: dict[str, Any] = {
            "scenario": self.scenario, "learner_id": self.learner_id, "input_language": self.input_language,
            "target_language": self.target_language, "created_at": self.created_at, "updated_at": self.updated_at,
            "negotiation_state": self.stage, "happiness_score": self.happiness, "turn_count": self.turn,
            "last_seq": self.seq, "item": item, "object_grabbed": self.object_grabbed,
            "quotes": self.quotes_json, "first_quotes": self.first_quotes_json,
            "vendor_quote": self.quotes.get(item) if item else None,
            "first_quote": self.first_quotes.get(item) if item else None,
            "last_offer": self.last_offer, "outcome": self.outcome, "insults": self.insults,
            "accepted_ids": list(self.accepted_ids), "closing_replies": self.closings,
            **{f"ledger_{name}": value for name, value in self.ledger.model_dump().items()},
        }
        if not self.complete:
            # Never overwrite what the graph knows with defaults this process made up.
            for name in ("scenario", "learner_id", "input_language", "target_language", "created_at"):
                if props[name] is None:
                    del props[name]
        return props

    @classmethod
    def from_graph(cls, s: dict[str, Any]) -> SessionFold:
        return cls(
            scenario=s.get("scenario"), learner_id=s.get("learner_id"), input_language=s.get("input_language"),
            target_language=s.get("target_language"), created_at=s.get("created_at"),
            updated_at=s.get("updated_at"), stage=s.get("negotiation_state") or Stage.GREETING.value,
            happiness=int(s.get("happiness_score", 50)), turn=int(s.get("turn_count", 0)),
            seq=int(s.get("last_seq", 0)), item=s.get("item"), object_grabbed=s.get("object_grabbed"),
            quotes=_json_dict(s.get("quotes")), first_quotes=_json_dict(s.get("first_quotes")),
            last_offer=s.get("last_offer"), outcome=s.get("outcome"), insults=int(s.get("insults", 0)),
            accepted_ids=OrderedDict.fromkeys(s.get("accepted_ids") or ()),
            closings=int(s.get("closing_replies", 0)), version=int(s.get("version", 0)),
            ledger=LedgerTotals(**{name: s[f"ledger_{name}"] for name in LedgerTotals.model_fields
                                   if s.get(f"ledger_{name}") is not None}),
            quotes_json=s.get("quotes") or "{}", first_quotes_json=s.get("first_quotes") or "{}",
        )


def _json_dict(raw: object) -> dict[str, int]:
    if not isinstance(raw, str) or not raw:
        return {}
    loaded = json.loads(raw)
    return {str(k): int(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}


@dataclass(slots=True)
class Entry:
    """One buffered change with everything needed to write it."""

    change: Change
    submitted: float  # perf_counter at submit, for the lag figures
    session: dict[str, Any]  # the Session snapshot as of this change
    turns: list[dict[str, Any]]
    transitions: list[dict[str, Any]]

    @property
    def turn_count(self) -> int:
        return len(self.turns)


def _turn_row(session_id: str, ordinal: int, props: dict[str, Any]) -> dict[str, Any]:
    """A Turn node's row. A turn never changes once written, so absent values are simply left out.

    What `WRITE_BATCH` can derive is not sent: it sets `session_id` and `turn_key` from the session's
    row and the ordinal, and `text_snippet` to the text unless the row has one (a long text's start)."""
    text = str(props.get("text") or "")
    props = {k: v for k, v in props.items() if v is not None}
    props["ordinal"] = ordinal
    snippet = text[:SNIPPET_CHARS]
    if snippet != props.get("text"):
        props["text_snippet"] = snippet
    return {"key": turn_key(session_id, ordinal), "props": props}


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def plan(fold: SessionFold, change: Change, submitted: float, *, snapshot: bool = True) -> Entry:
    """Fold `change` into `fold` and return the rows that write it. Pure apart from `fold`.

    `snapshot=False` leaves the Session snapshot out (an empty dict): for a change followed by a newer
    one of the same session in the same batch, whose snapshot is the only one written (see `batch_rows`)."""
    sid, data = change.session_id, change.data
    stamp = data.get("at")
    at = float(stamp) if isinstance(stamp, int | float) else change.at  # when it happened
    turns: list[dict[str, Any]] = []
    transitions: list[dict[str, Any]] = []
    kind = change.kind
    if kind == "session":
        at = float(data.get("created_at") or at)  # type: ignore[arg-type]
        fold.scenario = _str(data.get("scenario"))
        fold.learner_id = _str(data.get("learner_id"))
        fold.input_language = _str(data.get("input_language"))
        fold.target_language = _str(data.get("target_language"))
        fold.created_at = at
        fold.stage = str(data.get("stage") or fold.stage)
        happiness = _int(data.get("happiness"))
        fold.happiness = fold.happiness if happiness is None else happiness
        fold.complete = True
    elif kind == "scene":
        fold.remember(data.get("id"))
        fold.object_grabbed = _str(data.get("object_grabbed"))
        fold.item = _str(data.get("item"))
        fold.input_language = _str(data.get("input_language")) or fold.input_language
        fold.target_language = _str(data.get("target_language")) or fold.target_language
    elif kind == "learner_turn":
        fold.remember(data.get("id"))
        turn = int(data["turn"])  # type: ignore[call-overload]
        offer = _int(data.get("offer"))
        if "session_item" in data:
            fold.item = _str(data.get("session_item"))
        if offer is not None:
            fold.last_offer = offer
        turns.append(_turn_row(sid, 2 * turn - 1, {
            "turn_number": turn, "role": "user", "text": data.get("text"), "stage": data.get("stage"),
            "happiness_score": data.get("happiness"), "object_grabbed": data.get("object_grabbed"),
            "item": data.get("item"), "offer": offer, "quote": _int(data.get("quote")),
            "assessment": data.get("assessment") or OfferAssessment.NONE.value, "client_id": data.get("id"),
            "closing": False, "timestamp": at, "version": change.version,
        }))
    elif kind == "vendor_turn":
        turn = int(data["turn"])  # type: ignore[call-overload]
        previous = str(data.get("previous_stage") or fold.stage)
        stage = str(data.get("stage") or fold.stage)
        happiness = int(data.get("happiness", fold.happiness))  # type: ignore[call-overload]
        item = _str(data.get("item"))
        quote = _int(data.get("quote"))
        assessment = str(data.get("assessment") or OfferAssessment.NONE.value)
        fold.stage, fold.happiness, fold.turn = stage, happiness, turn
        fold.seq = int(data.get("seq", fold.seq))  # type: ignore[call-overload]
        fold.outcome = _str(data.get("outcome"))
        if item and quote is not None:
            fold.quoted(item, quote)
        if assessment == OfferAssessment.INSULT.value:
            fold.insults += 1
        ledger = data.get("ledger")
        if isinstance(ledger, dict):
            fold.ledger = fold.ledger.add(Ledger(**ledger))
        reply_seq = _int(data.get("reply_seq"))
        turns.append(_turn_row(sid, 2 * turn, {
            "turn_number": turn, "role": "vendor", "text": data.get("text"), "stage": stage,
            "previous_stage": previous, "happiness_score": happiness, "object_grabbed": fold.object_grabbed,
            "item": item, "quote": quote, "assessment": assessment, "flags": [str(f) for f in data.get("flags") or ()],  # type: ignore[attr-defined]
            "forced": bool(data.get("forced")), "seq": reply_seq, "last_seq": fold.seq, "outcome": fold.outcome,
            "closing": False, "timestamp": at, "version": change.version,
        }))
        if stage != previous:
            transitions.append({"at_turn": turn, "version": change.version, "props": {
                "from_stage": previous, "to_stage": stage, "happiness_at_transition": happiness, "timestamp": at,
            }})
    elif kind == "closing_reply":
        fold.remember(data.get("id"))
        fold.closings += 1
        fold.seq = int(data.get("seq", fold.seq))  # type: ignore[call-overload]
        base = 2 * fold.turn + 2 * fold.closings
        common = {"turn_number": fold.turn, "stage": fold.stage, "happiness_score": fold.happiness,
                  "object_grabbed": fold.object_grabbed, "item": None, "closing": True, "timestamp": at,
                  "version": change.version}
        turns.append(_turn_row(sid, base - 1, {**common, "role": "user", "text": data.get("text"),
                                               "client_id": data.get("id"),
                                               "assessment": OfferAssessment.NONE.value}))
        turns.append(_turn_row(sid, base, {**common, "role": "vendor", "text": data.get("reply"),
                                           "seq": fold.seq, "last_seq": fold.seq, "outcome": fold.outcome,
                                           "assessment": OfferAssessment.NONE.value}))
    elif kind in ("command", "unclear"):  # a `repeat` or an unclear transcript: a seq, nothing else
        fold.remember(data.get("id"))
        fold.seq = int(data.get("seq", fold.seq))  # type: ignore[call-overload]
    elif kind == "stopped":  # the `stop` command: CLOSURE, outcome stopped
        fold.remember(data.get("id"))
        fold.seq = int(data.get("seq", fold.seq))  # type: ignore[call-overload]
        previous, fold.stage, fold.outcome = fold.stage, str(data.get("stage") or "CLOSURE"), "stopped"
        transitions.append({"at_turn": fold.turn + 1, "version": change.version, "props": {
            "from_stage": previous, "to_stage": fold.stage, "happiness_at_transition": fold.happiness, "timestamp": at,
        }})
    elif kind == "ids":
        for client_id in data.get("ids") or ():  # type: ignore[attr-defined]
            fold.remember(client_id)
    else:
        log.warning("unknown change kind %r; only its version is recorded", kind, extra={"session_id": sid})
    fold.updated_at = at
    fold.version = change.version
    return Entry(change, submitted, fold.props() if snapshot else {}, turns, transitions)


def _str(value: object) -> str | None:
    return None if value is None else str(value)
