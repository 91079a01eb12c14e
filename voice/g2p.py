"""Pronunciations for words the US-English dictionary lacks (Hinglish, Darija and romaji in Latin
letters, names): espeak-ng's phonemes, mapped onto the acoustic model's phone set.

The phone set is CMU's 39 ARPAbet phones (the one pocketsphinx's en-US model and its
`cmudict-en-us.dict` use). espeak-ng (Debian's, already the embedded TTS) reads each word with its
US-English voice, as a learner reading the romanized word aloud would, and prints IPA
(`-q --ipa=3`, one word per line); `ipa_to_cmu` maps each IPA symbol to its nearest ARPAbet
phone. We chose espeak-ng over a G2P package because it is already installed for speech out and
covers every script a pack may use; the maintained Python G2P packages (g2p_en, a neural model in
a pip package) bring NLTK and model downloads. The mapping is pure; `espeak_pronunciations` is the
one subprocess call.
"""

# ruff: noqa: RUF001, RUF003  (IPA letters are the data here, not look-alikes)
from __future__ import annotations

import subprocess
from collections.abc import Iterable, Mapping

CMU_PHONES = frozenset(
    "AA AE AH AO AW AY B CH D DH EH ER EY F G HH IH IY JH K L M N NG OW OY P R S SH T TH UH UW V W Y Z ZH"
    .split())
# IPA as espeak-ng writes it -> ARPAbet. Longest symbols first (diphthongs and affricates before
# their parts). Flaps are T, as CMU writes "water"; a syllabic n or l gets its schwa.
_IPA: tuple[tuple[str, tuple[str, ...]], ...] = tuple(sorted({
    "eɪ": ("EY",), "aɪ": ("AY",), "aʊ": ("AW",), "oʊ": ("OW",), "əʊ": ("OW",), "ɔɪ": ("OY",),
    "tʃ": ("CH",), "dʒ": ("JH",), "ɪə": ("IH", "R"), "eə": ("EH", "R"), "ʊə": ("UH", "R"),
    "ɑː": ("AA",), "ɔː": ("AO",), "iː": ("IY",), "uː": ("UW",), "ɜː": ("ER",), "aː": ("AA",),
    "oː": ("OW",), "eː": ("EY",), "n̩": ("AH", "N"), "l̩": ("AH", "L"), "ɚ": ("ER",), "ɝ": ("ER",),
    "æ": ("AE",), "ɑ": ("AA",), "ɒ": ("AA",), "ɔ": ("AO",), "ʌ": ("AH",), "ə": ("AH",), "ɐ": ("AH",),
    "ɛ": ("EH",), "e": ("EH",), "ɪ": ("IH",), "ᵻ": ("IH",), "ɨ": ("IH",), "i": ("IY",), "ʊ": ("UH",),
    "u": ("UW",), "ɯ": ("UW",), "y": ("UW",), "o": ("OW",), "ɵ": ("OW",), "a": ("AA",), "ø": ("ER",),
    "œ": ("ER",), "p": ("P",), "b": ("B",), "t": ("T",), "d": ("D",), "k": ("K",), "g": ("G",),
    "ɡ": ("G",), "q": ("K",), "c": ("K",), "ɟ": ("JH",), "f": ("F",), "v": ("V",), "β": ("V",),
    "ɸ": ("F",), "θ": ("TH",), "ð": ("DH",), "s": ("S",), "z": ("Z",), "ʃ": ("SH",), "ʂ": ("SH",),
    "ɕ": ("SH",), "ʒ": ("ZH",), "ʑ": ("ZH",), "h": ("HH",), "ɦ": ("HH",), "x": ("HH",), "ç": ("HH",),
    "χ": ("HH",), "ħ": ("HH",), "ɣ": ("G",), "m": ("M",), "n": ("N",), "ɲ": ("N",), "ɳ": ("N",),
    "ŋ": ("NG",), "l": ("L",), "ɫ": ("L",), "ɬ": ("L",), "ɭ": ("L",), "ɹ": ("R",), "r": ("R",),
    "ɽ": ("R",), "ʁ": ("R",), "ɾ": ("T",), "w": ("W",), "j": ("Y",), "ʈ": ("T",), "ɖ": ("D",),
}.items(), key=lambda kv: -len(kv[0])))
# Marks that carry no phone of their own: stress, length on its own, ties, joiners, glottal stops.
_SILENT = set("ˈˌː ʔʕʲʰ\u0303'-.")


def ipa_to_cmu(ipa: str) -> tuple[str, ...]:
    """ARPAbet phones for an IPA string; a symbol with no mapping is skipped."""
    ipa = ipa.replace("\u200d", "").replace("_", "")  # ties split diphthongs (e_ɪ): join them first
    phones: list[str] = []
    i = 0
    while i < len(ipa):
        if ipa[i] in _SILENT:
            i += 1
            continue
        for symbol, mapped in _IPA:
            if ipa.startswith(symbol, i):
                phones += mapped
                i += len(symbol)
                break
        else:
            i += 1
    return tuple(phones)


def read_dictionary(text: str) -> dict[str, tuple[str, ...]]:
    """The pronunciations of a CMU-format dictionary (`word PH ON ES`; an alternative keeps its
    `word(2)` name), the first of each name."""
    found: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            found.setdefault(parts[0], tuple(parts[1:]))
    return found


def espeak_pronunciations(binary: str, words: Iterable[str], *, voice: str = "en-us",
                          timeout_s: float = 60.0) -> dict[str, tuple[str, ...]]:
    """ARPAbet phones for each word, read by espeak-ng in one run (one word per line, stdin)."""
    wanted = [w for w in dict.fromkeys(words) if w and w.isascii() and "\n" not in w]
    if not wanted:
        return {}
    done = subprocess.run([binary, "-v", voice, "-q", "--ipa=3"], input="\n".join(wanted).encode("utf-8"),
                          capture_output=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"espeak-ng exited with {done.returncode}")
    lines = [line.strip() for line in done.stdout.decode("utf-8", "replace").splitlines() if line.strip()]
    if len(lines) != len(wanted):
        return {w: p for w in wanted if (p := _one(binary, w, voice, timeout_s))}
    return {w: p for w, line in zip(wanted, lines, strict=True) if (p := ipa_to_cmu(line))}


def _one(binary: str, word: str, voice: str, timeout_s: float) -> tuple[str, ...]:
    done = subprocess.run([binary, "-v", voice, "-q", "--ipa=3"], input=word.encode("utf-8"),
                          capture_output=True, timeout=timeout_s, check=False)
    return ipa_to_cmu(done.stdout.decode("utf-8", "replace")) if done.returncode == 0 else ()


def dictionary_text(entries: Mapping[str, tuple[str, ...]]) -> str:
    """A CMU-format dictionary (what pocketsphinx's `dict` reads)."""
    return "".join(f"{word} {' '.join(phones)}\n" for word, phones in sorted(entries.items()) if phones)
