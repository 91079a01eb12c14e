"""A fake OpenAI chat-completions server that speaks the real wire format, for tests and benchmarks.

`POST /v1/chat/completions` answers like the OpenAI API: a `chat.completion` object, or with
`"stream": true` a server-sent-event stream of `chat.completion.chunk` objects ending in
`data: [DONE]` (with a usage chunk first when `stream_options.include_usage` is set). What each
request gets is scripted: tests queue `Behaviour`s (a reply with a time to first token and a
token rate, an HTTP error with or without Retry-After, a hang, a connection cut mid-stream); once
the queue is empty the server's default behaviour answers. Every request is recorded (its body,
when it arrived, when its first token and the first character of `reply_text` were sent) so tests
can count retries, time the backoff and read the prompts.

In tests it runs in a thread (`FakeOpenAI.start()`, or the `openai_fake` fixture). Benchmarks run
it as its own process:

    python -m tests.openai_server --port 0 --ttft-ms 400 --tokens-per-s 50

which prints `listening on http://127.0.0.1:PORT/v1` and serves the records at
`GET /_fake/requests` (and forgets them at `POST /_fake/reset`).
"""

from __future__ import annotations

import argparse
import json
import logging
import socket
import sys
import threading
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from brain.partial_json import FieldExtractor
from tests import fake_decision
from tests.openai_audio import fake_speech, fake_transcriptions
from voice.sentences import SentenceSplitter
from voice.speaker import FIRST_CLAUSE_WORDS

Content = str | dict[str, Any] | Callable[[dict[str, Any]], "str | dict[str, Any]"] | None


@dataclass
class Behaviour:
    """What the fake model does with one request."""

    kind: str = "reply"  # reply | status | hang | disconnect | garbage (a non-JSON SSE event) | stream_error
    content: Content = None  # the model's text; a dict is sent as JSON; None: the default
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    message: str = ""
    ttft_ms: float | None = None  # time to first token; None: the server's default
    tokens_per_s: float | None = None  # pacing after the first token; None: default; 0: none
    chars_per_token: int = 4
    confidence: float | None = None  # transcriptions: the segments' probability (None: no segments)
    disconnect_after_chars: int = 0  # for "disconnect": cut the stream after this much content
    hang_s: float = 3600.0
    gzip: bool = False  # the body sent with content-encoding: gzip (a stream flushed per event)


def reply(content: Content = None, **options: Any) -> Behaviour:
    return Behaviour(kind="reply", content=content, **options)


def status(code: int, *, retry_after: float | str | None = None,
           retry_after_ms: float | None = None, message: str = "") -> Behaviour:
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["retry-after"] = str(retry_after)
    if retry_after_ms is not None:
        headers["retry-after-ms"] = str(retry_after_ms)
    return Behaviour(kind="status", status=code, headers=headers,
                     message=message or f"fake error {code}")


def hang(seconds: float = 3600.0) -> Behaviour:
    return Behaviour(kind="hang", hang_s=seconds)


def garbage() -> Behaviour:
    return Behaviour(kind="garbage")


def stream_error(after_chars: int = 30, message: str = "The server had an error while processing "
                 "your request.", content: Content = None, **options: Any) -> Behaviour:
    """Some content, then an error event in the stream, as the API sends when a model fails
    mid-answer (`data: {"error": {...}}`), then the end of the stream."""
    return Behaviour(kind="stream_error", content=content, disconnect_after_chars=after_chars,
                     message=message, **options)


def disconnect(after_chars: int = 30, content: Content = None, **options: Any) -> Behaviour:
    return Behaviour(kind="disconnect", content=content, disconnect_after_chars=after_chars,
                     **options)


