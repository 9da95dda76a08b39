"""ICE host-candidate selection for aiortc peers, shared by the server and its clients.

aioice offers every interface's address except loopback; on a single machine (tests, demos) or a
multi-homed edge box, both sides must offer the same chosen addresses instead.
"""

from __future__ import annotations

import aioice.ice


def restrict_ice_host_addresses(addresses: list[str]) -> None:
    """Offer only these host addresses as ICE candidates (process-wide; empty list = all)."""
    if not addresses:
        return
    fixed = list(addresses)
    aioice.ice.get_host_addresses = lambda use_ipv4=True, use_ipv6=True: list(fixed)


__all__ = ["restrict_ice_host_addresses"]
