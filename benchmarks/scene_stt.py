"""Offline recognition, today's general model against the scene model (issue #41), on the labelled
speech set (tests/speech_set.py: every pack's English lines and prices, free English and the
romanized lines, in espeak-ng voices and speeds, clean and with noise at 20 and 10 dB SNR).

For each recogniser, in the same run and on the same audio: the word error rate of the English
lines, the share of priced lines whose price the offer reader (session/offers.py) reads right,
the share of transcripts that are wrong and still at or above `CONFIDENCE_CLARIFY_THRESHOLD`,
the calibration curve (per confidence bin, the share right), per-language figures for the
romanized lines, and the CPU per second of speech (process time around each decode).
"Right" is tests/speech_set.py's `judge`: the price read as the line's, and at most a quarter of
the words wrong.

    python -m benchmarks.scene_stt                 # the whole set (about 900 clips; 15 min on one core)
    python -m benchmarks.scene_stt --every 4       # every 4th clip
    python -m benchmarks.scene_stt --fit           # also refit the confidence (voice/confidence.py)
    python -m benchmarks.scene_stt --no-general    # the scene model only

Writes artifacts/scene_stt.json and prints the figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.speech_set import Line, Tally, Variant, group_of, judge, load_labels, render, variants
from voice.confidence import THRESHOLD, Evidence, curve, fit
from voice.stt import SceneContext, Transcription

ROOT = Path(__file__).resolve().parent.parent


def clips(every: int) -> list[tuple[Line, Variant]]:
    pairs = [(line, v) for line in load_labels() for v in variants(line)]
    return pairs[::every]


def run(name: str, decode: Any, pairs: list[tuple[Line, Variant]], threshold: float,
        samples: list[tuple[Evidence, bool]] | None = None) -> dict[str, Any]:
    tallies: dict[str, Tally] = defaultdict(Tally)
    points: list[tuple[float, bool]] = []
    for line, variant in pairs:
        pcm = render(line, variant)
        context = SceneContext(line.pack, line.language if line.language != "en" else "en", line.item, line.quote)
        start = time.process_time()
        heard: Transcription
        heard, evidence = decode(pcm, context)
        cpu = time.process_time() - start
        judged = judge(line, heard.text)
        confidence = heard.confidence or 0.0
        points.append((confidence, judged.right)) if line.language == "en" else None
        if samples is not None and evidence is not None and line.language == "en":
            samples.append((evidence, judged.right))
        seconds = len(pcm) / 32_000
        for key in (group_of(line), f"{group_of(line)}:{line.kind}",
                    f"{group_of(line)}:{'clean' if variant.noise_db is None else f'{variant.noise_db}dB'}", "all"):
            tallies[key].add(line, judged, confidence, threshold, seconds, cpu)
    figures = {key: tally.figures() for key, tally in sorted(tallies.items())}
    return {"recogniser": name, "figures": figures, "calibration_curve": curve(points)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=int, default=1, help="take every Nth clip")
    parser.add_argument("--fit", action="store_true", help="refit the confidence's calibration")
    parser.add_argument("--no-general", action="store_true", help="skip today's general model")
    parser.add_argument("--out", default=str(ROOT / "artifacts" / "scene_stt.json"))
    args = parser.parse_args()
    from voice.scene_stt import SceneStt
    from voice.stt import PocketsphinxStt

    pairs = clips(args.every)
    results = []
    if not args.no_general:
        general = PocketsphinxStt()
        results.append(run("general (pocketsphinx en-US, today's)",
                           lambda pcm, _ctx: (general.decode(pcm), None), pairs, THRESHOLD))
    scene = SceneStt(shutil.which("espeak-ng"), str(ROOT / "var" / "stt"))
    start = time.process_time()
    scene.prepare(sorted({line.pack for line, _ in pairs}))
    prepare_cpu = time.process_time() - start
    samples: list[tuple[Evidence, bool]] = []
    results.append(run("scene (pocketsphinx, scene models)", scene.decode, pairs, THRESHOLD, samples))
    report: dict[str, Any] = {"clips": len(pairs), "threshold": THRESHOLD, "results": results,
                              "scene_prepare_cpu_s": round(prepare_cpu, 2)}
    if args.fit:
        fitted = fit(samples)
        report["fitted"] = {"weights": fitted.weights, "knot": fitted.knot}
        scene.calibration = fitted
        results.append(run("scene, refitted confidence", scene.decode, pairs, THRESHOLD))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n", "utf-8")
    for result in results:
        print(f"\n== {result['recogniser']} ({len(pairs)} clips)")
        for key, fig in result["figures"].items():
            print(f"  {key:16} n={fig['n']:4}  WER {fig['wer']}  price {fig['price_accuracy']} ({fig['prices']})  "
                  f"right {fig['right']}  wrong>=thr {fig['wrong_above_threshold']}  "
                  f"wrong|accepted {fig['wrong_among_accepted']}  CPU {fig['cpu_ms_per_s']} ms/s")
        print("  calibration (English):", ", ".join(f"{b['from']:.1f}: {b['n']}/{b['right']}"
                                                      for b in result["calibration_curve"]))
    if "fitted" in report:
        print("\nfitted:", report["fitted"])
    print(f"\nscene models built in {prepare_cpu:.2f} s CPU; written to {args.out}")


if __name__ == "__main__":
    main()
