"""The LLM prompt's build time for a session with 1,000 turns of history (issue #15, docs/memory.md).

A negotiation is given 1,000 answered turns (2,000 lines, Hinglish, about 25 tokens a line) and a
running summary; then `--turns` more learner turns are played through it. Each is timed from the
transcript to the prompt the model would be sent: `Negotiation.begin_turn` and `brain_request` (the
request, its 40 lines and the graph context), `build_system_prompt`, and `build_user_message` with the
default HISTORY_TOKEN_BUDGET (2,000) and gpt-4o's counter (cl100k_base, offline). The answer is applied
untimed, so each timed turn has two new lines, as in a session. No model, no sockets.

    python benchmarks/prompt_build.py [--turns 1000] [--history 1000]

Prints p50/p95/p99 in microseconds and writes artifacts/prompt_build.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from brain.prompt import DEFAULT_HISTORY_BUDGET, build_system_prompt, build_user_message, history_blocks  # noqa: E402
from brain.window import counter_for  # noqa: E402
from schemas.brain import BrainResult  # noqa: E402
from schemas.decision import AIDecision  # noqa: E402
from schemas.enums import Mood, Stage  # noqa: E402
from session.negotiation import Negotiation  # noqa: E402
from session.records import TurnRecord  # noqa: E402
from session.rules import Limits  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def session(history: int) -> Negotiation:
    n = Negotiation(session_id="bench", scenario_name="jaipur-bazaar", created_at=0.0,
                    limits=Limits(max_turns=100_000, wrap_up_after=100_000))
    n.stage = Stage.HAGGLING
    for t in range(1, history + 1):
        n.history.append(TurnRecord(turn=t, role="user", stage=Stage.HAGGLING, happiness=50, at=float(t),
                                    text=f"Bhaiya, {t % 90 + 10} rupaye mein tamatar de do, bahut mehenga hai yaar!"))
        n.history.append(TurnRecord(turn=t, role="vendor", stage=Stage.HAGGLING, happiness=50, at=t + 0.5,
                                    text=f"Arre nahi, {t % 90 + 50} se kam nahi, ekdum taaza maal hai, dekho to sahi."))
    n.turn = history
    n.memory.summary = ("The learner has haggled over tomatoes for a long time, offering well under the quote; "
                        "Ramesh is holding near his floor and the learner needed two hints. ") * 3
    n.memory.covers = history
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000, help="timed turns")
    parser.add_argument("--history", type=int, default=1000, help="answered turns before the first timed one")
    args = parser.parse_args(argv)
    counter = counter_for("gpt-4o")
    n = session(args.history)
    answer = BrainResult(decision=AIDecision(reply_text="Theek hai, dekhte hain.", happiness_score=50,
                                             negotiation_state=Stage.HAGGLING, vendor_mood=Mood.NEUTRAL))
    parts: dict[str, list[float]] = {"request": [], "system": [], "user": [], "total": []}
    most = 0
    for i in range(args.turns):
        t0 = time.perf_counter()
        pending = n.begin_turn(f"Achha {i % 50 + 20} rupaye, last price?", f"b{i}", 2e6 + i)
        request = n.brain_request(pending)
        t1 = time.perf_counter()
        build_system_prompt(request)
        t2 = time.perf_counter()
        build_user_message(request, history_budget=DEFAULT_HISTORY_BUDGET, counter=counter)
        t3 = time.perf_counter()
        for name, spent in (("request", t1 - t0), ("system", t2 - t1), ("user", t3 - t2), ("total", t3 - t0)):
            parts[name].append(spent * 1e6)
        most = max(most, history_blocks(request, DEFAULT_HISTORY_BUDGET, counter)[2])
        n.complete_turn(pending, answer, 2e6 + i + 0.5)
    figures = {name: {"p50_us": round(statistics.median(v), 1), "p95_us": round(pct(v, 0.95), 1),
                      "p99_us": round(pct(v, 0.99), 1)} for name, v in parts.items()}
    result = {
        "history_turns_at_start": args.history, "timed_turns": args.turns, "budget_tokens": DEFAULT_HISTORY_BUDGET,
        "counter": counter.name, "most_tokens_used": most, "figures": figures,
        "python": platform.python_version(), "machine": platform.machine(),
    }
    for name, f in figures.items():
        print(f"{name:8s} p50 {f['p50_us']:8.1f} us   p95 {f['p95_us']:8.1f} us   p99 {f['p99_us']:8.1f} us")
    print(f"history block and summary: at most {most} of {DEFAULT_HISTORY_BUDGET} tokens ({counter.name})")
    out = ROOT / "artifacts" / "prompt_build.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
