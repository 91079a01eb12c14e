"""When has the learner finished speaking: the end-of-turn policy of an open microphone (issue #34).

Pure: it is fed the voice-activity decisions of voice/vad.py (each stamped with its place in the
stream, in milliseconds) and the recogniser's partial text, and says when an utterance and when the
turn ended. It reads no clock and no audio, so a test replays any timeline exactly.

Rules (seed 002's thresholds, `SILENCE_UTTERANCE_END_MS` and `SILENCE_THINKING_MS`):
1. Speech starts a turn only after `min_speech_ms` of it: a click, a cough's edge or one noisy
   window does not.
2. 300 ms of silence after speech ends an utterance (`UtteranceEnded`): the recogniser may settle
   its text. It does not yet end the turn. Before it, `Timing.glance_ms` of silence (three of
   Silero's windows) is a glance (`Paused`, once per silence): the recogniser may read the words so
   far and the brain be asked ahead (session/speculation.py), a few hundred ms sooner than at the
   utterance's end. It counts for nothing else (rule 5 counts utterance ends only).
3. The turn ends when the silence since the last speech reaches the wait (`TurnEnded`). The wait
   is the level's (`Timing.done`): a beginner is given longer than an advanced learner. Words that
   end a sentence (a recogniser that punctuates put `.`, `?` or `!` after them, and rule 4 does
   not hold) are a finished utterance: the level's shorter `Timing.complete` wait applies instead.
4. A learner whose words so far stop on a filler ("umm", "matlab", "eto": the pack's `fillers`) or
   where no sentence ends ("I will give you ninety for the") is thinking: the wait is the level's
   thinking wait (`Timing.thinking`), longer than seed 002's 2 s thinking pause. So is one whose
   words so far only start the pack's sentences ("okay brother" of "okay brother, see you
   tomorrow"; two words or more, the whole of none: `TurnWords.only_starts`), unless a recogniser
   that punctuates closed them with a stop: a short filler heard as a pack word ("sahi um" as
   "sahi daam") or lost in the word before it leaves such a start.
5. Each time this learner came back after an utterance had ended (a pause that rule 3 did not cut),
   the wait of rule 3 grows by `Timing.resume_step_ms`, up to `resume_max_ms`: a learner who pauses
   is waited for longer, this turn and the next ones of the session (`next_turn` keeps it).
6. A slow speaker (under `slow_syllables_per_s` syllables of partial text a second of speech, over
   at least a second of it) pauses longer between sentences: rule 3's wait grows by `slow_ms`.
   Syllables, not letters: a recogniser that hears Hinglish as short English words, or spells a
   number out, changes the letters far more than the syllables (`turn_words.syllables`).
7. With no partial text at all (no streaming recogniser), rules 3 and 5 decide alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.enums import Level
from voice.scene_corpus import words as spoken_words
from voice.turn_words import TurnWords, ends_sentence, syllables, words
from voice.vad import VadFrame

__all__ = ["THINKING_MS", "UTTERANCE_END_MS", "EndOfTurn", "Paused", "Timing", "TurnEnded", "TurnEvent",
           "UtteranceEnded"]

UTTERANCE_END_MS = 300.0  # seed 002: SILENCE_UTTERANCE_END_MS, "mark speech complete"
THINKING_MS = 2000.0  # seed 002: SILENCE_THINKING_MS, "wait (user may be thinking)"


@dataclass(frozen=True, slots=True)
class Timing:
    """The waits, in milliseconds of silence after the last speech."""

    done: dict[Level, float] = field(default_factory=lambda: {
        Level.ADVANCED: 500.0, Level.INTERMEDIATE: 700.0, Level.BEGINNER: 1000.0})
    """Rule 3: the words look finished (or there are none to read)."""
    complete: dict[Level, float] = field(default_factory=lambda: {
        Level.ADVANCED: 300.0, Level.INTERMEDIATE: 400.0, Level.BEGINNER: 600.0})
    """Rule 3, words that end a sentence: the utterance's end for an advanced learner, a little over
    it for others."""
    thinking: dict[Level, float] = field(default_factory=lambda: {
        Level.ADVANCED: 2600.0, Level.INTERMEDIATE: 2900.0, Level.BEGINNER: 3400.0})
    """Rule 4: past seed 002's 2 s thinking pause, with room for a slow speaker."""
    min_speech_ms: float = 90.0
    glance_ms: float = 96.0  # rule 2: three 32 ms windows of Silero's; under UTTERANCE_END_MS
    resume_step_ms: float = 150.0
    resume_max_ms: float = 600.0
    # Rule 6: conversational English runs at 4-5 syllables a second; under 3.5 is slow speech. On
    # the turn set (docs/voice.md) espeak-ng at 110 words a minute says 2.3-5 syllables a second of
    # speech as the scene recogniser hears it (median 3.1) and leaves up to 0.7 s between its
    # sentences; at 140, 2.7-6.7 (median 4.2); at 175, 4-6.6 and under 0.4 s.
    slow_syllables_per_s: float = 3.5
    slow_ms: float = 350.0

    def __post_init__(self) -> None:
        for level in Level:
            if not UTTERANCE_END_MS <= self.complete[level] <= self.done[level] <= self.thinking[level]:
                raise ValueError(f"{level.value}: need {UTTERANCE_END_MS} <= complete <= done <= thinking")
        if not 0.0 < self.glance_ms < UTTERANCE_END_MS:
            raise ValueError(f"need 0 < glance_ms < {UTTERANCE_END_MS}")


