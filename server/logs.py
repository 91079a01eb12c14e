"""Structured logging: one JSON object per line, with the session id and turn when known.

Level policy: ERROR for bugs and crashes nobody can catch; WARNING for rule overrides, brain
fallbacks, dropped consumers and mirror trouble; INFO for session and connection lifecycle and
one record per turn (with its timings); DEBUG for per-frame traffic.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

# Record attributes that are not ours to print; uvicorn adds an ANSI-coloured copy of its message.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName", "color_message"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


def configure_logging(level: str = "INFO", stream: Any = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("uvicorn.access", "neo4j", "httpx", "openai"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    logging.Formatter.converter = time.gmtime
