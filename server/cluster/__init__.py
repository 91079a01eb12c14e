"""Scale-out: several nodes behind HAProxy, each session owned by one node through a Neo4j lease.

- `leases`: the Lease node's Cypher: take or steal (a compare-and-set that bumps the epoch), renew a
  node's leases in one transaction, release, and the fence every mirror write runs first.
- `fenced`: `FencedMirror`, the Neo4j mirror whose every batch carries its sessions' epochs; Neo4j
  refuses the rows of a stale epoch inside the batch's own transaction.
- `node`: `ClusterNode`: the epochs this node holds, the renewal loop, handover and drain.
- `routes`: `POST /admin/drain` and the session id HAProxy chose for a new session.

Without Neo4j (the embedded default) there is one node and none of this runs (docs/deployment.md).
"""

from server.cluster.fenced import FencedMirror
from server.cluster.node import ClusterNode, LeaseBusy

__all__ = ["ClusterNode", "FencedMirror", "LeaseBusy"]
