"""`OpenAIBrain`'s model calls (brain/transport.py) through the real openai SDK, over real HTTP,
against tests/openai_server.py: the call log, retries, the deadline and per-attempt limits, and
reading streamed chunks."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import openai
import orjson
import pytest

from brain.errors import BrainServiceError, BrainTransientError
from brain.llm import FALLBACK_LINES, OpenAIBrain
from brain.prompt import PROMPT_VERSION
from brain.transport import DEFAULT_BACKOFF, ChatTransport, _content, body_pieces, read_body, sdk_client
from brain.turn import Turn
from privates import ReadingRest
from privates import aiohttp_response as _aiohttp_response
from privates import rest_reading as _rest
from schemas.enums import Stage
from server.config import load_settings
from tests.llm_support import FAST, Sink, brain, decision, gaps, negotiation, play, request
from tests.openai_server import Behaviour, FakeOpenAI, disconnect, garbage, hang, reply, status, stream_error

pytestmark = pytest.mark.anyio


# --------------------------------------------------------------------------- the call log


async def test_prompt_version_is_logged_with_every_call(openai_fake: FakeOpenAI,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    openai_fake.script(status(500), reply(decision()))
    with caplog.at_level(logging.INFO, logger="samvad.brain"):
        async with brain(openai_fake) as b:
            await b.propose(request(session_id="sess-9", turn=4))
    calls = [r for r in caplog.records if r.name == "samvad.brain" and r.getMessage() == "llm call"]
    assert len(calls) == 2
    for record in calls:
        assert record.prompt_version == PROMPT_VERSION  # type: ignore[attr-defined]
        assert record.session_id == "sess-9" and record.turn == 4  # type: ignore[attr-defined]
    assert [r.outcome.startswith("BrainTransientError") for r in calls] == [True, False]  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- retries


async def test_5xx_is_retried_twice_with_growing_backoff(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(status(500), status(503), reply(decision()))
    async with brain(openai_fake, backoff=(0.1, 0.3)) as b:
        result = await b.propose(request())
    assert not result.fallback
    assert openai_fake.calls == 3
    assert result.ledger.llm_calls == 3 and result.ledger.retries == 2
    first, second = gaps(openai_fake)
    # Measured 0.103-0.104 s and 0.303-0.306 s (3-6 ms over each backoff, 2 cores at a load average of
    # 1.8); the upper bounds leave 200 ms and 500 ms over the backoff, more than 30x that.
    assert 0.1 <= first < 0.3 <= second < 0.8
    assert second > first


async def test_429_is_retried(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(status(429), reply(decision()))
    async with brain(openai_fake) as b:
        result = await b.propose(request())
    assert not result.fallback and openai_fake.calls == 2 and result.ledger.retries == 1


async def test_retry_after_is_used_instead_of_the_default_backoff(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(status(429, retry_after=0.2), status(503, retry_after_ms=150),
                       reply(decision()))
    async with brain(openai_fake, backoff=DEFAULT_BACKOFF) as b:  # 1 s and 2 s
        result = await b.propose(request())
    assert not result.fallback and openai_fake.calls == 3
    first, second = gaps(openai_fake)
    # Measured 0.203 s and 0.153-0.156 s (3-6 ms over the Retry-After); 0.9 leaves 100x that and
    # still tells them from the 1 s and 2 s default backoff they replace.
    assert 0.2 <= first < 0.9
    assert 0.15 <= second < 0.9


async def test_retry_after_longer_than_the_budget_falls_back_at_once(
        openai_fake: FakeOpenAI) -> None:
    openai_fake.script(status(429, retry_after=30))
    started = time.perf_counter()
    async with brain(openai_fake, timeout_ms=2000) as b:
        result = await b.propose(request())
    # Measured 35-47 ms; 1 s is over 20x that, and far under the 30 s Retry-After or the 2 s budget.
    assert time.perf_counter() - started < 1.0
    assert result.fallback and openai_fake.calls == 1
    assert "no time left" in (result.error or "")


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422])
async def test_other_4xx_are_never_retried(openai_fake: FakeOpenAI, code: int) -> None:
    openai_fake.script(status(code), reply(decision()))
    async with brain(openai_fake) as b:
        with pytest.raises(BrainServiceError) as caught:
            await b.propose(request())
    assert caught.value.status == code
    assert isinstance(caught.value.__cause__, Exception)  # translated with `raise ... from`
    assert openai_fake.calls == 1


async def test_exhausted_retries_fall_back_keeping_stage_and_happiness(
        openai_fake: FakeOpenAI) -> None:
    openai_fake.script(status(500), status(502), status(503), reply(decision()))
    n = negotiation(stage=Stage.HAGGLING, happiness=62, item="Tomato", quote=90)
    async with brain(openai_fake) as b:
        _, result, outcome = await play(n, b, "Sixty rupees, final!")
    assert openai_fake.calls == 3  # the first try and two retries, no more
    assert result.fallback and result.ledger.retries == 2
    assert "gave up after 2 retries" in (result.error or "")
    assert result.decision.reply_text in FALLBACK_LINES
    reply_event = outcome.events[0]
    assert reply_event.text in FALLBACK_LINES and reply_event.fallback
    assert n.stage is Stage.HAGGLING and reply_event.negotiation_state is Stage.HAGGLING
    # happiness only moves when the server itself judged an offer (60 of 90 is fair: no forced drop)
    assert n.happiness == 62 and n.quote == 90


async def test_a_connection_refused_is_retried_then_falls_back(openai_fake: FakeOpenAI) -> None:
    the_brain = OpenAIBrain(api_key="test", base_url="http://127.0.0.1:9/v1", backoff=FAST,
                            timeout_ms=3000)
    try:
        result = await the_brain.propose(request())
    finally:
        await the_brain.aclose()
    assert result.fallback and result.ledger.llm_calls == 3 and result.ledger.retries == 2
    assert "connection" in (result.error or "")


async def test_disconnect_mid_stream_withdraws_and_retries(openai_fake: FakeOpenAI) -> None:
    good = decision("Arre, two kilos? For you, eighty rupees only.")
    openai_fake.script(disconnect(after_chars=32, content=good, tokens_per_s=500),
                       reply(good, tokens_per_s=500))
    sink = Sink()
    async with brain(openai_fake) as b:
        result = await b.propose(request(), sink)
    assert not result.fallback and openai_fake.calls == 2 and result.ledger.retries == 1
    assert sink.withdrawals == ["retrying after a failed model call"]
    cut = sink.events.index(next(e for e in sink.events if e[0] == "withdraw"))
    assert "".join(sink.deltas[:cut]) and good["reply_text"].startswith("".join(sink.deltas[:cut]))
    assert sink.standing() == result.decision.reply_text


async def test_a_malformed_stream_event_is_retried(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(garbage(), reply(decision()))
    async with brain(openai_fake) as b:
        result = await b.propose(request())
    assert not result.fallback and openai_fake.calls == 2 and result.ledger.retries == 1


async def test_an_error_event_mid_stream_withdraws_and_retries(openai_fake: FakeOpenAI,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    good = decision("Arre, two kilos? For you, eighty rupees only.")
    openai_fake.script(stream_error(after_chars=32, message="the model overloaded", content=good,
                                    tokens_per_s=500),
                       reply(good, tokens_per_s=500))
    sink = Sink()
    with caplog.at_level(logging.WARNING, logger="samvad.brain"):
        async with brain(openai_fake) as b:
            result = await b.propose(request(), sink)
    assert not result.fallback and openai_fake.calls == 2 and result.ledger.retries == 1
    assert sink.withdrawals == ["retrying after a failed model call"]
    assert sink.standing() == result.decision.reply_text
    assert any("the model overloaded" in r.getMessage() for r in caplog.records)


# --------------------------------------------------------------------------- the deadline


async def test_a_hang_falls_back_within_the_timeout(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(hang())
    started = time.perf_counter()
    async with brain(openai_fake, timeout_ms=600) as b:
        result = await b.propose(request())
    elapsed = time.perf_counter() - started
    # Measured 0.627-0.628 s, 27 ms past the deadline; the bound allows 0.4 s past it (15x).
    assert 0.55 <= elapsed < 0.6 + 0.4
    assert result.fallback and "AI_TIMEOUT_MS" in (result.error or "")
    assert result.decision.negotiation_state is Stage.GREETING


async def test_a_slow_stream_is_cut_at_the_deadline_and_withdrawn(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(reply(decision("This sentence will never be finished in time, my friend."),
                             tokens_per_s=20))
    sink = Sink()
    started = time.perf_counter()
    async with brain(openai_fake, timeout_ms=500) as b:
        result = await b.propose(request(), sink)
    # Measured 0.527-0.529 s, 29 ms past the 0.5 s deadline; the bound allows 0.4 s past it (14x).
    assert time.perf_counter() - started < 0.9
    assert result.fallback and result.streamed
    assert sink.deltas and sink.withdrawals == ["fallback"]


async def test_a_per_attempt_timeout_makes_a_hang_retryable(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(hang(), reply(decision()))
    async with brain(openai_fake, timeout_ms=3000, attempt_timeout_s=0.3) as b:
        result = await b.propose(request())
    assert not result.fallback and openai_fake.calls == 2 and result.ledger.retries == 1


async def test_with_the_shipped_settings_a_hung_attempt_is_retried_within_the_budget(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(hang(), reply(decision("Second try, ji.")))
    settings = load_settings(SAMVAD_SECRET="s" * 40, BRAIN="openai", OPENAI_API_KEY="test-key",
                             OPENAI_BASE_URL=openai_fake.base_url, AI_TIMEOUT_MS=4000,
                             AI_FIRST_TOKEN_TIMEOUT_MS=500)
    b = OpenAIBrain.from_settings(settings)
    try:
        started = time.perf_counter()
        result = await b.propose(request())
    finally:
        await b.aclose()
    assert not result.fallback and result.decision.reply_text == "Second try, ji."
    assert openai_fake.calls == 2 and result.ledger.retries == 1
    # 0.5 s hung + the 1 s backoff + the answer: measured 1.508 s; the upper bound is the 4 s budget
    # (2.5 s of room, 300x the 8 ms over), past which the brain would have fallen back.
    assert 1.4 < time.perf_counter() - started < 4.0


async def test_the_first_token_limit_does_not_cut_a_slow_stream_that_is_flowing(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(reply(decision("Slowly, slowly, the best price comes."), ttft_ms=50, tokens_per_s=40))
    async with brain(openai_fake, timeout_ms=5000, attempt_timeout_s=0.3) as b:
        started = time.perf_counter()
        result = await b.propose(request())
    assert time.perf_counter() - started > 0.6  # well past the 0.3 s first-token limit (measured 1.78 s)
    assert not result.fallback and openai_fake.calls == 1 and result.ledger.retries == 0


async def test_the_deadline_covers_the_backoff(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(status(500), status(500), status(500))
    started = time.perf_counter()
    async with brain(openai_fake, timeout_ms=2000, backoff=(0.5, 3.0)) as b:
        result = await b.propose(request())
    # Two calls and the first backoff: measured 0.53-0.56 s. The second backoff (3 s) does not fit in
    # what is left of the 2 s budget, so the brain falls back at once: the bound, 1.5 s, is 20x the
    # ~50 ms over the backoff and still under the 2 s a brain sleeping until its deadline would take.
    assert time.perf_counter() - started < 1.5
    assert result.fallback and openai_fake.calls == 2  # the second backoff no longer fits


# --------------------------------------------------------------------------- reading the stream


@pytest.mark.parametrize(("choice", "expected"), [
    ({"index": 0, "delta": {"content": "Namaste"}}, "Namaste"),
    ({"delta": {"content": "ji"}}, "ji"),  # servers that leave out the index mean the first answer
    ({"index": 1, "delta": {"content": "another answer"}}, None),
    ({"index": 0, "delta": {"role": "assistant"}}, None),
    ({"index": 0, "delta": {"content": None}}, None),
    ({"index": 0, "delta": {"content": 42}}, None),
    ({"index": 0, "delta": "not an object"}, None),
    ("not an object", None),
])
def test_a_streamed_choice_adds_only_the_text_of_the_first_answer(choice: object, expected: str | None) -> None:
    assert _content(choice) == expected


@asynccontextmanager
async def _streamed(openai_fake: FakeOpenAI, repeats: int) -> AsyncIterator[tuple[Any, Any]]:
    """A streamed answer of `repeats` greetings through the SDK, as it comes (its streaming
    response) and under it (aiohttp's response), on a client closed afterwards."""
    openai_fake.script(reply(decision("Namaste ji, " * repeats), ttft_ms=0, tokens_per_s=200))
    client = sdk_client(api_key="test", base_url=openai_fake.base_url, timeout_s=5)
    try:
        async with client.chat.completions.with_streaming_response.create(
                model="gpt-4o", messages=[{"role": "user", "content": "Namaste"}], stream=True) as response:
            found = _aiohttp_response(response.http_response)
            assert found is not None
            yield response, found
    finally:
        await client.close()


async def test_a_rested_socket_gives_what_the_model_sent_meanwhile_in_one_read(openai_fake: FakeOpenAI) -> None:
    """Issue #14: between reads after the first words, the model's socket is left unread, so that
    the tokens sent meanwhile (a packet each) are taken in one read. This also fails if the SDK's
    transport stops looking the way `privates.rest_reading` needs, instead of the saving quietly going away."""
    async with _streamed(openai_fake, 20) as (response, aiohttp_response):
        transport = aiohttp_response.connection.transport
        chunks = response.http_response.aiter_bytes().__aiter__()
        assert b"data:" in await chunks.__anext__()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_rest, aiohttp_response, 0.15)
            await anyio.sleep(0.05)
            assert not transport.is_reading()  # resting
        assert transport.is_reading()
        assert (await chunks.__anext__()).count(b"data:") >= 10  # ~30 tokens came meanwhile
        async for _ in chunks:
            pass


