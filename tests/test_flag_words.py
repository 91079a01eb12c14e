"""The watch page's plain words for reply flags (clients/browser/flags.js) are schemas/flags.py's.

The page cannot import Python, so it keeps its own copy of `FLAG_WORDS`; this test reads that
JavaScript object from the source, one `flag: "words",` entry a line, so the two cannot drift.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from schemas.flags import FLAG_WORDS

FLAGS_JS = pathlib.Path(__file__).resolve().parent.parent / "clients" / "browser" / "flags.js"
ENTRY = re.compile(r'\s*(?P<key>[A-Za-z_]\w*|"[^"\\]+"):\s*(?P<words>"(?:[^"\\]|\\.)*"),?\s*')


def js_flag_words(source: str) -> dict[str, str]:
    """The `FLAG_WORDS` object of flags.js. Any line in it that is not one entry is an error, so a
    reformatted table fails here instead of being read as fewer flags."""
    found = re.search(r"^export const FLAG_WORDS = \{\n(?P<body>.*?)^\};", source, re.S | re.M)
    assert found, "flags.js has no `export const FLAG_WORDS = {` ... `};`"
    words: dict[str, str] = {}
    for line in found.group("body").splitlines():
        if not line.strip() or line.strip().startswith("//"):
            continue
        entry = ENTRY.fullmatch(line)
        assert entry, f"flags.js: not a `flag: \"words\",` entry: {line!r}"
        key = entry.group("key")
        key = json.loads(key) if key.startswith('"') else key
        assert key not in words, f"flags.js names {key} twice"
        words[key] = json.loads(entry.group("words"))
    return words


def test_the_page_explains_exactly_the_flags_the_server_names() -> None:
    assert js_flag_words(FLAGS_JS.read_text("utf-8")).keys() == FLAG_WORDS.keys()


def test_the_page_says_each_flag_in_the_servers_words() -> None:
    assert js_flag_words(FLAGS_JS.read_text("utf-8")) == FLAG_WORDS


def test_the_reader_sees_a_missing_or_unreadable_entry() -> None:
    source = 'export const FLAG_WORDS = {\n  quote_rise: "No rise.",\n  "link": "No \\"links\\".",\n};\n'
    assert js_flag_words(source) == {"quote_rise": "No rise.", "link": 'No "links".'}
    with pytest.raises(AssertionError, match="not a"):
        js_flag_words('export const FLAG_WORDS = {\n  quote_rise:\n    "No rise.",\n};\n')
    with pytest.raises(AssertionError, match="twice"):
        js_flag_words('export const FLAG_WORDS = {\n  link: "a",\n  link: "b",\n};\n')
