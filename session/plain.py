"""Whether a reply line is plain: nothing in it but words the gate would pass as written.

`spoken` judges a whole line with `ReplyGate`, unit by unit, at tens of microseconds a line. Most
lines a vendor says need none of that: no markup, no link, no odd spacing, no abbreviation that
looks like a sentence's end. `suspect` says which lines do; the rest go out as written unless they
name a price the engine refused. Pure, so `tests/test_spoken.py` holds it to the gate.
"""

from __future__ import annotations

import re

# Whatever could make the gate change a line other than its prices: markup, a line break or odd
# spaces, a link, a space before punctuation, a dash between clauses, an abbreviation's full stop.
SUSPECT = re.compile(
    r"[*_`#>\[\]~\u2022@\u2013\u2014]|[^\S ]|https?:|www\.|\.(?:com|in|org|net|io|co|info|biz|shop|store|app|jp"
    r"|ma|fr|uk|de|me)\b|\s[,.!?;:\u0964]|  |^\s|\s$|^[-+\d]|^\W*$|\b(?:rs|mr|mrs|dr|st|no|vs|approx|sh|smt)\.\s",
    re.IGNORECASE,
)
# `SUSPECT` in pieces, for a line in ASCII, lowercased (exactly what IGNORECASE matches there): one
# alternation of many branches tried at every position, case-folded, cost 14 us a line; these
# pieces each let the engine skip to a character it looks for, about 3 us in all.
_ASCII_CHARS = re.compile(r"[*_`#>\[\]~@]|[^\S ]|\s[,.!?;:]|  ")
_ASCII_LINK = re.compile(r"https?:|www\.|\.(?:com|in|org|net|io|co|info|biz|shop|store|app|jp|ma|fr|uk|de|me)\b")
_DOT_SPACE = re.compile(r"\.\s")
_ASCII_ABBREVIATION = re.compile(r"\b(?:rs|mr|mrs|dr|st|no|vs|approx|sh|smt)\Z")
_WORD_CHAR = re.compile(r"\w")


def suspect(text: str) -> bool:
    """Whether `SUSPECT` finds anything in `text`: the gate must read the line word by word."""
    if not text.isascii():
        return SUSPECT.search(text) is not None
    if not text or text[0].isspace() or text[-1].isspace() or text[0] in "-+" or text[0].isdecimal():
        return True  # ^\s, \s$, ^[-+\d] (and an empty line, which ^\W*$ finds)
    low = text.lower()
    if _ASCII_CHARS.search(low) or _ASCII_LINK.search(low) or not _WORD_CHAR.search(low):
        return True
    return any(_ASCII_ABBREVIATION.search(low, max(0, m.start() - 6), m.start()) for m in _DOT_SPACE.finditer(low))
