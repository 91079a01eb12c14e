"""Speculation (issue #34, session/speculation.py): the brain asked at an open microphone's pause.

The actor tests run the real `OpenAIBrain` (the openai SDK) against the fake OpenAI server, as the
brain's own tests do, and feed the actor what a connection's transcriber feeds it: the turn so far
as a partial `Recognised`, then the final one and the turn's transcript with the same id.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain.rules_vendor import RuleBasedVendor
from schemas.brain import BrainRequest, BrainResult, DeltaSink
from schemas.enums import Stage
from schemas.frames import TranscriptFrame
from session.actor import ActorLimits, SessionActor
from session.changes import Change
from session.messages import Recognised
from session.negotiation import Negotiation
from session.speculation import same_request
from tests.fakes import FakeConnection, RecordingMirror, hosted
from tests.llm_support import brain, decision
from tests.openai_server import Behaviour, FakeOpenAI, reply, status

pytestmark = pytest.mark.anyio

ASKED = "How much are the tomatoes?"


def heard(text: str, *, partial: bool, uid: str = "mic.1", confidence: float = 0.95) -> Recognised:
    return Recognised(uid, text, confidence, None, 1200, (), "openai", partial=partial)


def transcript(text: str, uid: str = "mic.1") -> TranscriptFrame:
    return TranscriptFrame(type="transcript", id=uid, text=text, confidence=0.95)


async def until(condition: Callable[[], bool], limit: float = 5.0) -> None:
    with anyio.fail_after(limit):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.005)


@asynccontextmanager
async def session(the_brain: Any, *, speculate: bool = True,
                  mirror: RecordingMirror | None = None) -> AsyncIterator[tuple[SessionActor, FakeConnection]]:
    negotiation = Negotiation(session_id="s1", scenario_name="jaipur-bazaar", created_at=0.0)
    actor = SessionActor(negotiation, the_brain, mirror or RecordingMirror(), limits=ActorLimits(speculate=speculate),
                         clock=lambda: 100.0)
    async with hosted(actor):
        player = FakeConnection("player")
        actor.connect(player)
        await until(lambda: bool(player.sent))
        yield actor, player


async def turn(actor: SessionActor, player: FakeConnection, partial: str, final: str,
               between: Callable[[], bool] = lambda: True) -> dict[str, Any]:
    """A spoken turn as an open microphone makes it: the pause's partial, then (once `between`
    holds) the final words and the transcript; the reply to it."""
    actor.recognised(heard(partial, partial=True))
    await until(between)
    actor.recognised(heard(final, partial=False))
    actor.submit(player, transcript(final))
    await until(lambda: any(f["type"] == "reply" and f.get("in_reply_to") == "mic.1" for f in player.sent))
    return next(f for f in player.sent if f["type"] == "reply")


def spoken(player: FakeConnection) -> str:
    """Everything the client was sent, as one text, to look for words in."""
    return json.dumps(player.sent)


async def test_the_turn_takes_the_speculative_call_when_its_words_are_the_pauses(openai_fake: FakeOpenAI) -> None:
    # Slow enough to be still streaming when the turn is taken: what it kept goes out then, in order.
    openai_fake.script(reply(decision("Fresh today, ji, and very sweet.", 55, "INQUIRY"), ttft_ms=150,
                             tokens_per_s=200))
    async with brain(openai_fake) as llm, session(llm) as (actor, player):
        answer = await turn(actor, player, ASKED, "  how much are the  TOMATOES? ",
                            between=lambda: openai_fake.calls == 1)
        assert openai_fake.calls == 1  # asked once, at the pause
        assert actor.calls.statistics() == {"speculated": 1, "taken": 1, "cancelled": 0}
        assert answer["text"] == "Fresh today, ji, and very sweet."
        kinds = [f["type"] for f in player.sent]
        # The partial, the speech, the ack, the streamed words, then the reply: nothing before the turn.
        assert kinds.index("speech.partial") < kinds.index("speech") < kinds.index("ack") \
            < kinds.index("reply.delta") < kinds.index("reply")
        assert "".join(str(f["text"]) for f in player.of_type("reply.delta")) == answer["text"]


async def test_a_finished_speculation_answers_the_turn_with_no_second_call(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(reply(decision("Very sweet ones today, ji.", 55, "INQUIRY")))
    async with brain(openai_fake) as llm, session(llm) as (actor, player):
        answer = await turn(actor, player, ASKED, ASKED,
                            between=lambda: bool(openai_fake.requests and openai_fake.requests[0].finished_wall))
        await anyio.sleep(0.05)
        assert openai_fake.calls == 1 and answer["text"] == "Very sweet ones today, ji."
        assert actor.calls.statistics()["taken"] == 1


@pytest.mark.parametrize("finished_first", [False, True])
async def test_a_speculation_the_final_words_differ_from_is_cancelled_and_nothing_of_it_is_sent(
        openai_fake: FakeOpenAI, finished_first: bool) -> None:
    ahead = reply(decision("SPECULATED tomatoes are forty.", 55, "INQUIRY"), ttft_ms=0 if finished_first else 100,
                  tokens_per_s=0 if finished_first else 20)
    openai_fake.script(ahead, reply(decision("Onions? The best in Jaipur, ji.", 52, "INQUIRY")))

    def between() -> bool:
        if not openai_fake.requests:
            return False
        return bool(openai_fake.requests[0].finished_wall) if finished_first else \
            bool(openai_fake.requests[0].first_token_wall)

    async with brain(openai_fake) as llm, session(llm) as (actor, player):
        tasks = len(asyncio.all_tasks())
        answer = await turn(actor, player, ASKED, "How much are the onions?", between=between)
        await anyio.sleep(0.3)  # room for anything of the cancelled call to arrive
        assert len(asyncio.all_tasks()) == tasks  # both calls' tasks are over: the cancelled one did not linger
        assert openai_fake.calls == 2
        assert actor.calls.statistics() == {"speculated": 1, "taken": 0, "cancelled": 1}
        assert answer["text"] == "Onions? The best in Jaipur, ji."
        assert answer["learner_text"] == "How much are the onions?"
        assert "SPECULATED" not in spoken(player)
        assert len(player.of_type("reply")) == 1  # one turn answered
        asked = [json.dumps(r.body) for r in openai_fake.requests]
        assert "onions" not in asked[0] and "onions" in asked[1]  # the turn asked afresh, with its own words


class PreviewLog:
    """A speech preview (session/protocols.py `SpeechPreview`) that keeps what it was shown."""

    def __init__(self) -> None:
        self.shown: list[tuple[str, int, str]] = []

    def prepare(self, turn: int, text: str) -> None:
        self.shown.append(("prepare", turn, text))

    def forget(self, turn: int) -> None:
        self.shown.append(("forget", turn, ""))


async def test_a_speculations_words_are_shown_to_the_preview_until_taken_and_the_reply_is_the_same(
        openai_fake: FakeOpenAI) -> None:
    openai_fake.script(reply(decision("Fresh today, ji, and very sweet.", 55, "INQUIRY"), ttft_ms=50,
                             tokens_per_s=200))
    async with brain(openai_fake) as llm, session(llm) as (actor, player):
        preview = actor.calls.preview = PreviewLog()
        answer = await turn(actor, player, ASKED, ASKED,
                            between=lambda: bool(preview.shown) and "sweet" in preview.shown[-1][2])
        assert answer["text"] == "Fresh today, ji, and very sweet."
        assert actor.calls.statistics() == {"speculated": 1, "taken": 1, "cancelled": 0}
        # Shown as they streamed, before the turn; never forgotten: the turn took them.
        assert {kind for kind, _, _ in preview.shown} == {"prepare"}
        assert {turn for _, turn, _ in preview.shown} == {answer["turn"]}
        assert preview.shown[-1][2] == answer["text"]
        assert all(answer["text"].startswith(text) for _, _, text in preview.shown)


async def test_a_cancelled_speculation_is_forgotten_by_the_preview_and_changes_nothing(
        openai_fake: FakeOpenAI) -> None:
    """The learner went on after the pause: the speculation's words were shown to the preview (to
    synthesize, never to send), then forgotten; nothing of it reached the client or the session."""
    openai_fake.script(reply(decision("SPECULATED tomatoes are forty.", 55, "INQUIRY"), ttft_ms=0, tokens_per_s=0),
                       reply(decision("Onions? The best in Jaipur, ji.", 52, "INQUIRY")))
    mirror = RecordingMirror()
    async with brain(openai_fake) as llm, session(llm, mirror=mirror) as (actor, player):
        preview = actor.calls.preview = PreviewLog()
        actor.recognised(heard(ASKED, partial=True))
        await until(lambda: bool(player.of_type("speech.partial")))
        version, sent, changes = actor.negotiation.version, len(player.sent), len(mirror.log)
        await until(lambda: bool(preview.shown) and preview.shown[-1][2].endswith("forty."))
        await anyio.sleep(0.1)  # the call has answered, untaken
        assert (actor.negotiation.version, len(player.sent), len(mirror.log)) == (version, sent, changes)
        answer = await turn(actor, player, "How much are the onions?", "How much are the onions?")
        assert actor.calls.statistics() == {"speculated": 2, "taken": 1, "cancelled": 1}
        turn_no = answer["turn"]
        shown = [(kind, t) for kind, t, text in preview.shown if kind == "forget" or "SPECULATED" in text]
        assert shown[0] == ("prepare", turn_no) and ("forget", turn_no) in shown
        assert shown.index(("forget", turn_no)) > 0
        assert answer["text"] == "Onions? The best in Jaipur, ji."
        assert "SPECULATED" not in spoken(player)
        assert "SPECULATED" not in json.dumps([repr(change) for change in mirror.log])


async def test_a_failed_speculation_is_not_taken_and_the_turn_asks_the_brain_itself(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(status(400, message="bad request"), reply(decision("Very sweet ones today, ji.", 55, "INQUIRY")))
    async with brain(openai_fake) as llm, session(llm) as (actor, player):
        actor.recognised(heard(ASKED, partial=True))
        await until(lambda: bool(openai_fake.requests))
        await anyio.sleep(0.3)  # its answer, an error, has come back
        actor.recognised(heard(ASKED, partial=False))
        actor.submit(player, transcript(ASKED))
        await until(lambda: bool(player.of_type("reply")))
        answer = player.of_type("reply")[0]
        assert answer["text"] == "Very sweet ones today, ji." and not answer.get("fallback")
        assert openai_fake.calls == 2 and actor.calls.statistics() == {"speculated": 1, "taken": 0, "cancelled": 1}


async def test_a_change_to_the_session_between_the_pause_and_the_turn_cancels_the_speculation(
        openai_fake: FakeOpenAI) -> None:
    from schemas.frames import SceneFrame

    openai_fake.script(reply(decision("SPECULATED for the old scene.", 55, "INQUIRY"), ttft_ms=100, tokens_per_s=20),
                       reply(decision("Ah, the mangoes, ji!", 55, "INQUIRY")))
    async with brain(openai_fake) as llm, session(llm) as (actor, player):
        actor.recognised(heard(ASKED, partial=True))
        await until(lambda: openai_fake.calls == 1)
        actor.submit(player, SceneFrame(type="scene", id="sc1", object_grabbed="mango"))
        await until(lambda: bool(player.of_type("ack")))
        actor.recognised(heard(ASKED, partial=False))
        actor.submit(player, transcript(ASKED))
        await until(lambda: bool(player.of_type("reply")))
        assert openai_fake.calls == 2 and actor.calls.statistics()["cancelled"] == 1
        assert "SPECULATED" not in spoken(player)


async def test_an_unclear_turn_drops_the_speculation_and_asks_nothing(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(reply(decision("SPECULATED answer.", 55, "INQUIRY"), ttft_ms=300, tokens_per_s=20))
    async with brain(openai_fake) as llm, session(llm) as (actor, player):
        actor.recognised(heard(ASKED, partial=True))
        await until(lambda: openai_fake.calls == 1)
        actor.recognised(heard(ASKED, partial=False, confidence=0.2))
        actor.submit(player, TranscriptFrame(type="transcript", id="mic.1", text=ASKED, confidence=0.2))
        await until(lambda: bool(player.of_type("reply")))
        await anyio.sleep(0.4)
        assert player.of_type("reply")[0]["mark"] == "clarify" and openai_fake.calls == 1
        assert actor.calls.statistics()["cancelled"] == 1 and "SPECULATED" not in spoken(player)


async def test_no_speculation_for_an_unsure_partial_a_rules_brain_or_with_it_off(openai_fake: FakeOpenAI) -> None:
    async with brain(openai_fake) as llm:
        async with session(llm) as (actor, player):
            actor.recognised(heard(ASKED, partial=True, confidence=0.3))
            await until(lambda: bool(player.of_type("speech.partial")))
            assert actor.calls.statistics()["speculated"] == 0
        async with session(llm, speculate=False) as (actor, player):
            await turn(actor, player, ASKED, ASKED, between=lambda: bool(player.of_type("speech.partial")))
            assert actor.calls.statistics()["speculated"] == 0 and openai_fake.calls == 1
    async with session(RuleBasedVendor()) as (actor, player):
        answer = await turn(actor, player, ASKED, ASKED)
        assert actor.calls.statistics()["speculated"] == 0 and answer["text"]


def decided(changes: list[Change]) -> list[tuple[Any, ...]]:
    """The session's changes as the engine decided them: the measurements (the brain's ledger) aside."""
    out = []
    for change in changes:
        fields = change._asdict()
        fields.pop("ledger", None)
        out.append((type(change).__name__, tuple(sorted((k, repr(v)) for k, v in fields.items()))))
    return out


@pytest.mark.parametrize("final", [ASKED, "I will give you twenty rupees for the tomatoes."])
async def test_the_engine_decides_the_same_with_speculation_on_and_off(openai_fake: FakeOpenAI, final: str) -> None:
    # The proposal offers a price under the floor and a jump in happiness: the engine overrides both.
    proposal = decision("Take them for ten rupees, my friend!", 95, "DEAL", counter_price=10)
    outcomes, taken = [], []
    for speculate in (True, False):
        openai_fake.reset()
        openai_fake.default = reply(proposal, ttft_ms=50, tokens_per_s=200)
        mirror = RecordingMirror()
        async with brain(openai_fake) as llm, session(llm, speculate=speculate, mirror=mirror) as (actor, player):
            started: Callable[[], bool] = (lambda: openai_fake.calls == 1) if speculate else (lambda: True)
            answer = await turn(actor, player, ASKED, final, between=started)
            await anyio.sleep(0.1)
            answer.pop("timings")
            outcomes.append((answer, decided(mirror.log), [f for f in player.stream() if f["type"] != "reply"]))
            taken.append(actor.calls.statistics()["taken"])
    assert outcomes[0] == outcomes[1]
    assert taken == ([1, 0] if final == ASKED else [0, 0])  # the speculation was used where it could be
    assert outcomes[0][0]["counter_price"] != 10  # the engine did rule


PHRASES = ["how much are the tomatoes", "I will give you", "rupees", "for the mangoes", "no", "too much",
           "bhaiya", "kitne ka", "ok deal", "teen sau", "per kilo", "onions"]


@settings(max_examples=60, deadline=None)
@given(words=st.lists(st.one_of(st.sampled_from(PHRASES), st.integers(1, 900).map(str)), min_size=1, max_size=6),
       stage=st.sampled_from([Stage.GREETING, Stage.INQUIRY, Stage.HAGGLING]), quote=st.none() | st.integers(20, 400),
       turns=st.integers(0, 3))
def test_the_preview_is_the_request_the_turn_makes(words: list[str], stage: Stage, quote: int | None,
                                                   turns: int) -> None:
    """Whatever the words and the state, the speculative request equals the turn's own one."""
    from brain.rules_vendor import RuleBasedVendor

    n = Negotiation(session_id="s1", scenario_name="jaipur-bazaar", created_at=0.0)
    vendor = RuleBasedVendor()
    for k in range(turns):  # some history, played by the rules brain
        pending = n.begin_turn(f"tomatoes {100 - 10 * k} rupees", f"c{k}", float(k))
        result = vendor.propose_inline(n.brain_request(pending))
        n.complete_turn(pending, result, float(k) + 0.5)
    if not n.is_terminal:
        n.stage = stage
        if quote is not None:
            n.item = "Tomato"
            n.quotes["Tomato"] = quote
        text = " ".join(words)
        ahead = n.preview_request(text, 50.0)
        version, history = n.version, len(n.history)
        assert (n.version, len(n.history), n.pending) == (version, history, None)  # the preview changed nothing
        request = n.brain_request(n.begin_turn(text, "mic.1", 50.0))
        assert ahead == request and same_request(ahead, request)
        assert not same_request(ahead, request.model_copy(update={"transcript": text + " more"}))
        assert same_request(ahead.model_copy(update={"transcript": text.upper() + "  "}), request)


