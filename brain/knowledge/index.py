"""BM25 retrieval over one scenario's chunks, through bm25s.

Seed 004 §2.4 asks for "playbook-first" grounding with a threshold: a query whose best hit scores
below `min_score` gets an empty list, never a weak match dressed up as knowledge. Seed 003
retrieves with BM25, and bm25s builds the index: per word, the BM25 score it gives each chunk it
occurs in (a sparse matrix, one column per word). A query's score for a chunk is the sum of its
words' scores there.

A learner's sentence over a scenario's tens or hundreds of chunks adds a few dozen of those
numbers: `retrieve` adds them in Python from the matrix's columns, copied out at indexing time,
in a few microseconds, where numpy's per-call overhead on vectors the length of the corpus costs
ten times that. A query that adds more than `VECTOR_POSTINGS` numbers (common words, a playbook
of thousands of chunks) goes through bm25s's own `get_scores`, which is faster there
(docs/performance.md has the figures). Both give the same numbers: the Python sum adds the words'
scores in query order, a repeated word again, rounding each step to float32 as bm25s's float32
vectors do (`tests/test_knowledge_index.py` holds the two to it).

The tokens are `brain.knowledge.tokens.tokenize`'s, so English, Hinglish and Devanagari queries
all work, and a chunk's section heading counts as part of its text (seed 004's reranking boost for
a matching title, done once at indexing time). Ties are broken by document order, so the same
query over the same chunks always returns the same list.
"""

from __future__ import annotations

import logging
import struct
from collections import OrderedDict
from collections.abc import Sequence

import bm25s
import numpy as np

from brain.knowledge.tokens import tokenize
from schemas.knowledge import Chunk, Retrieved

__all__ = ["DEFAULT_MIN_SCORE", "DEFAULT_TOP_K", "RECENT_ANSWERS", "VECTOR_POSTINGS", "KnowledgeIndex", "confidence"]

# bm25s sets its own logger to DEBUG on import, which would put a line per index build into the
# server's log whatever LOG_LEVEL says; its messages are worth nothing below a warning.
logging.getLogger("bm25s").setLevel(logging.WARNING)

DEFAULT_TOP_K = 3
DEFAULT_MIN_SCORE = 1.0
# Above this many (chunk, word) scores to add, bm25s's vectors beat the Python loop. Fitted over
# four corpora of 18 to 2,000 chunks on the 2-core development machine: the loop costs about
# 4.5 us + 0.14 us a score, bm25s about 6 us + 1.5 us a query word; at a learner's dozen words
# they meet near 100. A word in more chunks than this is not copied out of bm25s's matrix at all.
VECTOR_POSTINGS = 100
# A turn of the LLM brain asks the same question twice, a reply apart: the response policy for the
# prompt's notes, then the tip cards (both the learner's words and the item in play). At 1,000
# sessions that is some 300 turns a second times a reply of about 3 s in between.
RECENT_ANSWERS = 1024

_FLOAT32 = struct.Struct("f")
_TINY = float(np.finfo(np.float32).tiny)

Column = tuple[tuple[int, float], ...]
"""One word's (chunk position, score) pairs, in chunk order."""


def confidence(score: float, min_score: float = DEFAULT_MIN_SCORE) -> float:
    """A BM25 score squashed into 0..1: `score / (score + min_score)`, so 0.5 is the threshold."""
    if score <= 0:
        return 0.0
    return round(score / (score + max(min_score, 1e-9)), 3)


def _columns(bm25: bm25s.BM25, vocabulary: frozenset[str]) -> dict[str, Column]:
    """The columns of bm25s's matrix with at most `VECTOR_POSTINGS` entries, by word."""
    matrix = bm25.scores
    bounds: list[int] = matrix["indptr"].tolist()
    columns: dict[str, Column] = {}
    for word in vocabulary:
        start, end = bounds[bm25.vocab_dict[word]], bounds[bm25.vocab_dict[word] + 1]
        if end - start <= VECTOR_POSTINGS:
            pairs = zip(matrix["indices"][start:end].tolist(), matrix["data"][start:end].tolist(), strict=True)
            columns[word] = tuple(pairs)
    return columns


