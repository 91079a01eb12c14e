"""The LLM prompt's build time: with 1,000 turns of history (issue #15), and per turn of a growing
conversation against an earlier commit (issue #14). docs/performance.md has the figures.

The long session (the default). A negotiation is given 1,000 answered turns (2,000 lines, Hinglish,
about 25 tokens a line) and a running summary; then `--turns` more learner turns are played through
it. Each is timed from the transcript to the prompt the model would be sent: `Negotiation.begin_turn`
and `brain_request` (the request, its 40 lines and the graph context), `build_system_prompt`, and
`build_user_message` with the default HISTORY_TOKEN_BUDGET (2,000) and gpt-4o's counter (cl100k_base,
offline). The answer is applied untimed, so each timed turn has two new lines, as in a session. No
model, no sockets. Prints p50/p95/p99 in microseconds and writes artifacts/prompt_build.json.

    python benchmarks/prompt_build.py [--turns 1000] [--history 1000]

The growing conversation (`--growing`). `--sessions` negotiations of `--length` learner turns each,
as a server plays them: unique learner lines (Hinglish, English and Devanagari, some with a hyphen
or a dash), the vendor's answers, a running summary from turn 11, a known learner's memory in every
other session, and the cultural notes the default retriever finds for each turn (retrieved
untimed). Timed: the thread's CPU in `build_system_prompt` and `build_user_message`, per turn. The
same workload runs in a fresh process on this checkout and on `--against` (a commit, exported with
`git archive` to a temporary folder), alternately, `--rounds` times each; the medians and their
ratio are printed and written to artifacts/prompt_build_growing.json.

    python benchmarks/prompt_build.py --growing [--against d0e6661] [--sessions 60] [--rounds 3]
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts"
BEFORE_ISSUE_14_PROMPT = "d0e6661"  # main before the prompt's build was cut (issue #14)

if TYPE_CHECKING:
    from session.negotiation import Negotiation


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


# ---------------------------------------------------------------------- the long session (issue #15)


def session(history: int) -> Negotiation:
    from schemas.enums import Stage
    from session.negotiation import Negotiation
    from session.records import TurnRecord
    from session.rules import Limits

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


def long_session(turns: int, history: int) -> int:
    sys.path.insert(0, str(ROOT))
    from brain.prompt import DEFAULT_HISTORY_BUDGET, build_system_prompt, build_user_message, history_blocks
    from brain.window import counter_for
    from schemas.brain import BrainResult
    from schemas.decision import AIDecision
    from schemas.enums import Mood, Stage

    counter = counter_for("gpt-4o")
    n = session(history)
    answer = BrainResult(decision=AIDecision(reply_text="Theek hai, dekhte hain.", happiness_score=50,
                                             negotiation_state=Stage.HAGGLING, vendor_mood=Mood.NEUTRAL))
    parts: dict[str, list[float]] = {"request": [], "system": [], "user": [], "total": []}
    most = 0
    for i in range(turns):
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
        "history_turns_at_start": history, "timed_turns": turns, "budget_tokens": DEFAULT_HISTORY_BUDGET,
        "counter": counter.name, "most_tokens_used": most, "figures": figures,
        "python": platform.python_version(), "machine": platform.machine(),
    }
    for name, f in figures.items():
        print(f"{name:8s} p50 {f['p50_us']:8.1f} us   p95 {f['p95_us']:8.1f} us   p99 {f['p99_us']:8.1f} us")
    print(f"history block and summary: at most {most} of {DEFAULT_HISTORY_BUDGET} tokens ({counter.name})")
    write("prompt_build.json", result)
    return 0


# ---------------------------------------------------------------------- a growing conversation (issue #14)

# Learner lines: Hinglish, English and Devanagari, some with a hyphen or a dash; each made unique by its
# session and turn. Vendor lines as a model writes them, one cut short by a barge-in (an em dash at the end).
LEARNER_LINES = (
    "Namaste bhaiya, how much for the tomatoes today? ({s}.{t})",
    "Bahut mehenga hai yaar, {p} rupaye mein de do na ({s}.{t})",
    "That is too much - my friend paid only {p} last week ({s}.{t})",
    "भैया, {p} रुपये में दे दो, रोज़ आती हूँ ({s}.{t})",
    "Are these from Jaipur itself or from the mandi? ({s}.{t})",
    "OK, {p} rupees, final offer; I'll take two kilos ({s}.{t})",
    "थोड़ा कम करो भैया, {p} ठीक है? ({s}.{t})",
    "Hmm... the ones at the next stall looked fresher \u2014 {p}? ({s}.{t})",
)
VENDOR_LINES = (
    "Arre, welcome! Fresh desi tomatoes, straight from the farm this morning, only {p} a kilo for you.",
    "Haan ji, see the colour, nobody in Johari Bazaar has better. {p} is already a fair price.",
    "Bas {p}, my last price, I am losing money here but you are a good customer.",
    "Accha theek hai, for you, {p}. Two kilos? I will pick the best ones myself.",
    "Nahi nahi, {p} se kam nahi ho payega\u2014",
)
SUMMARY = ("The learner greeted Ramesh politely and asked about tomatoes; he quoted {q} rupees a kilo, well above "
           "the fair price. They offered {p} and then argued the price down step by step - Ramesh is holding near "
           "his floor and the learner has mentioned another stall twice.")


async def growing(sessions: int, length: int) -> dict[str, float]:
    """CPU per learner turn of the prompt's build over `sessions` conversations of `length` turns."""
    from brain.knowledge.retriever import knowledge_retriever
    from brain.prompt import DEFAULT_HISTORY_BUDGET, build_system_prompt, build_user_message
    from brain.window import counter_for
    from schemas.brain import BrainResult
    from schemas.decision import AIDecision
    from schemas.enums import Mood, Outcome, Stage
    from schemas.learner import LearnerRecall
    from session.negotiation import Negotiation
    from session.rules import Limits

    counter = counter_for("gpt-4o")
    retrieve = knowledge_retriever()
    system = user = 0.0
    for s in range(sessions):
        n = Negotiation(session_id=f"g{s}", scenario_name="jaipur-bazaar", created_at=0.0,
                        limits=Limits(max_turns=length + 1, wrap_up_after=length + 1))
        if s % 2:
            n.recall = LearnerRecall(sessions=2, last_outcome=Outcome.DEAL, last_item="tomato", last_paid=40,
                                     last_first_quote=80, last_discount_pct=50.0)
        for t in range(1, length + 1):
            if t > 10:
                n.memory.summary, n.memory.covers = SUMMARY.format(q=80, p=30 + s % 7), 10
            said = LEARNER_LINES[(s + t) % len(LEARNER_LINES)].format(s=s, t=t, p=30 + t)
            pending = n.begin_turn(said, f"c{t}", 1e6 + t)
            request = n.brain_request(pending)
            notes = await retrieve(request)
            t0 = time.thread_time()
            build_system_prompt(request)
            t1 = time.thread_time()
            build_user_message(request, notes, history_budget=DEFAULT_HISTORY_BUDGET, counter=counter)
            t2 = time.thread_time()
            system, user = system + t1 - t0, user + t2 - t1
            reply = VENDOR_LINES[(s * 3 + t) % len(VENDOR_LINES)].format(p=70 - t)
            decision = AIDecision(reply_text=reply, happiness_score=50, vendor_mood=Mood.NEUTRAL,
                                  negotiation_state=Stage.INQUIRY if t < 3 else Stage.HAGGLING)
            n.complete_turn(pending, BrainResult(decision=decision), 1e6 + t + 0.5)
    turns = sessions * length
    return {"system_us": system / turns * 1e6, "user_us": user / turns * 1e6, "total_us": (system + user) / turns * 1e6}