@dataclass(frozen=True, slots=True)
class Paused:
    """Rule 2's glance: `Timing.glance_ms` of silence at `at_ms` after speech that ended at `speech_end_ms`."""

    at_ms: float
    speech_end_ms: float


@dataclass(frozen=True, slots=True)
class UtteranceEnded:
    """Rule 2: `UTTERANCE_END_MS` of silence at `at_ms` after speech that ended at `speech_end_ms`."""

    at_ms: float
    speech_end_ms: float


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """Rule 3 or 4: the turn is over at `at_ms`; its speech ran from `start_ms` to `speech_end_ms`.
    `waited_ms` is the wait that applied and `thinking` whether rule 4 set it."""

    at_ms: float
    start_ms: float
    speech_end_ms: float
    waited_ms: float
    thinking: bool


TurnEvent = Paused | UtteranceEnded | TurnEnded


class EndOfTurn:
    """The policy for one learner's microphone; feed `frame` every decision in stream order."""

    def __init__(self, turn_words: TurnWords, level: Level, timing: Timing | None = None) -> None:
        self.turn_words = turn_words
        self.level = level
        self.timing = timing or Timing()
        self.resumes = 0  # rule 5, over the session
        self._reset()

    def _reset(self) -> None:
        self._run_start: float | None = None  # the speech run not yet long enough to count (rule 1)
        self._start: float | None = None  # the turn's first speech
        self._voiced = 0.0  # ms of speech in the turn (rule 6)
        self._last_speech: float | None = None  # end of the last speech window of the turn
        self._utterance_ended = False
        self._glanced = False  # rule 2's glance at this silence was taken
        self._said: tuple[str, ...] = ()
        self._finished = False  # the text ends a sentence (rule 3)
        self._started = False  # the text only starts the pack's sentences (rule 4)
        self._over = False

    @property
    def in_turn(self) -> bool:
        """Whether the learner has started a turn that has not ended."""
        return self._start is not None and not self._over

    @property
    def turn_start_ms(self) -> float | None:
        """Where the turn's first speech began (or the run that may begin it), or None."""
        return self._start if self._start is not None else self._run_start

    def partial(self, text: str) -> None:
        """The recogniser's latest text of this turn (it replaces the earlier one)."""
        self._said = words(text)
        self._finished = ends_sentence(text)
        self._started = not self._finished and self.turn_words.only_starts(tuple(spoken_words(text)))

    def wait_ms(self) -> tuple[float, bool]:
        """The silence that ends the turn now, and whether it is a thinking wait (rule 4)."""
        said = self._said
        if said and (self.turn_words.ends_on_filler(said) or self.turn_words.ends_mid_sentence(said)
                     or self._started):
            return self.timing.thinking[self.level], True
        extra = min(self.resumes * self.timing.resume_step_ms, self.timing.resume_max_ms)
        if said and self._voiced >= 1000 and (
                syllables(said) * 1000 / self._voiced < self.timing.slow_syllables_per_s):  # rule 6
            extra += self.timing.slow_ms
        base = (self.timing.complete if said and self._finished else self.timing.done)[self.level]  # rule 3
        return min(base + extra, self.timing.thinking[self.level]), False

    def frame(self, vad: VadFrame) -> list[TurnEvent]:
        """One voice-activity decision; the events it causes (none, or one)."""
        if self._over:
            return []
        if vad.speech:
            if self._start is None:
                if self._run_start is None:
                    self._run_start = vad.start_ms
                if vad.end_ms - self._run_start >= self.timing.min_speech_ms:  # rule 1
                    self._start = self._run_start
                    self._last_speech = vad.end_ms
                    self._voiced = vad.end_ms - self._run_start
                return []
            if self._utterance_ended:  # rule 5: back after a pause
                self.resumes += 1
                self._utterance_ended = False
            self._glanced = False
            self._last_speech = vad.end_ms
            self._voiced += vad.end_ms - vad.start_ms
            return []
        self._run_start = None
        if self._start is None or self._last_speech is None:
            return []
        silence = vad.end_ms - self._last_speech
        wait, thinking = self.wait_ms()
        if silence >= wait:
            self._over = True
            return [TurnEnded(vad.end_ms, self._start, self._last_speech, wait, thinking)]
        if silence >= UTTERANCE_END_MS and not self._utterance_ended:
            self._utterance_ended = self._glanced = True
            return [UtteranceEnded(vad.end_ms, self._last_speech)]
        if silence >= self.timing.glance_ms and not self._glanced:  # rule 2's glance
            self._glanced = True
            return [Paused(vad.end_ms, self._last_speech)]
        return []

    def cut(self, at_ms: float) -> TurnEnded | None:
        """The microphone closed at `at_ms`: the turn in progress, if one is, ends there."""
        if self._start is None or self._last_speech is None or self._over:
            return None
        self._over = True
        return TurnEnded(at_ms, self._start, self._last_speech, at_ms - self._last_speech, False)

    def next_turn(self) -> None:
        """Listen for the next turn; what rule 5 learnt of this learner stays."""
        self._reset()
