"""The server layer: settings, HTTP and WebSocket routes, and the wiring of concrete parts.

Modules, from the outside in:

- `cli`: the `samvad` command (`serve`, `drain`, `bots`, `pack`; `pack_cli`: the authors' pack commands);
  `gcpolicy` tunes the garbage collector for it.
- `config`: `Settings`, read and validated once at start-up.
- `app`: assembles the Starlette application. Nothing in this package imports it.
- `services`: `Services`, the parts one running server shares with every route.
- `http_api`: the HTTP routes; `spectate`: the spectator pages, lobby and links.
- `routes_table`: every route in one table (who may call it, what it answers) and `GET /openapi.json`.
- `guard`: what every HTTP request passes first (no key in the URL, a body within its limit);
  `clientaddr`: the client's address, believed from `X-Forwarded-For` only behind a trusted proxy.
- `signin`: the teachers' sign-in cookie; `report_api`: the learner report of an ended session;
  `knowledge_api`: scenarios, playbook uploads and retrieval; `playbooks`: uploaded playbooks in Neo4j.
- `metrics`: Prometheus metrics at `GET /metrics`; `serving`: uvicorn's server with a slower tick.
- `voice`: the speech backends the settings pick, and what the recogniser is told of the moment;
  `voice_socket`: one connection's voice on the session socket (`audio` in, `speech` and
  `reply.audio` out).
- `microphone`: the socket side of an open microphone: its model loaded aside, its turns to decode.
- `unity_compat`: the shipped Unity build's HTTP contract, `POST /api/test`.
- `ws`: the WebSocket endpoint; `connection`: a socket as the actor sees it, and its rate limit.
  The leaner uvicorn WebSocket protocol lives with every other third-party private in `privates/`.
- `auth`: signed tokens; `logs`: JSON log lines; `wiring`: picks the brain and builds the backends.
- `backends`: `Backends`, the typed record of the stores, and `MirrorBackend`, the mirror's complete
  protocol (the in-memory mirror implements it with no-ops); `graphdb`: `GraphDriver`, the one Neo4j
  driver the mirror, learners, playbooks and leases share, opened and closed by the app's lifespan.
- `generate`: the seed's library call, `generate_vendor_response()`.
- `mirror/`: the Neo4j mirror, one module per concern (see its `__init__`).
- `cluster/`: scale-out behind HAProxy, each session owned by one node through a Neo4j lease.
- `learners/`: learner profiles across sessions, in memory or Neo4j, and their routes (see its `__init__`).
- `studio/`: scenario packs as versioned data: drafts, versions, rollback, on disk or in Neo4j, and
  their admin routes (see its `__init__`, docs/studio.md).
- `classes/`: teachers' classes and assignments, what counts toward them, in memory or Neo4j, and
  their routes (see its `__init__`, docs/studio.md).

`create_app` is imported on first use: `server.app` imports every route module, and importing any
module of this package (`server.config`, `server.mirror`) runs this file first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from server.config import Settings, load_settings
from server.generate import generate_vendor_response

if TYPE_CHECKING:
    from server.app import create_app

__all__ = ["Settings", "create_app", "generate_vendor_response", "load_settings"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from server.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