@dataclass
class Recorded:
    """One request as the fake server saw it."""

    id: str
    body: dict[str, Any]
    kind: str
    received_at: float  # time.monotonic() in the server's process
    received_wall: float  # time.time(), comparable across processes on one machine
    first_token_wall: float | None = None
    first_reply_char_wall: float | None = None
    first_sentence_wall: float | None = None  # when reply_text's first sentence was complete (voice)
    first_clause_wall: float | None = None  # when its first clause was (a mark and a space, or its end)
    first_piece_wall: float | None = None  # when the speaker's first piece (a clause of 4 words) was
    finished_wall: float | None = None
    content: str = ""
    headers: dict[str, str] = field(default_factory=dict)  # the request's, names in lower case

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    def contents(self, role: str) -> list[str]:
        return [str(m.get("content", "")) for m in self.messages if m.get("role") == role]

    @property
    def system(self) -> str:
        return next(iter(self.contents("system")), "")

    @property
    def user(self) -> str:
        """The first user message (the delimited blocks)."""
        return next(iter(self.contents("user")), "")

    @property
    def last_user(self) -> str:
        users = self.contents("user")
        return users[-1] if users else ""

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def response_format(self) -> Any:
        return self.body.get("response_format")

    def public(self) -> dict[str, Any]:
        return {**asdict(self), "last_user": self.last_user,
                "headers": {k: v for k, v in self.headers.items() if k != "authorization"}}


def _render(content: Content, body: dict[str, Any]) -> str:
    if content is None:
        content = fake_decision.mirror_decision
    if callable(content):
        content = content(body)
    if isinstance(content, dict):
        return json.dumps(content, ensure_ascii=False)
    return str(content)


class _AbortStream(Exception):
    """Raised inside the streaming response to cut the connection mid-body."""


