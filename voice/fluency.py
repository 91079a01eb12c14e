"""Fluency from the recogniser's word timings (issue #36): how fast, how broken up, how hesitant.

Pure: a spoken turn's words with their times in, figures out. The measures are the ones fluency
research reads off speech without judging its content:

- **words per minute**: the words said (fillers not counted) over the time from the first word's
  start to the last word's end, pauses included (speech rate);
- **pause ratio**: the share of that time spent in silent pauses, a pause being a gap between two
  words of at least `PAUSE_MS` (250 ms, the usual threshold: shorter gaps are articulation);
- **mean length of run**: words (fillers not counted) per run of speech between such pauses;
- **fillers**: filled pauses, the pack's `fillers` in any of its languages ("umm", "matlab", "eto")
  and the hesitation sounds every recogniser writes ("um", "uh", "er").

The figures are `schemas.fluency.Fluency`; a session's are its turns' summed (`Fluency.plus`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import pairwise

from schemas.fluency import Fluency
from schemas.scenario import load_scenario
from voice.stt import WordTime
from voice.turn_words import TurnWords
from voice.turn_words import words as split_words

__all__ = ["HESITATIONS", "PAUSE_MS", "measure", "pack_fillers"]

PAUSE_MS = 250  # a silent gap between words this long or longer is a pause, not articulation
HESITATIONS = frozenset({"um", "umm", "uh", "uhh", "uhm", "er", "erm", "hmm", "mm", "ah"})


@lru_cache(maxsize=64)
def pack_fillers(scenario: str, version: int) -> frozenset[tuple[str, ...]]:
    """The fillers of a pack's every language, as `measure` takes them."""
    return TurnWords.of(load_scenario(scenario, version)).fillers


def _is_filler(word: tuple[str, ...], fillers: frozenset[tuple[str, ...]]) -> bool:
    return word in fillers or (len(word) == 1 and word[0] in HESITATIONS)


def measure(timed: Sequence[WordTime], fillers: Iterable[tuple[str, ...]] = ()) -> Fluency | None:
    """The figures of one utterance, or None when it has no word (nothing to measure).

    `fillers` are word tuples as voice/turn_words.py makes them (`TurnWords.fillers`); a filler of
    several words ("you know") counts once when its words follow each other."""
    kept = sorted((w for w in timed if split_words(w.word)), key=lambda w: w.start_ms)
    if not kept:
        return None
    known = frozenset(fillers)
    longest = max((len(f) for f in known), default=1)
    said = [split_words(w.word) for w in kept]
    flat = [part for parts in said for part in parts]
    filler_words = 0
    fillers_found = 0
    i = 0
    while i < len(flat):
        for size in range(min(longest, len(flat) - i), 0, -1):
            if _is_filler(tuple(flat[i:i + size]), known):
                fillers_found += 1
                filler_words += size
                i += size
                break
        else:
            i += 1
    pause_ms = 0
    runs = 1
    for before, after in pairwise(kept):
        gap = after.start_ms - before.end_ms
        if gap >= PAUSE_MS:
            pause_ms += gap
            runs += 1
    speaking = max(w.end_ms for w in kept) - kept[0].start_ms
    return Fluency(words=len(flat) - filler_words, fillers=fillers_found, speaking_ms=max(0, speaking),
                   pause_ms=pause_ms, runs=runs)
