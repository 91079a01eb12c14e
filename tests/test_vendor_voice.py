"""The vendor's voice overlapping the pipeline (issue #34, docs/voice.md): the first clause is spoken
before its sentence is whole, a thinking sound fills a late reply, and the server follows the
client's loudspeaker so that it can decide a barge-in itself."""

from __future__ import annotations

from typing import Any

import anyio
import hypothesis.strategies as st
import pytest
from hypothesis import given

from schemas.frames import Reply, ReplyAudio, ReplyDelta
from tests.voice_support import RecordingTts
from voice.playout import LATENCY_S, Playout
from voice.sentences import SentenceSplitter, split_sentences
from voice.speaker import FIRST_CLAUSE_WORDS, FillerClip, Speaker

pytestmark = pytest.mark.anyio


def test_the_first_piece_is_a_clause_once_it_has_enough_words_then_sentences() -> None:
    assert split_sentences("Dekhiye bhaiya aap ke liye, sirf 1,200 rupaye; kal aana. Haan.", 4) == [
        "Dekhiye bhaiya aap ke liye,", "sirf 1,200 rupaye; kal aana.", "Haan."]
    # Too short a clause is not cut ("Arre bhaiya," alone sounds clipped); a price's comma is no clause.
    assert split_sentences("Arre bhaiya, these are fresh. Ok, fine, very fine.", 4) == [
        "Arre bhaiya, these are fresh.", "Ok, fine, very fine."]
    assert split_sentences("Namaste ji, welcome to my stall!", 0) == ["Namaste ji, welcome to my stall!"]
    streamed = SentenceSplitter(4)
    assert streamed.feed("Ye sabse acche tamatar hain") == []
    assert streamed.feed(",") == []  # a comma at the end of what came so far may be a price's
    assert streamed.feed(" bilkul taaze, aaj ke.") == ["Ye sabse acche tamatar hain,"]
    assert streamed.flush() == "bilkul taaze, aaj ke."  # after the first, commas cut no more
    assert split_sentences("यह सबसे अच्छे टमाटर हैं, साठ रुपये।", 4) == ["यह सबसे अच्छे टमाटर हैं,", "साठ रुपये।"]


words = st.sampled_from(["bhaiya", "ji", "tamatar", "sixty", "1,200", "rupees", "ok", "haan", "—", "-", "very"])
marks = st.sampled_from(["", "", "", ",", ";", ":", ".", "!", "?", "…"])


@given(st.lists(st.tuples(words, marks), min_size=1, max_size=40), st.integers(0, 6),
       st.lists(st.integers(1, 12), max_size=10))
def test_pieces_are_the_texts_own_words_in_order_however_it_streams(
        tokens: list[tuple[str, str]], first: int, cuts: list[int]) -> None:
    """Nothing is spoken that the text lacks, and nothing of it is lost: joined with a space the
    pieces are the text, however its deltas were cut."""
    text = " ".join(w + m for w, m in tokens)
    splitter = SentenceSplitter(first)
    pieces: list[str] = []
    at = 0
    for n in cuts:
        pieces += splitter.feed(text[at:at + n])
        at += n
    pieces += splitter.feed(text[at:])
    rest = splitter.flush()
    pieces += [rest] if rest else []
    assert " ".join(pieces) == text.strip()
    assert pieces == split_sentences(text, first)


def _reply(turn: int, text: str) -> Reply:
    return Reply(session_id="s", seq=turn, turn=turn, text=text, happiness_score=50, negotiation_state="GREETING",
                 vendor_mood="neutral", counter_price=None, suggested_user_response="", is_terminal=False)


