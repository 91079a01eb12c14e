"""Garbage-collector pauses and turn latency under one load, for several collector settings.

    python benchmarks/gc_pauses.py [--sessions 1000] [--duration 30] [--young 700,1500,3000,10000]
                                   [--defaults] [--full-every S [--force-full]]
                                   [--out artifacts/gc_pauses.json]

For each young threshold the server (`samvad serve`, its own process, with the policy of
server/gcpolicy.py and `YOUNG_THRESHOLD` set to that value) plays --sessions bot sessions at about
one turn a second each (`samvad bots --paced --think 1000`, another process) for --duration
seconds. A `gc.callbacks` hook in the server times every collection; at exit it prints the count,
p50, p99, max and total milliseconds per generation (and, apart, those before the policy was
installed: the imports' and its own first collection, before the server serves). The bots give turn latency p50/p95/p99.
--defaults adds a run with GC_FULL_EVERY_SECONDS=0: CPython's own thresholds, nothing frozen.
--full-every offers the planned full pass every S seconds (GC_FULL_EVERY_SECONDS), so that a
shorter run includes it; --force-full runs it when due however long it takes (the policy puts a
long one off), to see what it would cost. Each planned pass, or deferral, is listed.
Every run is paired with the others in the same invocation, so compare rows, not absolutes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.load import (  # noqa: E402
    PY,
    Proc,
    env_for,
    free_port,
    raise_fd_limit,
    run_bots,
    wait_http,
)

# `samvad serve` with the young threshold from SAMVAD_BENCH_YOUNG and a timer on every collection.
SERVER = """
import atexit, gc, json, os, signal, sys, time
from server import gcpolicy
if os.environ.get("SAMVAD_BENCH_YOUNG"):
    gcpolicy.YOUNG_THRESHOLD = int(os.environ["SAMVAD_BENCH_YOUNG"])
if os.environ.get("SAMVAD_BENCH_FORCE_FULL"):  # the planned pass runs when due, however long
    gcpolicy.FULL_MAX_DEFER_S = 0.0
pauses = {0: [], 1: [], 2: [], "start-up": []}
cpu = {0: [], 1: [], 2: [], "start-up": []}
started = [0.0, 0.0]
policy = os.environ.get("GC_FULL_EVERY_SECONDS") != "0"
def timer(phase, info):
    if phase == "start":
        started[0], started[1] = time.perf_counter(), time.thread_time()
    else:
        # with the policy on, the passes before it is installed (imports, and its own first
        # collection) happen before the server serves: counted apart
        key = info["generation"] if gcpolicy.installed() or not policy else "start-up"
        pauses[key].append((time.perf_counter() - started[0]) * 1000)
        cpu[key].append((time.thread_time() - started[1]) * 1000)
gc.callbacks.insert(0, timer)
def report():
    out = {}
    for generation, ms in pauses.items():
        ms.sort()
        if ms:
            # the wall time is the pause the sockets see; the CPU time is the collector's own work
            # (on a shared machine the wall time also holds the time the process was not running)
            spent = sorted(cpu[generation])
            out[generation] = {"count": len(ms), "p50_ms": round(ms[len(ms) // 2], 2),
                               "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 2),
                               "max_ms": round(ms[-1], 2), "total_ms": round(sum(ms), 1),
                               "cpu_max_ms": round(spent[-1], 2)}
    print("GCSTATS " + json.dumps(out), file=sys.stderr, flush=True)
atexit.register(report)
# uvicorn re-raises SIGTERM once it has shut down; exit normally then, so that atexit runs
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
from server.cli import main
sys.exit(main(sys.argv[1:]))
"""


def one_run(args: argparse.Namespace, tag: str, extra: dict[str, str]) -> dict[str, Any]:
    port = free_port()
    log = Path(args.logs) / f"server-{tag}.log"
    server = Proc([PY, "-c", SERVER, "serve", "--port", str(port)],
                  env_for({"LOG_LEVEL": "INFO", **extra}), log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/health", server)
        bots = run_bots(args, tag, ["--url", base, "--sessions", str(args.sessions), "--think", "1000",
                                    "--paced", "--duration", str(args.duration)],
                        [server], args.duration + 120)
    finally:
        server.stop()  # SIGTERM: uvicorn shuts down and the atexit report is printed
    found = re.findall(r"^GCSTATS (.*)$", log.read_text(errors="replace"), re.MULTILINE)
    if not found:
        raise RuntimeError(f"the server printed no GCSTATS; see {log}")
    played = bots["samvad"]
    latency = played["latency_ms"]
    planned = [json.loads(line) for line in log.read_text(errors="replace").splitlines()
               if '"full garbage collection' in line]
    return {"gc": json.loads(found[-1]), "turns_per_s": played["turns_per_s"],
            "planned_full_passes": [{k: p.get(k) for k in ("msg", "ms", "collected", "objects", "count_ms",
                                                           "blocks", "expected_ms", "waited_s")} for p in planned],
            "latency_ms": {k: latency[k] for k in ("p50", "p95", "p99", "max")},
            "errors": played["errors"]["count"], "violations": played["violations"]["count"],
            "cpu_s": bots["cpu_s"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--duration", type=float, default=30)
    parser.add_argument("--young", default="700,1500,3000,10000")
    parser.add_argument("--defaults", action="store_true")
    parser.add_argument("--full-every", type=float, default=None)
    parser.add_argument("--force-full", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "artifacts" / "gc_pauses.json"))
    parser.add_argument("--logs", default=str(ROOT / "artifacts" / "gc-logs"))
    args = parser.parse_args()
    raise_fd_limit()
    runs: dict[str, dict[str, Any]] = {}
    full: dict[str, str] = {}
    if args.full_every:
        full["GC_FULL_EVERY_SECONDS"] = str(args.full_every)
    if args.force_full:
        full["SAMVAD_BENCH_FORCE_FULL"] = "1"
    plan = [(f"young-{y}", {"SAMVAD_BENCH_YOUNG": y, **full}) for y in args.young.split(",") if y]
    if args.defaults:
        plan.append(("cpython-defaults", {"GC_FULL_EVERY_SECONDS": "0"}))
    for tag, extra in plan:
        print(f"== {tag}: {args.sessions} sessions, ~1 turn/s each, {args.duration:g} s", flush=True)
        runs[tag] = result = one_run(args, tag, extra)
        lat = result["latency_ms"]
        print(f"   turns/s {result['turns_per_s']}  latency p50 {lat['p50']} p95 {lat['p95']} "
              f"p99 {lat['p99']} max {lat['max']} ms  errors {result['errors']}", flush=True)
        for generation, g in sorted(result["gc"].items()):
            print(f"   gen{generation}: {g['count']} passes, p50 {g['p50_ms']} p99 {g['p99_ms']} "
                  f"max {g['max_ms']} ms, {g['total_ms']} ms in all", flush=True)
        for p in result["planned_full_passes"]:
            print(f"   {p['msg']}: {p}", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"sessions": args.sessions, "duration_s": args.duration, "runs": runs},
                              indent=2, sort_keys=True) + "\n")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
