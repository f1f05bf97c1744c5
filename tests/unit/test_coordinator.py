"""The distributed run's coordinator over real HTTP on loopback (no cluster): workers get
distinct indexes, a full master refuses, a worker's keys stay with the machine that seeded
them, only a worker's own file names land in the load folder, t0 is given on the worker's
clock. And the CLI's distributed flags refuse what a worker must take from the master."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from lab.cli import main
from lab.errors import CoordinatorError
from lab.load.coordinator import Coordinator, CoordinatorClient
from lab.load.processes import free_port


@pytest.fixture
def coordinator(tmp_path):
    c = Coordinator(plan={"run_id": "r1-load"}, expected=2, load_dir=tmp_path / "load", host="127.0.0.1",
                    port=free_port(), keyspace="ks", locust_port=5557, seeded_before=()).start()
    yield c
    c.close()


def _client(c: Coordinator) -> CoordinatorClient:
    host, port = c.address
    return CoordinatorClient(host, port)


def test_workers_get_distinct_indexes_and_a_full_master_refuses(coordinator):
    client = _client(coordinator)
    first = client.join(state_for=lambda _k: [], lab_version=None, retry_seconds=0)
    second = client.join(state_for=lambda _k: [], lab_version=None, retry_seconds=0)
    assert {first["index"], second["index"]} == {0, 1}
    assert first["plan"] == {"run_id": "r1-load"} and first["keyspace"] == "ks" and first["locust_port"] == 5557
    with pytest.raises(CoordinatorError, match="expects 2 worker.* all have joined"):
        client.join(state_for=lambda _k: [], lab_version=None, retry_seconds=0)


def test_a_machine_gets_the_index_whose_state_it_keeps(tmp_path):
    c = Coordinator(plan={"run_id": "r1"}, expected=2, load_dir=tmp_path, host="127.0.0.1", port=free_port(),
                    keyspace="ks", locust_port=5557, seeded_before=(0, 1)).start()
    try:
        client = _client(c)
        assert client.join(state_for=lambda key: [1] if key == "r1" else [], lab_version=None,
                           retry_seconds=0)["index"] == 1
        with pytest.raises(CoordinatorError, match="seeded on other machines"):
            client.join(state_for=lambda _k: [], lab_version=None, retry_seconds=0)
    finally:
        c.close()


def test_only_a_workers_own_files_are_written(coordinator, tmp_path):
    client = _client(coordinator)
    index = client.join(state_for=lambda _k: [], lab_version=None, retry_seconds=0)["index"]
    src = tmp_path / "totals.json"
    src.write_text('{"worker": "w"}')
    client.put_file(index, f"totals/worker-{index}.json", src)
    assert (coordinator.load_dir / "totals" / f"worker-{index}.json").read_text() == '{"worker": "w"}'
    for name in (f"totals/worker-{1 - index}.json", "../escape.json", "parameters.json"):
        with pytest.raises(CoordinatorError, match="not a file worker"):
            client.put_file(index, name, src)
    assert not (tmp_path / "escape.json").exists()


def test_ready_done_and_t0(coordinator):
    client = _client(coordinator)
    index = client.join(state_for=lambda _k: [], lab_version=None, retry_seconds=0)["index"]
    client.post("/ready", {"index": index, "seed_sends": 7})
    assert coordinator.wait_for("ready", 1, 1) and not coordinator.wait_for("ready", 2, 0.2)
    coordinator.publish_t0(1234.5)
    t0 = client.wait_t0(5)
    assert abs(t0 - 1234.5) < 0.5 and client.rtt_seconds is not None  # same clock here: offset ~0
    client.post("/done", {"index": index, "audit": {"acked": 3}})
    assert coordinator.workers[index]["audit"] == {"acked": 3} and coordinator.count("done") == 1
    with pytest.raises(CoordinatorError, match="no worker 5"):
        client.post("/ready", {"index": 5})


def test_no_master_is_a_clear_error():
    client = CoordinatorClient("127.0.0.1", free_port())
    with pytest.raises(CoordinatorError, match="cannot reach the master's coordinator.*lab load --master"):
        client.join(state_for=lambda _k: [], lab_version=None, retry_seconds=0)


@pytest.mark.parametrize("args, message", [
    (["--worker", "--master-host", "h", "--rate", "5"], "--worker takes its plan from the master: drop --rate"),
    (["--worker", "--master-host", "h", "--users", "3", "--web"], "drop --users, --web"),
    (["--worker"], "--worker needs --master-host H"),
    (["--master", "--users", "3"], "--master needs --expect-workers N"),
    (["--expect-workers", "2", "--users", "3"], "--expect-workers goes with --master"),
])
def test_distributed_flags_are_checked_before_anything_runs(tmp_path, args, message):
    out = CliRunner().invoke(main, ["load", *args, "--results", str(tmp_path)])
    assert out.exit_code == 2 and message in out.output, out.output
    assert not any(tmp_path.iterdir())
