"""Teachers' classes and assignments (docs/studio.md): the pure rules (`core`), the stores (`store`,
`graph`) and the routes (`api`, imported by server/app.py: it needs `server.services`, which needs
the stores)."""

from server.classes.store import ClassStore, MemoryClassStore

__all__ = ["ClassStore", "MemoryClassStore"]
