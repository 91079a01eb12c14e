"""What lease renewal costs Neo4j: one RENEW transaction for a node holding N leases.

    python benchmarks/leases.py [--sizes 1000,10000] [--repeat 5] [--out artifacts/leases.json]

Needs Neo4j: NEO4J_URI (else SAMVAD_TEST_NEO4J_URI). Creates N Lease nodes for a node named
`bench-<random>` (one UNWIND), then times `ClusterNode.renew()` (the real statement, in chunks of
5,000 rows) `--repeat` times and deletes them. Prints ms per renewal and lease rows renewed per second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from brain.rules_vendor import RuleBasedVendor  # noqa: E402
from server.cluster import ClusterNode, FencedMirror  # noqa: E402
from server.cluster.node import LeaseSettings  # noqa: E402
from session.registry import SessionRegistry  # noqa: E402

SEED = "UNWIND $ids AS id CREATE (:Lease {session_id: id, owner: $node, epoch: 1, expires_at: timestamp() + 60000})"
CLEAN = "MATCH (l:Lease {owner: $node}) DETACH DELETE l"


async def measure(uri: str, sizes: list[int], repeat: int) -> dict[str, object]:
    out: dict[str, object] = {}
    for n in sizes:
        name = f"bench-{uuid.uuid4().hex[:6]}"
        async with FencedMirror(uri, node=name) as mirror:
            await mirror.ensure_schema()
            node = ClusterNode(LeaseSettings(name, ttl_s=60, renew_s=20), mirror,
                               SessionRegistry(RuleBasedVendor(), mirror))
            ids = [uuid.uuid4().hex for _ in range(n)]
            for k in range(0, n, 5000):
                await node._write(SEED, ids=ids[k:k + 5000], node=name)
            node.epochs.update(dict.fromkeys(ids, 1))
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                renewed = await node.renew_leases(node.epochs)
                assert len(renewed) == n
                times.append((time.perf_counter() - started) * 1000)
            await node._write(CLEAN, node=name)
        median = statistics.median(times)
        out[str(n)] = {"renew_ms": [round(t, 1) for t in times], "median_ms": round(median, 1),
                       "rows_per_s": round(n / median * 1000)}
        print(f"{n} leases: renewal median {median:.1f} ms ({n / median * 1000:.0f} rows/s); runs {out[str(n)]}")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1000,10000")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", default="artifacts/leases.json")
    args = p.parse_args()
    uri = os.environ.get("NEO4J_URI") or os.environ.get("SAMVAD_TEST_NEO4J_URI")
    if not uri:
        sys.exit("set NEO4J_URI (or SAMVAD_TEST_NEO4J_URI)")
    figures = asyncio.run(measure(uri, [int(x) for x in args.sizes.split(",")], args.repeat))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
