"""A latency experiment's calls repeated through the emulated network at other round trips
(lab.cluster.rtt_proxy), fitted into the round-trip model (lab.calibration.rtt_model).

More: docs/calibration-internals.md (rtt_sweep).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from lab.calibration.experiments.common import Testbed
from lab.calibration.rtt_model import RttModel, RttPoint, RttSweep, choices_by_rtt, fit_rtt_model, held_out_check, mean_points
from lab.cluster.connection import connect

# What a --target-rtt run sweeps when the preset names none: from 2 ms up toxiproxy delays both
# directions, so the proxy's own cost is the same at every point and only the round trip differs.
DEFAULT_SWEEP_RTTS_US = (2000, 3000, 4000)

Call = Callable[[float], float]   # one call of size x; its latency in ms


@contextlib.contextmanager
def connection_at(testbed: Testbed, rtt_us: int) -> Iterator[Any]:
    """A connection of the testbed's cluster through a latency proxy adding ``rtt_us``."""
    conn = connect(testbed.config.replace(rtt_us=int(rtt_us)))
    try:
        yield conn
    finally:
        conn.close()


def no_model_text(target_rtt_us: int | None, what: str) -> str | None:
    """The conclusion's line when a target was given but nothing could be fitted."""
    if target_rtt_us is None:
        return None
    return (f"**Round trip**: no model for the target of {target_rtt_us / 1000:g} ms: fitting latency against the "
            f"round trip needs {what} at two round trips or more (rtts_us).")


def sweep_rtts(measured_rtt_us: int, rtts_us: Sequence[int], target_rtt_us: int | None) -> tuple[int, ...]:
    """The round trips to measure besides the main one: the preset's, or the default when only a
    target is given; never the main measurement's own."""
    chosen = tuple(rtts_us) or (DEFAULT_SWEEP_RTTS_US if target_rtt_us is not None else ())
    return tuple(sorted({int(r) for r in chosen} - {int(measured_rtt_us)}))


def measure_at_rtts(testbed: Testbed, rtts_us: Sequence[int], call_on: Callable[[Any, contextlib.ExitStack], Call],
                    xs: Sequence[float], *, rounds: int, seed: int, warmup: int = 1) -> list[dict[str, Any]]:
    """Per round trip: a connection through the proxy, ``call_on(conn, scope)`` the experiment's call on
    it (what it opens on the connection entered into ``scope``, closed before the connection is),
    ``warmup`` unrecorded calls per size, then ``rounds`` rounds of every size in shuffled order."""
    rng = np.random.default_rng([seed, 37])
    samples: list[dict[str, Any]] = []
    for rtt in rtts_us:
        with connection_at(testbed, rtt) as conn, contextlib.ExitStack() as scope:
            call = call_on(conn, scope)
            for x in xs:
                for _ in range(warmup):
                    call(x)
            for rep in range(rounds):
                for x in rng.permutation(np.asarray(xs, float)):
                    samples.append({"rtt_us": int(rtt), "x": float(x), "latency_ms": call(float(x)), "round": rep})
    return samples


def fit_sweep(main_points: Sequence[RttPoint], swept: Sequence[dict[str, Any]], *, measured_rtt_us: int,
              target_rtt_us: int | None, choose: Callable[[RttModel, int], Any] | None = None,
              per_x_round_trips: bool = True) -> RttSweep | None:
    """The model over the swept points (and the main curve when it too ran through the proxy), its
    held-out check, and the rule applied to the main curve moved to each round trip and the target
    (``choose(model, rtt_us)``); None when the points cannot be fitted (fewer than two sizes or two
    round trips). A main curve measured directly is left out of the fit: the proxy's own hop is in
    every swept point and not in it (``RttSweep.proxy_ms`` says how much that hop costs)."""
    proxied = measured_rtt_us > 0
    points = [*(main_points if proxied else ()), *mean_points(swept, x="x")]
    if len({p.x for p in points}) < 2 or len({p.rtt_us for p in points}) < 2:
        return None
    model = fit_rtt_model(points, per_x_round_trips=per_x_round_trips)
    check = held_out_check(points, per_x_round_trips=per_x_round_trips)
    hop = None if proxied or not main_points else float(np.mean(
        [model.predict_ms(p.x, p.rtt_us) - p.latency_ms for p in main_points]))
    if choose is None:
        return RttSweep(measured_rtt_us=measured_rtt_us, target_rtt_us=target_rtt_us, model=model, held_out=check,
                        proxy_ms=hop)
    rtts = [measured_rtt_us, *model.rtts_us, *([target_rtt_us] if target_rtt_us is not None else [])]
    by_rtt = choices_by_rtt(rtts, lambda r: choose(model, r))
    return RttSweep(measured_rtt_us=measured_rtt_us, target_rtt_us=target_rtt_us, model=model, held_out=check,
                    proxy_ms=hop, choice_at_target=by_rtt.get(target_rtt_us) if target_rtt_us is not None else None,
                    choice_by_rtt=by_rtt)
