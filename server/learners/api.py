"""The learners' HTTP routes (docs/protocol.md, docs/memory.md).

- `GET /api/learners`: every learner with their latest session and trend (the teacher's list);
  the admin key.
- `GET /api/learners/{learner_id}`: the profile, the progress series, one point per session,
  each with a link to its report, and the review items with their retention (docs/learning.md);
  the admin key, a learner token of that learner, or the token of a
  teacher with the learner in one of their classes (server/classes/).
- `DELETE /api/learners/{learner_id}`: erase the learner and their sessions; the admin key.

- `POST /api/learners/{learner_id}/token`: a learner token for that learner (the admin key: a
  trusted backend that has logged the learner in hands it to the game, docs/security.md).

The admin key comes as `Authorization: Bearer <key>` (or a teacher's sign-in cookie); a learner
credential as `Authorization: Bearer <token>`, never in the URL. Without `ADMIN_KEY` the routes are
open in development, like the lobby; production does not start without one. Errors: 401 `unauthorized`
(no valid credential), 403 `forbidden` (a learner token of another learner, or a learner token
where only the admin key will do), 404 `unknown_learner`,
503 `unavailable` (the store did not answer).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from schemas.learner import LearnerProfile, ProgressPoint
from schemas.review import ReviewItem
from server.auth import TokenError
from server.classes.store import ClassStoreError
from server.learners.profile import hint_points
from server.learners.reviews import retention
from server.learners.service import Learners
from server.learners.store import LearnerStoreUnavailable
from server.services import Services, bearer, error_response

__all__ = ["learner_routes"]


def _refused(services: Services, request: Request, learner_id: str | None) -> JSONResponse | None:
    """None when the request may read `learner_id` (None: only the admin may)."""
    if services.is_admin(request):
        return None
    try:
        holder = services.learner_of(bearer(request))
    except TokenError:
        return error_response(401, "unauthorized", "the admin key or a learner token is required")
    if learner_id is None or holder != learner_id:
        return error_response(403, "forbidden", "this learner token is for another learner"
                              if learner_id is not None else "only the admin key may do this")
    return None


def _learners(request: Request) -> tuple[Services, Learners]:
    services: Services = request.app.state.services
    return services, services.learners


async def list_learners(request: Request) -> JSONResponse:
    services, learners = _learners(request)
    refused = _refused(services, request, None)
    if refused is not None:
        return refused
    try:
        rows = await learners.store.learners()
    except LearnerStoreUnavailable as exc:
        return error_response(503, "unavailable", str(exc))
    return JSONResponse({"store": learners.store.name, "durable": learners.store.durable,
                         "learners": [row.model_dump(mode="json") for row in rows]})


async def get_learner(request: Request) -> JSONResponse:
    services, learners = _learners(request)
    learner_id = request.path_params["learner_id"]
    refused = _refused(services, request, learner_id)
    teacher = services.teacher_of(request) if refused is not None else None
    if teacher is not None:  # a teacher reads the learners of their own classes, no other
        try:
            classes = await services.backends.classes.classes(teacher)
        except ClassStoreError as exc:
            return error_response(503, "unavailable", str(exc))
        refused = None if any(learner_id in c.learner_ids for c in classes) else error_response(
            403, "forbidden", "this learner is in none of your classes")
    if refused is not None:
        return refused
    try:
        profile = await learners.store.get(learner_id)
        series = await learners.store.progress(learner_id) if profile is not None else []
        items = await learners.store.items(learner_id) if profile is not None else []
    except LearnerStoreUnavailable as exc:
        return error_response(503, "unavailable", str(exc))
    if profile is None:
        return error_response(404, "unknown_learner", "no such learner")
    progress: list[dict[str, Any]] = []
    for point in series:
        row = point.model_dump(mode="json")
        # A report token opens that report and nothing else, for LINK_TTL_SECONDS.
        token = services.tokens.issue_report(point.session_id, services.settings.LINK_TTL_SECONDS)
        row["report_url"] = f"/api/sessions/{point.session_id}/report?format=html&token={token}"
        progress.append(row)
    now = services.registry.clock()
    return JSONResponse({"learner_id": learner_id, "store": learners.store.name,
                         "durable": learners.store.durable,
                         "profile": profile_row(profile, series), "progress": progress,
                         "items": [item_row(item, now) for item in items]})


# How the profile counts each session once (`latest_sessions`, `counted_through`): its own business.
_WINDOW = {"latest_sessions", "counted_through"}


def profile_row(profile: LearnerProfile, series: list[ProgressPoint]) -> dict[str, Any]:
    """The profile as the API has always shown it: with every session's id (`session_ids`, after
    `sessions`) and hint point (`hints_by_level`, after `recurring_slips`), oldest first, which the
    profile no longer keeps (it is bounded), from the progress series, which has them."""
    row: dict[str, Any] = {}
    for name, value in profile.model_dump(mode="json", exclude=_WINDOW).items():
        row[name] = value
        if name == "sessions":
            row["session_ids"] = [point.session_id for point in series]
        elif name == "recurring_slips":
            row["hints_by_level"] = [point.model_dump(mode="json") for point in hint_points(series)]
    return row


def item_row(item: ReviewItem, now: float) -> dict[str, Any]:
    """A review item as the learners page shows it: its record, with its retention now and whether it is due."""
    row = item.model_dump(mode="json", exclude={"evidence"})
    row["evidence"] = [{"session_id": sid, **e.model_dump(mode="json")} for sid, e in item.evidence]
    row["retention"] = round(retention(item, now), 4)
    row["is_due"] = item.due <= now
    return row


async def delete_learner(request: Request) -> JSONResponse:
    services, learners = _learners(request)
    learner_id = request.path_params["learner_id"]
    refused = _refused(services, request, None)
    if refused is not None:
        return refused
    try:
        found = await learners.erase(learner_id)
    except LearnerStoreUnavailable as exc:
        return error_response(503, "unavailable", str(exc))
    if not found:
        return error_response(404, "unknown_learner", "no such learner")
    return JSONResponse({"learner_id": learner_id, "erased": True})


async def learner_token(request: Request) -> JSONResponse:
    services, _ = _learners(request)
    refused = _refused(services, request, None)
    if refused is not None:
        return refused
    learner_id = request.path_params["learner_id"]
    if not 0 < len(learner_id) <= 64:
        return error_response(422, "invalid", "a learner id has 1 to 64 characters")
    return JSONResponse({"learner_id": learner_id, "learner_token": services.tokens.issue_learner(learner_id),
                         "expires_in": services.tokens.ttl_seconds})


def learner_routes() -> list[BaseRoute]:
    return [
        Route("/api/learners", list_learners, methods=["GET"]),
        Route("/api/learners/{learner_id:path}/token", learner_token, methods=["POST"]),
        # `:path`: a learner id is the client's string, and may hold a slash.
        Route("/api/learners/{learner_id:path}", get_learner, methods=["GET"]),
        Route("/api/learners/{learner_id:path}", delete_learner, methods=["DELETE"]),
    ]
