"""The performance report of issue #33: every figure beside its target, the baselines in the same run.

    python -m benchmarks.report [--quick] [--only rule,life,llm,memory,pauses,voice]
                                [--baseline 3ba1848] [--baseline-dir DIR] [--remove-baseline]
                                [--neo4j-uri URI | --no-neo4j] [--docs]

One sitting, one JSON (artifacts/performance-report.json) and one Markdown table
(artifacts/performance-report.md); with --docs the table also replaces the marked block in
docs/performance.md and README.md, which quote it. Every figure names the runs it came from, and
each run records what it was (scale, settings, start and end), so a figure is never read apart
from its run. The machine is shared: the rule ratio is taken within pairs of runs alternated in
this sitting, and a p99 target is judged on the median of its runs.

The runs (--quick scales each down, and says so in the report; its verdicts are a smoke test,
not the issue's):

* rule: scenario b's Samvad half (`samvad bots --sessions 1000 --think 1000 --paced --duration
  60` against `samvad serve` with benchmarks/load.py's environment, LOG_LEVEL=INFO), three pairs,
  the baseline commit and this checkout alternating. The baseline is checked out into a git
  worktree of its own (--baseline-dir, kept for the next report unless --remove-baseline) with its
  own virtualenv (its scripts/setup.sh), and plays its own bots (the current bots speak protocol
  details the baseline does not know). Server CPU per turn, its ratio, p99, errors.
* life: the fixed cost of a session on its own: a named learner's session created over HTTP,
  its socket upgraded, the welcome, a `stop` command, the `session.ended` and `session.report`
  frames (the report and the learner's profile are made then), the socket closed; server CPU per
  session. The same server's RSS before and after gives the memory of an ended session kept for
  its report.
* llm: `python -m benchmarks.capacity` at N=1,000 three times streamed, once at N=2,000, and once
  at N=1,000 with --no-stream: first-words overhead p99, errors, and server CPU per turn against
  the fake model's in the same step.
* memory: benchmarks/load.py's scenario d (5,000 sessions, each with an idle player socket) and
  the RSS of `samvad serve` just started, with what each dependency adds when imported.
* pauses: benchmarks/gc_pauses.py's `gc.callbacks` timer in the server through scenario b's load
  for 20 minutes with the planned full collection at its default period, so that it is included.
* voice: `python -m benchmarks.voice_turn` (by sentence): server CPU per spoken turn, overhead p99.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.load import (  # noqa: E402
    PY,
    Proc,
    env_for,
    free_port,
    idle_rss,
    raise_fd_limit,
    wait_http,
)

ARTIFACTS = ROOT / "artifacts"
BASELINE = "3ba1848"
# Reference values of figures whose target is "it must fall": what they were when the issue was
# written (docs/performance.md, "A non-streamed turn at the same load": 3.44 ms of server CPU per
# non-streamed turn against the fake model's 0.32 ms, 2026-11-26).
NON_STREAMED_RATIO_BEFORE = 10.75
REPORT_MARK = "performance-report"
DEFAULT_ONLY = "rule,life,llm,memory,pauses,voice"
NONE = "\u2013"  # an en dash: no figure

# Each dependency `samvad serve` imports, in the order measured: the RSS a fresh interpreter
# gains when it imports it (and whatever it pulls in that is not in yet). What `server.app`
# imports first; then what the LLM brain imports when it is built (not with USE_MOCKS).
DEPENDENCIES = ("orjson", "msgpack", "anyio", "pydantic", "starlette", "uvicorn", "websockets", "uvloop",
                "httptools", "jwt", "numpy", "bm25s", "neo4j", "psutil", "schemas", "session", "brain", "voice",
                "server.app", "httpx2", "aiohttp", "openai", "tiktoken")


@dataclass(frozen=True)
class Build:
    """A checkout that a server is started from: this one, or the baseline's worktree."""

    name: str
    commit: str
    root: Path
    python: str


@dataclass(frozen=True)
class Scale:
    """How big each run is: the issue's sizes, or --quick's."""

    rule_sessions: int
    rule_duration: float
    rule_pairs: int
    life_sessions: int
    llm_sessions: int
    llm_large: int
    llm_duration: float
    llm_runs: int
    idle_sessions: int
    pause_sessions: int
    pause_duration: float
    pause_full_every: float
    voice_turns: int


FULL = Scale(rule_sessions=1000, rule_duration=60, rule_pairs=3, life_sessions=2000,
             llm_sessions=1000, llm_large=2000, llm_duration=60, llm_runs=3, idle_sessions=5000,
             pause_sessions=1000, pause_duration=1200, pause_full_every=600, voice_turns=30)
