"""`ChatTransport`: one logical model call over the openai SDK, with the retry policy and deadlines.

`ChatTransport.call` sends the messages to an OpenAI-compatible chat-completions endpoint and
returns the model's whole text. When streaming, the `reply_text` value is pulled out of the JSON
as it arrives (`brain.partial_json`) and pushed to the turn's sink (`brain.turn.Turn.push`), so
the learner hears the first words long before the object is complete.

Failures (`brain.errors`): 5xx, 429, timeouts and dropped connections (including a stream cut
mid-way, or an event that is not JSON at all) are retried twice, after `backoff` (1 s, then 2 s),
or after the server's Retry-After when that is shorter than the time left. Any other 4xx raises
`BrainServiceError` at once. An attempt that has no first token within `attempt_timeout_s` is
given up so the turn has room to retry it; once tokens flow only the turn's deadline counts.
Text streamed by an attempt that fails is withdrawn before the retry.

SDK exceptions are translated into the brain's own in exactly one place, `_translate`, called
from one `except` clause with `raise ... from exc`. The SDK's own retries are off
(`max_retries=0`, see `sdk_client`) so that this policy is the only one.
"""

from __future__ import annotations

import email.utils
import logging
import math
import ssl
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, cast

import aiohttp
import anyio
import httpx2
import openai
import orjson

import privates
from brain.errors import BrainServiceError, BrainTransientError
from brain.partial_json import FieldExtractor
from brain.sse import EventReader
from brain.turn import Turn
from schemas.decision import HEAD_FIELDS

log = logging.getLogger("samvad.brain")

DEFAULT_BACKOFF = (1.0, 2.0)  # seconds before the first and the second retry
_DRAIN_S = 1.0  # at most this long to read what follows [DONE]
_TAIL_REST_S = 0.25  # between reads once the reply's text is complete (see `_read_stream`)
# Headers of a request that depend on the request, not the client (see `ChatTransport._post`).
_PER_REQUEST_HEADERS = frozenset({b"host", b"content-length", b"x-stainless-read-timeout"})


def sdk_client(*, api_key: str, base_url: str | None, timeout_s: float) -> openai.AsyncOpenAI:
    """The SDK client, with its own retries off: `ChatTransport.call` is the only retry policy.

    Its timeout is a backstop, a second past the turn's budget; the turn's deadline is what
    normally ends a slow call. Its HTTP transport is aiohttp, the SDK's documented alternative
    (`openai[aiohttp]`, `DefaultAioHttpClient`): a streamed answer arrives as a hundred or so small
    packets, and aiohttp's parser takes each one in C and buffers it, where the default transport
    runs a Python parser and an async-generator stack per packet; a streamed turn costs about half
    the client CPU (docs/performance.md). Its exceptions reach us as the SDK's, as before.
    """
    return openai.AsyncOpenAI(
        api_key=api_key, base_url=base_url or None, max_retries=0, timeout=timeout_s + 1.0,
        http_client=openai.DefaultAioHttpClient(timeout=timeout_s + 1.0))


# --------------------------------------------------------------------------- the one boundary


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, or `retry-after` in seconds or as
    an HTTP date), or None."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            value = float(raw_ms) / 1000
            if math.isfinite(value) and value >= 0:
                return value
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        value = when.timestamp() - time.time()
        return max(0.0, value)
    return value if math.isfinite(value) and value >= 0 else None


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "..."


def _failed_connection(exc: BaseException) -> OSError | None:
    """The socket error behind `exc`, if a refused or dropped connection (not a timeout) caused it.

    The SDK's aiohttp transport maps every aiohttp connection error, a refused connection
    included, to a connect *timeout*; the original error is still in the chain of causes.
    """
    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, OSError) and not isinstance(cause, TimeoutError):
            return cause
        cause = cause.__cause__
    return None


