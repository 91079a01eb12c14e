"""The server layer: settings, HTTP and WebSocket routes, and the wiring of concrete parts.

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
