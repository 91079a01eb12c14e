"""The server layer: settings, HTTP and WebSocket routes, and the wiring of concrete parts."""

from server.app import create_app
from server.config import Settings, load_settings
from server.generate import generate_vendor_response

__all__ = ["Settings", "create_app", "generate_vendor_response", "load_settings"]
