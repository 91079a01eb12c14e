"""Text cut into tokens for the number reader, in place: every token keeps its span in the
original text, so a number's span is exact. Digits with separators become one token ("1,200"),
lexicon phrases one token ("per cent"), glued Japanese numerals and Arabic prefixes are cut apart,
and phone numbers, clock times, dates and "1/2" are recognised by their shape.
"""

from __future__ import annotations

import re
import unicodedata
from typing import NamedTuple

from session.number_lexicon import NumberLexicon, norm, phrase_key, script_of

__all__ = ["SEPARATORS", "STOPS", "Tok", "Word", "gap", "tokenize", "words_in"]

_DEVA_MARKS = "\u0900-\u0903\u093a-\u094f\u0951-\u0957\u0962\u0963"
_WORD_CHARS = rf"\w{_DEVA_MARKS}\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed"
_RUN = re.compile(rf"[{_WORD_CHARS}]+|/-|\S")
_WORDS = re.compile(rf"[{_WORD_CHARS}]+(?:['\u2019][{_WORD_CHARS}]+)*|/-|\S")
_SPECIAL = re.compile(
    r"(?=[+\d])(?:(?P<phone>\+\d[\d \-]{6,}\d|(?<![\d.,])\d{4,5}[ \-]\d{5,6}(?![\d.,])"
    r"|(?<![\d.,])0\d{2,4}-\d{6,8}(?!\d)"
    r"|(?<![\d.,])\d{8,}(?![\d.,]))"
    r"|(?P<time>(?<![\d.,:])\d{1,2}:\d{2}(?::\d{2})?(?![\d:]))"
    r"|(?P<fraction>(?<![\d/])[1-3]/[2-4](?![\d/]))"
    r"|(?P<date>(?<![\d/.-])\d{1,2}[/-]\d{1,2}[/-]\d{2,4}(?![\d/])|(?<![\d/])\d{1,2}/\d{1,2}(?![\d/])))"
)
_DIGIT = re.compile(r"\d")
SEPARATORS = ".,'\u00a0\u202f"
_CONNECTORS = "-'\u2019."


class Tok(NamedTuple):
    """A token (a named tuple: the reader makes thousands, and a tuple is made fastest)."""

    key: str  # normalised, for look-ups
    start: int
    end: int
    kind: str  # "num", "word", "sign", "phone", "time", "date", "fraction"
    script: str
    value: float = 0.0
    glued: bool = False  # a piece of a longer run of letters


def _digits_value(text: str) -> float | None:
    """The value of digits with separators: "1,200" and "1.500" are thousands, "1.5", "12.50" and
    "1,5" decimals, "1,50,000" Indian grouping; a malformed grouping reads as nothing."""
    plain = "".join(str(unicodedata.decimal(c)) if c.isdecimal() else c for c in text)
    seps = [c for c in plain if not c.isdecimal()]
    if not seps:
        return float(int(plain))
    groups = re.split(r"[.,'\u00a0\u202f]", plain)
    if len(set(seps)) == 2 and seps.count(seps[-1]) == 1:
        whole, frac = plain.rsplit(seps[-1], 1)
        return float(whole.replace(seps[0], "") + "." + frac) if _grouped(whole.split(seps[0])) else None
    if len(set(seps)) > 1:
        return None
    sep = seps[0]
    if len(groups) > 2 or sep in "'\u00a0\u202f":
        return float("".join(groups)) if _grouped(groups) else None
    head, tail = groups
    if len(tail) == 3 and 1 <= len(head) <= 3 and head != "0":
        return float(head + tail)
    return float(head + "." + tail)


def _grouped(groups: list[str]) -> bool:
    """Thousands grouping: 1-3 digits, then groups of 3 (or of 2 then 3, the Indian way)."""
    if not groups or not 1 <= len(groups[0]) <= 3 or len(groups[-1]) != 3:
        return False
    return all(len(g) in (2, 3) for g in groups[1:-1])


