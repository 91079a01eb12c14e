"""A session as the mirror folds its changes (`SessionFold`), and the rows one change adds (`Entry`).
`server/mirror/fold.py` turns each kind of change into its rows; the state itself changes only
through `session.fold.apply`, the live session's own rules.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from schemas.fluency import Fluency
from session.changes import Change
from session.core import SNIPPET_CHARS
from session.negotiation import Negotiation


def turn_key(session_id: str, ordinal: int) -> str:
    """Unambiguous even if the session id holds ':' (the ordinal after the last ':' is all digits)."""
    return f"{session_id}:{ordinal}"


@dataclass(slots=True)
class SessionFold:
    """A session as the mirror folds its changes: the session's own state, applied change by change
    with the live session's `session.fold.apply` (so every rule of the state is the live one), and
    the graph's bookkeeping, which the live session has no need of. Each change's rows carry a
    complete Session snapshot from it (a version-guarded write of a partial one could lose fields).

    `state` is None for a session this process never saw start nor rebuilt: its changes are then
    counted as written and change nothing (the writer logs it)."""

    state: Negotiation | None = None
    shift: int = 0  # learner turns undone so far: each moves the later transitions' keys on by one
    closings: int = 0  # answers after the end
    version: int = 0
    last_ordinal: int = 0  # the newest Turn node's ordinal: the next line goes after it
    ordinals: dict[int, int] = field(default_factory=dict)  # each standing learner turn's line, by turn
    transition_keys: dict[int, int] = field(default_factory=dict)  # its StageTransition's `at_turn`, by turn

    def props(self) -> dict[str, Any]:
        """The Session node's properties, from the folded state."""
        n = self.state
        assert n is not None
        item = n.item
        return {
            "scenario": n.scenario_name, "scenario_version": n.scenario_version,
            "learner_id": n.learner_id, "input_language": n.input_language.value,
            "target_language": n.target_language.value, "created_at": n.created_at, "updated_at": n.updated_at,
            "negotiation_state": n.stage.value, "happiness_score": n.happiness, "turn_count": n.turn,
            "last_seq": n.seq, "item": item, "object_grabbed": n.object_grabbed,
            "quotes": json.dumps(n.quotes, sort_keys=True), "first_quotes": json.dumps(n.first_quotes, sort_keys=True),
            "vendor_quote": n.quotes.get(item) if item else None,
            "first_quote": n.first_quotes.get(item) if item else None,
            "last_offer": n.last_offer, "outcome": n.outcome.value if n.outcome else None, "insults": n.insults,
            "accepted_ids": list(n.accepted_ids), "closing_replies": self.closings,
            "level": n.level.value, "undone_turns": self.shift, "undo_depth": len(n.coaching.checkpoints),
            "recall": n.recall.model_dump_json() if n.recall is not None else None,
            **fluency_props(n.fluency),
            # revealed hints and unclear lines, the session's review evidence (docs/learning.md)
            "review_evidence": json.dumps([e.model_dump() for e in n.coaching.evidence])
            if n.coaching.evidence else None,
            **{f"ledger_{name}": value for name, value in n.ledger.model_dump().items()},
            **{f"coaching_{name}": value for name, value in n.coaching.counters().items()},
        }

    def next_line(self) -> int:
        """The ordinal of a new Turn node: after every one written, those taken back included (they keep
        theirs, so a turn played again after an undo comes after them), with no gap, so that
        FOLLOWED_BY links each line to the one before it."""
        self.last_ordinal += 1
        return self.last_ordinal


_FLUENCY_SUMS = ("turns", "words", "fillers", "speaking_ms", "pause_ms", "runs")
_FLUENCY_RATIOS = ("words_per_minute", "pause_ratio", "mean_length_of_run")


def fluency_props(fluency: Fluency | None) -> dict[str, Any]:
    """A session's fluency as Session properties (`fluency_*`): the sums it is rebuilt from, and the
    figures the learner's progress reads (server/learners/cypher.py), all null before it spoke."""
    figures = fluency.model_dump() if fluency is not None else {}
    return {f"fluency_{name}": figures.get(name) for name in (*_FLUENCY_SUMS, *_FLUENCY_RATIOS)}


def fluency_from_props(stored: dict[str, Any]) -> Fluency | None:
    if stored.get("fluency_turns") is None:
        return None
    return Fluency.model_validate({name: stored[f"fluency_{name}"] for name in _FLUENCY_SUMS})


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
