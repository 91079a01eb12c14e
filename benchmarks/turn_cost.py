"""The server's own cost of a rule-brain turn, in process: no sockets, no HTTP, no load generator.

Drives `--sessions` sessions of scenario b's shape (a greeting, an inquiry, offers, a deal) through
the real `SessionActor`, the rule brain behind the response policy and the JSON encoding of every
event, and prints the microseconds per turn, best of `--repeat` runs. Run it on two checkouts
one after the other to compare them (the figure is only meaningful as a ratio):

    python benchmarks/turn_cost.py [--sessions 3000] [--repeat 3] [--profile] [--log-level INFO]

`--log-level INFO` writes the server's log records (to /dev/null), as `samvad serve` and
`benchmarks/load.py --log-level INFO` do; by default nothing is logged, as at WARNING.

It also times the offer reader alone (`session/offers.py`, the number reader under it) over
`OFFER_LINES`, lines in every pack's languages, and prints the microseconds per line: the part of
a turn's cost that reading the learner's offer takes (issue 40).

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
from session.numbers import number_lexicon  # noqa: E402
from session.offers import read_offer  # noqa: E402

LINES = ("Namaste bhaiya, tamatar kitne ka hai?", "Bahut mehenga hai bhaiya, 40 mein de do?",
         "Thoda kam karo bhaiya, 60 mein de do?", "Acha 70 final?", "Theek hai, pakka")


# (pack languages, quote, unit, line): what learners say, in every pack's languages.
OFFER_LINES = (
    (("en-IN", "hi-EN"), 150, "kg", "Bahut mehenga hai bhaiya, 40 mein de do?"),
    (("en-IN", "hi-EN"), 400, "kg", "do kilo ke liye 100 dunga"),
    (("en-IN", "hi-EN"), 400, "kg", "आम डेढ़ सौ में दोगे?"),
    (("en-IN", "hi-EN"), 400, "kg", "Make it a hundred less"),
    (("en-IN", "hi-EN"), 400, "kg", "It's 10 am, I'll come back at 5"),
    (("en", "ja-JP"), 18000, "piece", "How about 70 percent of your price?"),
    (("en", "ja-JP"), 18000, "piece", "ichiman nisen en de dou desu ka"),
    (("en", "ja-JP"), 18000, "piece", "一万二千円でどうですか"),
    (("en", "ar-MA", "fr-MA"), 900, "piece", "1.5k dirhams?"),
    (("en", "ar-MA", "fr-MA"), 900, "piece", "mya u khamsin, akhir"),
    (("en", "ar-MA", "fr-MA"), 900, "piece", "مية و خمسين درهم"),
    (("en", "ar-MA", "fr-MA"), 900, "piece", "cent cinquante dirhams, dernier prix"),
)


def read_offers(rounds: int) -> int:
    """Read every line of OFFER_LINES `rounds` times; returns the number of lines read."""
    prepared = [(number_lexicon(langs), quote, unit, text) for langs, quote, unit, text in OFFER_LINES]
    for _ in range(rounds):
        for lexicon, quote, unit, text in prepared:
            read_offer(text, quote, lexicon, unit=unit)
    return rounds * len(prepared)


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
    read_offers(20)  # warm the lexicons
    offer_runs = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        lines = read_offers(max(1, args.sessions // 10))
        offer_runs.append((time.perf_counter() - started) / lines * 1e6)
    print(f"offer reading: {min(offer_runs):.1f} us per line over {len(OFFER_LINES)} lines in every pack's "
          f"languages (best of {args.repeat}: {', '.join(f'{r:.1f}' for r in offer_runs)})")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"turns": turns, "us_per_turn": round(best, 2),
                                          "runs_us_per_turn": [round(r, 2) for r in runs],
                                          "us_per_offer_line": round(min(offer_runs), 2)}, indent=2))
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(play, args.sessions // 2)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