def worker(tree: str, sessions: int, length: int) -> int:
    """Run the growing conversation on the code in `tree`; print its figures as JSON."""
    sys.path.insert(0, tree)
    import anyio

    anyio.run(growing, 5, length)  # warm: imports, the scenario, the tokenizer, the knowledge index
    print(json.dumps(anyio.run(growing, sessions, length)))
    return 0


def export(rev: str, into: Path) -> Path:
    """`rev`'s files, from `git archive`, in a folder under `into`."""
    archive = subprocess.run(["git", "archive", "--format=tar", rev], cwd=ROOT, capture_output=True, check=True)
    tree = into / rev
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    return tree


def compare(against: str, sessions: int, length: int, rounds: int) -> int:
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="prompt_build.") as tmp:
        trees = {"before": export(against, Path(tmp)), "after": ROOT}
        for r in range(rounds):
            for side in ("before", "after") if r % 2 == 0 else ("after", "before"):
                command = [sys.executable, __file__, "--worker", str(trees[side]),
                           "--sessions", str(sessions), "--length", str(length)]
                out = subprocess.run(command, capture_output=True, text=True, check=True)
                runs[side].append(json.loads(out.stdout.splitlines()[-1]))
                print(f"round {r + 1} {side:6s}", "  ".join(f"{k} {v:6.1f}" for k, v in runs[side][-1].items()))
    medians = {side: {k: round(statistics.median(run[k] for run in done), 1) for k in done[0]}
               for side, done in runs.items()}
    ratio = {k: round(medians["before"][k] / medians["after"][k], 2) for k in medians["after"]}
    print(f"CPU per turn, median of {rounds}: {medians['before']['total_us']:.1f} us at {against}, "
          f"{medians['after']['total_us']:.1f} us now ({ratio['total_us']:.2f}x); the user message "
          f"{medians['before']['user_us']:.1f} -> {medians['after']['user_us']:.1f} us, the system prompt "
          f"{medians['before']['system_us']:.1f} -> {medians['after']['system_us']:.1f} us")
    write("prompt_build_growing.json", {
        "against": against, "sessions": sessions, "turns_per_session": length, "rounds": rounds,
        "runs": runs, "median_us_per_turn": medians, "before_over_after": ratio,
        "python": platform.python_version(), "machine": platform.machine(),
    })
    return 0


def write(name: str, result: dict[str, Any]) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / name).write_text(json.dumps(result, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000, help="timed turns of the long session")
    parser.add_argument("--history", type=int, default=1000, help="answered turns before the first timed one")
    parser.add_argument("--growing", action="store_true", help="growing conversations, now against --against")
    parser.add_argument("--against", default=BEFORE_ISSUE_14_PROMPT, help="the commit to compare with")
    parser.add_argument("--sessions", type=int, default=60, help="conversations per run")
    parser.add_argument("--length", type=int, default=20, help="learner turns per conversation")
    parser.add_argument("--rounds", type=int, default=3, help="runs on each side, alternately")
    parser.add_argument("--worker", metavar="TREE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.sessions, args.length)
    if args.growing:
        return compare(args.against, args.sessions, args.length, args.rounds)
    return long_session(args.turns, args.history)


if __name__ == "__main__":
    raise SystemExit(main())