def _split_glued_other(run: str, start: int, lex: NumberLexicon, script: str) -> list[Tok]:
    """A run of kanji or kana, cut into the longest lexicon morphemes; other characters become
    word tokens of their own so they break a number."""
    out: list[Tok] = []
    i = 0
    stray_kana = False  # the character before was kana the lexicon does not know
    while i < len(run):
        for size in range(min(lex.glued_longest, len(run) - i), 0, -1):
            piece = norm(run[i:i + size])
            if piece in lex.glued_other:
                kind = script_of(run[i])
                # Kana inside a word is not a number: "すみません" holds せん but means "excuse me".
                key = piece if not (stray_kana and kind == "kana") else "\x00" + piece
                out.append(Tok(key, start + i, start + i + size, "word", kind, glued=True))
                stray_kana = key != piece
                i += size
                break
        else:
            stray_kana = script_of(run[i]) == "kana"
            out.append(Tok(norm(run[i]), start + i, start + i + 1, "word", script, glued=True))
            i += 1
    return out


def _split_glued_latin(key: str, start: int, lex: NumberLexicon) -> list[Tok] | None:
    """A Latin run read wholly as glued morphemes ("ichiman" = ichi + man), or None."""
    if key[:2] not in lex.glued_heads or key[-2:] not in lex.glued_tails:
        return None  # most words: not even the start and end of a morpheme
    n = len(key)
    best: list[list[int] | None] = [None] * (n + 1)
    best[0] = []
    for i in range(n):
        path = best[i]
        if path is None:
            continue
        for j in range(n, i, -1):
            if best[j] is None and key[i:j] in lex.glued_latin:
                best[j] = [*path, j]
    cuts = best[n]
    if not cuts or len(cuts) < 2:
        return None
    out, prev = [], 0
    for cut in cuts:
        out.append(Tok(key[prev:cut], start + prev, start + cut, "word", "latin", glued=True))
        prev = cut
    return out


def _run_tokens(run: str, start: int, lex: NumberLexicon) -> list[Tok]:
    """One run of word characters as tokens: itself if the lexicon knows it, else cut into digits
    and letters, a known prefix taken off, glued numbers split."""
    key = norm(run)
    if run == "/-" or (len(run) == 1 and not run.isalnum()):
        return [Tok(key, start, start + len(run), "sign", "sign")]
    if run.isalpha() or lex.has(key) or not any(c.isdigit() for c in run):
        return _word_tokens(run, key, start, lex)
    out: list[Tok] = []
    for m in re.finditer(r"\d+|\D+", run):
        piece = m.group()
        if piece[0].isdecimal():
            out.append(Tok(piece, start + m.start(), start + m.end(), "num", "digit"))
        else:
            out.extend(_word_tokens(piece, norm(piece), start + m.start(), lex))
    return out


def _word_tokens(run: str, key: str, start: int, lex: NumberLexicon) -> list[Tok]:
    script = script_of(run[0] if run[0].isalpha() else next((c for c in run if c.isalpha()), run[0]))
    if key in lex.entries or len(key) != len(run):
        return [Tok(key, start, start + len(run), "word", script)]
    for prefix, role in lex.prefixes.items() if key[:1] in lex.prefix_heads else ():
        if key.startswith(prefix) and lex.has(key[len(prefix):]):
            cut = len(prefix)
            kind = "word" if role == "joiner" else "prefix"
            head = Tok(prefix if role == "joiner" else "", start, start + cut, kind, script, glued=True)
            return [head, Tok(key[cut:], start + cut, start + len(run), "word", script, glued=True)]
    if script in ("kana", "kanji") and lex.glued_other:
        return _split_glued_other(run, start, lex, script)
    if script == "latin" and lex.glued_latin:
        split = _split_glued_latin(key, start, lex)
        if split is not None:
            return split
    return [Tok(key, start, start + len(run), "word", script)]


def tokenize(text: str, lex: NumberLexicon) -> list[Tok]:
    toks: list[Tok] = []
    pos = 0
    for special in _SPECIAL.finditer(text) if _DIGIT.search(text) else ():
        toks.extend(_plain_tokens(text, pos, special.start(), lex))
        kind = special.lastgroup or "date"
        surface = special.group()
        value = _special_value(kind, surface)
        toks.append(Tok(surface, special.start(), special.end(), kind, "digit", value))
        pos = special.end()
    toks.extend(_plain_tokens(text, pos, len(text), lex))
    return _merge_phrases(text, _merge_digits(text, toks), lex)


