"""Every route of the server in one table: who may call it, what it takes, what it answers.

The table is data. `openapi()` turns it into the OpenAPI 3.1 document served at `GET /openapi.json`
(which schemathesis fuzzes, tests/test_openapi_fuzz.py), and tests/test_authz_matrix.py holds every
route of the running app to a row of it and to the expected status for each kind of credential in
development and in production. A route added to the app without a row here fails that test. The
session socket's own document, AsyncAPI 3.0, is served beside it as `GET /asyncapi.json`
(schemas/asyncapi.py).

Rules every route shares are written once, in `COMMON`: the guard's 400 (`credential_in_url`, a
Content-Length that is not a number) and 413 (`too_large`) for a body over the route's limit
(server/guard.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from schemas.asyncapi import asyncapi

__all__ = ["CREDENTIALS", "OPERATIONS", "Operation", "openapi", "openapi_routes"]

# The kinds of credential the matrix tries on every route (tests/test_authz_matrix.py): nothing; a
# session's player and spectator tokens; a learner token; a report link's token (as `?token=`); the
# admin key; a player token of another session, of another scenario; a teacher's token (a teacher
# who is not the teacher of the matrix's class).
CREDENTIALS = ("none", "player", "spectator", "learner", "report", "admin", "wrong", "teacher")

# Who may call a route, in words; docs/security.md has the same list.
ANYONE = "anyone"
SESSION = "a token of that session (player or spectator) as a bearer"
ADMIN = "the admin key as a bearer, or a teacher's sign-in cookie (open in development without ADMIN_KEY)"
LEARNER = "the admin key, or a learner credential of that learner"
STUDIO = ("the admin key or a teacher's token as a bearer, or a sign-in cookie of either (never open: no "
          "ADMIN_KEY answers 403)")
CLASS = ("the admin key, or the class's own teacher (a teacher's token as a bearer, or their sign-in cookie); "
         "open in development without ADMIN_KEY")
TEACHER = "the admin key, or a teacher's token (their own classes only); open in development without ADMIN_KEY"

_ERROR: dict[str, Any] = {
    "type": "object", "required": ["error"],
    "properties": {"error": {"type": "object", "required": ["code", "message"],
                             "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}},
}
_OBJECT: dict[str, Any] = {"type": "object"}
COMMON: Mapping[int, str] = {400: "the admin key in the URL (`credential_in_url`), or an unreadable Content-Length"}
BODY_COMMON: Mapping[int, str] = {413: "the body is over this route's limit (`too_large`), refused before it is read"}


@dataclass(frozen=True)
class Operation:
    """One route and method, as the table, the matrix test and the OpenAPI document see it."""

    method: str
    path: str  # the Starlette path, `{name}` or `{name:path}` for parameters
    summary: str
    who: str
    responses: Mapping[int, str]  # the statuses it answers besides COMMON, and when
    request: Mapping[str, Any] | str | None = None  # the JSON body's schema, or the name of its model
    multipart: bool = False
    content: str = "application/json"  # the media type of its 2xx answers
    websocket: bool = False  # a socket: in the table and the matrix, not in the OpenAPI document
    query: tuple[str, ...] = ()  # query parameters it reads
    errors_as: Mapping[int, str] = field(default_factory=dict)  # statuses answered as another media type
    # The authorization matrix: the status each credential kind gets (CREDENTIALS, in order), in
    # development without ADMIN_KEY and in production; 101 is a socket accepted, 44xx its close code.
    development: str = ""
    production: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.method, self.path)


_REF = "#/components/schemas/{model}"


def _schema(model: str, components: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of a request model, its definitions moved to `components` (imported late:
    the table is read by the HTTP modules)."""
    from schemas.scenario import Scenario
    from server.classes.core import AssignmentIn, ClassIn, LearnerIds
    from server.http_api import CreateSession, DevGenerate
    from server.knowledge_api import RetrieveRequest
    from server.studio.api import Rollback

    models: dict[str, Any] = {"CreateSession": CreateSession, "DevGenerate": DevGenerate,
                              "RetrieveRequest": RetrieveRequest, "Scenario": Scenario, "Rollback": Rollback,
                              "ClassIn": ClassIn, "LearnerIds": LearnerIds, "AssignmentIn": AssignmentIn}
    schema: dict[str, Any] = models[model].model_json_schema(ref_template=_REF)
    components.update(schema.pop("$defs", {}))
    return schema


