"""The cluster's HTTP surface: `POST /admin/drain`, and the id HAProxy chose for a new session.

HAProxy (deploy/haproxy.cfg) hashes every session-scoped path on the session id in it. For
`POST /api/sessions` there is no id yet, so HAProxy makes one (`uuid()`), hashes on it, and passes it
in `X-Samvad-Session-Id`: the session is created on the node its id hashes to, and every later
request of it goes to the same node while that node is up. A node takes the header only when it is
part of a cluster, and only in the shape HAProxy makes; HAProxy overwrites any the client sent.
"""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from server.services import Services, error_response

SESSION_ID_HEADER = "x-samvad-session-id"
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def routed_session_id(services: Services, request: Request) -> str | None:
    """The id HAProxy chose for a session created through it, or None (the node makes one)."""
    if services.cluster is None:
        return None
    value = request.headers.get(SESSION_ID_HEADER, "").lower()
    return value if _UUID.match(value) else None


async def drain(request: Request) -> JSONResponse:
    """Stop taking sessions and hand every live one over (clients get 4307 and reconnect elsewhere)."""
    services: Services = request.app.state.services
    if not services.is_admin(request):
        return error_response(401, "unauthorized", "the admin key is required")
    if services.cluster is None:
        return error_response(409, "not_clustered", "this node is not part of a cluster (set CLUSTER_NODE_ID)")
    moved = await services.cluster.drain()
    return JSONResponse({"node": services.cluster.node, "draining": True, "handed_over": moved})


def cluster_routes() -> list[BaseRoute]:
    return [Route("/admin/drain", drain, methods=["POST"])]
