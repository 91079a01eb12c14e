"""`OpenAIBrain`: Ramesh played by any OpenAI-compatible chat model (OpenAI, vLLM, Ollama, ...).

One `propose` call is one vendor turn:

1. Prepare: build the system prompt while the cultural notes are retrieved (`_prepare`), then the
   delimited user message (`brain.prompt`).
2. Call the model in JSON mode (`response_format={"type": "json_object"}`, or a strict
   `json_schema` when asked). When streaming (the default) the `reply_text` value is pulled out of
   the JSON as it arrives (`brain.partial_json`) and pushed to the session's `DeltaSink`, so the
   learner hears the first words long before the object is complete.
3. Validate the whole text as an `AIDecision`. If it is not valid JSON or breaks the schema, ask
   once more, showing the model its own answer and naming the error; withdraw anything streamed
   first. A second bad answer falls back.

Failures (`brain.errors`): 5xx, 429, timeouts and dropped connections (including a stream cut
mid-way) are retried twice, after `backoff` (1 s, then 2 s), or after the server's Retry-After
when that is shorter than the time left. Any other 4xx raises `BrainServiceError` at once. The
whole call -- attempts, waits and the corrective re-ask -- lives within `AI_TIMEOUT_MS`. When the
retries run out, the time is up or the re-ask fails too, `propose` returns an in-character
fallback line with the stage and happiness unchanged (`fallback=True`). The SDK's own retries are
off (`max_retries=0`) so that this policy is the only one.

Only the `reply_text` of a validated decision, and the pieces of `reply_text` streamed before it,
ever reach a client; the raw model text goes back to the model (in a re-ask) and nowhere else.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import anyio
import anyio.lowlevel
import openai
from pydantic import ValidationError

from brain.culture import retrieve_customs
from brain.errors import BrainOutputError, BrainServiceError, BrainTransientError
from brain.partial_json import FieldExtractor
from brain.prompt import PROMPT_VERSION, build_system_prompt, build_user_message
from schemas.brain import BrainRequest, BrainResult, DeltaSink, Ledger
from schemas.decision import AIDecision
from schemas.enums import Mood, OfferAssessment, Stage


class LLMSettings(Protocol):
    """The settings this brain reads (server.config.Settings has them; brain/ does not import it)."""

    OPENAI_API_KEY: str
    OPENAI_MODEL: str
    OPENAI_BASE_URL: str
    AI_TIMEOUT_MS: int
    AI_FIRST_TOKEN_TIMEOUT_MS: int
    AI_TEMPERATURE: float
    AI_MAX_TOKENS: int
    AI_STREAM: bool
    AI_JSON_SCHEMA: bool

log = logging.getLogger("samvad.brain")

DEFAULT_BACKOFF = (1.0, 2.0)  # seconds before the first and the second retry
MAX_FEEDBACK_CHARS = 600
MAX_ECHO_CHARS = 4000  # how much of a bad answer is shown back to the model in a re-ask

# Said when the model cannot be reached in time; the stage and happiness stay as they were.
FALLBACK_LINES = (
    "Arre, one second, my friend, the man next door wants change... haan, tell me again?",
    "Wait, wait, a cow is eating my spinach! Sorry, sorry, what were you saying?",
    "Just a moment, let me weigh this for the lady... yes, yes, I am listening, say it again?",
)

Retriever = Callable[[BrainRequest], Awaitable[str]]


async def customs_retriever(request: BrainRequest) -> str:
    """The default retriever: the scenario's customs notes, ranked in-process (no I/O)."""
    return retrieve_customs(request)


def fallback_line(request: BrainRequest) -> str:
    return FALLBACK_LINES[request.turn % len(FALLBACK_LINES)]


def decision_schema_format() -> dict[str, Any]:
    """A strict `json_schema` response format for models that support structured outputs.

    Strict mode wants every property listed as required and no extra ones; ranges are left to the
    pydantic validation that follows every call.
    """

    def one_of(values: type[Stage] | type[Mood] | type[OfferAssessment]) -> dict[str, Any]:
        return {"type": "string", "enum": [v.value for v in values]}

    properties: dict[str, Any] = {
        "reply_text": {"type": "string"},
        "happiness_score": {"type": "integer"},
        "negotiation_state": one_of(Stage),
        "vendor_mood": one_of(Mood),
        "counter_price": {"type": ["integer", "null"]},
        "offer_assessment": one_of(OfferAssessment),
        "internal_reasoning": {"type": "string"},
        "suggested_user_response": {"type": "string"},
    }
    return {
        "type": "json_schema",
        "json_schema": {
            "name": "vendor_decision",
            "strict": True,
            "schema": {"type": "object", "properties": properties,
                       "required": list(properties), "additionalProperties": False},
        },
    }