async def test_a_rest_started_without_waiting_gives_what_came_meanwhile_to_the_read_already_waiting(
        openai_fake: FakeOpenAI) -> None:
    """Issue #33: `ReadingRest.rest` pauses the socket and returns; the read that follows waits
    until the loop's timer resumes the socket, and then takes what the model sent meanwhile in one
    piece. A rest replaced by a longer one lasts the longer; `close` ends a rest at once."""
    async with _streamed(openai_fake, 40) as (_, found):
        transport = found.connection.transport
        content = found.content
        assert b"data:" in await content.readany()
        resting = ReadingRest(found)
        resting.rest(0.05)
        resting.rest(0.15)  # replaces the first: the socket stays paused for 150 ms from here
        assert resting.resting and not transport.is_reading()
        began = time.perf_counter()
        content.read_nowait()  # what had come before the pause
        piece = await content.readany()
        waited = time.perf_counter() - began
        assert 0.12 <= waited and transport.is_reading() and not resting.resting
        assert piece.count(b"data:") >= 10  # ~30 tokens came meanwhile
        resting.rest(10.0)
        assert not transport.is_reading()
        resting.close()
        assert transport.is_reading() and not resting.resting
        resting.close()  # nothing under way: nothing happens
        assert transport.is_reading()
        while await content.readany():
            pass


