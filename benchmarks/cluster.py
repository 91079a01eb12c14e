"""Failover and rolling restart of a three-node cluster behind HAProxy, under bot load, with figures.

    python benchmarks/cluster.py [--sessions 300] [--lease 6] [--out artifacts/cluster.json]

Needs Neo4j: NEO4J_URI (else SAMVAD_TEST_NEO4J_URI). Starts scripts/cluster.sh on port 19600 (nodes
19601-19603), then:

1. kill -9: `--sessions` resuming bots (clients/bots/resuming.py, think 1 s) play through HAProxy; once
   the load is under way node n2 is killed. For each of n2's unfinished sessions: the time from the
   kill to the client's next welcome (on a survivor); acknowledged turns lost and turns applied twice
   (counted in Neo4j), seq contiguity in every client's view.
2. rolling restart: `scripts/cluster.sh rolling` (drain, SIGTERM, start; node by node) while bots keep
   playing; the same checks, and the p50/p99 of the learners' ack time (send to ack) during the roll.
Every load is on 127.0.0.1. Prints the figures and writes them as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clients.bots.personas import Lowballer, Persona, Polite, Rude, Walker  # noqa: E402
from clients.bots.resuming import ResumingClient  # noqa: E402
from server.mirror import Neo4jMirror  # noqa: E402
from tests.cluster_support import LEASES, Cluster, check_clients  # noqa: E402
from tests.neo4j_support import COUNT_TURNS_BY_CLIENT_ID  # noqa: E402

PERSONAS: list[tuple[type[Persona], str]] = [(Polite, "Tomato"), (Walker, "Apple"), (Lowballer, "Orange"),
                                             (Rude, "Pumpkin")]


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))], 1)


async def counts(uri: str, clients: list[ResumingClient]) -> dict[str, dict[str, int]]:
    async with Neo4jMirror(uri) as mirror:
        return {c.session_id: {r["id"]: r["turns"] for r in await mirror.read(
            COUNT_TURNS_BY_CLIENT_ID, ids=c.transcripts, session_id=c.session_id)} for c in clients}


async def kill9(cluster: Cluster, n: int, think: float) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    clients = [ResumingClient(cluster.http, cluster.ws, p(item), tag=f"k{run}-{i}", think=think, item=item)
               for i, (p, item) in zip(range(n), itertools.cycle(PERSONAS), strict=False)]
    async with anyio.create_task_group() as tg:
        for c in clients:
            tg.start_soon(c.create, 20.0)
    async with Neo4jMirror(cluster.neo4j_uri) as mirror:
        owners = {r["id"]: r["owner"] for r in await mirror.read(LEASES, ids=[c.session_id for c in clients])}
    victims = [c for c in clients if owners.get(c.session_id) == "n2"]
    killed_at = 0.0
    moving: list[ResumingClient] = []
    welcomes_before: dict[str, int] = {}
    with anyio.fail_after(300):
        async with anyio.create_task_group() as tg:
            for c in clients:
                tg.start_soon(c.run, 280.0)
            while sum(len(c.transcripts) for c in victims) < 2 * len(victims):  # noqa: ASYNC110
                await anyio.sleep(0.05)
            moving = [c for c in victims if not c.finished]
            welcomes_before = {c.tag: len(c.welcome_at) for c in moving}
            killed_at = time.monotonic()
            cluster.signal(2, signal.SIGKILL)
    resumed = [c.welcome_at[welcomes_before[c.tag]] - killed_at for c in moving
               if len(c.welcome_at) > welcomes_before[c.tag]]
    lost, duplicated = check_clients(clients, await counts(cluster.neo4j_uri, clients))
    return {"sessions": n, "on_killed_node": len(victims), "moved_unfinished": len(moving),
            "resumed": len(resumed), "resume_after_kill_s": {"p50": pct(resumed, 50), "p99": pct(resumed, 99),
                                                              "max": round(max(resumed), 2) if resumed else None},
            "acknowledged_lost": lost, "applied_twice": duplicated,
            "contiguous": all(c.contiguous() for c in clients)}


async def rolling(cluster: Cluster, n: int, think: float) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    clients: list[ResumingClient] = []
    done = threading.Event()
    started = time.monotonic()

    def roll() -> None:
        try:
            cluster.sh("rolling", timeout=600)
        finally:
            done.set()

    with anyio.fail_after(900):
        async with anyio.create_task_group() as tg:
            threading.Thread(target=roll, daemon=True).start()
            wave = 0
            while not done.is_set():
                busy = sum(1 for c in clients if not c.finished)
                fresh = [ResumingClient(cluster.http, cluster.ws, p(item), tag=f"r{run}-{wave}-{i}", think=think,
                                        item=item)
                         for i, (p, item) in zip(range(max(0, n - busy)), itertools.cycle(PERSONAS), strict=False)]
                async with anyio.create_task_group() as creating:
                    for c in fresh:
                        creating.start_soon(c.create, 20.0)
                for c in fresh:
                    clients.append(c)
                    tg.start_soon(c.run, 400.0)
                wave += 1
                await anyio.sleep(1.0)
    roll_s = time.monotonic() - started
    acks = [s.ack_ms for c in clients for s in c.sent.values() if s.ack_ms is not None and "-t" in s.frame["id"]]
    lost, duplicated = check_clients(clients, await counts(cluster.neo4j_uri, clients))
    moved = sum(1 for c in clients if 4307 in c.closes)
    return {"concurrent_sessions": n, "sessions_played": len(clients), "roll_s": round(roll_s, 1),
            "clients_moved_4307": moved, "acknowledged_lost": lost, "applied_twice": duplicated,
            "ack_ms": {"count": len(acks), "p50": pct(acks, 50), "p99": pct(acks, 99),
                       "max": round(max(acks), 1) if acks else None,
                       "mean": round(statistics.fmean(acks), 1) if acks else None}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", type=int, default=300)
    p.add_argument("--think", type=float, default=1.0)
    p.add_argument("--lease", type=float, default=6.0, help="LEASE_SECONDS (renewed every third of it)")
    p.add_argument("--out", default="artifacts/cluster.json")
    p.add_argument("--skip-rolling", action="store_true")
    args = p.parse_args()
    uri = os.environ.get("NEO4J_URI") or os.environ.get("SAMVAD_TEST_NEO4J_URI")
    if not uri:
        sys.exit("set NEO4J_URI (or SAMVAD_TEST_NEO4J_URI)")
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="samvad-cluster-")), uri, port=19600, LOG_LEVEL="WARNING",
                      LEASE_SECONDS=args.lease, LEASE_RENEW_SECONDS=args.lease / 3, DRAIN_GRACE_SECONDS=2.5)
    figures: dict[str, Any] = {"lease_s": args.lease, "think_s": args.think}
    try:
        cluster.sh("start")
        figures["kill9"] = asyncio.run(kill9(cluster, args.sessions, args.think))
        print("kill -9:", json.dumps(figures["kill9"]), flush=True)
        cluster.sh("restart", "2")
        if not args.skip_rolling:
            figures["rolling"] = asyncio.run(rolling(cluster, args.sessions, args.think))
            print("rolling restart:", json.dumps(figures["rolling"]), flush=True)
    finally:
        cluster.stop()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