async def test_the_speaker_speaks_the_first_clause_of_a_streamed_reply_before_its_sentence_ends() -> None:
    tts, sent = RecordingTts(800), list[ReplyAudio]()
    speaker = Speaker(tts, sent.append, "s", lambda: "hi-EN")
    line = "Dekhiye bhaiya, yeh sabse acche tamatar hain, bilkul taaze. Saath rupaye kilo."
    async with anyio.create_task_group() as tg:
        tg.start_soon(speaker.run)
        speaker.observe(ReplyDelta(session_id="s", turn=1, text="Dekhiye bhaiya, yeh sabse acche tamatar hain, "))
        await anyio.sleep(0.05)
        assert tts.said == ["Dekhiye bhaiya, yeh sabse acche tamatar hain,"]  # before the sentence ended
        speaker.observe(ReplyDelta(session_id="s", turn=1, text="bilkul taaze. Saath rupaye kilo.", end=True))
        speaker.observe(_reply(1, line))
        await anyio.sleep(0.05)
        speaker.close()
    assert tts.said == ["Dekhiye bhaiya, yeh sabse acche tamatar hain,", "bilkul taaze.", "Saath rupaye kilo."]
    firsts = [e for e in sent if e.chunk == 0 and e.text]
    assert [e.sentence for e in firsts] == [0, 1, 2] and " ".join(e.text for e in firsts) == line
    assert sent[-1].final and FIRST_CLAUSE_WORDS == 4


def _gated(line: str, step: int = 4) -> list[str]:
    """What the reply gate (session/spoken.py) lets out of `line` streamed `step` characters at a
    time, piece by piece, as the session sends its `reply.delta`s."""
    from session.spoken import ReplyGate, _no_numbers

    gate = ReplyGate(_no_numbers, _no_numbers)
    out = [gate.feed(line[at:at + step]) for at in range(0, len(line), step)] + [gate.finish()]
    return [piece for piece in out if piece]


async def test_the_first_clause_is_synthesized_while_the_gate_still_holds_its_mark() -> None:
    line = "Haan ji, everything here is fresh from the farm today; tell me what you need. Saath rupaye kilo."
    pieces = _gated(line)
    # The gate releases the clause and keeps its ";" for the next one: the splitter cannot cut yet.
    assert pieces[:2] == ["Haan ji", ", everything here is fresh from the farm today"]
    tts, sent = RecordingTts(800), list[ReplyAudio]()
    speaker = Speaker(tts, sent.append, "s", lambda: "en-IN")
    async with anyio.create_task_group() as tg:
        tg.start_soon(speaker.run)
        for n, piece in enumerate(pieces):
            speaker.observe(ReplyDelta(session_id="s", turn=1, text=piece, end=n == len(pieces) - 1))
            await anyio.sleep(0.02)
            if n == 1:  # asked for with a comma before its mark came; nothing of it sent yet
                assert tts.said == ["Haan ji, everything here is fresh from the farm today,"] and sent == []
        speaker.observe(_reply(1, "".join(pieces)))
        await anyio.sleep(0.05)
        speaker.close()
    assert "".join(pieces) == line
    # Spoken from that audio, once: the piece's text is the reply's own, with its ";".
    assert tts.said == ["Haan ji, everything here is fresh from the farm today,", "tell me what you need.",
                        "Saath rupaye kilo."]
    firsts = [e for e in sent if e.chunk == 0 and e.text]
    assert firsts[0].text == "Haan ji, everything here is fresh from the farm today;"
    assert " ".join(e.text for e in firsts) == line and speaker.ahead == 1


async def test_a_first_piece_synthesized_ahead_that_the_words_outgrow_is_dropped_unheard() -> None:
    tts, sent = RecordingTts(800), list[ReplyAudio]()
    speaker = Speaker(tts, sent.append, "s", lambda: "en-IN")
    async with anyio.create_task_group() as tg:
        tg.start_soon(speaker.run)
        await anyio.sleep(0.01)  # its task has started
        speaker.observe(ReplyDelta(session_id="s", turn=1, text="Look at these fine red"))  # not a clause end
        await anyio.sleep(0.02)
        speaker.observe(ReplyDelta(session_id="s", turn=1, text=" tomatoes, bhaiya. Sixty rupees.", end=True))
        speaker.observe(_reply(1, "Look at these fine red tomatoes, bhaiya. Sixty rupees."))
        await anyio.sleep(0.05)
        speaker.close()
    assert tts.said[0] == "Look at these fine red,"  # asked ahead, and dropped: the clause went on
    assert [e.text for e in sent if e.chunk == 0 and e.text] == ["Look at these fine red tomatoes,", "bhaiya.",
                                                                  "Sixty rupees."]
    assert speaker.ahead == 0


FIRST = "Haan ji, everything here is fresh from the farm today"
LINE = FIRST + "; tell me what you need. Saath rupaye kilo."