def _special_value(kind: str, surface: str) -> float:
    digits = [int("".join(str(unicodedata.decimal(c)) for c in part)) for part in re.findall(r"\d+", surface)]
    if kind == "time":
        return digits[0] + digits[1] / 60
    if kind == "fraction":
        return digits[0] / digits[1]
    if kind == "phone":
        return float("".join(str(d) for d in digits))
    return float(digits[0])


def _plain_tokens(text: str, start: int, end: int, lex: NumberLexicon) -> list[Tok]:
    out: list[Tok] = []
    entries, prefix_heads, glued_heads = lex.entries, lex.prefix_heads, lex.glued_heads
    for m in _RUN.finditer(text, start, end):
        run = m.group()
        if run.isascii() and run.isalpha():  # the common case, inline: a plain Latin word
            key = run.lower()
            if key in entries or (key[:1] not in prefix_heads and key[:2] not in glued_heads):
                out.append(Tok(key, m.start(), m.end(), "word", "latin"))
                continue
        out.extend(_run_tokens(run, m.start(), lex))
    return out


def _merge_digits(text: str, toks: list[Tok]) -> list[Tok]:
    """Digits joined by one separator with no space ("1,200", "12.50") become one number."""
    out: list[Tok] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.kind == "num":
            j = i
            while (j + 2 < len(toks) and toks[j + 1].kind == "sign" and toks[j + 1].key in SEPARATORS
                   and toks[j + 2].kind == "num" and toks[j].end == toks[j + 1].start
                   and toks[j + 1].end == toks[j + 2].start):
                j += 2
            surface = text[t.start:toks[j].end]
            value = _digits_value(surface)
            if value is None:  # "1.2.3": read the first part only
                value, j = _digits_value(t.key), i
                surface = t.key
            out.append(Tok(surface, t.start, toks[j].end, "num", "digit", value or 0.0))
            i = j + 1
        else:
            out.append(t)
            i += 1
    return out


def gap(text: str, a: Tok, b: Tok) -> str:
    return text[a.end:b.start]


def _merge_phrases(text: str, toks: list[Tok], lex: NumberLexicon) -> list[Tok]:
    """Words that make one lexicon phrase ("per cent", "quatre-vingt-dix", "a.m") become one
    token; hyphens, apostrophes and dots between them count as spaces."""
    if not lex.phrase_lengths:
        return toks
    out: list[Tok] = []
    i = 0
    while i < len(toks):
        merged = None
        if toks[i].kind == "word" and toks[i].key in lex.phrase_starts:
            for size in lex.phrase_lengths:
                words: list[Tok] = []
                j = i
                while j < len(toks) and len(words) < size:
                    t = toks[j]
                    if t.kind == "word":
                        words.append(t)
                    elif not (t.kind == "sign" and t.key in _CONNECTORS and words):
                        break
                    j += 1
                if len(words) == size and lex.has(key := " ".join(w.key for w in words)):
                    merged = (Tok(key, words[0].start, words[-1].end, "word", words[0].script), j)
                    break
        if merged is None:
            out.append(toks[i])
            i += 1
        else:
            out.append(merged[0])
            i = merged[1]
    return out


class Word(NamedTuple):
    key: str  # as the lexicon keys it
    start: int
    end: int


STOPS = ".,!?;:\"()\u3002\u3001\uff1f\uff01\u060c\u061f"


def words_in(text: str, start: int = 0, end: int | None = None) -> list[Word]:
    """The words (and signs) of `text[start:end]` with their spans, keyed as the lexicon keys
    them: for the offer reader to look at what stands around a number. Sentence punctuation is
    left out, so a caller that must not look past it checks the text between."""
    stop = len(text) if end is None else end
    return [Word(phrase_key(m.group()), m.start(), m.end()) for m in _WORDS.finditer(text, start, stop)
            if m.group() not in STOPS]
