"""Teachers, classes and assignments over HTTP (docs/studio.md, "Teachers and classes").

- `POST /api/teachers/{teacher_id}/token` (the admin): a teacher's own credential, a signed token
  naming them; the teacher signs in with it (`POST /api/signin`) or sends it as a bearer.
- `POST /api/classes` `{"name", "teacher_id"?}`: a class (a teacher's own; the admin names the teacher).
- `GET /api/classes`: a teacher's classes (the admin: every class).
- `GET /api/classes/{id}`: the class, its learners and assignments.
- `POST /api/classes/{id}/learners` `{"learner_ids": [...]}`: learners added by id.
- `POST /api/classes/{id}/assignments`: a scenario (and version), a level, a due date, criteria.
- `GET /api/classes/{id}/progress` (`?format=csv`): completion, scores, common slips, trends.

Who: the admin (the operator: every class), or the class's own teacher; another teacher gets 403
`not_your_class`, no credential 401 `unauthorized`. Bad input is 422 `invalid` and changes nothing;
404 `unknown_class`; 409 `class_full`; 503 `unavailable`, or `no_graph_store` for the figures
without Neo4j.
"""

from __future__ import annotations

import csv
import io
import re
import secrets
import time
from dataclasses import replace
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from schemas.scenario import Scenario, available_scenarios
from server.classes.core import (
    AssignmentIn,
    ClassIn,
    LearnerIds,
    Played,
    StoredAssignment,
    StoredClass,
    class_progress,
)
from server.classes.store import ClassFull, ClassStore, ClassStoreError, NoGraph
from server.services import Services, error_response
from server.studio.store import PackStoreError

__all__ = ["class_routes"]

TEACHER_TOKEN_TTL_S = 120 * 24 * 3600  # a school term: the admin issues a new one each term
_TEACHER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
_Model = TypeVar("_Model", bound=BaseModel)

ADMIN = object()  # who: the operator, every class


def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def _store(request: Request) -> ClassStore:
    return _services(request).backends.classes


def _caller(request: Request) -> object | str | JSONResponse:
    """ADMIN, a teacher's id, or the 401."""
    services = _services(request)
    if services.is_admin(request):
        return ADMIN
    teacher = services.teacher_of(request)
    if teacher is not None:
        return teacher
    return error_response(401, "unauthorized", "the admin key or a teacher's credential is required")


async def _body(request: Request, model: type[_Model]) -> _Model | JSONResponse:
    try:
        return model.model_validate_json(await request.body() or b"null")
    except ValueError as exc:  # bad JSON, or ValidationError (a ValueError)
        detail = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top level)'}: {e['msg']}"
                           for e in exc.errors()[:8]) if isinstance(exc, ValidationError) else f"not JSON: {exc}"
        return error_response(422, "invalid", detail)


def _class_json(klass: StoredClass) -> dict[str, Any]:
    return {"class_id": klass.class_id, "name": klass.name, "teacher_id": klass.teacher_id,
            "learner_ids": list(klass.learner_ids), "created_at": klass.created_at}


def _assignment_json(assignment: StoredAssignment) -> dict[str, Any]:
    return {"assignment_id": assignment.assignment_id, "class_id": assignment.class_id,
            "created_at": assignment.created_at, **assignment.spec.model_dump(mode="json")}


async def _owned(request: Request) -> StoredClass | JSONResponse:
    """The class in the path, when the caller may see it."""
    who = _caller(request)
    if isinstance(who, JSONResponse):
        return who
    klass = await _store(request).get_class(request.path_params["class_id"])
    if klass is None:
        return error_response(404, "unknown_class", "no such class")
    if who is not ADMIN and klass.teacher_id != who:
        return error_response(403, "not_your_class", "this class is another teacher's")
    return klass


def _unavailable(exc: ClassStoreError) -> JSONResponse:
    if isinstance(exc, NoGraph):
        return error_response(503, "no_graph_store", str(exc))
    return error_response(503, "unavailable", str(exc))


async def teacher_token(request: Request) -> JSONResponse:
    services = _services(request)
    if not services.is_admin(request):
        return error_response(401, "unauthorized", "only the admin key issues teachers' credentials")
    teacher_id = request.path_params["teacher_id"]
    if not _TEACHER_ID.match(teacher_id):
        return error_response(422, "invalid", "a teacher id is 1 to 64 letters, digits or _.:-")
    token = services.tokens.issue_teacher(teacher_id, TEACHER_TOKEN_TTL_S)
    return JSONResponse({"teacher_id": teacher_id, "teacher_token": token, "expires_in": TEACHER_TOKEN_TTL_S})


async def create_class(request: Request) -> JSONResponse:
    who = _caller(request)
    if isinstance(who, JSONResponse):
        return who
    body = await _body(request, ClassIn)
    if isinstance(body, JSONResponse):
        return body
    if who is ADMIN:
        if body.teacher_id is None:
            return error_response(422, "invalid", "teacher_id: the admin names the class's teacher")
        teacher = body.teacher_id
    else:
        assert isinstance(who, str)
        if body.teacher_id not in (None, who):
            return error_response(403, "forbidden", "a teacher creates their own classes only")
        teacher = who
    klass = StoredClass(class_id="c" + secrets.token_hex(8), name=body.name, teacher_id=teacher,
                        learner_ids=(), created_at=time.time())
    try:
        await _store(request).create_class(klass)
    except ClassStoreError as exc:
        return _unavailable(exc)
    return JSONResponse(_class_json(klass), status_code=201)


