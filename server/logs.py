"""Structured logging: one JSON object per line, with the session id and turn when known.

Level policy: ERROR for bugs and crashes nobody can catch; WARNING for rule overrides, brain
fallbacks, dropped consumers and mirror trouble; INFO for session and connection lifecycle and
one record per turn that called a model (its ledger: calls, tokens, timings); DEBUG for per-frame
traffic and the record of a turn without a model call (the rule brain's: /metrics has its count
and timings).
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
import time
from typing import Any

import orjson

# Record attributes that are not ours to print; uvicorn adds an ANSI-coloured copy of its message.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName", "color_message"}


_TOKEN = re.compile(r"(token=)[^&\s\"']+", re.IGNORECASE)


def redact(text: str) -> str:
    """Hide the value of any `token=` query parameter (session tokens ride in WebSocket URLs)."""
    return _TOKEN.sub(r"\1[redacted]", text) if "oken=" in text else text


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": redact(record.getMessage()),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


class DropConnectionChatter(logging.Filter):
    """Drop uvicorn's own record of every WebSocket it accepts, refuses or closes.

    They repeat the server's "connection opened"/"connection closed"/"connection refused" records
    without the session or role, three extra lines per session, and the accept line carries the
    whole URL, session token included. Installed on the `uvicorn.error` logger.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg
        if not isinstance(msg, str):
            return True
        return msg not in ("connection open", "connection closed") and not msg.startswith('%s - "WebSocket ')


class PassBatchingHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that writes the records of one pass of the event loop in one write.

    A turn logs a record or two and a session a few more; a write and a flush each was one
    `write(2)` per record, about a tenth of the server's system calls under bot load. On the loop's
    thread a record is formatted at once and kept until the end of the current pass
    (`call_soon`), so the lines reach the stream in order and a few microseconds later, never
    later than the pass. Anywhere else (start-up, worker threads, shutdown) what is kept is
    written first and the record right after it, as `logging.StreamHandler` does; `flush` and
    `close` (called by `logging.shutdown` at exit) write what is kept.
    """

    def __init__(self, stream: Any = None) -> None:
        super().__init__(stream)
        self._kept: list[str] = []
        self._flushing: asyncio.AbstractEventLoop | None = None  # the loop a flush is due on

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
        except Exception:
            self.handleError(record)
            return
        self._kept.append(line)
        loop = asyncio._get_running_loop()
        if loop is None:
            self.flush()
        elif self._flushing is not loop:  # (a loop that ended before its pass did keeps nothing waiting)
            self._flushing = loop
            loop.call_soon(self.flush)

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            self._flushing = None
            if self._kept:
                text, self._kept = "".join(self._kept), []
                try:
                    self.stream.write(text)
                except Exception:  # a closed or full stream: the records are lost, not the server
                    pass
            if self.stream:
                self.stream.flush()

    def close(self) -> None:
        self.flush()
        super().close()


def configure_logging(level: str = "INFO", stream: Any = None) -> None:
    handler = PassBatchingHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("uvicorn.access", "neo4j", "httpx", "httpx2", "openai"):  # httpx2: the SDK's client
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    uvicorn_error = logging.getLogger("uvicorn.error")
    uvicorn_error.filters[:] = [f for f in uvicorn_error.filters if not isinstance(f, DropConnectionChatter)]
    uvicorn_error.addFilter(DropConnectionChatter())
    logging.Formatter.converter = time.gmtime
    # What `JsonFormatter` never prints, so no record pays for it: the caller's file and line (a
    # stack walk), the thread and the process (the "Optimization" section of the logging HOWTO).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
