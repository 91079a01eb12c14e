"""Steady background noise taken out of a learner's utterance before recognition (issue #41). Pure.

A classroom's hum, a fan or a headset's hiss sits under every word, and pocketsphinx's own noise
removal (`remove_noise`, on in the acoustic model's `feat.params`) leaves enough of it to turn
"sixty" into "fifty". This is a Wiener filter in the short-time Fourier domain:

- the noise's spectrum is estimated from the utterance itself, per frequency, as a low percentile
  of its frames' power (`NOISE_PERCENTILE`): the quiet between words and syllables, which every
  spoken line has, and which speech never fills in every band at once;
- each frame's gain follows the "decision-directed" estimate of the a-priori signal-to-noise ratio
  (Ephraim and Malah, 1984): the last frame's cleaned power blended with this frame's excess over
  the noise (`SMOOTHING`), which keeps the gain from flickering on noise alone (the "musical"
  noise of plain spectral subtraction);
- the gain never falls under `FLOOR`, so speech under the noise is turned down, not cut out.

An utterance whose loud frames stand more than `ABOVE_NOISE_DB` over its quiet ones (a clean
recording) goes through untouched: there the filter has little to take out and may only colour the
speech (on the labelled set's clean clips it cost a clip or two of prices). The filter does not
follow noise that changes within an utterance (a door, a voice nearby); nothing short of a model of
speech does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FRAME = 512  # 32 ms at 16 kHz: the band resolution (31 Hz) speech enhancement usually takes
HOP = FRAME // 4  # 75 % overlap: Hann windows on analysis and synthesis add up evenly
NOISE_PERCENTILE = 15.0
SMOOTHING = 0.98
FLOOR = 0.1  # -20 dB at most
# The set's clips at 20 dB SNR measure 21-23 dB here, its clean ones 27 dB and up (most of them
# have digital silence between words, which measures as ~200 dB).
ABOVE_NOISE_DB = 25.0
# What `Filtered.above_noise_db` says of digital silence or of an utterance too short to measure.
UNMEASURED_DB = 60.0
_WINDOW = np.hanning(FRAME + 1)[:-1]


@dataclass(frozen=True, slots=True)
class Filtered:
    """An utterance after the filter, and how far its loud frames stood over its quiet ones before
    it (dB): how noisy it was, which the recogniser's confidence weighs (voice/confidence.py)."""

    samples: np.ndarray
    above_noise_db: float


def denoise(samples: np.ndarray) -> np.ndarray:
    """`samples` (float, any scale) with steady noise turned down; the same length."""
    return filtered(samples).samples


def filtered(samples: np.ndarray) -> Filtered:
    """`denoise`, with the utterance's measure. Shorter than two frames, the utterance holds too
    little quiet to learn the noise from, and clean it needs nothing: then it is returned as it was."""
    if samples.size < 2 * FRAME:
        return Filtered(samples, UNMEASURED_DB)
    padded = np.concatenate([np.zeros(FRAME), samples, np.zeros(FRAME)])
    frames = np.lib.stride_tricks.sliding_window_view(padded, FRAME)[::HOP] * _WINDOW
    spectrum = np.fft.rfft(frames, axis=1)
    power = spectrum.real ** 2 + spectrum.imag ** 2
    loudness = power.sum(axis=1)
    quiet = float(np.percentile(loudness, NOISE_PERCENTILE))
    loud = float(np.percentile(loudness, 90))
    above = UNMEASURED_DB if quiet <= 0.0 or loud <= 0.0 else min(UNMEASURED_DB, float(10 * np.log10(loud / quiet)))
    if above > ABOVE_NOISE_DB:
        return Filtered(samples, above)
    noise = np.percentile(power, NOISE_PERCENTILE, axis=0) + 1e-9
    posterior = power / noise  # each frame's power over the noise's, per band
    gains = np.empty_like(posterior)
    last_posterior = np.ones(posterior.shape[1])
    last_gain = np.ones(posterior.shape[1])
    for t, now in enumerate(posterior):
        prior = SMOOTHING * last_gain ** 2 * last_posterior + (1 - SMOOTHING) * np.maximum(now - 1.0, 0.0)
        gain = np.maximum(prior / (1.0 + prior), FLOOR)
        gains[t] = gain
        last_posterior, last_gain = now, gain
    cleaned = np.fft.irfft(spectrum * gains, n=FRAME, axis=1) * _WINDOW
    out = np.zeros(padded.size)
    weight = np.zeros(padded.size)
    square = _WINDOW ** 2
    for t, frame in enumerate(cleaned):  # overlap-add, normalised by the windows' summed squares
        out[t * HOP:t * HOP + FRAME] += frame
        weight[t * HOP:t * HOP + FRAME] += square
    return Filtered((out / np.maximum(weight, 1e-3))[FRAME:FRAME + samples.size], above)
