"""The client's address behind a proxy: believed from `X-Forwarded-For` only when the peer is trusted.

Behind HAProxy every peer is the proxy, so limits kept per peer address would put every learner in
one bucket. HAProxy (deploy/haproxy.cfg, `option forwardfor`) appends the address it saw to
`X-Forwarded-For`. That header is anyone's to write, so it is read only when the peer is one of
`TRUSTED_PROXIES`, and then from the right: each hop a trusted proxy added is skipped, and the first
address that is not a trusted proxy's is the client. What a client wrote further left is never read.
uvicorn's own proxy-header handling is off (`proxy_headers=False` in `samvad serve`) so that this is
the one rule.
"""

from __future__ import annotations

import ipaddress

from starlette.requests import HTTPConnection

__all__ = ["TrustedProxies"]

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TrustedProxies:
    def __init__(self, networks: list[str]) -> None:
        self._networks: list[_Network] = [ipaddress.ip_network(n, strict=False) for n in networks]

    def trusted(self, host: str) -> bool:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self._networks)

    def client(self, conn: HTTPConnection) -> str:
        peer = conn.client.host if conn.client else "?"
        if not self._networks or not self.trusted(peer):
            return peer
        hops = [hop.strip() for value in conn.headers.getlist("x-forwarded-for") for hop in value.split(",")]
        for hop in reversed(hops):
            try:
                ipaddress.ip_address(hop)
            except ValueError:
                return peer  # a hop that is not an address: nothing left of it can be believed
            if not self.trusted(hop):
                return hop
        return hops[0] if hops and hops[0] else peer
