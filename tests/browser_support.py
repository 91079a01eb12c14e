"""Shared pieces of the browser tests (tests/test_browser_*.py): Chromium, pages, a scripted player.

Each browser test starts the application under uvicorn on a loopback port, plays a session with a
scripted player over a real WebSocket, and reads what the pages show in Debian's headless
Chromium. Brains are scripted so that every turn, quote and stage is known in advance. The
`browser` and `collect_servers` fixtures are in tests/conftest.py.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import anyio
import httpx
from websockets.asyncio.client import ClientConnection, connect

from schemas.brain import BrainRequest
from schemas.decision import AIDecision
from schemas.enums import Stage
from server.config import load_settings
from tests.ci import need
from tests.fakes import decision

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


# ------------------------------------------------------------------------------ pages


def need_chromium() -> None:
    need(os.path.exists(CHROMIUM), f"{CHROMIUM} is missing",
         "apt-get install chromium (scripts/test.sh does); the browser tests need it")


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


async def sign_in(page: Any, host: str, key: str, next_path: str) -> None:
    """Sign in as a teacher does: the sign-in page, the key typed once, back to `next_path`."""
    await page.goto(f"http://{host}/view/signin.html?next={next_path}")
    await page.fill("#key", key)
    await page.click("#submit")
    await page.wait_for_url(f"http://{host}{next_path}", timeout=WAIT_MS)


async def open_watch(browser: Any, host: str, session_id: str, token: str) -> Any:
    """A new page on the watch view of one session."""
    watch = await new_page(browser)
    await watch.goto(f"http://{host}/view/watch.html?session={session_id}&token={token}")
    return watch


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


async def create_session(client: httpx.AsyncClient, learner: str, scenario: str = "jaipur-bazaar") -> dict[str, Any]:
    """A session of `learner`, vouched for with the admin key as a trusted backend does."""
    response = await client.post("/api/sessions", json={"learner_id": learner, "scenario": scenario},
                                 headers={"authorization": f"Bearer {ADMIN_KEY}"})
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
