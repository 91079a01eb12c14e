"""End to end: the real app under uvicorn, BRAIN=openai against the fake OpenAI server, a real
WebSocket client playing greeting -> inquiry -> haggling -> deal."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
import websockets

from brain.prompt import PROMPT_VERSION
from server.app import create_app
from server.config import load_settings
from tests.openai_server import FakeOpenAI, reply, status

pytestmark = pytest.mark.anyio

# The server's actors and connections leave their anyio memory streams unclosed (an actor may be
# restarted), and a logged brain exception keeps an actor alive until pytest drops the test's log
# records; tests/conftest.py collects that garbage after each test here, with ResourceWarning off,
# so that it cannot fail whichever later test the garbage collector happens to run in.
COLLECT_GARBAGE_AFTER = True


def decision(text: str, happiness: int, stage: str, price: int | None = None,
             assessment: str = "none") -> dict[str, Any]:
    return {  # in the prompt's order: the words, then the numbers and stage
        "reply_text": text, "counter_price": price, "negotiation_state": stage, "happiness_score": happiness,
        "vendor_mood": "neutral", "offer_assessment": assessment,
        "internal_reasoning": "Scripted for the end-to-end test.",
        "suggested_user_response": "Say something nice.",
    }


@asynccontextmanager
async def samvad(fake: FakeOpenAI, **settings: Any) -> AsyncIterator[str]:
    """Run the real app on a free loopback port; yield its base URL."""
    app = create_app(load_settings(
        SAMVAD_SECRET="e2e-secret-" + "x" * 40, BRAIN="openai", OPENAI_API_KEY="test",
        OPENAI_BASE_URL=fake.base_url, AI_TIMEOUT_MS=5000, **settings))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="on",
                                           timeout_graceful_shutdown=2))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        with anyio.fail_after(10):
            while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, not an event
                await anyio.sleep(0.02)
        try:
            yield f"127.0.0.1:{port}"
        finally:
            server.should_exit = True



async def new_session(host: str) -> tuple[str, str]:
    async with httpx.AsyncClient(base_url=f"http://{host}") as client:
        response = await client.post("/api/sessions", json={})
    assert response.status_code == 201
    body = response.json()
    return body["session_id"], body["player_token"]


async def say(ws: Any, frame_id: str, text: str) -> list[dict[str, Any]]:
    """Send one transcript; return every frame up to and including its `reply`."""
    await ws.send(json.dumps({"type": "transcript", "id": frame_id, "text": text}))
    frames: list[dict[str, Any]] = []
    with anyio.fail_after(10):
        while True:
            frame = json.loads(await ws.recv())
            frames.append(frame)
            if frame["type"] == "reply":
                return frames


async def rest(ws: Any, until: str) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    with anyio.fail_after(5):
        while not frames or frames[-1]["type"] != until:
            frames.append(json.loads(await ws.recv()))
    return frames


SCRIPT = [
    ("Namaste bhaiya, how are you today?",
     decision("Namaste, namaste! Very good, ji, come and look at my fresh vegetables.", 55,
              "GREETING")),
    ("How much are the tomatoes?",
     decision("Tomatoes, best in the bazaar! For you, 120 rupees a kilo.", 58, "INQUIRY", 120)),
    ("Too expensive! I will give you 40 rupees.",
     decision("Forty? Arre bhaiya, I have children to feed, eighty is final.", 50, "HAGGLING", 80,
              "lowball")),
    ("OK, 60 rupees and we have a deal.",
     decision("Theek hai, sixty it is, pakka! Enjoy them with your dal.", 60, "DEAL", 60, "good")),
]


async def test_a_whole_negotiation_streams_every_reply(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(*(reply(d, ttft_ms=20, tokens_per_s=400) for _, d in SCRIPT))
    async with samvad(openai_fake) as host:
        sid, token = await new_session(host)
        async with websockets.connect(f"ws://{host}/ws/sessions/{sid}?token={token}") as ws:
            welcome = json.loads(await ws.recv())
            assert welcome["type"] == "welcome" and welcome["state"]["stage"] == "GREETING"
            stages, per_turn = [], []
            for n, (text, proposed) in enumerate(SCRIPT, start=1):
                frames = await say(ws, f"t{n}", text)
                kinds = [f["type"] for f in frames]
                final = frames[-1]
                deltas = [f for f in frames
                          if f["type"] == "reply.delta" and f["turn"] == final["turn"]]
                assert deltas, kinds
                assert kinds.index("reply.delta") < kinds.index("reply")
                assert "reply.withdrawn" not in kinds
                assert "".join(d["text"] for d in deltas) == final["text"] == proposed["reply_text"]
                assert final["negotiation_state"] == proposed["negotiation_state"]
                assert final["fallback"] is False
                timings = final["timings"]
                assert timings["brain"] == "openai" and timings["prompt_version"] == PROMPT_VERSION
                assert timings["llm_calls"] == 1 and timings["first_delta_ms"] is not None
                assert timings["prompt_tokens"] > 0 and timings["completion_tokens"] > 0
                assert all("seq" not in d for d in deltas)  # deltas are not part of the seq stream
                per_turn.append(timings)
                stages.append(final["negotiation_state"])
                if n < len(SCRIPT):
                    continue
                ended = (await rest(ws, "session.ended"))[-1]
                assert ended["outcome"] == "deal"
                assert ended["summary"]["final_price"] == 60
                assert ended["summary"]["first_quote"] == 120
                # The ledger summed per session: on the summary and on the state snapshot.
                totals = ended["summary"]["ledger"]
                assert totals["turns"] == 4 and totals["llm_calls"] == 4 and totals["retries"] == 0
                for name in ("prompt_tokens", "completion_tokens"):
                    assert totals[name] == sum(t[name] for t in per_turn) > 0
                assert totals["brain_ms"] > 0
                async with httpx.AsyncClient() as http:
                    state = (await http.get(f"http://{host}/api/sessions/{sid}",
                                            headers={"authorization": f"Bearer {token}"})).json()
                assert state["ledger"] == totals
    assert stages == ["GREETING", "INQUIRY", "HAGGLING", "DEAL"]
    assert openai_fake.calls == 4 and all(r.stream for r in openai_fake.requests)
    assert "offers 40 INR" in openai_fake.requests[2].system


async def test_with_streaming_off_the_reply_comes_whole(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(reply(SCRIPT[0][1]))
    async with samvad(openai_fake, AI_STREAM=False) as host:
        sid, token = await new_session(host)
        async with websockets.connect(f"ws://{host}/ws/sessions/{sid}?token={token}") as ws:
            assert json.loads(await ws.recv())["type"] == "welcome"
            frames = await say(ws, "t1", SCRIPT[0][0])
    assert [f["type"] for f in frames] == ["ack", "reply"]
    assert frames[-1]["text"] == SCRIPT[0][1]["reply_text"]
    assert frames[-1]["timings"]["first_delta_ms"] is None
    assert openai_fake.requests[0].stream is False


async def test_a_failing_model_answers_in_character_over_the_socket(
        openai_fake: FakeOpenAI) -> None:
    openai_fake.script(status(401))  # not retryable: the actor answers with its own line
    async with samvad(openai_fake) as host:
        sid, token = await new_session(host)
        async with websockets.connect(f"ws://{host}/ws/sessions/{sid}?token={token}") as ws:
            assert json.loads(await ws.recv())["type"] == "welcome"
            frames = await say(ws, "t1", "Namaste")
    final = frames[-1]
    assert final["fallback"] is True and final["negotiation_state"] == "GREETING"
    assert final["happiness_score"] == 50
    assert openai_fake.calls == 1


async def test_hints_cost_no_llm_call_and_the_prompt_knows_the_level_and_what_was_heard(
        openai_fake: FakeOpenAI) -> None:
    """Issue #12 with the LLM brain: the reveal is the decision's own suggestion and its English
    (no extra call); the learner's level reaches the prompt; after a barge-in the next prompt shows
    only the heard part of the vendor's line."""
    quote = {**decision("For you, 120 rupees a kilo, fresh today.", 56, "INQUIRY", 120),
             "suggested_user_response": "Bahut mehenga hai, 50 mein de do?",
             "suggested_user_response_english": "That's too dear, will you give them for 50?"}
    openai_fake.script(reply(quote), reply(decision("Arre, 100 then.", 52, "HAGGLING", 100)))
    async with samvad(openai_fake) as host:
        async with httpx.AsyncClient(base_url=f"http://{host}") as client:
            body = (await client.post("/api/sessions", json={"level": "beginner"})).json()
        sid, token = body["session_id"], body["player_token"]
        async with websockets.connect(f"ws://{host}/ws/sessions/{sid}?token={token}") as ws:
            json.loads(await ws.recv())
            said = (await say(ws, "t1", "How much are the tomatoes?"))[-1]
            await rest(ws, "tips")
            calls = openai_fake.calls
            hints = []
            for n in range(3):
                await ws.send(json.dumps({"type": "command", "id": f"h{n}", "name": "hint"}))
                hints.append((await rest(ws, "hint"))[-1])
            assert openai_fake.calls == calls  # three hints, no LLM call
            assert [h["level"] for h in hints] == [0, 1, 2]
            assert hints[2]["text"] == quote["suggested_user_response"] == said["suggested_user_response"]
            assert hints[2]["english"] == quote["suggested_user_response_english"]
            cut = said["text"].index("120")
            await ws.send(json.dumps({"type": "playback", "id": "p1", "turn": 1, "heard_chars": cut,
                                      "interrupted": True}))
            heard = (await rest(ws, "heard"))[-1]
            assert heard["quote_unbound"] is True and heard["vendor_quote"] is None
            await say(ws, "t2", "Hmm, and the apples?")
    prompt = openai_fake.requests[-1]
    assert "LEARNER LEVEL: beginner" in prompt.system
    vendor_line = next(line for line in prompt.user.splitlines() if line.startswith("Ramesh (turn 1):"))
    assert vendor_line.startswith("Ramesh (turn 1): " + said["text"][:cut].rstrip())  # the heard part, cut off
    assert "120" not in vendor_line