async def _preview_then(speaker: Speaker, prepared: list[str], then: Any) -> None:
    """The speculative call's words shown to `speaker` (`prepare`, turn 1), then `then(speaker)`."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(speaker.run)
        await anyio.sleep(0.01)  # its task has started
        for words in prepared:
            speaker.prepare(1, words)
        await anyio.sleep(0.02)
        await then(speaker)
        await anyio.sleep(0.05)
        speaker.close()


async def _gated_reply(speaker: Speaker, line: str = LINE) -> None:
    pieces = _gated(line)
    for n, piece in enumerate(pieces):
        speaker.observe(ReplyDelta(session_id="s", turn=1, text=piece, end=n == len(pieces) - 1))
        await anyio.sleep(0.01)
    speaker.observe(_reply(1, "".join(pieces)))


async def test_a_speculative_calls_first_clause_is_synthesized_before_the_turn_and_spoken_once_taken() -> None:
    tts, sent = RecordingTts(800), list[ReplyAudio]()
    speaker = Speaker(tts, sent.append, "s", lambda: "en-IN")
    before: list[str] = []

    async def taken(sp: Speaker) -> None:
        before.extend(tts.said)
        assert sent == []  # synthesized, and nothing sent: the turn is not taken
        await _gated_reply(sp)

    # The brain's words as they stream: the clause is whole once its ";" and the next word came.
    await _preview_then(speaker, [LINE[:20], LINE[:len(FIRST) + 1], LINE[:len(FIRST) + 6]], taken)
    assert before == [FIRST + ","]
    # Asked once, before the turn; the reply spoke from that audio, with its own text.
    assert tts.said == [FIRST + ",", "tell me what you need.", "Saath rupaye kilo."] and speaker.ahead == 1
    assert [e.text for e in sent if e.chunk == 0 and e.text] == [FIRST + ";", "tell me what you need.",
                                                                  "Saath rupaye kilo."]


async def test_a_cancelled_speculations_first_clause_is_never_heard() -> None:
    tts, sent = RecordingTts(800), list[ReplyAudio]()
    speaker = Speaker(tts, sent.append, "s", lambda: "en-IN")
    other = "Onions? The best in Jaipur, ji, fresh and sweet, sixty a kilo."

    async def cancelled(sp: Speaker) -> None:
        sp.forget(1)  # the learner went on: the speculation was cancelled
        await anyio.sleep(0.02)
        assert sent == []
        await _gated_reply(sp, other)  # the turn's own call, same turn number, other words

    await _preview_then(speaker, [LINE], cancelled)
    assert tts.said[0] == FIRST + ","  # asked ahead, then let go unheard
    assert " ".join(e.text for e in sent if e.chunk == 0 and e.text) == other
    assert not any("farm" in e.text for e in sent)


async def test_a_speculative_first_clause_the_gate_changes_is_dropped_for_the_replys_own() -> None:
    tts, sent = RecordingTts(800), list[ReplyAudio]()
    speaker = Speaker(tts, sent.append, "s", lambda: "en-IN")
    raw = LINE.replace("fresh", "*fresh*")  # the brain's words; the gate takes the markup out

    async def taken(sp: Speaker) -> None:
        await _gated_reply(sp, raw)

    await _preview_then(speaker, [raw], taken)
    assert tts.said[:2] == [FIRST.replace("fresh", "*fresh*") + ",", FIRST + ","]  # the preview, then the reply's
    assert next(e.text for e in sent if e.chunk == 0 and e.text) == FIRST + ";"
    assert speaker.ahead == 1 and not any("*" in e.text for e in sent)


async def test_a_filler_goes_only_before_the_replys_first_audio_and_once_a_turn() -> None:
    tts, sent = RecordingTts(800), list[ReplyAudio]()
    clock = [100.0]
    speaker = Speaker(tts, sent.append, "s", lambda: "hi-EN")
    speaker.clock = lambda: clock[0]
    clip = FillerClip("Hmm...", b"\x02\x00" * 4000, 8000, "fake", ((0, 0), (500, 0)), "espeak")
    async with anyio.create_task_group() as tg:
        tg.start_soon(speaker.run)
        assert speaker.filler(1, clip)
        assert not speaker.filler(1, clip)  # once a turn
        speaker.observe(_reply(1, "Haan ji, saath rupaye."))
        await anyio.sleep(0.05)
        clock[0] = 200.0  # long after it all played
        assert not speaker.filler(1, clip)  # the reply's audio went: never after it
        assert speaker.filler(2, clip, visemes=False)
        speaker.close()
    filler = sent[0]
    assert isinstance(filler, ReplyAudio) and filler.filler and filler.sentence == -1 and filler.text == ""
    assert filler.data == clip.pcm and filler.visemes == clip.visemes and not filler.final
    assert {e.sentence for e in sent[1:-1]} == {0} and not any(e.filler for e in sent[1:-1])
    assert sent[-1].filler and sent[-1].visemes == () and sent[-1].visemes_source == ""
    assert speaker.fillers == 2


def test_a_thinking_sound_is_due_after_the_learners_last_word_and_never_before_the_turn_is_taken() -> None:
    from voice.fillers import sound_at

    assert sound_at(10.0, None, 0.3) == pytest.approx(10.3)  # push-to-talk: from its `end`
    assert sound_at(10.0, 700.0, 0.3) == 10.0  # the open microphone waited longer: as the turn is taken
    assert sound_at(10.0, 100.0, 0.3) == pytest.approx(10.2)  # a shorter wait: the rest of it after


def test_the_playout_follows_the_loudspeaker_and_counts_heard_characters_as_clients_do() -> None:
    p = Playout()
    p.sent(3, -1, 0, 0.5, 10.0, final=False)  # a filler: half a second, no characters
    p.sent(3, 0, 20, 1.0, 10.1, final=False)  # starts when the filler ends, at 10.5
    p.sent(3, 1, 10, 1.0, 10.2, final=True)  # then at 11.5
    assert p.speaking(12.0) and p.speaking(12.5 + LATENCY_S / 2) and not p.speaking(12.5 + LATENCY_S)
    at = LATENCY_S  # what the learner hears lags what was sent by the client's buffer
    assert p.heard_chars(3, 10.4 + at) == 0
    assert p.heard_chars(3, 11.0 + at) == 10  # half of the first piece
    assert p.heard_chars(3, 12.0 + at) == 21 + 5  # the first piece and its space, half the second
    assert p.heard_chars(2, 12.0) is None
    p.stopped()
    assert not p.speaking(12.0)
    q = Playout()
    q.sent(4, -1, 0, 0.5, 0.0, final=False)
    assert q.heard_chars(4, 1.0) is None  # only the filler: nothing of the reply was heard
    q.sent(4, 0, 30, 9.0, 0.1, final=True)  # nine seconds queued on the loudspeaker...
    q.sent(5, 0, 10, 1.0, 2.0, final=True)  # ...and the next turn's reply replaces them, as clients do
    assert q.heard_chars(5, 2.5 + LATENCY_S) == 5 and not q.speaking(3.0 + LATENCY_S)


def test_the_playout_says_how_much_of_a_reply_the_listener_still_has_to_play() -> None:
    p = Playout()
    assert p.in_hand(3, 10.0) == 0.0  # nothing sent
    p.sent(3, -1, 0, 0.5, 10.0, final=False)  # a filler plays first: it is in hand too
    p.sent(3, 0, 20, 2.0, 10.1, final=False)  # from 10.5 to 12.5
    assert p.in_hand(3, 10.1) == pytest.approx(2.4)
    assert p.in_hand(3, 12.0) == pytest.approx(0.5)
    assert p.in_hand(3, 13.0) == 0.0  # all played: the loudspeaker waits
    assert p.in_hand(4, 11.0) == 0.0  # another turn's reply: the client drops this one's
    p.sent(3, 1, 10, 1.0, 12.0, final=True)
    assert p.in_hand(3, 12.0) == 0.0  # the reply's last chunk is sent: nothing more is asked for it
    p.sent(5, 0, 10, 1.0, 20.0, final=False)
    p.stopped()  # a barge-in: nothing more of it plays
    assert p.in_hand(5, 20.2) == 0.0


# ---------------------------------------------------------------------------- over the socket


async def _spoken_turn(openai_fake: Any, brain: Any, **settings: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A spoken turn against a live server; every frame up to its reply's last audio, and the reply."""
    from tests.servers import create, running_server
    from tests.test_voice import say, voiced
    from tests.voice_support import speech_settings, tone

    async with running_server(brain=brain, **speech_settings(openai_fake, **settings)) as served:
        created = await create(served)
        async with voiced(served, created) as c:
            await c.until("welcome")
            await anyio.sleep(0.3)  # the thinking sounds are made when the connection opens
            await say(c, "u1", tone(0.5))
            reply = await c.until("reply", in_reply_to="u1", wait=10)
            while not (await c.recv()).get("final"):
                pass
            return list(c.seen), reply


