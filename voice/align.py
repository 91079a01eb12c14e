"""Visemes by forced alignment, for English audio that came whole and without timings.

pocketsphinx (its US-English model ships in its wheel) aligns the sentence's words to the audio;
espeak-ng's silent pass gives each word's phonemes and their relative durations, which are
stretched over the word's aligned span. Any word the aligner cannot place (not in its
dictionary, a number, or a word count that differs from espeak-ng's) means no alignment: the
caller falls back to the estimate (voice/estimate.py). It needs the whole sentence's audio, so it
serves only a voice whose sentence is all there before its first chunk is sent
(`TTS_BY_SENTENCE=false`); a streamed sentence cannot wait for it (docs/voice.md, Visemes).
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Sequence
from typing import Any

from voice.audio import to_mono_16k
from voice.visemes import Phone, Viseme

_WORD = re.compile(r"[A-Za-z']+|\S*\d\S*")
_FILLERS = ("<s>", "</s>", "<sil>", "[NOISE]")
GAP_MS = 30  # a gap between aligned words this long shows the closed mouth


class Aligner:
    """One pocketsphinx decoder in alignment mode, used by one thread at a time."""

    def __init__(self) -> None:
        from pocketsphinx import Decoder

        self._decoder: Any = Decoder(samprate=16000, loglevel="FATAL", bestpath=False)
        self._lock = threading.Lock()

    def words(self, text: str, pcm: bytes, rate: int) -> list[tuple[float, float]] | None:
        """Each word's (start ms, end ms) in `pcm`, or None when any word is missing."""
        words = [w.lower().strip("'") for w in _WORD.findall(text)]
        with self._lock:
            decoder = self._decoder
            if not words or any(not w.isalpha() and "'" not in w for w in words):
                return None
            if any(decoder.lookup_word(w) is None for w in words):
                return None
            try:
                decoder.set_align_text(" ".join(words))
                decoder.start_utt()
                decoder.process_raw(to_mono_16k(pcm, rate, 1), full_utt=True)
                decoder.end_utt()
            except RuntimeError:
                return None
            segments = decoder.seg()
            found = [(seg.word.split("(")[0], seg.start_frame * 10.0, (seg.end_frame + 1) * 10.0)
                     for seg in segments or () if seg.word not in _FILLERS]
        if [w for w, _, _ in found] != words:
            return None
        return [(start, end) for _, start, end in found]


def aligned_phones(espeak_phones: Sequence[Phone], espeak_rate: int, espeak_samples: int,
                   spans: Sequence[tuple[float, float]], rate: int) -> tuple[Phone, ...] | None:
    """espeak-ng's phonemes placed word by word over the aligned spans (ms), in samples at `rate`;
    None when espeak-ng's word count is not the aligner's."""
    starts = [i for i, p in enumerate(espeak_phones) if p.word]
    if len(starts) != len(spans):
        return None
    out: list[Phone] = [Phone(0, int(Viseme.SIL))]
    for k, first in enumerate(starts):
        last = starts[k + 1] if k + 1 < len(starts) else len(espeak_phones)
        own = [p for p in espeak_phones[first:last] if p.viseme != Viseme.SIL] or [espeak_phones[first]]
        # the word ends at its first pause, else where the next word starts (or the speech ends)
        pause = next((p.sample for p in espeak_phones[first + 1:last] if p.viseme == Viseme.SIL), None)
        e_end = pause if pause is not None else (espeak_phones[last].sample if last < len(espeak_phones)
                                                 else espeak_samples)
        e_start = own[0].sample
        a, b = spans[k]
        for p in own:
            at = a + (p.sample - e_start) / max(1, e_end - e_start) * (b - a)
            out.append(Phone(int(at * rate / 1000), p.viseme, p.word))
        following = spans[k + 1][0] if k + 1 < len(spans) else None
        if following is None or following - b >= GAP_MS:
            out.append(Phone(int(b * rate / 1000), int(Viseme.SIL)))
    samples = [p.sample for p in out]
    if any(b < a for a, b in itertools.pairwise(samples)):
        return None
    return tuple(out)
