"""The knowledge routes: the scenario list, playbook uploads, and retrieval for regression tests.

- `GET /api/scenarios`: every scenario pack, with the version new sessions play and what it knows
  (pack files, the active playbook). The studio's routes are server/studio/api.py.
- `POST /api/scenarios/{id}/knowledge` (admin): a multipart upload, the file in the field `file`;
  `replace=true` (form field or query parameter) replaces an active playbook instead of 409.
- `POST /retrieve`: `{"query", "top_k", "scenario"}` answered with seed 004's chunk schema; the
  admin key, or a session token (either role) of a session of that scenario: a playbook's text is
  the operator's, and only its scenario's learners and the operator read it (401 / 403).

Uploads need the admin key, and a server with no `ADMIN_KEY` refuses them outright (unlike the
lobby, which is open in development): a playbook changes what every learner of the scenario is
told. The body must declare its length (411), and one over the 10 MB limit and its form is refused
with 413 before a byte of it is read (server/guard.py); the form's file is spooled to disk past 1 MB
by Starlette's parser. Extraction, chunking, storing and indexing run in a worker thread. docs/knowledge.md
documents every status and error code.
"""

from __future__ import annotations

from typing import Annotated

import anyio
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from brain.knowledge.chunking import MAX_FILE_BYTES, IngestError
from brain.knowledge.library import index_ready
from brain.knowledge.store import PlaybookConflict
from schemas.scenario import DEFAULT_SCENARIO, available_scenarios
from server.auth import TokenError
from server.services import Services, bearer, error_response
from server.studio.store import PackStoreError
from session.protocols import MirrorUnavailable

__all__ = ["knowledge_routes"]

_QUERY_BODY_BYTES = 16 * 1024


class RetrieveRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    query: Annotated[str, StringConstraints(min_length=1, max_length=1000)]
    top_k: int | None = Field(default=None, ge=1, le=20)
    scenario: str = DEFAULT_SCENARIO


def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


async def list_scenarios(request: Request) -> Response:
    services = _services(request)
    knowledge = services.knowledge
    packs = []
    try:
        studio = await services.packs.store.scenarios()
    except PackStoreError:
        studio = []  # the store is down: the shipped packs, in the versions this node knows
    for scenario_id in sorted({*available_scenarios(), *studio}):
        scenario = await services.packs.current(scenario_id)
        if scenario is None:
            continue  # a new scenario with a draft and no published version yet
        await index_ready(knowledge, scenario_id)
        playbook = await anyio.to_thread.run_sync(knowledge.store.active, scenario_id)
        chunks = knowledge.index(scenario_id).chunks
        packs.append({
            "id": scenario_id,
            "title": scenario.title,
            "version": scenario.version,  # the version new sessions play (docs/studio.md)
            "vendor": scenario.vendor.name,
            "place": scenario.vendor.place,
            "languages": [language.value for language in scenario.vendor.languages],
            "voice": scenario.vendor.voice,
            "currency": scenario.currency,
            "items": [item.name for item in scenario.items],
            "knowledge": {
                "pack_chunks": sum(1 for c in chunks if not c.metadata.playbook_version),
                "playbook": None if playbook is None else {
                    "version": playbook.version,
                    "playbook_id": playbook.playbook_id,
                    "source_file": playbook.source_file,
                    "ingested_at": playbook.ingested_at,
                    "chunks": len(playbook.chunks),
                },
            },
        })
    return JSONResponse({"scenarios": packs})