async def test_a_late_reply_gets_a_thinking_sound_first_and_it_is_no_part_of_his_words(openai_fake: Any) -> None:
    from tests.fakes import ScriptedBrain, decision

    brain = ScriptedBrain(lambda r: decision("Haan ji, for you sixty rupees.", 50, r.stage), delay=1.0)
    seen, reply = await _spoken_turn(openai_fake, brain)
    audio = [f for f in seen if f["type"] == "reply.audio" and f["turn"] == reply["turn"]]
    filler, spoken = audio[0], audio[1:]
    assert filler["filler"] is True and filler["sentence"] == -1 and filler["text"] == "" and filler["data"]
    assert filler["last"] and not filler["final"] and filler["tts"] == "openai"
    assert not any(f["filler"] for f in spoken) and spoken[0]["sentence"] == 0
    assert " ".join(f["text"] for f in spoken if f["chunk"] == 0) == reply["text"]  # the sound is not his words
    said = {r["input"] for r in openai_fake.audio_requests if r["path"] == "speech"}
    assert said & {"Hmm...", "Let me see...", "Okay, okay..."}  # the pack's, for en-IN
    assert "Hmm" not in reply["text"] and all("Hmm" not in line["text"] for line in _transcript(seen))


def _transcript(seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in seen if f["type"] in ("reply", "speech")]