def _translate(exc: openai.OpenAIError) -> BrainServiceError | BrainTransientError:
    """Map an SDK exception to the brain's own. Called from exactly one `except` clause."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = f"HTTP {status}: {_short(exc.message)}"
        if status == 429 or status >= 500:
            wait = retry_after(exc.response.headers)
            return BrainTransientError(message, status=status, retry_after=wait)
        return BrainServiceError(message, status=status, request_id=exc.request_id)
    if isinstance(exc, openai.APITimeoutError) and _failed_connection(exc) is None:
        return BrainTransientError("the model request timed out")
    if isinstance(exc, openai.APIConnectionError):  # APITimeoutError is one too
        cause = _failed_connection(exc) or exc.__cause__
        detail = f": {_short(str(cause), 120)}" if cause is not None and str(cause) else ""
        return BrainTransientError(f"connection to the model failed{detail}")
    if isinstance(exc, openai.APIError):  # an error event inside a stream, or a malformed response
        return BrainTransientError(f"the model service reported an error: {_short(exc.message)}")
    return BrainServiceError(f"{type(exc).__name__}: {_short(str(exc))}")


# --------------------------------------------------------------------------- the calls


class ChatTransport:
    """Chat-completions calls with one request body, one retry policy and per-attempt limits."""

    def __init__(
        self,
        *,
        client: openai.AsyncOpenAI,
        model: str,
        temperature: float,
        max_tokens: int,
        stream: bool,
        response_format: dict[str, Any],
        backoff: Sequence[float] = DEFAULT_BACKOFF,
        attempt_timeout_s: float | None = None,
    ) -> None:
        self.client = client
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.stream = stream
        self.response_format = response_format
        self.backoff = tuple(float(b) for b in backoff)
        self.attempt_timeout_s = attempt_timeout_s
        # A streamed answer is read without the SDK's read timeout: aiohttp rearms it (a timer) on
        # every packet, and what it bounds is bounded anyway by the turn's deadline, and before
        # the first token by `attempt_timeout_s` (docs/performance.md). Connect, write and pool
        # keep the client's limits.
        limits = client.timeout
        if isinstance(limits, httpx2.Timeout):
            self._stream_timeout = httpx2.Timeout(connect=limits.connect, read=None, write=limits.write,
                                                  pool=limits.pool)
        else:
            self._stream_timeout = httpx2.Timeout(limits, read=None)
        # The endpoint as the SDK itself would join it to the base URL (`_prepare_url`), worked out
        # once: given a relative path, the SDK parses it and copies the base URL on every call.
        base = client.base_url
        self._url = str(base.copy_with(raw_path=base.raw_path + b"chat/completions"))
        # The headers of every request, learned from the SDK's first (`_post`), for a client whose
        # requests all carry the same ones; the timeouts as the SDK puts them on a request.
        self._prepared = privates.fixed_headers(client)
        self._headers: dict[bool, httpx2.Headers] | None = None  # with and without a read timeout
        self._url_parsed = httpx2.URL(self._url)  # httpx2 parses a URL given as a string on every request
        whole = limits if isinstance(limits, httpx2.Timeout) else httpx2.Timeout(limits)
        self._timeouts = {True: whole.as_dict(), False: self._stream_timeout.as_dict()}
        self._read_timeout = None if whole.read is None else str(whole.read).encode()

    async def aclose(self) -> None:
        await self.client.close()

    async def call(self, turn: Turn, messages: list[dict[str, str]]) -> str:
        """One logical model call, with up to `len(backoff)` retries on transient failures."""
        attempt = 0
        body = self._body(messages)  # the same bytes for every attempt
        while True:
            try:
                return await self._attempt(turn, body, attempt)
            except BrainTransientError as exc:
                await turn.withdraw("retrying after a failed model call")
                if attempt >= len(self.backoff):
                    raise BrainTransientError(
                        f"{exc} (gave up after {attempt} retries)", status=exc.status) from exc
                delay = self._delay(exc, attempt, turn.remaining)
                if delay is None:
                    raise BrainTransientError(
                        f"{exc} (no time left to retry before the deadline)", status=exc.status
                    ) from exc
                turn.retries += 1
                extra = turn.log_extra(attempt=attempt + 1, status=exc.status, retry_in_s=delay)
                log.warning("model call failed, retrying in %.2f s: %s", delay, exc, extra=extra)
                await anyio.sleep(delay)
                attempt += 1

    def _delay(self, exc: BrainTransientError, attempt: int, remaining: float) -> float | None:
        """How long to wait before the next attempt; None when that would outlive the deadline.

        The server's Retry-After wins over the backoff whenever it fits in the time left (even when
        it is shorter than the backoff); one that does not fit means giving up now.
        """
        if exc.retry_after is not None:
            return exc.retry_after if exc.retry_after < remaining else None
        wait = self.backoff[attempt]
        return wait if wait < remaining else None

    async def _attempt(self, turn: Turn, body: bytes, attempt: int) -> str:
        turn.llm_calls += 1
        turn.first_token_ms = None  # reported for the attempt whose answer is used
        started = time.perf_counter()
        outcome = "cancelled"
        try:
            try:
                if self.attempt_timeout_s is None:
                    text = await self._request(turn, body, started)
                else:
                    # A hung attempt is given up after `attempt_timeout_s` without a first token, so
                    # the turn's budget has room to retry it; once tokens flow, only the budget counts.
                    answer: str | None = None
                    limit = min(self.attempt_timeout_s, max(turn.remaining, 0.0))
                    with anyio.CancelScope(deadline=anyio.current_time() + limit) as waiting:
                        turn.waiting = waiting
                        try:
                            answer = await self._request(turn, body, started)
                        finally:
                            turn.waiting = None
                    if answer is None:
                        raise TimeoutError
                    text = answer
            except openai.OpenAIError as exc:
                raise _translate(exc) from exc
            except ValueError as exc:  # a stream event or body that is not JSON at all
                raise BrainTransientError(f"malformed response from the model service: "
                                          f"{_short(str(exc), 120)}") from exc
            except TimeoutError as exc:
                raise BrainTransientError("the model attempt timed out") from exc
            outcome = "ok"
            return text
        except BaseException as exc:
            outcome = f"{type(exc).__name__}: {exc}" if isinstance(exc, Exception) else "cancelled"
            raise
        finally:
            log.info("llm call", extra=turn.log_extra(
                model=self.model, stream=self.stream, attempt=attempt + 1, call=turn.llm_calls,
                outcome=outcome, ms=round((time.perf_counter() - started) * 1000, 1)))

    def _body(self, messages: list[dict[str, str]]) -> bytes:
        """The request body of one call, encoded once with orjson."""
        body: dict[str, Any] = {
            "model": self.model, "messages": messages, "temperature": self.temperature,
            "max_tokens": self.max_tokens, "response_format": self.response_format,
        }
        if self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return orjson.dumps(body)

    async def _post(self, body: bytes, *, stream: bool, key: str = "samvad", read_limit: bool = True
                    ) -> httpx2.Response:
        """POST the body to chat completions through the SDK's generic request method.

        `client.post` is the SDK's documented way to call an endpoint with a body of one's own:
        its headers, authentication, retries (off here, see `sdk_client`) and error statuses
        (`openai.APIStatusError` and the rest) are those of `chat.completions.create`. What it
        skips is what this transport never used: the typed walk of every parameter (aliases,
        dates, files; about 0.4 ms for a 7 KB prompt), the stdlib JSON encoder (orjson
        instead) and the typed response wrappers. The answer is the HTTP response itself; a
        streamed one is still open, for `_read_stream` or `read_body`, and the caller closes it.
        `read_limit=False` drops the read timeout (for a streamed answer, see `__init__`). `key` is
        the request's idempotency key: the SDK makes one (a `uuid4`) for every request that has
        none, and would send it only to a service that asks for one; ours names the attempt.
        After the first request, one of a client whose requests all carry the same headers goes
        the prepared way (`_send_prepared`), which such a client sends no idempotency key on.
        """
        if self._headers is not None and stream:
            return await self._send_prepared(body, read_limit)
        response = await self.client.post(
            self._url, cast_to=httpx2.Response, content=body, stream=stream,
            options={"idempotency_key": key} if read_limit else {"idempotency_key": key,
                                                                 "timeout": self._stream_timeout},
            stream_cls=openai.AsyncStream[Any])  # for the overloads only: an httpx2.Response comes back as it is
        sent = cast(httpx2.Response, response)
        if self._prepared and self._headers is None:
            # What httpx2 works out for each request itself (the host, the body's length), and the
            # read timeout, which depends on the call, are left out; the rest is the SDK's.
            kept = [(name, value) for name, value in sent.request.headers.raw
                    if name.lower() not in _PER_REQUEST_HEADERS]
            timed = kept if self._read_timeout is None else [*kept, (b"x-stainless-read-timeout",
                                                                     self._read_timeout)]
            self._headers = {True: httpx2.Headers(timed), False: httpx2.Headers(kept)}
        return sent

    async def _send_prepared(self, body: bytes, read_limit: bool) -> httpx2.Response:
        """POST the body with the headers of the SDK's first request, through the SDK's own HTTP
        client, raising what `client.post` raises (issue #33; privates/sdk.py). `client.post` builds
        each request from nothing (two pydantic copies of its options, every header merged again,
        the URL): 0.2 ms of a 0.5 ms call. For a client whose requests all carry the same headers
        (`privates.fixed_headers`) it is the same request; a test holds the two ways' headers equal.
        """
        assert self._headers is not None
        request = httpx2.Request("POST", self._url_parsed, headers=self._headers[read_limit], content=body,
                                 extensions={"timeout": self._timeouts[read_limit]})
        try:
            response = await privates.http_client(self.client).send(request, stream=True)
        except httpx2.TimeoutException as exc:
            raise openai.APITimeoutError(request=request) from exc
        except (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream) as exc:
            raise openai.APIConnectionError(request=request) from exc
        if not response.is_success:
            try:
                await response.aread()
            finally:
                await response.aclose()
            raise privates.status_error(self.client, response) from None
        return response

    async def _request(self, turn: Turn, body: bytes, started: float) -> str:
        """One chat-completions exchange through the SDK; returns the model's text."""
        if not self.stream:
            # The raw response, read with orjson: the SDK still sends the request and raises its
            # errors, but its typed `ChatCompletion` (about a tenth of a call's CPU) is not built
            # for the one string and the usage counts that are wanted from it. The SDK is asked to
            # leave the body unread so that `read_body` takes it from aiohttp's buffer in one call.
            raw = await self._post(body, stream=True, key=_attempt_key(turn))
            try:
                data = await read_body(raw)
            except (httpx2.TimeoutException, aiohttp.ServerTimeoutError) as exc:
                raise openai.APITimeoutError(request=raw.request) from exc
            except (httpx2.RequestError, aiohttp.ClientError, ssl.SSLError) as exc:
                raise openai.APIConnectionError(request=raw.request) from exc
            finally:
                with anyio.CancelScope(shield=True):
                    await raw.aclose()
            turn.first_token_ms = round((time.perf_counter() - started) * 1000, 3)
            turn.tokens_flowing()
            completion = orjson.loads(data)  # not JSON: ValueError, a malformed response
            if not isinstance(completion, dict):
                raise BrainTransientError("malformed response from the model service")
            turn.add_usage(completion.get("usage"))
            choices = completion.get("choices")
            first = choices[0] if isinstance(choices, list) and choices else None
            message = first.get("message") if isinstance(first, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            return content if isinstance(content, str) else ""
        # The stream is read through the SDK's raw streaming response: the SDK still builds and
        # sends the request and raises its own exceptions for an error status, but the body's
        # server-sent events are parsed here (`brain.sse`, orjson) instead of one typed or dict
        # chunk per token through the SDK's decoder. Transport failures while reading the body
        # are mapped to the SDK's exceptions, and an error event to its `APIError`, as the SDK's
        # own stream does, so that `_translate` stays the one boundary.
        parts: list[str] = []
        response = await self._post(body, stream=True, key=_attempt_key(turn), read_limit=False)
        try:
            await self._read_stream(turn, response, started, parts)
        except (httpx2.TimeoutException, aiohttp.ServerTimeoutError) as exc:
            raise openai.APITimeoutError(request=response.request) from exc
        except (httpx2.RequestError, aiohttp.ClientError, ssl.SSLError, anyio.EndOfStream) as exc:
            raise openai.APIConnectionError(request=response.request) from exc
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
        await turn.flush()
        return "".join(parts)

    async def _read_stream(self, turn: Turn, response: httpx2.Response, started: float,
                           parts: list[str]) -> None:
        """Read the events of one streamed answer into `parts`, pushing `reply_text` as it comes.

        A model sends every token in a packet of its own, a hundred or more per answer, and each
        packet read as it comes costs a wake-up of the loop, a `read(2)`, aiohttp's parser and
        this coroutine: most of the CPU of a streamed turn (docs/performance.md). Only the first
        words cannot wait: the first whole clause, which is when the session can say them
        (session/spoken.py). Once it is out, the socket is left unread between reads: for the
        delta interval (AI_DELTA_INTERVAL_MS, 40 ms) while the reply's text is coming, since the
        deltas are grouped that finely anyway, and for `_TAIL_REST_S` (250 ms) once the text and
        the decision's numbers and stage (reported to the turn as soon as they are read, for the
        words that wait on them) are complete, when nothing the learner sees waits on the rest
        of the object but the final `reply`, whose mood and stage land while the vendor is still
        speaking the text. The rest of the object (the reasoning, the suggested answer) is most of
        the tokens; at 50 tokens/s
        and 250 ms it takes a twelfth of the reads it would token by token, 60% fewer than at 100 ms.
        What arrives meanwhile waits in the kernel and is taken in one read. (Only waiting between
        reads, with the socket still read, saved little: aiohttp reads and parses every packet.)
        """
        aiohttp_response = privates.aiohttp_response(response)
        resting = privates.ReadingRest(aiohttp_response) if aiohttp_response is not None else None
        try:
            await self._read_events(turn, response, aiohttp_response, resting, parts, started)
        finally:
            if resting is not None:
                resting.close()  # never leave the socket paused: it may go back to aiohttp's pool

    async def _read_events(self, turn: Turn, response: httpx2.Response, aiohttp_response: Any | None,
                           resting: privates.ReadingRest | None, parts: list[str], started: float) -> None:
        extractor = FieldExtractor("reply_text", HEAD_FIELDS)
        reader = EventReader()
        chunks = body_pieces(response, aiohttp_response).__aiter__()
        async for data in chunks:
            for event, payload in reader.feed(data):
                if payload.startswith(b"[DONE]"):
                    # Read the body to its end so that the connection can be reused.
                    with anyio.move_on_after(_DRAIN_S):
                        async for _ in chunks:
                            pass
                    return
                chunk = orjson.loads(payload)  # not JSON: ValueError, a malformed response
                if not isinstance(chunk, dict):
                    raise BrainTransientError("malformed stream event from the model service")
                if chunk.get("error") or event == "error":
                    raise openai.APIError(_stream_error(chunk), response.request,
                                          body=chunk.get("error"))
                usage = chunk.get("usage")
                if usage:
                    turn.add_usage(usage)
                for choice in chunk.get("choices") or ():
                    piece = _content(choice)
                    if not piece:
                        continue
                    if turn.first_token_ms is None:
                        turn.first_token_ms = round((time.perf_counter() - started) * 1000, 3)
                        turn.tokens_flowing()
                    parts.append(piece)
                    if not (extractor.done and extractor.head_done):
                        text_was_done = extractor.done
                        await turn.push(extractor.feed(piece))
                        if extractor.done and not text_was_done:
                            await turn.flush()  # the reply's text is complete: nothing may wait
                            await turn.text_done()
                        if extractor.head_done and not turn.head_sent:
                            await turn.decided(extractor.values)
            if resting is not None and (turn.clause_out or extractor.done):
                # What was read is handled; the next read can wait for more to arrive. Not before
                # the voice's first piece is out (brain/turn.py, `clause_out`): it waits for it.
                # The socket is paused and a timer resumes it, so the next read wakes this task
                # once, with what arrived meanwhile (`privates.ReadingRest`).
                resting.rest(_TAIL_REST_S if extractor.done and extractor.head_done else turn.interval_s)


async def body_pieces(response: httpx2.Response, aiohttp_response: Any | None) -> AsyncIterator[bytes]:
    """The streamed body as it arrives.

    Read through the SDK, a piece passes four async generators (httpx2's decoding and byte
    counting, the SDK's stream binding, its aiohttp adapter) on its way from aiohttp's buffer.
    A body sent as it is (no content-encoding: a stream of server-sent events usually is) is read
    from that buffer directly, whatever is there in one piece; aiohttp's errors are the
    transport's to map, as they are for the SDK (`_request`). An encoded body goes the SDK's way.
    """
    content = privates.plain_content(response, aiohttp_response)
    if content is None:
        async for data in response.aiter_bytes():
            yield data
        return
    if not privates.readable(content):
        while data := await content.readany():
            yield data
        return
    # As `readany`, without aiohttp's bookkeeping per HTTP chunk: a token each (privates/aio.py).
    while data := await privates.read_buffered(content):
        yield data


async def read_body(response: httpx2.Response) -> bytes:
    """The whole body of a response the SDK left open, read like `body_pieces` reads a stream: from
    aiohttp's buffer in one call when it is sent as it is, else through `Response.aread`."""
    content = privates.plain_content(response, privates.aiohttp_response(response))
    return await response.aread() if content is None else await content.read()


def _attempt_key(turn: Turn) -> str:
    """The idempotency key of one attempt at a turn's call: its session, turn and call number."""
    return f"samvad-{turn.request.session_id}-{turn.request.turn}-{turn.llm_calls}"


def _stream_error(chunk: dict[str, Any]) -> str:
    error = chunk.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) and message else "An error occurred during streaming"


def _content(choice: object) -> str | None:
    """The text a streamed choice adds to the first (index 0) answer, if any."""
    if not isinstance(choice, dict) or choice.get("index", 0) != 0:
        return None
    delta = choice.get("delta")
    piece = delta.get("content") if isinstance(delta, dict) else None
    return piece if isinstance(piece, str) else None