async def upload_knowledge(request: Request) -> Response:
    services = _services(request)
    settings = services.settings
    if not settings.ADMIN_KEY:
        return error_response(403, "admin_key_unset", "set ADMIN_KEY on the server to accept playbook uploads")
    if not services.is_admin(request):
        return error_response(401, "unauthorized", "playbook uploads need the admin key")
    scenario = request.path_params["scenario"]
    if scenario not in available_scenarios():
        return error_response(404, "unknown_scenario", f"no scenario {scenario!r}")
    length = request.headers.get("content-length")
    if length is None or not length.isdigit():
        return error_response(411, "length_required", "send the upload with a Content-Length")
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        return error_response(400, "bad_request", "send multipart/form-data with the file in the field 'file'")
    try:
        async with request.form(max_files=1, max_fields=4, max_part_size=1024) as form:
            upload = form.get("file")
            if not isinstance(upload, UploadFile) or not upload.filename:
                return error_response(400, "bad_request", "the file goes in the form field 'file'")
            data = await upload.read(MAX_FILE_BYTES + 1)
            replace_field = form.get("replace")
            filename = upload.filename.replace("\\", "/").rsplit("/", 1)[-1][:200]
    except MultiPartException as exc:
        return error_response(400, "bad_request", f"unreadable form: {exc.message}")
    replace = _flag(request.query_params.get("replace")) or (
        isinstance(replace_field, str) and _flag(replace_field))
    try:
        playbook = await anyio.to_thread.run_sync(
            lambda: services.knowledge.ingest(scenario, filename, data, replace=replace))
    except IngestError as exc:
        return error_response(422, exc.reason, str(exc))
    except PlaybookConflict as exc:
        return JSONResponse(
            {"error": {"code": "playbook_exists",
                       "message": f"{scenario!r} already has playbook {exc.active.version} "
                                  f"({exc.active.source_file}); upload with replace=true to replace it",
                       "active": {"version": exc.active.version, "source_file": exc.active.source_file}}},
            status_code=409)
    return JSONResponse({
        "scenario": scenario,
        "version": playbook.version,
        "playbook_id": playbook.playbook_id,
        "source_file": playbook.source_file,
        "sha256": playbook.sha256,
        "ingested_at": playbook.ingested_at,
        "chunks": [{"chunk_id": c.chunk_id, "chars": len(c.text_content)} for c in playbook.chunks],
    }, status_code=201)


async def _refuse_retrieve(services: Services, request: Request, scenario: str) -> Response | None:
    """None when the request may read `scenario`'s chunks: the admin, or a token of a session of it."""
    if services.is_admin(request):
        return None
    try:
        claims = services.tokens.verify(bearer(request))
    except TokenError:
        return error_response(401, "unauthorized", "the admin key or a session token is required")
    try:
        actor = await services.registry.get(claims.session_id)
    except MirrorUnavailable as exc:
        return error_response(503, "unavailable", str(exc))
    if actor is None or actor.negotiation.scenario_name != scenario:
        return error_response(403, "forbidden", "this token is not of a session of that scenario")
    return None


async def retrieve(request: Request) -> Response:
    services = _services(request)
    if not services.allow_retrieve(services.client_address(request), bearer(request)):
        return error_response(429, "rate_limited", "too many retrieval requests; slow down")
    body = await request.body()
    if len(body) > _QUERY_BODY_BYTES:
        return error_response(413, "too_large", f"the body limit is {_QUERY_BODY_BYTES} bytes")
    try:
        query = RetrieveRequest.model_validate_json(body or b"{}")
    except ValidationError as exc:
        return error_response(400, "bad_request", exc.errors(include_url=False, include_input=False)[0]["msg"]
                              if exc.errors() else "invalid request")
    refused = await _refuse_retrieve(services, request, query.scenario)
    if refused is not None:
        return refused
    if query.scenario not in available_scenarios():
        return error_response(404, "unknown_scenario", f"no scenario {query.scenario!r}")
    knowledge = services.knowledge
    await index_ready(knowledge, query.scenario)
    hits = knowledge.retrieve(query.scenario, query.query, top_k=query.top_k)
    return JSONResponse({
        "query": query.query,
        "scenario": query.scenario,
        "top_k": query.top_k or knowledge.top_k,
        "min_score": knowledge.min_score,
        "chunks": [hit.model_dump() for hit in hits],
    })


def knowledge_routes() -> list[BaseRoute]:
    return [
        Route("/api/scenarios", list_scenarios, methods=["GET"]),
        Route("/api/scenarios/{scenario}/knowledge", upload_knowledge, methods=["POST"]),
        Route("/retrieve", retrieve, methods=["POST"]),
    ]
