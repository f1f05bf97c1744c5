"""``lab calibrate --repeat-check``: the suite twice, back to back, and the two runs compared.

The second run states each constant's agreement with the first (:mod:`lab.calibration.agreement`)
and links `lab compare` of the two (``compare-<a>-<b>/``); its report shows, per constant,
whether the runs agree. Ctrl-C in either run stops there: nothing is compared.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from lab.calibration.calibrate import CalibrationOptions, CalibrationResult, run_calibration
from lab.calibration.contract import write_calibration
from lab.calibration.report import write_report
from lab.cluster.config import ClusterConfig
from lab.comparison.compare import compare_runs, write_comparison


@dataclass(frozen=True, kw_only=True)
class RepeatCheck:
    first: CalibrationResult
    second: CalibrationResult | None         # None: Ctrl-C stopped the first run
    comparison_dir: Path | None              # None: a run was interrupted, nothing compared

    @property
    def last(self) -> CalibrationResult:
        return self.second or self.first

    @property
    def agreement(self) -> dict[str, str]:
        """Constant -> agreement status of the two runs (measured constants only)."""
        if self.second is None or self.comparison_dir is None:
            return {}
        return {n: c.agreement["status"] for n, c in self.second.calibration.constants.items()
                if c.agreement and c.measured is not None}


def run_repeat_check(config: ClusterConfig, options: CalibrationOptions | None = None) -> RepeatCheck:
    """The suite twice, back to back (the second states agreement with the first), and `lab
    compare` of the two; the second run's report shows run-to-run agreement per constant."""
    options = options or CalibrationOptions()
    first = run_calibration(config, dataclasses.replace(options, propose=False))
    if first.interrupted:
        return RepeatCheck(first=first, second=None, comparison_dir=None)
    second = run_calibration(config, dataclasses.replace(options, previous=first.run_dir))
    if second.interrupted:
        return RepeatCheck(first=first, second=second, comparison_dir=None)
    cmp = write_comparison(compare_runs(first.run_dir, second.run_dir), Path(options.results))
    rel = cmp.html_path.parent.resolve()
    cal = write_calibration(second.run_dir, second.calibration.replace(repeat_check={
        "first_run": first.run_dir.name, "first_run_dir": str(first.run_dir), "comparison": str(rel),
        "comparison_html": str(cmp.html_path.resolve())}))
    write_report(cal.to_json(), second.run_dir)
    return RepeatCheck(first=first, second=CalibrationResult(run_dir=second.run_dir, calibration=cal),
                       comparison_dir=rel)