async def open_mic(c: Any, stream: bytes) -> None:
    """After the welcome, open the microphone and stream `stream` in 200 ms chunks, twice as fast as spoken."""
    await c.until("welcome")
    await c.send({"type": "audio", "id": "mic", "event": "open", "format": "pcm16"})
    for at in range(0, len(stream), 6400):
        await c.send({"type": "audio", "id": "mic", "event": "chunk",
                      "data": base64.b64encode(stream[at:at + 6400]).decode()})
        await anyio.sleep(0.1)


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng to speak the learner's lines")
async def test_over_the_socket_a_replaced_speculation_is_never_heard_nor_shown(openai_fake: FakeOpenAI) -> None:
    """An open microphone, a pause, more words: the first pause's speculation is replaced by the
    second's, which the turn takes; the client sees and hears nothing of the first."""
    from tests.servers import client, create, running_server
    from tests.turn_set import piece
    from tests.voice_support import speech_settings
    from voice.open_mic import BYTES_PER_MS

    openai_fake.stt_queue.extend([Behaviour(content="How much are the tomatoes", confidence=0.95),
                                  Behaviour(content="How much are the tomatoes for me?", confidence=0.95)])
    whole = reply(decision("For you, ji, the reddest ones.", 55, "INQUIRY"))
    early = reply(decision("SPECULATED words nobody hears.", 55, "INQUIRY"), ttft_ms=100, tokens_per_s=40)
    openai_fake.route = lambda body: whole if "for me" in json.dumps(body) else early
    def silence(ms: int) -> bytes:
        return b"\0" * (ms * BYTES_PER_MS)

    stream = (silence(400) + piece("How much are the tomatoes", "en-us", 150) + silence(600)
              + piece("for me?", "en-us", 150) + silence(2500))
    async with running_server(**speech_settings(openai_fake, BRAIN="openai", OPENAI_API_KEY="sk-test", USE_MOCKS=False,
                                                MIRROR="none", OPENAI_BASE_URL=openai_fake.base_url)) as served:
        created = await create(served)
        async with client(served.ws_url(created["session_id"], created["player_token"]) + "&voice=1") as c:
            await open_mic(c, stream)
            answer = await c.until("reply", in_reply_to="mic.1", wait=20)
            await c.until("reply.audio", final=True, wait=20)
            partials = [f["text"] for f in c.seen if f["type"] == "speech.partial"]
            assert partials == ["How much are the tomatoes", "How much are the tomatoes for me?"]
            assert answer["text"] == "For you, ji, the reddest ones."
            # Both pauses asked the brain; only the second was taken, and nothing of the first went out.
            assert len(openai_fake.requests) == 2
            assert "SPECULATED" not in json.dumps([f for f in c.seen if f["type"] != "reply.audio"])
            spoken = [f.get("text", "") for f in c.seen if f["type"] == "reply.audio"]
            assert spoken and not any("SPECULATED" in t for t in spoken)
            kinds = [f["type"] for f in c.seen]
            assert kinds.index("speech") < kinds.index("reply.audio")  # no audio before the turn


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng to speak the learner's lines")
async def test_over_the_socket_a_thinking_waits_first_clause_is_synthesized_during_the_wait_and_sent_after_it(
        openai_fake: FakeOpenAI) -> None:
    """A turn that ends on a filler waits a thinking pause (voice/turn_end.py rule 4): the speculative
    call answers long before the turn is taken, its first clause is synthesized then, and goes out
    only after the turn's `speech`, at once, asked of the voice once."""
    from tests.servers import client, create, running_server
    from tests.turn_set import piece
    from tests.voice_support import speech_settings
    from voice.open_mic import BYTES_PER_MS

    said = "How much are the tomatoes umm"
    openai_fake.stt_queue.extend([Behaviour(content=said, confidence=0.95) for _ in range(4)])
    openai_fake.script(reply(decision("Arre bhaiya, the tomatoes are the best today; take a kilo.", 55, "INQUIRY")))
    openai_fake.tts_ttfb_ms = 500.0  # far longer than the server's own steps
    stream = b"\0" * (400 * BYTES_PER_MS) + piece(said, "en-us", 150) + b"\0" * (4500 * BYTES_PER_MS)
    async with running_server(**speech_settings(openai_fake, BRAIN="openai", OPENAI_API_KEY="sk-test", USE_MOCKS=False,
                                                MIRROR="none", OPENAI_BASE_URL=openai_fake.base_url)) as served:
        created = await create(served)
        async with client(served.ws_url(created["session_id"], created["player_token"]) + "&voice=1") as c:
            await open_mic(c, stream)
            speech = await c.until("speech", wait=20)
            first = await c.until("reply.audio", wait=20, sentence=0)
    assert speech["end_of_turn_ms"] > 2000  # a thinking pause's wait
    kinds = [f["type"] for f in c.seen]
    assert kinds.index("speech") < kinds.index("ack") < kinds.index("reply.audio")  # nothing before the turn
    assert first["text"] == "Arre bhaiya, the tomatoes are the best today;"
    # The voice took 500 ms to its first byte, yet the audio left sooner after the turn ended: it
    # was asked during the wait. And it was asked once.
    assert first["timings"]["first_audio_ms"] < openai_fake.tts_ttfb_ms
    asked = [r["input"] for r in openai_fake.audio_requests if r["path"] == "speech"]
    assert asked.count("Arre bhaiya, the tomatoes are the best today,") == 1


