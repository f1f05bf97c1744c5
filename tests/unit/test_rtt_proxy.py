"""The pure parts of the emulated round trip: parsing, the config field, the split per
direction and the endpoint factory that keeps the driver on the proxy."""
from __future__ import annotations

import pytest

from lab.cluster.config import ClusterConfig, load_config, parse_rtt
from lab.cluster.rtt_proxy import ProxyEndPointFactory, split_rtt
from lab.errors import ConfigError, RttProxyError


@pytest.mark.parametrize(("text", "us"), [
    ("1ms", 1000), ("2ms", 2000), ("300us", 300), ("300µs", 300), ("0.5ms", 500), (" 2 ms ", 2000),
    ("0", 0), ("1500", 1500), ("0.002s", 2000), ("1MS", 1000), (3000, 3000),
])
def test_parse_rtt(text, us):
    assert parse_rtt(text) == us


@pytest.mark.parametrize("text", ["", "ms", "-1ms", "1.5us", "abc", "1 h", "inf", "nanms", True, -5])
def test_parse_rtt_refuses(text):
    with pytest.raises(ValueError):
        parse_rtt(text)


def test_rtt_from_flag_env_and_default():
    assert ClusterConfig().rtt_us == 0
    assert load_config(env={"LAB_RTT_US": "2ms"}).rtt_us == 2000
    assert load_config(env={"LAB_RTT_US": "2ms"}, flags={"rtt_us": "1ms"}).rtt_us == 1000
    # what a load worker receives from its parent (lab.load.processes.config_env): microseconds
    assert load_config(env={"LAB_RTT_US": str(ClusterConfig(rtt_us=3000).rtt_us)}).rtt_us == 3000
    assert ClusterConfig(rtt_us=2000).redacted()["rtt_us"] == 2000


def test_bad_rtt_names_its_source():
    with pytest.raises(ConfigError, match="LAB_RTT_US.*2 hours|2 hours.*LAB_RTT_US") as info:
        load_config(env={"LAB_RTT_US": "2 hours"})
    assert info.value.facts["field"] == "rtt_us"
    with pytest.raises(ConfigError, match="^--rtt 2h: "):
        load_config(flags={"rtt_us": "2h"})
    with pytest.raises(ConfigError):
        ClusterConfig(rtt_us=-1)


@pytest.mark.parametrize(("rtt_us", "split"), [(0, (0, 0)), (1000, (0, 1)), (2000, (1, 1)), (3000, (1, 2))])
def test_split_adds_up_to_the_round_trip(rtt_us, split):
    assert split_rtt(rtt_us) == split
    assert sum(split) * 1000 == rtt_us


def test_sub_millisecond_round_trip_is_refused():
    with pytest.raises(ConfigError, match="whole milliseconds"):
        split_rtt(300)
    with pytest.raises(ConfigError):
        split_rtt(1500)


def test_endpoint_factory_pins_every_node_to_the_proxy():
    factory = ProxyEndPointFactory("127.0.0.1", 45000)
    local = factory.create({"rpc_address": "127.0.0.1", "rpc_port": 9042})
    peer = factory.create({"peer": "10.0.0.2", "native_port": 9042})
    assert (local.address, local.port) == (peer.address, peer.port) == ("127.0.0.1", 45000)
    assert factory.nodes_seen == {"127.0.0.1", "10.0.0.2"}  # two nodes: Connection refuses them


def test_proxy_error_is_a_cluster_error():
    from lab.errors import ClusterError
    assert issubclass(RttProxyError, ClusterError)
