"""Smoke-test a Neo4j 5 server over Bolt: connect, write, read back, clean up.

Usage: python scripts/neo4j_smoke.py [URI]
URI defaults to $NEO4J_URI or bolt://127.0.0.1:7687; credentials come from
$NEO4J_USER / $NEO4J_PASSWORD (no auth when NEO4J_USER is unset).
Exits 0 on success, 1 on failure.
"""

from __future__ import annotations

import os
import sys
import uuid

import neo4j
from neo4j import GraphDatabase

SMOKE_WRITE = "CREATE (n:SamvadSmoke {token: $token}) RETURN n.token AS token"
SMOKE_DELETE = "MATCH (n:SamvadSmoke {token: $token}) DELETE n"


def main(argv: list[str]) -> int:
    uri = (
        argv[1]
        if len(argv) > 1
        else os.environ.get("NEO4J_URI", "bolt://127.0.0.1:7687")
    )
    user = os.environ.get("NEO4J_USER")
    auth = (user, os.environ.get("NEO4J_PASSWORD", "")) if user else None
    token = uuid.uuid4().hex
    try:
        with GraphDatabase.driver(uri, auth=auth) as driver:
            driver.verify_connectivity()
            info = driver.get_server_info()
            records, _, _ = driver.execute_query(SMOKE_WRITE, token=token)
            ok = records[0]["token"] == token
            driver.execute_query(SMOKE_DELETE, token=token)
    except (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError) as e:
        print(f"neo4j smoke: FAILED at {uri}: {e}", file=sys.stderr)
        return 1
    if not ok:
        print(
            f"neo4j smoke: FAILED at {uri}: read back a different value",
            file=sys.stderr,
        )
        return 1
    print(
        f"neo4j smoke: OK {uri} server={info.agent} bolt={'.'.join(map(str, info.protocol_version))}"
        f" driver={neo4j.__version__}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
