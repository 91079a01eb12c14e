"""A session's running state as the mirror folds its changes (`SessionFold`), and the rows one change
adds (`Entry`). `server/mirror/fold.py` folds the negotiation's changes, `server/mirror/coaching.py`
the coaching ones (hints, undo, silence, barge-in, welcome back).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from schemas.enums import Stage
from schemas.frames import LedgerTotals
from session.negotiation import REMEMBERED_IDS, SNIPPET_CHARS
from session.protocols import Change


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
    level: str | None = None
    shift: int = 0  # learner turns undone so far: each moves the later turns' ordinals on by one turn
    undo_depth: int = 0  # checkpoints the actor holds: the learner turns `undo` can still take back
    coaching: dict[str, int] = field(default_factory=dict)  # `Coaching.counters()`, as far as changes say
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
            "level": self.level, "undone_turns": self.shift, "undo_depth": self.undo_depth,
            **{f"ledger_{name}": value for name, value in self.ledger.model_dump().items()},
            **{f"coaching_{name}": value for name, value in self.coaching.items()},
        }
        if not self.complete:
            # Never overwrite what the graph knows with defaults this process made up.
            for name in ("scenario", "learner_id", "input_language", "target_language", "created_at", "level"):
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
            quotes=json_dict(s.get("quotes")), first_quotes=json_dict(s.get("first_quotes")),
            last_offer=s.get("last_offer"), outcome=s.get("outcome"), insults=int(s.get("insults", 0)),
            accepted_ids=OrderedDict.fromkeys(s.get("accepted_ids") or ()),
            closings=int(s.get("closing_replies", 0)), version=int(s.get("version", 0)),
            ledger=LedgerTotals(**{name: s[f"ledger_{name}"] for name in LedgerTotals.model_fields
                                   if s.get(f"ledger_{name}") is not None}),
            quotes_json=s.get("quotes") or "{}", first_quotes_json=s.get("first_quotes") or "{}",
            level=s.get("level"), shift=int(s.get("undone_turns") or 0), undo_depth=int(s.get("undo_depth") or 0),
            coaching={key[len("coaching_"):]: int(value) for key, value in s.items()
                      if key.startswith("coaching_") and value is not None},
        )

    def count(self, name: str, by: int = 1) -> None:
        self.coaching[name] = self.coaching.get(name, 0) + by

    def ordinal(self, turn: int) -> int:
        """The learner line of `turn`'s ordinal (its vendor line's is one more): turns taken back
        keep theirs, so a turn played again after an undo comes after them."""
        return 2 * (turn + self.shift) - 1


def json_dict(raw: object) -> dict[str, int]:
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
    updates: list[dict[str, Any]] = field(default_factory=list)  # {"key", "props"}: SET on a written Turn
    undone_at: list[int] = field(default_factory=list)  # StageTransition `at_turn`s that an undo took back

    @property
    def turn_count(self) -> int:
        return len(self.turns)


def turn_row(session_id: str, ordinal: int, props: dict[str, Any]) -> dict[str, Any]:
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


def as_int(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def as_str(value: object) -> str | None:
    return None if value is None else str(value)
