"""A returning learner's profile, in process: its packed size and `MemoryLearnerStore.get` and
`record` for a learner of 10, 100 and 1,000 sessions (docs/performance.md, "A learner's profile
bounded"). The profile is read at each session's start and end, and read and written at its end.

For each size, five learners (five seeds) are built by recording that many sessions; then `get`
is timed over 500 reads and `record` over the next 20 sessions, each as a mean per call. The best
and the median of the five are printed. Only the stores' public interfaces are used, so the same
file measures an older checkout too (copy it there).

With `--neo4j-uri` the Neo4j store is measured instead (one learner a size, its sessions written
first as the mirror would, bare; `get` over 50 reads): the size is then the JSON on the Learner
node, and the learner is erased afterwards.

    .venv/bin/python -m benchmarks.learner_profile [--sizes 10,100,1000] [--seeds 5] [--neo4j-uri URI]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import LiteralString

from neo4j import AsyncGraphDatabase

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from schemas.enums import LanguageCode, Level, Outcome  # noqa: E402
from schemas.learner import SessionFigures  # noqa: E402
from server.learners.cypher import GET_PROFILE  # noqa: E402
from server.learners.graph import Neo4jLearnerStore  # noqa: E402
from server.learners.packing import pack  # noqa: E402
from server.learners.store import MemoryLearnerStore  # noqa: E402

T0 = 1_795_000_000.0
READS = 500
LATER = 20  # sessions recorded after the learner's first n, timed together
SCENARIOS = ("jaipur-bazaar", "kyoto-antiques", "marrakech-souk")


def figures(rng: random.Random, n: int, learner_id: str = "learner-1") -> SessionFigures:
    """A session as the server makes them: a 32-digit hex id, wall-clock times, hints, a slip now and then."""
    deal = rng.random() < 0.6
    start = T0 + 600.0 * n + rng.random()
    return SessionFigures(
        session_id=rng.getrandbits(128).to_bytes(16, "big").hex(), learner_id=learner_id,
        scenario=rng.choice(SCENARIOS), level=Level.INTERMEDIATE, input_language=LanguageCode.EN_IN,
        target_language=LanguageCode.EN_IN, outcome=Outcome.DEAL if deal else Outcome.WALKED_AWAY,
        item="Tomato", turns=5, first_quote=150, paid=90 if deal else None, discount_pct=40.0 if deal else None,
        score=rng.randrange(100), hints=(rng.randrange(3), rng.randrange(2), 0),
        slips=("lowball",) if rng.random() < 0.2 else (), created_at=start, ended_at=start + 300.0 + rng.random())


async def learner(n: int, seed: int) -> tuple[int, float, float]:
    """Packed bytes of a learner of `n` sessions, then us per `get` and per `record`."""
    rng = random.Random(seed)
    store = MemoryLearnerStore()
    for i in range(n):
        await store.record(figures(rng, i))
    later = [figures(rng, n + i) for i in range(LATER)]
    profile = await store.get("learner-1")
    assert profile is not None and profile.sessions == n
    size = len(pack(profile))
    started = time.perf_counter()
    for _ in range(READS):
        await store.get("learner-1")
    get_us = (time.perf_counter() - started) / READS * 1e6
    started = time.perf_counter()
    for f in later:
        await store.record(f)
    record_us = (time.perf_counter() - started) / LATER * 1e6
    return size, get_us, record_us


BARE_SESSIONS: LiteralString = """
UNWIND $ids AS id
CREATE (:Session {session_id: id, learner_id: $who, scenario: 'jaipur-bazaar', outcome: 'deal', turn_count: 5})
"""


async def graph_learner(uri: str, n: int, seed: int) -> tuple[int, float, float]:
    """As `learner`, in Neo4j: JSON bytes on the Learner node, then us per `get` and per `record`."""
    rng = random.Random(seed)
    who = f"bench-profile-{uuid.uuid4().hex[:10]}"
    played = [figures(rng, i, who) for i in range(n + LATER)]
    store = Neo4jLearnerStore(uri)
    try:
        async with AsyncGraphDatabase.driver(uri, auth=None) as driver:
            await driver.execute_query(BARE_SESSIONS, ids=[f.session_id for f in played], who=who)
        for f in played[:n]:
            await store.record(f)
        [row] = await store.read(GET_PROFILE, learner_id=who)
        reads = READS // 10
        started = time.perf_counter()
        for _ in range(reads):
            await store.get(who)
        get_us = (time.perf_counter() - started) / reads * 1e6
        started = time.perf_counter()
        for f in played[n:]:
            await store.record(f)
        record_us = (time.perf_counter() - started) / LATER * 1e6
        await store.erase(who)
    finally:
        await store.aclose()
    return len(str(row["profile"]).encode()), get_us, record_us


async def main(sizes: list[int], seeds: int, neo4j_uri: str) -> None:
    print(f"{'JSON on the Learner node' if neo4j_uri else 'packed bytes'}; get us (best / median); "
          "record us (best / median)")
    for n in sizes:
        runs = [await (graph_learner(neo4j_uri, n, seed) if neo4j_uri else learner(n, seed))
                for seed in range(seeds)]
        gets, records = [r[1] for r in runs], [r[2] for r in runs]
        print(f"{n:8d}  {runs[0][0]:12d}  {min(gets):9.1f} / {statistics.median(gets):8.1f}"
              f"  {min(records):12.1f} / {statistics.median(records):8.1f}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--neo4j-uri", default="", help="measure the Neo4j store at this bolt URI")
    args = parser.parse_args()
    asyncio.run(main([int(s) for s in args.sizes.split(",")], args.seeds, args.neo4j_uri))
