"""How long does one retrieval take over a scenario with 10,000 chunks? (issue #13: p99 <= 2 ms)

Builds a synthetic playbook of `--chunks` paragraphs (default 10,000) from the Jaipur pack's own
knowledge words plus filler vocabulary in English, Hinglish and Devanagari, seeded so every run
indexes the same text. Then it times `KnowledgeIndex.retrieve` (tokenise the query, BM25 scores
from bm25s's sparse matrices, threshold, top-k, build the result objects) for `--queries` learner
sentences, all different, and, as the baseline of the same run, a straightforward pure-Python
scorer over the same chunks: token-set overlap per chunk, what `brain/culture.py` used to do for a
dozen customs lines. The ratio says what bm25s buys at this size. `bm25s_before_issue_14` times
`retrieve` as it was before issue #14 (`bm25s_retrieve`) over the same sentences, checking that
both give the same chunks and scores.

    python -m benchmarks.retrieval                 # 10,000 chunks, 2,000 queries
    python -m benchmarks.retrieval --chunks 1000

Figures are printed and written to artifacts/retrieval.json.

`--per-turn` measures instead what knowledge costs per learner turn (issue #14): with the LLM
brain, the response policy's retrieval for the prompt's notes and the `tips` event's cards, both
for the learner's words, which real learners rarely repeat. CPU time (`time.process_time`) over
`--turns` turns of sentences that never repeat, over the Jaipur pack's own notes and over the pack
with a synthetic playbook of `--playbook` notes. In the same run, the path before issue #14 (bm25s
`get_scores` and numpy for each of the two retrievals, every card's sentences and id worked out
again) against the library's calls now, alternating, best of `--rounds`:

    python -m benchmarks.retrieval --per-turn      # 2,000 turns, 3 rounds, a 300-note playbook

Figures are printed and written to artifacts/retrieval_turn.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
import tracemalloc
from pathlib import Path

import numpy as np

from brain.knowledge import cards as tip_cards
from brain.knowledge.chunking import chunk_text
from brain.knowledge.index import DEFAULT_MIN_SCORE, KnowledgeIndex
from brain.knowledge.library import KnowledgeLibrary, pack_chunks
from brain.knowledge.store import MemoryPlaybookStore
from brain.knowledge.tokens import tokenize
from schemas.knowledge import Retrieved, TipCard
from schemas.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
NOW = "2026-11-25T00:00:00+00:00"
FILLER = (
    "price quote haggle vendor stall cash discount kilo bundle walk away rapport respect tea "
    "evening fresh ripe bargain offer counter polite smile friend market spice silk brass "
    "bhaiya didi kitne mehenga sasta thoda kam daam pakka theek chalo rehne achha bahut "
    "भैया कितने महंगा सस्ता थोड़ा दाम पक्का ठीक चलो अच्छा बहुत दुकान ग्राहक"
).split()
QUERIES = (
    "how much is it bhaiya", "kitne ka hai", "कितने का है", "bahut mehenga hai, thoda kam karo",
    "should I walk away now", "is cash cheaper", "बहुत महंगा है", "what is the weather in Tokyo",
    "can I get coriander free with two kilos", "sahi daam lagao",
)


def corpus(size: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    vocabulary = FILLER + [w for c in pack_chunks("jaipur-bazaar", NOW) for w in c.text_content.split()]
    paragraphs = []
    for n in range(size):
        words = [rng.choice(vocabulary) for _ in range(rng.randint(25, 70))]
        paragraphs.append(f"Note {n}: " + " ".join(words) + ".")
    return paragraphs


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def summary(samples_s: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {"p50_ms": round(percentile(ms, 50), 4), "p95_ms": round(percentile(ms, 95), 4),
            "p99_ms": round(percentile(ms, 99), 4), "mean_ms": round(statistics.fmean(ms), 4)}


SCENARIO = "jaipur-bazaar"


def zipf_playbook(size: int, seed: int = 11) -> str:
    """`size` notes of 25-70 words drawn with Zipf weights (a few words common, most rare) from the
    pack's words, the filler and made-up Hinglish-like words: closer to a teacher's prose than
    `corpus`, whose every word is in a large share of its chunks."""
    rng = random.Random(seed)
    made_up = ["".join(rng.choice("kgcjtdnpbmyrlvsh") + rng.choice("aeiou") for _ in range(3)) for _ in range(3000)]
    vocabulary = sorted({w for c in pack_chunks(SCENARIO, NOW) for w in c.text_content.split()}) + FILLER + made_up
    rng.shuffle(vocabulary)
    weights = [1 / rank for rank in range(1, len(vocabulary) + 1)]
    return "\n\n".join(f"Note {n}: " + " ".join(rng.choices(vocabulary, weights, k=rng.randint(25, 70))) + "."
                       for n in range(size))


def learner_sentences(count: int, seed: int = 3) -> list[str]:
    """`count` different sentences of 5-20 words from the queries' and the pack's words."""
    rng = random.Random(seed)
    words = " ".join(QUERIES).split() + [w for c in pack_chunks(SCENARIO, NOW) for w in c.text_content.split()]
    sentences: dict[str, None] = {}
    while len(sentences) < count:
        sentences[" ".join(rng.choice(words) for _ in range(rng.randint(5, 20)))] = None
    return list(sentences)


def bm25s_retrieve(index: KnowledgeIndex, query: str, top_k: int, min_score: float) -> list[Retrieved]:
    """`KnowledgeIndex.retrieve` before issue #14: bm25s's score of every chunk, numpy's threshold and sort."""
    scores = index.scores(query)
    eligible = np.flatnonzero(scores >= max(min_score, np.finfo(np.float32).tiny))
    ranked = eligible[np.argsort(-scores[eligible], kind="stable")][:top_k]
    return [Retrieved(chunk_id=index.chunks[i].chunk_id, score=round(float(scores[i]), 4),
                      text_content=index.chunks[i].text_content, metadata=index.chunks[i].metadata)
            for i in ranked.tolist()]


