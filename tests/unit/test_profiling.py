"""``lab bench store --profile``'s pure parts: parameters and the top-frame tables of a raw
py-spy profile (the profile itself runs on the node: tests/node/test_bench.py)."""
from __future__ import annotations

import pytest

from lab.bench.store_paths.profiling import MODES, ProfileParams, frame_name, top
from lab.errors import ConfigError

RAW = """\
process 1:"python -m x";main (lab/x.py:3);batch_read (/repo/lab/store/batch_read.py:10);_decode (/repo/lab/store/records.py:5) 6
process 1:"python -m x";main (lab/x.py:3);batch_read (/repo/lab/store/batch_read.py:10) 2
process 1:"python -m x";main (lab/x.py:3);execute (/v/lib/python3.11/site-packages/cassandra/cluster.py:9) 2
"""


def test_top_gives_self_and_inclusive_shares(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text(RAW)
    text = top(path)
    assert text.startswith("# p.txt: 10 samples")
    self_part, incl_part = text.split("| inclusive % | function |")
    assert "| 60.0 | _decode (lab/store/records.py) |" in self_part
    assert "| 20.0 | batch_read (lab/store/batch_read.py) |" in self_part
    assert "| 20.0 | execute (cassandra/cluster.py) |" in self_part
    assert "| 100.0 | main (lab/x.py) |" in incl_part and "| 80.0 | batch_read (lab/store/batch_read.py) |" in incl_part


def test_top_leaves_out_samples_taken_while_importing(tmp_path):
    path = tmp_path / "p.txt"
    importing = ('process 1:"python -m x";_run_module_as_main (<frozen runpy>:1);'
                 '_find_and_load (<frozen importlib._bootstrap>:1176);<module> (/repo/lab/store/x.py:1) 30\n')
    path.write_text(RAW + importing)
    text = top(path)
    assert text.startswith("# p.txt: 40 samples; 30 taken while importing modules, left out: shares of the other 10")
    assert "| 60.0 | _decode (lab/store/records.py) |" in text  # of the 10 samples of the workload
    assert "importlib" not in text and "<module>" not in text


def test_top_leaves_out_the_workloads_setup(tmp_path):
    """The send floor's calls are built before its clock (sealing, JSON): not what the floor does."""
    path = tmp_path / "p.txt"
    building = ('process 1:"python -m x";work (/repo/lab/bench/store_paths/profiling.py:9);'
                'send_floor_calls (/repo/lab/bench/store_paths/floors.py:80);encode (/repo/lab/store/x.py:1) 5\n'
                'process 1:"python -m x";_scratch_store (/repo/p.py:1);MessageStore.create_schema (/repo/s.py:2) 3\n'
                'process 1:"python -m x";one (/repo/p.py:1);send_floor_calls.<locals>.call (/repo/lab/bench/store_paths/floors.py:96) 2\n')
    path.write_text(RAW + building)
    text = top(path)
    assert text.startswith("# p.txt: 20 samples; 8 while setting the workload up (schema, calls built before the "
                           "clock), left out: shares of the other 12")
    assert "encode" not in text and "create_schema" not in text
    assert "send_floor_calls.<locals>.call (lab/bench/store_paths/floors.py)" in text  # the floor running is kept


def test_top_keeps_the_stores_own_settle_callbacks(tmp_path):
    """Only lab.measure.client_gc's settle is set-up: the store's step callbacks named settle are its hot path."""
    path = tmp_path / "p.txt"
    path.write_text('process 1:"python -m x";work (/repo/p.py:1);settle (/repo/lab/measure/client_gc.py:30) 4\n'
                    'process 1:"python -m x";loop (/repo/p.py:1);_Drive._fire_all.<locals>.settle '
                    '(/repo/lab/store/plumbing/steps.py:244) 6\n')
    text = top(path)
    assert text.startswith("# p.txt: 10 samples; 4 while setting the workload up")
    assert "| 100.0 | _Drive._fire_all.<locals>.settle (lab/store/plumbing/steps.py) |" in text


def test_frame_name_shortens_paths():
    assert frame_name("f (/a/b/lib/python3.11/json/decoder.py:12)") == "f (json/decoder.py)"
    assert frame_name("g (/w/wt/lab/store/ids.py:1)") == "g (lab/store/ids.py)"


def test_frame_name_shortens_any_python_3s_standard_library():
    assert frame_name("f (/usr/lib/python3.12/json/decoder.py:12)") == "f (json/decoder.py)"
    assert frame_name("f (/opt/py/lib/python3.13/threading.py)") == "f (threading.py)"
    assert frame_name("h (/v/lib/python3.12/site-packages/cassandra/cluster.py:9)") == "h (cassandra/cluster.py)"
    assert frame_name("<module> (<frozen importlib._bootstrap>:1)") == "<module> (<frozen importlib._bootstrap>)"


def test_params_refuse_unknown_workloads_and_non_positive_seconds():
    assert ProfileParams.preset(quick=True).seconds < ProfileParams.preset(quick=False).seconds
    assert ProfileParams.preset(quick=True, seconds=7).seconds == 7
    assert ProfileParams().modes == MODES
    with pytest.raises(ConfigError, match="unknown profile workload"):
        ProfileParams(modes=("send", "nope"))
    with pytest.raises(ConfigError):
        ProfileParams(seconds=0)
    assert ProfileParams().client_gc == "freeze"  # the workload process's GC, as the bench's (lab.measure.client_gc)
    with pytest.raises(ConfigError, match="client_gc"):
        ProfileParams(client_gc="off")
