"""Words for retrieval, in English, Hinglish and Devanagari Hindi.

A learner in the bazaar may type "how much is it", "kitne ka hai" or "कितने का है", and a teacher
may have written the playbook in any of the three. `tokenize` turns text into the words BM25
counts:

- Latin words are lower-cased and lightly stemmed (`prices` and `price` meet); English and common
  Hinglish function words are dropped.
- Devanagari words are kept whole, vowel signs included. Python's `\\w` stops at a vowel sign
  (they are combining marks, not letters), so the pattern names the Unicode block instead.
- Every content word also yields a *sound key*: its consonant skeleton in Latin letters, prefixed
  with `~`. `kitne` and `कितने` both give `~ktn`, `dhanyavaad` and `धन्यवाद` both give `~dnyvd`,
  so a Hinglish query finds a Devanagari note and the other way round. Keys shorter than two
  consonants are not emitted: they would match too much.

Pure and deterministic: no I/O, no model, the same text always gives the same tokens.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["sound_key", "tokenize"]

# Devanagari letters, vowel signs, virama and nukta, digits; not the danda (U+0964) or double danda.
_TOKEN = re.compile(r"[0-9a-z]+|[\u0900-\u0963\u0966-\u097f]+")
_DEVANAGARI = re.compile(r"[\u0900-\u097f]")

_STOP = frozenset(
    # English
    "a an and are as at be but by can could do does for from has have he her him his how i if in "
    "into is it its just me my no not of on or our she so than that the their them then there "
    "these they this those to too up us was we were what when where which who why will with would "
    "you your yes very".split()
    # Hinglish particles: they carry grammar, not topic
    + "hai hain ka ki ke ko se to na hi bhi mein me aur ya ye yeh wo woh tha thi the".split()
    # the same particles in Devanagari
    + "है हैं का की के को से तो ना ही भी में और या ये यह वो वह था थी थे".split()
)

# Latin spellings that Hinglish writers use for one Devanagari consonant, longest first.
_DIGRAPHS = (("chh", "c"), ("kh", "k"), ("gh", "g"), ("ch", "c"), ("jh", "j"), ("th", "t"),
             ("dh", "d"), ("ph", "f"), ("bh", "b"), ("sh", "s"), ("q", "k"), ("w", "v"),
             ("z", "j"), ("x", "ks"))
_LATIN_VOWELS = frozenset("aeiou")

# Devanagari consonants and independent vowels to the Latin letter of their sound key. Vowel signs
# and the virama map to nothing; anusvara and chandrabindu sound as n. After NFC a nukta letter is
# its base letter followed by U+093C, and keys as its base letter: Hinglish writes सड़क as `sadak`.
_DEVANAGARI_KEY: dict[str, str] = {}
for _letters, _latin in (
    ("कख", "k"), ("गघ", "g"), ("ङञणन", "n"), ("चछ", "c"), ("जझ", "j"), ("टठतथ", "t"), ("डढदध", "d"),
    ("र", "r"), ("प", "p"), ("फ", "f"), ("बभ", "b"), ("म", "m"), ("य", "y"), ("लळ", "l"), ("व", "v"),
    ("शषस", "s"), ("ह", "h"), ("ंँ", "n"), ("अआइईउऊऋएऐओऔ", "a"),
):
    for _letter in _letters:
        _DEVANAGARI_KEY[_letter] = _latin
_VOWEL_SIGNS = frozenset(chr(c) for c in range(0x093E, 0x094D))


def _stem(word: str) -> str:
    """A crude, deterministic English stem: `prices` meets `price`, `bargaining` meets `bargain`."""
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _collapse(letters: list[str]) -> str:
    out: list[str] = []
    for letter in letters:
        if not out or out[-1] != letter:
            out.append(letter)
    return "".join(out)


@lru_cache(maxsize=65536)
def sound_key(word: str) -> str:
    """The consonant skeleton of one word, in Latin letters (`"kitne"` and `"कितने"` give `"ktn"`).

    An initial vowel counts as `a` whichever vowel it is, so `ek` and `एक` agree. Later vowels, a
    final `y` after a vowel, `h` after the first letter and doubled letters are dropped: Hinglish
    spells them freely (`bahut`, `bahot`; `mehenga`, `mehnga`, `mahanga`).
    """
    if _DEVANAGARI.search(word):
        letters: list[str] = []
        for index, char in enumerate(word):
            latin = _DEVANAGARI_KEY.get(char, "")
            if index > 0 and latin in ("a", "h"):
                continue
            if latin == "y" and index == len(word) - 1 and word[index - 1] in _VOWEL_SIGNS:
                continue
            if latin:
                letters.append(latin)
        return _collapse(letters)
    text = word
    for digraph, single in _DIGRAPHS:
        text = text.replace(digraph, single)
    letters = []
    for index, char in enumerate(text):
        if char in _LATIN_VOWELS or (char == "y" and index == len(text) - 1 and index > 0):
            if index == 0:
                letters.append("a")
            continue
        if not char.isalpha():
            continue
        if char == "h" and index > 0:
            continue
        letters.append(char)
    return _collapse(letters)


@lru_cache(maxsize=4096)
def _word_tokens(word: str) -> tuple[str, ...]:
    if word in _STOP:
        return ()
    if word.isdigit():
        return (word,)
    devanagari = bool(_DEVANAGARI.search(word))
    if not devanagari and len(word) < 2:
        return ()
    base = word if devanagari else _stem(word)
    key = sound_key(base)
    if len(key) >= 2 and not key.isdigit():
        return (base, "~" + key)
    return (base,)


def tokenize(text: str) -> list[str]:
    """The words of `text` that retrieval counts, in order, each followed by its sound key."""
    normal = unicodedata.normalize("NFC", text).lower()
    tokens: list[str] = []
    for word in _TOKEN.findall(normal):
        tokens.extend(_word_tokens(word))
    return tokens
