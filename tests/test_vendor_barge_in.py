"""Barge-in on the open microphone, decided on the server (issue #34, docs/voice.md "Barge-in on
the server"): a short run over the vendor is a backchannel and never a turn, a long one interrupts
him and becomes the learner's turn, and over a real socket his audio stops only for the latter."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.anyio


def _mic() -> Any:
    from schemas.enums import Level
    from schemas.scenario import load_scenario
    from tests.test_open_mic import LoudIsSpeech
    from voice.barge_in import BargeIn
    from voice.open_mic import OpenMic
    from voice.turn_end import EndOfTurn
    from voice.turn_words import TurnWords

    words = TurnWords.of(load_scenario("jaipur-bazaar"))
    return OpenMic("mic", LoudIsSpeech(), EndOfTurn(words, Level.ADVANCED), max_turn_ms=30_000,
                   barge_in=BargeIn(words, streaming=False))


def test_over_the_vendor_a_short_run_is_a_backchannel_and_never_a_turn() -> None:
    from tests.test_open_mic import audio
    from voice.open_mic import BargedIn, Finished, Heard

    mic = _mic()
    events = mic.feed(audio((False, 300), (True, 400), (False, 600)), vendor_speaking=True)
    events += mic.feed(audio((False, 3000)), vendor_speaking=False)  # he finished meanwhile
    assert [(type(e), getattr(e, "interrupt", None)) for e in events] == [(BargedIn, False)]
    assert not any(isinstance(e, (Heard, Finished)) for e in events) and mic.turns == 0
    # The same run with the vendor quiet is a turn, as before.
    quiet = _mic()
    later = quiet.feed(audio((False, 300), (True, 400), (False, 3000)))
    assert any(isinstance(e, Finished) for e in later) and not any(isinstance(e, BargedIn) for e in later)


def test_over_the_vendor_a_long_run_interrupts_him_and_goes_on_as_a_turn() -> None:
    from tests.test_open_mic import audio
    from voice.open_mic import BargedIn, Finished

    mic = _mic()
    events = mic.feed(audio((False, 300), (True, 1400)), vendor_speaking=True)
    barged = [e for e in events if isinstance(e, BargedIn)]
    assert len(barged) == 1 and barged[0].interrupt and barged[0].utterance_id == "mic.1"
    assert 900 <= barged[0].at_ms - barged[0].start_ms < 1000 and abs(barged[0].start_ms - 300) < 40
    events = mic.feed(audio((False, 3000)), vendor_speaking=False)  # stopped: the run is a turn
    finished = [e for e in events if isinstance(e, Finished)]
    assert len(finished) == 1 and finished[0].utterance_id == "mic.1" and len(finished[0].pcm) > 1400 * 32


def test_a_backchannel_run_just_before_an_interruption_is_the_start_of_its_turn() -> None:
    """Without the recogniser's text, "Wait," and its comma's pause read as a backchannel; the
    interruption that follows within a second keeps its audio, so the turn's words start with it."""
    from tests.test_open_mic import audio
    from voice.open_mic import BargedIn, Finished

    mic = _mic()
    events = mic.feed(audio((False, 300), (True, 400), (False, 400), (True, 1400)), vendor_speaking=True)
    assert [e.interrupt for e in events if isinstance(e, BargedIn)] == [False, True]
    finished = [e for e in mic.feed(audio((False, 3000))) if isinstance(e, Finished)]
    assert len(finished) == 1 and len(finished[0].pcm) >= (400 + 400 + 1400) * 32
    # A second later it is not: the turn starts at its own speech.
    late = _mic()
    late.feed(audio((False, 300), (True, 400), (False, 1600), (True, 1400)), vendor_speaking=True)
    alone = [e for e in late.feed(audio((False, 3000))) if isinstance(e, Finished)]
    assert len(alone) == 1 and len(alone[0].pcm) < (1400 + 1200) * 32  # its speech, pre-roll and wait


def test_a_short_run_the_recogniser_heard_words_in_is_promoted_to_a_turn() -> None:
    """"Bhaiya, suno." is short like a backchannel; its audio comes with the verdict, and when the
    recogniser hears words that are not backchannels the run becomes a turn, once."""
    from tests.test_open_mic import audio
    from voice.open_mic import BargedIn

    mic = _mic()
    events = mic.feed(audio((False, 300), (True, 500), (False, 300)), vendor_speaking=True)
    (barged,) = [e for e in events if isinstance(e, BargedIn)]
    assert not barged.interrupt and len(barged.pcm) >= 500 * 32
    finished = mic.promote(barged.start_ms)
    assert finished is not None and finished.utterance_id == "mic.1" and len(finished.pcm) == len(barged.pcm)
    assert mic.promote(barged.start_ms) is None and mic.turns == 1