# --------------------------------------------------------------------------- the one boundary


def _retry_after(headers: Mapping[str, str]) -> float | None:
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


def _translate(exc: openai.OpenAIError) -> BrainServiceError | BrainTransientError:
    """Map an SDK exception to the brain's own. Called from exactly one `except` clause."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = f"HTTP {status}: {_short(exc.message)}"
        if status == 429 or status >= 500:
            wait = _retry_after(exc.response.headers)
            return BrainTransientError(message, status=status, retry_after=wait)
        return BrainServiceError(message, status=status, request_id=exc.request_id)
    if isinstance(exc, openai.APITimeoutError):
        return BrainTransientError("the model request timed out")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        detail = f": {_short(str(cause), 120)}" if cause is not None and str(cause) else ""
        return BrainTransientError(f"connection to the model failed{detail}")
    if isinstance(exc, openai.APIError):  # an error event inside a stream, or a malformed response
        return BrainTransientError(f"the model service reported an error: {_short(exc.message)}")
    return BrainServiceError(f"{type(exc).__name__}: {_short(str(exc))}")


# --------------------------------------------------------------------------- output validation


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:6]:
        where = ".".join(str(p) for p in err["loc"]) or "object"
        got = err.get("input")
        shown = ""
        if err["type"] != "missing" and isinstance(got, int | float | bool | type(None)):
            shown = f" (got {json.dumps(got)})"
        elif err["type"] != "missing" and isinstance(got, str) and len(got) <= 40:
            shown = f" (got {json.dumps(got)})"
        parts.append(f"{where}: {err['msg']}{shown}")
    return "; ".join(parts)


def parse_decision(text: str) -> AIDecision:
    """Validate a model's whole answer, or raise `BrainOutputError` saying what is wrong."""
    body = text.strip()
    if body.startswith("```"):  # some local models fence JSON even in JSON mode
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0].strip()
    if not body:
        raise BrainOutputError("the answer was empty; it must be one JSON object")
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise BrainOutputError(f"the answer is not valid JSON: {exc.msg} at {where}") from None
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise BrainOutputError(f"the answer must be a JSON object, not a JSON {kind}")
    try:
        decision = AIDecision.model_validate(data)
    except ValidationError as exc:
        raise BrainOutputError(f"the JSON breaks the schema: {_describe(exc)}") from None
    if not decision.reply_text.strip():
        raise BrainOutputError("the JSON breaks the schema: reply_text is blank")
    try:
        decision.reply_text.encode("utf-8")
    except UnicodeEncodeError:
        raise BrainOutputError(
            "the JSON breaks the schema: reply_text has an unpaired surrogate") from None
    return decision


def corrective_message(feedback: str) -> str:
    return (
        "Your previous answer could not be used: "
        f"{feedback[:MAX_FEEDBACK_CHARS]}. "
        "Answer again with only the corrected JSON object: every key from OUTPUT_SCHEMA, in the "
        "same order with reply_text first, the values within the stated limits, and nothing "
        "before or after the object. Keep what Ramesh says if it was fine."
    )


# --------------------------------------------------------------------------- one turn


class _Turn:
    """What one `propose` call has done so far: counters, timings and the text on the wire."""

    def __init__(self, request: BrainRequest, sink: DeltaSink | None, deadline: float) -> None:
        self.request = request
        self.sink = sink
        self.deadline = deadline  # anyio clock
        self.started = time.perf_counter()
        self.llm_calls = 0
        self.retries = 0
        self.corrective_asks = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.first_token_ms: float | None = None
        self.first_delta_ms: float | None = None
        self.live: list[str] = []  # pushed to the sink and not withdrawn
        self.streamed = False
        self.waiting: anyio.CancelScope | None = None  # the current attempt's wait for its first token

    @property
    def remaining(self) -> float:
        return self.deadline - anyio.current_time()

    def tokens_flowing(self) -> None:
        """The first token is in: the attempt's first-token limit no longer applies."""
        if self.waiting is not None:
            self.waiting.deadline = math.inf

    def log_extra(self, **more: object) -> dict[str, object]:
        return {"session_id": self.request.session_id, "turn": self.request.turn,
                "prompt_version": PROMPT_VERSION, **more}

    def add_usage(self, usage: object) -> None:
        if isinstance(usage, dict):
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)

    async def push(self, text: str) -> None:
        if self.sink is None or not text:
            return
        if self.first_delta_ms is None:
            self.first_delta_ms = round((time.perf_counter() - self.started) * 1000, 3)
        self.live.append(text)
        self.streamed = True
        await self.sink.delta(text)

    async def withdraw(self, reason: str) -> None:
        if self.sink is not None and self.live:
            await self.sink.withdraw(reason)
            self.live.clear()

    def ledger(self) -> Ledger:
        return Ledger(
            llm_calls=self.llm_calls, retries=self.retries, corrective_asks=self.corrective_asks,
            prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
            first_token_ms=self.first_token_ms, first_delta_ms=self.first_delta_ms,
            brain_ms=round((time.perf_counter() - self.started) * 1000, 3),
            prompt_version=PROMPT_VERSION,
        )


