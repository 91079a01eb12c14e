"""An estimated viseme timeline for speech that came without timings (an OpenAI-compatible TTS).

espeak-ng, run silently on the same sentence, gives the phonemes, their relative durations and
where it pauses. Its phonemes are laid on a speech clock that leaves its pauses out, cut into
phrases at those pauses (`PHRASE_PAUSE_MS`); the received audio is cut into voiced spans at its
own pauses (`PAUSE_MS` of quiet under `QUIET_DBFS`), and each span is stretched over the stretch
of the speech clock it said. The audio streams: a chunk goes out as soon as it is there, with its
visemes, so the estimate is causal and uses all the audio received so far:

1. A span whose end has been heard (a pause, or the end of the sentence) said the speech clock up
   to the phrase boundary nearest to where its pace would have got to (the voice may run phrases
   together where espeak-ng pauses); its phonemes are stretched exactly over it.
2. A span still open maps the speech clock at the rate `rho` (received ms per espeak ms): the
   rate of the sentence's earlier spans, else the voice's rate from earlier sentences
   (`RateMemory`), else 1. (Raising it while the voice is still going where the guess had a
   phrase over was tried: it helps a voice slower than the guess and hurts one that runs two
   phrases together, which is the commoner mistake; tests/test_visemes.py measures both.)
3. A span that ends before half of its first phrase was said continues that phrase after the
   pause (the voice paused where espeak does not).
4. What went out stays out: later knowledge changes only what is still to be sent, and a phoneme
   whose new time falls before what was sent is skipped.

Pure: fed PCM and cut by sample counts; no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

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
class Script:
    """espeak-ng's sentence on the speech clock (ms, its pauses left out): phonemes as
    (time, viseme, word ordinal or -1), and where each phrase starts; `length` is where speech ends."""

    phones: tuple[tuple[float, int, int], ...]
    boundaries: tuple[float, ...]
    length: float


def phrases_of(phones: Sequence[Phone], rate: int, total_samples: int) -> Script:
    """espeak's phonemes on the speech clock, cut into phrases at its pauses of `PHRASE_PAUSE_MS`
    (and its leading and trailing silence left off too)."""
    out: list[tuple[float, int, int]] = []
    boundaries: list[float] = []
    paused = 0.0  # espeak ms of pauses so far, left off the clock
    words = 0
    new_phrase = True
    for i, phone in enumerate(phones):
        start = phone.sample * 1000 / rate
        end = (phones[i + 1].sample if i + 1 < len(phones) else total_samples) * 1000 / rate
        if phone.viseme == Viseme.SIL and (end - start >= PHRASE_PAUSE_MS or not out or i + 1 == len(phones)):
            paused += end - start
            new_phrase = True
            continue
        clock = start - paused
        if not out:  # the clock starts at the first sound
            paused, clock = start, 0.0
        if new_phrase:
            boundaries.append(clock)
            new_phrase = False
        out.append((clock, phone.viseme, words if phone.word else -1))
        words += phone.word
    length = total_samples * 1000 / rate - paused
    return Script(tuple(out), tuple(boundaries), max(length, out[-1][0] if out else 0.0))


@dataclass
class _Span:
    onset: float  # received ms
    start: float  # speech-clock ms where it starts saying
    rho: float  # the rate guessed when it opened
    end: float | None = None  # received ms, once heard
    stop: float = math.inf  # speech-clock ms it said up to, once it ended


@dataclass
class VisemeEstimate:
    """Feed the received PCM in order (`feed`); `cut(samples)` gives the pairs of the next
    `samples` samples. `emitted` records each phoneme sent, for measuring the estimate."""

    script: Script
    rate: int
    memory: RateMemory
    _frame: int = 0
    _quiet_energy: float = 0.0
    _carry: bytes = b""
    _frames: int = 0  # frames analysed
    _quiet_since: float | None = None
    _open: bool = False
    _spans: list[_Span] = field(default_factory=list)
    _sent: int = 0  # samples already cut
    _showing: int = 0
    _last_ms: float = -1.0  # received time of the last change sent
    _next: int = 0  # the first phoneme not yet sent or skipped
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
        self._carry = data[whole:]
        if not whole:
            return
        # Each frame's energy in one vectorised pass: the sums of squares are exact in int64, as
        # they were summed in Python ints, so the frames found loud are the same.
        frames = np.frombuffer(data, dtype="<i2", count=whole // 2).reshape(-1, self._frame)
        picked = frames[:, ::ENERGY_STEP].astype(np.int64)
        for loud in (np.einsum("ij,ij->i", picked, picked) >= self._quiet_energy).tolist():
            self._on_frame(self._frames * FRAME_MS, loud)
            self._frames += 1

    def _on_frame(self, at: float, loud: bool) -> None:
        if loud:
            self._quiet_since = None
            if not self._open:
                self._open = True
                start = self._spans[-1].stop if self._spans else 0.0
                self._spans.append(_Span(at, start, self._rho()))
            return
        if not self._open:
            return
        if self._quiet_since is None:
            self._quiet_since = at
        elif at + FRAME_MS - self._quiet_since >= PAUSE_MS:
            self._close_span(self._quiet_since)

    def _close_span(self, at: float) -> None:
        """1. and 3.: where on the speech clock the span stopped, and the rate it showed."""
        span = self._spans[-1]
        span.end = at
        self._open = False
        self._quiet_since = None
        script = self.script
        reached = span.start + (at - span.onset) / span.rho
        ahead = [b for b in (*script.boundaries, script.length) if b > span.start]
        if not ahead:
            span.stop = max(span.start, min(reached, script.length))
            return
        nearest = min(ahead, key=lambda b: abs(b - reached))
        if reached - span.start < (ahead[0] - span.start) / 2:  # 3.
            span.stop = reached
            return
        span.stop = nearest
        self._rhos.append((at - span.onset) / max(1.0, nearest - span.start))

    def _rho(self) -> float:
        return self._rhos[-1] if self._rhos else self.memory.rho

    def finish(self) -> None:
        """The sentence's audio is all here: an open span ends where its quiet began (or at the end)."""
        if self._open:
            end = self._quiet_since if self._quiet_since is not None else self._frames * FRAME_MS
            self._close_span(end)
        if self._spans and self._spans[-1].stop < self.script.length:  # the last span said the rest
            last = self._spans[-1]
            last.stop = self.script.length
            if last.end is not None and last.start == 0.0:
                self._rhos[-1:] = [(last.end - last.onset) / max(1.0, last.stop)]
        if self._rhos:
            self.memory.learn(sum(self._rhos) / len(self._rhos))

    # ----------------------------------------------------------------- the timeline

    def _stretch(self, span: _Span) -> float:
        """Received ms per speech-clock ms: exact once the span ended (1.), else the guess (2.)."""
        if span.end is not None:
            said = span.stop - span.start
            return (span.end - span.onset) / said if said > 0 else span.rho
        return span.rho

    def cut(self, samples: int, *, last: bool) -> Pairs:
        start_ms = self._sent * 1000 / self.rate
        self._sent += samples
        end_ms = self._sent * 1000 / self.rate
        changes: list[tuple[float, int, int]] = []
        phones = self.script.phones
        for span in self._spans:
            if span.onset >= end_ms:
                break
            if span.end is not None and span.end < start_ms:
                continue
            rho = self._stretch(span)
            while self._next < len(phones):
                at_s, viseme, word = phones[self._next]
                if at_s < span.start:
                    self._next += 1  # 4.: its time has passed
                    continue
                if at_s >= span.stop:
                    break
                at = span.onset + (at_s - span.start) * rho
                if at >= end_ms or (span.end is not None and at >= span.end):
                    break
                self._next += 1
                if at >= start_ms and at > self._last_ms:
                    changes.append((at, viseme, word))
            if span.end is not None and start_ms <= span.end < end_ms:
                changes.append((span.end, int(Viseme.SIL), -1))
        if self._spans and self._spans[-1].end is not None and self._spans[-1].end < start_ms:
            self._showing = int(Viseme.SIL)  # a pause heard late: the mouth is closed now
        out: list[tuple[int, int]] = [(0, self._showing)]
        for at, viseme, word in changes:
            _put(out, int(at - start_ms), viseme)  # rounded down, as voice.visemes does
            self._showing, self._last_ms = viseme, at
            if viseme != Viseme.SIL:
                self.emitted.append((at, word))
        if last:
            _put(out, int(end_ms - start_ms), int(Viseme.SIL), force=True)
        return tuple(out)
