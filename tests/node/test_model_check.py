"""The model check's per-table disk inputs against the real node: client_dedup's bytes per row
as b_row measures them must be what the send path leaves on disk (on 3 nodes
at RF 3 the model check predicted client_dedup 15.4 % low, ~22 B a row, because b_row measured
rows seeded in one INSERT while ``send`` reserves the row and then commits it, so its cells carry
a write time of their own)."""
from __future__ import annotations

from pathlib import Path

import pytest

from lab.calibration.capacity_model.prediction_check import TARGETS, table_totals
from lab.constants import load_constants

pytestmark = pytest.mark.node

# b_row's rows per repeat and the check's sends alike: each SSTable's fixed components (Statistics,
# Filter, TOC, ...) then weigh the same per row in the measurement and in the check
ROWS = 1000


@pytest.fixture(scope="module")
def b_row_values(cluster_config, tmp_path_factory) -> Path:
    """A tiny real b_row run (main profile + a row model over four mixes): its values.json."""
    from lab.calibration.experiments import b_row
    from lab.calibration.experiments.common import Output, open_testbed

    folder = tmp_path_factory.mktemp("model_check_inputs") / "b_row"
    with open_testbed(cluster_config) as testbed:
        r = b_row.run(testbed, b_row.Params(rows=ROWS, min_repeats=2, max_repeats=2, partition_rows=0,
                                            compressions=("lz4",), fit_rows=150, fit_repeats=2, show_progress=False,
                                            fit_mixes=("text_only", "text_long", "files_audio",
                                                       "photos_small_thumbs")), constants=load_constants())
    Output(folder).record(r.values())
    return folder / "values.json"


def test_client_dedup_bytes_per_row_predicted_within_the_disk_target(cluster_config, b_row_values):
    """``ROWS`` sends through the full write path, flushed: the node's client_dedup files against
    rows x b_row's client_dedup bytes per row, within the model check's own disk target (±5 %)."""
    from lab.calibration.experiments import model_check
    from lab.calibration.experiments.common import open_testbed

    params = model_check.Params(b_row_values=str(b_row_values), parts=("disk",), sends=ROWS, show_progress=False)
    with open_testbed(cluster_config) as testbed:
        result = model_check.run(testbed, params, constants=load_constants())
    totals = {c.table: c for c in table_totals(result.checks)}
    dedup = totals["client_dedup"]
    per_row = dedup.measured / dedup.rows
    assert dedup.rows >= ROWS and per_row > 0
    assert abs(dedup.error) <= TARGETS["disk"], (
        f"client_dedup: predicted {dedup.predicted / dedup.rows:.1f} B a row (b_row), measured {per_row:.1f} B a row "
        f"on the node ({dedup.per_row_error:+.1f} B, error {dedup.error:+.1%}, target ±{TARGETS['disk']:.0%})")
    # the other per-row input and the row model stay within the same target on the same run
    for table in ("message_index", "message_record"):
        assert abs(totals[table].error) <= TARGETS["disk"], (table, totals[table].error)
