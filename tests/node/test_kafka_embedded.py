"""The embedded Kafka broker and Redis (lab.cluster.embedded.kafka_broker / redis / sidecars) in folders
of this test's own, on ports the shared ones do not use: formatted once, started, reused,
stopped by recorded PID only; the broker's warm start (jars resolved, storage formatted) is
measured and written to results/tests-<run-id>/broker_start.md."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid

import pytest

from lab.cluster.embedded import process
from lab.cluster.embedded.kafka_broker import BrokerOptions, EmbeddedBroker
from lab.cluster.embedded.redis_server import EmbeddedRedis, RedisOptions, ping
from lab.cluster.embedded.sidecars import stop_sidecars
from lab.errors import PortInUse

pytestmark = pytest.mark.node

PORT, CONTROLLER_PORT, REDIS_PORT = 19292, 19293, 16479
WARM_STARTS = 2


@pytest.fixture
def folder() -> str:
    return f"test-brokers/embedded-{uuid.uuid4().hex[:8]}"


def test_broker_formats_once_starts_warm_and_stops_by_pid(lab_home, folder, report):
    broker = EmbeddedBroker(BrokerOptions(home=lab_home, folder=folder, port=PORT, controller_port=CONTROLLER_PORT,
                                          heap="384m"))
    try:
        first = broker.start()
        assert first.format_seconds > 0 and process.is_ours(first.pid, broker.directory)
        assert broker.start().reused and broker.start().pid == first.pid
        cluster_id = first.cluster_id
        warm = []
        for _ in range(WARM_STARTS):
            assert broker.stop() == [first.pid if not warm else warm[-1].pid]
            assert not process.alive(first.pid) and broker.read_state() is None
            t0 = time.monotonic()
            again = broker.start()
            warm.append(again)
            assert again.format_seconds == 0.0 and again.resolve_seconds == 0.0
            assert again.cluster_id == cluster_id  # the same formatted storage
            assert time.monotonic() - t0 >= again.startup_seconds
        with pytest.raises(PortInUse):  # a second broker on the same ports is refused before it spawns
            EmbeddedBroker(BrokerOptions(home=lab_home, folder=folder + "-b", port=PORT,
                                         controller_port=CONTROLLER_PORT)).start()
    finally:
        broker.stop()
        shutil.rmtree(broker.directory, ignore_errors=True)
        shutil.rmtree(broker.directory.parent / (broker.directory.name + "-b"), ignore_errors=True)
    lines = ["| start | seconds (JVM spawn to 'Kafka Server started' + port open) |", "|---|---|",
             f"| first (format {first.format_seconds:.1f} s before it) | {first.startup_seconds:.2f} |"]
    lines += [f"| warm {i + 1} | {w.startup_seconds:.2f} |" for i, w in enumerate(warm)]
    report("broker_start.md", "embedded Kafka broker start times", "\n".join(lines) + "\n")


def test_a_recorded_pid_that_is_not_ours_is_left_alone(lab_home, folder):
    """The state file names a live process that is not the broker (PID reuse): stop signals nothing."""
    home = lab_home / folder  # a home of its own: stop_sidecars(nested) must not reach the shared broker
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        broker = EmbeddedBroker(BrokerOptions(home=home))
        broker.directory.mkdir(parents=True)
        broker.state_path.write_text(
            f'{{"version": "x", "pid": {stranger.pid}, "address": "127.0.0.1", "port": 1, "controller_port": 2, '
            f'"directory": "{broker.directory}", "cluster_id": "c"}}')
        assert broker.running() is None
        assert stop_sidecars(home, nested=True) == []
        assert stranger.poll() is None, "a process the lab did not start was signalled"
    finally:
        stranger.kill()
        stranger.wait()
        shutil.rmtree(home, ignore_errors=True)


def test_redis_starts_reuses_and_stops(lab_home, folder):
    redis = EmbeddedRedis(RedisOptions(home=lab_home, folder=folder.replace("brokers", "redis"), port=REDIS_PORT))
    try:
        state = redis.start()
        assert ping("127.0.0.1", REDIS_PORT) and redis.start().reused
        assert redis.stop() == [state.pid]
        assert not ping("127.0.0.1", REDIS_PORT) and not process.alive(state.pid)
    finally:
        redis.stop()
        shutil.rmtree(redis.directory, ignore_errors=True)