_UNITY_REQUEST: Mapping[str, Any] = {
    "type": "object",
    "properties": {"audioData": {"type": "string"}, "inputLanguage": {"type": "string"},
                   "targetLanguage": {"type": "string"}, "object_grabbed": {"type": "string"},
                   "happiness_score": {"type": "integer"}, "negotiation_state": {"type": "string"}},
}

OPERATIONS: tuple[Operation, ...] = (
    Operation("GET", "/health", "the server's health", ANYONE, {200: "healthy or degraded", 503: "draining"},
              development="200 200 200 200 200 200 200 200", production="200 200 200 200 200 200 200 200"),
    Operation("GET", "/livez", "liveness: the process answers (200 while draining too)", ANYONE,
              {200: "alive"},
              development="200 200 200 200 200 200 200 200", production="200 200 200 200 200 200 200 200"),
    Operation("GET", "/readyz", "readiness: whether to route new requests here", ANYONE,
              {200: "ready", 503: "draining"},
              development="200 200 200 200 200 200 200 200", production="200 200 200 200 200 200 200 200"),
    Operation("GET", "/openapi.json", "this document", ANYONE, {200: "the OpenAPI document"},
              development="200 200 200 200 200 200 200 200", production="200 200 200 200 200 200 200 200"),
    Operation("GET", "/asyncapi.json", "the socket protocol", ANYONE,
              {200: "the AsyncAPI 3.0 document of the session socket (schemas/asyncapi.py)"},
              development="200 200 200 200 200 200 200 200", production="200 200 200 200 200 200 200 200"),
    Operation("POST", "/api/sessions", "create a session", "anyone for an anonymous session; a named learner "
              "needs " + LEARNER, {201: "created", 401: "a learner named without proof", 403: "another "
              "learner's credential", 422: "an invalid body", 429: "rate-limited", 503: "the store is full "
              "or unreachable, or no capacity"}, request="CreateSession",
              development="201 201 201 201 201 201 201 201", production="401 401 401 201 401 201 401 401"),
    Operation("GET", "/api/sessions/{session_id}", "a session's state", SESSION,
              {200: "the state", 401: "no valid session token", 403: "a token of another session",
               404: "no such session", 503: "the store is unreachable"},
              development="401 200 200 401 401 401 403 401", production="401 200 200 401 401 401 403 401"),
    Operation("GET", "/api/sessions/{session_id}/graph", "a session's subgraph in Neo4j", SESSION,
              {200: "the graph", 401: "no valid session token", 403: "a token of another session",
               404: "not in the graph", 503: "no graph store"},
              development="401 503 503 401 401 401 403 401", production="401 503 503 401 401 401 403 401"),
    Operation("GET", "/api/sessions/{session_id}/report", "the learner report of an ended session",
              SESSION + ", or `?token=` with a report token or spectator token of that session",
              {200: "the report (JSON, or a page with `format=html`)", 401: "no valid token",
               403: "a token of another session", 404: "no such session", 409: "not ended yet",
               503: "the store is unreachable"}, query=("token", "format"), content="application/json",
              development="401 200 200 401 200 401 403 401", production="401 200 200 401 200 401 403 401"),
    Operation("GET", "/api/sessions/{session_id}/spectator-link", "a watch link with a fresh spectator token",
              ADMIN, {200: "the link", 401: "not the admin", 404: "no such session"},
              development="200 200 200 200 200 200 200 200", production="401 401 401 401 401 200 401 401"),
    Operation("GET", "/api/stats", "figures across sessions", ADMIN,
              {200: "the figures", 401: "not the admin", 422: "bad since or limit", 503: "no graph store"},
              query=("since", "scenario", "limit"),
              development="503 503 503 503 503 503 503 503", production="401 401 401 401 401 503 401 401"),
    Operation("POST", "/api/dev/generate", "inject a turn (development only)", "anyone, in development with "
              "DEV_ENDPOINTS or LOG_LEVEL=DEBUG; never in production",
              {200: "the reply", 404: "dev endpoints are off", 422: "invalid", 503: "no capacity"},
              request="DevGenerate",
              development="200 200 200 200 200 200 200 200", production="404 404 404 404 404 404 404 404"),
    Operation("POST", "/admin/drain", "drain this node", ADMIN,
              {200: "draining", 401: "not the admin", 409: "not clustered"},
              development="409 409 409 409 409 409 409 409", production="401 401 401 401 401 409 401 401"),
    Operation("GET", "/metrics", "Prometheus metrics", "METRICS_KEY, else the admin key, as a bearer",
              {200: "the exposition", 401: "no key", 403: "no key configured in production",
               404: "METRICS=false"}, content="text/plain",
              development="200 200 200 200 200 200 200 200", production="401 401 401 401 401 200 401 401"),
    Operation("GET", "/api/scenarios", "the scenario packs", ANYONE, {200: "the packs"},
              development="200 200 200 200 200 200 200 200", production="200 200 200 200 200 200 200 200"),
    Operation("POST", "/api/scenarios/{scenario}/knowledge", "upload a playbook", "the admin key (never open)",
              {201: "stored", 400: "not a form with a file", 401: "not the admin", 403: "no ADMIN_KEY is set",
               404: "no such scenario", 409: "a playbook is active", 411: "no Content-Length",
               422: "an unusable file"}, multipart=True, query=("replace",),
              development="403 403 403 403 403 403 403 403", production="401 401 401 401 401 400 401 401"),
    Operation("POST", "/api/scenarios", "a new scenario's draft (docs/studio.md)", STUDIO,
              {201: "the draft is stored", 401: "not the admin", 403: "no ADMIN_KEY is set",
               409: "the scenario exists (`scenario_exists`)", 422: "a manifest that does not validate "
               "(`invalid_pack`, every field in `problems`)", 503: "the pack store is unreachable"},
              request="Scenario",
              development="403 403 403 403 403 403 403 403", production="401 401 401 401 401 422 401 422"),
    Operation("GET", "/api/scenarios/{scenario}", "a scenario's current manifest and its draft", STUDIO,
              {200: "the manifest (`?version=N`: version N's) and the draft", 401: "not the admin",
               403: "no ADMIN_KEY is set", 404: "no such scenario or version", 422: "a bad version",
               503: "the pack store is unreachable"}, query=("version",),
              development="403 403 403 403 403 403 403 403", production="401 401 401 401 401 200 401 200"),
    Operation("PUT", "/api/scenarios/{scenario}", "replace a scenario's draft", STUDIO,
              {200: "the draft is stored", 401: "not the admin", 403: "no ADMIN_KEY is set",
               404: "no such scenario", 422: "a manifest that does not validate (`invalid_pack`)",
               503: "the pack store is unreachable"}, request="Scenario",
              development="403 403 403 403 403 403 403 403", production="401 401 401 401 401 422 401 422"),
    Operation("POST", "/api/scenarios/{scenario}/publish", "publish the draft as the next version", STUDIO,
              {201: "published: new sessions play it", 401: "not the admin", 403: "no ADMIN_KEY is set",
               404: "no such scenario", 409: "no draft (`no_draft`), or another publish took the number",
               422: "the draft no longer validates (`invalid_pack`)", 503: "the pack store is unreachable"},
              development="403 403 403 403 403 403 403 403", production="401 401 401 401 401 409 401 409"),
    Operation("GET", "/api/scenarios/{scenario}/versions", "a scenario's versions", STUDIO,
              {200: "every version, oldest first", 401: "not the admin", 403: "no ADMIN_KEY is set",
               404: "no such scenario", 503: "the pack store is unreachable"},
              development="403 403 403 403 403 403 403 403", production="401 401 401 401 401 200 401 200"),
    Operation("POST", "/api/scenarios/{scenario}/try", "play the draft: a preview scenario on this node", STUDIO,
              {201: "`{\"scenario\", \"preview\"}`: create sessions of `preview` to try the draft",
               401: "not the admin or a teacher", 403: "no ADMIN_KEY is set", 404: "no such scenario",
               409: "no draft (`no_draft`)", 422: "the draft no longer validates (`invalid_pack`)",
               503: "the pack store is unreachable"},
              development="403 403 403 403 403 403 403 403", production="401 401 401 401 401 409 401 409"),
    Operation("POST", "/api/scenarios/{scenario}/rollback", "publish a copy of an older version as the next",
              STUDIO, {201: "published", 401: "not the admin", 403: "no ADMIN_KEY is set",
                       404: "no such scenario or version", 409: "another publish took the number",
                       422: "not `{\"version\": N}`", 503: "the pack store is unreachable"}, request="Rollback",
              development="403 403 403 403 403 403 403 403", production="401 401 401 401 401 404 401 404"),
    Operation("POST", "/retrieve", "cultural-knowledge retrieval", "the admin key, or a session token of a "
              "session of that scenario", {200: "the chunks", 400: "an invalid query", 401: "no credential",
              403: "a session of another scenario", 404: "no such scenario", 429: "rate-limited",
              503: "the store is unreachable"}, request="RetrieveRequest",
              development="200 200 200 200 200 200 200 200", production="401 200 200 401 401 200 403 401"),
    Operation("GET", "/api/learners", "every learner", ADMIN,
              {200: "the learners", 401: "not the admin", 403: "a learner credential", 503: "the store"},
              development="200 200 200 200 200 200 200 200", production="401 401 401 403 401 200 401 401"),
    Operation("POST", "/api/learners/{learner_id:path}/token", "a learner token for a trusted backend", ADMIN,
              {200: "the token", 401: "not the admin", 403: "a learner credential", 422: "a bad learner id"},
              development="200 200 200 200 200 200 200 200", production="401 401 401 403 401 200 401 401"),
    Operation("GET", "/api/learners/{learner_id:path}", "a learner's profile and progress",
              LEARNER + ", or a teacher with the learner in one of their classes",
              {200: "the profile", 401: "no credential", 403: "another learner's credential, or a teacher "
               "whose classes do not hold the learner",
               404: "no such learner", 503: "the store"},
              development="200 200 200 200 200 200 200 200", production="401 401 401 200 401 200 401 403"),
    Operation("DELETE", "/api/learners/{learner_id:path}", "erase a learner", ADMIN,
              {200: "erased", 401: "not the admin", 403: "a learner credential", 404: "no such learner",
               503: "the store"},
              development="404 404 404 404 404 404 404 404", production="401 401 401 403 401 404 401 401"),
    Operation("POST", "/api/test", "the shipped Unity build's turn", "on in development; in production only "
              "with UNITY_TEST_ROUTE, and with UNITY_DEVICE_KEYS the device's key as a bearer",
              {200: "the reply", 401: "no device key", 404: "the route is off", 413: "the clip is too large",
               422: "not JSON, or audio the server cannot read", 429: "rate-limited or busy",
               503: "no speech recogniser, or no capacity"}, request=_UNITY_REQUEST,
              development="422 422 422 422 422 422 422 422", production="404 404 404 404 404 404 404 404"),
    Operation("POST", "/api/signin", "a teacher signs in", "the admin key as a bearer",
              {200: "no key is needed (development)", 204: "signed in: the cookie is set",
               401: "not the admin key"},
              development="200 200 200 200 200 200 200 204", production="401 401 401 401 401 204 401 204"),
    Operation("GET", "/api/signin", "whether this request is signed in", ANYONE, {200: "the answer"},
              development="200 200 200 200 200 200 200 200", production="200 200 200 200 200 200 200 200"),
    Operation("POST", "/api/signout", "a teacher signs out", ANYONE, {204: "the cookie is cleared"},
              development="204 204 204 204 204 204 204 204", production="204 204 204 204 204 204 204 204"),
    Operation("POST", "/api/teachers/{teacher_id}/token", "a teacher's own credential", ADMIN,
              {200: "the teacher token", 401: "not the admin", 422: "a bad teacher id"},
              development="200 200 200 200 200 200 200 200", production="401 401 401 401 401 200 401 401"),
    Operation("POST", "/api/classes", "create a class (docs/studio.md)", TEACHER,
              {201: "created", 401: "neither the admin nor a teacher", 403: "a teacher naming another teacher",
               422: "an invalid body (the admin must name `teacher_id`)", 503: "the store is unreachable"},
              request="ClassIn",
              development="201 201 201 201 201 201 201 201", production="401 401 401 401 401 201 401 201"),
    Operation("GET", "/api/classes", "the caller's classes (the admin: every class)", TEACHER,
              {200: "the classes", 401: "neither the admin nor a teacher", 503: "the store is unreachable"},
              development="200 200 200 200 200 200 200 200", production="401 401 401 401 401 200 401 200"),
    Operation("GET", "/api/classes/{class_id}", "a class, its learners and assignments", CLASS,
              {200: "the class", 401: "neither the admin nor a teacher", 403: "another teacher's class "
               "(`not_your_class`)", 404: "no such class", 503: "the store is unreachable"},
              development="200 200 200 200 200 200 200 200", production="401 401 401 401 401 200 401 403"),
    Operation("POST", "/api/classes/{class_id}/learners", "add learners to a class by id", CLASS,
              {200: "the class", 401: "neither the admin nor a teacher", 403: "another teacher's class",
               404: "no such class", 409: "over the class's size (`class_full`)", 422: "an invalid body",
               503: "the store is unreachable"}, request="LearnerIds",
              development="200 200 200 200 200 200 200 200", production="401 401 401 401 401 200 401 403"),
    Operation("POST", "/api/classes/{class_id}/assignments", "set a class an assignment", CLASS,
              {201: "set", 401: "neither the admin nor a teacher", 403: "another teacher's class",
               404: "no such class", 409: "too many assignments (`class_full`)",
               422: "an invalid body, or an unknown scenario or version", 503: "the store is unreachable"},
              request="AssignmentIn",
              development="201 201 201 201 201 201 201 201", production="401 401 401 401 401 201 401 403"),
    Operation("GET", "/api/classes/{class_id}/progress", "a class's completion, scores, slips and trends", CLASS,
              {200: "the figures (JSON, or CSV with `format=csv`)", 401: "neither the admin nor a teacher",
               403: "another teacher's class", 404: "no such class", 422: "a bad format",
               503: "no graph store (`no_graph_store`), or it is unreachable"}, query=("format",),
              development="503 503 503 503 503 503 503 503", production="401 401 401 401 401 503 401 403"),
    Operation("GET", "/view/", "the lobby page", ADMIN, {200: "the page", 401: "a page that links to sign-in"},
              content="text/html", errors_as={401: "text/html"},
              development="200 200 200 200 200 200 200 200", production="401 401 401 401 401 200 401 401"),
    Operation("GET", "/view/lobby.html", "the lobby page", ADMIN,
              {200: "the page", 401: "a page that links to sign-in"}, content="text/html",
              errors_as={401: "text/html"},
              development="200 200 200 200 200 200 200 200", production="401 401 401 401 401 200 401 401"),
    Operation("GET", "/view/{path:path}", "the pages' static files", ANYONE,
              # 401: `/view/` followed by a newline is routed to the lobby page (a regex `$` matches
              # before a final newline), which asks for the admin key.
              {200: "the file", 401: "the lobby page's path with a trailing newline", 404: "no such file"},
              content="text/html", errors_as={401: "text/html", 404: "text/plain"},
              development="200 200 200 200 200 200 200 200", production="200 200 200 200 200 200 200 200"),
    Operation("GET", "/api/lobby", "the live sessions", ADMIN, {200: "the sessions", 401: "not the admin"},
              development="200 200 200 200 200 200 200 200", production="401 401 401 401 401 200 401 401"),
    Operation("WS", "/ws/sessions/{session_id}", "the session socket", "a token of that session in `?token=` "
              "(or a bearer)", {}, websocket=True,
              development="4401 101 101 4401 4401 4401 4403 4401", production="4401 101 101 4401 4401 4401 4403 4401"),
    Operation("WS", "/ws/lobby", "the lobby socket", ADMIN, {}, websocket=True,
              development="101 101 101 101 101 101 101 101", production="4401 4401 4401 4401 4401 101 4401 4401"),
)


