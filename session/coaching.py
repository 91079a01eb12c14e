"""What a session keeps for coaching: the learner's hints, repeats, undos, silences and unclear
turns, and the checkpoints that `undo` goes back to (docs/coaching.md).

Plain data and pure functions: `Negotiation` holds one `Coaching`; the actor's parts
(`session/commands.py`, `session/silence.py`) change it, the learner report reads it, and the Neo4j
mirror stores its counters on the Session node and each checkpoint on the learner Turn it precedes,
so a rebuilt session can still be undone and its report counts what happened before the restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from schemas.brain import StageVisit
from schemas.enums import Stage
from schemas.review import Evidence

__all__ = ["MAX_UNDO", "Checkpoint", "Coaching"]

MAX_UNDO = 3  # turns a learner may take back in a row (seed 002)


class Checkpoint(NamedTuple):
    """The negotiation as it stood just before learner turn `turn`: what `undo` restores.

    History and stage changes are not copied: they only grow, so restoring drops what turn
    `turn` and later added. The quotes are copied (they are changed in place). A named tuple:
    one is made per turn, and a tuple is made in C."""

    turn: int
    stage: Stage
    happiness: int
    item: str | None
    object_grabbed: str | None
    quotes: dict[str, int]
    first_quotes: dict[str, int]
    last_offer: int | None
    insults: int

    def as_json(self) -> dict[str, Any]:
        return {"turn": self.turn, "stage": self.stage.value, "happiness": self.happiness, "item": self.item,
                "object_grabbed": self.object_grabbed, "quotes": dict(self.quotes),
                "first_quotes": dict(self.first_quotes), "last_offer": self.last_offer, "insults": self.insults}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Checkpoint:
        return cls(turn=int(data["turn"]), stage=Stage(data["stage"]), happiness=int(data["happiness"]),
                   item=data.get("item"), object_grabbed=data.get("object_grabbed"),
                   quotes={str(k): int(v) for k, v in (data.get("quotes") or {}).items()},
                   first_quotes={str(k): int(v) for k, v in (data.get("first_quotes") or {}).items()},
                   last_offer=data.get("last_offer"), insults=int(data.get("insults") or 0))


@dataclass(slots=True)
class Coaching:
    """The coaching side of one session. Counters only rise (except within a turn), so the report
    can count them; `hint_level` and `consecutive_timeouts` reset as docs/coaching.md says."""

    hint_level: int = 0  # the level the next hint gets; back to 0 with each learner turn
    hints: tuple[int, int, int] = (0, 0, 0)  # hints the learner asked for, by level 0, 1 and 2+
    hints_offered: int = 0  # level-0 hints the server gave unasked (a beginner's, after a silence)
    repeats: int = 0
    undos: int = 0
    timeouts: int = 0  # silences: timer expiries and `silence` frames
    consecutive_timeouts: int = 0  # back to 0 with any learner turn or command
    unclear: int = 0
    welcome_backs: int = 0
    checkpoints: list[Checkpoint] = field(default_factory=list)  # the last MAX_UNDO, oldest first
    # Revealed hints and unclear lines, in order: the session's review items (docs/learning.md).
    # The mirror keeps them on the Session node (`review_evidence`), so a rebuilt session has them.
    evidence: list[Evidence] = field(default_factory=list)

    def counters(self) -> dict[str, int]:
        """The counters as the mirror stores them on the Session node (`coaching_*`)."""
        return {"hint_level": self.hint_level, "hints_0": self.hints[0], "hints_1": self.hints[1],
                "hints_2": self.hints[2], "hints_offered": self.hints_offered, "repeats": self.repeats,
                "undos": self.undos, "timeouts": self.timeouts, "consecutive_timeouts": self.consecutive_timeouts,
                "unclear": self.unclear, "welcome_backs": self.welcome_backs}

    @classmethod
    def from_counters(cls, stored: dict[str, Any], checkpoints: list[Checkpoint],
                      evidence: list[Evidence] | None = None) -> Coaching:
        def n(name: str) -> int:
            return int(stored.get(name) or 0)

        return cls(hint_level=n("hint_level"), hints=(n("hints_0"), n("hints_1"), n("hints_2")),
                   hints_offered=n("hints_offered"), repeats=n("repeats"), undos=n("undos"),
                   timeouts=n("timeouts"), consecutive_timeouts=n("consecutive_timeouts"), unclear=n("unclear"),
                   welcome_backs=n("welcome_backs"), checkpoints=checkpoints[-MAX_UNDO:], evidence=evidence or [])

    def asked_hint(self) -> int:
        """Count a hint the learner asked for; returns its level (0, 1, 2, 3...)."""
        level = self.hint_level
        by_level = list(self.hints)
        by_level[min(level, 2)] += 1
        self.hints = (by_level[0], by_level[1], by_level[2])
        self.hint_level += 1
        return level

    def learner_acted(self) -> None:
        """A learner turn or command: the silence count starts again."""
        self.consecutive_timeouts = 0

    def checkpoint(self, point: Checkpoint) -> None:
        self.checkpoints.append(point)
        del self.checkpoints[:-MAX_UNDO]


def drop_from(turn: int, stage_changes: list[StageVisit]) -> list[StageVisit]:
    """The stage changes made before learner turn `turn` (what an undo of `turn` keeps)."""
    return [change for change in stage_changes if change.at_turn < turn]
