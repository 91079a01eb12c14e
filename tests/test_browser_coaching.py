"""The watch page's coaching in a real headless Chromium (issue #12): hints, the replies that are
not turns (clarify, nudge, welcome back), a turn taken back, a barge-in that unbinds a price, a
reply's flags in plain words and the report's coaching counts and clamps, live, through a
`resume` replay and across a `snapshot`.

A scripted player drives the session over a real socket (tests/servers.py); the page is read
through the DOM. Shared helpers are in tests/browser_support.py, the fixtures in tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from schemas.brain import BrainRequest
from schemas.decision import AIDecision
from schemas.enums import Stage
from schemas.flags import FLAG_WORDS
from tests.browser_support import ARTIFACTS, WAIT_MS, open_watch, sent_types, shown_lines, wait_seq
from tests.fakes import ScriptedBrain, decision
from tests.servers import Client, Served, create, player, running_server, state

pytestmark = [pytest.mark.browser, pytest.mark.anyio, pytest.mark.usefixtures("collect_servers")]

# What the learner says and what the brain proposes, in the order the brain is asked. Every vendor
# line is one sentence: a beginner's vendor says one at a time, so none is cut.
SCRIPT: list[tuple[str, AIDecision]] = [
    ("Namaste bhaiya, tamatar kitne ka hai?",
     decision("Namaste ji, tamatar 120 rupaye kilo hai.", 55, Stage.INQUIRY, counter_price=120)),
    ("Bahut mehenga hai bhaiya, 70 mein de do?",
     decision("Arre nahi, 100 rupaye se kam nahi hoga.", 50, Stage.HAGGLING, counter_price=100)),
    # The brain raises its price while haggling: the rules keep 100 (quote_rise).
    ("Thoda kam karo, 80 mein?",
     decision("Nahi bhai, yeh 110 ka maal hai.", 48, Stage.HAGGLING, counter_price=110)),
    # Taken back by the undo ...
    ("85 final bhaiya?",
     decision("Chalo, 95 mein le lo.", 52, Stage.HAGGLING, counter_price=95)),
    # ... and played again: the learner cuts in before the price, so 92 does not bind.
    ("Achha, 90 pakka?",
     decision("Theek hai, aapke liye 92 rupaye.", 56, Stage.HAGGLING, counter_price=92)),
]


def scripted() -> ScriptedBrain:
    proposals: Iterator[AIDecision] = iter([proposal for _, proposal in SCRIPT])

    def next_proposal(request: BrainRequest) -> AIDecision:
        return next(proposals)

    return ScriptedBrain(next_proposal)


def host_of(served: Served) -> str:
    return served.base_url.removeprefix("http://")


async def command(c: Client, frame_id: str, name: str, kind: str) -> dict[str, Any]:
    await c.send({"type": "command", "id": frame_id, "name": name})
    return await c.until(kind, in_reply_to=frame_id)


def of_type(frames: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [f for f in frames if f["type"] == kind]


async def notes(page: Any, kind: str) -> list[dict[str, Any]]:
    return await page.evaluate("""(kind) => [...document.querySelectorAll(`#lines > .note-${kind}`)]
        .map((n) => ({...n.dataset, text: n.innerText,
                      hint: n.querySelector('.hint-text')?.textContent ?? null,
                      english: n.querySelector('.hint-english')?.textContent ?? null,
                      offeredTag: n.querySelector('.tag.offered')?.textContent ?? null}))""", kind)


async def entry_keys(page: Any) -> list[str]:
    return await page.evaluate("[...document.querySelectorAll('#lines > [data-key]')].map((n) => n.dataset.key)")


async def test_hints_marks_an_undo_a_barge_in_flags_and_the_report(browser: Any) -> None:
    settings = {"SILENCE_TIMEOUT_MS": 0, "SESSION_RESTART_SECONDS": 0.4}
    async with running_server(brain=scripted(), **settings) as served:
        created = await create(served, learner_id="meera", level="beginner")
        sid = created["session_id"]
        watch = await open_watch(browser, host_of(served), sid, created["spectator_token"])
        await watch.wait_for_function("window.samvadView && window.samvadView.connected", timeout=WAIT_MS)
        async with await player(served, created) as c:
            await c.recv()
            await c.turn("t1", SCRIPT[0][0])
            repeated = await command(c, "r1", "repeat", "repeat")
            hints = [await command(c, f"h{i}", "hint", "hint") for i in range(3)]
            await c.send({"type": "transcript", "id": "mumble", "text": "hmm... tamatar... kuch", "confidence": 0.3})
            clarify = await c.until("reply", in_reply_to="mumble")
            await c.send({"type": "silence", "id": "s1"})
            nudge = await c.until("reply", mark="nudge")
            offered = await c.until("hint", offered=True)
            for n in (1, 2, 3):
                await c.turn(f"t{n + 1}", SCRIPT[n][0])
            undone_reply = of_type(c.seen, "reply")[-1]
            # The page drops off: the undo, the turn played again and the barge-in reach it
            # through the `resume` replay.
            await watch.evaluate("window.samvadView.dropSocket({holdMs: 1500})")
            await watch.wait_for_function("!window.samvadView.connected", timeout=WAIT_MS)
            undo = await command(c, "u1", "undo", "undo")
            again = (await c.turn("t5", SCRIPT[4][0]))[0]
            cut = again["text"].index("92")
            await c.send({"type": "playback", "id": "p1", "turn": 4, "heard_chars": cut, "interrupted": True})
            heard = await c.until("heard", in_reply_to="p1")
            await watch.wait_for_function("window.samvadView.reconnects >= 1", timeout=WAIT_MS)
            played = list(c.seen)
        await anyio.sleep(0.5)  # nothing happens for longer than SESSION_RESTART_SECONDS
        async with await player(served, created) as c:  # back after SESSION_RESTART_SECONDS
            await c.recv()
            welcome_back = await c.until("reply", mark="welcome_back", wait=3)
            await c.send({"type": "command", "id": "stop", "name": "stop"})
            report = await c.until("session.report")
            played += c.seen
        final = await state(served, sid, created["player_token"])
        await wait_seq(watch, report["seq"])

        assert undo["turn"] == 4 and heard["quote_unbound"] is True and heard["vendor_quote"] == 100
        assert clarify["mark"] == "clarify" and offered["level"] == 0

        # Hints, asked and offered, in order: level, kind, text and English.
        shown = await notes(watch, "hint")
        assert [(int(n["level"]), n["kind"], n["offered"]) for n in shown] == [
            (0, "contextual", "false"), (1, "structural", "false"), (2, "reveal", "false"), (0, "contextual", "true")]
        for note, event in zip(shown, [*hints, offered], strict=True):
            assert note["hint"] == event["text"] != ""
            assert note["english"] == (event["english"] or None)
        assert [n["offeredTag"] for n in shown] == [None, None, None, "offered"]
        assert hints[1]["english"] and "____" in shown[1]["hint"]
        assert (await notes(watch, "repeat"))[0]["hint"] == repeated["text"]

        # The replies that are not turns are tagged, and are not counted as turns.
        for reply, tag in ((clarify, "asked to hear it again"), (nudge, "nudge"), (welcome_back, "welcome back")):
            line = watch.locator(f'.line.vendor.late[data-mark="{reply["mark"]}"]')
            assert await line.count() == 1
            assert await line.locator(".bubble").inner_text() == reply["text"]
            assert tag in await line.locator(".tag.mark").inner_text()
        assert await watch.locator('.line.learner.late .bubble').all_inner_texts() == ["hmm... tamatar... kuch"]
        assert await watch.evaluate("window.samvadView.turnsShown") == 4

        # The undone turn 4 stays, struck through, before its note and the turn played again.
        struck = watch.locator(".line.undone")
        assert await struck.locator(".bubble").all_inner_texts() == [SCRIPT[3][0], undone_reply["text"]]
        decorations = await struck.locator(".bubble").evaluate_all(
            "(nodes) => nodes.map((n) => getComputedStyle(n).textDecorationLine)")
        assert decorations == ["line-through", "line-through"]
        assert "turn 4 taken back" in (await notes(watch, "undo"))[0]["text"].lower()
        keys = await entry_keys(watch)
        undone_at = keys.index(f"undone:{undo['seq']}:4:vendor")
        assert undone_at < keys.index(f"note:{undo['seq']}") < keys.index("4:learner") < keys.index("4:vendor")
        # What the page shows as the conversation is the server's transcript.
        expected = [{"turn": t["turn"], "role": t["role"], "text": t["text"]} for t in final["transcript"]]
        assert await watch.evaluate("window.samvadView.lines()") == expected
        assert [line for line in await shown_lines(watch) if line in expected] == expected

        # The barge-in: the unheard rest greyed, and the price that did not bind.
        turn4 = watch.locator('.line.vendor[data-key="4:vendor"]')
        assert await turn4.locator(".heard").inner_text() == again["text"][:cut] == heard["heard_text"]
        assert await turn4.locator(".unheard").inner_text() == again["text"][cut:]
        assert await turn4.locator(".unheard").evaluate("(n) => getComputedStyle(n).color") == "rgb(156, 163, 175)"
        assert await turn4.locator(".tag.quote.unbound").inner_text() == "quote ₹92 did not bind"
        barge = (await notes(watch, "heard"))[0]
        assert barge["unbound"] == "true" and "did not bind" in barge["text"] and "₹100" in barge["text"]
        assert final["vendor_quote"] == 100 and await watch.locator("#quote").inner_text() == "₹100"

        # Every flag on a reply, in the server's plain words, on that reply's line.
        flagged = [(r["turn"], flag) for r in of_type(played, "reply") if not r.get("mark") for flag in r["flags"]]
        assert (3, "quote_rise") in flagged
        for turn, flag in flagged:
            words = watch.locator(f'.line.vendor[data-turn="{turn}"] .flags li[data-flag="{flag}"]')
            assert FLAG_WORDS[flag] in await words.all_inner_texts()

        # The report: level, coaching counts, and each clamp with its explanation.
        learner = report["report"]
        counts = learner["coaching"]
        assert learner["level"] == "beginner"
        assert await watch.locator("#report .report-level").inner_text() == "Level: beginner"
        shown_counts = await watch.evaluate("""() => Object.fromEntries(
            [...document.querySelectorAll('#report .coaching-counts > div')]
                .map((n) => [n.dataset.field, Number(n.querySelector('dd').textContent)]))""")
        assert shown_counts == {
            "hints_0": counts["hints"][0], "hints_1": counts["hints"][1], "hints_2": counts["hints"][2],
            "hints_offered": counts["hints_offered"], "repeats": counts["repeats"], "undos": counts["undos"],
            "timeouts": counts["timeouts"], "unclear": counts["unclear"]}
        assert shown_counts == {"hints_0": 1, "hints_1": 1, "hints_2": 1, "hints_offered": 1, "repeats": 1,
                                "undos": 1, "timeouts": 1, "unclear": 1}
        clamps = watch.locator("#report .clamps li")
        assert await clamps.count() == len(learner["clamps"]) >= 1
        for shown_clamp, clamp in zip(await clamps.all_inner_texts(), learner["clamps"], strict=True):
            assert shown_clamp.endswith(clamp["explanation"]) and f"T{clamp['turn']}" in shown_clamp
        assert await watch.locator('#report .clamps li[data-flag="quote_rise"]').count() == 1
        view = await watch.evaluate("window.samvadView")
        assert view["resumes"] >= 1 and view["snapshots"] == 0
        assert sent_types(watch) == {"resume"}  # read-only: never a command, a transcript or a scene
        ARTIFACTS.mkdir(exist_ok=True)
        await watch.screenshot(path=str(ARTIFACTS / "watch-coaching.png"), full_page=True)
        assert watch.js_errors == []


async def test_coaching_notes_and_a_turn_taken_back_survive_a_snapshot(browser: Any) -> None:
    def haggle(request: BrainRequest) -> AIDecision:
        quote = 150 - 5 * request.turn
        return decision(f"Turn {request.turn}: {quote} se kam nahi.", 50, Stage.HAGGLING, counter_price=quote)

    async with running_server(brain=ScriptedBrain(haggle), SILENCE_TIMEOUT_MS=0, REPLAY_EVENTS=16) as served:
        created = await create(served, learner_id="kiran")
        watch = await open_watch(browser, host_of(served), created["session_id"], created["spectator_token"])
        await watch.wait_for_function("window.samvadView && window.samvadView.connected", timeout=WAIT_MS)
        async with await player(served, created) as c:
            await c.recv()
            await c.turn("t1", "Line 1, bhaiya")
            hint = await command(c, "h1", "hint", "hint")
            await c.turn("t2", "Line 2, bhaiya")
            undo = await command(c, "u1", "undo", "undo")
            await c.turn("t3", "Line 2 again, bhaiya")
            await wait_seq(watch, undo["seq"] + 1)
            before = await entry_keys(watch)

            await watch.evaluate("window.samvadView.dropSocket({holdMs: 1500})")
            await watch.wait_for_function("!window.samvadView.connected", timeout=WAIT_MS)
            for n in range(3, 12):  # more events than the 16 the server keeps for replay
                await c.turn(f"t{n + 1}", f"Line {n}, bhaiya")
            await watch.wait_for_function("window.samvadView.snapshots >= 1", timeout=WAIT_MS)
            final = await state(served, created["session_id"], created["player_token"])
            await wait_seq(watch, final["seq"])

        # What the page had seen stays, in its place; the lines it missed follow.
        keys = await entry_keys(watch)
        assert keys[:len(before)] == before
        assert f"note:{hint['seq']}" in keys and f"note:{undo['seq']}" in keys
        struck = await watch.locator(".line.undone .bubble").all_inner_texts()
        assert struck == ["Line 2, bhaiya", "Turn 2: 140 se kam nahi."]
        assert (await notes(watch, "hint"))[0]["hint"] == hint["text"]
        expected = [{"turn": t["turn"], "role": t["role"], "text": t["text"]} for t in final["transcript"]]
        assert await watch.evaluate("window.samvadView.lines()") == expected
        assert await watch.evaluate("window.samvadView.turnsShown") == final["turn"] == 11
        assert watch.js_errors == []
