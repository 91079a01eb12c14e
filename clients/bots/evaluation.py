"""`samvad eval`: simulated learners play every pack, and the figures say whether the coaching helps
(issue #36; docs/learning.md, The evaluation).

Two servers run side by side (`samvad serve`, each its own process, rule vendor, embedded
recogniser, learners in memory): one brings a learner's review items back (`REVIEWS_INVITE=true`),
one does not. The same learners (`clients/bots/learners.py`, the same seeds) play the same number
of sessions on each, so what differs between the two halves is the server's re-elicitation alone.
Learners are spread over the packs and the three levels; a share of them (`--speakers`) say the
first line of each session aloud (espeak-ng, at their pace, with their pause), through the socket's
audio frames and the server's recogniser.

Figures, per condition (JSON in artifacts/eval.json, a Markdown table on stdout):

- hint uptake: of the lines a hint revealed, the share the learner's next line used (most of its
  words);
- items recalled in a later session: review items (the learners API) judged recalled in a session
  after the one that made them;
- deals and discounts per level, from `session.ended`;
- false clarify rate: clarify replies to lines the learner said clearly (typed, or spoken clearly);
- tip grounding rate: grounded cards whose words are in the pack's knowledge files, of all grounded
  cards; and the share of cards that were generic;
- fluency trend: the spoken lines' words a minute, by session number and level.

    samvad eval --learners 200            # both conditions, 3 sessions each
    samvad eval --learners 30 --sessions 2 --speakers 0.5
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import io
import json
import os
import re
import socket
import subprocess
import sys
import time
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from clients.bots.eval_figures import LEVELS, SessionLog, comparison, figures, table
from clients.bots.learners import Line, SimulatedLearner, situation_for
from clients.bots.transport import BotError, Wire, create_session, http_request, open_socket, read_until, ws_base
from schemas.scenario import Scenario, available_scenarios, load_scenario

__all__ = ["EvalConfig", "main", "run"]

ADMIN_KEY = "eval-admin-key-0123456789-abcdefghij"
MAX_LINES = 16
WAIT_S = 30.0  # a spoken line waits its turn at the recogniser on a busy machine
KNOWLEDGE = Path(__file__).resolve().parents[2] / "schemas" / "data"
_WORDS = re.compile(r"[0-9a-z\u0900-\u097f]+")


@dataclass(frozen=True, slots=True)
class EvalConfig:
    learners: int = 200
    sessions: int = 3
    speakers: float = 0.25  # share of learners who speak their first line of each session
    seed: int = 0
    concurrency: int = 24
    out: Path = Path("artifacts/eval.json")


# ---------------------------------------------------------------------------- a session


class Session:
    """One session of one simulated learner over a socket."""

    def __init__(self, base: str, learner: SimulatedLearner, speaker: bool, log: SessionLog) -> None:
        self.base, self.learner, self.speaker, self.log = base, learner, speaker, log
        self.wire = Wire(False)
        self.ids = 0
        self.ws: Any = None
        self.ended: dict[str, Any] | None = None
        self.report: dict[str, Any] | None = None
        self.invite: tuple[str, ...] = ()

    def _id(self, prefix: str) -> str:
        self.ids += 1
        return f"{prefix}{self.ids}"

    async def play(self) -> None:
        learner = self.learner
        item = learner.start_session()
        # The first session says the learner's level; later ones play at the profile's confirmed one,
        # which the sessions' estimates may move (docs/learning.md).
        level: dict[str, Any] = {"level": learner.level.value} if learner.sessions == 1 else {}
        created = await create_session(self.base, credential=ADMIN_KEY, learner_id=learner.learner_id,
                                       scenario=learner.pack.scenario, **level)
        url = f"{ws_base(self.base)}{created['ws_url']}?token={created['player_token']}"
        self.ws = await open_socket(url, self.wire.subprotocol)
        try:
            await self.wait(lambda f: f["type"] == "welcome", "welcome")
            await self.send({"type": "scene", "id": self._id("s"), "object_grabbed": item.name})
            stage, quote, first_quote, offers = "GREETING", None, None, 0
            for n in range(MAX_LINES):
                situation = situation_for(stage, quote, offers > 0)
                offer = price = None
                if quote is not None and first_quote is not None:
                    if learner.gives_up(offers):
                        situation = "goodbye"
                    elif learner.ready_to_accept(first_quote, quote, offers):
                        situation, price = "accept", quote
                    else:
                        offer = learner.offer(first_quote, offers, quote)
                chat = learner.small_talk() if 0 < n and situation != "accept" else None
                if chat is not None and not self.invite:
                    reply = await self.say(chat, spoken=False)
                    stage, quote = reply["negotiation_state"], reply.get("counter_price", quote)
                    if reply.get("is_terminal") or self.ended is not None:
                        break
                revealed = await self.hints() if learner.wants_hint(situation) else None
                line = learner.line(situation, item, offer=offer, price=price, invited=self.invite,
                                    revealed=revealed)
                self.log.recalled_lines += line.recalled
                reply = await self.say(line, spoken=self.speaker and n == 0)
                if revealed is not None:
                    self.log.taken_up += _uses(line.text, revealed)
                if reply.get("mark") is None:
                    offers += situation in ("open", "counter")
                stage = reply["negotiation_state"]
                quote = reply.get("counter_price")
                if first_quote is None and quote is not None:
                    first_quote = quote
                if reply.get("is_terminal") or self.ended is not None:
                    break
                if situation == "goodbye" and stage == "WALKAWAY":
                    await self.say(Line("Bye.", 0.95, "goodbye"), spoken=False)
                    if self.ended is not None:
                        break
            if self.ended is None:
                await self.send({"type": "command", "id": self._id("c"), "name": "stop"})
            await self.wait(lambda f: f["type"] == "session.report", "report")
        finally:
            await self.ws.close()
        summary = (self.ended or {}).get("summary") or {}
        self.log.outcome = (self.ended or {}).get("outcome")
        self.log.discount_pct = summary.get("discount_pct")

    async def hints(self) -> str | None:
        """Asks for hints up to the revealed line; the learner may learn it and say it."""
        text: str | None = None
        for _ in range(3):
            await self.send({"type": "command", "id": self._id("h"), "name": "hint"})
            hint = await self.wait(lambda f: f["type"] == "hint", "hint")
            if hint["kind"] == "reveal":
                text = hint["text"]
                self.log.revealed += 1
                break
        if text is None:
            return None
        return text if self.learner.heard_hint(hint["situation"], text) else None

    async def say(self, line: Line, *, spoken: bool) -> dict[str, Any]:
        if spoken:
            frame_id = self._id("a")
            await self.speak(frame_id, line.text)
            speech = await self.wait(lambda f: f["type"] == "speech" and f["id"] == frame_id, "speech")
            if speech.get("fluency"):
                self.log.spoken_wpm.append(speech["fluency"]["words_per_minute"])
            reply = await self.wait(lambda f: f["type"] == "reply" and f.get("in_reply_to") == frame_id, "spoken reply")
            self.log.clear_lines += 1
            if reply.get("mark") != "clarify":
                return reply
            self.log.false_clarify += 1  # said clearly, at the learner's pace
        elif self.learner.mumbles():
            self.log.mumbled += 1
            reply = await self.transcript(line.text, 0.35)
            self.log.clarify_after_mumble += reply.get("mark") == "clarify"
            if reply.get("mark") != "clarify":
                return reply
        reply = await self.transcript(line.text, line.confidence)
        self.log.clear_lines += 1
        self.log.false_clarify += reply.get("mark") == "clarify"
        return reply

    async def transcript(self, text: str, confidence: float) -> dict[str, Any]:
        frame_id = self._id("t")
        await self.send({"type": "transcript", "id": frame_id, "text": text, "confidence": confidence})
        return await self.wait(lambda f: f["type"] == "reply" and f.get("in_reply_to") == frame_id, "reply")

    async def speak(self, frame_id: str, text: str) -> None:
        clip = await asyncio.to_thread(render, text, self.learner.words_per_minute, self.learner.pause_ms)
        await self.send({"type": "audio", "id": frame_id, "event": "clip", "format": "wav",
                         "data": base64.b64encode(clip).decode()})

    async def send(self, frame: dict[str, Any]) -> None:
        await self.wire.send(self.ws, frame)

    async def wait(self, match: Any, what: str) -> dict[str, Any]:
        return await read_until(self.ws, self.wire, match, limit_s=WAIT_S, what=what, seen=self.seen)

    def seen(self, frame: dict[str, Any]) -> None:
        kind = frame["type"]
        if kind == "session.ended":
            self.ended = frame
        elif kind == "session.report":
            self.report = frame
        elif kind == "tips":
            for card in frame["cards"]:
                self.log.cards += 1
                if not card["grounded"]:
                    self.log.generic_cards += 1
                    continue
                self.log.grounded_cards += 1
                self.log.grounded_in_text += _in_knowledge(self.learner.pack.scenario, card["body"])
        elif kind == "reply":
            self.invite = invited_situations(self.learner.pack, frame.get("text") or "")
            self.log.invited += bool(self.invite)


# The pack's invitation pools (docs/learning.md, The vendor brings them back) and the situations of
# the lines a learner may have remembered that each opens the way for.
INVITES = {"invite_greet": ("greet",), "invite_ask": ("ask",), "invite_offer": ("open", "counter"),
           "invite_accept": ("accept",), "invite_respect": ("respect",)}
_PLACEHOLDER = re.compile(r"\\\{[a-z_]+\\\}")
_INVITATIONS: dict[str, list[tuple[re.Pattern[str], tuple[str, ...]]]] = {}


def invited_situations(pack: Scenario, text: str) -> tuple[str, ...]:
    """The situations a vendor line invites, as a learner hears them: the line is one of the pack's
    invitations (its numbers and names filled in). No marker on the wire: the learner must understand
    the vendor, as a person would."""
    patterns = _INVITATIONS.get(pack.scenario)
    if patterns is None:
        patterns = _INVITATIONS[pack.scenario] = [
            (re.compile(_PLACEHOLDER.sub(".+?", re.escape(line)), re.IGNORECASE), situations)
            for pools in pack.lines.values() for key, situations in INVITES.items() for line in pools.get(key, ())]
    return tuple(s for pattern, situations in patterns if pattern.search(text) for s in situations)


def _uses(said: str, revealed: str) -> bool:
    """Whether a line uses a revealed one: most (60 %) of its words, numbers aside."""
    wanted = {w for w in _WORDS.findall(revealed.lower()) if not w.isdigit()}
    got = set(_WORDS.findall(said.lower()))
    return bool(wanted) and len(wanted & got) >= 0.6 * len(wanted)


_KNOWN: dict[str, str] = {}


_SENTENCE_END = re.compile(r"(?<=[.!?\u2026\u0964])\s+")


def _in_knowledge(pack: str, body: str) -> bool:
    """Whether a grounded card's words are the pack's knowledge's own: each of its sentences (a
    card's body is some sentences of one chunk, in their order, or one cut short) is in the pack's
    knowledge files, letters and digits compared."""
    if pack not in _KNOWN:
        texts = [p.read_text("utf-8") for p in sorted((KNOWLEDGE / pack / "knowledge").glob("*")) if p.is_file()]
        _KNOWN[pack] = " ".join(" ".join(_WORDS.findall(t.lower())) for t in texts)
    sentences = [" ".join(_WORDS.findall(part.lower())) for part in _SENTENCE_END.split(body)]
    return any(sentences) and all(words in _KNOWN[pack] for words in sentences if words)


def render(text: str, wpm: float, pause_ms: int) -> bytes:
    """The line as espeak-ng says it at `wpm`, with a pause of `pause_ms` at its first comma (or its
    middle) and 300 ms of quiet at either end: one WAV clip, which the server decodes."""
    cut = text.find(",")
    words = text.split()
    first, second = (text[:cut + 1], text[cut + 1:]) if cut > 0 else (
        " ".join(words[:len(words) // 2]), " ".join(words[len(words) // 2:]))
    rate, channels, width = 22_050, 1, 2

    def say(part: str) -> bytes:
        nonlocal rate, channels, width
        if not part.strip():
            return b""
        wav = subprocess.run(["espeak-ng", "-v", "en-us", "-s", str(round(wpm)), "--stdout", "--stdin"],
                             input=part.encode("utf-8"), capture_output=True, check=True, timeout=30).stdout
        with wave.open(io.BytesIO(wav)) as clip:
            rate, channels, width = clip.getframerate(), clip.getnchannels(), clip.getsampwidth()
            frames: bytes = clip.readframes(clip.getnframes())
            return frames

    spoken = [say(first), say(second)]

    def quiet(ms: int) -> bytes:
        return b"\0" * (rate * ms // 1000) * channels * width

    out = io.BytesIO()
    with wave.open(out, "wb") as clip:
        clip.setnchannels(channels)
        clip.setsampwidth(width)
        clip.setframerate(rate)
        clip.writeframes(quiet(300) + spoken[0] + quiet(pause_ms) + spoken[1] + quiet(300))
    return out.getvalue()


# ---------------------------------------------------------------------------- a condition


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server(invite: bool, log: Path) -> Any:
    """`samvad serve` on loopback, rule vendor, embedded recogniser, learners in memory."""
    import httpx

    port = free_port()
    env = {**os.environ, "ADMIN_KEY": ADMIN_KEY, "BRAIN": "rules", "MIRROR": "none", "USE_MOCKS": "false",
           "STT": "pocketsphinx", "TTS": "none", "SILENCE_TIMEOUT_MS": "0", "SESSION_CREATE_PER_SECOND": "1000",
           "RATE_LIMIT_PER_SECOND": "1000", "RATE_LIMIT_BURST": "2000", "LOG_LEVEL": "WARNING",
           "REVIEWS_INVITE": "true" if invite else "false", "SAMVAD_SECRET": "eval-" + "s" * 40,
           # A cohort's sessions come minutes apart; a learner's would be days apart: what falls due
           # within a week counts as due (docs/learning.md, The evaluation).
           "REVIEWS_DUE_AHEAD_SECONDS": str(7 * 86_400)}
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "server.cli", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=log.open("w"))
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"samvad exited with {proc.returncode} (see {log})")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"samvad did not become healthy (see {log})")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def learners(config: EvalConfig) -> list[tuple[SimulatedLearner, bool]]:
    """The cohort: every pack and level in turn, a share of speakers; the same for both conditions."""
    packs = available_scenarios()
    cohort = []
    for n in range(config.learners):
        pack = load_scenario(packs[n % len(packs)])
        level = LEVELS[(n // len(packs)) % len(LEVELS)]
        speaker = (n * 7919 % 1000) / 1000 < config.speakers
        cohort.append((SimulatedLearner(f"sim-{n:04d}", level, pack, config.seed), speaker))
    return cohort


async def profile_after(base: str, learner_id: str, sessions: int) -> dict[str, Any]:
    async with asyncio.timeout(WAIT_S):
        while True:
            status, content = await http_request(base, "GET", f"/api/learners/{learner_id}",
                                                 headers={"Authorization": f"Bearer {ADMIN_KEY}"})
            if status == 200:
                got: dict[str, Any] = orjson.loads(content)
                if got["profile"]["sessions"] >= sessions:
                    return got
            await asyncio.sleep(0.05)


async def condition(config: EvalConfig, base: str) -> tuple[list[SessionLog], list[dict[str, Any]], list[str]]:
    """Every learner's sessions, in turn per learner, `concurrency` learners at a time; the logs, each
    learner's last answer of the learners API, and the errors."""
    logs: list[SessionLog] = []
    answers: list[dict[str, Any]] = []
    errors: list[str] = []
    gate = asyncio.Semaphore(config.concurrency)

    async def one(learner: SimulatedLearner, speaker: bool) -> None:
        async with gate:
            for number in range(1, config.sessions + 1):
                log = SessionLog(learner.learner_id, learner.pack.scenario, learner.level.value, number)
                try:
                    await Session(base, learner, speaker, log).play()
                    logs.append(log)
                    answers_now = await profile_after(base, learner.learner_id, number)
                except (BotError, TimeoutError, OSError) as exc:
                    errors.append(f"{learner.learner_id} session {number}: {exc!r}")
                    return
            answers.append(answers_now)

    async with asyncio.TaskGroup() as tg:
        for learner, speaker in learners(config):
            tg.create_task(one(learner, speaker))
    return logs, answers, errors