def test_a_rest_is_not_started_on_a_response_without_a_connection() -> None:
    """Once aiohttp has handed the connection back to its pool, another call may be reading it."""

    class Released:
        connection = None

    resting = ReadingRest(Released())
    resting.rest(0.25)
    assert not resting.resting
    resting.close()


@pytest.mark.parametrize("gzip", [False, True])
async def test_a_plain_stream_is_read_from_aiohttp_directly_and_an_encoded_one_through_the_sdk(
        openai_fake: FakeOpenAI, gzip: bool) -> None:
    """Issue #14: a body sent as it is skips the SDK's four async generators per piece (httpx2
    never counts its bytes); a gzip one is decoded by httpx2 as before. Both give the same events."""
    openai_fake.script(reply(decision("Namaste ji, fresh tomatoes today."), ttft_ms=0, tokens_per_s=0,
                             gzip=gzip))
    client = sdk_client(api_key="test", base_url=openai_fake.base_url, timeout_s=5)
    try:
        async with client.chat.completions.with_streaming_response.create(
                model="gpt-4o", messages=[{"role": "user", "content": "Namaste"}], stream=True) as response:
            http = response.http_response
            body = b"".join([piece async for piece in body_pieces(http, _aiohttp_response(http))])
            downloaded = response.http_response.num_bytes_downloaded
    finally:
        await client.close()
    assert body.startswith(b"data: {") and body.endswith(b"data: [DONE]\n\n") and body.count(b"data: ") >= 10
    assert (downloaded > 0) is gzip


