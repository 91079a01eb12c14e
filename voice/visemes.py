"""Mouth shapes for the vendor's speech: phonemes to visemes, and a sentence's timeline cut per chunk.

The viseme set is OpenXR's `XR_META_face_tracking_visemes` (the 15 of OVRLipSync and Ready
Player Me avatars), numbered as that extension numbers them, so a client indexes its blendshapes
with the id as it comes. The mapping from IPA below is ours, written from where each sound is
made (lips, teeth, tongue tip, back of the tongue; for vowels the jaw and lip rounding): espeak-ng
names every phoneme in IPA for every language it speaks, so one table serves Hindi, Tamil and
English alike.

A timeline is `(start_ms, viseme)` pairs: each viseme holds until the next pair's start. On the
wire every `reply.audio` chunk carries the pairs of its own samples, the first at 0 (the viseme
already showing when the chunk starts), and a sentence's last chunk ends with `(its length, sil)`.
Pure: no I/O, no clock.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum


class Viseme(IntEnum):
    SIL = 0  # silence, and a neutral mouth
    PP = 1   # lips pressed: p b m
    FF = 2   # lower lip to upper teeth: f v
    TH = 3   # tongue between the teeth: θ ð
    DD = 4   # tongue tip behind the teeth: t d
    KK = 5   # back of the tongue: k g
    CH = 6   # lips forward, teeth close: tʃ dʒ ʃ ʒ
    SS = 7   # teeth close, lips spread: s z
    NN = 8   # tongue tip up, jaw half open: n l
    RR = 9   # lips slightly rounded: r ɹ
    AA = 10  # jaw open: a ɑ
    E = 11   # jaw half open, lips spread: e ɛ ə
    IH = 12  # jaw nearly closed, lips spread: i ɪ
    OH = 13  # jaw half open, lips rounded: o ɔ
    OU = 14  # lips rounded and forward: u ʊ w


VISEME_NAMES = ("sil", "PP", "FF", "TH", "DD", "kk", "CH", "SS", "nn", "RR", "aa", "E", "ih", "oh", "ou")

# Two-letter sounds first: an affricate's shape is its release's, not its stop's.
_PAIRS = {"tʃ": Viseme.CH, "dʒ": Viseme.CH, "tɕ": Viseme.CH, "dʑ": Viseme.CH, "ʈʂ": Viseme.CH,
          "ɖʐ": Viseme.CH, "ts": Viseme.SS, "dz": Viseme.SS, "pf": Viseme.FF}
# One letter: the first letter of a diphthong or an r-coloured vowel names its shape (its nucleus).
_FIRST: dict[str, Viseme] = {
    **dict.fromkeys("pbmɓɸβ", Viseme.PP),
    **dict.fromkeys("fvʋɱ", Viseme.FF),
    **dict.fromkeys("θð", Viseme.TH),
    **dict.fromkeys("tdʈɖɾɗɬɮ", Viseme.DD),
    **dict.fromkeys("kgɡŋqɢxɣχɠ", Viseme.KK),
    **dict.fromkeys("ʃʒɕʑʂʐçʝcɟ", Viseme.CH),  # Indic palatal stops are said as affricates
    **dict.fromkeys("sz", Viseme.SS),
    **dict.fromkeys("nlɲɳɭʎɫ", Viseme.NN),
    **dict.fromkeys("rɹɻʁʀɽɺ", Viseme.RR),
    **dict.fromkeys("aɑɐæäʌ", Viseme.AA),
    **dict.fromkeys("eɛəɜɘɚɝœɞhɦħʕ", Viseme.E),  # h takes the next vowel's shape; half open is its mean
    **dict.fromkeys("iɪjɨʏ", Viseme.IH),
    **dict.fromkeys("oɔɒɵø", Viseme.OH),
    **dict.fromkeys("uʊwʉɯyɰ", Viseme.OU),
    **dict.fromkeys("ʔ", Viseme.SIL),
}


def _letters(ipa: str) -> str:
    """The phoneme's base letters: stress, length, aspiration, nasalisation and tie marks dropped."""
    kept = []
    for ch in unicodedata.normalize("NFD", ipa):
        if unicodedata.category(ch) in ("Mn", "Lm", "Sk") or ch in "ːˑˈˌ'\u0361\u035c-":
            continue
        kept.append(ch)
    return "".join(kept)


def viseme_of(ipa: str) -> Viseme | None:
    """The mouth shape of one espeak-ng phoneme named in IPA; `""` (a pause) is `sil`; None when the
    name has no letter this table knows (the caller shows `sil` and a test counts them)."""
    letters = _letters(ipa)
    if not letters:
        return Viseme.SIL
    pair = _PAIRS.get(letters[:2])
    if pair is not None:
        return pair
    return _FIRST.get(letters[0].lower())


@dataclass(frozen=True, slots=True)
class Phone:
    """A phoneme of synthesized speech: its first sample, counted from the sentence's first."""

    sample: int
    viseme: int
    word: bool = False  # a word starts here


Pairs = tuple[tuple[int, int], ...]


def _ms(samples: int, rate: int) -> int:
    """Whole ms, rounded down: a chunk's pairs never start past its own end."""
    return samples * 1000 // rate


def cut_phones(phones: Sequence[Phone], start: int, end: int, rate: int, *, last: bool) -> Pairs:
    """The pairs of samples `start..end` of a sentence whose phonemes are `phones` (in order),
    relative to `start`: the viseme showing at `start`, every change before `end`, and on the
    sentence's last chunk `(length, sil)`. Strictly rising starts; no repeat of the same viseme."""
    out: list[tuple[int, int]] = []
    showing = int(Viseme.SIL)
    for phone in phones:
        if phone.sample <= start:
            showing = phone.viseme
            continue
        if phone.sample >= end:
            break
        if not out:
            out.append((0, showing))
        at = _ms(phone.sample - start, rate)
        _put(out, at, phone.viseme)
    if not out:
        out.append((0, showing))
    if last:
        _put(out, _ms(end - start, rate), int(Viseme.SIL), force=True)
    return tuple(out)


def _put(out: list[tuple[int, int]], at: int, viseme: int, *, force: bool = False) -> None:
    """Append keeping starts strictly rising: a change in the same millisecond replaces the last."""
    if out and out[-1][0] >= at:
        out[-1] = (out[-1][0], viseme)
        if len(out) > 1 and out[-2][1] == viseme and not force:
            out.pop()
        return
    if out and out[-1][1] == viseme and not force:
        return
    out.append((at, viseme))
