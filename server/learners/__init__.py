"""Learners across sessions (issue #15, docs/memory.md): profiles, what a vendor remembers, the
teacher's progress view and erasure.

- `profile`: the profile as a fold of ended sessions, contradictions held as pending, the recall a
  vendor gets, the trend. Pure.
- `store`: the `LearnerStore` protocol and the in-memory store (the embedded default).
- `packing`: how the in-memory store keeps a model: its JSON, deflated against a preset dictionary.
- `reviews`: review items as a fold of sessions, scheduled with FSRS; what is due; retention.
- `cypher`: the learners' schema objects and statements; `graph`: the Neo4j store that runs them.
- `service`: `Learners`, which records ended sessions, reads profiles for new ones, and erases.
- `api`: the HTTP routes under `/api/learners`.
"""

from server.learners.service import Learners
from server.learners.store import LearnerStore, LearnerStoreUnavailable, MemoryLearnerStore

__all__ = ["LearnerStore", "LearnerStoreUnavailable", "Learners", "MemoryLearnerStore"]