def _openapi_path(path: str) -> str:
    return path.replace(":path}", "}")


def openapi(operations: tuple[Operation, ...] = OPERATIONS) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the HTTP operations in `operations`."""
    paths: dict[str, dict[str, Any]] = {}
    components: dict[str, Any] = {}
    for op in operations:
        if op.websocket:
            continue
        path = _openapi_path(op.path)
        parameters: list[dict[str, Any]] = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
            for name in _path_names(path)]
        parameters += [{"name": name, "in": "query", "required": False, "schema": {"type": "string"}}
                       for name in op.query]
        statuses = {**COMMON, **(BODY_COMMON if op.method in ("POST", "PUT", "DELETE") else {}), **op.responses}
        if "{" in path:  # a parameter the router cannot match (a control character): its plain 404
            statuses.setdefault(404, "no such route")
        responses: dict[str, Any] = {}
        for status, why in sorted(statuses.items()):
            media = op.errors_as.get(status) or (op.content if status < 300 else "application/json")
            if status == 204:
                responses[str(status)] = {"description": why}
                continue
            schema = _ERROR if status >= 400 and media == "application/json" else (
                _OBJECT if media == "application/json" else {"type": "string"})
            content: dict[str, Any] = {media: {"schema": schema}}
            if status == 404 and "{" in path:
                content["text/plain"] = {"schema": {"type": "string"}}
            if op.path.endswith("/report") and status == 200:
                content["text/html"] = {"schema": {"type": "string"}}
            if op.path.endswith("/progress") and status == 200:
                content["text/csv"] = {"schema": {"type": "string"}}
            responses[str(status)] = {"description": why, "content": content}
        operation: dict[str, Any] = {"summary": op.summary, "description": f"Who: {op.who}.",
                                     "operationId": f"{op.method.lower()} {path}", "parameters": parameters,
                                     "responses": responses}
        if op.request is not None:
            body = _schema(op.request, components) if isinstance(op.request, str) else dict(op.request)
            operation["requestBody"] = {"required": False, "content": {"application/json": {"schema": body}}}
        elif op.multipart:
            operation["requestBody"] = {"required": True, "content": {"multipart/form-data": {"schema": {
                "type": "object", "properties": {"file": {"type": "string", "format": "binary"},
                                                 "replace": {"type": "string"}}}}}}
        paths.setdefault(path, {})[op.method.lower()] = operation
    return {"openapi": "3.1.0",
            "info": {"title": "Samvad", "version": "1",
                     "description": "Every HTTP route; who may call each is in its description "
                                    "(docs/security.md). Credentials go in `Authorization: Bearer`."},
            "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
                           "schemas": components},
            "paths": paths}


def _path_names(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{") and part.endswith("}")]


def openapi_routes() -> list[BaseRoute]:
    document = openapi()

    async def serve(request: Request) -> JSONResponse:
        return JSONResponse(document)

    socket = asyncapi()  # made once: the frame models do not change while the server runs

    async def serve_socket(request: Request) -> JSONResponse:
        return JSONResponse(socket)

    return [Route("/openapi.json", serve, methods=["GET"]), Route("/asyncapi.json", serve_socket, methods=["GET"])]
