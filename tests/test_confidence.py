"""What the clarify threshold means with each backend (issue #34, voice/confidence.py): the knot
rule every fitted backend shares, and the documented map of Whisper's numbers (the OpenAI-compatible
service, which cannot be measured offline). The fitted calibrations on the labelled speech set are
held by tests/test_scene_stt.py."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from voice.confidence import (
    CALIBRATION,
    SCENE_FEATURES,
    THRESHOLD,
    WHISPER_FAILED_CAP,
    WRONG_ACCEPTED,
    WRONG_AMONG_ACCEPTED,
    Calibration,
    Evidence,
    fit,
    knot_for,
    whisper_confidence,
)

# A calibration whose raw score rises with the mean posterior alone.
PLAIN = Calibration(weights=(-5.0, 10.0, 0.0, 0.0, 0.0), knot=0.5)


def evidence(p: float) -> Evidence:
    return Evidence(p, p, 1.0, 3)


# Scores on a grid, so that no two differ by less than the calibration's rounding.
SAMPLES = st.lists(st.tuples(st.integers(0, 20).map(lambda k: k / 20), st.booleans()), min_size=1, max_size=60)


@given(SAMPLES)
def test_at_or_above_the_knot_few_are_wrong_with_any_backend(points: list[tuple[float, bool]]) -> None:
    """Whatever the backend's scores look like, the transcripts the threshold takes are at most
    `WRONG_AMONG_ACCEPTED` wrong, and at most `WRONG_ACCEPTED` of all are wrong and taken."""
    samples = [(evidence(p), ok) for p, ok in points]
    model = Calibration(PLAIN.weights, knot_for(PLAIN, samples))
    taken = [ok for e, ok in samples if model.confidence(e) >= THRESHOLD]
    wrong = taken.count(False)
    assert wrong <= WRONG_AMONG_ACCEPTED * len(taken) + 1e-9
    assert wrong <= WRONG_ACCEPTED * len(samples) + 1e-9


def test_a_backend_that_is_mostly_wrong_takes_almost_nothing() -> None:
    """The general model is right about one clip in twenty-five: the 3 % rule alone would take
    a wrong transcript for every right one; the share among those taken keeps them out."""
    samples = [(evidence(0.9), False)] * 2 + [(evidence(0.8), True)] + [(evidence(0.3), False)] * 100
    knot = knot_for(PLAIN, samples)
    assert knot == 1.0  # nothing meets both: nothing is taken
    assert Calibration(PLAIN.weights, knot).confidence(evidence(1.0)) < THRESHOLD
    good = [(evidence(0.9), True)] * 60 + [(evidence(0.85), False)] * 2 + [(evidence(0.5), False)] * 30
    assert knot_for(PLAIN, good) == round(PLAIN.raw(evidence(0.85)), 4)  # 2 of 62 wrong, 2 of 92 in all


def test_whisper_segments_map_as_documented() -> None:
    assert whisper_confidence([]) is None
    assert whisper_confidence([(math.log(0.95), 0.0, 1.0)]) == 0.95  # the mean token probability
    assert whisper_confidence([(math.log(0.9), 0.5, 1.0)]) == 0.45  # less the chance of no speech
    assert whisper_confidence([(math.log(0.9), 0.0, 1.0), (math.log(0.5), 0.0, 1.0)]) == 0.7
    # Whisper's own failure tests put a segment under the threshold: a repetition loop ...
    assert whisper_confidence([(math.log(0.95), 0.0, 3.1)]) == WHISPER_FAILED_CAP
    # ... and a segment it would call silent
    assert whisper_confidence([(-1.5, 0.7, 1.0)]) == round(math.exp(-1.5) * 0.3, 3)
    assert whisper_confidence([(float("nan"), float("nan"), 1.0)]) == 0.0


@given(st.lists(st.tuples(st.floats(-50.0, 5.0), st.floats(-1.0, 2.0), st.floats(0.0, 10.0)), min_size=1, max_size=5))
def test_whisper_confidence_is_a_probability(segments: list[tuple[float, float, float]]) -> None:
    confidence = whisper_confidence(segments)
    assert confidence is not None and 0.0 <= confidence <= 1.0
    if any(c > 2.4 for _, _, c in segments):  # a failed segment weighs the mean down
        assert confidence <= (WHISPER_FAILED_CAP + len(segments) - 1) / len(segments) + 0.0005  # rounded


def test_the_scene_models_confidence_reads_only_its_own_evidence() -> None:
    """The scene model combines its posterior, language-model score, speaking rate and noise; the free pass's
    agreement and the least posterior (the general model's evidence) do not move it."""
    heard = Evidence(0.9, 0.9, 1.0, 4, lm_score=-150.0, frames_per_phone=6.0)
    other = Evidence(0.9, 0.1, 0.0, 4, lm_score=-150.0, frames_per_phone=6.0)
    assert CALIBRATION.features == SCENE_FEATURES
    assert CALIBRATION.confidence(heard) == CALIBRATION.confidence(other)
    # each of its features raises the confidence: a likelier sentence, a slower word, a surer one
    assert CALIBRATION.raw(Evidence(0.9, 0.9, 1.0, 4, -100.0, 6.0)) > CALIBRATION.raw(heard)
    assert CALIBRATION.raw(Evidence(0.9, 0.9, 1.0, 4, -150.0, 8.0)) > CALIBRATION.raw(heard)
    assert CALIBRATION.raw(Evidence(0.95, 0.9, 1.0, 4, -150.0, 6.0)) > CALIBRATION.raw(heard)
    # and a noisy utterance is less sure than the same words heard clean (voice/denoise.py's measure)
    assert CALIBRATION.raw(Evidence(0.9, 0.9, 1.0, 4, -150.0, 6.0, above_noise_db=12.0)) < CALIBRATION.raw(heard)
    assert CALIBRATION.confidence(Evidence(0.0, 0.0, 1.0, 0)) == 0.0  # nothing heard


@given(st.lists(st.tuples(st.integers(-300, -20), st.integers(2, 12), st.booleans()), min_size=4, max_size=40))
def test_the_fit_gives_weights_on_the_features_own_scale(rows: list[tuple[int, int, bool]]) -> None:
    """Fitted on standardised features, the weights come back on each feature's own scale: a feature
    that separates right from wrong is weighed by its sign, and a constant one carries nothing."""
    samples = [(Evidence(0.8, 0.8, 1.0, 3, float(lm), float(fpp)), ok) for lm, fpp, ok in rows]
    samples += [(Evidence(0.8, 0.8, 1.0, 3, -20.0, 5.0), True), (Evidence(0.8, 0.8, 1.0, 3, -300.0, 5.0), False)]
    model = fit(samples, ("lm_score", "mean_posterior"), steps=300)
    assert model.features == ("lm_score", "mean_posterior")
    assert model.weights[2] == 0.0  # every mean posterior is 0.8
    right = [model.raw(e) for e, ok in samples if ok]
    wrong = [model.raw(e) for e, ok in samples if not ok]
    if all(e.lm_score > w.lm_score for e, ok in samples if ok for w, bad in samples if not bad):
        assert min(right) > max(wrong)  # separable by the score: the fit ranks by it
