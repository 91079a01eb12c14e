"""An estimate of the learner's level from one session (issue #36): a CEFR-like band for the
negotiation's can-dos (greet, ask, offer, counter, close), with its evidence and a confidence.

Pure: the session's record and its pack in, an estimate out. Each kind of evidence places the
learner on the bands' scale (A1 0 ... C1 4) by the thresholds below; the estimate is the mean of
the places, rounded. These are teaching heuristics in the spirit of the CEFR's interaction scales,
not a validated test (docs/learning.md says what they can and cannot tell):

- longer lines are a later band (a word or two is A1, a sentence of ten words C1);
- more of the learner's words in the language they are learning;
- fewer hints, and cheaper ones (a situation hint costs less than a whole line revealed);
- fewer repairs (a line too unclear to take, a repeat asked for, a turn taken back);
- a faster speech rate, when they spoke.

Confidence is how many lines it rests on (`turns / (turns + 4)`: 4 lines give 0.5) times how well
the kinds of evidence agree (1 less half their places' standard deviation). The profile moves the
confirmed level only on confident estimates, two sessions in a row (server/learners/profile.py).
"""

from __future__ import annotations

import re
import statistics
from functools import lru_cache

from schemas.enums import LanguageCode, Level
from schemas.report import Band, LevelEstimate, LevelEvidence
from schemas.scenario import load_scenario
from session.negotiation import Negotiation

__all__ = ["BANDS", "estimate", "places", "target_vocabulary"]

BANDS: tuple[Band, ...] = ("A1", "A2", "B1", "B2", "C1")
_LEVEL = {"A1": Level.BEGINNER, "A2": Level.BEGINNER, "B1": Level.INTERMEDIATE, "B2": Level.ADVANCED,
          "C1": Level.ADVANCED}
_WORD = re.compile(r"[0-9a-z]+|[\u0900-\u097f]+")
_DEVANAGARI = re.compile(r"[\u0900-\u097f]")
_ENGLISH = (LanguageCode.EN_IN, LanguageCode.EN)

# Upper bounds of each place below C1 (4): under the first is A1 (0), under the second A2 (1), ...
MEAN_WORDS = (2.5, 4.0, 6.0, 9.0)
TARGET_SHARE = (0.2, 0.4, 0.6, 0.8)
WORDS_PER_MINUTE = (60.0, 90.0, 120.0, 150.0)
# Hints and repairs fall as the band rises: at or over the first is A1, ..., none at all is C1.
HINTS_PER_TURN = (1.0, 0.5, 0.25)
REPAIRS_PER_TURN = (0.5, 0.3, 0.15)
HINT_WEIGHTS = (0.5, 1.0, 2.0)  # by hint level: the situation, a sentence frame, the whole line
OFFERED_WEIGHT = 0.5


def _rising(value: float, bounds: tuple[float, ...]) -> int:
    return next((place for place, bound in enumerate(bounds) if value < bound), len(bounds))


def _falling(value: float, bounds: tuple[float, ...]) -> int:
    if value <= 0:
        return len(bounds) + 1
    return next((place for place, bound in enumerate(bounds) if value >= bound), len(bounds))


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@lru_cache(maxsize=32)
def target_vocabulary(scenario: str, version: int) -> dict[LanguageCode, frozenset[str]]:
    """The pack's words by language: its place's language (the phrases, the reveal lines and the
    sentence frames, the items' local names, that language's fillers and backchannels) and English
    (the vendor's English lines, the phrases' meanings, the coaching's English). A word in both (a
    name, a number, "bhaiya" in an English line) is in neither: it says nothing of the language a
    learner is using."""
    pack = load_scenario(scenario, version)
    local_language = next((lang for lang in pack.vendor.languages if lang not in _ENGLISH), None)
    local: set[str] = set()
    english: set[str] = set()

    def add(bag: set[str], *texts: str) -> None:
        for text in texts:
            bag.update(_words(text))

    add(local, *(ph.text for ph in pack.phrases), *pack.hints.values(), *(h.frame for h in pack.coaching.values()),
        *(item.local for item in pack.items))
    add(english, *(ph.meaning for ph in pack.phrases),
        *(t for h in pack.coaching.values() for t in (h.context, h.frame_english, h.english)),
        *(item.name for item in pack.items), *(item.spoken for item in pack.items))
    for language, pools in pack.lines.items():
        if language in _ENGLISH:
            add(english, *(line for lines in pools.values() for line in lines))
    for table in (pack.fillers, pack.backchannels):
        for language, said in table.items():
            add(english if language in _ENGLISH else local, *said)
    shared = local & english
    found = {lang: frozenset(english - shared) for lang in _ENGLISH}
    if local_language is not None:
        found[local_language] = frozenset(local - shared)
        if local_language is LanguageCode.HI_EN:
            found[LanguageCode.HI_IN] = found[local_language]
    return found


