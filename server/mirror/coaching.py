"""Folding the coaching changes (docs/coaching.md) into the Session node and the graph.

The session's coaching counters (`session.coaching.Coaching.counters`) are stored on the Session
node as `coaching_*`, so a rebuilt session's report counts what happened before a restart.

- `command`: a `hint` (its level) or a `repeat`: a seq and a count.
- `unclear`: an unclear transcript: a seq and a count.
- `undo`: the state restored (scalars from the change's `restored` checkpoint); the undone turn's
  two Turn nodes are marked `undone: true` and keep their ordinals (later turns come after them,
  `SessionFold.shift`), its StageTransition likewise; `GET /api/stats` and the rebuild leave
  them out.
- `nudge`, `timed_out`: a silence; the second ends the session (CLOSURE, outcome `timed_out`).
- `stopped`: the `stop` command (CLOSURE, outcome `stopped`).
- `welcome_back`: a seq and a count.
- `playback`: the vendor Turn gets `heard_chars` and `interrupted`; an unheard quote goes back.
"""

from __future__ import annotations

import json
from typing import Any

from server.mirror.state import SessionFold, as_int, turn_key
from session.protocols import Change

__all__ = ["COACHING_KINDS", "coach"]

COACHING_KINDS = frozenset({"command", "unclear", "undo", "nudge", "timed_out", "stopped", "welcome_back",
                            "playback"})


def coach(fold: SessionFold, change: Change, at: float, turns: list[dict[str, Any]],
          transitions: list[dict[str, Any]], updates: list[dict[str, Any]], undone_at: list[int]) -> None:
    """Fold one coaching change into `fold`, adding the rows it writes. Pure apart from its arguments."""
    data, kind = change.data, change.kind
    fold.remember(data.get("id"))
    fold.seq = int(data.get("seq", fold.seq))  # type: ignore[call-overload]
    if kind == "command":
        fold.coaching["consecutive_timeouts"] = 0
        if data.get("name") == "hint":
            level = as_int(data.get("level")) or 0
            fold.count(f"hints_{min(level, 2)}")
            fold.coaching["hint_level"] = level + 1
        elif data.get("name") == "repeat":
            fold.count("repeats")
    elif kind == "unclear":
        fold.count("unclear")
    elif kind == "undo":
        _undo(fold, change, updates, undone_at)
    elif kind == "nudge":
        fold.count("timeouts")
        fold.count("consecutive_timeouts")
        if data.get("offered_hint"):
            fold.count("hints_offered")
    elif kind in ("timed_out", "stopped"):
        if kind == "timed_out":
            fold.count("timeouts")
            fold.count("consecutive_timeouts")
        previous, fold.stage = fold.stage, str(data.get("stage") or "CLOSURE")
        fold.outcome = kind
        transitions.append({"at_turn": fold.turn + fold.shift + 1, "version": change.version, "props": {
            "from_stage": previous, "to_stage": fold.stage, "happiness_at_transition": fold.happiness,
            "timestamp": at, "turn_number": fold.turn + 1,
        }})
    elif kind == "welcome_back":
        fold.count("welcome_backs")
    elif kind == "playback":
        turn = int(data.get("turn") or 0)  # type: ignore[call-overload]
        interrupted = bool(data.get("interrupted"))
        props: dict[str, Any] = {"heard_chars": as_int(data.get("heard_chars")), "interrupted": interrupted}
        item = data.get("unbound_item")
        if data.get("quote_unbound") and isinstance(item, str):
            restored = as_int(data.get("unbound_to"))
            props["quote_unbound"] = True
            props["quote"] = restored  # the quote that stands, as in memory (a null removes it)
            if restored is None:
                dropped = fold.quotes.pop(item, None)
                if fold.first_quotes.get(item) == dropped:
                    fold.first_quotes.pop(item, None)
                    fold.first_quotes_json = None
            else:
                fold.quotes[item] = restored
            fold.quotes_json = None
        updates.append({"key": turn_key(change.session_id, fold.ordinal(turn) + 1), "props": props})


def _undo(fold: SessionFold, change: Change, updates: list[dict[str, Any]], undone_at: list[int]) -> None:
    data = change.data
    turn = int(data.get("turn") or 0)  # type: ignore[call-overload]
    restored = data.get("restored")
    if not isinstance(restored, dict) or turn < 1:
        return
    ordinal = fold.ordinal(turn)
    for key in (turn_key(change.session_id, ordinal), turn_key(change.session_id, ordinal + 1)):
        updates.append({"key": key, "props": {"undone": True, "undone_at": data.get("at")}})
    undone_at.append(turn + fold.shift)
    fold.shift += 1
    fold.undo_depth = max(0, fold.undo_depth - 1)
    fold.count("undos")
    fold.coaching["hint_level"] = fold.coaching["consecutive_timeouts"] = 0
    fold.turn = turn - 1
    fold.stage = str(restored.get("stage") or fold.stage)
    fold.happiness = int(restored.get("happiness", fold.happiness))
    fold.item = restored.get("item")
    fold.object_grabbed = restored.get("object_grabbed")
    fold.quotes = {str(k): int(v) for k, v in (restored.get("quotes") or {}).items()}
    fold.first_quotes = {str(k): int(v) for k, v in (restored.get("first_quotes") or {}).items()}
    fold.quotes_json = json.dumps(fold.quotes, sort_keys=True)
    fold.first_quotes_json = json.dumps(fold.first_quotes, sort_keys=True)
    fold.last_offer = as_int(restored.get("last_offer"))
    fold.insults = int(restored.get("insults") or 0)
    fold.outcome = None