class KnowledgeIndex:
    """An immutable BM25 index over chunks. Build it off the event loop: it costs O(corpus).

    It remembers its last `RECENT_ANSWERS` answers, so the second asking of a question costs a
    lookup; like the rest of retrieval, call it from the event loop's thread only."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.chunks = tuple(chunks)
        self._vocabulary: frozenset[str] = frozenset()
        self._bm25: bm25s.BM25 | None = None
        self._columns: dict[str, Column] = {}
        self._recent: OrderedDict[tuple[str, int, float], tuple[Retrieved, ...]] = OrderedDict()
        documents = [
            tokenize(f"{c.metadata.section}\n{c.text_content}") for c in self.chunks
        ]
        if any(documents):
            self._bm25 = bm25s.BM25()
            # bm25s drops a document with no tokens from nothing: give it one that no query has.
            self._bm25.index([d or ["\x00"] for d in documents], show_progress=False)
            self._vocabulary = frozenset(t for d in documents for t in d)
            self._columns = _columns(self._bm25, self._vocabulary)

    def __len__(self) -> int:
        return len(self.chunks)

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every chunk for `query`, through bm25s (zeros when no word is indexed)."""
        return self._vector([t for t in tokenize(query) if t in self._vocabulary])

    def _vector(self, words: list[str]) -> np.ndarray:
        if self._bm25 is None or not words:
            return np.zeros(len(self.chunks), dtype=np.float32)
        return np.asarray(self._bm25.get_scores(words))

    def retrieve(
        self, query: str, top_k: int = DEFAULT_TOP_K, min_score: float = DEFAULT_MIN_SCORE
    ) -> list[Retrieved]:
        """The best `top_k` chunks scoring at least `min_score`, best first; empty if none do."""
        if top_k <= 0 or not self.chunks:
            return []
        key = (query, top_k, min_score)
        found = self._recent.get(key)
        if found is not None:
            self._recent.move_to_end(key)
            return list(found)
        found = self._recent[key] = tuple(
            Retrieved(
                chunk_id=self.chunks[i].chunk_id,
                score=round(score, 4),
                text_content=self.chunks[i].text_content,
                metadata=self.chunks[i].metadata,
            )
            for i, score in self._ranked(query, top_k, min_score)
        )
        if len(self._recent) > RECENT_ANSWERS:
            self._recent.popitem(last=False)
        return list(found)

    def _ranked(self, query: str, top_k: int, min_score: float) -> list[tuple[int, float]]:
        """(chunk position, score) of the best `top_k` chunks scoring at least `min_score`."""
        # numpy compares its float32 scores with min_score rounded to float32: so must we.
        threshold = float(np.float32(max(min_score, _TINY)))
        words = [t for t in tokenize(query) if t in self._vocabulary]
        columns = [self._columns[w] for w in words if w in self._columns]
        if len(columns) < len(words) or sum(map(len, columns)) > VECTOR_POSTINGS:
            return self._ranked_vectors(words, top_k, threshold)
        # Each step in float32, as bm25s adds: the float64 sum of two float32s, rounded to float32.
        pack, unpack = _FLOAT32.pack, _FLOAT32.unpack
        sums: dict[int, float] = {}
        for column in columns:
            for chunk, score in column:
                before = sums.get(chunk)
                sums[chunk] = score if before is None else unpack(pack(before + score))[0]
        # Best first, ties in document order.
        best = sorted((-score, chunk) for chunk, score in sums.items() if score >= threshold)
        return [(chunk, -negated) for negated, chunk in best[:top_k]]

    def _ranked_vectors(self, words: list[str], top_k: int, threshold: float) -> list[tuple[int, float]]:
        scores = self._vector(words)
        eligible = np.flatnonzero(scores >= threshold)
        # Best first, ties in document order: a stable sort on the negated scores.
        ranked = eligible[np.argsort(-scores[eligible], kind="stable")][:top_k]
        return [(i, float(scores[i])) for i in ranked.tolist()]
