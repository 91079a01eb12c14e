"""The socket protocol's documents (schemas/asyncapi.py) stay in step with the frame models.

The committed docs/asyncapi.json and docs/protocol.schema.json are what the models make now; the JSON
Schema is a valid 2020-12 schema that real frames and events of a played session pass and broken
ones fail; the AsyncAPI document has the 3.0 structure (every reference resolves, every message is
on the channel and in an operation, every component schema is a valid JSON Schema) and is served
as `GET /asyncapi.json`.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema_rs
import pytest

from schemas import asyncapi as documents
from schemas.errors import CloseCode, ErrorCode
from tests.fakes import ScriptedBrain
from tests.servers import create, player, running_server

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", sorted(documents.FILES))
def test_the_committed_documents_are_what_the_models_make(name: str) -> None:
    committed = (ROOT / "docs" / name).read_text("utf-8")
    assert committed == documents.rendered()[name], (
        f"docs/{name} is out of step with schemas/frames.py: run `python -m schemas.asyncapi --write`")


def validator(definition: str) -> jsonschema_rs.Validator:
    """A validator of one of the JSON Schema's definitions (`ClientFrame`, `ServerEvent`, ...)."""
    schema = documents.json_schema()
    return jsonschema_rs.validator_for({**schema, "oneOf": [{"$ref": f"#/$defs/{definition}"}]})


def test_the_json_schema_is_a_valid_2020_12_schema_of_every_frame_and_event() -> None:
    schema = documents.json_schema()
    jsonschema_rs.meta.validate(schema)
    defs = schema["$defs"]
    assert [d["$ref"].rsplit("/", 1)[1] for d in defs["ClientFrame"]["oneOf"]] == [
        m.__name__ for m in documents.client_frames().values()]
    assert set(documents.client_frames()) >= {"transcript", "scene", "resume", "command", "playback", "silence",
                                               "ping", "audio"}
    assert set(documents.server_events()) >= {"welcome", "ack", "pong", "error", "reply", "mood", "stage",
                                               "session.ended", "tips", "reply.audio", "speech"}
    assert [c["const"] for c in defs["CloseCode"]["oneOf"]] == [int(code) for code in CloseCode]
    assert defs["ErrorCodes"]["enum"] == [code.value for code in ErrorCode]


def test_the_json_schema_refuses_what_the_codec_refuses() -> None:
    frames = validator("ClientFrame")
    assert frames.is_valid({"type": "transcript", "id": "t1", "text": "Namaste"})
    assert not frames.is_valid({"type": "transcript", "id": "t1", "text": "Namaste", "extra": 1})  # extra="forbid"
    assert not frames.is_valid({"type": "transcript", "id": "has space", "text": "Namaste"})  # the id's pattern
    assert not frames.is_valid({"type": "teleport", "id": "t1"})  # no such frame
    events = validator("ServerEvent")
    assert events.is_valid({"type": "ack", "session_id": "s", "id": "t1", "duplicate": False})
    assert not events.is_valid({"type": "ack", "session_id": "s", "id": "t1", "duplicate": "no"})


@pytest.mark.anyio
async def test_every_frame_and_event_of_a_played_session_passes_the_json_schema() -> None:
    frames, events = validator("ClientFrame"), validator("ServerEvent")
    sent = [{"type": "scene", "id": "s1", "object_grabbed": "Tomato"},
            {"type": "transcript", "id": "t1", "text": "Namaste bhaiya, tamatar kitne ka hai?"},
            {"type": "ping", "id": "p1", "t": 1.5},
            {"type": "command", "id": "c1", "name": "hint"},
            {"type": "command", "id": "c2", "name": "repeat"},
            {"type": "transcript", "id": "t2", "text": "I will give you 20 rupees"},
            {"type": "command", "id": "c3", "name": "undo"},
            {"type": "command", "id": "c4", "name": "dance"},  # refused: an error event
            {"type": "command", "id": "c5", "name": "stop"}]
    async with running_server(brain=ScriptedBrain()) as served:
        created = await create(served)
        async with await player(served, created) as c:
            await c.recv()
            for frame in sent:
                assert frames.is_valid(frame), frame
                await c.send(frame)
                await c.quiet(0.3)
            await c.quiet(0.5)
        async with httpx.AsyncClient() as http:
            served_document = (await http.get(f"{served.base_url}/asyncapi.json")).json()
    kinds = {event["type"] for event in c.seen}
    assert kinds >= {"welcome", "ack", "reply", "tips", "pong", "hint", "repeat", "undo", "error",
                     "session.ended"}, kinds
    wrong = [event for event in c.seen if not events.is_valid(event)]
    assert wrong == []
    assert served_document == documents.asyncapi()


def references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from references(value)
    elif isinstance(node, list):
        for item in node:
            yield from references(item)


def resolve(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), f"{ref}: only references inside the document"
    node: Any = document
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def test_the_asyncapi_document_has_the_3_0_structure() -> None:
    document = json.loads((ROOT / "docs" / "asyncapi.json").read_text("utf-8"))
    assert document["asyncapi"] == "3.0.0"
    assert document["info"]["title"] and document["info"]["version"] == documents.PROTOCOL_VERSION
    for ref in references(document):
        resolve(document, ref)  # a KeyError names a dangling reference
    channel = document["channels"]["session"]
    assert channel["address"] == "/ws/sessions/{session_id}" and set(channel["parameters"]) == {"session_id"}
    assert set(channel["bindings"]["ws"]["query"]["properties"]) == {"token", "voice"}
    messages = document["components"]["messages"]
    assert set(channel["messages"]) == set(messages)
    assert {m["name"] for m in messages.values()} == set(documents.client_frames()) | set(documents.server_events())
    actions = {name: op["action"] for name, op in document["operations"].items()}
    assert actions == {"sendFrame": "receive", "receiveEvent": "send"}
    in_operations = [ref.rsplit("/", 1)[1] for op in document["operations"].values() for ref in
                     (m["$ref"] for m in op["messages"])]
    assert sorted(in_operations) == sorted(messages)
    for op in document["operations"].values():
        assert op["channel"] == {"$ref": "#/channels/session"}
        assert all(m["$ref"].startswith("#/channels/session/messages/") for m in op["messages"])
    for name, schema in document["components"]["schemas"].items():
        jsonschema_rs.meta.validate(schema)  # each is a JSON Schema on its own
        assert not isinstance(schema.get("discriminator"), dict), f"{name}: AsyncAPI names the property"