async def run(config: EvalConfig) -> dict[str, Any]:
    started = time.monotonic()
    artifacts = config.out.parent
    result: dict[str, Any] = {"config": {"learners": config.learners, "sessions": config.sessions,
                                         "speakers": config.speakers, "seed": config.seed}, "conditions": {}}
    with server(True, artifacts / "eval.invite.log") as on, server(False, artifacts / "eval.no_invite.log") as off:
        runs = await asyncio.gather(condition(config, on), condition(config, off))
    for name, (logs, answers, errors) in zip(("invite", "no_invite"), runs, strict=True):
        result["conditions"][name] = {**figures(logs, answers, config.sessions), "errors": errors[:20],
                                      "error_count": len(errors)}
    result["paired"] = comparison(runs[0][1], runs[1][1], config.seed)
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="samvad eval", description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--speakers", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=24)
    parser.add_argument("--out", type=Path, default=Path("artifacts/eval.json"))
    args = parser.parse_args(argv)
    config = EvalConfig(args.learners, args.sessions, args.speakers, args.seed, args.concurrency, args.out)
    result = asyncio.run(run(config))
    config.out.parent.mkdir(parents=True, exist_ok=True)
    config.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", "utf-8")
    print(table(result))
    print(f"\n{result['seconds']} s; errors: {result['conditions']['invite']['error_count']} / "
          f"{result['conditions']['no_invite']['error_count']}; written {config.out}")
    failed = result["conditions"]["invite"]["error_count"] + result["conditions"]["no_invite"]["error_count"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