LINES_REMEMBERED = 4096  # learner lines whose word counts are kept: the same short lines come back


@lru_cache(maxsize=32)
def _any_language(scenario: str, version: int) -> frozenset[str]:
    """Every word the pack knows in some language: `target_vocabulary`'s sets as one."""
    return frozenset().union(*target_vocabulary(scenario, version).values())


@lru_cache(maxsize=LINES_REMEMBERED)
def _line_words(line: str, target: LanguageCode, scenario: str, version: int) -> tuple[int, int, int]:
    """A learner line's words: how many, how many the pack knows in any language, and how many of
    those it knows as the target language's (Devanagari counts as Hindi). Kept per line: a pure
    function of the line and the pack, and learners say the same short lines again and again."""
    ours = target_vocabulary(scenario, version).get(target, frozenset())
    everything = _any_language(scenario, version)
    hindi = target in (LanguageCode.HI_IN, LanguageCode.HI_EN)
    words = _words(line)
    known = target_words = 0
    for word in words:
        if _DEVANAGARI.match(word):
            known += 1
            target_words += hindi
        elif word in ours:
            known += 1
            target_words += 1
        elif word in everything:
            known += 1
    return len(words), known, target_words


def places(evidence: LevelEvidence) -> list[int]:
    """Where each kind of evidence places the learner, 0 (A1) to 4 (C1), for the kinds measured."""
    found = [_rising(evidence.mean_words, MEAN_WORDS), _falling(evidence.hints_per_turn, HINTS_PER_TURN),
             _falling(evidence.repairs_per_turn, REPAIRS_PER_TURN)]
    if evidence.target_share is not None:
        found.append(_rising(evidence.target_share, TARGET_SHARE))
    if evidence.words_per_minute is not None:
        found.append(_rising(evidence.words_per_minute, WORDS_PER_MINUTE))
    return found


@lru_cache(maxsize=4096)
def _spread(found: tuple[int, ...]) -> float:
    """`statistics.pstdev` of the places, kept: it works in exact fractions (about 20 us a call),
    and the places are at most five small ints, so a few hundred tuples are all there are."""
    return statistics.pstdev(found) if len(found) > 1 else 0.0


def from_evidence(evidence: LevelEvidence) -> LevelEstimate:
    found = places(evidence)
    place = min(4, max(0, round(statistics.fmean(found) + 1e-9)))
    spread = _spread(tuple(found))
    coverage = evidence.learner_turns / (evidence.learner_turns + 4)
    confidence = round(coverage * max(0.0, 1.0 - spread / 2), 2)
    band = BANDS[place]
    return LevelEstimate(band=band, level=_LEVEL[band], confidence=confidence, evidence=evidence)


def estimate(negotiation: Negotiation) -> LevelEstimate | None:
    """The estimate of a session's learner, or None when they said nothing."""
    lines = [r.text for r in negotiation.history if r.role == "user"]
    if not lines:
        return None
    n = len(lines)
    coaching = negotiation.coaching
    hints = (sum(w * k for w, k in zip(HINT_WEIGHTS, coaching.hints, strict=True))
             + OFFERED_WEIGHT * coaching.hints_offered)
    repairs = coaching.unclear + coaching.repeats + coaching.undos
    spoken = negotiation.fluency
    counts = [_line_words(line, negotiation.target_language, negotiation.scenario_name, negotiation.scenario_version)
              for line in lines]
    known = sum(c[1] for c in counts)
    evidence = LevelEvidence(
        learner_turns=n, mean_words=round(sum(c[0] for c in counts) / n, 2),
        # The share of the learner's words the pack knows as the target language's, among those it
        # knows in any language; None when it knows none of them.
        target_share=round(sum(c[2] for c in counts) / known, 3) if known else None,
        hints_per_turn=round(hints / n, 3), repairs_per_turn=round(repairs / n, 3),
        words_per_minute=spoken.words_per_minute if spoken is not None else None)
    return from_evidence(evidence)
