"""Do two runs agree on a constant? The one rule `lab compare`, the report and the repeat check use.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.calibration.recommendations import number
from lab.errors import BadRunFile
from lab.results.run_files import read_run_json

STATUSES = ("agree", "disagree", "inconclusive", "not measured in A", "not measured in B", "not measured",
            "observed only")


def _g(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def agreement(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any]:
    """{"status", "detail", "delta", "delta_relative"} for constant entries ``a`` (run A) and ``b``."""
    a, b = a or {}, b or {}
    unit = a.get("unit") or b.get("unit") or ""
    ma, mb = number(a.get("measured")), number(b.get("measured"))
    out: dict[str, Any] = {"delta": None, "delta_relative": None}
    if ma is None or mb is None:
        if ma is None and mb is None:
            observed = a.get("notebook") is not None and b.get("notebook") is not None
            return {**out, "status": "observed only" if observed else "not measured",
                    "detail": "a policy: observed by both runs, nothing recommended" if observed else ""}
        status = "not measured in A" if ma is None else "not measured in B"
        return {**out, "status": status, "detail": f"{_g(ma if ma is not None else mb)} {unit} in "
                                                    f"{'B' if ma is None else 'A'} only".strip()}
    out["delta"] = mb - ma
    out["delta_relative"] = (mb - ma) / abs(ma) if ma else None
    delta = f"B - A = {mb - ma:+,.4g} {unit}".rstrip() + (f" ({100 * out['delta_relative']:+.1f}%)"
                                                          if out["delta_relative"] is not None else "")
    if a.get("inconclusive") or b.get("inconclusive"):
        which = " and ".join(side for side, c in (("A", a), ("B", b)) if c.get("inconclusive"))
        return {**out, "status": "inconclusive", "detail": f"{which} could not decide (its halves disagree, or its choice "
                                                          f"is not stable); {delta}"}
    la, ha, lb, hb = (number(a.get("ci_low")), number(a.get("ci_high")), number(b.get("ci_low")), number(b.get("ci_high")))
    if a.get("rule") == "interval" and None not in (la, ha, lb, hb):
        limit = math.hypot((ha - la) / 2, (hb - lb) / 2)
        ok = abs(mb - ma) <= limit
        return {**out, "status": "agree" if ok else "disagree",
                "detail": f"{delta}, {'within' if ok else 'beyond'} the combined 95% half-widths ±{_g(limit)} {unit}"
                .replace("  ", " ")}
    ra, rb = number(a.get("recommended")), number(b.get("recommended"))
    if ra is not None and rb is not None and ra == rb:
        return {**out, "status": "agree", "detail": f"both recommend {_g(ra)} {unit}".rstrip()}
    ia = (number(a.get("recommended_ci_low")), number(a.get("recommended_ci_high")))
    ib = (number(b.get("recommended_ci_low")), number(b.get("recommended_ci_high")))
    if ra is not None and rb is not None and None not in ia + ib and ia[0] <= rb <= ia[1] and ib[0] <= ra <= ib[1]:
        return {**out, "status": "agree", "detail": f"{_g(ra)} vs {_g(rb)} {unit}: each inside the other's "
                                                    "bootstrap interval"}
    for side, value, (lo, hi), other, bare in (("B", ra, ib, "A", ia), ("A", rb, ia, "B", ib)):
        # one run has no interval (an older run of a notebook that had none): its value inside the other's
        if value is not None and None in bare and None not in (lo, hi) and lo <= value <= hi:
            return {**out, "status": "agree", "detail": f"{_g(ra)} vs {_g(rb)} {unit}: {other}'s {_g(value)} (no "
                                                        f"interval) inside {side}'s bootstrap interval "
                                                        f"{_g(lo)}-{_g(hi)}"}
    if ra is not None and rb is not None:
        return {**out, "status": "disagree", "detail": f"recommend {_g(ra)} vs {_g(rb)} {unit}; {delta}"}
    return {**out, "status": "agree" if ma == mb else "disagree", "detail": delta}


def _nodes(cal: Mapping[str, Any]) -> Any:
    return (cal.get("environment") or {}).get("nodes")


def _server(cal: Mapping[str, Any]) -> Any:
    return (cal.get("environment") or {}).get("server")


def previous_run(run_dir: Path, cal: Mapping[str, Any]) -> Path | None:
    """The latest earlier comparable calibration run beside ``run_dir`` (module docstring)."""
    best: tuple[str, Path] | None = None
    for path in Path(run_dir).parent.glob("*/calibration.json"):
        if path.parent == Path(run_dir):
            continue
        try:
            other = read_run_json(path)
        except BadRunFile:
            continue
        started = str(other.get("started_at") or "")
        if (other.get("status") != "ok" or other.get("mode") != cal.get("mode") or not started
                or started >= str(cal.get("started_at") or "") or _server(other) != _server(cal)
                or _nodes(other) != _nodes(cal)):
            continue
        if best is None or started > best[0]:
            best = (started, path.parent)
    return best[1] if best else None
