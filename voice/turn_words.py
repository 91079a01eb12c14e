"""The words that say how a learner's speech goes on: fillers and backchannels from the pack
(`Scenario.fillers`, `Scenario.backchannels`), and the grammar words after which a sentence
cannot have ended (issue #34; voice/turn_end.py and voice/barge_in.py read them).

Learners mix languages ("haan, I will give umm ... sau rupaye"), so a pack's words count in every
language it speaks, and the continuation words of every language do too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from schemas.scenario import Scenario
from voice.continuations import CONTINUATIONS
from voice.scene_corpus import sentence_shapes

__all__ = ["CONTINUATIONS", "TurnWords", "ends_sentence", "syllables", "words"]

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_VOWELS = re.compile(r"[aeiouy]+")
_SENTENCE_END = re.compile(r"[.!?\u0964](?<!\.\.\.)[\"')\]]*\s*$")  # a stop, not an ellipsis's trailing off


def words(text: str) -> tuple[str, ...]:
    """A partial transcript as the lists compare it: lower case, letters and digits, punctuation
    gone ("Haan-ji, 90!" -> haan ji 90)."""
    return tuple(_WORD.findall(text.lower()))


def syllables(said: tuple[str, ...]) -> int:
    """About how many syllables the words have: their groups of vowel letters, one at least a
    word, and a number written in digits one more than its digits ("90": 3, "1500": 5). Rough for
    English spelling ("please" counts two), but the same for every learner, and it reads romanised
    Hindi ("bahut mehenga hai": 6) as well as English."""
    return sum(len(word) + 1 if word.isdigit() else max(1, len(_VOWELS.findall(word))) for word in said)


def ends_sentence(text: str) -> bool:
    """Whether a recogniser that punctuates put a sentence's end after the words ("How much is
    this?"); "I was thinking..." trails off and does not end one."""
    return bool(_SENTENCE_END.search(text))


@dataclass(frozen=True, slots=True)
class TurnWords:
    """Fillers and backchannels as word tuples, and the continuation words."""

    fillers: frozenset[tuple[str, ...]]
    backchannels: frozenset[tuple[str, ...]]
    continuations: frozenset[str] = CONTINUATIONS
    starts: frozenset[tuple[str, ...]] = frozenset()
    """What only starts the pack's sentences, spelt as its language model spells them
    (`scene_corpus.SentenceShapes.starts`)."""
    endings: frozenset[tuple[str, ...]] = frozenset()
    """The pack's sentences' last words where they end on a continuation word
    (`scene_corpus.SentenceShapes.endings`): "kar do" ends a sentence though "do" is a continuation."""

    @classmethod
    def of(cls, scenario: Scenario) -> TurnWords:
        """Every language of the pack together (learners mix them)."""
        shapes = sentence_shapes(scenario)
        return cls(frozenset(words(w) for found in scenario.fillers.values() for w in found),
                   frozenset(words(w) for found in scenario.backchannels.values() for w in found),
                   starts=shapes.starts, endings=shapes.endings)

    def ends_on_filler(self, said: tuple[str, ...]) -> bool:
        """Whether the words so far end on a filler ("I will give umm")."""
        return any(said[-len(f):] == f for f in self.fillers if 0 < len(f) <= len(said))

    def ends_mid_sentence(self, said: tuple[str, ...]) -> bool:
        """Whether the words so far stop where no sentence ends ("I will give you ninety for the"):
        on a continuation word, unless the pack has a sentence that ends on the same last words, two
        at least ("kam kar do", "de do" of "nabbe mein de do"; not "can you do")."""
        if not said or said[-1] not in self.continuations:
            return False
        return not any(said[-n:] == ending[-n:] for ending in self.endings
                       if (n := min(len(ending), len(said))) >= 2)

    def only_starts(self, spoken: tuple[str, ...]) -> bool:
        """Whether the words so far (spelt as `scene_corpus.words` spells them: numbers in words)
        are the first part of some of the pack's sentences and the whole of none ("okay brother")."""
        return spoken in self.starts

    def only_backchannels(self, said: tuple[str, ...], *, unfinished: bool = False) -> bool:
        """Whether the words are nothing but backchannels ("haan haan", "accha ji", "okay"), covered
        from the left by entries (a shortest cover, so "haan haan ji" is "haan haan" + "ji").
        `unfinished`: partial text, whose last words may be the start of an entry ("i" of "i see",
        "arre" of "arre haan")."""
        entries = self.backchannels
        starts = {b[:n] for b in entries for n in range(1, len(b))} if unfinished else set()
        covered = [True] + [False] * len(said)  # covered[i]: said[:i] is a cover
        for end in range(1, len(said) + 1):
            covered[end] = any(covered[at] and said[at:end] in entries for at in range(end))
        return bool(said) and (covered[-1] or any(covered[at] and said[at:] in starts for at in range(len(said))))
