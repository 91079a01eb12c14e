"""Review items: what a learner struggled with, brought back until it sticks (issue #36, docs/learning.md).

A session leaves evidence (`Evidence`): a hint that revealed a whole line, a slip (an insult, a
lowball, a taboo phrase, no respectful address), a line the recogniser could not hear clearly. At
the session's end each becomes, or adds to, a `ReviewItem` of the learner, scheduled with FSRS
(server/learners/reviews.py). When the learner starts a new session at that scenario's stall, the
items that are due travel with the session as `PracticeTarget`s: the vendor brings them back, and
the learner's turns are judged against them (session/practice.py), one `Practice` per target.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.enums import LanguageCode

__all__ = ["Evidence", "ItemKind", "Practice", "PracticeTarget", "Rating", "ReviewEntry", "ReviewItem"]

# `phrase`: a line to say (a revealed hint, an unclear line), judged by its cue words.
# `respect`: a respectful form of address, judged by the pack's words for it.
# `avoid`: a behaviour to drop (an insult, a lowball, a taboo phrase), judged by its absence.
# `card`: a grounded coaching card, judged by the learner's words earning the same card again.
ItemKind = Literal["phrase", "respect", "avoid", "card"]
# FSRS's four ratings by name (fsrs.Rating 1-4); Easy is never given by the judgement.
Rating = Literal["again", "hard", "good", "easy"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Evidence(_Frozen):
    """One thing a session saw the learner need: where, and in what words."""

    source: Literal["hint", "slip", "unclear", "card"]
    key: str  # the hint's situation, the slip's name, "unclear", or the card's id
    turn: int  # the learner turn it came before (a hint) or in (a slip, an unclear line)
    text: str = ""  # the revealed line, the unclear transcript, the card's phrase
    english: str = ""


class PracticeTarget(_Frozen):
    """A due item as a session sees it: what to invite and how to judge it."""

    item_id: str
    kind: ItemKind
    key: str  # the situation or slip it came from: which of the pack's invitations fits
    phrase: str = ""  # the words to bring back (a phrase item), or a description of the behaviour
    english: str = ""
    cues: tuple[str, ...] = ()  # the words that show it: a phrase's content words, the pack's respect words,
    # for an `avoid` item the words that break it (a taboo phrase; empty for an offer slip), for a card its id


class Practice(_Frozen):
    """The judgement of one target over a session's learner turns."""

    item_id: str
    recalled: bool
    turn: int | None = None  # the learner turn that produced it (a phrase, respect)
    said: str = ""  # what the learner said there
    rating: Rating | None = None  # None: the session gave no chance to practise it (no review)


class ReviewEntry(_Frozen):
    """One review in an item's history (the FSRS review log, with the session that gave it)."""

    at: float
    session_id: str
    rating: Rating
    recalled: bool | None = None  # None: the item was made or needed again, not judged
    stability: float
    difficulty: float
    due: float


class ReviewItem(_Frozen):
    """A learner's review item with its FSRS card state and its history."""

    item_id: str
    learner_id: str
    scenario: str
    language: LanguageCode
    kind: ItemKind
    key: str
    source: Literal["hint", "slip", "unclear", "card"]
    phrase: str = ""
    english: str = ""
    cues: tuple[str, ...] = ()
    evidence: tuple[tuple[str, Evidence], ...] = ()  # (session id, evidence), the latest few
    created_at: float
    # The FSRS card (fsrs.Card): state 1 learning, 2 review, 3 relearning.
    state: int = 1
    step: int | None = 0
    stability: float | None = None
    difficulty: float | None = None
    due: float
    last_review: float | None = None
    reps: int = 0
    lapses: int = 0
    history: tuple[ReviewEntry, ...] = Field(default_factory=tuple)

    def target(self) -> PracticeTarget:
        return PracticeTarget(item_id=self.item_id, kind=self.kind, key=self.key, phrase=self.phrase,
                              english=self.english, cues=self.cues)
