"""The capacity notebook multiplies b_row by RF exactly once, and reads the
shards per node of the b_row run (pure)."""
from __future__ import annotations

import json

import pytest

from lab.calibration.capacity_model.disk_sizing import resident_bytes
from lab.calibration.experiments import capacity
from lab.constants import Constants

B_ROW = 812.5


@pytest.fixture
def b_row_values(tmp_path):
    # what the b_row notebook writes on a 3-node cluster at RF 3: bytes of ONE replica per row
    path = tmp_path / "values.json"
    path.write_text(json.dumps({"b_row_bytes": B_ROW, "replicas_per_row": 3.0, "nodes": 3, "shards_per_node": 8}))
    return str(path)


@pytest.mark.parametrize("rf", [1, 2, 3, 5])
def test_resident_bytes_has_one_rf_factor(b_row_values, rf):
    constants = Constants.appendix_b().replace(replication_factor=rf)
    result = capacity.run(capacity.Params(b_row_values=b_row_values), constants=constants)
    rows = result.sizing[result.sizing.source == "measured"]
    for r in rows.itertuples():
        expected = r.messages_per_day * B_ROW * constants.lsm_space_amp * rf * constants.capacity_retention_days
        assert r.resident_bytes == pytest.approx(expected, rel=1e-12)
        assert r.b_row_bytes == B_ROW and r.replication_factor == rf
    base = capacity.run(capacity.Params(b_row_values=b_row_values), constants=Constants.appendix_b().replace(replication_factor=1))
    ratio = rows.resident_bytes.to_numpy() / base.sizing[base.sizing.source == "measured"].resident_bytes.to_numpy()
    assert ratio == pytest.approx([rf] * len(ratio))
    assert resident_bytes(b_row_bytes=B_ROW, replication_factor=rf) == pytest.approx(
        resident_bytes(b_row_bytes=B_ROW, replication_factor=1) * rf)


def test_shards_come_from_the_b_row_run_unless_given(b_row_values):
    constants = Constants.appendix_b()
    from_run = capacity.run(capacity.Params(b_row_values=b_row_values), constants=constants)
    given = capacity.run(capacity.Params(b_row_values=b_row_values, shards_per_node=1), constants=constants)
    plain = capacity.run(capacity.Params(b_row_bytes=B_ROW), constants=constants)
    f, g, p = (x.sizing.iloc[0] for x in (from_run, given, plain))
    assert (f.shards_per_node, g.shards_per_node, p.shards_per_node) == (8, 1, 1)
    assert f.message_record_sstables_per_node == 8 * g.message_record_sstables_per_node