QUICK = Scale(rule_sessions=200, rule_duration=15, rule_pairs=1, life_sessions=300,
              llm_sessions=100, llm_large=200, llm_duration=15, llm_runs=1, idle_sessions=500,
              pause_sessions=1000, pause_duration=60, pause_full_every=25, voice_turns=6)


# ---------------------------------------------------------------------------- builds


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def current_build() -> Build:
    return Build("current", git("rev-parse", "--short", "HEAD"), ROOT, PY)


def baseline_build(commit: str, directory: Path | None) -> Build:
    """The baseline commit in a worktree of its own, with its own virtualenv (made once, then reused)."""
    full = git("rev-parse", commit)
    where = directory or Path(tempfile.gettempdir()) / f"samvad-baseline-{full[:7]}"
    if not (where / ".git").exists():
        print(f"== checking out {full[:7]} into {where}", flush=True)
        git("worktree", "add", "--detach", str(where), full)
    elif git("rev-parse", "HEAD", cwd=where) != full:
        raise RuntimeError(f"{where} holds another commit than {full[:7]}; name another --baseline-dir")
    if not (where / ".venv" / "bin" / "python").exists() or not list((where / ".venv").glob(".installed*")):
        print(f"== making the baseline's virtualenv ({where}/.venv)", flush=True)
        subprocess.run(["bash", "scripts/setup.sh"], cwd=where, check=True, stdout=subprocess.DEVNULL)
    return Build("baseline", full[:7], where, str(where / ".venv" / "bin" / "python"))


def remove_baseline(build: Build) -> None:
    git("worktree", "remove", "--force", str(build.root))


# ---------------------------------------------------------------------------- runs


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


def server_env(build: Build, extra: dict[str, str]) -> dict[str, str]:
    env = env_for({"LOG_LEVEL": "INFO", **extra})
    env["PYTHONPATH"] = str(build.root)
    return env


def start(build: Build, tag: str, extra: dict[str, str] | None = None) -> tuple[Proc, str]:
    port = free_port()
    proc = Proc([build.python, "-m", "server.cli", "serve", "--port", str(port)], server_env(build, extra or {}),
                ARTIFACTS / "report-logs" / f"server-{tag}.log", cwd=build.root)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/health", proc, timeout=60)
    except Exception:
        proc.stop()
        raise
    return proc, base


def rule_run(build: Build, tag: str, scale: Scale) -> dict[str, Any]:
    """Scenario b's Samvad half: the build's own server and bots, paced at ~1 turn/s per session."""
    server, base = start(build, tag)
    out = ARTIFACTS / "report-logs" / f"bots-{tag}.json"
    out.unlink(missing_ok=True)
    try:
        cpu0 = server.cpu()
        subprocess.run([build.python, "-m", "server.cli", "bots", "--url", base, "--sessions",
                        str(scale.rule_sessions), "--think", "1000", "--paced", "--duration",
                        str(scale.rule_duration), "--quiet", "--json", str(out)],
                       cwd=build.root, env=server_env(build, {}), timeout=scale.rule_duration + 180,
                       capture_output=True, text=True)
        cpu = server.cpu() - cpu0
    finally:
        server.stop()
    played = json.loads(out.read_text())["samvad"]
    turns = max(1, int(played["turns"]))
    return {"commit": build.commit, "turns": turns, "turns_per_s": played["turns_per_s"],
            "latency_ms": {k: played["latency_ms"][k] for k in ("p50", "p95", "p99", "max")},
            "errors": played["errors"]["count"], "violations": played["violations"]["count"],
            "server_cpu_s": round(cpu, 2), "server_cpu_us_per_turn": round(cpu * 1e6 / turns, 1)}


LINES = ("Namaste bhaiya", "How much for the tomatoes?", "That is too much, I can pay 20 rupees",
         "Make it 25 rupees", "30 rupees, my final offer")


