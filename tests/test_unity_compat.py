"""The shipped Unity build's HTTP contract, `POST /api/test` (issue #17, docs/voice.md): its exact
requests, WAV header quirks included, answered in its shape by the same actor and rules."""

from __future__ import annotations

import base64
import struct
from typing import Any

import httpx
import pytest

from tests.openai_server import FakeOpenAI
from tests.servers import running_server
from tests.voice_support import speech_settings, tone, unity_wav

pytestmark = pytest.mark.anyio


def unity_request(pcm: bytes, **fields: Any) -> dict[str, Any]:
    """The build's `MinimalRequest`, as `JsonUtility.ToJson` writes it."""
    body = {"audioData": base64.b64encode(unity_wav(pcm)).decode(), "inputLanguage": "en",
            "targetLanguage": "hi", "object_grabbed": "general", "happiness_score": 50,
            "negotiation_state": "INITIAL"}
    body.update(fields)
    return body


UNITY_KEYS = {"reply", "replyEnglish", "audioReply", "negotiation_state", "happiness_score",
              "suggested_user_response", "suggested_user_response_english"}


async def test_the_shipped_unity_builds_requests_are_answered_in_its_shape(openai_fake: FakeOpenAI) -> None:
    async with running_server(**speech_settings(openai_fake)) as served, httpx.AsyncClient(
            base_url=served.base_url, timeout=10) as http:
        first = await http.post("/api/test", json=unity_request(tone(1.0), targetLanguage="en"))
        assert first.status_code == 200, first.text
        body = first.json()
        assert UNITY_KEYS <= set(body)
        assert isinstance(body["happiness_score"], int) and body["negotiation_state"]
        assert body["replyEnglish"] == body["reply"]  # he speaks English here
        assert body["suggested_user_response_english"]
        wav = base64.b64decode(body["audioReply"])
        assert wav[:4] == b"RIFF" and wav[8:16] == b"WAVEfmt " and wav[36:40] == b"data"
        assert struct.unpack_from("<H", wav, 22)[0] == 1 and struct.unpack_from("<I", wav, 24)[0] == 24_000
        assert struct.unpack_from("<I", wav, 40)[0] == len(wav) - 44
        # The state the build sends back is ignored; the same address is the same session.
        second = await http.post("/api/test", json=unity_request(tone(1.0), targetLanguage="en",
                                                                 object_grabbed="Tomato", happiness_score=0,
                                                                 negotiation_state="DEAL"))
        assert second.status_code == 200 and second.json()["negotiation_state"] != "DEAL"
        assert second.headers["x-samvad-session"] == first.headers["x-samvad-session"]
        sid = first.headers["x-samvad-session"]
        actor = await served.services.registry.get(sid)  # type: ignore[union-attr]
        assert actor is not None and actor.negotiation.turn == 2
        assert actor.negotiation.object_grabbed == "Tomato"
        # Another client, named by the documented header, gets its own session.
        other = await http.post("/api/test", json=unity_request(tone(1.0)), headers={"X-Samvad-Client": "hs-2"})
        assert other.headers["x-samvad-session"] != sid
        # Hindi as the target: the rule vendor's line from the pack's English pool fills replyEnglish.
        assert other.json()["replyEnglish"] and other.json()["replyEnglish"] == other.json()["reply"]


async def test_punjabi_is_mapped_not_a_crash(openai_fake: FakeOpenAI) -> None:
    async with running_server(**speech_settings(openai_fake, TTS="none")) as served, httpx.AsyncClient(
            base_url=served.base_url, timeout=10) as http:
        answer = await http.post("/api/test", json=unity_request(tone(0.5), inputLanguage="pa", targetLanguage="pa"))
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-samvad-language"] == "pa->hi-IN, pa->hi-IN"
        assert answer.json()["audioReply"] == ""  # this server cannot speak
        stt = [r for r in openai_fake.audio_requests if r["path"] == "transcriptions"]
        assert stt[-1]["language"] == "hi"


async def test_bad_unity_requests_get_documented_errors(openai_fake: FakeOpenAI) -> None:
    async with running_server(**speech_settings(openai_fake, TTS="none", MAX_AUDIO_CLIP_BYTES=8192)) as served, \
            httpx.AsyncClient(base_url=served.base_url, timeout=10) as http:
        assert (await http.post("/api/test", content=b"{")).json()["error"]["code"] == "invalid"
        big = await http.post("/api/test", json=unity_request(tone(1.0)))
        assert big.status_code == 413 and big.json()["error"]["code"] == "audio_too_large"
        junk = await http.post("/api/test", json={"audioData": base64.b64encode(b"x" * 100).decode()})
        assert junk.status_code == 422 and junk.json()["error"]["code"] == "audio_unsupported"
    assert openai_fake.audio_requests == []