async def test_a_prompt_reply_gets_no_thinking_sound(openai_fake: Any) -> None:
    from tests.fakes import ScriptedBrain, decision

    brain = ScriptedBrain(lambda r: decision("Haan ji, for you sixty rupees.", 50, r.stage))
    seen, _ = await _spoken_turn(openai_fake, brain, THINKING_SOUND_AFTER_MS=2000)
    audio = [f for f in seen if f["type"] == "reply.audio"]
    assert audio and not any(f["filler"] for f in audio)



class _Deltas:
    """A delta sink that keeps what it is given (schemas.brain.DeltaSink)."""

    def __init__(self, spoken: bool = True) -> None:
        self.texts: list[str] = []
        self.spoken = spoken

    async def delta(self, text: str) -> None:
        self.texts.append(text)

    async def withdraw(self, reason: str) -> None:
        self.texts.clear()

    async def end(self) -> None:
        pass

    async def decided(self, head: Any) -> None:
        pass


_HAAN_JI = ["Haan", " ji", ", every", "thing here is", " fresh today", "; tell", " me what you", " need", ", and"]


@pytest.mark.parametrize(("pieces", "spoken", "out_at"), [
    # A clause of 4 words, cut once the clause after it is whole: the gate lets its ";" out then
    # (session/spoken.py, rule 6), and the voice cannot cut the piece before.
    (_HAAN_JI, True, 8),
    (_HAAN_JI, False, 5),  # no voice: the first clause is all a reader waits for
    (["Namaste", ", come", ", come", "! My", " friend", ". Sit"], True, 5),  # a sentence, however short, and the next
    (["Namaste", ", come", ", come", "! My", " friend", ". Sit"], False, 3),
    (["Arre", " bhaiya", ", ", "suno"], True, None),  # a short clause is not the voice's first piece
])
async def test_the_model_is_read_eagerly_until_the_voices_first_piece_can_be_cut(pieces: list[str], spoken: bool,
                                                                                out_at: int | None) -> None:
    from types import SimpleNamespace

    from brain.turn import FIRST_PIECE_WORDS, Turn

    assert FIRST_PIECE_WORDS == FIRST_CLAUSE_WORDS  # the brain's count of the speaker's first piece
    turn = Turn(SimpleNamespace(session_id="s", turn=1), _Deltas(spoken), deadline=1e9)
    seen = []
    for piece in pieces:
        await turn.push(piece)
        seen.append(turn.clause_out)
    assert (seen.index(True) if True in seen else None) == out_at
