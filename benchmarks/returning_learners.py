"""Returning learners in the server: server CPU per session's life as their profiles grow.

`samvad serve` as `benchmarks.report` starts it for its `life` run (its own process, the life
run's 2 s grace), then LEARNERS learners play rounds of bare lives, PER_ROUND each a round, each
learner one session at a time: created over HTTP with the learner's id, the socket upgraded, the
welcome, `stop`, the `session.ended` and `session.report` frames (the learner's profile is read at
the start and read and written at the end). Printed: the server's CPU per session in each round,
against how many sessions each learner has played by its end (docs/performance.md, "A learner's
profile bounded"). It uses only `benchmarks.report`'s server start, so a copy measures main too.

    .venv/bin/python benchmarks/returning_learners.py [--learners 10] [--per-round 50] [--rounds 6]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

import orjson
import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.report import Build, start  # noqa: E402
from clients.bots.transport import create_session, ws_base  # noqa: E402


async def lives(base: str, learners: int, per_round: int) -> None:
    async def one(learner: int) -> None:
        for _ in range(per_round):
            created = await create_session(base, limit_s=30, learner_id=f"returning-{learner}")
            url = f"{ws_base(base)}{created['ws_url']}?token={created['player_token']}"
            async with websockets.connect(url, subprotocols=["samvad.v1.json"],  # type: ignore[list-item]
                                          max_size=None, open_timeout=30) as ws:
                await asyncio.wait_for(ws.recv(), 30)  # the welcome
                await ws.send(orjson.dumps({"type": "command", "id": "stop-1", "name": "stop"}))
                seen: set[str] = set()
                while not {"session.ended", "session.report"} <= seen:
                    seen.add(orjson.loads(await asyncio.wait_for(ws.recv(), 30))["type"])

    await asyncio.gather(*(one(i) for i in range(learners)))


def main(learners: int, per_round: int, rounds: int) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    build = Build(name="this", commit=commit, root=ROOT, python=sys.executable)
    server, base = start(build, "returning", {"SESSION_ENDED_GRACE_SECONDS": "2.0"})
    try:
        per_session = []
        for _ in range(rounds):
            time.sleep(1.0)
            cpu0 = server.cpu()
            asyncio.run(lives(base, learners, per_round))
            time.sleep(2.0)  # the last profiles recorded (the learners' task) and the grace's swaps
            per_session.append(round((server.cpu() - cpu0) * 1e6 / (learners * per_round)))
    finally:
        server.stop()
    print(f"{commit} {time.strftime('%H:%M:%S', time.gmtime())} UTC: server CPU us per session, by round "
          "(sessions each learner has played by its end): "
          + " ".join(f"{(r + 1) * per_round}:{us}" for r, us in enumerate(per_session)), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", type=int, default=10)
    parser.add_argument("--per-round", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    main(args.learners, args.per_round, args.rounds)
