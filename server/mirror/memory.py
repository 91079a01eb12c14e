"""The running summary on the Session node (docs/memory.md): its Cypher, its rows, and its rebuild.

The actor records a `summary` change whenever the summary changes: a refresh every 10 turns, or an
undo that takes it back (session/memory.py). The fold lets the change through like any other (its
version counts as written), and the batch's transaction runs `WRITE_SUMMARIES` after `WRITE_BATCH`,
with one row per session: its newest summary in the batch. The write is guarded by the change's
version (`summary_version`), so a batch written twice, or out of order, leaves the newest summary.
The Session node keeps:

- `summary`, `summary_turn`: the summary and the last learner turn it covers;
- `summary_previous`, `summary_previous_turn`: the one before it, which an undo below
  `summary_turn` goes back to;
- `summary_version`: the change that wrote them.

`LOAD_SESSIONS` returns every Session property, so a rebuilt session gets its summary back
(`memory_from_graph`); a summary that covers a turn the session no longer has is left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, LiteralString

from server.mirror.state import Entry
from session.changes import SummaryWritten
from session.summary import Memory

__all__ = ["WRITE_SUMMARIES", "memory_from_graph", "summary_rows"]

WRITE_SUMMARIES: LiteralString = """
UNWIND $rows AS r
MATCH (s:Session {session_id: r.session_id})
WITH s, r WHERE coalesce(s.summary_version, 0) < r.version
SET s.summary = r.text, s.summary_turn = r.turn, s.summary_previous = r.previous,
    s.summary_previous_turn = r.previous_turn, s.summary_version = r.version
"""


def summary_rows(batch: Iterable[Entry]) -> list[dict[str, Any]]:
    """`WRITE_SUMMARIES`' rows: the newest `summary` change of each session in the batch."""
    newest: dict[str, dict[str, Any]] = {}
    for entry in batch:
        change = entry.change
        if isinstance(change, SummaryWritten):
            newest[change.session_id] = {
                "session_id": change.session_id, "version": change.version, "text": change.text,
                "turn": change.turn, "previous": change.previous, "previous_turn": change.previous_turn,
            }
    return list(newest.values())


def memory_from_graph(session: dict[str, Any], turn: int) -> Memory:
    """The running summary of a session rebuilt at answered turn `turn`, from its Session node."""
    summary, covers = str(session.get("summary") or ""), int(session.get("summary_turn") or 0)
    previous = str(session.get("summary_previous") or "")
    previous_covers = int(session.get("summary_previous_turn") or 0)
    if previous_covers > turn:
        previous, previous_covers = "", 0
    if covers > turn:
        summary, covers, previous, previous_covers = previous, previous_covers, "", 0
    return Memory(summary=summary if covers else "", covers=covers, previous=previous if previous_covers else "",
                  previous_covers=previous_covers)
