"""``lab bench load --profile``'s pure parts: each py-spy sample's layer (lab.bench.loader_layers),
the table priced with a run's loader CPU per call, the goal's verdict, the parameters and py-spy's
own note (the profile itself runs on the node: tests/node/test_bench_load_profile.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from lab.bench import loader_layers as layers
from lab.bench.load_generator_report import chat_goal_ms_per_call
from lab.bench.loader_layers import (CLUSTER, DRIVER, LAYERS, LOAD, LOCUST, OTHER, STORE, LayerTable, goal_verdict,
                                     layer_samples, stack_layer)
from lab.bench.loader_profile import LoaderProfileParams, pyspy_note
from lab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
BOOT = "Thread._bootstrap (threading.py:1002);Thread.run (threading.py:982)"
USER = "run_user (locust/user/users.py:206);StoreUser.call (lab/load/locust/users.py:96)"
SEND = f"{USER};MessageStore.send (lab/store/__init__.py:243);SendPath.walk (lab/store/write/send.py:228)"
SITES = {"lab/cluster/connection.py": frozenset({197, 234})}

STACKS = {  # a collapsed stack -> the layer its self time goes to
    f"{BOOT};LibevLoop._run_loop (cassandra/io/libevreactor.py:101)": DRIVER,
    # the compiled driver's time is the calling line's self time: a driver line is the driver's
    f"{SEND};Connection.execute_async (lab/cluster/connection.py:197)": DRIVER,
    f"{SEND};Connection._bind (lab/cluster/connection.py:234)": DRIVER,
    f"{SEND};Connection.execute_async (lab/cluster/connection.py:196)": CLUSTER,  # the wrapper's own line
    # a frame of no layer (the standard library, a library) takes its nearest caller's
    f"{SEND};Connection.execute_async (lab/cluster/connection.py:197);Condition.__enter__ (threading.py:272)": DRIVER,
    f"{SEND};seal (lab/store/crypto.py:40);encrypt (cryptography/hazmat/aead.py:9)": STORE,
    f"{SEND}": STORE,
    f"{BOOT};LibevLoop._run_loop (cassandra/io/libevreactor.py:101);"
    "cached_named_tuple_factory (lab/cluster/row_factory.py:39)": CLUSTER,  # a lab callback the driver calls
    f"{BOOT};LibevLoop._run_loop (cassandra/io/libevreactor.py:101);answered (lab/store/plumbing/steps.py:284)": STORE,
    f"{USER}": LOAD,  # lab/load/locust/ is the lab's, not Locust's
    f"{USER};EventHook.fire (locust/event.py:45);LatencyRecorder.record (lab/measure/hdr.py:140)": LOAD,
    "Hub.run (gevent/hub.py:647)": LOCUST,
    "run (greenlet/__init__.py:1);StatsEntry.log (locust/stats.py:381);bucket (locust/stats.py:138)": LOCUST,
    f"{BOOT};_worker (concurrent/futures/thread.py:81);Queue.get (queue.py:165)": OTHER,
    "": OTHER,
}


@pytest.mark.parametrize("stack", list(STACKS), ids=range(len(STACKS)))
def test_each_stack_goes_to_its_innermost_layered_frame(stack):
    assert stack_layer(stack, SITES) == STACKS[stack]


def test_without_call_sites_the_wrapper_keeps_its_lines():
    assert stack_layer(f"{SEND};Connection.execute_async (lab/cluster/connection.py:197)", {}) == CLUSTER


def test_layer_samples_sums_every_line_into_every_layer():
    lines = [f"{stack} {n}" for n, stack in enumerate(STACKS, 1) if stack] + ["not a sample line", ""]
    counts = layer_samples(lines, SITES)
    assert list(counts) == list(LAYERS)
    assert sum(counts.values()) == sum(n for n, stack in enumerate(STACKS, 1) if stack)
    assert counts[LOCUST] == 12 + 13  # the two Locust / gevent stacks' counts


def test_frames_from_full_file_names_are_shortened_as_py_spy_does():
    assert layers.short_path("/w/.venv/lib/python3.11/site-packages/cassandra/io/libevreactor.py") == \
        "cassandra/io/libevreactor.py"
    assert layers.short_path("/work/wt/h/lab/store/write/send.py") == "lab/store/write/send.py"
    assert layers.short_path("/usr/lib/python3.11/threading.py") == "threading.py"
    assert layers.short_path("<frozen importlib._bootstrap>") == "<frozen importlib._bootstrap>"
    full = ("Thread.run (/usr/lib/python3.11/threading.py:982);"
            "Connection.execute_async (/repo/lab/cluster/connection.py:197) 3\n"
            "odd frame;f (/x/site-packages/locust/a.py) 2\n")
    assert layers.shorten(full) == ("Thread.run (threading.py:982);Connection.execute_async "
                                    "(lab/cluster/connection.py:197) 3\nodd frame;f (locust/a.py) 2\n")
    assert layer_samples(layers.shorten(full).splitlines(), SITES) == {**dict.fromkeys(LAYERS, 0), DRIVER: 3,
                                                                       LOCUST: 2}


def test_frame_location_reads_file_and_line():
    assert layers.frame_location("f (a/b.py:12)") == ("a/b.py", 12)
    assert layers.frame_location("<lambda> (a (x)/b.py:7)") == ("a (x)/b.py", 7)
    assert layers.frame_location("f (a/b.py)") == ("a/b.py", None)


def test_every_driver_call_site_names_a_line_of_its_module():
    """A renamed attribute would silently hand the driver's time to the wrapper: each text of
    DRIVER_CALL_SITES is on a code line of its module today."""
    for module, text in layers.DRIVER_CALL_SITES:
        source = (ROOT / module).read_text()
        lines = source.splitlines()
        assert any(text in lines[n - 1] for n in layers.driver_lines(module, source)), (module, text)
    source = "x = 1\n# self.session.execute(...) in a comment\nreturn self.session.execute(bound)\n"
    assert layers.driver_lines("lab/cluster/connection.py", source) == {3}
    assert layers.driver_lines("lab/other.py", source) == frozenset()


def _table(**samples: int) -> LayerTable:
    return LayerTable(view="gil", samples={**dict.fromkeys(LAYERS, 0), **samples}, sample_rate_hz=100, seconds=10.0,
                      calls_per_second=50.0, loader_cpu_ms_per_call=2.0)


def test_the_table_prices_each_share_with_the_loader_cpu_per_call():
    t = _table(driver=600, store=300, other=100)
    assert t.total == 1000 and sum(t.share(k) for k in LAYERS) == pytest.approx(1.0)
    assert t.ms_per_call(DRIVER) == pytest.approx(1.2) and t.ms_per_call(LOAD) == 0
    # what was sampled itself: 600 samples at 100/s over 10 s = 0.6 s per s, over 50 calls per s
    assert t.sampled_ms_per_call(DRIVER) == pytest.approx(12.0)
    assert t.held_fraction == pytest.approx(1.0)
    text = t.markdown()
    assert all(f"| {layer} |" in text for layer in LAYERS) and "| driver | 600 | 60% | 1.2 |" in text
    assert t.to_json()["share"][DRIVER] == pytest.approx(0.6)


def test_an_empty_table_prices_nothing():
    t = _table()
    assert t.share(DRIVER) is None and t.ms_per_call(DRIVER) is None
    assert LayerTable(**{**t.__dict__, "calls_per_second": 0.0}).sampled_ms_per_call(DRIVER) is None


def test_the_goal_is_judged_on_the_driver_alone():
    target = chat_goal_ms_per_call(439, 2.0)
    assert target == pytest.approx(1000 / 878)
    assert goal_verdict(1.5, target).startswith("NOT reachable")
    assert goal_verdict(0.5, target).startswith("reachable only in principle")
    assert goal_verdict(None, target).startswith("not judged")


def test_params_need_a_whole_second_and_positive_goal():
    p = LoaderProfileParams.preset(quick=True, seconds=4.7)
    assert p.record_seconds == 4 and p.load.seconds == 4.7 and p.load.concurrency == 16
    assert p.target_ms_per_call == pytest.approx(chat_goal_ms_per_call())
    assert LoaderProfileParams.preset(quick=False).load.seconds == 15
    with pytest.raises(ConfigError):
        LoaderProfileParams.preset(quick=True, seconds=0.5)
    with pytest.raises(ConfigError):
        LoaderProfileParams(goal_factor=0)


def test_py_spy_note_gives_its_samples_errors_and_lag():
    out = ("py-spy> 1.01s behind in sampling, results may be inaccurate.\npy-spy> 0.4s behind in sampling\n"
           "py-spy> Wrote raw flamegraph data to 'x'. Samples: 1254 Errors: 22\n")
    assert pyspy_note("gil", out) == "gil: 1,254 samples, 22 unreadable stacks; up to 1.01 s behind its rate " \
                                     "(fewer ticks than rate x seconds)"
    assert pyspy_note("threads", "") == "threads: no sample count reported"