@pytest.mark.parametrize("gzip", [False, True])
async def test_a_whole_answer_is_read_from_aiohttp_directly_unless_it_is_encoded(
        openai_fake: FakeOpenAI, gzip: bool) -> None:
    """A non-streamed answer is asked of the SDK unread and taken from aiohttp's buffer in one call
    (httpx2 never counts its bytes); a gzip one goes through httpx2's decoder. Same answer."""
    good = decision("Namaste ji, fresh tomatoes today.")
    openai_fake.script(reply(good, ttft_ms=0, tokens_per_s=0, gzip=gzip),
                       reply(good, ttft_ms=0, tokens_per_s=0, gzip=gzip))
    client = sdk_client(api_key="test", base_url=openai_fake.base_url, timeout_s=5)
    transport = ChatTransport(client=client, model="gpt-4o", temperature=0.7, max_tokens=200, stream=False,
                              response_format={"type": "json_object"})
    try:
        http = await transport._post(transport._body([{"role": "user", "content": "Namaste"}]), stream=True)
        try:
            body = orjson.loads(await read_body(http))
        finally:
            await http.aclose()
        assert orjson.loads(body["choices"][0]["message"]["content"]) == good
        assert (http.num_bytes_downloaded > 0) is gzip
        assert str(http.request.url) == openai_fake.base_url.rstrip("/") + "/chat/completions"
    finally:
        await client.close()
    async with brain(openai_fake, stream=False) as b:
        result = await b.propose(request())
    assert not result.fallback and result.decision.reply_text == good["reply_text"]