REJECTED_SCRIPT = [
    ("Namaste bhaiya!", decision("Namaste, namaste, come and look!", 55, "GREETING")),
    ("How much are the tomatoes?", decision("For you, 80 rupees a kilo.", 56, "INQUIRY", 80)),
    # Above the standing quote, with a link: the quote stays 80, and the words say so.
    ("Too expensive! I will give you 40 rupees.",
     decision("No no my friend, 150 rupees now, that is my final price! See https://ramesh.example.com/prices "
              "for my **list**.", 50, "HAGGLING", 150, "fair")),
    # Below the floor (35 for tomatoes), in words: the floor stands, in the words too.
    ("Fine, 35 rupees, deal?", decision("Okay okay, paanch rupaye only for you, pakka deal!", 58, "DEAL", 5, "fair")),
]


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
async def test_no_frame_names_a_price_the_engine_rejected(openai_fake: FakeOpenAI, stream: bool,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """Issue #30 through the real SDK: the model's words name prices the engine overrules and a link;
    no delta and no reply carries them, the deltas join up to the reply, the flags and the log say
    what changed, and the report lists it where the rules stepped in."""
    openai_fake.script(*(reply(d, ttft_ms=20, tokens_per_s=400) for _, d in REJECTED_SCRIPT))
    caplog.set_level("WARNING", logger="samvad.session")
    async with samvad(openai_fake, AI_STREAM=stream) as host:
        sid, token = await new_session(host)
        async with websockets.connect(f"ws://{host}/ws/sessions/{sid}?token={token}") as ws:
            json.loads(await ws.recv())
            replies, deltas = [], []
            for n, (text, _) in enumerate(REJECTED_SCRIPT, start=1):
                frames = await say(ws, f"t{n}", text)
                replies.append(frames[-1])
                deltas.append([f for f in frames if f["type"] in ("reply.delta", "reply.withdrawn")])
            report = (await rest(ws, "session.report"))[-1]["report"]
    haggle, deal = replies[2], replies[3]
    assert haggle["text"] == "No no my friend, 80 rupees now, that is my final price!"
    assert haggle["counter_price"] == 80 and {"quote_rise", "text_price_rewritten", "link", "markdown"} <= set(
        haggle["flags"])
    assert deal["text"] == "Okay okay, 35 rupaye only for you, pakka deal!"
    assert deal["counter_price"] == 35 and {"below_floor", "text_price_rewritten"} <= set(deal["flags"])
    for frame in [*replies, *(d for turn in deltas for d in turn)]:
        words = str(frame.get("text", ""))
        assert "150" not in words and "paanch" not in words and "http" not in words and "*" not in words
    for turn, frames in zip(replies, deltas, strict=True):
        assert not any(f["type"] == "reply.withdrawn" for f in frames)
        if stream:
            assert frames and "".join(f["text"] for f in frames) == turn["text"]
        else:
            assert frames == []
    changed = [r for r in caplog.records if r.getMessage() == "reply words changed: text_price_rewritten"]
    assert [(r.proposed, r.applied) for r in changed] == [  # type: ignore[attr-defined]
        ("150 rupees now", "80 rupees now"), ("paanch rupaye only for you", "35 rupaye only for you"),
    ]
    stepped_in = {(c["turn"], c["flag"]): c["explanation"] for c in report["clamps"]}
    assert stepped_in[(3, "text_price_rewritten")] == stepped_in[(4, "text_price_rewritten")]
    assert "price that stands" in stepped_in[(3, "text_price_rewritten")]
