"""Replies a speech engine can read aloud (seed 004 §1.2; seed 001's link blocker).

Every vendor line is checked after the brain and before anyone hears it. `speakable(text)`
returns the line as it may be spoken and the flags naming what had to change:

- `markdown`: list bullets, headings, emphasis, code ticks and link brackets are removed (a
  Markdown link keeps its words and loses its address);
- `link`: web addresses (`http://`, `https://`, `www.`) are removed;
- `too_long`: only the first two sentences are kept.

Pure and deterministic, like the rest of the rules: the same text always gives the same answer.
"""

from __future__ import annotations

import re

__all__ = ["MAX_SENTENCES", "checked", "speakable"]

MAX_SENTENCES = 2

_MD_LINK = re.compile(r"\[([^\]\n]{0,200})\]\([^)\s]{0,500}\)")
# An address ends before the punctuation that closes its sentence.
_URL = re.compile(r"(?:https?://|www\.)[^\s<>()\"']*[^\s<>()\"'.,!?;:]", re.IGNORECASE)
_LINE_MARK = re.compile(r"^[ \t]*(?:#{1,6}[ \t]+|[-*+•][ \t]+|\d{1,3}[.)][ \t]+|>[ \t]*)", re.MULTILINE)
_EMPHASIS = re.compile(r"(\*\*|__|`+|~~)")
# A sentence ends at . ! ? or the danda followed by a space (so "3.5 kilo" is one sentence).
_SENTENCE_END = re.compile(r"(?<=[.!?।])\s+|(?<=[.!?।][\"')\]])\s+")
_SPACE = re.compile(r"\s+")
_BLANKS = re.compile(r"[^\S\n]+")


# Whatever could make the full check change a line: markup characters, a line break or a leading
# list mark, an address, a space before punctuation, doubled or odd spaces. A line with none of
# them and fewer than three sentence ends is returned as it is, without the full check (a few
# microseconds per turn; `tests/test_policy.py` checks that both paths agree).
_SUSPECT = re.compile(r"[*_`#>\[\]~•]|[^\S ]|https?:|www\.|\s[,.!?।]|  |^\s|\s$|^[-+\d]", re.IGNORECASE)


def speakable(text: str, max_sentences: int = MAX_SENTENCES, price: int | None = None) -> tuple[str, tuple[str, ...]]:
    """The line as it may be spoken, and what was changed (empty when nothing was). A learner
    level may ask for fewer sentences than `MAX_SENTENCES` (a beginner's one). A line cut short
    keeps a sentence that names `price` (the new price, as 120 or 1,200) if it had one: a price the
    learner never hears must not be one the vendor holds them to."""
    if text and not _SUSPECT.search(text) and len(_SENTENCE_END.findall(text)) < max_sentences:
        return text, ()
    return checked(text, max_sentences, price)


def checked(text: str, max_sentences: int = MAX_SENTENCES, price: int | None = None) -> tuple[str, tuple[str, ...]]:
    """`speakable` without its shortcut: every rule applied, until the line no longer changes.

    One pass can uncover more to clean: removing code ticks or an address can leave a leading `>`
    or `-` that reads as a list mark. Every pass that changes the line makes it shorter or turns it
    into the fixed "Haan ji?", so a few passes reach a line that a further pass leaves alone.
    """
    line, flags = _checked_once(text, max_sentences, price)
    for _ in range(8):
        again, more = _checked_once(line, max_sentences, price)
        if again == line:
            break
        line = again
        flags += tuple(f for f in more if f not in flags)
    return line, flags


def _checked_once(text: str, max_sentences: int, price: int | None) -> tuple[str, tuple[str, ...]]:
    flags: list[str] = []
    base = _BLANKS.sub(" ", text)  # every kind of space but the newline, as one space
    cleaned = _MD_LINK.sub(r"\1", base)
    cleaned = _LINE_MARK.sub("", cleaned)
    cleaned = _EMPHASIS.sub("", cleaned)
    if cleaned != base:
        flags.append("markdown")
    without_links = _URL.sub("", cleaned)
    if without_links != cleaned:
        flags.append("link")
    flat = _SPACE.sub(" ", without_links).strip()
    flat = re.sub(r"\s+([,.!?।])", r"\1", flat)
    sentences = [s for s in _SENTENCE_END.split(flat) if s.strip(" .,!?।")]
    if len(sentences) > max_sentences:
        flags.append("too_long")
        chosen = sentences[:max_sentences]
        keep = () if price is None else (str(price), f"{price:,}")
        if keep and not any(k in s for s in chosen for k in keep):
            holder = next((s for s in sentences[max_sentences:] if any(k in s for k in keep)), None)
            if holder is not None:
                chosen = [*chosen[: max_sentences - 1], holder]
        flat = " ".join(chosen)
    if not flat:
        flat = "Haan ji?"
    if not flags and flat == text:
        return text, ()
    return flat, tuple(flags)
