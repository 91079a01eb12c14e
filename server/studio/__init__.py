"""The teacher studio's packs (docs/studio.md): scenario packs as versioned data.

- `store`: the versions and drafts, on disk under KNOWLEDGE_DIR (`DiskPackStore`); `graph`: in
  Neo4j when the mirror is (`Neo4jPackStore`). Both keep the same rules: a version never changes,
  numbers rise by one, a shipped pack is version 1 and no store holds a version 1 of it.
- `catalog`: which version a new session plays, checked against the store at every creation.
- `api`: the admin routes.

Exceptions (who is at fault):

    PackStoreError            a fault of the store (Neo4j unreachable, a disk error): 503
    PackConflict              the client asked for something the stored state forbids: 409
    PackNotFound              no such scenario, draft or version: 404
"""

from server.studio.catalog import PackCatalog
from server.studio.store import (
    DiskPackStore,
    PackConflict,
    PackNotFound,
    PackStore,
    PackStoreError,
    StoredDraft,
    StoredVersion,
)

__all__ = [
    "DiskPackStore",
    "PackCatalog",
    "PackConflict",
    "PackNotFound",
    "PackStore",
    "PackStoreError",
    "StoredDraft",
    "StoredVersion",
]
