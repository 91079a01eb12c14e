"""The silent pass another voice's visemes are estimated from (voice/espeak_lib.py `timings`,
voice/tts.py `EspeakTts.timings`): espeak-ng's phoneme timings without keeping its audio, and the
lines already timed kept, so a repeated vendor line costs no second pass."""

from __future__ import annotations

import pytest

from tests.ci import need_tools
from voice.espeak_lib import shared_espeak
from voice.tts import EspeakTts

pytestmark = pytest.mark.anyio

LINE = "Haan ji, everything here is fresh from the farm today; tell me what you need and how much."
PITCH_PERIOD_SAMPLES = 300  # espeak-ng's timings differ run to run by up to a pitch period (~10 ms)


@pytest.fixture(scope="module")
def espeak() -> EspeakTts:
    need_tools("espeak-ng", install="apt-get install espeak-ng (scripts/test.sh does)")
    return EspeakTts(shared_espeak())


def test_the_silent_pass_times_the_same_phonemes_as_the_spoken_one(espeak: EspeakTts) -> None:
    spoken = espeak.espeak.synthesize(LINE, "en-us", espeak.wpm)
    silent = espeak.espeak.timings(LINE, "en-us", espeak.wpm)
    assert silent.rate == spoken.rate
    assert abs(silent.samples - len(spoken.pcm) // 2) <= PITCH_PERIOD_SAMPLES
    assert [(p.viseme, p.word) for p in silent.phones] == [(p.viseme, p.word) for p in spoken.phones]
    assert all(abs(a.sample - b.sample) <= PITCH_PERIOD_SAMPLES
               for a, b in zip(silent.phones, spoken.phones, strict=True))
    # and the library is left speaking aloud: the next pass keeps its audio
    assert len(espeak.espeak.synthesize("Achha.", "en-us", espeak.wpm).pcm) > 0


async def test_a_line_timed_once_is_kept_per_voice_and_the_least_recently_used_goes() -> None:
    need_tools("espeak-ng", install="apt-get install espeak-ng (scripts/test.sh does)")
    tts = EspeakTts(shared_espeak(), timings_kept=2)
    first = await tts.timings(LINE, "en-IN")
    assert await tts.timings(LINE, "en-IN") is first  # kept: no second pass
    assert tts.timings_made == 1
    hindi = await tts.timings(LINE, "hi-IN")  # another voice, another pass
    assert hindi is not first and tts.timings_made == 2
    assert await tts.timings(LINE, "en-IN") is first  # used again: now the most recent
    await tts.timings("Theek hai.", "en-IN")  # a third line: the Hindi one, least recently used, goes
    assert tts.timings_made == 3
    assert await tts.timings(LINE, "en-IN") is first and tts.timings_made == 3
    assert await tts.timings(LINE, "hi-IN") is not hindi and tts.timings_made == 4
