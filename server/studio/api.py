"""The studio's admin routes: scenario packs as versioned data (docs/studio.md).

- `POST /api/scenarios`: a new scenario's draft (the body is its manifest; its id is the manifest's
  `scenario`).
- `GET /api/scenarios/{id}`: the current version's manifest and the draft (`?version=N`: version N's).
- `PUT /api/scenarios/{id}`: replace the draft (the body is the whole manifest).
- `POST /api/scenarios/{id}/publish`: the draft becomes the next version; new sessions play it.
- `GET /api/scenarios/{id}/versions`: every version, oldest first.
- `POST /api/scenarios/{id}/rollback` `{"version": N}`: a copy of version N published as the next.
- `POST /api/scenarios/{id}/try`: the draft made playable on this node as a preview scenario
  (`try-<digest>`) for the studio's try-it panel; nothing published changes.

Who: the admin key or a teacher's credential (server/classes/api.py), never open (a server
without ADMIN_KEY answers 403 `admin_key_unset`, as for playbook uploads): a pack changes what
every learner of the scenario is told. Every manifest is checked by `schemas.scenario.pack_problems`,
the code that checks the shipped packs; a refusal is
422 `invalid_pack` with every problem and its field, and changes nothing. Bodies: a manifest up to
`PACK_BODY_BYTES` (server/guard.py), the others 16 KiB.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from schemas.scenario import SCENARIO_ID, Problem, available_scenarios, pack_problems
from server.services import Services, error_response
from server.studio.catalog import shipped_manifest
from server.studio.store import PackConflict, PackNotFound, PackStoreError, StoredVersion

__all__ = ["Rollback", "studio_routes"]


class Rollback(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    version: int = Field(ge=1)


def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def _refused(request: Request) -> JSONResponse | None:
    services = _services(request)
    if not services.settings.ADMIN_KEY:
        return error_response(403, "admin_key_unset", "set ADMIN_KEY on the server to edit scenario packs")
    if not services.is_admin(request) and services.teacher_of(request) is None:
        return error_response(401, "unauthorized", "editing scenario packs needs the admin key or a teacher's")
    return None


def _about_scenario(handler: Callable[[Request, Services, str], Awaitable[Response]]
                    ) -> Callable[[Request], Awaitable[Response]]:
    """A route about the scenario in its path: refused unless the admin's or a teacher's (`_refused`),
    else `handler(request, services, scenario)`."""
    async def route(request: Request) -> Response:
        refused = _refused(request)
        if refused is not None:
            return refused
        return await handler(request, _services(request), request.path_params["scenario"])

    route.__name__ = handler.__name__
    route.__doc__ = handler.__doc__
    return route


def invalid(problems: tuple[Problem, ...] | list[Problem]) -> JSONResponse:
    """422 `invalid_pack`: every problem, each with its field (docs/studio.md)."""
    return JSONResponse({"error": {
        "code": "invalid_pack", "message": "; ".join(map(str, problems))[:2000],
        "problems": [{"field": p.field, "message": p.message} for p in problems]}}, status_code=422)


async def _manifest(request: Request, scenario: str | None) -> tuple[str, dict[str, Any]] | JSONResponse:
    """The body as a manifest that validates (for `scenario` when given): its id and data, or the 422."""
    try:
        data = json.loads(await request.body())
    except ValueError as exc:
        return invalid([Problem("(top level)", f"not JSON: {exc}")])
    pack, problems = pack_problems(data)
    if pack is None:
        return invalid(problems)
    if scenario is not None and pack.scenario != scenario:
        return invalid([Problem("scenario", f"{pack.scenario!r} is not the scenario in the path, {scenario!r}")])
    assert isinstance(data, dict)
    data.pop("version", None)  # the studio numbers versions
    return pack.scenario, data


def _shipped(scenario: str) -> bool:
    return scenario in available_scenarios()


async def _known(services: Services, scenario: str) -> bool:
    if not SCENARIO_ID.fullmatch(scenario):
        return False
    return _shipped(scenario) or await services.packs.store.latest(scenario) > 0 or (
        await services.packs.store.draft(scenario)) is not None


def _store_errors(exc: Exception) -> JSONResponse:
    if isinstance(exc, PackConflict):
        return error_response(409, "conflict", str(exc))
    if isinstance(exc, PackNotFound):
        return error_response(404, "not_found", str(exc))
    return error_response(503, "unavailable", str(exc))


def _described(v: StoredVersion) -> dict[str, Any]:
    return {"version": v.version, "source": "studio", "published_at": v.published_at,
            "from_version": v.from_version}


async def create_pack(request: Request) -> Response:
    refused = _refused(request)
    if refused is not None:
        return refused
    checked = await _manifest(request, None)
    if isinstance(checked, JSONResponse):
        return checked
    scenario, data = checked
    services = _services(request)
    if _shipped(scenario):
        return error_response(409, "scenario_exists", f"{scenario!r} is a shipped pack: PUT /api/scenarios/"
                              f"{scenario} edits its draft")
    try:
        await services.packs.store.save_draft(scenario, json.dumps(data, ensure_ascii=False), time.time(),
                                              create=True)
    except PackConflict:
        return error_response(409, "scenario_exists", f"{scenario!r} exists: PUT /api/scenarios/{scenario} "
                              f"edits its draft")
    except (PackNotFound, PackStoreError) as exc:
        return _store_errors(exc)
    return JSONResponse({"scenario": scenario, "draft": True}, status_code=201)


@_about_scenario
async def edit_pack(request: Request, services: Services, scenario: str) -> Response:
    try:
        if not await _known(services, scenario):
            return error_response(404, "unknown_scenario", f"no scenario {scenario!r}: POST /api/scenarios "
                                  f"creates one")
        checked = await _manifest(request, scenario)
        if isinstance(checked, JSONResponse):
            return checked
        await services.packs.store.save_draft(scenario, json.dumps(checked[1], ensure_ascii=False), time.time(),
                                              create=False)
    except (PackConflict, PackNotFound, PackStoreError) as exc:
        return _store_errors(exc)
    return JSONResponse({"scenario": scenario, "draft": True})


@_about_scenario
async def read_pack(request: Request, services: Services, scenario: str) -> Response:
    asked = request.query_params.get("version")
    if asked is not None and not (asked.isascii() and asked.isdigit() and 0 < int(asked) < 1_000_000):
        return error_response(422, "invalid", "version must be a positive whole number")
    try:
        if not await _known(services, scenario):
            return error_response(404, "unknown_scenario", f"no scenario {scenario!r}")
        latest = max(await services.packs.store.latest(scenario), 1 if _shipped(scenario) else 0)
        number = int(asked) if asked is not None else latest
        manifest = await _manifest_of(services, scenario, number)
        draft = await services.packs.store.draft(scenario)
    except (PackConflict, PackNotFound, PackStoreError) as exc:
        return _store_errors(exc)
    if manifest is None and asked is not None:
        return error_response(404, "unknown_version", f"{scenario!r} has no version {number}")
    return JSONResponse({"scenario": scenario, "shipped": _shipped(scenario), "current": latest or None,
                         "version": number if manifest is not None else None,
                         "manifest": None if manifest is None else json.loads(manifest),
                         "draft": None if draft is None else json.loads(draft.manifest)})


async def _manifest_of(services: Services, scenario: str, number: int) -> str | None:
    if number == 1 and _shipped(scenario):
        return shipped_manifest(scenario)
    stored = await services.packs.store.version(scenario, number) if number else None
    return None if stored is None else stored.manifest


@_about_scenario
async def publish_pack(request: Request, services: Services, scenario: str) -> Response:
    try:
        if not await _known(services, scenario):
            return error_response(404, "unknown_scenario", f"no scenario {scenario!r}")
        draft = await services.packs.store.draft(scenario)
        if draft is None:
            return error_response(409, "no_draft", f"{scenario!r} has no draft: PUT /api/scenarios/{scenario} "
                                  f"makes one")
        pack, problems = pack_problems(json.loads(draft.manifest))  # the rules may be stricter than at saving
        if pack is None:
            return invalid(problems)
        stored = await services.packs.store.publish(scenario, time.time(), floor=1 if _shipped(scenario) else 0)
    except PackNotFound:  # a publish on another node took the draft first
        return error_response(409, "no_draft", f"{scenario!r} has no draft")
    except (PackConflict, PackStoreError) as exc:
        return _store_errors(exc)
    return JSONResponse({"scenario": scenario, **_described(stored)}, status_code=201)


@_about_scenario
async def try_pack(request: Request, services: Services, scenario: str) -> Response:
    """The draft made playable on this node as a preview scenario: the try-it panel's sessions."""
    try:
        if not await _known(services, scenario):
            return error_response(404, "unknown_scenario", f"no scenario {scenario!r}")
        draft = await services.packs.store.draft(scenario)
    except (PackConflict, PackNotFound, PackStoreError) as exc:
        return _store_errors(exc)
    if draft is None:
        return error_response(409, "no_draft", f"{scenario!r} has no draft to try")
    pack, problems = pack_problems(json.loads(draft.manifest))
    if pack is None:
        return invalid(problems)
    return JSONResponse({"scenario": scenario, "preview": services.packs.preview(pack)}, status_code=201)


