"""What /metrics costs a turn: the same load on one node with METRICS on and off, interleaved.

    python benchmarks/metrics_cost.py [--rounds 3] [--sessions 100] [--duration 15] [--out artifacts/metrics_cost.json]

One `samvad serve` (rule brain, no Neo4j) per run on a loopback port, `samvad bots` paced at ~5
turns/s per session, rounds alternating on/off so drift on this shared machine hits both alike. It
prints each run's turn p99 (client-measured, and the server's own total) and the ratio of the medians
(on/off), which the issue bounds at 1.05; plus Metrics.observe's cost per reply, timed in process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SECRET = "benchmark-secret-" + "m" * 40


def run(metrics: bool, port: int, sessions: int, duration: float, out: Path) -> dict[str, Any]:
    env = {**os.environ, "SAMVAD_SECRET": SECRET, "BRAIN": "rules", "MIRROR": "none", "NEO4J_URI": "",
           "LOG_LEVEL": "WARNING", "METRICS": str(metrics).lower(), "SESSION_CREATE_PER_SECOND": "1000",
           "SESSION_CREATE_BURST": "1000", "CLUSTER_NODE_ID": ""}
    server = subprocess.Popen([sys.executable, "-m", "server.cli", "serve", "--port", str(port)], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        subprocess.run([sys.executable, "-m", "clients.bots.cli", "--url", f"http://127.0.0.1:{port}",
                        "--sessions", str(sessions), "--think", "200", "--paced", "--duration", str(duration),
                        "--quiet", "--json", str(out)], cwd=ROOT, check=False, stdout=subprocess.DEVNULL)
        if metrics:  # the scrape itself, timed once the load is over
            started = time.perf_counter()
            httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
            scrape_ms = (time.perf_counter() - started) * 1000
        result: dict[str, Any] = json.loads(out.read_text())["samvad"]
        result["scrape_ms"] = round(scrape_ms, 2) if metrics else None
        return result
    finally:
        server.terminate()
        server.wait(20)


def observe_ns() -> float:
    """Metrics.observe on a reply envelope, per call (ns), in this process."""
    from schemas.codec import Envelope
    from schemas.enums import OfferAssessment, Stage
    from schemas.frames import Reply, TurnTimings
    from server.metrics import Metrics

    metrics = Metrics()
    reply = Reply.model_construct(type="reply", fallback=False, timings=TurnTimings(brain="rules", total_ms=1.0),
                                  negotiation_state=Stage.HAGGLING, offer_assessment=OfferAssessment.NONE)
    envelope = Envelope.__new__(Envelope)
    envelope.event = reply
    n = 200_000
    started = time.perf_counter()
    for _ in range(n):
        metrics.observe(envelope)
    return (time.perf_counter() - started) / n * 1e9


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sessions", type=int, default=100)
    p.add_argument("--duration", type=float, default=15.0)
    p.add_argument("--port", type=int, default=19700)
    p.add_argument("--out", default="artifacts/metrics_cost.json")
    args = p.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
    tmp = ROOT / "artifacts" / "metrics_cost_run.json"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    for k in range(args.rounds):
        for label in (("on", "off") if k % 2 == 0 else ("off", "on")):
            r = run(label == "on", args.port, args.sessions, args.duration, tmp)
            runs[label].append({"p99_ms": r["latency_ms"]["p99"], "p50_ms": r["latency_ms"]["p50"],
                                "server_p99_ms": r["server_total_ms"]["p99"], "turns": r["turns"],
                                "errors": r["errors"]["count"], "scrape_ms": r.get("scrape_ms")})
            print(f"round {k + 1} metrics {label:3}: {runs[label][-1]}", flush=True)
    on = statistics.median(r["p99_ms"] for r in runs["on"])
    off = statistics.median(r["p99_ms"] for r in runs["off"])
    figures = {"sessions": args.sessions, "duration_s": args.duration, "rounds": args.rounds, "runs": runs,
               "p99_on_ms": on, "p99_off_ms": off, "p99_ratio": round(on / off, 3),
               "observe_ns_per_reply": round(observe_ns(), 1)}
    print(f"turn p99: metrics on {on} ms, off {off} ms, ratio {figures['p99_ratio']} (bound 1.05); "
          f"Metrics.observe {figures['observe_ns_per_reply']} ns per reply")
    Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
