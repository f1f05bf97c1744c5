"""An emulated round trip (``rtt_us``): the latency proxy is really in the path of every request
and every socket of the session ends at it."""
from __future__ import annotations

import psutil
import pytest

from lab.cluster.connection import connect
from lab.measure import now_ns

RTT_US = 2000
REQUESTS = 60
QUERY = "SELECT release_version FROM system.local"


def _latencies_us(connection) -> list[float]:
    out = []
    for _ in range(REQUESTS):
        start = now_ns()
        connection.session.execute(QUERY)
        out.append((now_ns() - start) / 1000)
    return out


@pytest.fixture(scope="module")
def proxied(cluster_config):
    with connect(cluster_config.replace(rtt_us=RTT_US)) as connection:
        yield connection


def test_every_request_through_the_proxy_pays_the_round_trip(cluster_config, proxied):
    with connect(cluster_config.replace(rtt_us=0)) as direct:
        assert direct.rtt_proxy is None
        direct_us = _latencies_us(direct)
    proxied_us = _latencies_us(proxied)
    # the toxics delay the request and the response by 1 ms each: no request can come back sooner
    assert min(proxied_us) >= RTT_US, (min(proxied_us), sorted(direct_us)[:3])
    streams = {t["stream"]: t["attributes"]["latency"] for t in proxied.rtt_proxy.toxics()}
    assert streams == {"upstream": 1, "downstream": 1}


def _socket_of(conn):
    return conn._socket


def test_every_connection_of_the_session_ends_at_the_proxy(cluster_config, proxied):
    proxy = proxied.rtt_proxy
    target = (proxy.listen_host, proxy.listen_port)
    assert all((h.endpoint.address, h.endpoint.port) == target for h in proxied.hosts())
    driver_sockets = [proxied.cluster.control_connection._connection]
    for pool in proxied.session.get_pools():
        driver_sockets += list(pool._connections.values())
    assert len(driver_sockets) >= 2  # the control connection and at least one pool connection
    peers = {_socket_of(c).getpeername()[:2] for c in driver_sockets}
    assert peers == {target}, peers
    # the proxy's side: it accepted each of those sockets and opened one to the node per socket
    local_ports = {_socket_of(c).getsockname()[1] for c in driver_sockets}
    mine = psutil.Process(proxy.pid).net_connections("tcp")
    accepted = {c.raddr.port for c in mine if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == proxy.listen_port}
    upstream = [c for c in mine if c.status == psutil.CONN_ESTABLISHED and c.raddr and c.raddr.port == cluster_config.port]
    assert local_ports <= accepted, (local_ports, accepted)
    assert len(upstream) >= len(driver_sockets)
