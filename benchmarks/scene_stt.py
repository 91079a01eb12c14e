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
    python -m benchmarks.scene_stt --general-every 2 --fit   # the general model on every 2nd clip

`--fit` fits each recogniser's confidence (voice/confidence.py: `CALIBRATION` for the scene model,
`GENERAL_CALIBRATION` for the general one) on its English clips and judges it out of sample too.
"False repeat" is the share of right transcripts under the threshold: a "please repeat" to a line
heard right (issue #34's target: at most 10 % on clear speech, the clean clips).

Writes artifacts/scene_stt.json (and each clip's confidence evidence and verdict in
artifacts/scene_stt.records.json) and prints the figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.speech_set import Judged, Line, Tally, Variant, group_of, judge, load_labels, render, variants
from voice.confidence import POSTERIOR_FEATURES, SCENE_FEATURES, THRESHOLD, Calibration, Evidence, curve, fit
from voice.stt import SceneContext

ROOT = Path(__file__).resolve().parent.parent


def clips(every: int) -> list[tuple[Line, Variant]]:
    pairs = [(line, v) for line in load_labels() for v in variants(line)]
    return pairs[::every]


@dataclass(frozen=True)
class Record:
    line: Line
    variant: Variant
    judged: Judged
    confidence: float
    evidence: Evidence | None
    seconds: float
    cpu: float


def decode_all(decode: Any, pairs: list[tuple[Line, Variant]]) -> list[Record]:
    records = []
    for line, variant in pairs:
        pcm = render(line, variant)
        context = SceneContext(line.pack, line.language, line.item, line.quote)
        start = time.process_time()
        heard, evidence = decode(pcm, context)
        cpu = time.process_time() - start
        records.append(Record(line, variant, judge(line, heard.text), heard.confidence or 0.0, evidence,
                              len(pcm) / 32_000, cpu))
    return records


def figures(name: str, records: list[Record], threshold: float,
            calibration: Calibration | None = None) -> dict[str, Any]:
    """The figures of `records`, their confidence recomputed with `calibration` when given."""
    tallies: dict[str, Tally] = defaultdict(Tally)
    points: list[tuple[float, bool]] = []
    for r in records:
        confidence = calibration.confidence(r.evidence) if calibration and r.evidence else r.confidence
        if r.line.language == "en":
            points.append((confidence, r.judged.right))
        noise = "clean" if r.variant.noise_db is None else f"{r.variant.noise_db}dB"
        group = group_of(r.line)
        for key in (group, f"{group}:{r.line.kind}", f"{group}:{noise}", f"{group}:{r.variant.voice}", "all"):
            tallies[key].add(r.line, r.judged, confidence, threshold, r.seconds, r.cpu)
    return {"recogniser": name, "figures": {k: t.figures() for k, t in sorted(tallies.items())},
            "calibration_curve": curve(points)}


FEATURES = {"scene": SCENE_FEATURES, "general": POSTERIOR_FEATURES}  # each recogniser's evidence


def cross_fit(records: list[Record], features: tuple[str, ...], folds: int = 2) -> dict[str, Any]:
    """The refitted confidence judged out of sample: fit on all lines but one fold, score that fold."""
    english = [r for r in records if r.line.language == "en" and r.evidence is not None]
    ids = sorted({r.line.id for r in english})
    held: list[Record] = []
    scored: list[tuple[float, bool]] = []
    clean: list[tuple[float, bool]] = []
    for k in range(folds):
        out = set(ids[k::folds])
        model = fit([(r.evidence, r.judged.right) for r in english if r.line.id not in out and r.evidence], features)
        for r in english:
            if r.line.id in out and r.evidence is not None:
                held.append(r)
                scored.append((model.confidence(r.evidence), r.judged.right))
                if r.variant.noise_db is None:
                    clean.append(scored[-1])
    wrong = sum(1 for c, ok in scored if c >= THRESHOLD and not ok)
    accepted = sum(1 for c, _ in scored if c >= THRESHOLD)
    return {"folds": folds, "n": len(scored), "wrong_above_threshold": round(wrong / max(1, len(scored)), 4),
            "accepted": accepted, "wrong_among_accepted": round(wrong / accepted, 4) if accepted else None,
            "false_repeat": false_repeat(scored), "false_repeat_clean": false_repeat(clean),
            "calibration_curve": curve(scored)}


def false_repeat(scored: list[tuple[float, bool]]) -> float | None:
    """The share of right transcripts under the threshold."""
    right = [c for c, ok in scored if ok]
    return round(sum(c < THRESHOLD for c in right) / len(right), 4) if right else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=int, default=1, help="take every Nth clip")
    parser.add_argument("--fit", action="store_true", help="refit the confidence's calibration")
    parser.add_argument("--no-general", action="store_true", help="skip the general model")
    parser.add_argument("--no-scene", action="store_true", help="skip the scene model")
    parser.add_argument("--general-every", type=int, default=1, help="the general model on every Nth clip")
    parser.add_argument("--no-denoise", action="store_true",
                        help="the scene model without its noise filter (voice/denoise.py), to compare")
    parser.add_argument("--out", default=str(ROOT / "artifacts" / "scene_stt.json"))
    args = parser.parse_args()
    from voice.scene_stt import SceneStt
    from voice.stt import PocketsphinxStt

    pairs = clips(args.every)
    results: list[dict[str, Any]] = []
    report: dict[str, Any] = {"clips": len(pairs), "threshold": THRESHOLD, "results": results}
    kept: dict[str, list[Record]] = {}
    if not args.no_general:
        general = PocketsphinxStt()
        kept["general"] = decode_all(lambda pcm, _ctx: general.decode_evidence(pcm), pairs[::args.general_every])
        results.append(figures("general (pocketsphinx en-US, STT_SCENE=false)", kept["general"], THRESHOLD))
    prepare_cpu = 0.0
    if not args.no_scene:
        scene = SceneStt(shutil.which("espeak-ng"), str(ROOT / "var" / "stt"), denoise=not args.no_denoise)
        start = time.process_time()
        scene.prepare(sorted({line.pack for line, _ in pairs}))
        prepare_cpu = time.process_time() - start
        kept["scene"] = decode_all(scene.decode, pairs)
        results.append(figures("scene (pocketsphinx, scene models)", kept["scene"], THRESHOLD))
        report["scene_prepare_cpu_s"] = round(prepare_cpu, 2)
    if args.fit:
        for name, got in kept.items():
            fitted = fit([(r.evidence, r.judged.right) for r in got if r.evidence and r.line.language == "en"],
                         FEATURES[name])
            report.setdefault("fitted", {})[name] = {"weights": fitted.weights, "knot": fitted.knot,
                                                     "features": fitted.features}
            results.append(figures(f"{name}, refitted confidence (in sample)", got, THRESHOLD, fitted))
            report.setdefault("cross_fit", {})[name] = cross_fit(got, FEATURES[name])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    # Each clip's evidence and verdict, to refit the confidence without decoding again (issue #34).
    for name, got in kept.items():
        where = Path(args.out).with_suffix(".records.json" if name == "scene" else f".{name}.records.json")
        where.write_text(json.dumps(
            [{"id": r.line.id, "variant": r.variant.tag, "language": r.line.language, "right": r.judged.right,
              "evidence": dict(zip(FEATURES[name], r.evidence.vector(FEATURES[name]), strict=True))
              if r.evidence else None,
              "words": r.evidence.words if r.evidence else 0, "confidence": r.confidence} for r in got]) + "\n",
            "utf-8")
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n", "utf-8")
    for result in results:
        print(f"\n== {result['recogniser']} ({len(pairs)} clips)")
        for key, fig in result["figures"].items():
            print(f"  {key:16} n={fig['n']:4}  WER {fig['wer']}  price {fig['price_accuracy']} ({fig['prices']})  "
                  f"right {fig['right']}  wrong>=thr {fig['wrong_above_threshold']}  "
                  f"wrong|accepted {fig['wrong_among_accepted']}  false repeat {fig['false_repeat']}  "
                  f"CPU {fig['cpu_ms_per_s']} ms/s")
        print("  calibration (English):", ", ".join(f"{b['from']:.1f}: {b['n']}/{b['right']}"
                                                      for b in result["calibration_curve"]))
    for name, fitted in report.get("fitted", {}).items():
        print(f"\nfitted ({name}):", fitted)
        cross = report["cross_fit"][name]
        print(f"out of sample ({cross['folds']} folds by line, English): wrong>=thr {cross['wrong_above_threshold']}"
              f" wrong|accepted {cross['wrong_among_accepted']} ({cross['accepted']} of {cross['n']} accepted)"
              f" false repeat {cross['false_repeat']}, clean {cross['false_repeat_clean']}")
        bins = cross["calibration_curve"]
        print("  calibration:", ", ".join(f"{b['from']:.1f}: {b['n']}/{b['right']}" for b in bins))
    print(f"\nscene models built in {prepare_cpu:.2f} s CPU; written to {args.out}")


if __name__ == "__main__":
    main()