def test_a_click_over_the_vendor_is_nothing() -> None:
    from tests.test_open_mic import audio
    from voice.open_mic import Finished

    mic = _mic()
    events = mic.feed(audio((False, 300), (True, 60), (False, 3000)), vendor_speaking=True)
    assert events == [] and not any(isinstance(e, Finished) for e in events)


LONG_LINE = ("Arre bhaiya, these are the best tomatoes in Jaipur. Fresh from the farm this morning! "
             "For you, sixty rupees a kilo.")


async def _stream(c: Any, stream_id: str, pcm: bytes, pace: float = 2.0) -> None:
    """An open microphone's audio, in 200 ms chunks at `pace` times real time (within the rate limit)."""
    import base64

    step = 6400
    for at in range(0, len(pcm), step):
        await c.send({"type": "audio", "id": stream_id, "event": "chunk",
                      "data": base64.b64encode(pcm[at:at + step]).decode()})
        await anyio.sleep(0.2 / pace)


async def test_over_the_socket_backchannels_let_him_speak_and_interruptions_stop_him(openai_fake: Any) -> None:
    """The labelled set's backchannels and interruptions (tests/turn_set.py), said over the vendor
    into an open microphone of a live server whose recogniser hears what was said: a backchannel is
    no turn and stops nothing; an interruption, long or short ("Bhaiya, suno."), stops his audio,
    is reported as `heard`, and becomes the learner's turn."""
    from tests.ci import need_tools
    from tests.fakes import ScriptedBrain, decision
    from tests.servers import create, running_server
    from tests.test_voice import voiced
    from tests.turn_set import load_cases, render
    from tests.voice_support import speech_settings

    need_tools("espeak-ng", install="apt-get install espeak-ng")
    cases = load_cases()
    backchannels = [c for c in cases if c.kind == "backchannel"][::6]  # 10, both languages, every voice
    interrupts = [c for c in cases if c.id in ("interrupt-000", "interrupt-009", "interrupt-017", "interrupt-022")]
    brain = ScriptedBrain(lambda r: decision(LONG_LINE, 50, r.stage))
    stopped: list[str] = []
    async with running_server(brain=brain, **speech_settings(openai_fake, THINKING_SOUND_AFTER_MS=0)) as served:
        created = await create(served)
        async with voiced(served, created) as c:
            await c.until("welcome")
            await c.send({"type": "audio", "id": "mic", "event": "open", "format": "pcm16"})
            for n, case in enumerate(backchannels):
                reply = (await c.turn(f"t{n}", "Namaste bhaiya"))[0]
                if not any(f["type"] == "reply.audio" and f["turn"] == reply["turn"] for f in c.seen):
                    await c.until("reply.audio", turn=reply["turn"])
                mark = len(c.seen)
                openai_fake.stt_text = " ".join(case.pieces)  # a recogniser that hears what was said
                await _stream(c, "mic", render(case)[0])
                await c.quiet(0.6)
                after = c.seen[mark:]
                if any(f["type"] == "heard" for f in after):
                    stopped.append(case.id)
                    while not any(f["type"] == "reply" and f["in_reply_to"].startswith("mic.") for f in c.seen[mark:]):
                        await c.recv(10)  # it went on as a turn: let it be answered
                    continue
                assert not [f for f in after if f["type"] in ("speech", "speech.partial")]  # never a turn
                assert [f for f in after if f["type"] == "reply.audio" and f["turn"] == reply["turn"]]  # he went on
            # Length alone stops him only past 1.5 s; the set's slowest backchannel lasts 1.15 s.
            assert not stopped
            for n, case in enumerate(interrupts):
                turn = (await c.until("reply", wait=10))["turn"] if n else (await c.turn("ti", "Accha"))[0]["turn"]
                await c.until("reply.audio", turn=turn, wait=10)
                openai_fake.stt_text = " ".join(case.pieces)
                await _stream(c, "mic", render(case)[0], pace=1.0)  # at its pace: what was heard is timed
                heard = await c.until("heard", turn=turn, wait=10)
                assert heard["interrupted"] and heard["in_reply_to"].endswith(".barge")
                # The first words, at most: he was cut off early in his line (the count: test_the_playout_...).
                assert heard["heard_chars"] < len(LONG_LINE) // 2 and LONG_LINE.startswith(heard["heard_text"])
                speech = await c.until("speech", wait=10)  # the interruption is the learner's next turn
                assert speech["id"] == heard["in_reply_to"].removesuffix(".barge")
                at = c.seen.index(heard)
                assert not [f for f in c.seen[at:] if f["type"] == "reply.audio" and f["turn"] == turn]
