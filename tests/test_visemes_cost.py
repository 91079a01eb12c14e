"""What keeps another voice's viseme estimate cheap (issue #33) gives the same answers: the silent
pass (voice/espeak_lib.py `timings`, voice/tts.py `EspeakTts.timings`) is espeak-ng's phoneme
timings without its audio, made with a variant of the voice that costs about half as much and
times every phoneme the same; a line already timed is kept so a repeated vendor line costs no
second pass; and the received audio's voiced spans, which the estimate reads in whatever pieces
arrive, are the rule's however the pieces fall."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.ci import need_tools
from voice.espeak_lib import TIMINGS_VARIANT, shared_espeak
from voice.estimate import FRAME_MS, PAUSE_MS, RateMemory, Script, VisemeEstimate
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


# One process's silent passes, as JSON: each line in each of the sessions' espeak-ng voices, twice,
# with the variant (argv[1] "1") or with the voice itself ("0"), and the passes' CPU. espeak-ng's
# timings of a line move by up to ~100 ms from one pass to the next within a process (its state
# carries over), but the same passes in the same order in a fresh process give the same samples:
# so two processes, one per kind of pass, are compared sample for sample. "gone": the variant's
# file is removed first (a temporary directory's cleaner), and espeak-ng speaks the voice itself.
_PASSES = """
import json, os, sys, time
from voice.espeak_lib import LIBRARY, TIMINGS_VARIANT, Espeak, library_path
from voice.tts import ESPEAK_VOICES
espeak = Espeak(library_path() or LIBRARY, timings_variant=sys.argv[1] != "0")
if sys.argv[1] == "gone":
    os.remove(espeak.data_dir / "espeak-ng-data" / "voices" / "!v" / TIMINGS_VARIANT)
lines = json.loads(sys.argv[2])
variant = espeak.timings_variant
start = time.process_time()
passes = [[t.samples, [[p.sample, p.viseme, p.word] for p in t.phones]]
          for _ in range(2) for voice in sorted(set(ESPEAK_VOICES.values())) for line in lines
          for t in [espeak.timings(line, voice, 160)]]
print(json.dumps({"variant": variant, "dir": str(espeak.data_dir), "cpu": time.process_time() - start,
                  "passes": passes}))