class SinkSpy:
    """A brain that notes whether its delta sink says a voice speaks the words, and answers as the rules do."""

    propose_inline = None  # the parts of a brain it does not have
    write_summary = None
    name = "spy"

    def __init__(self) -> None:
        self.spoken: list[bool] = []
        self.rules = RuleBasedVendor()

    async def propose(self, request: BrainRequest, on_delta: DeltaSink | None = None) -> BrainResult:
        assert on_delta is not None
        self.spoken.append(on_delta.spoken)
        return self.rules.propose_now(request)


@pytest.mark.parametrize("voiced", [True, False])
async def test_the_brain_is_told_its_words_are_spoken_only_when_the_players_voice_speaks_them(voiced: bool) -> None:
    # A voice needs the model read eagerly until it can cut its first piece (brain/turn.py); a reader
    # of text does not, and its turns keep the fewer reads.
    spy = SinkSpy()
    async with session(spy) as (actor, player):
        if voiced:
            actor.calls.preview = PreviewLog()
        await turn(actor, player, ASKED, ASKED)  # the speculative call, taken by the turn
        actor.recognised(heard("And the onions?", partial=False, uid="mic.2"))
        actor.submit(player, transcript("And the onions?", uid="mic.2"))  # the turn's own call
        await until(lambda: any(f.get("in_reply_to") == "mic.2" for f in player.of_type("reply")))
    assert actor.calls.statistics()["taken"] == 1
    assert spy.spoken == [voiced, voiced]
