"""The socket protocol as documents that client authors generate code from, made from the frame models.

- `json_schema()`: a JSON Schema (2020-12) of every client frame (`ClientFrame`) and server event
  (`ServerEvent`), with the error and close codes, as `$defs`; written to docs/protocol.schema.json.
- `asyncapi()`: an AsyncAPI 3.0 document of the session socket: its address, query parameters and
  subprotocols, one message per frame and event, and the two operations (the client sends frames,
  the server sends events); written to docs/asyncapi.json and served as `GET /asyncapi.json`.

`python -m schemas.asyncapi --write` rewrites both files; tests/test_asyncapi.py fails while either
differs from what the models make. docs/protocol.md stays the prose of the contract.

New frames and events are picked up from the models' own registries, nothing here lists them:
a client frame is a member of `frames.ClientFrame` and `frames.CLIENT_FRAME_TYPES`, a server
event a member of `frames.ServerEvent`, each with a `type: Literal[...]` field.
"""

from __future__ import annotations

import argparse
import json
import pathlib
from functools import cache
from typing import Any, get_args

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from schemas.errors import CloseCode, ErrorCode
from schemas.frames import CLIENT_FRAME_TYPES, ServerEvent

__all__ = ["PROTOCOL_VERSION", "asyncapi", "client_frames", "json_schema", "server_events"]

PROTOCOL_VERSION = "1.0.0"  # samvad.v1: docs/protocol.md's "version 1"
SUBPROTOCOLS = ("samvad.v1.json", "samvad.v1.msgpack")
DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
FILES = {"asyncapi.json": "asyncapi", "protocol.schema.json": "json_schema"}


def client_frames() -> dict[str, type[BaseModel]]:
    """Every client frame by its `type`."""
    return dict(CLIENT_FRAME_TYPES)


def server_events() -> dict[str, type[BaseModel]]:
    """Every server event by its `type` (the members of `ServerEvent`)."""
    events: dict[str, type[BaseModel]] = {}
    for model in get_args(ServerEvent):
        (kind,) = get_args(model.model_fields["type"].annotation)
        events[kind] = model
    return events


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}"}


def _codes() -> dict[str, Any]:
    return {
        "CloseCode": {
            "title": "CloseCode",
            "description": "The application's WebSocket close codes (docs/protocol.md §6 says what each means and "
                           "what a client does; 1002, 1006, 1007, 1009, 1011 and 1012 come from the WebSocket layer).",
            "type": "integer",
            "oneOf": [{"const": int(code), "title": code.name} for code in CloseCode],
        },
        "ErrorCodes": {
            "title": "ErrorCodes",
            "description": "The `code` of an `error` event: the frame was refused and changed nothing "
                           "(docs/protocol.md §6).",
            "type": "string",
            "enum": [code.value for code in ErrorCode],
        },
    }


@cache
def _definitions() -> dict[str, Any]:
    """Every model's schema: client frames as the server reads them, events as it writes them."""
    frames, events = client_frames(), server_events()
    _, top = models_json_schema([(m, "validation") for m in frames.values()]
                                + [(m, "serialization") for m in events.values()],
                                ref_template="#/$defs/{model}")
    defs: dict[str, Any] = dict(top["$defs"])
    defs["ClientFrame"] = {
        "title": "ClientFrame", "description": "A frame a client sends, told apart by `type`.",
        "oneOf": [_ref(m.__name__) for m in frames.values()],
        "discriminator": {"propertyName": "type", "mapping": {k: f"#/$defs/{m.__name__}" for k, m in frames.items()}},
    }
    defs["ServerEvent"] = {
        "title": "ServerEvent", "description": "An event the server sends, told apart by `type`.",
        "oneOf": [_ref(m.__name__) for m in events.values()],
        "discriminator": {"propertyName": "type", "mapping": {k: f"#/$defs/{m.__name__}" for k, m in events.items()}},
    }
    defs.update(_codes())
    return dict(sorted(defs.items()))


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the socket's frames: a frame is a `ClientFrame` or a `ServerEvent`."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"Samvad socket protocol {PROTOCOL_VERSION}",
        "description": "Every frame on the session socket (docs/protocol.md). Generated from schemas/frames.py "
                       "by `python -m schemas.asyncapi --write`; do not edit.",
        "oneOf": [_ref("ClientFrame"), _ref("ServerEvent")],
        "$defs": _definitions(),
    }