"""
VENDOR_LINES = ["Haan ji, everything here is sweet and red from the farm today;",
                "tell me what you need, bhaiya Raju, and how much.",
                "Achha, theek hai. Take two kilos of onions then.",
                "Forty rupees a kilo, and not a paisa less, my friend!", "123 rupees? No, 99."]


def silent_passes(kind: str, tmp: Path, lines: list[str] = VENDOR_LINES) -> dict[str, object]:
    """One process's passes (`_PASSES`), with `tmp` as its temporary directory (where the variant's
    data directory is made)."""
    done = subprocess.run([sys.executable, "-c", _PASSES, kind, json.dumps(lines)], capture_output=True,
                          text=True, timeout=120, check=True, cwd=Path(__file__).resolve().parent.parent,
                          env={**os.environ, "TMPDIR": str(tmp)})
    out: dict[str, object] = json.loads(done.stdout)
    return out


def test_the_silent_pass_variant_times_every_phoneme_as_the_voice_does_for_about_half_the_cpu(tmp_path: Path) -> None:
    need_tools("espeak-ng", install="apt-get install espeak-ng (scripts/test.sh does)")
    voice, variant = silent_passes("0", tmp_path), silent_passes("1", tmp_path)
    assert variant["variant"] and not voice["variant"]
    assert variant["passes"] == voice["passes"]  # every phoneme's sample and the length, in 8 voices
    assert isinstance(variant["cpu"], float) and isinstance(voice["cpu"], float)
    assert variant["cpu"] < 0.8 * voice["cpu"]  # measured 0.52 (1.7 against 3.3 ms a pass)


def test_a_silent_pass_whose_variant_has_gone_still_times_the_line(tmp_path: Path) -> None:
    need_tools("espeak-ng", install="apt-get install espeak-ng (scripts/test.sh does)")
    gone, voice = silent_passes("gone", tmp_path), silent_passes("0", tmp_path)
    assert gone["variant"] and gone["passes"] == voice["passes"]
    # the next process finds the directory without its variant and writes it again
    assert silent_passes("1", tmp_path, ["Achha."])["dir"] == gone["dir"]
    assert (Path(str(gone["dir"])) / "espeak-ng-data" / "voices" / "!v" / TIMINGS_VARIANT).is_file()


def test_the_variants_data_directory_is_made_once_for_every_process_and_only_a_closed_one_is_used(
        tmp_path: Path) -> None:
    """A server ends on SIGTERM without its exit handlers (uvicorn raises the signal again), so the
    directory is not one per process to be removed: one is made and every later process uses it."""
    need_tools("espeak-ng", install="apt-get install espeak-ng (scripts/test.sh does)")
    first, second = silent_passes("1", tmp_path, ["Achha."]), silent_passes("1", tmp_path, ["Achha."])
    shared = Path(str(first["dir"]))
    assert second["dir"] == str(shared) and shared.parent == tmp_path
    assert [p.name for p in tmp_path.iterdir()] == [shared.name]  # nothing else left behind
    shared.chmod(0o777)  # open to others: its files could have been changed by anyone
    third = silent_passes("1", tmp_path, ["Achha."])
    assert third["variant"] and third["dir"] != str(shared)
    assert third["passes"] == first["passes"]


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


RATE = 24_000
FRAME = RATE * FRAME_MS // 1000
runs_st = st.lists(st.tuples(st.booleans(), st.integers(1, 40)), min_size=1, max_size=12)


def expected_spans(runs: list[tuple[bool, int]]) -> list[tuple[int, int]]:
    """The voiced spans by the rule itself: one opens at the first loud frame, and ends where a
    quiet of `PAUSE_MS` or more begins (or, at the end, where the last quiet began)."""
    merged: list[list[int]] = []
    for loud, n in runs:
        if merged and bool(merged[-1][0]) == loud:
            merged[-1][1] += n
        else:
            merged.append([int(loud), n])
    spans: list[list[int]] = []
    t, open_ = 0, False
    for voiced, n in merged:
        if voiced and not open_:
            spans.append([t, -1])
            open_ = True
        elif not voiced and open_ and n * FRAME_MS >= PAUSE_MS:
            spans[-1][1], open_ = t, False
        t += n * FRAME_MS
    if open_:
        spans[-1][1] = t - merged[-1][1] * FRAME_MS if not merged[-1][0] else t
    return [(a, b) for a, b in spans]


@given(runs_st, st.lists(st.integers(1, 9000), min_size=1, max_size=20))
@example([(True, 5), (False, PAUSE_MS // FRAME_MS), (True, 5)], [50])  # a pause just long enough
@example([(True, 5), (False, PAUSE_MS // FRAME_MS - 1), (True, 5)], [50])  # and one frame short
@settings(max_examples=300, deadline=None)
def test_the_voiced_spans_are_the_rules_however_the_audio_is_cut_into_pieces(
        runs: list[tuple[bool, int]], pieces: list[int]) -> None:
    loud_frame = (b"\x70\x17" * FRAME)  # 6000: far above the quiet threshold
    pcm = b"".join((loud_frame if loud else b"\0\0" * FRAME) * n for loud, n in runs)
    estimate = VisemeEstimate(Script((), (), 0.0), RATE, RateMemory())
    at, i = 0, 0
    while at < len(pcm):
        size = 2 * pieces[i % len(pieces)]
        estimate.feed(pcm[at:at + size])
        at, i = at + size, i + 1
    estimate.finish()
    assert [(span.onset, span.end) for span in estimate._spans] == expected_spans(runs)