async def _lives(base: str, sessions: int, concurrency: int, turns: int = 0) -> dict[str, Any]:
    import orjson
    import websockets

    from clients.bots.transport import create_session, ws_base

    sem = asyncio.Semaphore(concurrency)
    failures: list[str] = []

    async def life(index: int) -> None:
        async with sem:
            try:
                created = await create_session(base, limit_s=30, learner_id=f"report-life-{index}")
                url = f"{ws_base(base)}{created['ws_url']}?token={created['player_token']}"
                async with websockets.connect(url, subprotocols=["samvad.v1.json"],  # type: ignore[list-item]
                                              max_size=None, open_timeout=30) as ws:
                    await asyncio.wait_for(ws.recv(), 30)  # the welcome
                    for n in range(turns):
                        tid = f"t{n}"
                        await ws.send(orjson.dumps({"type": "transcript", "id": tid, "text": LINES[n % len(LINES)]}))
                        while True:
                            frame = orjson.loads(await asyncio.wait_for(ws.recv(), 30))
                            if frame["type"] == "reply" and frame.get("in_reply_to") == tid:
                                break
                            if frame["type"] == "session.ended":
                                raise RuntimeError("the session ended before its turns")
                    await ws.send(orjson.dumps({"type": "command", "id": "stop-1", "name": "stop"}))
                    seen: set[str] = set()
                    while not {"session.ended", "session.report"} <= seen:
                        seen.add(orjson.loads(await asyncio.wait_for(ws.recv(), 30))["type"])
            except Exception as exc:
                failures.append(f"{type(exc).__name__}: {exc}"[:200])

    await asyncio.gather(*(life(i) for i in range(sessions)))
    return {"failures": len(failures), "first_failures": failures[:3]}


def life_run(build: Build, scale: Scale) -> dict[str, Any]:
    """Sessions created, joined and ended with no turn: server CPU per session. Then as many that
    play five turns each before they stop: RSS per ended session, kept for its report."""
    server, base = start(build, "life")
    try:
        time.sleep(1.0)
        rss0 = server.rss_kib()
        asyncio.run(_lives(base, 50, 25, turns=len(LINES)))  # warm-up: every path once, not counted
        cpu0 = server.cpu()
        bare = asyncio.run(_lives(base, scale.life_sessions, 25))
        cpu = server.cpu() - cpu0
        time.sleep(1.0)
        rss1 = server.rss_kib()
        played = asyncio.run(_lives(base, scale.life_sessions, 25, turns=len(LINES)))
        time.sleep(2.0)
        rss2 = server.rss_kib()
    finally:
        server.stop()
    n = scale.life_sessions
    return {"sessions": n, "failures": bare["failures"] + played["failures"],
            "first_failures": bare["first_failures"] + played["first_failures"],
            "server_cpu_us_per_session": round(cpu * 1e6 / n, 1), "base_rss_mib": round(rss0 / 1024, 1),
            "rss_before_played_mib": round(rss1 / 1024, 1), "rss_after_played_mib": round(rss2 / 1024, 1),
            "turns_per_played_session": len(LINES), "kib_per_ended_session": round((rss2 - rss1) / n, 2)}


def capacity_run(args: argparse.Namespace, sessions: int, duration: float, stream: bool) -> dict[str, Any]:
    cmd = [PY, "-m", "benchmarks.capacity", "--steps", str(sessions), "--duration", str(duration)]
    cmd += ["--neo4j-uri", args.neo4j_uri] if args.neo4j_uri else ["--no-neo4j"]
    if not stream:
        cmd.append("--no-stream")
    done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=duration + 600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-500:])
    step = json.loads((ARTIFACTS / "capacity.json").read_text())["steps"][0]
    return {"command": " ".join(cmd[1:]), "neo4j": bool(args.neo4j_uri), "sessions": sessions,
            "turns": step["turns"], "overhead_ms": step["overhead_ms"], "errors": step["errors"],
            "server_cpu_ms_per_turn": step["server_cpu_ms_per_turn"],
            "fake_cpu_ms_per_turn": step["fake_cpu_ms_per_turn"],
            "ratio": round(step["server_cpu_ms_per_turn"] / max(1e-9, step["fake_cpu_ms_per_turn"]), 2)}