async def list_classes(request: Request) -> JSONResponse:
    who = _caller(request)
    if isinstance(who, JSONResponse):
        return who
    try:
        found = await _store(request).classes(None if who is ADMIN else str(who))
    except ClassStoreError as exc:
        return _unavailable(exc)
    return JSONResponse({"classes": [_class_json(c) for c in found]})


async def get_class(request: Request) -> JSONResponse:
    try:
        klass = await _owned(request)
        if isinstance(klass, JSONResponse):
            return klass
        assignments = await _store(request).assignments(klass.class_id)
    except ClassStoreError as exc:
        return _unavailable(exc)
    return JSONResponse({**_class_json(klass), "assignments": [_assignment_json(a) for a in assignments]})


async def add_learners(request: Request) -> JSONResponse:
    try:
        klass = await _owned(request)
        if isinstance(klass, JSONResponse):
            return klass
        body = await _body(request, LearnerIds)
        if isinstance(body, JSONResponse):
            return body
        updated = await _store(request).add_learners(klass.class_id, body.learner_ids)
    except ClassFull as exc:
        return error_response(409, "class_full", str(exc))
    except ClassStoreError as exc:
        return _unavailable(exc)
    if updated is None:
        return error_response(404, "unknown_class", "no such class")
    return JSONResponse(_class_json(updated))


async def _scenario_exists(services: Services, scenario: str, version: int | None) -> bool:
    if version is None:
        if scenario in available_scenarios():
            return True
        return await services.packs.store.latest(scenario) > 0
    return await services.packs.version(scenario, version) is not None


async def add_assignment(request: Request) -> JSONResponse:
    services = _services(request)
    try:
        klass = await _owned(request)
        if isinstance(klass, JSONResponse):
            return klass
        body = await _body(request, AssignmentIn)
        if isinstance(body, JSONResponse):
            return body
        try:
            known = await _scenario_exists(services, body.scenario, body.version)
        except PackStoreError as exc:
            return error_response(503, "unavailable", str(exc))
        if not known:
            return error_response(422, "invalid", f"scenario: no {body.scenario!r}"
                                  + (f" version {body.version}" if body.version else ""))
        assignment = StoredAssignment(assignment_id="a" + secrets.token_hex(8), class_id=klass.class_id,
                                      spec=body, created_at=time.time())
        if not await _store(request).add_assignment(assignment):
            return error_response(404, "unknown_class", "no such class")
    except ClassFull as exc:
        return error_response(409, "class_full", str(exc))
    except ClassStoreError as exc:
        return _unavailable(exc)
    return JSONResponse(_assignment_json(assignment), status_code=201)


async def _with_fair(services: Services, sessions: list[Played]) -> list[Played]:
    """Each session with its item's fair range in the version it played (None when unknown)."""
    packs: dict[tuple[str, int], Scenario | None] = {}
    filled: list[Played] = []
    for played in sessions:
        key = (played.scenario, played.version)
        if key not in packs:
            try:
                packs[key] = await services.packs.version(*key)
            except PackStoreError:
                packs[key] = None
        pack = packs[key]
        fair = next((i.fair for i in pack.items if i.name == played.item), None) if pack else None
        filled.append(replace(played, fair=fair))
    return filled


async def progress(request: Request) -> Response:
    services = _services(request)
    fmt = request.query_params.get("format", "json")
    if fmt not in ("json", "csv"):
        return error_response(422, "invalid", "format is json or csv")
    try:
        klass = await _owned(request)
        if isinstance(klass, JSONResponse):
            return klass
        assignments = await _store(request).assignments(klass.class_id)
        sessions = await _with_fair(services, await _store(request).sessions(klass.class_id))
    except ClassStoreError as exc:
        return _unavailable(exc)
    figures = class_progress(klass, assignments, sessions)
    if fmt == "json":
        return JSONResponse(figures)
    return Response(progress_csv(figures), media_type="text/csv",
                    headers={"content-disposition": f'attachment; filename="{klass.class_id}.csv"'})


def progress_csv(figures: dict[str, Any]) -> str:
    """One line per learner: sessions, deals, mean score, trend, slips, and each assignment done or not."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    assignments = figures["assignments"]
    writer.writerow(["learner_id", "sessions", "deals", "mean_score", "trend", "slips",
                     *[f"done:{a['assignment_id']}" for a in assignments]])
    for row in figures["learners"]:
        writer.writerow([row["learner_id"], row["sessions"], row["deals"],
                         "" if row["mean_score"] is None else row["mean_score"],
                         " ".join(map(str, row["trend"])),
                         " ".join(f"{slip}:{n}" for slip, n in row["slips"].items()),
                         *["yes" if a["assignment_id"] in row["completed"] else "no" for a in assignments]])
    return out.getvalue()


def class_routes() -> list[BaseRoute]:
    return [
        Route("/api/teachers/{teacher_id}/token", teacher_token, methods=["POST"]),
        Route("/api/classes", create_class, methods=["POST"]),
        Route("/api/classes", list_classes, methods=["GET"]),
        Route("/api/classes/{class_id}", get_class, methods=["GET"]),
        Route("/api/classes/{class_id}/learners", add_learners, methods=["POST"]),
        Route("/api/classes/{class_id}/assignments", add_assignment, methods=["POST"]),
        Route("/api/classes/{class_id}/progress", progress, methods=["GET"]),
    ]
