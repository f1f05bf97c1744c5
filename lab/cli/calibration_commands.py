"""``lab calibrate``, ``lab compare`` and ``lab jupyter``: the notebook suite headless, two runs
side by side, and JupyterLab on the notebooks."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from lab.cli.cluster_commands import run_preflight_checks
from lab.calibration.notebooks import full_run_expected_seconds
from lab.cli.options import PORT, POSITIVE, cluster_options, home_option, results_option, services_options
from lab.cluster.config import ClusterConfig


FULL_RUN_MINUTES = full_run_expected_seconds() / 60


def _parse_overrides(items: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """``NOTEBOOK.KEY=VALUE`` (VALUE as JSON when it parses, else a string) -> nested dict."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        target, sep, raw = item.partition("=")
        notebook, dot, key = target.partition(".")
        if not sep or not dot or not notebook or not key:
            raise click.BadParameter(f"{item!r}: expected NOTEBOOK.KEY=VALUE, e.g. b_row.rows=200")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out.setdefault(notebook, {})[key] = value
    return out


@click.command("calibrate")
@home_option
@click.option("--quick/--full", default=True,
              help="quick: a smoke test of the pipeline in minutes (low confidence, nothing to propose from); full: "
                   f"the notebooks' own parameters and precision targets, up to about {FULL_RUN_MINUTES:.0f} min on the lab's "
                   "2-core machine (each notebook has a time budget)")
@click.option("--notebooks", "notebooks", default=None, metavar="NAMES",
              help="comma-separated subset of the suite, in suite order; 'none' = environment + round trip only")
@click.option("-p", "--param", "params", multiple=True, metavar="NOTEBOOK.KEY=VALUE",
              help="override one notebook parameter (VALUE is JSON, else a string); repeatable")
@click.option("--propose", is_flag=True, help="also write appendix_b.diff (the proposed change; never applied)")
@click.option("--propose-from", "propose_from", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=None, metavar="RUN_DIR", help="only write appendix_b.diff for an existing run; measure nothing")
@click.option("--allow-quick", is_flag=True, help="let --propose / --propose-from write a diff from a quick run")
@click.option("--repeat-check", is_flag=True,
              help="run the suite twice and compare: the second report says per constant whether the runs agree")
@click.option("--keep-going", is_flag=True, help="run the remaining notebooks after one fails (the run still fails)")
@click.option("--cell-timeout", type=POSITIVE, default=None, help="seconds per notebook cell (default: none)")
@click.option("--progress/--no-progress", default=True, show_default=True, help="progress bar on stderr")
@click.option("--preflight/--no-preflight", "check_first", default=True, show_default=True,
              help="run `lab preflight` first and stop when a check fails")
@results_option
@services_options
@cluster_options
def calibrate(home: Path, quick: bool, notebooks: str | None, params: tuple[str, ...], propose: bool,
              propose_from: Path | None, allow_quick: bool, repeat_check: bool, keep_going: bool,
              cell_timeout: float | None, progress: bool, check_first: bool, results: Path,
              config: ClusterConfig, services: Any) -> None:
    """Run the headless calibration suite and print where the report is.

    Writes results/<run-id>/: the executed notebooks and their HTML, figures, calibration.json
    (constants.<name>: current, measured, recommended, unit, confidence, evidence) and
    report.html. A failed notebook fails the run (exit 2) naming the notebook and the cell;
    the partial results stay in the run folder. --outbox / --hot-window (LAB_*, the TOML file's
    [services]) are the notebooks' store settings, named in the environment block."""
    from lab.calibration.calibrate import (CalibrationOptions, plan, propose_from as _propose_from, run_calibration,
                                           run_repeat_check)
    from lab.calibration.propose import check_proposable

    if propose_from is not None:
        diff = _propose_from(propose_from, allow_quick=allow_quick)
        click.echo(diff.read_text())
        click.echo(f"proposal: {diff}")
        return
    if propose:  # before the preflight: a refusal should not wait for it
        check_proposable("quick" if quick else "full", allow_quick=allow_quick)
    selected = None
    if notebooks is not None:
        selected = () if notebooks.strip() == "none" else tuple(n.strip() for n in notebooks.split(",") if n.strip())
    options = CalibrationOptions(quick=quick, results=results, notebooks=selected, overrides=_parse_overrides(params),
                                 propose=propose, keep_going=keep_going, progress=progress,
                                 cell_timeout_seconds=cell_timeout, allow_quick=allow_quick, services=services)
    plan(options, None)  # unknown notebooks, undeclared or mistyped -p values: refused before anything connects
    if check_first:
        report = run_preflight_checks(config)
        if not report.ok:
            click.echo(report.to_text(), err=True, nl=False)
            click.echo("error: preflight failed: fix the checks above (or --no-preflight)", err=True)
            sys.exit(2)
    if repeat_check:
        check = run_repeat_check(config, options)
        click.echo(f"first run {check.first.run_dir.name}: {check.first.calibration.status}; second run "
                   f"{check.second.run_dir.name}: {check.second.calibration.status}")
        for name, status in check.agreement.items():
            click.echo(f"  {name}: {status}")
        click.echo(f"comparison: {check.comparison_dir / 'index.html'}")
        result = check.second
    else:
        result = run_calibration(config, options)
    cal = result.calibration
    click.echo(f"run {result.run_dir.name}: {cal.status} in {cal.wall_seconds:.0f} s; "
               f"measured {', '.join(cal.measured()) or 'no constant'}; "
               f"recommended changes: {', '.join(cal.changed()) or 'none'}")
    click.echo(f"calibration.json: {result.calibration_path}")
    if result.proposal_path is not None:
        click.echo(f"proposal: {result.proposal_path}")
    click.echo(f"report: {result.report_path.resolve()}")