class OpenAIBrain:
    """The `Brain` protocol over an OpenAI-compatible chat-completions endpoint."""

    name = "openai"

    def __init__(
        self,
        *,
        api_key: str,
        model: str = "gpt-4o",
        base_url: str | None = None,
        timeout_ms: int = 10_000,
        temperature: float = 0.7,
        max_tokens: int = 200,
        stream: bool = True,
        json_schema: bool = False,
        backoff: Sequence[float] = DEFAULT_BACKOFF,
        attempt_timeout_s: float | None = None,
        retriever: Retriever | None = None,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        self.model = model
        self.timeout_s = timeout_ms / 1000
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.stream = stream
        self.json_schema = json_schema
        self.backoff = tuple(float(b) for b in backoff)
        self.attempt_timeout_s = attempt_timeout_s
        self.retriever: Retriever = retriever or customs_retriever
        self.response_format: dict[str, Any] = (
            decision_schema_format() if json_schema else {"type": "json_object"})
        # The SDK's retries are off: `_call` is the only retry policy. Its timeout is a backstop;
        # the deadline in `propose` is what normally ends a slow call.
        self.client = client or openai.AsyncOpenAI(
            api_key=api_key, base_url=base_url or None, max_retries=0, timeout=self.timeout_s + 1.0)

    @classmethod
    def from_settings(cls, settings: LLMSettings) -> OpenAIBrain:
        return cls(
            api_key=settings.OPENAI_API_KEY,
            model=settings.OPENAI_MODEL,
            base_url=settings.OPENAI_BASE_URL or None,
            timeout_ms=settings.AI_TIMEOUT_MS,
            attempt_timeout_s=settings.AI_FIRST_TOKEN_TIMEOUT_MS / 1000 or None,
            temperature=settings.AI_TEMPERATURE,
            max_tokens=settings.AI_MAX_TOKENS,
            stream=settings.AI_STREAM,
            json_schema=settings.AI_JSON_SCHEMA,
        )

    async def aclose(self) -> None:
        await self.client.close()

    # ------------------------------------------------------------------ the protocol

    async def propose(
        self, request: BrainRequest, on_delta: DeltaSink | None = None
    ) -> BrainResult:
        turn = _Turn(request, on_delta, anyio.current_time() + self.timeout_s)
        decision: AIDecision | None = None
        error: str | None = None
        with anyio.CancelScope(deadline=turn.deadline) as scope:
            try:
                messages = await self._prepare(request)
                decision = await self._decide(turn, messages)
            except (BrainTransientError, BrainOutputError) as exc:
                error = str(exc)
            except BrainServiceError as exc:
                await turn.withdraw("the model service refused the request")
                log.error("model call refused: %s", exc, extra=turn.log_extra(status=exc.status))
                raise
        if scope.cancelled_caught:
            error = f"no valid answer within AI_TIMEOUT_MS ({round(self.timeout_s * 1000)} ms)"
        if decision is None:
            await turn.withdraw("fallback")
            line = fallback_line(request)
            # A fallback changes nothing: the session keeps its stage and happiness.
            keep = AIDecision(reply_text=line, happiness_score=request.happiness_score,
                              negotiation_state=request.stage, vendor_mood=request.vendor_mood,
                              internal_reasoning="fallback")
            return BrainResult(
                decision=keep,
                fallback=True, streamed=turn.streamed, ledger=turn.ledger(), error=error,
            )
        if turn.live and "".join(turn.live) != decision.reply_text:
            await turn.withdraw("the final reply differs")
        return BrainResult(decision=decision, streamed=turn.streamed, ledger=turn.ledger())

    # ------------------------------------------------------------------ steps

    async def _prepare(self, request: BrainRequest) -> list[dict[str, str]]:
        """Build the system prompt while the cultural notes are being retrieved.

        The two are independent, so they run in one task group: the retriever is started first
        and given a checkpoint to issue whatever I/O it does, and the system prompt is built while
        that I/O is in flight. The user message needs the notes, so it is built after both.

        With the default in-process retriever there is no I/O to overlap: both steps are pure
        Python, a few tens of microseconds each, and they simply run one after the other. They are
        deliberately not pushed to worker threads: under the GIL two pure-Python functions cannot
        run at the same time, and a thread hop costs more than either function. A retriever that
        fails, or notes supplied by the caller, never hold up the turn.
        """
        notes = [request.rag_context]
        if not request.rag_context.strip():

            async def fetch() -> None:
                try:
                    notes[0] = await self.retriever(request)
                except Exception as exc:  # retrieval is optional: go on without notes
                    log.warning("cultural context retrieval failed: %s", exc,
                                extra={"session_id": request.session_id, "turn": request.turn})

            async with anyio.create_task_group() as tg:
                tg.start_soon(fetch)
                await anyio.lowlevel.checkpoint()  # let the retriever start its I/O
                system = build_system_prompt(request)
        else:
            system = build_system_prompt(request)
        return [{"role": "system", "content": system},
                {"role": "user", "content": build_user_message(request, rag_context=notes[0])}]

    async def _decide(self, turn: _Turn, messages: list[dict[str, str]]) -> AIDecision:
        text = await self._call(turn, messages)
        try:
            return parse_decision(text)
        except BrainOutputError as exc:
            feedback = exc.feedback
        log.warning("model answer invalid, asking again: %s", feedback, extra=turn.log_extra())
        await turn.withdraw("corrective re-ask")
        turn.corrective_asks += 1
        again = [*messages,
                 {"role": "assistant", "content": text[:MAX_ECHO_CHARS]},
                 {"role": "user", "content": corrective_message(feedback)}]
        text = await self._call(turn, again)
        try:
            return parse_decision(text)
        except BrainOutputError as exc:
            raise BrainOutputError(
                f"invalid answer after a corrective re-ask: {exc.feedback}") from None

    async def _call(self, turn: _Turn, messages: list[dict[str, str]]) -> str:
        """One logical model call, with up to `len(backoff)` retries on transient failures."""
        attempt = 0
        while True:
            try:
                return await self._attempt(turn, messages, attempt)
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

    async def _attempt(self, turn: _Turn, messages: list[dict[str, str]], attempt: int) -> str:
        turn.llm_calls += 1
        turn.first_token_ms = None  # reported for the attempt whose answer is used
        started = time.perf_counter()
        outcome = "cancelled"
        body: dict[str, Any] = {
            "model": self.model, "messages": messages, "temperature": self.temperature,
            "max_tokens": self.max_tokens, "response_format": self.response_format,
        }
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

    async def _request(self, turn: _Turn, body: dict[str, Any], started: float) -> str:
        """One chat-completions exchange through the SDK; returns the model's text."""
        if not self.stream:
            completion = await self.client.chat.completions.create(**body)
            turn.first_token_ms = round((time.perf_counter() - started) * 1000, 3)
            turn.tokens_flowing()
            if completion.usage is not None:
                turn.add_usage(completion.usage.model_dump())
            if not completion.choices:
                return ""
            return completion.choices[0].message.content or ""
        # The stream goes through the SDK's generic `post` with `cast_to=object`: the SDK still
        # builds the request, decodes the server-sent events, raises on error events and maps
        # transport failures to its exceptions, but hands each chunk over as the parsed JSON
        # dict instead of building a `ChatCompletionChunk` model per token -- that construction
        # was about 85% of the brain's CPU time on a streamed turn.
        stream = await self.client.post(
            "/chat/completions", cast_to=object, stream=True, stream_cls=openai.AsyncStream[object],
            body={**body, "stream": True, "stream_options": {"include_usage": True}})
        extractor = FieldExtractor("reply_text")
        parts: list[str] = []
        first = True
        async with stream:
            async for chunk in stream:
                if not isinstance(chunk, dict):
                    raise BrainTransientError("malformed stream event from the model service")
                usage = chunk.get("usage")
                if usage:
                    turn.add_usage(usage)
                for choice in chunk.get("choices") or ():
                    piece = _content(choice)
                    if not piece:
                        continue
                    if first:
                        turn.first_token_ms = round((time.perf_counter() - started) * 1000, 3)
                        turn.tokens_flowing()
                        first = False
                    parts.append(piece)
                    if not extractor.done:
                        await turn.push(extractor.feed(piece))
        return "".join(parts)


def _content(choice: object) -> str | None:
    """The text a streamed choice adds to the first (index 0) answer, if any."""
    if not isinstance(choice, dict) or choice.get("index", 0) != 0:
        return None
    delta = choice.get("delta")
    piece = delta.get("content") if isinstance(delta, dict) else None
    return piece if isinstance(piece, str) else None
