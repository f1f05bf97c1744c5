"""Numbers and units as people read them: the one formatting of the lab's output.

Every command's text, the result pages (``lab.results.html`` re-exports :func:`fmt`) and the
live progress format numbers here, so one value reads the same everywhere:

    fmt(20000000.0)       '20,000,000'     fmt(0.01234)  '0.0123'    fmt(None)  '—'
    si(20000000.0)        '20 M'           si(1530)      '1.53 k'
    ms(67967)             '68.0 ms'        ms(1234567)   '1,235 ms'  ms(850)    '0.85 ms'
    seconds(8.04)         '8.0 s'          seconds(135)  '2 min 15 s'
    rate(93.94)           '93.9/s'         count(12345)  '12,345'
    percent(0.9912)       '99.1%'
    percentile_ms(summary, "p99")   '1,235 ms', or 'too few' (lab.measure's rule: 10 calls beyond it)

Latencies are recorded in microseconds (``lab.measure``) and shown in milliseconds.
"""
from __future__ import annotations

import math
from typing import Any

MISSING = "—"
TOO_FEW = "too few"  # a tail percentile from too few samples (lab.measure.min_samples)
US_PER_MS = 1000.0
_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt(value: Any, digits: int = 3, *, unit: str | None = None, signed: bool = False) -> str:
    """A value in a table: thousands separators from 1,000 up, ``digits`` significant digits
    below, never an exponent (2.0e7 is '20,000,000', 1.5e-5 is '0.000015'); ``unit`` after the
    number ('1,235 B'), ``signed`` puts '+' before a positive number (a difference B - A)."""
    if _missing(value):
        return MISSING
    if isinstance(value, bool):
        return str(value)
    text = _number(value, digits)
    if signed and isinstance(value, (int, float)) and value > 0:
        text = "+" + text
    return f"{text} {unit}" if unit else text


def _number(value: Any, digits: int) -> str:
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isinf(value):
            return "∞" if value > 0 else "-∞"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if value == 0:
            return "0"
        text = f"{value:.{digits}g}"
        if "e" in text and abs(value) >= 1:  # more integer digits than significant ones: 121.7 at 2 is '122'
            return f"{value:,.0f}"
        if "e" in text:  # tiny values: as many decimals as the significant digits need
            decimals = digits - 1 - math.floor(math.log10(abs(value)))
            text = f"{value:.{decimals}f}".rstrip("0")
        return text
    return str(value)


def si(value: Any, unit: str = "", digits: int = 3) -> str:
    """Large numbers with a metric prefix: 20,000,000 -> '20 M', 1,530 B -> '1.53 kB'."""
    if _missing(value):
        return MISSING
    v = float(value)
    for scale, prefix in _SI:
        if abs(v) >= scale:
            return f"{v / scale:.{digits}g} {prefix}{unit}"
    return f"{fmt(v if not float(v).is_integer() else int(v), digits)}{' ' + unit if unit else ''}"


def ms(microseconds: Any) -> str:
    """A latency recorded in µs, in milliseconds: 3 significant digits below 100 ms,
    whole milliseconds with separators above."""
    if _missing(microseconds):
        return MISSING
    value = float(microseconds) / US_PER_MS
    if abs(value) >= 100:
        return f"{value:,.0f} ms"
    if abs(value) >= 10:
        return f"{value:.1f} ms"
    if abs(value) >= 1:
        return f"{value:.2f} ms"
    return f"{fmt(value, 2)} ms"


def percentile_ms(summary: Any, key: str, unit: str = "ms") -> str:
    """A latency summary's percentile ``key`` ('p99'; recorded in µs) in ``unit`` ('ms' or 'µs'),
    or :data:`TOO_FEW` when too few samples stand behind it (``LatencySummary.reported``)."""
    value = getattr(summary, key, None) if summary is not None else None
    if value is not None and summary.reported(key) is None:
        return TOO_FEW
    return ms(value) if unit == "ms" else (f"{fmt(value)} µs" if not _missing(value) else MISSING)


def seconds(value: Any) -> str:
    """A duration: '0.35 s', '8.0 s', '2 min 15 s', '1 h 02 min'."""
    if _missing(value):
        return MISSING
    s = float(value)
    if abs(s) < 0.001:
        return "0 s"
    if abs(s) < 1:
        return f"{fmt(s, 2)} s"
    if abs(s) < 60:
        return f"{s:.1f} s"
    whole = int(round(s))
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {(whole % 3600) // 60:02d} min"


def rate(value: Any, unit: str = "/s") -> str:
    """Calls per second: '93.9/s', '1,234/s'."""
    if _missing(value):
        return MISSING
    v = float(value)
    return f"{v:,.0f}{unit}" if abs(v) >= 1000 else f"{v:.3g}{unit}" if v else f"0{unit}"


def count(value: Any) -> str:
    """A count with thousands separators."""
    return MISSING if _missing(value) else f"{int(value):,}"


def percent(fraction: Any, digits: int = 3) -> str:
    """A ratio as a percentage: 0.9912 -> '99.1%'."""
    if _missing(fraction):
        return MISSING
    return f"{fmt(float(fraction) * 100, digits)}%"