@click.command("compare")
@click.argument("run_a", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.argument("run_b", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where compare-<a>-<b>/ goes (default: the folder holding RUN_A)")
@click.option("--force", is_flag=True, help="compare runs that are not comparable (other mode, users, rate, profile, "
                                            "server or nodes); every test is then marked 'not comparable'")
def compare(run_a: Path, run_b: Path, results: Path | None, force: bool) -> None:
    """Two runs side by side: constants (do the runs agree?), load operations, notebook latency samples.

    Refuses runs that are not comparable (--force overrides); warns on a run compared with
    itself. A run folder is a calibration run, a load run, or notebooks run from JupyterLab.
    Latencies are tested on per-interval medians (one-second intervals of a load run, rounds of
    a notebook), corrected for autocorrelation and Holm-corrected; each verdict in words ("B
    slower by 25%"). Prints the tables and writes compare-<a>-<b>/index.html."""
    from lab.calibration.compare import compare_runs, to_text, write_comparison

    cmp = write_comparison(compare_runs(run_a, run_b, force=force), results or run_a.resolve().parent)
    click.echo(to_text(cmp), nl=False)
    click.echo(f"html: {cmp.html_path.resolve()}")


@click.command("jupyter", context_settings={"ignore_unknown_options": True})
@home_option
@click.option("--ip", default="127.0.0.1", show_default=True, help="address JupyterLab listens on")
@click.option("--port", "jupyter_port", type=PORT, default=None, help="port (default: 8888 or the next free one)")
@click.option("--browser/--no-browser", default=False, show_default=True, help="open a browser")
@click.argument("jupyter_args", nargs=-1, type=click.UNPROCESSED)
def jupyter(home: Path, ip: str, jupyter_port: int | None, browser: bool, jupyter_args: tuple[str, ...]) -> None:
    """JupyterLab on notebooks/ with the project's kernel (extra arguments go to jupyter lab).

    Cluster settings reach the notebooks through LAB_* variables (or their `cluster` parameter);
    --home is exported as LAB_HOME so they find the embedded node."""
    from lab.calibration.kernel import DISPLAY_NAME, KERNEL_NAME
    from lab.calibration.notebooks import ensure_kernel, jupyter_command, output_filter_installed

    ensure_kernel()
    argv, env = jupyter_command(home=home, ip=ip, port=jupyter_port, browser=browser, extra=jupyter_args)
    click.echo(f"JupyterLab on notebooks/ (kernel {KERNEL_NAME!r}, \"{DISPLAY_NAME}\" = {sys.executable}); "
               "stop with Ctrl-C")
    if output_filter_installed() is False:
        click.echo("warning: notebooks/ has no output filter in this clone: run `make git-filters` so outputs "
                   "and autosaves are never committed", err=True)
    os.execvpe(argv[0], argv, env)  # JupyterLab replaces this process: Ctrl-C and signals reach it
