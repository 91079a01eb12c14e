"""The noise filter in front of the scene recogniser (voice/denoise.py, issue #41)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from voice.denoise import ABOVE_NOISE_DB, FRAME, UNMEASURED_DB, denoise, filtered
from voice.scene_stt import condition

RATE = 16_000


def bursts(seconds: float = 2.0, seed: int = 0) -> np.ndarray:
    """Speech-like: voiced bursts of a few harmonics (150-300 ms) with quiet between them."""
    rng = np.random.default_rng(seed)
    out = np.zeros(int(seconds * RATE))
    t = 0
    while t < out.size:
        length = int(rng.uniform(0.15, 0.3) * RATE)
        pitch = rng.uniform(110, 220)
        n = np.arange(min(length, out.size - t))
        out[t:t + n.size] = sum(np.sin(2 * np.pi * pitch * k * n / RATE) / k for k in (1, 2, 3, 5)) * 4000
        t += length + int(rng.uniform(0.08, 0.2) * RATE)
    return out


def snr_db(clean: np.ndarray, heard: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(clean ** 2) / np.sum((heard - clean) ** 2)))


def test_white_noise_under_speech_is_turned_down() -> None:
    speech = bursts()
    for snr in (20, 10):
        noise = np.random.default_rng(snr).normal(0, 1, speech.size)
        noise *= np.sqrt(np.mean(speech[speech != 0] ** 2) / 10 ** (snr / 10))
        noisy = speech + noise
        assert snr_db(speech, denoise(noisy)) > snr_db(speech, noisy) + 3


def test_clean_speech_goes_through_untouched() -> None:
    speech = bursts(seed=3)
    for floor in (0.0, 2.0, 30.0):  # digital silence, and floors about 60 and 40 dB under the speech
        quiet = speech + np.random.default_rng(1).normal(0, floor, speech.size)
        assert denoise(quiet) is quiet


def test_an_utterance_too_short_to_learn_the_noise_from_is_left_alone() -> None:
    short = np.random.default_rng(0).normal(0, 1000, 2 * FRAME - 1)
    assert denoise(short) is short


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 3 * RATE), st.floats(0.0, 20_000.0), st.integers(0, 2**16))
def test_the_filter_keeps_length_and_never_adds_energy(n: int, loudness: float, seed: int) -> None:
    x = np.random.default_rng(seed).normal(0, 1, n) * loudness
    y = denoise(x)
    assert y.shape == x.shape and np.all(np.isfinite(y))
    assert np.sum(y ** 2) <= np.sum(x ** 2) * 1.01 + 1e-6


def test_the_recogniser_hears_the_filtered_audio_and_can_be_told_not_to() -> None:
    speech = bursts(seed=5)
    noisy = (speech + np.random.default_rng(9).normal(0, 800, speech.size)).astype("<i2").tobytes()
    (cleaned, above), (raw, same) = condition(noisy), condition(noisy, clean=False)
    assert len(cleaned) == len(raw) == len(noisy) + 2 * int(0.3 * RATE) * 2
    assert cleaned != raw and above == same < ABOVE_NOISE_DB
    edge = int(0.3 * RATE)
    middle = slice(edge, edge + speech.size)
    f, r = (np.frombuffer(b, dtype="<i2").astype(np.float64)[middle] for b in (cleaned, raw))
    assert snr_db(speech, f) > snr_db(speech, r) + 3


def test_the_measure_follows_the_noise() -> None:
    speech = bursts(seed=7)
    loud = np.sqrt(np.mean(speech[speech != 0] ** 2))
    measured = [filtered(speech + np.random.default_rng(snr).normal(0, loud / 10 ** (snr / 20), speech.size))
                for snr in (10, 20, 30)]
    assert measured[0].above_noise_db < measured[1].above_noise_db < measured[2].above_noise_db
    assert filtered(speech).above_noise_db == UNMEASURED_DB  # digital silence between the bursts
    assert filtered(speech[: FRAME]).above_noise_db == UNMEASURED_DB
