"""`serve`: uvicorn's `Server`, with its housekeeping tick once a second instead of ten times
(`privates.CalmServer`, which reaches into uvicorn's main loop).
"""

from __future__ import annotations

import sys
from typing import Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE

from privates import CalmServer


def serve(app: Any, **options: Any) -> None:
    """Run `app` as `uvicorn.run(app, **options)` does, on a `CalmServer`."""
    server = CalmServer(uvicorn.Config(app, **options))
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    if not server.started:
        sys.exit(STARTUP_FAILURE)  # the socket could not be bound, or the lifespan failed