def _component(schema: Any) -> Any:
    """A JSON Schema as an AsyncAPI schema object: references into components, and a discriminator
    named by its property (AsyncAPI's form, where OpenAPI's has an object)."""
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                out[key] = value.replace("#/$defs/", "#/components/schemas/")
            elif key == "discriminator" and isinstance(value, dict):
                out[key] = value["propertyName"]
            else:
                out[key] = _component(value)
        return out
    if isinstance(schema, list):
        return [_component(item) for item in schema]
    return schema


def _message(kind: str, model: type[BaseModel]) -> dict[str, Any]:
    return {"name": kind, "title": model.__name__, "summary": (model.__doc__ or kind).strip().split("\n\n")[0],
            "payload": {"$ref": f"#/components/schemas/{model.__name__}"}}


def asyncapi() -> dict[str, Any]:
    """The AsyncAPI 3.0 document of the session socket."""
    frames, events = client_frames(), server_events()
    messages = {f"frame.{k}": _message(k, m) for k, m in frames.items()}
    messages.update({f"event.{k}": _message(k, m) for k, m in events.items()})
    channel_messages = {name: {"$ref": f"#/components/messages/{name}"} for name in messages}
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "Samvad session socket",
            "version": PROTOCOL_VERSION,
            "description": "The real-time conversation socket of Samvad (docs/protocol.md). A client sends frames "
                           "(`frame.*` messages) and receives events (`event.*`). Frames are JSON text with the "
                           "`samvad.v1.json` subprotocol (the default) or msgpack binary with `samvad.v1.msgpack`. "
                           "Generated from schemas/frames.py by `python -m schemas.asyncapi --write`; do not edit.",
        },
        "defaultContentType": "application/json",
        "channels": {
            "session": {
                "address": "/ws/sessions/{session_id}",
                "title": "A session's socket",
                "description": "One negotiation. A player token gives the read-write connection, a spectator token "
                               "a read-only one. Refusals (4401, 4403, 4404) close right after the handshake; "
                               "`CloseCode` lists every code the application closes with.",
                "parameters": {"session_id": {"description": "The `session_id` of `POST /api/sessions`."}},
                "messages": channel_messages,
                "bindings": {"ws": {
                    "bindingVersion": "0.1.0",
                    "method": "GET",
                    "query": {
                        "type": "object",
                        "properties": {
                            "token": {"type": "string", "description": "The session token (player or spectator), "
                                                                       "or send `Authorization: Bearer <token>`."},
                            "voice": {"type": "string", "enum": ["1"], "description": "A player's ask for the "
                                      "vendor's voice as `reply.audio` events (docs/voice.md)."},
                        },
                    },
                    "headers": {
                        "type": "object",
                        "properties": {
                            "Authorization": {"type": "string", "description": "`Bearer <token>`: the session "
                                                                               "token, instead of `?token=`."},
                            "Sec-WebSocket-Protocol": {"type": "string", "enum": list(SUBPROTOCOLS),
                                                       "description": "The wire format; JSON when none is offered."},
                        },
                    },
                }},
            },
        },
        "operations": {
            "sendFrame": {
                "action": "receive",
                "title": "The server receives a client's frames",
                "channel": {"$ref": "#/channels/session"},
                "messages": [{"$ref": f"#/channels/session/messages/{name}"} for name in messages
                             if name.startswith("frame.")],
            },
            "receiveEvent": {
                "action": "send",
                "title": "The server sends the session's events",
                "channel": {"$ref": "#/channels/session"},
                "messages": [{"$ref": f"#/channels/session/messages/{name}"} for name in messages
                             if name.startswith("event.")],
            },
        },
        "components": {"schemas": _component(_definitions()), "messages": messages},
    }


def rendered() -> dict[str, str]:
    """Each file's text as committed: two-space indents, a final newline."""
    documents = {"asyncapi": asyncapi, "json_schema": json_schema}
    return {name: json.dumps(documents[kind](), indent=2, ensure_ascii=False) + "\n" for name, kind in FILES.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m schemas.asyncapi", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write docs/asyncapi.json and docs/protocol.schema.json")
    args = parser.parse_args(argv)
    for name, text in rendered().items():
        if args.write:
            (DOCS / name).write_text(text, "utf-8")
            print(f"wrote docs/{name}")
        else:
            print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
