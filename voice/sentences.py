"""Cut the vendor's streamed words into sentences, so that each is spoken as soon as it is whole."""

from __future__ import annotations

import re

# A sentence ends at . ! ? । (Devanagari danda) or … followed by a space; a long run without one
# is cut at a comma, so that the first audio never waits for a whole rambling sentence.
_END = re.compile(r"[.!?\u0964\u2026]+[\"')\]]*\s+")
_COMMA = re.compile(r"[,;:]\s+")
LONG_CLAUSE_CHARS = 120


class SentenceSplitter:
    """Feed text pieces; whole sentences come out in order, the remainder with `flush`."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = ""

    def feed(self, text: str) -> list[str]:
        self._buf += text
        out: list[str] = []
        while True:
            match = _END.search(self._buf)
            if match is None and len(self._buf) > LONG_CLAUSE_CHARS:
                commas = [m for m in _COMMA.finditer(self._buf) if m.end() <= LONG_CLAUSE_CHARS]
                match = commas[-1] if commas else None
            if match is None:
                return out
            sentence = self._buf[: match.end()].strip()
            self._buf = self._buf[match.end():]
            if sentence:
                out.append(sentence)

    def flush(self) -> str:
        rest, self._buf = self._buf.strip(), ""
        return rest


def split_sentences(text: str) -> list[str]:
    splitter = SentenceSplitter()
    out = splitter.feed(text)
    rest = splitter.flush()
    return [*out, rest] if rest else out
