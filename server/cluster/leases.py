"""The Lease node: who owns a session, under which epoch, until when. Every value is a parameter.

`(:Lease {session_id, owner, epoch, expires_at, wanted_by})`, unique on `session_id`. Times are Neo4j's
own clock (`timestamp()`, ms), so the nodes' clocks never have to agree.

Every statement that decides on a lease first writes a throwaway property on it (`SET l._lock = true`),
which takes the node's write lock before anything is read: the documented way to avoid lost updates in
Neo4j (Operations Manual, "Concurrent data access"). A take, a renewal, a release and the fence of a
mirror batch on the same lease therefore run one after the other, each reading what the previous one
committed. Batches sort their session ids so that two of them lock in the same order.
"""

from __future__ import annotations

from typing import LiteralString

LEASE_SCHEMA: LiteralString = (
    "CREATE CONSTRAINT lease_session_id IF NOT EXISTS FOR (l:Lease) REQUIRE l.session_id IS UNIQUE"
)

# Take a free lease, or steal an expired one: a compare-and-set that bumps the epoch. A lease held by a
# live other node is left alone and marked `wanted_by` this node, which its owner's next renewal sees.
ACQUIRE: LiteralString = """
MERGE (l:Lease {session_id: $session_id})
ON CREATE SET l.epoch = 0, l.expires_at = 0
SET l._lock = true
WITH l, l.owner AS previous,
     (l.owner IS NULL OR l.owner = $node OR l.expires_at <= timestamp()) AS free
SET l.epoch = CASE WHEN free THEN l.epoch + 1 ELSE l.epoch END,
    l.owner = CASE WHEN free THEN $node ELSE l.owner END,
    l.expires_at = CASE WHEN free THEN timestamp() + $ttl_ms ELSE l.expires_at END,
    l.wanted_by = CASE WHEN free THEN null ELSE $node END
REMOVE l._lock
RETURN free, l.epoch AS epoch, previous, l.owner AS owner, l.expires_at - timestamp() AS remaining_ms
"""

# One transaction renews every lease a node holds. What it does not return is lost (stolen after it
# expired); `wanted` says another node asked for it (HAProxy now routes the session there).
RENEW: LiteralString = """
UNWIND $leases AS x
MATCH (l:Lease {session_id: x.session_id})
SET l._lock = true
REMOVE l._lock
WITH l, x WHERE l.owner = $node AND l.epoch = x.epoch
SET l.expires_at = timestamp() + $ttl_ms
RETURN l.session_id AS session_id, l.wanted_by IS NOT NULL AND l.wanted_by <> $node AS wanted
"""

# Hand leases back (drain, handover): expired at once, so the next node to ask takes them (epoch + 1).
RELEASE: LiteralString = """
UNWIND $leases AS x
MATCH (l:Lease {session_id: x.session_id})
SET l._lock = true
REMOVE l._lock
WITH l, x WHERE l.owner = $node AND l.epoch = x.epoch
SET l.expires_at = 0, l.wanted_by = null
RETURN l.session_id AS session_id
"""

# The fence, first statement of every mirror batch's transaction: lock the batch's leases and name
# the sessions this writer no longer owns under the epoch it holds. The batch's rows for them are
# not written, in this same transaction, so no write of a stale owner can land after a takeover.
FENCE: LiteralString = """
UNWIND $leases AS x
OPTIONAL MATCH (l:Lease {session_id: x.session_id})
FOREACH (_ IN CASE WHEN l IS NULL THEN [] ELSE [1] END | SET l._lock = true REMOVE l._lock)
WITH l, x WHERE l IS NULL OR l.owner <> $node OR l.epoch <> x.epoch
RETURN x.session_id AS session_id
"""

# Which node wrote a Session last and under which epoch: set in the batch's transaction, after the fence.
STAMP_WRITER: LiteralString = """
UNWIND $leases AS x
MATCH (s:Session {session_id: x.session_id})
SET s.written_by = $node, s.written_epoch = x.epoch
"""
