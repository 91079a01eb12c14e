"""Each sentence the `Speaker` speaks, with its visemes: which method makes them, per backend.

A `LipSync` is made per connection (it may learn the voice's pace) and opens a `Voicing` per
sentence: its `audio()` is the sentence's PCM, and `cut(samples)` the visemes of the next
`samples` samples, asked just before those samples go out, so a chunk never leaves before its
timeline. `source` names the method, and is the wire's `visemes_source`:

- `espeak`: espeak-ng's own phoneme events from the pass that made the audio (exact);
- `estimate`: for a TTS without timings, espeak-ng run silently on the same text, stretched over
  the received audio's voiced spans (voice/estimate.py);
- `align`: English audio that is all there before its first chunk goes (`TTS_BY_SENTENCE=false`),
  its words placed by pocketsphinx (voice/align.py), else the estimate;
- `""` with no pairs: the connection asked for none (`?visemes=0`) or the estimate failed.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Protocol

import anyio

from voice.align import Aligner, aligned_phones
from voice.errors import SpeechServiceError
from voice.espeak_lib import Synthesis, Timings
from voice.estimate import RateMemory, VisemeEstimate, phrases_of
from voice.tts import EspeakTts, TextToSpeech, espeak_voice
from voice.visemes import Pairs, Phone, cut_phones

log = logging.getLogger("samvad.voice")


class Voicing(Protocol):
    source: str

    def audio(self) -> AsyncIterator[bytes]: ...

    async def prepare(self) -> None: ...

    async def cut(self, samples: int, *, last: bool) -> Pairs: ...


class LipSync(Protocol):
    def voicing(self, text: str, language: str | None, *, in_hand_s: float = 0.0) -> Voicing:
        """A sentence to speak; `in_hand_s` goes to the TTS (`TextToSpeech.synthesize`)."""
        ...


class _Plain:
    """Audio only."""

    source = ""

    def __init__(self, tts: TextToSpeech, text: str, language: str | None, in_hand_s: float) -> None:
        self._audio = tts.synthesize(text, language, in_hand_s=in_hand_s)

    def audio(self) -> AsyncIterator[bytes]:
        return self._audio

    async def prepare(self) -> None:
        return None

    async def cut(self, samples: int, *, last: bool) -> Pairs:
        return ()


class NoVisemes:
    """The lip sync of a connection that wants none: no analysis, no pairs."""

    def __init__(self, tts: TextToSpeech) -> None:
        self.tts = tts

    def voicing(self, text: str, language: str | None, *, in_hand_s: float = 0.0) -> Voicing:
        return _Plain(self.tts, text, language, in_hand_s)


class _Exact:
    source = "espeak"

    def __init__(self, tts: EspeakTts, text: str, language: str | None) -> None:
        self._tts, self._text, self._language = tts, text, language
        self._done: Synthesis | None = None
        self._sent = 0

    async def audio(self) -> AsyncIterator[bytes]:
        self._done = await self._tts.speak(self._text, self._language)
        yield self._done.pcm

    async def prepare(self) -> None:
        return None

    async def cut(self, samples: int, *, last: bool) -> Pairs:
        done = self._done
        if done is None:
            return ()
        start, self._sent = self._sent, self._sent + samples
        return cut_phones(done.phones, start, self._sent, done.rate, last=last)


class EspeakVisemes:
    """espeak-ng speaks, and its own phoneme events time the visemes."""

    def __init__(self, tts: EspeakTts) -> None:
        self.tts = tts

    def voicing(self, text: str, language: str | None, *, in_hand_s: float = 0.0) -> Voicing:
        return _Exact(self.tts, text, language)  # espeak-ng speaks a sentence in one piece


class _Estimated:
    source = "estimate"

    def __init__(self, owner: EstimatedVisemes, text: str, language: str | None, in_hand_s: float = 0.0) -> None:
        self._owner, self._text, self._language, self._in_hand_s = owner, text, language, in_hand_s
        self._ready = anyio.Event()
        self._estimate: VisemeEstimate | None = None
        self._silent: Timings | None = None
        self._pending: list[bytes] = []
        self._received: list[bytes] = []  # kept for an alignment only
        self._complete = False  # the TTS has sent the whole sentence
        self._cuts = 0
        self._aligned: tuple[Phone, ...] | None = None
        self._sent = 0

    async def prepare(self) -> None:
        """espeak-ng's silent pass, while the TTS is still answering (its first byte takes longer)."""
        try:
            silent = await self._owner.espeak.timings(self._text, self._language)
            self._silent = silent
            self._estimate = VisemeEstimate(phrases_of(silent.phones, silent.rate, silent.samples),
                                            self._owner.tts.sample_rate, self._owner.memory)
        except SpeechServiceError as exc:
            log.warning("no viseme estimate for a sentence: %s", exc)
            self.source = ""
        finally:
            self._ready.set()

    async def audio(self) -> AsyncIterator[bytes]:
        keep = self._owner.aligner is not None and espeak_voice(self._language).startswith("en")
        async for pcm in self._owner.tts.synthesize(self._text, self._language, in_hand_s=self._in_hand_s):
            self._pending.append(pcm)
            if keep:
                self._received.append(pcm)
            yield pcm
        self._complete = True

    async def cut(self, samples: int, *, last: bool) -> Pairs:
        if not self._ready.is_set():  # (anyio's wait on a set event still yields to the loop, every chunk)
            await self._ready.wait()
        self._cuts += 1
        if self._cuts == 1 and self._complete and self._received and self._silent is not None:
            self._aligned = await self._align(self._silent, b"".join(self._received))
            self._received = []
        if self._aligned is not None:
            self.source = "align"
            start, self._sent = self._sent, self._sent + samples
            return cut_phones(self._aligned, start, self._sent, self._owner.tts.sample_rate, last=last)
        estimate = self._estimate
        if estimate is None:
            return ()
        if self._pending:  # in one piece: the estimate carries a partial frame over anyway
            estimate.feed(b"".join(self._pending))
            self._pending.clear()
        if last:
            estimate.finish()
        return estimate.cut(samples, last=last)


    async def _align(self, silent: Timings, pcm: bytes) -> tuple[Phone, ...] | None:
        aligner, rate = self._owner.aligner, self._owner.tts.sample_rate
        if aligner is None:
            return None

        def run() -> tuple[Phone, ...] | None:
            spans = aligner.words(self._text, pcm, rate)
            if spans is None:
                return None
            return aligned_phones(silent.phones, silent.rate, silent.samples, spans, rate)

        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)


class EstimatedVisemes:
    """A TTS without timings: each sentence's visemes estimated from espeak-ng's silent pass (or,
    given an `aligner`, aligned when the sentence is English and came whole)."""

    def __init__(self, tts: TextToSpeech, espeak: EspeakTts, aligner: Aligner | None = None) -> None:
        self.tts = tts
        self.espeak = espeak
        self.aligner = aligner
        self.memory = RateMemory()

    def voicing(self, text: str, language: str | None, *, in_hand_s: float = 0.0) -> Voicing:
        return _Estimated(self, text, language, in_hand_s)


def lipsync_factory(tts: TextToSpeech, espeak: EspeakTts | None,
                    aligner: Aligner | None = None) -> Callable[[], LipSync]:
    """What makes each connection's `LipSync`: exact with espeak-ng, estimated (or aligned) for
    another TTS when the espeak-ng library is there for the silent pass, else none."""
    if isinstance(tts, EspeakTts):
        return lambda: EspeakVisemes(tts)
    if espeak is not None:
        return lambda: EstimatedVisemes(tts, espeak, aligner)
    return lambda: NoVisemes(tts)
