"""An estimated viseme timeline for speech that came without timings (an OpenAI-compatible TTS).

espeak-ng, run silently on the same sentence, gives the phonemes, their relative durations and
where it pauses. Its phonemes are cut into phrases at its pauses (`PHRASE_PAUSE_MS`), the
received audio into voiced spans at its own pauses (`PAUSE_MS` of quiet under `QUIET_DBFS`), and
each phrase is stretched over its span. The audio streams: a chunk goes out as soon as it is
there, with its visemes, so the estimate is causal and uses all the audio received so far:

1. A span whose end has been heard (a pause, or the end of the sentence) gets its phrase's
   phonemes stretched exactly over it.
2. A span still open maps them at the rate `rho` (received ms per espeak ms): the rate of the
   sentence's earlier spans, else the voice's rate from earlier sentences (`RateMemory`), else 1.
3. A span that ends before half its phrase was said continues that phrase after the pause (the
   voice paused where espeak does not); otherwise the next span starts the next phrase.
4. What went out stays out: later knowledge changes only what is still to be sent, and a phoneme
   whose new time falls before what was sent is skipped.

Pure: fed PCM and cut by sample counts; no I/O, no clock.
"""

from __future__ import annotations

import math
import operator
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

from voice.visemes import Pairs, Phone, Viseme, _put

FRAME_MS = 10
QUIET_DBFS = -45.0  # a 10 ms frame under this is quiet: well above a TTS's noise floor, below any phoneme
PAUSE_MS = 110  # quiet this long is a pause: longer than a stop consonant's closure
ENERGY_STEP = 4  # a frame's loudness from every 4th sample: a quarter of the CPU, the same pauses
PHRASE_PAUSE_MS = 100  # an espeak pause this long ends a phrase (its pauses between words are shorter)
_QUIET = 32768.0 * 10 ** (QUIET_DBFS / 20)


@dataclass
class RateMemory:
    """One connection's learned ratio of the voice's pace to espeak's (shared by its sentences)."""

    rho: float = 1.0
    sentences: int = 0

    def learn(self, rho: float) -> None:
        if not math.isfinite(rho) or not 0.3 < rho < 3.0:
            return
        self.sentences += 1
        weight = max(0.25, 1.0 / self.sentences)
        self.rho += (rho - self.rho) * weight


@dataclass(frozen=True, slots=True)
class _Phrase:
    start_ms: float  # espeak time
    end_ms: float
    phones: tuple[tuple[float, int, int], ...]  # (espeak ms, viseme, word ordinal from 0 where one starts, else -1)


def phrases_of(phones: Sequence[Phone], rate: int, total_samples: int) -> tuple[_Phrase, ...]:
    """espeak's phonemes cut into phrases at its pauses of `PHRASE_PAUSE_MS` or more."""
    out: list[_Phrase] = []
    current: list[tuple[float, int, int]] = []
    words = 0
    for i, phone in enumerate(phones):
        start = phone.sample * 1000 / rate
        end = (phones[i + 1].sample if i + 1 < len(phones) else total_samples) * 1000 / rate
        if phone.viseme == Viseme.SIL and (end - start >= PHRASE_PAUSE_MS or not current):
            if current:
                out.append(_Phrase(current[0][0], start, tuple(current)))
                current = []
            continue
        current.append((start, phone.viseme, words if phone.word else -1))
        words += phone.word
    if current:
        out.append(_Phrase(current[0][0], total_samples * 1000 / rate, tuple(current)))
    return tuple(out)


@dataclass
class _Span:
    onset: float  # received ms
    phrase: int
    offset: float  # espeak ms into the phrase where this span starts
    rho: float  # the rate guessed when it opened
    end: float | None = None