class _QuietAbort(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        info = record.exc_info
        return not (info and isinstance(info[1], _AbortStream))


# --------------------------------------------------------------------------- the server


class FakeOpenAI:
    """The fake server's state and app; `start()` runs it on 127.0.0.1 in a thread."""

    def __init__(self, *, ttft_ms: float = 0.0, tokens_per_s: float = 0.0, host: str = "127.0.0.1",
                 port: int = 0, default: Behaviour | None = None) -> None:
        self.ttft_ms = ttft_ms
        self.tokens_per_s = tokens_per_s
        self.host = host
        self.port = port
        self.default = default or Behaviour()
        self.queue: deque[Behaviour] = deque()
        # Picks the behaviour for a request by its body before the queue is looked at (None: the queue's
        # turn), so that a test can tell calls of different kinds apart (a running summary, a turn).
        self.route: Callable[[dict[str, Any]], Behaviour | None] | None = None
        self.requests: list[Recorded] = []
        # Speech (docs/voice.md): `audio.transcriptions` and `audio.speech`, scripted like chat.
        self.stt_queue: deque[Behaviour] = deque()
        self.tts_queue: deque[Behaviour] = deque()
        self.stt_text = "Namaste bhaiya, how much are the tomatoes?"
        self.stt_ms = 0.0  # latency of a transcription
        self.tts_ttfb_ms = 0.0  # time to the first audio byte of a speech request
        self.tts_realtime = 0.0  # speech streamed this many times faster than real time (0: at once)
        self.audio_requests: list[dict[str, Any]] = []
        self.app = Starlette(routes=[
            Route("/v1/audio/transcriptions", self._transcriptions, methods=["POST"]),
            Route("/v1/audio/speech", self._speech, methods=["POST"]),
            Route("/v1/chat/completions", self._completions, methods=["POST"]),
            Route("/_fake/requests", self._records, methods=["GET"]),
            Route("/_fake/audio", self._audio_records, methods=["GET"]),
            Route("/_fake/reset", self._reset, methods=["POST"]),
        ])
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        logging.getLogger("uvicorn.error").addFilter(_QuietAbort())

    # ------------------------------------------------------------------ scripting

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def script(self, *behaviours: Behaviour) -> None:
        """Queue what the next requests get, in order."""
        self.queue.extend(behaviours)

    def reset(self) -> None:
        self.route = None
        self.queue.clear()
        self.requests.clear()
        self.stt_queue.clear()
        self.tts_queue.clear()
        self.audio_requests.clear()
        self.stt_text = "Namaste bhaiya, how much are the tomatoes?"
        self.stt_ms = self.tts_ttfb_ms = self.tts_realtime = 0.0
        self.default = Behaviour()
        self.ttft_ms = 0.0
        self.tokens_per_s = 0.0

    @property
    def calls(self) -> int:
        return len(self.requests)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeOpenAI:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_config=None, access_log=False, lifespan="off",
                                timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="fake-openai", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the fake OpenAI server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    # ------------------------------------------------------------------ routes

    async def _records(self, request: Request) -> JSONResponse:
        return JSONResponse([r.public() for r in list(self.requests)])

    async def _audio_records(self, request: Request) -> JSONResponse:
        return JSONResponse(list(self.audio_requests))

    async def _reset(self, request: Request) -> JSONResponse:
        self.queue.clear()
        self.requests.clear()
        self.audio_requests.clear()
        return JSONResponse({"ok": True})

    async def _transcriptions(self, request: Request) -> Any:
        behaviour = self.stt_queue.popleft() if self.stt_queue else Behaviour(confidence=0.95)
        return await fake_transcriptions(self, request, behaviour)

    async def _speech(self, request: Request) -> Any:
        return await fake_speech(self, request, self.tts_queue.popleft() if self.tts_queue else Behaviour())

    async def _completions(self, request: Request) -> Any:
        arrived, arrived_wall = time.monotonic(), time.time()  # before reading the body
        body = await request.json()
        behaviour = self.route(body) if self.route is not None else None
        if behaviour is None:
            behaviour = self.queue.popleft() if self.queue else self.default
        record = Recorded(id=f"chatcmpl-{uuid.uuid4().hex[:24]}", body=body, kind=behaviour.kind,
                          received_at=arrived, received_wall=arrived_wall, headers=dict(request.headers))
        self.requests.append(record)
        if behaviour.kind == "status":
            error = {"message": behaviour.message, "type": "fake_error", "param": None,
                     "code": str(behaviour.status)}
            return JSONResponse({"error": error}, status_code=behaviour.status,
                                headers=behaviour.headers)
        if behaviour.kind == "hang":
            await _hang(request, behaviour.hang_s)
            return Response(status_code=504)
        record.content = _render(behaviour.content, body)
        ttft = (self.ttft_ms if behaviour.ttft_ms is None else behaviour.ttft_ms) / 1000
        rate = self.tokens_per_s if behaviour.tokens_per_s is None else behaviour.tokens_per_s
        step = max(1, behaviour.chars_per_token)
        tokens = [record.content[i:i + step] for i in range(0, len(record.content), step)] or [""]
        usage = {"prompt_tokens": sum(len(str(m.get("content", ""))) for m in record.messages) // 4,
                 "completion_tokens": len(tokens)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if not body.get("stream"):
            if behaviour.kind == "garbage":
                return Response(b'{"choices": [{"this is not json', media_type="application/json")
            gap = (len(tokens) - 1) / rate if rate else 0.0
            await anyio.sleep(ttft + gap)
            record.first_token_wall = record.first_reply_char_wall = time.time()
            record.finished_wall = time.time()
            data = json.dumps({"id": record.id, "object": "chat.completion", "created": int(time.time()),
                               "model": body.get("model", "fake"), "usage": usage,
                               "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                            "message": {"role": "assistant", "content": record.content}}]}).encode()
            packed = behaviour.gzip
            return Response(zlib.compress(data, wbits=31) if packed else data, media_type="application/json",
                            headers={"content-encoding": "gzip"} if packed else None)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return _SSE(record, tokens, ttft, rate, behaviour, usage if include_usage else None)


async def _hang(request: Request, seconds: float) -> None:
    """Send nothing until the client gives up (or `seconds` pass)."""
    with anyio.move_on_after(seconds):
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                return


class _SSE:
    """A streamed completion, sent by hand so it can be paced and cut off mid-body."""

    def __init__(self, record: Recorded, tokens: list[str], ttft: float, rate: float,
                 behaviour: Behaviour, usage: dict[str, int] | None) -> None:
        self.record = record
        self.tokens = tokens
        self.ttft = ttft
        self.rate = rate
        self.behaviour = behaviour
        self.usage = usage

    def _chunk(self, delta: dict[str, Any], finish: str | None = None,
               usage: dict[str, int] | None = None, choices: bool = True) -> bytes:
        payload: dict[str, Any] = {
            "id": self.record.id, "object": "chat.completion.chunk", "created": int(time.time()),
            "model": self.record.body.get("model", "fake"),
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
            if choices else [],
        }
        if self.usage is not None:
            payload["usage"] = usage
        return b"data: " + json.dumps(payload).encode() + b"\n\n"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
                   *([(b"content-encoding", b"gzip")] if self.behaviour.gzip else [])]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        aborted = False
        async with anyio.create_task_group() as tg:

            async def watch() -> None:  # stop sending once the client has gone
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()

            tg.start_soon(watch)
            try:
                await self._send_body(send)
            except _AbortStream:
                aborted = True
            tg.cancel_scope.cancel()
        if aborted:
            raise _AbortStream("cut by the script")  # uvicorn drops the connection mid-body

    async def _send_body(self, send: Any) -> None:
        packer = zlib.compressobj(wbits=31) if self.behaviour.gzip else None

        async def body(data: bytes, more: bool = True) -> None:
            if packer is not None:  # each event decodable as it comes, as a streaming server sends it
                data = packer.compress(data) + packer.flush(zlib.Z_SYNC_FLUSH if more else zlib.Z_FINISH)
            await send({"type": "http.response.body", "body": data, "more_body": more})

        record, behaviour = self.record, self.behaviour
        extractor = FieldExtractor("reply_text")
        sentences = SentenceSplitter()
        pieces = SentenceSplitter(FIRST_CLAUSE_WORDS)
        words = ""  # reply_text so far
        start = anyio.current_time() + self.ttft
        sent = 0
        await anyio.sleep(self.ttft)
        for index, token in enumerate(self.tokens):
            if index and self.rate:
                await anyio.sleep(max(0.0, start + index / self.rate - anyio.current_time()))
            delta: dict[str, Any] = {"content": token}
            if index == 0:
                delta["role"] = "assistant"
            if behaviour.kind == "garbage":
                await body(b"data: {this is not json\n\n")
                break
            await body(self._chunk(delta))
            now = time.time()
            if record.first_token_wall is None:
                record.first_token_wall = now
            piece = extractor.feed(token)
            if record.first_reply_char_wall is None and piece:
                record.first_reply_char_wall = now
            if record.first_sentence_wall is None and (
                    (piece and sentences.feed(piece)) or (extractor.done and record.first_reply_char_wall)):
                record.first_sentence_wall = now
            if record.first_piece_wall is None and (
                    (piece and pieces.feed(piece)) or (extractor.done and record.first_reply_char_wall)):
                record.first_piece_wall = now
            if piece:
                words += piece
            if record.first_clause_wall is None and (
                    fake_decision.CLAUSE_END.search(words) or (extractor.done and record.first_reply_char_wall)):
                record.first_clause_wall = now
            sent += len(token)
            if behaviour.kind == "disconnect" and sent >= behaviour.disconnect_after_chars:
                raise _AbortStream("cut by the script")
            if behaviour.kind == "stream_error" and sent >= behaviour.disconnect_after_chars:
                error = {"message": behaviour.message, "type": "server_error", "code": None}
                await body(b"data: " + json.dumps({"error": error}).encode() + b"\n\n")
                await body(b"", more=False)
                record.finished_wall = time.time()
                return
        await body(self._chunk({}, finish="stop"))
        if self.usage is not None:
            await body(self._chunk({}, usage=self.usage, choices=False))
        await body(b"data: [DONE]\n\n")
        await body(b"", more=False)
        record.finished_wall = time.time()


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.openai_server", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--ttft-ms", type=float, default=400.0, help="time to first token")
    parser.add_argument("--tokens-per-s", type=float, default=50.0, help="0 sends all at once")
    parser.add_argument("--numbers-first", action="store_true",
                        help="write the decision's numbers and stage before reply_text (the prompt asks after)")
    parser.add_argument("--new-lines", action="store_true",
                        help="every decision's line a new one, as a real model's (not one of three)")
    parser.add_argument("--stt-ms", type=float, default=0.0, help="latency of a transcription")
    parser.add_argument("--stt-text", default="", help="what every transcription hears (empty: the default line)")
    parser.add_argument("--tts-ttfb-ms", type=float, default=0.0, help="speech: time to the first byte")
    parser.add_argument("--tts-realtime", type=float, default=0.0,
                        help="speech streamed this many times faster than real time (0: at once)")
    args = parser.parse_args(argv)
    fake_decision.NUMBERS_FIRST = args.numbers_first
    fake_decision.NEW_LINES = args.new_lines
    fake = FakeOpenAI(ttft_ms=args.ttft_ms, tokens_per_s=args.tokens_per_s, host=args.host,
                      port=args.port)
    fake.stt_ms, fake.tts_ttfb_ms, fake.tts_realtime = args.stt_ms, args.tts_ttfb_ms, args.tts_realtime
    fake.stt_text = args.stt_text or fake.stt_text
    fake.start()
    print(f"listening on {fake.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
