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

from schemas.words import STOP_WORDS, sound_key

__all__ = ["sound_key", "tokenize"]

# Devanagari letters, vowel signs, virama and nukta, digits; not the danda (U+0964) or double danda.
_TOKEN = re.compile(r"[0-9a-z]+|[\u0900-\u0963\u0966-\u097f]+")
_DEVANAGARI = re.compile(r"[\u0900-\u097f]")

_STOP = STOP_WORDS

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
