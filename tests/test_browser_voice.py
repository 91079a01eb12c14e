"""The watch page shows the learner's spoken turns (issue #17) in a real headless Chromium: a level
meter from the `speech` event's levels, the words heard and the confidence, an unclear one marked.
The player speaks over a real socket to a server whose recogniser is the fake OpenAI server."""

from __future__ import annotations

import base64
import math
from array import array
from typing import Any

import pytest

from tests.browser_support import ARTIFACTS, WAIT_MS, open_watch
from tests.openai_server import Behaviour, FakeOpenAI
from tests.servers import client, create, running_server

pytestmark = [pytest.mark.browser, pytest.mark.anyio, pytest.mark.usefixtures("collect_servers")]


def tone(seconds: float) -> bytes:
    n = int(seconds * 16_000)
    return array("h", (int(9000 * math.sin(2 * math.pi * 300 * i / 16_000) * (i / n)) for i in range(n))).tobytes()


async def speak(c: Any, frame_id: str, seconds: float) -> None:
    pcm = tone(seconds)
    await c.send({"type": "audio", "id": frame_id, "event": "start", "format": "pcm16"})
    for i in range(0, len(pcm), 8000):
        data = base64.b64encode(pcm[i:i + 8000]).decode()
        await c.send({"type": "audio", "id": frame_id, "event": "chunk", "data": data})
    await c.send({"type": "audio", "id": frame_id, "event": "end"})
    await c.until("reply", in_reply_to=frame_id)


async def test_spoken_turns_show_a_level_meter_and_the_transcript_with_its_confidence(
        browser: Any, openai_fake: FakeOpenAI) -> None:
    openai_fake.stt_queue.extend([Behaviour(content="Namaste bhaiya, tamatar kitne ka hai?", confidence=0.92),
                                  Behaviour(content="sattar mein", confidence=0.41)])
    settings = {"STT": "openai", "TTS": "none", "SPEECH_API_KEY": "sk-test", "SPEECH_BASE_URL": openai_fake.base_url,
                "SILENCE_TIMEOUT_MS": 0}
    async with running_server(**settings) as served:
        created = await create(served)
        host = served.base_url.removeprefix("http://")
        page = await open_watch(browser, host, created["session_id"], created["spectator_token"])
        await page.wait_for_function("window.samvadView && samvadView.connected", timeout=WAIT_MS)
        async with client(served.ws_url(created["session_id"], created["player_token"])) as c:
            await c.until("welcome")
            await speak(c, "v1", 1.5)
            await speak(c, "v2", 0.8)
        await page.wait_for_function("document.querySelectorAll('#speech .speech').length === 2", timeout=WAIT_MS)
        cards = await page.evaluate("""[...document.querySelectorAll('#speech .speech')].map((n) => ({
            ...n.dataset, text: n.querySelector('.speech-text').textContent,
            confidence: n.querySelector('.confidence').textContent, unclear: n.classList.contains('unclear'),
            bars: n.querySelectorAll('svg.level-meter rect').length,
            tallest: Math.max(...[...n.querySelectorAll('rect')].map((r) => +r.getAttribute('height')))}))""")
        assert [c["id"] for c in cards] == ["v2", "v1"]  # newest first
        assert cards[1]["text"] == "“Namaste bhaiya, tamatar kitne ka hai?”" and cards[1]["confidence"] == "92% sure"
        assert cards[1]["bars"] == 30 and cards[1]["tallest"] > 12 and not cards[1]["unclear"]
        assert cards[0]["confidence"] == "41% sure" and cards[0]["unclear"] and cards[0]["bars"] == 16
        assert await page.is_visible("#voice-panel")
        ARTIFACTS.mkdir(exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "voice-panel.png"), full_page=True)


async def test_the_watch_page_moves_rameshs_mouth_with_his_voice(browser: Any) -> None:
    """Issue #38: with `voice=1` the watch page hears Ramesh (espeak-ng, the embedded voice) and its
    mouth and viseme strip change with his visemes on the audio clock."""
    from tests.browser_support import new_page
    from tests.ci import need_tools
    from tests.fakes import ScriptedBrain, decision

    need_tools("espeak-ng", install="apt-get install espeak-ng (scripts/test.sh does)")
    line = "Namaste ji! These tomatoes are fresh from the farm, only sixty rupees a kilo."
    brain = ScriptedBrain(lambda r: decision(line, 50, r.stage))
    async with running_server(brain=brain, TTS="espeak", STT="none", SILENCE_TIMEOUT_MS=0) as served:
        created = await create(served)
        host = served.base_url.removeprefix("http://")
        page = await new_page(browser)
        await page.goto(f"http://{host}/view/watch.html?session={created['session_id']}"
                        f"&token={created['spectator_token']}&voice=1")
        await page.wait_for_function("window.samvadView && samvadView.connected", timeout=WAIT_MS)
        await page.click("#hear")  # browsers start audio only after a click
        async with client(served.ws_url(created["session_id"], created["player_token"])) as c:
            await c.until("welcome")
            await c.send({"type": "transcript", "id": "t1", "text": "Namaste bhaiya"})
            await c.until("reply", in_reply_to="t1")
            await page.wait_for_function(
                "+document.getElementById('mouth-panel').dataset.changes >= 6", timeout=WAIT_MS)
        mouth = await page.evaluate("({...document.getElementById('mouth-panel').dataset})")
        assert mouth["source"] == "espeak"
        assert len(mouth["seen"].split()) >= 4, mouth  # several shapes, not one flapping jaw
        assert page.js_errors == []
        ARTIFACTS.mkdir(exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "mouth-panel.png"), full_page=True)