def import_rss() -> dict[str, Any]:
    """RSS that each dependency adds when a fresh interpreter imports them one after another."""
    script = ("import importlib, json, sys, psutil\n"
              "p = psutil.Process()\n"
              "rss = lambda: p.memory_info().rss / 1048576\n"
              "out = {'interpreter': round(rss(), 1)}\n"
              "for name in sys.argv[1:]:\n"
              "    before = rss()\n"
              "    try:\n"
              "        importlib.import_module(name)\n"
              "    except ImportError:\n"
              "        continue\n"
              "    out[name] = round(rss() - before, 1)\n"
              "out['total'] = round(rss(), 1)\n"
              "print(json.dumps(out))\n")
    done = subprocess.run([PY, "-c", script, *DEPENDENCIES], cwd=ROOT, env=env_for(), capture_output=True,
                          text=True, timeout=120, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def serve_rss(args: argparse.Namespace) -> dict[str, Any]:
    """RSS of `samvad serve` just started (2 s after /health), as the benchmarks run it (the rule
    brain, no mirror) and production-shaped (the LLM brain, the Neo4j mirror when --neo4j-uri)."""
    shapes = {"mocks": {"USE_MOCKS": "true"},
              "llm": {"USE_MOCKS": "false", "BRAIN": "openai", "OPENAI_API_KEY": "x",
                      "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",  # never called: nothing plays
                      **({"MIRROR": "neo4j", "NEO4J_URI": args.neo4j_uri} if args.neo4j_uri else {"MIRROR": "none"})}}
    out: dict[str, Any] = {"neo4j": bool(args.neo4j_uri)}
    for name, extra in shapes.items():
        server, _ = start(current_build(), f"rss-{name}", {"LOG_LEVEL": "WARNING", **extra})
        try:
            time.sleep(2.0)
            out[f"{name}_mib"] = round(server.rss_kib() / 1024, 1)
        finally:
            server.stop()
    return out


def memory_run(scale: Scale) -> dict[str, Any]:
    ns = argparse.Namespace(log_level="WARNING", uvicorn_ws=None, uvicorn_loop=None,
                            logs=str(ARTIFACTS / "report-logs"))
    return idle_rss(ns, scale.idle_sessions)


def pauses_run(scale: Scale) -> dict[str, Any]:
    from benchmarks.gc_pauses import one_run

    ns = argparse.Namespace(sessions=scale.pause_sessions, duration=scale.pause_duration,
                            logs=str(ARTIFACTS / "report-logs"))
    result = one_run(ns, "pauses", {"GC_FULL_EVERY_SECONDS": str(scale.pause_full_every)})
    result["full_every_s"] = scale.pause_full_every
    serving = [g for key, g in result["gc"].items() if key != "start-up"]
    result["max_pause_ms"] = max(g["max_ms"] for g in serving)
    result["max_pause_cpu_ms"] = max(g.get("cpu_max_ms", 0.0) for g in serving)
    return result


def voice_run(scale: Scale) -> dict[str, Any]:
    done = subprocess.run([PY, "-m", "benchmarks.voice_turn", "--turns", str(scale.voice_turns)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=900)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-500:])
    by_sentence = json.loads((ARTIFACTS / "voice_turn.json").read_text())["by_sentence"]
    return {"turns": scale.voice_turns, "server_cpu_ms_per_turn": by_sentence["server_cpu_ms_per_turn"],
            "overhead_ms": by_sentence["overhead_ms"], "first_audio_ms": by_sentence["first_audio_ms"]}


# ---------------------------------------------------------------------------- figures


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
    plain = ok_runs(runs, "llm-nostream")
    out.append(figure("llm.nostream_ratio", "LLM turn: server CPU per non-streamed turn / the fake model's",
                      plain[0][1]["ratio"] if plain else None, "x", f"< {NON_STREAMED_RATIO_BEFORE} (before)",
                      lambda v: v < NON_STREAMED_RATIO_BEFORE, [k for k, _ in plain]))
    out.append(figure("capacity.p99_ms", "Capacity at the first N: first-words overhead p99 (median of runs)",
                      median([r["overhead_ms"].get("p99", float("inf")) for _, r in stream]), "ms", "<= 10",
                      lambda v: v <= 10, [k for k, _ in stream]))
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


# ---------------------------------------------------------------------------- main


