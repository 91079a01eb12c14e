"""Build the concrete brain, backends (mirror, playbooks, learners, the Neo4j driver) and knowledge
library that the settings ask for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from brain.knowledge.library import KnowledgeLibrary
from brain.knowledge.store import DiskPlaybookStore, PlaybookStore
from brain.policy import Brain
from server.backends import Backends, InMemoryMirror, MirrorBackend
from server.config import BrainChoice, MirrorChoice, Settings
from server.graphdb import GraphDriver
from server.learners.store import MemoryLearnerStore
from server.studio.store import DiskPackStore
from session.registry import SessionRegistry

if TYPE_CHECKING:
    from server.cluster.node import ClusterNode


def build_brain(settings: Settings, knowledge: KnowledgeLibrary | None = None) -> Brain:
    if settings.brain_kind is BrainChoice.OPENAI:
        from brain.knowledge.retriever import knowledge_retriever, no_notes
        from brain.llm import OpenAIBrain

        # Behind the response policy (server/app.py), the notes come from the policy's own
        # retrieval (P1); without a library the brain retrieves for itself.
        retriever = knowledge_retriever() if knowledge is None else no_notes
        return OpenAIBrain.from_settings(settings, retriever=retriever)
    from brain.rules_vendor import RuleBasedVendor

    return RuleBasedVendor()


def build_backends(settings: Settings) -> Backends:
    """The stores the settings ask for: in memory, or in Neo4j on one shared driver (opened and
    closed by the application's lifespan, server/app.py) for the mirror, playbooks, learners and leases."""
    if settings.mirror_kind is not MirrorChoice.NEO4J:
        return Backends(mirror=InMemoryMirror(), playbooks=DiskPlaybookStore(settings.KNOWLEDGE_DIR),
                        learners=MemoryLearnerStore(), packs=DiskPackStore(settings.KNOWLEDGE_DIR))
    from server.classes.graph import Neo4jClassStore
    from server.learners.graph import Neo4jLearnerStore
    from server.playbooks import Neo4jPlaybookStore
    from server.studio.graph import Neo4jPackStore

    graphdb = GraphDriver.from_settings(settings)
    mirror: MirrorBackend
    if settings.CLUSTER_NODE_ID:
        from server.cluster import FencedMirror

        mirror = FencedMirror(
            settings.NEO4J_URI, node=settings.CLUSTER_NODE_ID, timeout_ms=settings.NEO4J_TIMEOUT_MS,
            buffer_changes=settings.MIRROR_BUFFER_CHANGES, batch_max=settings.MIRROR_BATCH_MAX,
            flush_ms=settings.MIRROR_FLUSH_MS, writers=settings.MIRROR_WRITERS, graphdb=graphdb,
        )
    else:
        from server.mirror import Neo4jMirror

        mirror = Neo4jMirror.from_settings(settings, graphdb)
    return Backends(mirror=mirror, playbooks=Neo4jPlaybookStore.from_settings(settings, graphdb),
                    learners=Neo4jLearnerStore(graphdb=graphdb, timeout_s=settings.NEO4J_TIMEOUT_MS / 1000),
                    packs=Neo4jPackStore(graphdb, timeout_s=settings.NEO4J_TIMEOUT_MS / 1000), graphdb=graphdb,
                    classes=Neo4jClassStore(graphdb, timeout_s=settings.NEO4J_TIMEOUT_MS / 1000))


def build_knowledge(settings: Settings, store: PlaybookStore) -> KnowledgeLibrary:
    """The scenarios' knowledge over `store`: playbooks in Neo4j when the mirror is (server/playbooks.py),
    else on disk in KNOWLEDGE_DIR."""
    return KnowledgeLibrary(store, top_k=settings.RETRIEVAL_TOP_K, min_score=settings.RETRIEVAL_MIN_SCORE)


def build_cluster(settings: Settings, mirror: MirrorBackend, registry: SessionRegistry) -> ClusterNode | None:
    """This node's leases when it is one of several (CLUSTER_NODE_ID); None for a single node."""
    if not settings.CLUSTER_NODE_ID:
        return None
    from server.cluster import ClusterNode, FencedMirror
    from server.cluster.node import LeaseSettings

    assert isinstance(mirror, FencedMirror), "a cluster node writes through the fenced mirror"
    return ClusterNode(LeaseSettings(node=settings.CLUSTER_NODE_ID, ttl_s=settings.LEASE_SECONDS,
                                     renew_s=settings.LEASE_RENEW_SECONDS, wait_s=settings.LEASE_WAIT_SECONDS,
                                     drain_grace_s=settings.DRAIN_GRACE_SECONDS), mirror, registry)
