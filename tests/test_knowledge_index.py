"""`KnowledgeIndex` adds BM25 scores in Python for small queries: the numbers must be bm25s's.

The reference here is what `retrieve` did before (bm25s's `get_scores` over the whole corpus,
numpy's threshold and stable sort), written out against bm25s directly.
"""

from __future__ import annotations

import bm25s
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from brain.knowledge.chunking import chunk_text
from brain.knowledge.index import VECTOR_POSTINGS, KnowledgeIndex
from brain.knowledge.library import pack_chunks
from brain.knowledge.tokens import tokenize
from schemas.knowledge import Chunk, ChunkMeta

NOW = "2026-11-25T09:00:00+00:00"
# Few words, so chunks share them and a chunk's score is a sum of several; `price`/`prices` and
# `kitne`/`कितने` share tokens, `the` and `hai` are stop words.
WORDS = ("price", "prices", "kitne", "कितने", "chai", "cash", "bhaiya", "discount", "walk", "silk",
         "दाम", "daam", "the", "hai", "brass", "tea")


def reference(chunks: list[Chunk], query: str, top_k: int, min_score: float) -> list[tuple[int, float]]:
    """(chunk position, score) of the best `top_k` chunks, as bm25s and numpy rank them."""
    documents = [tokenize(f"{c.metadata.section}\n{c.text_content}") for c in chunks]
    vocabulary = {t for d in documents for t in d}
    words = [t for t in tokenize(query) if t in vocabulary]
    if not words or top_k <= 0:
        return []
    bm25 = bm25s.BM25()
    bm25.index([d or ["\x00"] for d in documents], show_progress=False)
    scores = np.asarray(bm25.get_scores(words))
    eligible = np.flatnonzero(scores >= max(min_score, np.finfo(np.float32).tiny))
    ranked = eligible[np.argsort(-scores[eligible], kind="stable")][:top_k]
    return [(i, float(scores[i])) for i in ranked.tolist()]


def as_hits(chunks: list[Chunk], ranked: list[tuple[int, float]]) -> list[tuple[str, float]]:
    return [(chunks[i].chunk_id, round(score, 4)) for i, score in ranked]


def make_chunks(texts: list[tuple[str, str]]) -> list[Chunk]:
    return [Chunk(chunk_id=f"c{n}", text_content=text,
                  metadata=ChunkMeta(source_file="t.md", ingested_at=NOW, section=section))
            for n, (section, text) in enumerate(texts)]


sentences = st.lists(st.sampled_from(WORDS), max_size=25).map(" ".join)


@given(
    texts=st.lists(st.tuples(st.sampled_from(("", "Paying", "chai")), sentences), min_size=1, max_size=12),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join),
    top_k=st.integers(0, 14),
    data=st.data(),
)
def test_scores_order_and_threshold_are_bm25s_s(texts: list[tuple[str, str]], query: str, top_k: int,
                                               data: st.DataObject) -> None:
    chunks = make_chunks(texts)
    index = KnowledgeIndex(chunks)
    everything = reference(chunks, query, len(chunks), 0.0)
    # Exactly bm25s's float32 sums, not merely the same after rounding; the ranking with them.
    assert index._ranked(query, len(chunks), 0.0) == everything
    # A threshold equal to a score, or a float64 a hair either side of one, as numpy compares it.
    at = [score for _, score in everything]
    min_score = data.draw(st.one_of(
        st.floats(0.0, 8.0),
        st.sampled_from(at or [1.0]).flatmap(lambda s: st.sampled_from((s, s * (1 + 1e-9), s * (1 - 1e-9)))),
    ))
    hits = [(h.chunk_id, h.score) for h in index.retrieve(query, top_k, min_score)]
    assert hits == as_hits(chunks, reference(chunks, query, top_k, min_score))


def test_a_repeated_query_word_counts_again_as_in_bm25s() -> None:
    chunks = make_chunks([("", "cash price"), ("", "cash cash silk"), ("", "price tea")])
    index = KnowledgeIndex(chunks)
    once, twice = index._ranked("cash", 3, 0.0), index._ranked("cash cash", 3, 0.0)
    assert twice == reference(chunks, "cash cash", 3, 0.0)
    assert [i for i, _ in twice] == [i for i, _ in once] and twice[0][1] > once[0][1]


def test_a_query_of_common_words_in_a_large_corpus_agrees_too() -> None:
    """Words in more than `VECTOR_POSTINGS` chunks: bm25s's vectors score the query, same answer."""
    pack = pack_chunks("jaipur-bazaar", NOW)
    notes = "\n\n".join(f"Note {n}: {WORDS[n % 7]} {WORDS[n % 11]} price and tea at stall {n}." for n in range(300))
    chunks = [*pack, *chunk_text(notes, "notes.md", NOW)]
    index = KnowledgeIndex(chunks)
    assert sum("price" in tokenize(c.text_content) for c in chunks) > VECTOR_POSTINGS
    for query in ("price of tea", "kitne ka hai bhaiya", "walk away from the silk stall", "cash discount"):
        for top_k, min_score in ((3, 1.0), (10, 0.5), (len(chunks), 0.0)):
            hits = [(h.chunk_id, h.score) for h in index.retrieve(query, top_k, min_score)]
            assert hits == as_hits(chunks, reference(chunks, query, top_k, min_score)), query


def test_the_same_question_twice_gets_the_same_answer_as_its_own_list() -> None:
    """The LLM turn's policy and its tip cards ask alike: the second is the index's recent answer."""
    index = KnowledgeIndex(pack_chunks("jaipur-bazaar", NOW))
    first = index.retrieve("bhaiya kitne ka hai silk")
    second = index.retrieve("bhaiya kitne ka hai silk")
    assert first and second == first and second is not first
    assert all(a is b for a, b in zip(first, second, strict=True))
    first.clear()
    assert index.retrieve("bhaiya kitne ka hai silk") == second
    assert index.retrieve("bhaiya kitne ka hai silk", top_k=1) == second[:1]