def write(args: argparse.Namespace, current: Build, scale: Scale, runs: Runs, *, finished: bool) -> str:
    """The JSON and the Markdown table of the runs so far (and the documents' quotes with --docs)."""
    command = "python -m benchmarks.report" + (" --quick" if args.quick else "") + \
        (f" --only {args.only}" if args.only != DEFAULT_ONLY else "") + (" --merge" if args.merge else "")
    report = {"sitting": {"command": command, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                          "commit": current.commit, "baseline": args.baseline, "quick": args.quick,
                          "finished": finished, "merged_from": args.merged_from,
                          "cpus": os.cpu_count(), "python": sys.version.split()[0],
                          "scale": scale.__dict__},
              "figures": figures(runs), "runs": runs.runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    table = markdown(report)
    args.markdown.write_text(table)
    if args.docs:
        for doc in (ROOT / "docs" / "performance.md", ROOT / "README.md"):
            quote_in(doc, table)
    return table



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="every run scaled down: a smoke test")
    parser.add_argument("--only", default=DEFAULT_ONLY)
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--baseline-dir", type=Path, default=None,
                        help="the baseline's worktree (default: <tmp>/samvad-baseline-<commit>, reused)")
    parser.add_argument("--remove-baseline", action="store_true", help="remove the baseline's worktree after")
    parser.add_argument("--neo4j-uri", default="", help="the capacity runs' Neo4j (default: none)")
    parser.add_argument("--docs", action="store_true", help="also quote the table in docs/performance.md and README.md")
    parser.add_argument("--merge", type=Path, default=None,
                        help="start from the runs of an earlier report (its JSON); runs made now replace theirs")
    parser.add_argument("--out", type=Path, default=ARTIFACTS / "performance-report.json")
    parser.add_argument("--markdown", type=Path, default=ARTIFACTS / "performance-report.md")
    args = parser.parse_args(argv)
    raise_fd_limit()
    only = set(args.only.split(","))
    scale = QUICK if args.quick else FULL
    ARTIFACTS.mkdir(exist_ok=True)
    current = current_build()
    runs = Runs(lambda: write(args, current, scale, runs, finished=False))
    merged: dict[str, Any] = {}
    if args.merge is not None:
        merged = json.loads(args.merge.read_text())
        for run_id, run in merged["runs"].items():  # each keeps the sitting it came from
            runs.runs[run_id] = {**run, "what": run["what"] if "from" in run else
                                 f"{run['what']} [from {merged['sitting']['command']}, {merged['sitting']['date']}]",
                                 "from": run.get("from", merged["sitting"]["date"])}
    args.merged_from = merged.get("sitting")
    baseline: Build | None = None
    try:
        if "rule" in only:
            baseline = baseline_build(args.baseline, args.baseline_dir)
            for pair in range(1, scale.rule_pairs + 1):
                # alternate which goes first, so that neither always follows the other
                order = (baseline, current) if pair % 2 else (current, baseline)
                for build in order:
                    runs.record(f"rule-{build.name}-{pair}",
                                f"{build.commit}: scenario b's Samvad half, {scale.rule_sessions} sessions, "
                                f"{scale.rule_duration:g} s, its own bots",
                                partial(rule_run, build, f"rule-{build.name}-{pair}", scale))
        if "life" in only:
            runs.record("life", f"{current.commit}: {scale.life_sessions} sessions created, joined and stopped "
                        "with no turn (CPU), then as many after five turns each (RSS)",
                        lambda: life_run(current, scale))
        if "llm" in only:
            neo4j = "with Neo4j" if args.neo4j_uri else "without Neo4j"
            for n in range(1, scale.llm_runs + 1):
                runs.record(f"llm-stream-{n}", f"benchmarks.capacity N={scale.llm_sessions} streamed, "
                            f"{scale.llm_duration:g} s, {neo4j}",
                            lambda: capacity_run(args, scale.llm_sessions, scale.llm_duration, True))
            runs.record("llm-large", f"benchmarks.capacity N={scale.llm_large} streamed, {scale.llm_duration:g} s, "
                        f"{neo4j}", lambda: capacity_run(args, scale.llm_large, scale.llm_duration, True))
            runs.record("llm-nostream", f"benchmarks.capacity N={scale.llm_sessions} --no-stream, "
                        f"{scale.llm_duration:g} s, {neo4j}",
                        lambda: capacity_run(args, scale.llm_sessions, scale.llm_duration, False))
        if "memory" in only:
            runs.record("memory-idle", f"benchmarks/load.py scenario d, {scale.idle_sessions} sessions each "
                        "with an idle player socket", lambda: memory_run(scale))
            runs.record("memory-imports", "RSS each dependency adds, imported in a fresh interpreter", import_rss)
            runs.record("memory-base", "RSS of `samvad serve` just started: the rule brain without a mirror, and "
                        f"the LLM brain {'with the Neo4j mirror' if args.neo4j_uri else 'without a mirror'}",
                        partial(serve_rss, args))
        if "pauses" in only:
            runs.record("pauses", f"gc_pauses: {scale.pause_sessions} sessions ~1 turn/s, "
                        f"{scale.pause_duration:g} s, planned full pass every {scale.pause_full_every:g} s",
                        lambda: pauses_run(scale))
        if "voice" in only:
            runs.record("voice", f"benchmarks.voice_turn --turns {scale.voice_turns}, by sentence",
                        lambda: voice_run(scale))
    finally:
        if baseline is not None and args.remove_baseline:
            remove_baseline(baseline)
    table = write(args, current, scale, runs, finished=True)
    print("\n" + table)
    print(f"written to {args.out} and {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
