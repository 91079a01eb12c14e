"""Cut the vendor's streamed words into pieces to speak, so that each is spoken as soon as it is whole.

A piece is a sentence, except the reply's first when the speaker asks for a first clause
(`first_clause_words`): that one ends at the first clause boundary (a comma, semicolon, colon or
dash followed by a space) once it holds that many words, so the first audio waits for a clause,
not a whole sentence ("Dekhiye bhaiya, yeh sabse acche tamatar hain," then the rest). Pieces are
the text's own characters, stripped at the cut: joined with one space they give the text back
where it had one space between them.
"""

from __future__ import annotations

import re

# A sentence ends at . ! ? । (Devanagari danda) or … followed by a space; a long run without one
# is cut at a comma, so that the first audio never waits for a whole rambling sentence.
_END = re.compile(r"[.!?\u0964\u2026]+[\"')\]]*\s+")
_COMMA = re.compile(r"[,;:]\s+")
_CLAUSE = re.compile(r"(?:[,;:]|\s[\u2013\u2014-])\s+")  # a clause boundary: ", " "; " ": " " - " " — "
LONG_CLAUSE_CHARS = 120


class SentenceSplitter:
    """Feed text pieces; whole pieces come out in order, the remainder with `flush`.

    `first_clause_words`: the first piece may end at a clause boundary once it has that many words
    (0: sentences only)."""

    __slots__ = ("_buf", "_first_clause")

    def __init__(self, first_clause_words: int = 0) -> None:
        self._buf = ""
        self._first_clause = first_clause_words

    def feed(self, text: str) -> list[str]:
        self._buf += text
        out: list[str] = []
        while True:
            match = _END.search(self._buf)
            if self._first_clause:
                clause = self._first_clause_end(match.start() if match else len(self._buf))
                if clause is not None:
                    match = clause
            if match is None and len(self._buf) > LONG_CLAUSE_CHARS:
                commas = [m for m in _COMMA.finditer(self._buf) if m.end() <= LONG_CLAUSE_CHARS]
                match = commas[-1] if commas else None
            if match is None:
                return out
            piece = self._buf[: match.end()].strip()
            self._buf = self._buf[match.end():]
            if piece:
                out.append(piece)
                self._first_clause = 0  # only the reply's first piece is a clause

    def _first_clause_end(self, before: int) -> re.Match[str] | None:
        """The first clause boundary before `before` with enough words ahead of it."""
        for boundary in _CLAUSE.finditer(self._buf, 0, before):
            if len(self._buf[: boundary.start()].split()) >= self._first_clause:
                return boundary
        return None

    @property
    def pending(self) -> str:
        """The text fed and not yet cut into a piece."""
        return self._buf

    def flush(self) -> str:
        rest, self._buf = self._buf.strip(), ""
        if rest:
            self._first_clause = 0
        return rest


def split_sentences(text: str, first_clause_words: int = 0) -> list[str]:
    splitter = SentenceSplitter(first_clause_words)
    out = splitter.feed(text)
    rest = splitter.flush()
    return [*out, rest] if rest else out
