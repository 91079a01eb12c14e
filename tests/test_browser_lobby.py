"""The lobby page and its links in a real headless Chromium, and who may open them.

The first test follows a whole session from the lobby to the watch page; the others check the
admin key on the lobby, its API and its socket, and the open lobby when no key is set. Shared
helpers are in tests/browser_support.py, the fixtures in tests/conftest.py.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from server.app import create_app
from tests.browser_support import (
    ADMIN_KEY,
    ARTIFACTS,
    PLAN,
    WAIT_MS,
    Player,
    create_session,
    lobby_row,
    new_page,
    planned,
    server_state,
    settings,
    shown_lines,
    sign_in,
    wait_seq,
)
from tests.fakes import ScriptedBrain
from tests.live_server import serve

pytestmark = [pytest.mark.browser, pytest.mark.anyio, pytest.mark.usefixtures("collect_servers")]


async def test_lobby_and_watch_page_follow_a_whole_session(browser: Any) -> None:
    brain = ScriptedBrain(planned, stream=True, delay=0.12)
    app = create_app(settings(ADMIN_KEY=ADMIN_KEY), brain=brain)
    async with serve(app) as host, httpx.AsyncClient(base_url=f"http://{host}") as client:
        other = await create_session(client, "ravi")
        created = await create_session(client, "asha")
        sid = created["session_id"]

        lobby = await new_page(browser)
        await sign_in(lobby, host, ADMIN_KEY, "/view/lobby.html")
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