async def test_a_gzipped_stream_gives_the_learner_the_same_words(openai_fake: FakeOpenAI) -> None:
    good = decision("Arre, two kilos? For you, eighty rupees only.")
    openai_fake.script(reply(good, tokens_per_s=500, gzip=True))
    sink = Sink()
    async with brain(openai_fake) as b:
        result = await b.propose(request(), sink)
    assert not result.fallback and len(sink.deltas) >= 2
    assert "".join(sink.deltas) == result.decision.reply_text == good["reply_text"]


# --------------------------------------------------------------------------- read timeouts


@pytest.mark.parametrize("stream", [True, False])
async def test_a_streamed_call_has_no_read_timeout_of_its_own(openai_fake: FakeOpenAI, stream: bool) -> None:
    """aiohttp rearms a read timeout on every packet; a stream is bounded by the turn's deadline
    (test_a_slow_stream_is_cut_at_the_deadline_and_withdrawn) and by the first-token limit
    instead. The SDK tells the server the read timeout it uses, so its absence shows here."""
    openai_fake.script(reply(decision()))
    async with brain(openai_fake, stream=stream, timeout_ms=3000) as b:
        result = await b.propose(request())
    assert not result.fallback
    headers = openai_fake.requests[-1].headers
    if stream:
        assert "x-stainless-read-timeout" not in headers
    else:
        assert float(headers["x-stainless-read-timeout"]) == pytest.approx(4.0)  # the budget and a second
    assert headers["authorization"] == "Bearer test"  # the SDK's own headers, as before