@dataclass
class VisemeEstimate:
    """Feed the received PCM in order (`feed`); `cut(samples)` gives the pairs of the next
    `samples` samples. `emitted` records each phoneme sent, for measuring the estimate."""

    phrases: tuple[_Phrase, ...]
    rate: int
    memory: RateMemory
    _frame: int = 0
    _quiet_energy: float = 0.0
    _carry: bytes = b""
    _frames: int = 0  # frames analysed
    _quiet_since: float | None = None
    _loud_until: float = 0.0  # received ms: the end of the last loud frame heard
    _open: bool = False
    _spans: list[_Span] = field(default_factory=list)
    _sent: int = 0  # samples already cut
    _showing: int = 0
    _last_ms: float = -1.0  # received time of the last change sent
    _next_phone: dict[int, int] = field(default_factory=dict)  # phrase -> first phone not yet decided
    _rhos: list[float] = field(default_factory=list)
    emitted: list[tuple[float, int]] = field(default_factory=list)  # (received ms, word ordinal or -1)

    def __post_init__(self) -> None:
        self._frame = self.rate * FRAME_MS // 1000
        # the sum of squares of a frame's every ENERGY_STEP-th sample at QUIET_DBFS
        self._quiet_energy = _QUIET * _QUIET * len(range(0, self._frame, ENERGY_STEP))

    # ----------------------------------------------------------------- what the audio says

    def feed(self, pcm: bytes) -> None:
        data = self._carry + pcm
        size = 2 * self._frame
        whole = len(data) - len(data) % size
        samples = array("h", data[:whole])
        self._carry = data[whole:]
        for i in range(0, len(samples), self._frame):
            frame = samples[i:i + self._frame:ENERGY_STEP]
            loud = sum(map(operator.mul, frame, frame)) >= self._quiet_energy
            self._on_frame(self._frames * FRAME_MS, loud)
            self._frames += 1

    def _on_frame(self, at: float, loud: bool) -> None:
        if loud:
            self._quiet_since = None
            self._loud_until = at + FRAME_MS
            if not self._open:
                self._open = True
                self._start_span(at)
            return
        if not self._open:
            return
        if self._quiet_since is None:
            self._quiet_since = at
        elif at + FRAME_MS - self._quiet_since >= PAUSE_MS:
            self._close_span(self._quiet_since)

    def _start_span(self, at: float) -> None:
        if self._spans:
            last = self._spans[-1]
            phrase, offset = last.phrase + 1, 0.0
            if last.end is not None and last.phrase < len(self.phrases):
                said = (last.end - last.onset) / last.rho
                todo = self.phrases[last.phrase].end_ms - self.phrases[last.phrase].start_ms - last.offset
                if said < todo / 2:  # 3.: the voice paused inside the phrase
                    phrase, offset = last.phrase, last.offset + said
        else:
            phrase, offset = 0, 0.0
        self._spans.append(_Span(at, phrase, offset, self._rho()))

    def _close_span(self, at: float) -> None:
        span = self._spans[-1]
        span.end = at
        self._open = False
        self._quiet_since = None
        if span.phrase < len(self.phrases) and span.offset == 0.0:
            phrase = self.phrases[span.phrase]
            self._rhos.append((at - span.onset) / max(1.0, phrase.end_ms - phrase.start_ms))

    def _rho(self) -> float:
        return self._rhos[-1] if self._rhos else self.memory.rho

    def finish(self) -> None:
        """The sentence's audio is all here: an open span ends where its quiet began (or at the end)."""
        if self._open:
            end = self._quiet_since if self._quiet_since is not None else self._frames * FRAME_MS
            self._close_span(end)
        if self._rhos:
            self.memory.learn(sum(self._rhos) / len(self._rhos))

    # ----------------------------------------------------------------- the timeline

    def _stretch(self, span: _Span) -> float:
        """Received ms per espeak ms for `span`: exact once its end is known (1.), else its guess (2.),
        raised when the voice is still going where the guess had the phrase over."""
        if span.phrase >= len(self.phrases):
            return span.rho
        phrase = self.phrases[span.phrase]
        if span.end is None:
            todo = phrase.end_ms - phrase.start_ms - span.offset
            return max(span.rho, (self._loud_until - span.onset) / todo) if todo > 0 else span.rho
        nxt = self._spans.index(span) + 1
        continues = nxt < len(self._spans) and self._spans[nxt].phrase == span.phrase
        if continues:
            return span.rho
        todo = phrase.end_ms - phrase.start_ms - span.offset
        return (span.end - span.onset) / todo if todo > 0 else span.rho

    def cut(self, samples: int, *, last: bool) -> Pairs:
        start_ms = self._sent * 1000 / self.rate
        self._sent += samples
        end_ms = self._sent * 1000 / self.rate
        changes: list[tuple[float, int, int]] = []
        for span in self._spans:
            if span.onset >= end_ms:
                break
            if span.end is not None and span.end <= start_ms:
                continue
            rho = self._stretch(span)
            if span.phrase < len(self.phrases):
                phrase = self.phrases[span.phrase]
                first = self._next_phone.get(span.phrase, 0)
                for j in range(first, len(phrase.phones)):
                    at_e, viseme, word = phrase.phones[j]
                    rel = at_e - phrase.start_ms - span.offset
                    if rel < 0:
                        continue
                    at = span.onset + rel * rho
                    if span.end is not None and at >= span.end:
                        break
                    if at >= end_ms:
                        break
                    self._next_phone[span.phrase] = j + 1
                    if at >= start_ms and at > self._last_ms:
                        changes.append((at, viseme, word))
            if span.end is not None and start_ms <= span.end < end_ms:
                changes.append((span.end, int(Viseme.SIL), False))
        out: list[tuple[int, int]] = [(0, self._showing)]
        for at, viseme, word in changes:
            _put(out, int(at - start_ms), viseme)  # rounded down, as voice.visemes does
            self._showing, self._last_ms = viseme, at
            if viseme != Viseme.SIL:
                self.emitted.append((at, word))
        if last:
            _put(out, int(end_ms - start_ms), int(Viseme.SIL), force=True)
        return tuple(out)
