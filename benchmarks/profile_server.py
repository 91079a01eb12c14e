"""Run `samvad serve` under cProfile and write the stats when it stops (SIGTERM or SIGINT).

    python benchmarks/profile_server.py --port 8000 --out artifacts/server.prof [--top 40]
    python benchmarks/profile_server.py --port 8000 --pyinstrument --out artifacts/server.txt

cProfile counts every call (and slows the server several times over); pyinstrument, when it
is installed, samples the stack every millisecond and costs little.

Settings come from the environment, as for `samvad serve`. Not a test: a tool for finding where
the server's time goes under the load bots (`samvad bots ... --think 0`).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--out", default=str(ROOT / "artifacts" / "server.prof"))
    parser.add_argument("--top", type=int, default=40, help="print this many functions")
    parser.add_argument("--pyinstrument", action="store_true", help="sample instead of trace")
    args = parser.parse_args()
    from server.cli import main as samvad

    # uvicorn re-raises the signal that stopped it once it has restored the previous handlers;
    # a no-op handler lets the call return so that the stats get written.
    signal.signal(signal.SIGTERM, lambda *_: None)
    signal.signal(signal.SIGINT, lambda *_: None)
    if args.pyinstrument:
        from pyinstrument import Profiler

        sampler = Profiler(interval=0.0005, async_mode="disabled")
        sampler.start()
        try:
            samvad(["serve", "--port", str(args.port)])
        finally:
            sampler.stop()
            text = sampler.output_text(unicode=False, color=False, show_all=False)
            text += "\n\nSelf time by function:\n"
            text += sampler.output_text(unicode=False, color=False, flat=True)
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(text)
            print(text, file=sys.stderr)
        return 0
    profile = cProfile.Profile()
    try:
        profile.runcall(samvad, ["serve", "--port", str(args.port)])
    finally:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        profile.dump_stats(args.out)
        stats = pstats.Stats(profile, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(args.top)
        stats.sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