@_about_scenario
async def list_versions(request: Request, services: Services, scenario: str) -> Response:
    try:
        if not await _known(services, scenario):
            return error_response(404, "unknown_scenario", f"no scenario {scenario!r}")
        stored = await services.packs.store.versions(scenario)
        has_draft = await services.packs.store.draft(scenario) is not None
    except (PackConflict, PackNotFound, PackStoreError) as exc:
        return _store_errors(exc)
    versions = [{"version": 1, "source": "shipped", "published_at": None, "from_version": None}] if _shipped(
        scenario) else []
    versions += [_described(v) for v in stored]
    return JSONResponse({"scenario": scenario, "current": versions[-1]["version"] if versions else None,
                         "draft": has_draft, "versions": versions})


@_about_scenario
async def rollback_pack(request: Request, services: Services, scenario: str) -> Response:
    try:
        asked = Rollback.model_validate_json(await request.body() or b"{}")
    except ValidationError as exc:
        return error_response(422, "invalid", str(exc)[:500])
    try:
        if not await _known(services, scenario):
            return error_response(404, "unknown_scenario", f"no scenario {scenario!r}")
        shipped = _shipped(scenario)
        floor = 1 if shipped else 0
        manifest = shipped_manifest(scenario) if shipped and asked.version == 1 else None
        stored = await services.packs.store.republish(scenario, asked.version, time.time(), floor=floor,
                                                      manifest=manifest)
    except PackNotFound:
        return error_response(404, "unknown_version", f"{scenario!r} has no version {asked.version}")
    except (PackConflict, PackStoreError) as exc:
        return _store_errors(exc)
    return JSONResponse({"scenario": scenario, **_described(stored)}, status_code=201)


def studio_routes() -> list[BaseRoute]:
    return [
        Route("/api/scenarios", create_pack, methods=["POST"]),
        Route("/api/scenarios/{scenario}", read_pack, methods=["GET"]),
        Route("/api/scenarios/{scenario}", edit_pack, methods=["PUT"]),
        Route("/api/scenarios/{scenario}/publish", publish_pack, methods=["POST"]),
        Route("/api/scenarios/{scenario}/versions", list_versions, methods=["GET"]),
        Route("/api/scenarios/{scenario}/try", try_pack, methods=["POST"]),
        Route("/api/scenarios/{scenario}/rollback", rollback_pack, methods=["POST"]),
    ]
