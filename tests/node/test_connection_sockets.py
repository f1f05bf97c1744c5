"""The driver's sockets: TCP_NODELAY as the config says, on every reactor the lab uses.

With Nagle on (the Python driver's default), a request written while an earlier one on the same
connection was unacknowledged waited for the node's delayed ACK: docs/cluster-internals.md.
"""
from __future__ import annotations

import socket

import pytest

from lab.cluster.connection import connect


def _nodelay(conn) -> list[int]:
    """TCP_NODELAY of every socket the driver opened: the pools' and the control connection's."""
    sockets = [c._socket for pool in conn.session._pools.values()
               for c in (pool._connections.values() if isinstance(pool._connections, dict) else pool._connections)]
    sockets.append(conn.cluster.control_connection._connection._socket)
    return [s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in sockets]


@pytest.mark.parametrize("reactor", [None, "asyncio"])
def test_nodelay_is_on_by_default(cluster_config, reactor):
    assert cluster_config.tcp_nodelay is True
    with connect(cluster_config, reactor=reactor) as conn:
        flags = _nodelay(conn)
    assert len(flags) >= 2 and all(flags), flags


def test_nodelay_off_leaves_nagle_on(cluster_config):
    with connect(cluster_config.replace(tcp_nodelay=False)) as conn:
        flags = _nodelay(conn)
    assert len(flags) >= 2 and not any(flags), flags
