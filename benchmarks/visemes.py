"""The server CPU that visemes add per spoken sentence (issue #38, docs/voice.md "Visemes").

In one process, for the vendor's kind of lines, chunked as the Speaker sends them (the first
piece at once, then `CHUNK_BYTES`): the CPU time (`time.process_time`) of

- `espeak`: cutting espeak-ng's own phoneme events per chunk (the synthesis is the voice's own
  cost, visemes or not), and, for scale, that synthesis through the library;
- `estimate`: espeak-ng's silent pass plus the estimate fed and cut chunk by chunk, for audio
  that came without timings (an OpenAI-compatible voice; here espeak-ng's other voice stands in).

    python -m benchmarks.visemes                # 20 rounds of the lines
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from voice.espeak_lib import shared_espeak
from voice.estimate import RateMemory, VisemeEstimate, phrases_of
from voice.speaker import CHUNK_BYTES
from voice.visemes import cut_phones

LINES = ("Namaste ji! These tomatoes are fresh from the farm this morning.",
         "For you, sixty rupees a kilo, best price in Jaipur.",
         "No no, forty is too low, I will lose money.",
         "Achha, seventy five, and I give you some coriander free.",
         "Theek hai, seventy. Only because you are a regular customer!")
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


def chunk_sizes(total_bytes: int, first: int = 4096) -> list[int]:
    """Samples per chunk as the Speaker cuts a streamed sentence."""
    sizes = [min(first, total_bytes)]
    rest = total_bytes - sizes[0]
    while rest > CHUNK_BYTES:
        sizes.append(CHUNK_BYTES)
        rest -= CHUNK_BYTES
    sizes.append(rest)
    return [s // 2 for s in sizes]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.visemes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    espeak = shared_espeak()
    synth, exact, estimate = [], [], []
    memory = RateMemory()
    for _ in range(args.rounds):
        for line in LINES:
            t0 = time.process_time()
            spoken = espeak.synthesize(line, "en-us", 160)
            t1 = time.process_time()
            start = 0
            sizes = chunk_sizes(len(spoken.pcm))
            for i, size in enumerate(sizes):
                cut_phones(spoken.phones, start, start + size, spoken.rate, last=i == len(sizes) - 1)
                start += size
            t2 = time.process_time()
            api = espeak.synthesize(line, "en-gb-x-rp", 140)  # the "API" audio: not the server's cost
            t3 = time.process_time()
            silent = espeak.timings(line, "en-us", 160)  # the server's silent pass (each line afresh)
            guess = VisemeEstimate(phrases_of(silent.phones, silent.rate, silent.samples), api.rate, memory)
            sent = 0
            sizes = chunk_sizes(len(api.pcm))
            for i, size in enumerate(sizes):
                guess.feed(api.pcm[2 * sent:2 * (sent + size)])
                if i == len(sizes) - 1:
                    guess.finish()
                guess.cut(size, last=i == len(sizes) - 1)
                sent += size
            t4 = time.process_time()
            synth.append((t1 - t0) * 1000)
            exact.append((t2 - t1) * 1000)
            estimate.append((t4 - t3) * 1000)
    result = {"sentences": len(exact),
              "espeak_synthesis_ms_per_sentence": round(statistics.median(synth), 2),
              "espeak_visemes_cpu_ms_per_sentence": round(statistics.median(exact), 3),
              "estimate_visemes_cpu_ms_per_sentence": round(statistics.median(estimate), 2),
              "estimate_p90_ms": round(statistics.quantiles(estimate, n=10)[-1], 2)}
    print(json.dumps(result))
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "visemes_cpu.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