async def test_with_the_llm_brain_reply_english_is_the_models_own_translation(openai_fake: FakeOpenAI) -> None:
    """The prompt asks for `reply_text_english` (and the suggestion's English); the endpoint passes
    them on when the vendor speaks Hindi, where the original build always got them empty."""
    from brain.llm import OpenAIBrain
    from tests.llm_support import FAST
    from tests.llm_support import decision as llm_decision
    from tests.openai_server import reply as scripted_reply

    said = "Namaste ji, aaiye! Aaj tamatar bahut taaze hain."
    english = "Namaste, come in! The tomatoes are very fresh today."
    openai_fake.script(scripted_reply(llm_decision(
        said, reply_text_english=english, suggested_user_response="Bhaiya, ek kilo kitne ka hai?",
        suggested_user_response_english="Brother, how much for one kilo?")))
    brain = OpenAIBrain(api_key="sk-test", base_url=openai_fake.base_url, backoff=FAST, timeout_ms=5000)
    async with running_server(brain=brain, **speech_settings(openai_fake, TTS="none")) as served, \
            httpx.AsyncClient(base_url=served.base_url, timeout=10) as http:
        answer = await http.post("/api/test", json=unity_request(tone(1.0), targetLanguage="hi"))
        assert answer.status_code == 200, answer.text
        body = answer.json()
    assert body["reply"] == said and body["replyEnglish"] == english
    assert body["suggested_user_response_english"] == "Brother, how much for one kilo?"
    assert any("reply_text_english" in r.system for r in openai_fake.requests), "the prompt asks for it"


async def test_with_device_keys_the_key_picks_the_session_and_nothing_the_caller_invents_does(
        openai_fake: FakeOpenAI) -> None:
    keys = {"headset-1": "k1-" + "a" * 32, "headset-2": "k2-" + "b" * 32}
    devices = ",".join(f"{d}:{k}" for d, k in keys.items())
    async with running_server(**speech_settings(openai_fake, TTS="none", UNITY_DEVICE_KEYS=devices)) as served, \
            httpx.AsyncClient(base_url=served.base_url, timeout=10) as http:
        nobody = await http.post("/api/test", json=unity_request(tone(0.5)))
        assert nobody.status_code == 401 and nobody.json()["error"]["code"] == "unauthorized"
        wrong = await http.post("/api/test", json=unity_request(tone(0.5)), headers={"authorization": "Bearer x" * 3})
        assert wrong.status_code == 401
        one = {"authorization": f"Bearer {keys['headset-1']}"}
        first = await http.post("/api/test", json=unity_request(tone(0.5)), headers=one)
        assert first.status_code == 200, first.text
        # Another address or an invented client header changes nothing: the key is the device.
        again = await http.post("/api/test", json=unity_request(tone(0.5)),
                                headers={**one, "X-Samvad-Client": "someone-else"})
        assert again.headers["x-samvad-session"] == first.headers["x-samvad-session"]
        # The client header alone no longer reaches headset 1's session, and headset 2 has its own.
        assert (await http.post("/api/test", json=unity_request(tone(0.5)),
                                headers={"X-Samvad-Client": "device:headset-1"})).status_code == 401
        two = await http.post("/api/test", json=unity_request(tone(0.5)),
                              headers={"authorization": f"Bearer {keys['headset-2']}"})
        assert two.status_code == 200 and two.headers["x-samvad-session"] != first.headers["x-samvad-session"]
    # Paid speech recognition ran for the three requests with a device's key only.
    assert len([r for r in openai_fake.audio_requests if r["path"] == "transcriptions"]) == 3


async def test_production_keeps_the_route_off_unless_enabled(openai_fake: FakeOpenAI) -> None:
    production = {"SAMVAD_ENV": "production", "ADMIN_KEY": "a" * 32}
    async with running_server(**speech_settings(openai_fake, TTS="none", **production)) as served, \
            httpx.AsyncClient(base_url=served.base_url, timeout=10) as http:
        off = await http.post("/api/test", json=unity_request(tone(0.5)))
        assert off.status_code == 404 and off.json()["error"]["code"] == "not_found"
    key = "d" * 32
    async with running_server(**speech_settings(openai_fake, TTS="none", UNITY_TEST_ROUTE=True,
                                                UNITY_DEVICE_KEYS=f"hs:{key}", **production)) as served, \
            httpx.AsyncClient(base_url=served.base_url, timeout=10) as http:
        assert (await http.post("/api/test", json=unity_request(tone(0.5)))).status_code == 401
        on = await http.post("/api/test", json=unity_request(tone(0.5)), headers={"authorization": f"Bearer {key}"})
        assert on.status_code == 200, on.text
    assert len([r for r in openai_fake.audio_requests if r["path"] == "transcriptions"]) == 1  # the keyed one
