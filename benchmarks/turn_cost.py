"""The server's own cost of a rule-brain turn, in process: no sockets, no HTTP, no load generator.

Drives `--sessions` sessions of scenario b's shape (a greeting, an inquiry, offers, a deal) through
the real `SessionActor`, the rule brain behind the response policy and the JSON encoding of every
event, and prints the microseconds per turn, best of `--repeat` runs. Run it on two checkouts
one after the other to compare them (the figure is only meaningful as a ratio):

    python benchmarks/turn_cost.py [--sessions 3000] [--repeat 3] [--profile] [--log-level INFO]

`--log-level INFO` writes the server's log records (to /dev/null), as `samvad serve` and
`benchmarks/load.py --log-level INFO` do; by default nothing is logged, as at WARNING.

Writes artifacts/turn_cost.json.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from brain.policy import with_policy  # noqa: E402
from brain.rules_vendor import RuleBasedVendor  # noqa: E402
from schemas.codec import Envelope, WireFormat  # noqa: E402
from schemas.frames import TranscriptFrame  # noqa: E402
from server.logs import configure_logging  # noqa: E402
from session.actor import SessionActor  # noqa: E402
from session.mirror import MemoryMirror  # noqa: E402
from session.negotiation import Negotiation  # noqa: E402

LINES = ("Namaste bhaiya, tamatar kitne ka hai?", "Bahut mehenga hai bhaiya, 40 mein de do?",
         "Thoda kam karo bhaiya, 60 mein de do?", "Acha 70 final?", "Theek hai, pakka")


class _Connection:
    role = "player"

    def __init__(self, conn_id: int) -> None:
        self.conn_id = conn_id

    def send_nowait(self, envelope: Envelope) -> bool:
        envelope.encode(WireFormat.JSON)
        return True

    def close_nowait(self, code: int, reason: str) -> None:
        pass


def play(sessions: int) -> int:
    brain = with_policy(RuleBasedVendor(), None)
    mirror = MemoryMirror()
    turns = 0
    for s in range(sessions):
        negotiation = Negotiation(session_id=f"s{s}", scenario_name="jaipur-bazaar", created_at=time.time())
        actor = SessionActor(negotiation, brain, mirror)
        actor.running = True
        conn = _Connection(s)
        actor.connect(conn)
        for i, line in enumerate(LINES):
            if negotiation.is_terminal:
                break
            actor.submit(conn, TranscriptFrame(type="transcript", id=f"t{i}", text=line))
            inbox = actor._inbox
            while len(inbox):
                actor._process(inbox.receive_nowait())
            turns += 1
    return turns


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of one run")
    parser.add_argument("--log-level", default="WARNING", help="INFO: log each turn, as scenario b does")
    parser.add_argument("--out", default=str(ROOT / "artifacts" / "turn_cost.json"))
    args = parser.parse_args()
    configure_logging(args.log_level, open(os.devnull, "w"))  # open for the whole run
    play(200)  # warm the caches
    runs = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        turns = play(args.sessions)
        runs.append((time.perf_counter() - started) / turns * 1e6)
    best = min(runs)
    print(f"{turns} turns per run, {best:.1f} us per turn (best of {args.repeat}: "
          f"{', '.join(f'{r:.1f}' for r in runs)})")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"turns": turns, "us_per_turn": round(best, 2),
                                          "runs_us_per_turn": [round(r, 2) for r in runs]}, indent=2))
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(play, args.sessions // 2)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
