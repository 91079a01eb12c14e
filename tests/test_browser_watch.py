"""The watch page in a real headless Chromium: it keeps up through drops, gaps and streams.

A forced disconnect is healed by `resume`, a gap older than the replay buffer by a `snapshot`,
streamed words show and a withdrawn stream disappears, and a refused token is reported, not
retried. Shared helpers are in tests/browser_support.py, the fixtures in tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest

from schemas.brain import BrainRequest, BrainResult, Ledger
from schemas.decision import AIDecision
from schemas.enums import Stage
from server.app import create_app
from session.protocols import DeltaSink
from tests.browser_support import (
    PLAN,
    WAIT_MS,
    Player,
    create_session,
    open_watch,
    planned,
    sent_types,
    server_state,
    settings,
    shown_lines,
    wait_seq,
)
from tests.fakes import ScriptedBrain, decision
from tests.live_server import serve

pytestmark = [pytest.mark.browser, pytest.mark.anyio, pytest.mark.usefixtures("collect_servers")]


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
    propose_inline = None  # the parts of `brain.policy.Brain` it does not have
    write_summary = None

    async def aclose(self) -> None:
        """Nothing to close."""

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
            for word in "Hmm, itne mein toh bilkul, arre".split(" "):  # no number: said clause by clause
                await on_delta.delta(word + " ")
                await anyio.sleep(self.word_delay)
            await on_delta.withdraw("the brain asked again")
            await anyio.sleep(self.rethink)
        for word in final.reply_text.split(" "):
            await on_delta.delta(word + " ")
            await anyio.sleep(self.word_delay)
        return BrainResult(decision=final, streamed=True, ledger=Ledger(brain_ms=100.0))


async def test_forced_disconnect_resumes_without_gaps_or_repeats(browser: Any) -> None:
    brain = ScriptedBrain(planned, delay=0.05)
    app = create_app(settings(), brain=brain)
    async with serve(app) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        created = await create_session(client, "meera")
        sid = created["session_id"]
        watch = await open_watch(browser, host, sid, created["spectator_token"])
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
        # The learner report: the score's parts as bars, three suggestions, the printable page's link.
        await watch.wait_for_function("window.samvadView.report() !== null", timeout=WAIT_MS)
        report = await watch.evaluate("window.samvadView.report()")
        assert report["suggestions"] == 3 and 0 <= report["score"] <= 100
        assert await watch.locator("#report .score-bar").count() == 4
        link = await watch.locator("#report a").get_attribute("href")
        assert link is not None and "format=html" in link
        printable = await client.get(link)
        assert printable.status_code == 200 and printable.text.count("<svg") == 2
        # The last turn's coaching cards, drawn with where their words come from.
        tips = await watch.evaluate("window.samvadView.tips()")
        assert tips["turn"] == len(PLAN) and tips["cards"] >= 1
        assert await watch.locator("#tips .tip-card").count() == tips["cards"]
        assert await watch.locator("#tips-earned").inner_text() != ""  # "kitne ka hai" earned a grounded card
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
            watch = await open_watch(browser, host, sid, created["spectator_token"])
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
        watch = await open_watch(browser, host, sid, created["spectator_token"])
        await watch.wait_for_function("window.samvadView && window.samvadView.connected",
                                      timeout=WAIT_MS)
        async with Player(host, sid, created["player_token"]) as player, \
                anyio.create_task_group() as tg:
            tg.start_soon(player.say, PLAN[0][0])
            # Turn 1 streams in before its reply lands: its first sentence, once whole (the second
            # waits to see whether a later one names the price, session/spoken.py).
            await watch.wait_for_function(
                """() => { const n = document.querySelector('#stream-line .bubble');
                           return n && n.textContent.includes('Namaste ji!'); }""", timeout=WAIT_MS)
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
        # Cut to two sentences, the line keeps the one that names the new price (issue #12).
        assert "bilkul" not in text and "Arre, 40? 100 de do." in text
        view = await watch.evaluate("window.samvadView")
        assert view["withdrawals"] == 1 and view["deltas"] >= 5  # a whole clause or sentence each
        assert watch.js_errors == []


PACK_LINES = {
    "kyoto-antiques": ("Tanaka-san", "¥", ["Konnichiwa, sumimasen.", "Kono chawan wa ikura desu ka?",
                                          "Would 17000 yen be possible, onegaishimasu?"]),
    "marrakech-souk": ("Hassan", "MAD ", ["Salam alaikum, my friend!", "Bshhal hada fanous?",
                                         "Ghali bezzaf! 300 dirhams, inshallah?"]),
    "jaipur-bazaar": ("Ramesh", "₹", ["Namaste bhaiya!", "Ye tamatar kitne ka hai?", "50 rupees mein de do?"]),
}


@pytest.mark.parametrize("pack", sorted(PACK_LINES))
async def test_the_watch_page_plays_every_scenario_pack(browser: Any, pack: str) -> None:
    vendor, symbol, lines = PACK_LINES[pack]
    app = create_app(settings())
    async with serve(app) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        created = await create_session(client, "kenji", scenario=pack)
        watch = await open_watch(browser, host, created["session_id"], created["spectator_token"])
        await watch.wait_for_function(f"window.samvadView && window.samvadView.scenario === {pack!r}",
                                      timeout=WAIT_MS)
        async with Player(host, created["session_id"], created["player_token"]) as player:
            for line in lines:
                await player.say(line)
            state = await server_state(client, created)
            await wait_seq(watch, state["seq"])
        assert await watch.locator(".topbar .vendor-name").inner_text() == vendor
        assert await watch.evaluate("window.samvadView.turnsShown") == len(lines)
        vendor_lines = watch.locator('.line.vendor[data-role="vendor"] .who')
        assert await vendor_lines.count() == len(lines)
        assert vendor in await vendor_lines.first.inner_text()
        assert (await watch.locator("#quote").inner_text()).startswith(symbol.strip())
        assert await watch.locator("#tips .tip-card").count() >= 1
        assert watch.js_errors == []


async def test_a_bad_token_is_reported_and_not_retried(browser: Any) -> None:
    app = create_app(settings(), brain=ScriptedBrain())
    async with serve(app) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        created = await create_session(client, "asha")
        other = await create_session(client, "ravi")
        # A valid spectator token, but for another session: refused with 4403.
        watch = await open_watch(browser, host, created["session_id"], other["spectator_token"])
        await watch.wait_for_selector("#fatal:not([hidden])", timeout=WAIT_MS)
        assert "another session" in await watch.locator("#fatal").inner_text()
        assert await watch.locator("#status").get_attribute("data-state") == "failed"
        await anyio.sleep(0.8)  # longer than the first reconnect delay
        assert await watch.evaluate("window.samvadView.reconnects") == 0
        assert watch.ws_sent == []