async def test_an_open_microphone_turn_shows_its_partial_the_end_of_turn_marker_and_its_voice_pipeline(
        browser: Any, openai_fake: FakeOpenAI) -> None:
    """Issue #34: open-microphone audio streamed to the player socket; the watch page shows the turn's
    partial ("hearing…") and, when the turn's `speech` comes, a card marked as the turn's end with the
    server's wait, and the turn's voice pipeline from the server's figures."""
    from tests.ci import need_tools
    from tests.turn_set import piece
    from tests.voice_support import speech_settings
    from voice.open_mic import BYTES_PER_MS

    need_tools("espeak-ng", install="apt-get install espeak-ng (scripts/test.sh does)")
    stream = (b"\0" * (400 * BYTES_PER_MS) + piece("How much are the tomatoes?", "en-us", 150)
              + b"\0" * (500 * BYTES_PER_MS) + piece("I will give you forty rupees.", "en-us", 150))
    async with running_server(**speech_settings(openai_fake)) as served:
        created = await create(served)
        host = served.base_url.removeprefix("http://")
        page = await open_watch(browser, host, created["session_id"], created["spectator_token"])
        await page.wait_for_function("window.samvadView && samvadView.connected", timeout=WAIT_MS)
        async with client(served.ws_url(created["session_id"], created["player_token"]) + "&voice=1") as c:
            await c.until("welcome")
            await c.send({"type": "audio", "id": "mic", "event": "open", "format": "pcm16"})
            for at in range(0, len(stream), 6400):
                await c.send({"type": "audio", "id": "mic", "event": "chunk",
                              "data": base64.b64encode(stream[at:at + 6400]).decode()})
            await c.until("speech.partial", id="mic.1", wait=20)
            # The learner is still mid-turn (no long silence yet): the page shows what was heard so far.
            await page.wait_for_selector("#speech .speech.partial[data-id='mic.1']", timeout=WAIT_MS)
            hearing = await page.text_content("#speech .speech.partial .speech-text")
            assert hearing is not None and hearing.startswith("hearing…")
            assert await page.query_selector("#speech .turn-end") is None
            silence = b"\0" * (2000 * BYTES_PER_MS)
            for at in range(0, len(silence), 6400):
                await c.send({"type": "audio", "id": "mic", "event": "chunk",
                              "data": base64.b64encode(silence[at:at + 6400]).decode()})
            reply = await c.until("reply", in_reply_to="mic.1", wait=20)
            heard = next(f for f in c.seen if f["type"] == "speech" and f["id"] == "mic.1")
            while not (audio := await c.until("reply.audio", wait=20, turn=reply["turn"]))["data"] or audio["filler"]:
                pass  # the reply's own first sound, not a thinking sound
            await c.send({"type": "audio", "id": "mic", "event": "close"})
        await page.wait_for_selector("#speech .speech[data-id='mic.1'] .turn-end", timeout=WAIT_MS)
        marker = await page.evaluate("""(() => { const n = document.querySelector('#speech .turn-end');
            return { text: n.textContent, ...n.dataset,
                     partialShown: !!document.querySelector('#speech .speech.partial') }; })()""")
        assert marker["text"].startswith("⏹ turn ended") and int(marker["partials"]) >= 1
        assert not marker["partialShown"]
        # The marker reads the server's wait, not the browser's clock.
        # (The fake hears a question, a finished sentence: the shorter wait, 400 ms for this level.)
        assert float(marker["waitMs"]) == heard["end_of_turn_ms"] >= 400
        assert f"after {heard['end_of_turn_ms'] / 1000:.2f} s of silence" in marker["text"]
        # The pipeline: every stage, each the server's own figure.
        await page.wait_for_selector("#speech .speech[data-id='mic.1'] .pipeline li[data-stage='first_audio']",
                                     timeout=WAIT_MS)
        stages = await page.evaluate("""Object.fromEntries([...document.querySelectorAll(
            "#speech .speech[data-id='mic.1'] .pipeline li")].map((n) => [n.dataset.stage, +n.dataset.ms]))""")
        timings, spoken = reply["timings"], audio["timings"]
        assert stages == {"end_of_turn": heard["end_of_turn_ms"], "stt": heard["stt_ms"],
                          "brain": timings["first_delta_ms"] or timings["total_ms"],
                          "tts": spoken["tts_first_byte_ms"], "first_audio": spoken["first_audio_ms"]}
        assert page.js_errors == []
        ARTIFACTS.mkdir(exist_ok=True)
        await page.screenshot(path=str(ARTIFACTS / "voice-turn-end.png"), full_page=True)
