"""BM25 retrieval over one scenario's chunks, through bm25s.

Seed 004 §2.4 asks for "playbook-first" grounding with a threshold: a query whose best hit scores
below `min_score` gets an empty list, never a weak match dressed up as knowledge. Seed 003
retrieves with BM25; bm25s computes it with sparse matrices in numpy, so scoring 10,000 chunks is a
handful of vector operations rather than a Python loop (docs/performance.md has the figures).

The tokens are `brain.knowledge.tokens.tokenize`'s, so English, Hinglish and Devanagari queries
all work, and a chunk's section heading counts as part of its text (seed 004's reranking boost for
a matching title, done once at indexing time). Ties are broken by document order, so the same
query over the same chunks always returns the same list.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import bm25s
import numpy as np

from brain.knowledge.tokens import tokenize
from schemas.knowledge import Chunk, Retrieved

__all__ = ["DEFAULT_MIN_SCORE", "DEFAULT_TOP_K", "KnowledgeIndex", "confidence"]

# bm25s sets its own logger to DEBUG on import, which would put a line per index build into the
# server's log whatever LOG_LEVEL says; its messages are worth nothing below a warning.
logging.getLogger("bm25s").setLevel(logging.WARNING)

DEFAULT_TOP_K = 3
DEFAULT_MIN_SCORE = 1.0


def confidence(score: float, min_score: float = DEFAULT_MIN_SCORE) -> float:
    """A BM25 score squashed into 0..1: `score / (score + min_score)`, so 0.5 is the threshold."""
    if score <= 0:
        return 0.0
    return round(score / (score + max(min_score, 1e-9)), 3)


class KnowledgeIndex:
    """An immutable BM25 index over chunks. Build it off the event loop: it costs O(corpus)."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.chunks = tuple(chunks)
        self._vocabulary: frozenset[str] = frozenset()
        self._bm25: bm25s.BM25 | None = None
        documents = [
            tokenize(f"{c.metadata.section}\n{c.text_content}") for c in self.chunks
        ]
        if any(documents):
            self._bm25 = bm25s.BM25()
            # bm25s drops a document with no tokens from nothing: give it one that no query has.
            self._bm25.index([d or ["\x00"] for d in documents], show_progress=False)
            self._vocabulary = frozenset(t for d in documents for t in d)

    def __len__(self) -> int:
        return len(self.chunks)

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every chunk for `query` (zeros when no query word is indexed)."""
        words = [t for t in tokenize(query) if t in self._vocabulary]
        if self._bm25 is None or not words:
            return np.zeros(len(self.chunks), dtype=np.float32)
        return np.asarray(self._bm25.get_scores(words))

    def retrieve(
        self, query: str, top_k: int = DEFAULT_TOP_K, min_score: float = DEFAULT_MIN_SCORE
    ) -> list[Retrieved]:
        """The best `top_k` chunks scoring at least `min_score`, best first; empty if none do."""
        if top_k <= 0 or not self.chunks:
            return []
        scores = self.scores(query)
        eligible = np.flatnonzero(scores >= max(min_score, np.finfo(np.float32).tiny))
        if eligible.size == 0:
            return []
        # Best first, ties in document order: a stable sort on the negated scores.
        ranked = eligible[np.argsort(-scores[eligible], kind="stable")][:top_k]
        return [
            Retrieved(
                chunk_id=self.chunks[i].chunk_id,
                score=round(float(scores[i]), 4),
                text_content=self.chunks[i].text_content,
                metadata=self.chunks[i].metadata,
            )
            for i in ranked.tolist()
        ]
