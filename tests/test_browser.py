"""The spectator pages in a real headless Chromium (Debian's), against the real server.

Each test starts the application under uvicorn on a loopback port, plays a session with a
scripted player over a real WebSocket, and reads what the pages show. Brains are scripted so
that every turn, quote and stage is known in advance.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from schemas.brain import BrainRequest, BrainResult, Ledger
from schemas.decision import AIDecision
from schemas.enums import Stage
from server.app import create_app
from server.config import load_settings
from session.protocols import DeltaSink
from tests.fakes import ScriptedBrain, decision
from tests.live_server import collect_stopped_servers, serve

pytestmark = [pytest.mark.browser, pytest.mark.anyio]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
ADMIN_KEY = "teacher-key-for-tests-0123456789"
_frame_ids = itertools.count(1)  # transcript ids stay unique across player connections
WAIT_MS = 8000

# The learner's lines and Ramesh's answers, turn by turn: tomatoes from 120 down to a deal at 70.
PLAN: list[tuple[str, AIDecision]] = [
    ("Namaste bhaiya, ye tamatar kitne ka hai?",
     decision("Namaste ji! Tamatar ekdum taaza hai, 120 rupaye kilo.", 56, Stage.INQUIRY,
              counter_price=120)),
    ("Bahut mehenga hai bhaiya, 40 rupees?",
     decision("Arre, 40? Itne mein toh mandi mein bhi nahi milta. 100 de do.", 44,
              Stage.HAGGLING, counter_price=100)),
    ("Thoda kam karo, 55 mein de do",
     decision("Aap regular lagte ho... chalo 85, last.", 50, Stage.HAGGLING, counter_price=85)),
    ("Do kilo le raha hoon, 60 rupees?",
     decision("Do kilo? Achha, 75 mein de dunga.", 60, Stage.HAGGLING, counter_price=75)),
    ("70 final, bhaiya?",
     decision("Theek hai, 70. Sirf aapke liye.", 68, Stage.HAGGLING, counter_price=70)),
    ("Theek hai, pakka",
     decision("Pakka! 70 rupaye kilo, do kilo. Shukriya, phir aana!", 75, Stage.DEAL,
              counter_price=70)),
]


def planned(request: BrainRequest) -> AIDecision:
    return PLAN[request.turn - 1][1]


def haggle_forever(request: BrainRequest) -> AIDecision:
    """Stays in HAGGLING with a falling quote and a swinging mood: two events per turn."""
    if request.turn == 1:
        return decision("Namaste! 150 rupaye kilo.", 55, Stage.INQUIRY, counter_price=150)
    happiness = 45 if request.turn % 2 else 58
    quote = max(60, 150 - 6 * request.turn)
    return decision(f"Turn {request.turn}: {quote} se kam nahi.", happiness, Stage.HAGGLING,
                    counter_price=quote)


class PacedBrain:
    """Streams its reply a word at a time; on `withdraw_turns` it takes the words back first."""

    name = "paced"

    def __init__(self, script: Callable[[BrainRequest], AIDecision], *, word_delay: float,
                 withdraw_turns: frozenset[int] = frozenset(), rethink: float = 0.0) -> None:
        self.script = script
        self.word_delay = word_delay
        self.withdraw_turns = withdraw_turns
        self.rethink = rethink

    async def propose(self, request: BrainRequest,
                      on_delta: DeltaSink | None = None) -> BrainResult:
        assert on_delta is not None
        final = self.script(request)
        if request.turn in self.withdraw_turns:
            for word in "Hmm, 150 se kam toh bilkul".split(" "):
                await on_delta.delta(word + " ")
                await anyio.sleep(self.word_delay)
            await on_delta.withdraw("the brain asked again")
            await anyio.sleep(self.rethink)
        for word in final.reply_text.split(" "):
            await on_delta.delta(word + " ")
            await anyio.sleep(self.word_delay)
        return BrainResult(decision=final, streamed=True, ledger=Ledger(brain_ms=100.0))


# ------------------------------------------------------------------------------ fixtures


def chromium_or_skip() -> None:
    if os.path.exists(CHROMIUM):
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{CHROMIUM} is missing on CI: install Debian's chromium "
                    "(scripts/test.sh does)")
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium); the browser tests need it")


@pytest.fixture(autouse=True)
def _collect_servers() -> Any:
    yield
    collect_stopped_servers()


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    chromium_or_skip()
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                            headless=True)
        try:
            yield launched
        finally:
            await launched.close()


def settings(**overrides: Any) -> Any:
    values: dict[str, Any] = {"SAMVAD_SECRET": "s" * 40, "MIRROR": "none", "BRAIN": "rules",
                              "ADMIN_KEY": ""}
    values.update(overrides)
    return load_settings(**values)


async def new_page(browser: Any) -> Any:
    context = await browser.new_context(viewport={"width": 1440, "height": 1000})
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.js_errors = errors
    sent: list[str] = []  # every frame the page sends on any socket
    page.on("websocket", lambda ws: ws.on("framesent", lambda frame: sent.append(frame)))
    page.ws_sent = sent
    return page


def sent_types(page: Any) -> set[str]:
    return {json.loads(frame)["type"] for frame in page.ws_sent}


# ------------------------------------------------------------------------------ the player


class Player:
    """The learner's side, over a real socket: says a line and waits for Ramesh's reply."""

    def __init__(self, host: str, session_id: str, token: str) -> None:
        self.url = f"ws://{host}/ws/sessions/{session_id}?token={token}"
        self.ws: ClientConnection | None = None

    async def __aenter__(self) -> Player:
        self.ws = await connect(self.url, subprotocols=["samvad.v1.json"])  # type: ignore[list-item]
        welcome = json.loads(await self.ws.recv())
        assert welcome["type"] == "welcome" and welcome["role"] == "player"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.ws is not None
        await self.ws.close()

    async def say(self, text: str) -> dict[str, Any]:
        assert self.ws is not None
        frame_id = f"t{next(_frame_ids)}"
        await self.ws.send(json.dumps({"type": "transcript", "id": frame_id, "text": text}))
        with anyio.fail_after(10):
            while True:
                event = json.loads(await self.ws.recv())
                if event["type"] == "reply" and event.get("in_reply_to") == frame_id:
                    return event


async def create_session(client: httpx.AsyncClient, learner: str) -> dict[str, Any]:
    response = await client.post("/api/sessions", json={"learner_id": learner})
    assert response.status_code == 201, response.text
    return response.json()


async def server_state(client: httpx.AsyncClient, created: dict[str, Any]) -> dict[str, Any]:
    response = await client.get(f"/api/sessions/{created['session_id']}",
                                headers={"authorization": f"Bearer {created['spectator_token']}"})
    assert response.status_code == 200
    return response.json()


async def shown_lines(page: Any) -> list[dict[str, Any]]:
    return await page.evaluate("""() => [...document.querySelectorAll('#lines > .line')]
        .filter((n) => n.id !== 'stream-line')
        .map((n) => ({turn: Number(n.dataset.turn), role: n.dataset.role,
                      text: n.querySelector('.bubble').textContent}))""")


async def wait_seq(page: Any, seq: int) -> None:
    await page.wait_for_function("(seq) => window.samvadView && window.samvadView.lastSeq >= seq",
                                 arg=seq, timeout=WAIT_MS)


async def lobby_row(page: Any, session_id: str) -> dict[str, str]:
    return await page.evaluate("""(sid) => {
        const tr = document.querySelector(`tr[data-session-id="${sid}"]`);
        if (!tr) return null;
        return {stage: tr.dataset.stage, turn: tr.dataset.turn, text: tr.innerText,
                href: tr.querySelector('a.watch-link').getAttribute('href')};
    }""", session_id)


# ------------------------------------------------------------------------------ tests


async def test_lobby_and_watch_page_follow_a_whole_session(browser: Any) -> None:
    brain = ScriptedBrain(planned, stream=True, delay=0.12)
    app = create_app(settings(ADMIN_KEY=ADMIN_KEY), brain=brain)
    async with serve(app) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        other = await create_session(client, "ravi")
        created = await create_session(client, "asha")
        sid = created["session_id"]

        lobby = await new_page(browser)
        await lobby.goto(f"http://{host}/view/lobby.html?admin={ADMIN_KEY}")
        await lobby.wait_for_selector(f'tr[data-session-id="{sid}"]', timeout=WAIT_MS)
        row = await lobby_row(lobby, sid)
        assert row["stage"] == "GREETING" and row["turn"] == "0"
        assert "asha" in row["text"] and "no turns yet" in row["text"]
        assert await lobby.locator("tbody tr").count() == 2

        # The lobby's link is the teacher's way in; it carries a spectator token, not the key.
        watch = await new_page(browser)
        assert row["href"].startswith("/view/watch.html?session=") and ADMIN_KEY not in row["href"]
        await watch.goto(f"http://{host}{row['href']}")
        await watch.wait_for_function("window.samvadView && window.samvadView.connected",
                                      timeout=WAIT_MS)

        async with Player(host, sid, created["player_token"]) as player, \
                Player(host, other["session_id"], other["player_token"]) as ravi:
            await ravi.say("Namaste bhaiya, ye tamatar kitne ka hai?")
            for number, (line, _) in enumerate(PLAN[:2], start=1):
                reply = await player.say(line)
                assert reply["learner_text"] == line
                await watch.wait_for_function("(n) => window.samvadView.turnsShown >= n",
                                              arg=number, timeout=WAIT_MS)
            # The lobby follows without a reload: asha is haggling now, at turn 2.
            await lobby.wait_for_function(
                """(sid) => { const tr = document.querySelector(`tr[data-session-id="${sid}"]`);
                   return tr && tr.dataset.stage === 'HAGGLING' && tr.dataset.turn === '2'; }""",
                arg=sid, timeout=WAIT_MS)
            assert "s ago" in (await lobby_row(lobby, sid))["text"]
            assert await lobby.evaluate("window.samvadLobby.updates") >= 1
            ARTIFACTS.mkdir(exist_ok=True)
            await lobby.screenshot(path=str(ARTIFACTS / "lobby.png"))

            for line, _ in PLAN[2:]:
                await player.say(line)

            state = await server_state(client, created)
            assert state["stage"] == "DEAL" and state["turn"] == len(PLAN)
            await wait_seq(watch, state["seq"])
            await watch.wait_for_selector("#outcome:not([hidden])", timeout=WAIT_MS)

        # Every line of the conversation, once, in order, exactly as the server has it.
        expected = [{"turn": t["turn"], "role": t["role"], "text": t["text"]}
                    for t in state["transcript"]]
        assert len(expected) == 2 * len(PLAN)
        assert await shown_lines(watch) == expected
        view = await watch.evaluate("window.samvadView")
        assert view["turnsShown"] == len(PLAN) and view["lastSeq"] == state["seq"]
        assert view["deltas"] > 0  # the streamed words were seen before each reply
        assert await watch.locator("#stream-line").count() == 0

        points = await watch.evaluate("window.samvadView.points()")
        assert points == {"happiness": len(state["happiness_history"]),
                          "quotes": len(state["quotes"]), "offers": len(state["offers"]),
                          "stages": len(state["stage_changes"]), "timings": len(PLAN)}
        assert points["happiness"] == len(PLAN) and points["offers"] == 4
        chart = watch.locator("#happiness-chart")
        assert await chart.get_attribute("data-points") == str(len(PLAN))
        assert await chart.locator("canvas").count() >= 1
        assert await watch.locator("#price-chart").get_attribute("data-quotes") == str(len(PLAN))

        stages = await watch.eval_on_selector_all(
            "#stages li",
            "(items) => items.map((li) => [li.dataset.stage, Number(li.dataset.turn)])")
        assert stages == [["GREETING", 0], ["INQUIRY", 1], ["HAGGLING", 2], ["DEAL", 6]]

        bars = await watch.eval_on_selector_all(
            ".timing-row", """(rows) => rows.map((r) => ({turn: Number(r.dataset.turn),
                brain: Number(r.dataset.brain),
                width: r.querySelector('.seg-brain').getBoundingClientRect().width}))""")
        assert [b["turn"] for b in bars] == list(range(1, len(PLAN) + 1))
        assert all(b["brain"] >= 100 and b["width"] > 0 for b in bars)
        assert "scripted" in await watch.locator(".timing-row .detail").first.inner_text()

        outcome = watch.locator("#outcome")
        assert "Deal" in await outcome.locator(".headline").inner_text()
        summary = state["summary"]
        assert await outcome.locator('dd[data-field="final_price"]').inner_text() == "₹70"
        assert await outcome.locator('dd[data-field="first_quote"]').inner_text() == "₹120"
        assert (await outcome.locator('dd[data-field="discount"]').inner_text()
                == f"{summary['discount_pct']}%")
        assert await outcome.locator('dd[data-field="turns"]').inner_text() == str(len(PLAN))
        assert await watch.locator("#stage").inner_text() == "DEAL"
        assert await watch.locator("#status").get_attribute("data-state") == "ended"
        await watch.screenshot(path=str(ARTIFACTS / "watch.png"), full_page=True)
        assert watch.js_errors == [] and lobby.js_errors == []
        assert watch.ws_sent == [] and lobby.ws_sent == []


async def test_forced_disconnect_resumes_without_gaps_or_repeats(browser: Any) -> None:
    brain = ScriptedBrain(planned, delay=0.05)
    app = create_app(settings(), brain=brain)
    async with serve(app) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        created = await create_session(client, "meera")
        sid = created["session_id"]
        watch = await new_page(browser)
        await watch.goto(f"http://{host}/view/watch.html?session={sid}"
                         f"&token={created['spectator_token']}")
        await watch.wait_for_function("window.samvadView && window.samvadView.connected",
                                      timeout=WAIT_MS)
        async with Player(host, sid, created["player_token"]) as player:
            for line, _ in PLAN[:2]:
                await player.say(line)
            await watch.wait_for_function("window.samvadView.turnsShown === 2", timeout=WAIT_MS)

            # The network drops; the learner keeps haggling while the page is away.
            await watch.evaluate("window.samvadView.dropSocket({holdMs: 1200})")
            await watch.wait_for_function("!window.samvadView.connected", timeout=WAIT_MS)
            for line, _ in PLAN[2:5]:
                await player.say(line)
            assert await watch.evaluate("window.samvadView.turnsShown") == 2

            await watch.wait_for_function("window.samvadView.reconnects >= 1", timeout=WAIT_MS)
            await player.say(PLAN[5][0])
            state = await server_state(client, created)
            await wait_seq(watch, state["seq"])

        view = await watch.evaluate("window.samvadView")
        assert view["reconnects"] >= 1 and view["resumes"] >= 1 and view["snapshots"] == 0
        assert view["turnsShown"] == len(PLAN)
        expected = [{"turn": t["turn"], "role": t["role"], "text": t["text"]}
                    for t in state["transcript"]]
        assert await shown_lines(watch) == expected
        vendor_turns = [line["turn"] for line in await shown_lines(watch)
                        if line["role"] == "vendor"]
        assert vendor_turns == list(range(1, len(PLAN) + 1))
        assert await watch.evaluate("window.samvadView.points()") == {
            "happiness": len(PLAN), "quotes": len(PLAN), "offers": len(state["offers"]),
            "stages": 3, "timings": len(PLAN)}
        assert await watch.locator("#outcome:not([hidden])").count() == 1
        assert sent_types(watch) == {"resume"}  # read-only: never a transcript or a scene
        assert watch.js_errors == []


async def test_a_gap_too_old_for_replay_is_filled_by_a_snapshot(browser: Any) -> None:
    app = create_app(settings(REPLAY_EVENTS=16), brain=ScriptedBrain(haggle_forever))
    async with serve(app) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        created = await create_session(client, "kiran")
        sid = created["session_id"]
        async with Player(host, sid, created["player_token"]) as player:
            for n in range(3):
                await player.say(f"Line {n + 1}, bhaiya")
            # A late spectator starts from the welcome's state, transcript included.
            watch = await new_page(browser)
            await watch.goto(f"http://{host}/view/watch.html?session={sid}"
                             f"&token={created['spectator_token']}")
            await watch.wait_for_function("window.samvadView && window.samvadView.turnsShown === 3",
                                          timeout=WAIT_MS)
            assert (await shown_lines(watch))[0] == {
                "turn": 1, "role": "learner", "text": "Line 1, bhaiya"}

            await watch.evaluate("window.samvadView.dropSocket({holdMs: 1500})")
            await watch.wait_for_function("!window.samvadView.connected", timeout=WAIT_MS)
            for n in range(3, 14):  # 22 events: more than the 16 the server keeps for replay
                await player.say(f"Line {n + 1}, bhaiya")
            state = await server_state(client, created)
            await watch.wait_for_function("window.samvadView.snapshots >= 1", timeout=WAIT_MS)
            await wait_seq(watch, state["seq"])
            await player.say("Line 15, bhaiya")
            state = await server_state(client, created)
            await wait_seq(watch, state["seq"])

        expected = [{"turn": t["turn"], "role": t["role"], "text": t["text"]}
                    for t in state["transcript"]]
        assert await shown_lines(watch) == expected
        view = await watch.evaluate("window.samvadView")
        assert view["turnsShown"] == 15 and view["reconnects"] >= 1
        points = await watch.evaluate("window.samvadView.points()")
        assert points["happiness"] == 15 and points["quotes"] == 15
        assert watch.js_errors == []


async def test_streamed_words_show_then_a_withdrawn_stream_disappears(browser: Any) -> None:
    brain = PacedBrain(planned, word_delay=0.08, withdraw_turns=frozenset({2}), rethink=0.8)
    app = create_app(settings(), brain=brain)
    async with serve(app) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        created = await create_session(client, "zoya")
        sid = created["session_id"]
        watch = await new_page(browser)
        await watch.goto(f"http://{host}/view/watch.html?session={sid}"
                         f"&token={created['spectator_token']}")
        await watch.wait_for_function("window.samvadView && window.samvadView.connected",
                                      timeout=WAIT_MS)
        async with Player(host, sid, created["player_token"]) as player, \
                anyio.create_task_group() as tg:
            tg.start_soon(player.say, PLAN[0][0])
            # Turn 1 streams in word by word before its reply lands.
            await watch.wait_for_function(
                """() => { const n = document.querySelector('#stream-line .bubble');
                           return n && n.textContent.includes('Tamatar'); }""", timeout=WAIT_MS)
            assert await watch.evaluate("window.samvadView.turnsShown") == 0
            await watch.wait_for_function("window.samvadView.turnsShown === 1", timeout=WAIT_MS)
            assert await watch.locator("#stream-line").count() == 0

        async with Player(host, sid, created["player_token"]) as player, \
                anyio.create_task_group() as tg:
            tg.start_soon(player.say, PLAN[1][0])
            await watch.wait_for_function(
                """() => { const n = document.querySelector('#stream-line .bubble');
                           return n && n.textContent.includes('bilkul'); }""", timeout=WAIT_MS)
            # The brain takes its words back: they vanish before the real reply arrives.
            await watch.wait_for_selector("#stream-line.withdrawn", timeout=WAIT_MS)
            assert "bilkul" not in await watch.locator("#lines").inner_text()
            assert await watch.evaluate("window.samvadView.turnsShown") == 1
            await watch.wait_for_function("window.samvadView.turnsShown === 2", timeout=WAIT_MS)

        assert await watch.locator("#stream-line").count() == 0
        text = await watch.locator("#lines").inner_text()
        assert "bilkul" not in text and "Itne mein toh mandi" in text
        view = await watch.evaluate("window.samvadView")
        assert view["withdrawals"] == 1 and view["deltas"] > 10
        assert watch.js_errors == []


async def test_a_bad_token_is_reported_and_not_retried(browser: Any) -> None:
    app = create_app(settings(), brain=ScriptedBrain())
    async with serve(app) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        created = await create_session(client, "asha")
        other = await create_session(client, "ravi")
        watch = await new_page(browser)
        # A valid spectator token, but for another session: refused with 4403.
        await watch.goto(f"http://{host}/view/watch.html?session={created['session_id']}"
                         f"&token={other['spectator_token']}")
        await watch.wait_for_selector("#fatal:not([hidden])", timeout=WAIT_MS)
        assert "another session" in await watch.locator("#fatal").inner_text()
        assert await watch.locator("#status").get_attribute("data-state") == "failed"
        await anyio.sleep(0.8)  # longer than the first reconnect delay
        assert await watch.evaluate("window.samvadView.reconnects") == 0
        assert watch.ws_sent == []


async def test_lobby_and_links_need_the_admin_key_when_one_is_set() -> None:
    app = create_app(settings(ADMIN_KEY=ADMIN_KEY), brain=ScriptedBrain())
    bearer = {"authorization": f"Bearer {ADMIN_KEY}"}
    async with serve(app) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        created = await create_session(client, "asha")
        sid = created["session_id"]

        assert (await client.get("/api/lobby")).status_code == 401
        assert (await client.get("/api/lobby", headers={"authorization": "Bearer wrong"})
                ).status_code == 401
        listed = await client.get("/api/lobby", headers=bearer)
        assert listed.status_code == 200
        [row] = listed.json()["sessions"]
        assert row["session_id"] == sid and row["learner_id"] == "asha"
        assert row["stage"] == "GREETING" and "token=" in row["watch_url"]
        assert (await client.get(f"/api/lobby?admin={ADMIN_KEY}")).status_code == 200

        assert (await client.get("/view/lobby.html")).status_code == 401
        assert (await client.get("/view/")).status_code == 401
        assert (await client.get(f"/view/lobby.html?admin={ADMIN_KEY}")).status_code == 200
        # The watch page and its assets hold no session data; the socket checks the token.
        assert (await client.get("/view/watch.html")).status_code == 200
        assert (await client.get("/view/vendor/uPlot-1.6.32.iife.min.js")).status_code == 200

        link_path = f"/api/sessions/{sid}/spectator-link"
        assert (await client.get(link_path)).status_code == 401
        link = await client.get(link_path, headers=bearer)
        assert link.status_code == 200
        body = link.json()
        assert body["url"] == f"/view/watch.html?session={sid}&token={body['spectator_token']}"
        assert (await client.get("/api/sessions/nope/spectator-link", headers=bearer)
                ).status_code == 404

        # The spectator token from the link opens a read-only session socket.
        async with connect(f"ws://{host}/ws/sessions/{sid}?token={body['spectator_token']}",
                           subprotocols=["samvad.v1.json"]) as ws:  # type: ignore[list-item]
            welcome = json.loads(await ws.recv())
            assert welcome["role"] == "spectator"

        async with connect(f"ws://{host}/ws/lobby") as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
        async with connect(f"ws://{host}/ws/lobby?admin={ADMIN_KEY}") as ws:
            first = json.loads(await ws.recv())
            assert first["type"] == "lobby" and first["sessions"][0]["session_id"] == sid


async def test_the_lobby_is_open_without_an_admin_key_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="samvad.spectate"):
        app = create_app(settings(), brain=ScriptedBrain())
    assert any("ADMIN_KEY is not set" in r.getMessage() for r in caplog.records)
    async with serve(app) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        assert (await client.get("/api/lobby")).json()["sessions"] == []
        assert (await client.get("/view/")).status_code == 200
