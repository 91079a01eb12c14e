"""What does one model call cost in CPU when calls come back to back, and when the process idles
between them? (issue #14)

`python -m benchmarks.llm_stream` measures the server's CPU per turn at a light load: eight
sessions, each waiting 2.6 s for the fake model and then thinking for 0.3-1.5 s, so the server is
idle almost all the time and every turn starts after a pause. This benchmark isolates what such a
pause does to the same work: `ChatTransport.call` (the brain's model call through the openai SDK
and aiohttp, the code every LLM turn runs) against `benchmarks.fake_model` in its own process,
answering at once, with nothing else in this process. Each round makes `--calls` calls with `gap`
seconds of sleep between them, for every gap in `--gaps`, the gaps alternating round by round; the
figure is this process's CPU (`time.process_time`) per call, the sleep's own wake-up (measured
alone, up to 20 times per round) taken off. The back-to-back gap (0) is the baseline of the same
run; the ratios say how much more the same call costs after a pause.

    python -m benchmarks.call_cost                      # both modes, gaps 0, 10 ms, 100 ms, 300 ms
    python -m benchmarks.call_cost --modes plain --calls 100 --rounds 5

Figures are printed and written to artifacts/call_cost.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from brain.transport import ChatTransport, sdk_client  # noqa: E402
from brain.turn import Turn  # noqa: E402

PROMPT = ([{"role": "system", "content": "You are Ramesh, a vendor in Johari Bazaar. " * 150}]
          + [{"role": "user" if n % 2 else "assistant", "content": f"Line {n}: kitne ka hai, bhaiya?"}
             for n in range(24)])


class _Ask:
    """What the call's log record names: a session and a turn."""

    session_id = "call-cost"
    turn = 1


def start_fake() -> tuple[subprocess.Popen[str], str]:
    """benchmarks.fake_model answering at once (no time to first token, no pacing to speak of)."""
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.fake_model", "--ttft-ms", "0",
                             "--tokens-per-s", "1000000"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().split()[-1]


async def measure(url: str, stream: bool, gaps: list[float], calls: int, rounds: int) -> dict[str, Any]:
    client = sdk_client(api_key="call-cost", base_url=url, timeout_s=10)
    transport = ChatTransport(client=client, model="gpt-4o", temperature=0.7, max_tokens=200,
                              stream=stream, response_format={"type": "json_object"})
    loop = asyncio.get_running_loop()

    async def call() -> None:
        await transport.call(Turn(_Ask(), None, loop.time() + 30), PROMPT)

    async def wake_cost(gap: float) -> float:
        """CPU of one sleep of `gap` and its wake-up, with nothing else done."""
        count = min(calls, 20)
        started = time.process_time()
        for _ in range(count):
            await asyncio.sleep(gap)
        return (time.process_time() - started) / count

    try:
        for _ in range(50):  # warm: connections open, code loaded
            await call()
        per_call: dict[float, list[float]] = {gap: [] for gap in gaps}
        for round_ in range(rounds):
            for gap in gaps if round_ % 2 == 0 else reversed(gaps):
                started = time.process_time()
                for _ in range(calls):
                    await call()
                    if gap:
                        await asyncio.sleep(gap)
                spent = time.process_time() - started
                wake = await wake_cost(gap) * calls if gap else 0.0
                per_call[gap].append(max(0.0, spent - wake) / calls * 1e6)
    finally:
        await transport.aclose()
    base = statistics.median(per_call[gaps[0]])
    return {f"gap_{gap * 1000:g}ms": {"cpu_us_per_call_median": round(statistics.median(values), 1),
                                      "cpu_us_per_call_rounds": [round(v, 1) for v in values],
                                      "ratio_to_back_to_back": round(statistics.median(values) / base, 2)}
            for gap, values in per_call.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--modes", default="plain,streamed", help="plain, streamed, or both")
    parser.add_argument("--gaps-ms", default="0,10,100,300", help="idle between calls; the first is the baseline")
    parser.add_argument("--calls", type=int, default=40, help="calls per gap per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "artifacts" / "call_cost.json"))
    args = parser.parse_args()
    gaps = [float(g) / 1000 for g in args.gaps_ms.split(",")]
    logging.disable(logging.INFO)  # one log record per call; the server writes it too, but to a file
    fake, url = start_fake()
    result: dict[str, Any] = {"calls": args.calls, "rounds": args.rounds, "modes": {}}
    try:
        import uvloop

        for mode in args.modes.split(","):
            figures = uvloop.run(measure(url, mode == "streamed", gaps, args.calls, args.rounds))
            result["modes"][mode] = figures
            for name, row in figures.items():
                print(f"{mode:9s} {name:10s} {row['cpu_us_per_call_median']:8.1f} us/call"
                      f"  x{row['ratio_to_back_to_back']:.2f}  rounds {row['cpu_us_per_call_rounds']}", flush=True)
    finally:
        fake.terminate()
        fake.wait()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
