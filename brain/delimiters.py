"""The user message's blocks and what keeps untrusted text inside them.

The user message (brain/prompt.py) carries everything that is not the server's own words, each
part inside a block opened and closed by a delimiter line. `neutralise` rewrites any line of
untrusted text (a transcript, history, the running summary, caller memory, a retrieved note) that
could pass for a delimiter, so that no text can close a block early or open one of its own: two
or more dash-like characters at either end (ASCII, en and em dashes, minus signs, box-drawing
rules, fullwidth forms, with zero-width or no-break characters in between) or a bare block label
such as `end user message` becomes `[delimiter-like line: ...]`, which keeps its words.

`neutralise` runs on every turn over text that is mostly the same as the turn before (the
cultural notes, the summary, a known learner's memory), so each line is decided in one of three
ways, all giving the same text: a line with nothing delimiter-like in it is returned as it is after
a cheap check (`_plainly_safe`); any other line of at most `CACHED_LINE_CHARS` characters is
rewritten once and kept in a bounded cache (`LINE_CACHE_SIZE` lines); a longer one is rewritten
each time (`_defang_slowly`, the full check, which the tests hold the other two to).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

SUMMARY_BLOCK = "CONVERSATION SUMMARY"
HISTORY_BLOCK = "CONVERSATION HISTORY"
CULTURE_BLOCK = "CULTURAL CONTEXT"
MESSAGE_BLOCK = "USER MESSAGE"
BLOCKS = (SUMMARY_BLOCK, HISTORY_BLOCK, CULTURE_BLOCK, MESSAGE_BLOCK)
# A block only some messages carry, before the others: what the server's records say of a learner
# the vendor has met before (brain/recall.py). Its labels are defanged like the others'.
LEARNER_BLOCK = "LEARNER MEMORY"
# Another: the learner's due review items, for the vendor to bring back (brain/practice.py).
PRACTICE_BLOCK = "PRACTICE TARGETS"
_ALL_BLOCKS = (*BLOCKS, LEARNER_BLOCK, PRACTICE_BLOCK)


def open_line(block: str) -> str:
    return f"--- {block} ---"


def close_line(block: str) -> str:
    return f"--- END {block} ---"


DELIMITER_LINES = tuple(line for block in BLOCKS for line in (open_line(block), close_line(block)))
MARK = "[delimiter-like line: {}]"

# Characters that read as a dash: every Unicode "Pd" (dash punctuation) character plus the usual
# look-alikes from other categories (minus signs, box-drawing rules, the katakana long vowel mark).
_DASH_LOOKALIKES = frozenset(
    "\u002d\u00ad\u02d7\u2012\u2013\u2014\u2015\u2043\u207b\u208b\u2212\u2500\u2501\u2796"
    "\u23af\u23e4\u2574\u2576\u2578\u257a\u2e3a\u2e3b\u30fc\uff0d\uff70\ufe58\ufe63\u1173"
)
_LABELS = frozenset(
    re.sub(r"\s+", " ", label) for block in _ALL_BLOCKS for label in (block, f"END {block}")
)


def _is_dash(char: str) -> bool:
    return char in _DASH_LOOKALIKES or unicodedata.category(char) == "Pd"


def _visible(line: str) -> str:
    """The line as a reader sees it: NFKC-normalised, without invisible format and control
    characters (zero-width spaces and joiners, BOMs, NULs)."""
    return "".join(c for c in unicodedata.normalize("NFKC", line)
                   if c == "\t" or unicodedata.category(c) not in ("Cf", "Cc"))


def _drop_controls(line: str) -> str:
    return "".join(c for c in line if c == "\t" or unicodedata.category(c) != "Cc")


def _strip_dashes(text: str) -> tuple[str, int, int]:
    """Strip dash runs (and spaces around them) from both ends; return the core and run sizes."""
    start, end = 0, len(text)
    lead = trail = 0
    while True:
        moved = False
        while start < end and text[start].isspace():
            start += 1
        while start < end and _is_dash(text[start]):
            start += 1
            lead += 1
            moved = True
        if not moved:
            break
    while True:
        moved = False
        while end > start and text[end - 1].isspace():
            end -= 1
        while end > start and _is_dash(text[end - 1]):
            end -= 1
            trail += 1
            moved = True
        if not moved:
            break
    return text[start:end], lead, trail


def _collapse_runs(text: str) -> str:
    """Shorten any run of three or more dash-like characters inside a line to a single hyphen."""
    out: list[str] = []
    run = 0
    for char in text:
        if _is_dash(char):
            run += 1
            continue
        if run:
            out.append("-" if run >= 3 else "-" * run)
            run = 0
        out.append(char)
    if run:
        out.append("-" if run >= 3 else "-" * run)
    return "".join(out)


# Kept lines: 1,024 lines of at most 1,100 characters (a retrieved note is a chunk of at most 1,000
# and its label) hold under 10 MB even if every character took four bytes; in practice well under 1 MB.
LINE_CACHE_SIZE = 1024
CACHED_LINE_CHARS = 1100
# What sends an ASCII line down the full check: a hyphen, or a control character other than tab.
_ASCII_SUSPECTS = re.compile("[\x00-\x08\x0a-\x1f\x7f-]")
_SPACE_RUNS = re.compile(r"\s+")
_LABEL_TAILS = tuple(block.split()[-1].lower() for block in _ALL_BLOCKS)  # summary, history, context, message, memory


def _label(core: str) -> str:
    """The block label `core` would read as: spaces collapsed, upper case."""
    return _SPACE_RUNS.sub(" ", core).strip().upper()


def _plainly_safe(line: str) -> bool:
    """Whether the full check keeps `line` as it is, decided cheaply: no hyphen or other dash-like
    character, no control or invisible format character, already NFKC-normal, and not a bare block
    label. Then the line as a reader sees it is the line itself, with no dash at either end to
    strip, nothing to collapse and nothing to drop, so the full check would return it unchanged."""
    if _ASCII_SUSPECTS.search(line):
        return False
    if line.isascii():
        low = line.lower()
        if not any(tail in low for tail in _LABEL_TAILS):  # every label ends in one of these words
            return True
    else:
        if not unicodedata.is_normalized("NFKC", line):
            return False
        for char in set(line):
            if char > "\x7f" and (char in _DASH_LOOKALIKES or unicodedata.category(char) in ("Pd", "Cf", "Cc")):
                return False
    return _label(line) not in _LABELS  # outside ASCII, upper case can make words ("meßage")


def _defang_line(line: str) -> str:
    if _plainly_safe(line):
        return line
    if len(line) <= CACHED_LINE_CHARS:
        return _defang_kept(line)
    return _defang_slowly(line)


# In ASCII the only dash is "-", NFKC changes nothing and the only invisible characters are the
# C0 controls and DEL: the same steps reduce to str.translate and one regex, for every bulleted line
# ("- ...") of the notes and the learner's memory the first time it is seen.
_ASCII_CONTROLS = dict.fromkeys([*range(9), *range(10, 32), 127])
_HYPHEN_RUN = re.compile("-{3,}")


def _collapse_hyphens(text: str) -> str:
    return _HYPHEN_RUN.sub("-", text)


def _defang_slowly(line: str) -> str:
    if line.isascii():
        visible = line.translate(_ASCII_CONTROLS)
        return _defang_visible(visible, visible, _collapse_hyphens)
    return _defang_visible(_visible(line), _drop_controls(line), _collapse_runs)


# The full check's answers for the lines that are not plainly safe: the same notes, summary and
# memory lines come back turn after turn (bounded: least recently used first out).
_defang_kept = lru_cache(maxsize=LINE_CACHE_SIZE)(_defang_slowly)


def _defang_generic(line: str) -> str:
    """`_defang_slowly` without the ASCII shortcut (the reference the tests compare it with)."""
    return _defang_visible(_visible(line), _drop_controls(line), _collapse_runs)


def _defang_visible(visible: str, kept: str, collapse: Callable[[str], str]) -> str:
    core, lead, trail = _strip_dashes(visible)
    if lead >= 2 or trail >= 2 or _label(core) in _LABELS:
        return MARK.format(collapse(core).replace("[", "(").replace("]", ")"))
    return collapse(kept)


def neutralise(text: str) -> str:
    """Make untrusted text safe to place inside a delimited block.

    Every kind of line break (\\r\\n, \\r, U+2028, U+0085, ...) becomes \\n. A line that imitates a
    delimiter, i.e. one that starts or ends with two or more dash-like characters (after dropping
    spaces and invisible characters), or that consists of a block label such as "END USER MESSAGE"
    with or without dashes, is replaced by a visible marker that keeps its words. Longer dash runs
    inside other lines are shortened to one hyphen. Case does not matter.
    """
    return "\n".join(_defang_line(line) for line in text.splitlines())