# --------------------------------------------------------------------------- the prepared request


@pytest.mark.parametrize("stream", [True, False])
async def test_a_prepared_request_carries_the_headers_the_sdk_sent(openai_fake: FakeOpenAI, stream: bool) -> None:
    """Issue #33: after the SDK's first request, the next ones reuse its headers and go through its
    HTTP client (privates/sdk.py). The model sees the same request either way."""
    openai_fake.script(reply(decision()), reply(decision()), reply(decision()))
    async with brain(openai_fake, stream=stream, timeout_ms=3000) as b:
        for turn in (1, 2, 3):
            result = await b.propose(request(turn=turn))
            assert not result.fallback
        assert b.transport._headers is not None  # the second and third took the prepared way
    first, *later = openai_fake.requests
    assert len(later) == 2
    for seen in later:
        assert seen.headers == first.headers
        assert seen.body.keys() == first.body.keys() and seen.body.get("stream") == first.body.get("stream")


@pytest.mark.parametrize("failure", [status(400, message="bad request"), status(401), status(404, message="no model")])
async def test_a_prepared_request_raises_the_sdks_status_errors(openai_fake: FakeOpenAI, failure: Behaviour) -> None:
    """An error status on the prepared way is the SDK's `APIStatusError`, translated as the same
    status through `client.post` is: the same exception, status and message."""
    openai_fake.script(failure, reply(decision()), failure)
    raised: list[BrainServiceError] = []
    async with brain(openai_fake) as b:
        for turn in (1, 2, 3):
            assert (b.transport._headers is not None) is (turn == 3)  # the third takes the prepared way
            try:
                await b.transport.call(Turn(request(turn=turn), None, anyio.current_time() + 5), [
                    {"role": "user", "content": "Namaste"}])
            except BrainServiceError as exc:
                raised.append(exc)
    sdk_way, prepared = raised
    assert (prepared.status, str(prepared)) == (sdk_way.status, str(sdk_way)) == (failure.status, str(sdk_way))
    assert f"HTTP {failure.status}" in str(prepared)


async def test_a_prepared_request_is_retried_like_the_sdks_after_5xx_and_a_dropped_stream(
        openai_fake: FakeOpenAI) -> None:
    openai_fake.script(reply(decision()), status(503, retry_after_ms=50), disconnect(), reply(decision()))
    async with brain(openai_fake) as b:
        assert not (await b.propose(request(turn=1))).fallback
        result = await b.propose(request(turn=2))
    assert not result.fallback and result.ledger.retries == 2 and openai_fake.calls == 4


async def test_a_prepared_request_to_a_closed_port_is_a_failed_connection(openai_fake: FakeOpenAI) -> None:
    openai_fake.script(reply(decision()))
    async with brain(openai_fake, backoff=()) as b:
        assert not (await b.propose(request(turn=1))).fallback
        b.transport._url_parsed = httpx2.URL("http://127.0.0.1:9/v1/chat/completions")  # discard port: refused
        with pytest.raises(BrainTransientError, match="connection to the model failed"):
            await b.transport.call(Turn(request(turn=2), None, anyio.current_time() + 5), [
                {"role": "user", "content": "Namaste"}])


def test_a_client_that_signs_each_request_takes_the_sdks_way_every_time() -> None:
    from privates import fixed_headers

    plain = sdk_client(api_key="test", base_url="http://127.0.0.1:9/v1", timeout_s=1)
    assert fixed_headers(plain)

    async def key() -> str:
        return "refreshed"

    refreshed = openai.AsyncOpenAI(api_key=key, base_url="http://127.0.0.1:9/v1")
    assert not fixed_headers(refreshed)
    assert not fixed_headers(object())  # not an SDK client at all