def turn_before(library: KnowledgeLibrary, query: str) -> tuple[TipCard, ...]:
    """The policy's retrieval, then the tips' own retrieval and cards, as before issue #14."""
    index = library.index(SCENARIO)
    bm25s_retrieve(index, query, library.top_k, library.min_score)
    hits = bm25s_retrieve(index, query, library.top_k, library.min_score)
    tip_cards._prepare.cache_clear()  # every card's sentences, title and id worked out again
    tip_cards._card_id.cache_clear()
    tip = load_scenario(SCENARIO).policy.generic_tip
    return tuple(tip_cards.generate_cards(query, hits, generic=(tip.title, tip.body), min_score=library.min_score))


def turn_after(library: KnowledgeLibrary, query: str) -> tuple[TipCard, ...]:
    library.retrieve(SCENARIO, query)
    return library.cards(SCENARIO, query)


def cpu_per_turn(library: KnowledgeLibrary, turns: int, rounds: int) -> dict[str, float | int]:
    """Best of `rounds` for each path, alternating, every turn a sentence not seen before."""
    sentences = iter(learner_sentences(turns * (2 * rounds + 1)))
    for _ in range(turns):  # same cards both ways; warms the scenario's caches as a server would be
        query = next(sentences)
        assert turn_before(library, query) == turn_after(library, query), query
    best = {"before": float("inf"), "after": float("inf")}
    for _ in range(rounds):
        for name, turn in (("before", turn_before), ("after", turn_after)):
            queries = [next(sentences) for _ in range(turns)]
            started = time.process_time()
            for query in queries:
                turn(library, query)
            best[name] = min(best[name], (time.process_time() - started) / turns)
    return {"chunks": len(library.index(SCENARIO)), "turns": turns,
            "before_us": round(best["before"] * 1e6, 1), "after_us": round(best["after"] * 1e6, 1),
            "ratio_before_over_after": round(best["before"] / best["after"], 2)}


def per_turn(turns: int, rounds: int, playbook: int) -> dict[str, object]:
    pack = KnowledgeLibrary(MemoryPlaybookStore())
    with_playbook = KnowledgeLibrary(MemoryPlaybookStore())
    with_playbook.ingest(SCENARIO, "playbook.md", zipf_playbook(playbook).encode(), replace=False)
    return {"rounds": rounds, "pack": cpu_per_turn(pack, turns, rounds),
            "pack_and_playbook": cpu_per_turn(with_playbook, turns, rounds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--per-turn", action="store_true", help="CPU per learner turn, before and after issue #14")
    parser.add_argument("--turns", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--playbook", type=int, default=300, help="notes in the --per-turn playbook")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.per_turn:
        write(per_turn(args.turns, args.rounds, args.playbook), args.out or ROOT / "artifacts" / "retrieval_turn.json")
        return

    text = "\n\n".join(corpus(args.chunks))
    chunks = chunk_text(text, "synthetic.md", NOW)
    tracemalloc.start()
    started = time.perf_counter()
    index = KnowledgeIndex(chunks)
    build_s = time.perf_counter() - started
    index_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()

    # Every query new: the index remembers its recent answers, and a repeat would time a lookup.
    warm, queries = QUERIES, learner_sentences(args.queries)
    for query in warm:  # warm the caches once, as a running server would be
        index.retrieve(query, top_k=3)
    bm25: list[float] = []
    found = 0
    for query in queries:
        t0 = time.perf_counter()
        hits = index.retrieve(query, top_k=3)
        bm25.append(time.perf_counter() - t0)
        found += bool(hits)
    before: list[float] = []
    for query in queries:
        t0 = time.perf_counter()
        hits = bm25s_retrieve(index, query, 3, DEFAULT_MIN_SCORE)
        before.append(time.perf_counter() - t0)
        assert hits == index.retrieve(query, top_k=3), query  # now the remembered answer

    documents = [frozenset(tokenize(c.text_content)) for c in chunks]
    baseline: list[float] = []
    for query in queries[: max(50, args.queries // 20)]:  # the slow path: fewer samples suffice
        t0 = time.perf_counter()
        words = frozenset(tokenize(query))
        scored = sorted(((-len(words & d), i) for i, d in enumerate(documents) if words & d))[:3]
        baseline.append(time.perf_counter() - t0)
        del scored

    ours, theirs = summary(bm25), summary(baseline)
    result = {
        "chunks": len(chunks),
        "queries": len(queries),
        "queries_with_hits": found,
        "index_build_s": round(build_s, 3),
        "index_memory_mib": round(index_bytes / 2**20, 2),
        "bm25s": ours,
        "bm25s_before_issue_14": summary(before),
        "baseline_python_overlap": theirs,
        "p99_ratio_baseline_over_bm25s": round(theirs["p99_ms"] / max(ours["p99_ms"], 1e-9), 1),
    }
    write(result, args.out or ROOT / "artifacts" / "retrieval.json")


def write(result: dict[str, object], out: str | Path) -> None:
    print(json.dumps(result, indent=2))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
