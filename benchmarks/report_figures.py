"""The performance report's runs and figures (benchmarks/report.py runs them): what each run was,
and every figure of issue #33 beside its target, with its verdict, as JSON and a Markdown table."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

NON_STREAMED_RATIO_BEFORE = 10.75
REPORT_MARK = "performance-report"
NONE = "\u2013"  # an en dash: no figure


class Runs:
    """Every run of this report: what it was, when, and its raw figures. After each run the report
    is written again, so that a sitting cut short still leaves the runs it finished."""

    def __init__(self, after: Callable[[], object]) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self.after = after

    def record(self, run_id: str, what: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        print(f"== {run_id}: {what}", flush=True)
        started = time.time()
        try:
            result = fn()
        except Exception as exc:  # a failed run is a figure too: the report says so
            result = {"failed": f"{type(exc).__name__}: {exc}"}
            print(f"   failed: {result['failed']}", flush=True)
        self.runs[run_id] = {"what": what, "started": round(started, 1),
                             "seconds": round(time.time() - started, 1), "result": result}
        self.after()
        return result






def median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def figure(fid: str, label: str, value: float | None, unit: str, target: str,
           ok: Callable[[float], bool] | None, runs: list[str]) -> dict[str, Any]:
    verdict = "not run" if value is None else ("info" if ok is None else ("pass" if ok(value) else "fail"))
    return {"id": fid, "label": label, "value": value, "unit": unit, "target": target, "verdict": verdict,
            "runs": runs}


def ok_runs(runs: Runs, prefix: str) -> list[tuple[str, dict[str, Any]]]:
    return [(k, v["result"]) for k, v in runs.runs.items() if k.startswith(prefix) and "failed" not in v["result"]]


def figures(runs: Runs) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cur = ok_runs(runs, "rule-current")
    base = ok_runs(runs, "rule-baseline")
    pairs = [(c, b) for (_, c), (_, b) in zip(cur, base, strict=False)]
    ratios = [c["server_cpu_us_per_turn"] / b["server_cpu_us_per_turn"] for c, b in pairs]
    rule_ids = [k for k, _ in cur] + [k for k, _ in base]
    out.append(figure("rule.cpu_ratio", "Rule turn at churn: server CPU per turn, this / baseline (median of pairs)",
                      median(ratios), "x", "<= 0.8", lambda v: v <= 0.8, rule_ids))
    out.append(figure("rule.cpu_us", "Rule turn at churn: server CPU per turn, this (median)",
                      median([c["server_cpu_us_per_turn"] for _, c in cur]), "us", "", None, [k for k, _ in cur]))
    out.append(figure("rule.cpu_us_baseline", "Rule turn at churn: server CPU per turn, baseline (median)",
                      median([b["server_cpu_us_per_turn"] for _, b in base]), "us", "", None, [k for k, _ in base]))
    out.append(figure("rule.p99_ms", "Rule turn at churn: latency p99 (median of runs)",
                      median([c["latency_ms"]["p99"] for _, c in cur]), "ms", "<= 10", lambda v: v <= 10,
                      [k for k, _ in cur]))
    out.append(figure("rule.errors", "Rule turn at churn: errors + violations (all runs of this build)",
                      sum(c["errors"] + c["violations"] for _, c in cur) if cur else None, "", "0",
                      lambda v: v == 0, [k for k, _ in cur]))
    life = ok_runs(runs, "life")
    out.append(figure("life.us", "A session's life on its own (create, upgrade, welcome, end, report, profile)",
                      life[0][1]["server_cpu_us_per_session"] if life else None, "us/session", "", None,
                      [k for k, _ in life]))
    out.append(figure("life.failures", "Sessions of the life run that failed", life[0][1]["failures"] if life else None,
                      "", "0", lambda v: v == 0, [k for k, _ in life]))
    stream = ok_runs(runs, "llm-stream-")
    out.append(figure("llm.stream_ratio", "LLM turn: server CPU per streamed turn / the fake model's (median)",
                      median([r["ratio"] for _, r in stream]), "x", "<= 2.0", lambda v: v <= 2.0,
                      [k for k, _ in stream]))
    steady = [r["steady_ratio"] for _, r in stream if r.get("steady_ratio")]
    out.append(figure("llm.stream_ratio_steady", "LLM turn: the same once every learner is connected, "
                      "without the ramp's session creations (median)", median(steady), "x", "", None,
                      [k for k, _ in stream]))
    plain = ok_runs(runs, "llm-nostream")
    out.append(figure("llm.nostream_ratio", "LLM turn: server CPU per non-streamed turn / the fake model's",
                      plain[0][1]["ratio"] if plain else None, "x", f"< {NON_STREAMED_RATIO_BEFORE} (before)",
                      lambda v: v < NON_STREAMED_RATIO_BEFORE, [k for k, _ in plain]))
    out.append(figure("capacity.p99_ms", "Capacity at the first N: first-words overhead p99 (median of runs)",
                      median([r["overhead_ms"].get("p99", float("inf")) for _, r in stream]), "ms", "<= 10",
                      lambda v: v <= 10, [k for k, _ in stream]))
    first_char = [r["overhead_from_first_char_ms"].get("p99", float("inf")) for _, r in stream
                  if r.get("overhead_from_first_char_ms")]
    out.append(figure("capacity.p99_first_char_ms", "Capacity at the first N: the same from the model's first "
                      "character, its first clause's writing included (median of runs)",
                      median(first_char), "ms", "", None, [k for k, _ in stream]))
    out.append(figure("capacity.errors", "Capacity at the first N: errors (all runs)",
                      sum(sum(r["errors"].values()) for _, r in stream) if stream else None, "", "0",
                      lambda v: v == 0, [k for k, _ in stream]))
    large = ok_runs(runs, "llm-large")
    out.append(figure("capacity.large_p99_ms", "Capacity at the second N: first-words overhead p99",
                      large[0][1]["overhead_ms"].get("p99") if large else None, "ms", "reported", None,
                      [k for k, _ in large]))
    idle = ok_runs(runs, "memory-idle")
    out.append(figure("memory.idle_kib", "An idle session with its open player socket",
                      idle[0][1]["kib_per_idle_session_with_socket"] if idle else None, "KiB", "<= 16",
                      lambda v: v <= 16, [k for k, _ in idle]))
    out.append(figure("memory.ended_kib", "An ended session kept for its report",
                      life[0][1]["kib_per_ended_session"] if life else None, "KiB", "<= 8",
                      lambda v: v <= 8, [k for k, _ in life]))
    base = ok_runs(runs, "memory-base")
    out.append(figure("memory.base_rss_mib", "Base RSS of `samvad serve` just started, rule brain, no mirror",
                      base[0][1]["mocks_mib"] if base else None, "MiB", "reported, per dependency", None,
                      [k for k, _ in base]))
    out.append(figure("memory.base_rss_llm_mib", "Base RSS of `samvad serve` just started, LLM brain"
                      + (" and Neo4j mirror" if base and base[0][1]["neo4j"] else ""),
                      base[0][1]["llm_mib"] if base else None, "MiB", "reported, per dependency", None,
                      [k for k, _ in base]))
    pauses = ok_runs(runs, "pauses")
    out.append(figure("pauses.max_ms", "Longest collector pause while serving, planned full passes included",
                      pauses[0][1]["max_pause_ms"] if pauses else None, "ms", "<= 50", lambda v: v <= 50,
                      [k for k, _ in pauses]))
    out.append(figure("pauses.cpu_max_ms", "The collector's own CPU time in its longest pass while serving",
                      pauses[0][1].get("max_pause_cpu_ms") if pauses else None, "ms", "reported", None,
                      [k for k, _ in pauses]))
    out.append(figure("pauses.planned_run", "Planned full passes run while serving (the others deferred)",
                      sum(p["msg"] == "full garbage collection" for p in pauses[0][1]["planned_full_passes"])
                      if pauses else None, "", "reported", None, [k for k, _ in pauses]))
    voice = ok_runs(runs, "voice")
    out.append(figure("voice.cpu_ms", "Voice: server CPU per spoken turn",
                      voice[0][1]["server_cpu_ms_per_turn"] if voice else None, "ms", "<= 15",
                      lambda v: v <= 15, [k for k, _ in voice]))
    out.append(figure("voice.p99_ms", "Voice: server overhead p99",
                      voice[0][1]["overhead_ms"].get("p99") if voice else None, "ms", "<= 20",
                      lambda v: v <= 20, [k for k, _ in voice]))
    return out


def markdown(report: dict[str, Any]) -> str:
    head = report["sitting"]
    lines = [f"Report of `{head['command']}`, {head['date']}: commit {head['commit']} against "
             f"{head['baseline']}, {head['cpus']} CPUs (shared), Python {head['python']}"
             + (" — **quick: scaled-down runs, a smoke test, not the issue's verdicts**" if head["quick"] else "")
             + ("" if head["finished"] else " — **still running, or cut short: the runs so far**")
             + (f"; with the runs of `{head['merged_from']['command']}` ({head['merged_from']['date']}), "
                "marked with theirs" if head.get("merged_from") else "")
             + ".", "", "| figure | value | target | verdict | runs |", "| --- | --- | --- | --- | --- |"]
    for f in report["figures"]:
        value = NONE if f["value"] is None else f"{f['value']:g} {f['unit']}".strip()
        runs = ", ".join(f["runs"]) or NONE
        lines.append(f"| {f['label']} | {value} | {f['target'] or NONE} | {f['verdict']} | {runs} |")
    imports = report["runs"].get("memory-imports", {}).get("result", {})
    if "total" in imports:
        parts = ", ".join(f"{name} {mib:g}" for name, mib in imports.items() if name != "total" and mib >= 0.5)
        lines += ["", f"RSS by import, MiB (each after those before it; a fresh interpreter): {parts}; "
                      f"{imports['total']:g} in all."]
    lines += ["", "| run | what | seconds |", "| --- | --- | --- |"]
    for run_id, run in report["runs"].items():
        failed = f" (failed: {run['result']['failed']})" if "failed" in run["result"] else ""
        lines.append(f"| {run_id} | {run['what']}{failed} | {run['seconds']:g} |")
    return "\n".join(lines) + "\n"


def quote_in(path: Path, table: str) -> None:
    """Replace the marked block of a document with the report's table."""
    start, end = f"<!-- {REPORT_MARK}:start -->", f"<!-- {REPORT_MARK}:end -->"
    text = path.read_text()
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise RuntimeError(f"{path} has no {start} ... {end} block to fill")
    path.write_text(pattern.sub(lambda _: f"{start}\n{table}{end}", text))
