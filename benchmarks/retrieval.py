"""How long does one retrieval take over a scenario with 10,000 chunks? (issue #13: p99 <= 2 ms)

Builds a synthetic playbook of `--chunks` paragraphs (default 10,000) from the Jaipur pack's own
knowledge words plus filler vocabulary in English, Hinglish and Devanagari, seeded so every run
indexes the same text. Then it times `KnowledgeIndex.retrieve` (tokenise the query, BM25 scores
from bm25s's sparse matrices, threshold, top-k, build the result objects) for `--queries` queries
in the three scripts, and, as the baseline of the same run, a straightforward pure-Python scorer
over the same chunks: token-set overlap per chunk, what `brain/culture.py` used to do for a dozen
customs lines. The ratio says what bm25s buys at this size.

    python -m benchmarks.retrieval                 # 10,000 chunks, 2,000 queries
    python -m benchmarks.retrieval --chunks 1000

Figures are printed and written to artifacts/retrieval.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
import tracemalloc
from pathlib import Path

from brain.knowledge.chunking import chunk_text
from brain.knowledge.index import KnowledgeIndex
from brain.knowledge.library import pack_chunks
from brain.knowledge.tokens import tokenize

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--out", default=str(ROOT / "artifacts" / "retrieval.json"))
    args = parser.parse_args()

    text = "\n\n".join(corpus(args.chunks))
    chunks = chunk_text(text, "synthetic.md", NOW)
    tracemalloc.start()
    started = time.perf_counter()
    index = KnowledgeIndex(chunks)
    build_s = time.perf_counter() - started
    index_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()

    queries = [QUERIES[i % len(QUERIES)] for i in range(args.queries)]
    for query in QUERIES:  # warm the caches once, as a running server would be
        index.retrieve(query, top_k=3)
    bm25: list[float] = []
    found = 0
    for query in queries:
        t0 = time.perf_counter()
        hits = index.retrieve(query, top_k=3)
        bm25.append(time.perf_counter() - t0)
        found += bool(hits)

    documents = [frozenset(tokenize(c.text_content)) for c in chunks]
    baseline: list[float] = []
    for query in queries[: max(50, args.queries // 20)]:  # the slow path: fewer samples suffice
        t0 = time.perf_counter()
        words = frozenset(tokenize(query))
        scored = sorted(((-len(words & d), i) for i, d in enumerate(documents) if words & d))[:3]
        baseline.append(time.perf_counter() - t0)
        del scored

    result = {
        "chunks": len(chunks),
        "queries": len(queries),
        "queries_with_hits": found,
        "index_build_s": round(build_s, 3),
        "index_memory_mib": round(index_bytes / 2**20, 2),
        "bm25s": summary(bm25),
        "baseline_python_overlap": summary(baseline),
    }
    result["p99_ratio_baseline_over_bm25s"] = round(
        result["baseline_python_overlap"]["p99_ms"] / max(result["bm25s"]["p99_ms"], 1e-9), 1)
    print(json.dumps(result, indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
