"""Whether the learner's voice while the vendor speaks stops him: barge-in that knows
backchannels (issue #34).

A listener says "haan", "accha", "hmm", "ji" to show he follows; stopping the vendor for that
would make him stutter through every sentence. Pure like voice/turn_end.py: fed voice-activity
decisions stamped with their place in the stream and the recogniser's partial text, no clock.

Rules, for one run of learner speech while the vendor speaks (runs closer than `gap_ms` are one):
1. Under `min_speech_ms` it is nothing (a click, a breath).
2. With a streaming recogniser (`streaming`): partial text with a word that is not a backchannel
   (the pack's `backchannels`, or the start of one: "arre" of "arre haan") is an interruption
   ("ruko", "wait, that is too much"). Text of
   backchannels only, or none yet, is waited on up to `hard_ms` ("haan haan, accha ji" at a
   beginner's pace lasts a second): past that the run is an interruption whatever it says.
3. Without one, the run's length alone decides: past `backchannel_ms` it is an interruption. A
   slow "accha accha" then stops the vendor and a quick "too expensive!" may not; the figures in
   docs/voice.md say how often.
4. A run that ends (a `gap_ms` silence) without rule 2 or 3 was a backchannel: the vendor goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from voice.turn_words import TurnWords, words
from voice.vad import VadFrame

__all__ = ["BargeIn", "BargeTiming", "Verdict", "VerdictKind"]


class VerdictKind(str, Enum):
    INTERRUPT = "interrupt"  # stop the vendor (the speaker's barge-in)
    BACKCHANNEL = "backchannel"  # he goes on


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a run of learner speech was, decided at `at_ms`; the run began at `start_ms`."""

    kind: VerdictKind
    at_ms: float
    start_ms: float


@dataclass(frozen=True, slots=True)
class BargeTiming:
    min_speech_ms: float = 120.0
    backchannel_ms: float = 900.0  # rule 3: most of the set's backchannels, at 110-175 words a minute
    hard_ms: float = 1500.0  # rule 2: the set's slowest backchannel ("accha accha", 110 wpm) is 1.15 s
    gap_ms: float = 250.0

    def __post_init__(self) -> None:
        if not 0 < self.min_speech_ms <= self.backchannel_ms <= self.hard_ms:
            raise ValueError("need 0 < min_speech_ms <= backchannel_ms <= hard_ms")


class BargeIn:
    """The decision for one learner's microphone while the vendor speaks."""

    def __init__(self, turn_words: TurnWords, timing: BargeTiming | None = None, *, streaming: bool = True) -> None:
        self.turn_words = turn_words
        self.timing = timing or BargeTiming()
        self.streaming = streaming
        self._start: float | None = None
        self._last: float = 0.0
        self._said: tuple[str, ...] = ()
        self._decided = False

    @property
    def in_run(self) -> bool:
        """A run of learner speech is under way (decided or not)."""
        return self._start is not None

    def partial(self, text: str, at_ms: float) -> Verdict | None:
        """The recogniser's latest text of the current run; rule 2 may decide on it."""
        self._said = words(text)
        return self._decide(at_ms)

    def frame(self, vad: VadFrame) -> Verdict | None:
        """One voice-activity decision; a verdict once per run (rules 2-4), else None."""
        if vad.speech:
            if self._start is None or vad.start_ms - self._last > self.timing.gap_ms:
                self._start, self._said, self._decided = vad.start_ms, (), False
            self._last = vad.end_ms
            return self._decide(vad.end_ms)
        if self._start is not None and vad.end_ms - self._last >= self.timing.gap_ms:
            start, decided = self._start, self._decided
            self._start, self._said, self._decided = None, (), False
            if not decided and self._last - start >= self.timing.min_speech_ms:  # rule 4
                return Verdict(VerdictKind.BACKCHANNEL, vad.end_ms, start)
        return None

    def _decide(self, at_ms: float) -> Verdict | None:
        if self._start is None or self._decided:
            return None
        length = self._last - self._start
        if length < self.timing.min_speech_ms:  # rule 1
            return None
        if self.streaming:  # rule 2
            said = self._said
            talking = bool(said) and not self.turn_words.only_backchannels(said, unfinished=True)
            stop = talking or length >= self.timing.hard_ms
        else:  # rule 3
            stop = length >= self.timing.backchannel_ms
        if stop:
            self._decided = True
            return Verdict(VerdictKind.INTERRUPT, at_ms, self._start)
        return None

    def reset(self) -> None:
        """The vendor stopped or began a new line: forget the run under way."""
        self._start, self._said, self._decided = None, (), False
