"""`OpenAIBrain`: Ramesh played by any OpenAI-compatible chat model (OpenAI, vLLM, Ollama, ...).

One `propose` call is one vendor turn, tracked by a `brain.turn.Turn`:

1. Prepare: build the system prompt while the cultural notes are retrieved (`_prepare`), then the
   delimited user message (`brain.prompt`).
2. Call the model (`brain.transport`) in JSON mode, or with a strict `json_schema` when asked
   (`brain.decision.response_format`). When streaming (the default) the `reply_text` value is
   pushed to the session's `DeltaSink` while the JSON arrives, so the learner hears the first
   words long before the object is complete.
3. Validate the whole text as an `AIDecision` (`brain.decision.parse_decision`). If it is not
   valid JSON or breaks the schema, ask once more, showing the model its own answer and naming
   the error; withdraw anything streamed first. A second bad answer falls back.

The whole call -- attempts, the transport's retries and waits, and the corrective re-ask -- lives
within `AI_TIMEOUT_MS`. A 4xx other than 429 raises `BrainServiceError` (`brain.errors`). When the
retries run out, the time is up or the re-ask fails too, `propose` returns an in-character
fallback line with the stage and happiness unchanged (`fallback=True`).

Only the `reply_text` of a validated decision, and the pieces of `reply_text` streamed before it,
ever reach a client; the raw model text goes back to the model (in a re-ask) and nowhere else.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import anyio
import anyio.lowlevel
import openai

from brain.decision import parse_decision, reask_messages, response_format
from brain.errors import BrainOutputError, BrainServiceError, BrainTransientError
from brain.knowledge.retriever import Retriever, knowledge_retriever, no_notes
from brain.prompt import DEFAULT_HISTORY_BUDGET, build_system_prompt, build_user_message
from brain.summary import SUMMARY_MAX_TOKENS, SUMMARY_TEMPERATURE, LLMSummarizer
from brain.transport import DEFAULT_BACKOFF, ChatTransport, sdk_client
from brain.turn import DELTA_INTERVAL_MS, Turn
from brain.window import counter_for
from schemas.brain import BrainRequest, BrainResult, DeltaSink
from schemas.decision import AIDecision
from schemas.summary import SummaryAsk, SummaryResult


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
    AI_DELTA_INTERVAL_MS: int
    HISTORY_TOKEN_BUDGET: int


log = logging.getLogger("samvad.brain")

# Said when the model cannot be reached in time; the stage and happiness stay as they were.
FALLBACK_LINES = (
    "Arre, one second, my friend, the man next door wants change... haan, tell me again?",
    "Wait, wait, a cow is eating my spinach! Sorry, sorry, what were you saying?",
    "Just a moment, let me weigh this for the lady... yes, yes, I am listening, say it again?",
)



def fallback_line(request: BrainRequest) -> str:
    return FALLBACK_LINES[request.turn % len(FALLBACK_LINES)]


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
        delta_interval_ms: int = DELTA_INTERVAL_MS,
        history_budget: int = DEFAULT_HISTORY_BUDGET,
    ) -> None:
        self.timeout_s = timeout_ms / 1000
        self.history_budget = history_budget
        self.counter = counter_for(model)  # loaded here, once, not on a learner's turn
        self.delta_interval_s = delta_interval_ms / 1000
        self.retriever: Retriever = retriever or knowledge_retriever()
        self.transport = ChatTransport(
            client=client or sdk_client(api_key=api_key, base_url=base_url, timeout_s=self.timeout_s),
            model=model, temperature=temperature, max_tokens=max_tokens, stream=stream,
            response_format=response_format(json_schema), backoff=backoff,
            attempt_timeout_s=attempt_timeout_s,
        )
        # The running summary (docs/memory.md): the same client and retry policy, plain text, no stream.
        self.summarizer = LLMSummarizer(ChatTransport(
            client=self.transport.client, model=model, temperature=SUMMARY_TEMPERATURE,
            max_tokens=SUMMARY_MAX_TOKENS, stream=False, response_format={"type": "text"}, backoff=backoff,
            attempt_timeout_s=attempt_timeout_s,
        ), self.timeout_s)

    @classmethod
    def from_settings(cls, settings: LLMSettings, *, retriever: Retriever | None = None) -> OpenAIBrain:
        return cls(
            retriever=retriever,
            api_key=settings.OPENAI_API_KEY,
            model=settings.OPENAI_MODEL,
            base_url=settings.OPENAI_BASE_URL or None,
            timeout_ms=settings.AI_TIMEOUT_MS,
            attempt_timeout_s=settings.AI_FIRST_TOKEN_TIMEOUT_MS / 1000 or None,
            temperature=settings.AI_TEMPERATURE,
            max_tokens=settings.AI_MAX_TOKENS,
            stream=settings.AI_STREAM,
            json_schema=settings.AI_JSON_SCHEMA,
            delta_interval_ms=settings.AI_DELTA_INTERVAL_MS,
            history_budget=settings.HISTORY_TOKEN_BUDGET,
        )

    async def aclose(self) -> None:
        await self.transport.aclose()

    # ------------------------------------------------------------------ the protocol

    async def propose(
        self, request: BrainRequest, on_delta: DeltaSink | None = None
    ) -> BrainResult:
        turn = Turn(request, on_delta, anyio.current_time() + self.timeout_s, self.delta_interval_s)
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

    propose_inline = None  # every answer is a model call

    @property
    def write_summary(self) -> Callable[[SummaryAsk], Awaitable[SummaryResult]]:
        """`summarize`: the model writes the running summary (docs/memory.md)."""
        return self.summarize

    async def summarize(self, ask: SummaryAsk) -> SummaryResult:
        """The session's running summary, refreshed every 10 turns in the background: one extra call."""
        return await self.summarizer.summarize(ask)

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
        fails, or notes supplied by the caller, never hold up the turn. Behind the response
        policy (`brain.policy`, which retrieves the notes itself) the retriever is `no_notes`, and
        no task is started for it: the turn goes on to the model without yielding the loop.
        """
        notes = [request.rag_context]
        if not request.rag_context.strip() and self.retriever is not no_notes:

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
                {"role": "user", "content": build_user_message(request, rag_context=notes[0],
                                                               history_budget=self.history_budget,
                                                               counter=self.counter)}]

    async def _decide(self, turn: Turn, messages: list[dict[str, str]]) -> AIDecision:
        text = await self.transport.call(turn, messages)
        try:
            return parse_decision(text)
        except BrainOutputError as exc:
            feedback = exc.feedback
        log.warning("model answer invalid, asking again: %s", feedback, extra=turn.log_extra())
        await turn.withdraw("corrective re-ask")
        turn.corrective_asks += 1
        text = await self.transport.call(turn, reask_messages(messages, text, feedback))
        try:
            return parse_decision(text)
        except BrainOutputError as exc:
            raise BrainOutputError(
                f"invalid answer after a corrective re-ask: {exc.feedback}") from None
