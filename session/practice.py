"""Whether the learner produced what they are practising: the recall judgement (docs/learning.md).

Pure: targets and the learner's turns in, one `Practice` per target out. No clock, no I/O. The
session machine calls it for the targets still open (what the vendor may invite next turn,
`open_targets`); the learners' service calls it when the session ends (`judge`), and the report
shows the same judgement.

The rules, numbered as docs/learning.md gives them:

1. Words are compared after normalising: Unicode NFC, lower case, Latin diacritics dropped
   (`kitné` is `kitne`; Devanagari vowel signs are kept), punctuation and spacing ignored.
2. A cue word matches a learner's word when they are equal, when their sound keys agree across
   scripts (`kitne` and `कितने` are both `ktn`, schemas/words.py, the key retrieval uses) and the key
   has two consonants or more, or when, in the same script, the word is within `typo_bound` edits
   of the cue (1 edit for 4-6 characters, 2 from 7; none for shorter words).
3. A phrase is produced in one learner turn that matches all of its cue words when it has one or
   two, and at least two thirds of them (rounded up) when it has more.
4. Respectful address is produced by any one of its cue words (the pack's respectful address).
5. An `avoid` item is broken by a turn that says one of its cue phrases (a taboo phrase: all its
   words, rule 3) or, for a lowball or an insult, by an offer the server judged so; it is kept
   by a session of `MIN_TURNS` turns or more that never broke it, and for an offer slip only
   when the learner made at least one offer the server did not call a lowball or an insult.
6. A card item is produced when the learner's words earn the same grounded card again (the
   session's `TipSource` decides, as it does for the report's cards).
7. The rating: produced (or kept) is `good`, or `hard` when a hint revealed it earlier in the same
   session; not produced in a session of `MIN_TURNS` learner turns or more (or broken) is
   `again`; a shorter session without it gives no rating: it had no fair chance, and the item
   stays due. `easy` is never given: producing a line when the vendor invites it is the expected
   recall, not an easy one.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import NamedTuple

from schemas.enums import OfferAssessment
from schemas.learner import LearnerRecall
from schemas.review import Evidence, Practice, PracticeTarget, Rating
from schemas.words import DEVANAGARI, STOP_WORDS, sound_key
from session.records import TurnRecord

__all__ = ["MIN_TURNS", "LearnerLine", "cue_words", "invitations", "judge", "learner_lines", "matches", "open_targets",
           "produced", "words"]

MIN_TURNS = 3  # learner turns that make a fair chance to practise an item
_WORD = re.compile(r"[0-9a-z]+|[\u0900-\u0963\u0966-\u097f]+")
_BAD_OFFERS = {"lowball": frozenset({OfferAssessment.LOWBALL, OfferAssessment.INSULT}),
               "insult": frozenset({OfferAssessment.INSULT, OfferAssessment.LOWBALL})}


class LearnerLine(NamedTuple):
    """A learner turn as the judgement reads it."""

    turn: int
    text: str
    assessment: OfferAssessment = OfferAssessment.NONE


def _strip_latin_marks(text: str) -> str:
    out: list[str] = []
    base = ""
    for char in unicodedata.normalize("NFD", text):
        if unicodedata.combining(char) and not DEVANAGARI.match(base):
            continue  # 1. a Latin accent; a Devanagari vowel sign stays
        if not unicodedata.combining(char):
            base = char
        out.append(char)
    return unicodedata.normalize("NFC", "".join(out))


@lru_cache(maxsize=4096)
def words(text: str) -> tuple[str, ...]:
    """The words of `text`, normalised (rule 1). Kept for the last 4,096 texts: the same pack
    phrases, item names and hints are read at every judged line and every ended session, and the
    two Unicode normalisations are most of the cost (issue #33)."""
    return tuple(_WORD.findall(_strip_latin_marks(text).lower()))


@lru_cache(maxsize=64)
def _dropped(drop: tuple[str, ...]) -> frozenset[str]:
    """The words of the phrases `cue_words` leaves out: the same pack's names every call."""
    return frozenset(w for phrase in drop for w in words(phrase))


def typo_bound(word: str) -> int:
    """Edits a same-script word may be away from a cue (rule 2)."""
    return 0 if len(word) < 4 else 1 if len(word) <= 6 else 2


def _distance(a: str, b: str, bound: int) -> int:
    """Levenshtein distance, stopped early past `bound`."""
    if abs(len(a) - len(b)) > bound:
        return bound + 1
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        previous, row[0] = row[0], i
        best = row[0]
        for j, cb in enumerate(b, 1):
            current = min(row[j] + 1, row[j - 1] + 1, previous + (ca != cb))
            previous, row[j] = row[j], current
            best = min(best, current)
        if best > bound:
            return bound + 1
    return row[-1]


def matches(cue: str, word: str) -> bool:
    """Whether a learner's word says the cue word (rule 2); both already normalised."""
    if cue == word:
        return True
    key = sound_key(cue)
    if len(key) >= 2 and key == sound_key(word):
        return True
    if bool(DEVANAGARI.search(cue)) != bool(DEVANAGARI.search(word)):
        return False
    bound = typo_bound(cue)
    return bound > 0 and _distance(cue, word, bound) <= bound


def _needed(cues: Sequence[str]) -> int:
    return len(cues) if len(cues) <= 2 else math.ceil(2 * len(cues) / 3)


def produced(cues: Sequence[str], text: str, *, any_one: bool = False) -> bool:
    """Whether one learner line says the cue words (rule 3; rule 4 with `any_one`)."""
    if not cues:
        return False
    said = words(text)
    found = sum(1 for cue in cues if any(matches(cue, word) for word in said))
    return found >= (1 if any_one else _needed(cues))


def cue_words(text: str, drop: Iterable[str] = ()) -> tuple[str, ...]:
    """A phrase's content words: its words less grammar particles, numbers and `drop` (the pack's
    item names: the item changes from session to session, the phrase does not), one per sound."""
    dropped = _dropped(tuple(drop))
    out: list[str] = []
    keys: set[str] = set()
    for word in words(text):
        if word in STOP_WORDS or word.isdigit() or word in dropped:
            continue
        key = sound_key(word) or word
        if key not in keys:
            keys.add(key)
            out.append(word)
    return tuple(out)


def _shown(target: PracticeTarget, revealed: Sequence[Evidence], turn: int) -> bool:
    """Whether a hint revealed the target in this session before learner turn `turn`."""
    return any(e.source == "hint" and e.turn <= turn and produced(target.cues, e.text) for e in revealed)


def _judge_card(target: PracticeTarget, lines: Sequence[LearnerLine], earned: Mapping[str, int]) -> Practice:
    """Rule 6."""
    turn = next((earned[c] for c in target.cues if c in earned), None)
    if turn is None:
        return Practice(item_id=target.item_id, recalled=False, rating="again" if len(lines) >= MIN_TURNS else None)
    said = next((line.text for line in lines if line.turn == turn), "")
    return Practice(item_id=target.item_id, recalled=True, turn=turn, said=said, rating="good")


def _judge_avoid(target: PracticeTarget, lines: Sequence[LearnerLine]) -> Practice:
    """Rule 5."""
    bad = _BAD_OFFERS.get(target.key)
    if bad is not None:
        broke = next((line for line in lines if line.assessment in bad), None)
        kept = any(line.assessment not in bad and line.assessment is not OfferAssessment.NONE for line in lines)
    else:  # a taboo phrase: all its words in one line
        broke = next((line for line in lines if any(produced(words(c), line.text) for c in target.cues)), None)
        kept = len(lines) >= MIN_TURNS
    if broke is not None:
        return Practice(item_id=target.item_id, recalled=False, turn=broke.turn, said=broke.text, rating="again")
    return Practice(item_id=target.item_id, recalled=kept, rating="good" if kept else None)


def _judge_one(target: PracticeTarget, lines: Sequence[LearnerLine], revealed: Sequence[Evidence],
               earned: Mapping[str, int]) -> Practice:
    if target.kind == "card":
        return _judge_card(target, lines, earned)
    if target.kind == "avoid":
        return _judge_avoid(target, lines)
    hit = next((line for line in lines if produced(target.cues, line.text, any_one=target.kind == "respect")), None)
    if hit is None:  # rules 3, 4 and 7
        return Practice(item_id=target.item_id, recalled=False, rating="again" if len(lines) >= MIN_TURNS else None)
    rating: Rating = "hard" if _shown(target, revealed, hit.turn) else "good"
    return Practice(item_id=target.item_id, recalled=True, turn=hit.turn, said=hit.text, rating=rating)


def judge(targets: Sequence[PracticeTarget], lines: Sequence[LearnerLine], revealed: Sequence[Evidence] = (),
          earned: Mapping[str, int] | None = None) -> tuple[Practice, ...]:
    """Every target's judgement over the session's learner lines (rules 1-7). `earned`: the grounded
    cards the lines earned, by card id, with the first turn that earned each."""
    return tuple(_judge_one(target, lines, revealed, earned or {}) for target in targets)


def open_targets(targets: Sequence[PracticeTarget], lines: Sequence[LearnerLine]) -> tuple[PracticeTarget, ...]:
    """The targets the vendor may still invite: phrases, respect and cards not produced yet, offer
    slips not yet kept. A taboo phrase is never invited: one practises it by not saying it. (A card is
    judged at the end, with the cards; until then it stays open.)"""
    out: list[PracticeTarget] = []
    for target in targets:
        if target.kind == "avoid" and target.key not in _BAD_OFFERS:
            continue
        if _judge_one(target, lines, (), {}).recalled:
            continue
        out.append(target)
    return tuple(out)


def learner_lines(history: Iterable[TurnRecord]) -> list[LearnerLine]:
    """The learner's turns of a session's record, as the judgement reads them."""
    return [LearnerLine(r.turn, r.text, r.assessment) for r in history if r.role == "user"]


def invitations(recall: LearnerRecall | None, history: Iterable[TurnRecord]) -> tuple[PracticeTarget, ...]:
    """What the next brain request carries for the vendor to bring back: the open targets, when
    invitations are on (REVIEWS_INVITE)."""
    if recall is None or not recall.practice or not recall.invite:
        return ()
    return open_targets(recall.practice, learner_lines(history))
