"""The one measurement layer: every benchmark, load run, soak, experiment and report uses it.

    timing       the one clock: ``now_ns`` (monotonic) for durations, ``timed``, ``Stopwatch``
    hdr          latencies in microseconds on HdrHistogram; CO-corrected beside service time
    percentiles  the one percentile definition (nearest rank), for histograms and sample lists, and
                 the smallest n a tail percentile is reported from (``min_samples``, ``too_few``)
    stats        mean CI (Student t), median CI over rounds, bootstrap CI (samples or whole rounds),
                 relative half-width, Holm, ``a_over_b``
    significance the one test of two runs: per-interval medians, Welch t corrected for
                 autocorrelation (``interval_test``)
    paired       the ratio of two methods measured in interleaved rounds: per-round ratios, their median,
                 range and interval, and whether that interval vouches for the figure (``paired_ratio``)
    regression   least squares with coefficient intervals and prediction intervals (``fit_linear``)
    process_cpu  this process's CPU over a window (``CpuMeter``): is the client what limits a measurement?
    client_gc    what the lab's own bench and load processes do with Python's cyclic GC (``settle``)

More: docs/measure-internals.md.
"""
from lab.measure.timing import Stopwatch, Timing, now_ns, timed, utc_now_iso, wall_seconds
from lab.measure.percentiles import (
    SUMMARY_PERCENTILES,
    LatencySummary,
    latency_summary,
    TAIL_SAMPLES,
    min_samples,
    nearest_rank,
    percentile,
    percentile_label,
    summarize_histogram,
    summarize_samples,
    too_few,
)
from lab.measure.regression import LinearFit, fit_linear
from lab.measure.paired import PairedRatio, paired_ratio
from lab.measure.significance import IntervalTest, interval_test, window_medians
from lab.measure.stats import (a_over_b, bootstrap_ci, bootstrap_rounds, bootstrap_values, holm, interval_of,
                                mean_ci, median_ci, relative_half_width, sample_std)

__all__ = ["SUMMARY_PERCENTILES", "TAIL_SAMPLES", "IntervalTest", "LatencySummary", "LinearFit", "PairedRatio", "Stopwatch", "Timing",
           "a_over_b", "bootstrap_ci", "bootstrap_rounds", "bootstrap_values", "fit_linear", "holm", "interval_of",
           "interval_test", "latency_summary", "mean_ci", "median_ci", "min_samples", "nearest_rank", "now_ns",
           "paired_ratio", "percentile", "percentile_label", "relative_half_width", "sample_std", "summarize_histogram",
           "summarize_samples", "timed", "too_few", "utc_now_iso", "wall_seconds", "window_medians"]
