"""``lab calibrate``, ``lab compare``, ``lab runs`` and ``lab jupyter``: the notebook suite
headless, two runs side by side, the runs of a results folder, and JupyterLab on the notebooks."""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import click

from lab.calibration.presets import FULL_RUN_DURATION, QUICK_RUN_DURATION
from lab.cli.cluster_commands import run_preflight_checks
from lab.cli.options import (
    LAB_ERROR_EXIT_CODE,
    PORT,
    POSITIVE,
    SERVICES_FLAGS,
    cluster_options,
    home_option,
    results_option,
    services_options,
)
from lab.cluster.config import ClusterConfig, parse_rtt
from lab.comparison.catalog import KINDS
from lab.errors import LabError


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


def _selected(notebooks: str | None) -> tuple[str, ...] | None:
    if notebooks is None:
        return None
    return () if notebooks.strip() == "none" else tuple(n.strip() for n in notebooks.split(",") if n.strip())


def _my_mix_override(my_mix: str, selected: tuple[str, ...] | None, results: Path,
                     capacity: dict[str, Any]) -> str:
    """--my-mix NAME|FILE as the capacity notebook's my_mix (a file by its absolute path); an
    unknown mix, or one with no b_row row model to price it (b_row not in this run, none in
    ``results``), is refused here, before anything runs."""
    from lab.calibration.capacity_model.capacity_inputs import locate_b_row, resolve_mix, row_model_of

    if selected is not None and "capacity" not in selected:
        raise click.BadParameter("the capacity notebook prices the mix: add capacity to --notebooks",
                                 param_hint="--my-mix")
    resolve_mix(my_mix)  # ConfigError naming both profile folders
    if selected is not None and "b_row" not in selected and capacity.get("b_row_values", "auto") == "auto":
        row_model_of(locate_b_row(Path(results) / "new-run", need_row_model=True))  # CalibrationError: run b_row
    path = Path(my_mix)
    return str(path.resolve()) if path.suffix == ".toml" else my_mix


def _target_rtt_overrides(target_rtt: str, selected: tuple[str, ...] | None,
                          overrides: dict[str, dict[str, Any]]) -> None:
    """--target-rtt as each selected round-trip notebook's target_rtt_us (lab.calibration.registry)."""
    from lab.calibration.registry import TARGET_RTT_NOTEBOOKS

    try:
        us = parse_rtt(target_rtt)
    except ValueError:
        raise click.BadParameter(f"{target_rtt!r} is not a round trip such as 1ms, 300us or 0.5ms",
                                 param_hint="--target-rtt") from None
    for name in TARGET_RTT_NOTEBOOKS:
        if selected is None or name in selected:
            overrides.setdefault(name, {})["target_rtt_us"] = us


def _resume_conflicts(ctx: click.Context) -> list[str]:
    from click.core import ParameterSource

    names = {"notebooks": "--notebooks", "params": "--param", "my_mix": "--my-mix", "quick": "--quick/--full",
             "target_rtt": "--target-rtt",
             "repeat_check": "--repeat-check", "propose_from": "--propose-from", "keep_going": "--keep-going",
             **{dest: flag for flag, dest, _, _ in SERVICES_FLAGS}}  # the run's own services: recorded
    return [flag for name, flag in names.items() if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE]


_TERMINATED: list[int] = []  # the SIGTERM that stopped this run, if one did


def _stop_on_sigterm() -> None:
    """SIGTERM (a CI's timeout, ``kill``, a container stop) stops a calibration as Ctrl-C does:
    the run is marked interrupted and resumable, with one line."""
    def handler(signum: int, frame: Any) -> None:
        _TERMINATED.append(signum)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the second would land in the clean-up
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def _exit_quietly(code: int) -> None:
    """Exit after the one line: nothing else reaches the console (a kernel killed mid-cell may
    leave a thread or a task that would print a DeadKernelError traceback at shutdown). The run
    folder is written and the kernels are stopped by then."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _report_result(result: Any) -> None:
    from lab.calibration.decisions import changes_line

    cal = result.calibration
    if result.interrupted:
        where = f"in notebook {result.interrupted_in}" if result.interrupted_in else "before the first notebook"
        how = "stopped by SIGTERM" if _TERMINATED else "interrupted"
        click.echo(f"{how} {where}: partial results in {result.run_dir}; resume with: lab calibrate --resume "
                   f"{result.run_dir}", err=True)
        _exit_quietly(143 if _TERMINATED else 130)
    click.echo(f"run {result.run_dir.name}: {cal.status} in {cal.wall_seconds:.0f} s; "
               f"measured {', '.join(cal.measured()) or 'no constant'}; {changes_line(cal.to_json())}")
    mix = cal.my_mix
    if mix:
        nodes = " / ".join(f"{n:,}" for n in mix["nodes_disk"].values())
        tiers = " / ".join(f"{int(t) / 1e6:,.0f} M" for t in mix["nodes_disk"])
        click.echo(f"your mix {mix['name']}: b_row {mix['b_row_bytes']:,.0f} B (95% CI {mix['ci_low']:,.0f}-"
                   f"{mix['ci_high']:,.0f}; {mix['confidence']} confidence): {nodes} disk-bound nodes at {tiers} "
                   "messages/day")
        for what, which in (("CPU-bound nodes (light-rate costs)", "nodes_cpu"),
                            ("CPU-bound nodes (CPU curve)", "nodes_cpu_curve"),
                            ("nodes within the latency target (knee)", "nodes_knee")):
            if mix.get(which):
                click.echo(f"  {what}: " + " / ".join(f"{n:,}" for n in mix[which].values()))
        for what, run in (mix.get("runs") or {}).items():
            click.echo(f"  {what} from {run}")
    click.echo(f"calibration.json: {result.calibration_path}")
    if result.proposal_path is not None:
        click.echo(f"proposal: {result.proposal_path}")
    click.echo(f"report: {result.report_path.resolve()}")


@click.command("calibrate")
@home_option
@click.option("--quick/--full", default=True,
              help=f"quick: a smoke test of the pipeline, low confidence, nothing to propose from: {QUICK_RUN_DURATION}. "
                   "full: the notebooks' own parameters and precision targets, each notebook sampling until its "
                   f"target or its time budget: {FULL_RUN_DURATION}")
@click.option("--notebooks", "notebooks", default=None, metavar="NAMES",
              help="comma-separated subset of the suite, in suite order; 'none' = environment + round trip only")
@click.option("-p", "--param", "params", multiple=True, metavar="NOTEBOOK.KEY=VALUE",
              help="override one notebook parameter (VALUE is JSON, else a string); repeatable")
@click.option("--my-mix", "my_mix", default=None, metavar="NAME|FILE",
              help="price your product's mix in the capacity notebook: a profile of datasets/profiles/ (or the "
                   "packaged lab/workload/profiles/) or a .toml file; its nodes per tier in the report")
@click.option("--target-rtt", "target_rtt", default=None, metavar="RTT",
              help="the deployment's round trip (e.g. 1ms, 0.3ms): the latency notebooks also measure through the "
                   "latency proxy at other round trips, fit latency against it and recommend for this one")
@click.option("--resume", "resume", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              metavar="RUN_DIR", help="run the notebooks of RUN_DIR not yet finished (interrupted, failed, not run) "
                                      "into the same folder with its own mode and parameters; one report")
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
@click.pass_context
def calibrate(ctx: click.Context, home: Path, quick: bool, notebooks: str | None, params: tuple[str, ...],
              my_mix: str | None, target_rtt: str | None, resume: Path | None, propose: bool,
              propose_from: Path | None, allow_quick: bool,
              repeat_check: bool, keep_going: bool, cell_timeout: float | None, progress: bool, check_first: bool,
              results: Path, config: ClusterConfig, services: Any) -> None:
    """Run the headless calibration suite and print where the report is.

    Writes results/<run-id>/: the executed notebooks and their HTML, figures, calibration.json
    (constants.<name>: current, measured, recommended, unit, confidence, evidence) and
    report.html. A failed notebook fails the run (exit 2) naming the notebook and the cell;
    the partial results stay in the run folder. Ctrl-C stops it (exit 130) with one line naming
    the notebook and the folder; --resume RUN_DIR finishes it (with the run's own settings).
    --outbox / --hot-window (LAB_*, the TOML file's [services]) are the notebooks' store
    settings, named in the environment block."""
    from lab.calibration.calibrate import CalibrationOptions, plan, resume_calibration, run_calibration, unfinished
    from lab.calibration.propose import check_proposable
    from lab.calibration.propose import propose_from as _propose_from
    from lab.comparison.repeat_check import run_repeat_check

    _stop_on_sigterm()
    if propose_from is not None:
        diff = _propose_from(propose_from, allow_quick=allow_quick)
        click.echo(diff.read_text())
        click.echo(f"proposal: {diff}")
        return
    if resume is not None and _resume_conflicts(ctx):
        raise click.UsageError(f"--resume takes the run's own notebooks and parameters: drop "
                               f"{', '.join(_resume_conflicts(ctx))}")
    if propose:  # before the preflight: a refusal should not wait for it
        check_proposable("quick" if quick else "full", allow_quick=allow_quick)
    selected = _selected(notebooks)
    overrides = _parse_overrides(params)
    if my_mix is not None:
        capacity = overrides.setdefault("capacity", {})
        capacity["my_mix"] = _my_mix_override(my_mix, selected, results, capacity)
    if target_rtt is not None:
        _target_rtt_overrides(target_rtt, selected, overrides)
    options = CalibrationOptions(quick=quick, results=results, notebooks=selected, overrides=overrides,
                                 propose=propose, keep_going=keep_going, progress=progress,
                                 cell_timeout_seconds=cell_timeout, allow_quick=allow_quick, services=services)
    if resume is None:
        plan(options, None)  # unknown notebooks, undeclared or mistyped -p values: refused before anything connects
    elif not (resume / "calibration.json").is_file():
        raise click.UsageError(f"--resume {resume}: no calibration.json there (not a calibration run)")
    else:
        left = unfinished(resume)  # a crafted or broken calibration.json: refused before anything connects
    if check_first:
        try:
            report = run_preflight_checks(config)
        except KeyboardInterrupt:
            click.echo("interrupted during the preflight: nothing was written", err=True)
            sys.exit(130)
        if not report.ok:
            click.echo(report.to_text(), err=True, nl=False)
            click.echo("error: preflight failed: fix the checks above (or --no-preflight)", err=True)
            sys.exit(2)
    if resume is not None:
        click.echo(f"resuming run {resume.name}: {', '.join(left) or 'the environment and round trip'}")
        result = resume_calibration(config, resume, progress=progress, cell_timeout_seconds=cell_timeout,
                                    services=services)
    elif repeat_check:
        check = run_repeat_check(config, options)
        if check.comparison_dir is not None:
            click.echo(f"first run {check.first.run_dir.name}: {check.first.calibration.status}; second run "
                       f"{check.second.run_dir.name}: {check.second.calibration.status}")
            for name, status in check.agreement.items():
                click.echo(f"  {name}: {status}")
            click.echo(f"comparison: {check.comparison_dir / 'index.html'}")
        result = check.last
    else:
        result = run_calibration(config, options)
    _report_result(result)


@click.command("compare")
@click.argument("run_a", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.argument("run_b", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="where compare-<a>-<b>/ goes (default: the folder holding RUN_A)")
@click.option("--force", is_flag=True, help="compare runs that are not comparable (other mode, users, rate, profile, "
                                            "server or nodes); every test is then marked 'not comparable'")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="family-wise significance level of the Holm-corrected tests (default 0.05)")
def compare(run_a: Path, run_b: Path, results: Path | None, force: bool, alpha: float | None) -> None:
    """Two runs side by side: constants (do the runs agree?), load operations, notebook latency samples.

    Refuses runs that are not comparable (--force overrides); warns on a run compared with
    itself. A run folder is a calibration run, a load run, or notebooks run from JupyterLab.
    Latencies are tested on per-interval medians (one-second intervals of a load run, rounds of
    a notebook), corrected for autocorrelation and Holm-corrected; each verdict in words ("B
    slower by 25%"). Prints the tables and writes compare-<a>-<b>/index.html."""
    from lab.comparison.compare import compare_runs, to_text, write_comparison

    options = {} if alpha is None else {"alpha": alpha}
    cmp = write_comparison(compare_runs(run_a, run_b, force=force, **options), results or run_a.resolve().parent)
    click.echo(to_text(cmp), nl=False)
    click.echo(f"html: {cmp.html_path.resolve()}")


def _runs_table(runs: list[Any]) -> list[str]:
    from lab.results.units import fmt

    rows = [("run", "started", "kind", "mode", "status", "rate (achieved/asked)", "processes", "server",
             "constants measured (confidence)")]
    for r in runs:
        consts = ", ".join(f"{n} {c.text()}" for n, c in r.constants.items()) or "-"
        rate = "-" if r.achieved_rate is None else (
            f"{fmt(r.achieved_rate)}/{fmt(r.requested_rate) if r.requested_rate is not None else 'closed loop'}")
        rows.append((r.run_id, (r.started or "?")[:16].replace("T", " "), r.kind, r.mode or "-", r.status or "-",
                     rate, "-" if r.processes is None else str(r.processes), r.server or "-", consts))
    return _columns(rows)


def _history_table(points: list[Any]) -> list[str]:
    from lab.results.units import fmt

    rows = [("run", "started", "mode", "measured", "95% interval", "recommended", "confidence", "vs previous")]
    for p in points:
        v = p.value
        ci = f"{fmt(v.ci_low)} – {fmt(v.ci_high)}" if v.ci_low is not None else "-"
        rows.append((p.run_id, (p.started or "?")[:16].replace("T", " "), p.mode or "-",
                     fmt(v.measured, unit=v.unit or None), ci, fmt(v.recommended, unit=v.unit or None),
                     v.confidence + (" (inconclusive)" if v.inconclusive else ""), v.agreement or "-"))
    return _columns(rows)


def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows]


@click.command("runs")
@click.option("--constant", default=None, metavar="NAME",
              help="one appendix-B constant across the runs that measured it (a table and, with --plot, a figure)")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="PNG",
              help="with --constant: write its history as a figure (value and 95% interval per run)")
@click.option("--json", "as_json", is_flag=True, help="print the runs (or the constant's history) as JSON")
@click.option("--kind", "kind", type=click.Choice(KINDS), default=None,
              help="only runs of this kind (a run of several kinds, e.g. load+compare, is listed under each)")
@results_option
def runs(constant: str | None, plot: Path | None, as_json: bool, kind: str | None, results: Path) -> None:
    """The runs in the results folder (kind, mode, status, server, the constants they measured), oldest first.

    With --constant NAME, that constant in every run that measured it: value, 95% interval,
    recommendation, confidence and agreement with the previous run (--plot PNG draws it)."""
    from lab.comparison.catalog import constant_history, list_runs

    if constant is None and plot is not None:
        raise click.UsageError("--plot draws one constant: give --constant NAME")
    problems: list[LabError] = []
    found = [r for r in list_runs(results, problems=problems) if kind is None or kind in r.kinds]
    if constant is None:
        if as_json:
            click.echo(json.dumps([r.to_json() for r in found], indent=1, default=str))
        else:
            for line in _runs_table(found) if found else [f"no runs in {results}"]:
                click.echo(line)
        _exit_on_problems(problems)
        return
    points = constant_history(results, constant, runs=found)
    if as_json:
        click.echo(json.dumps([p.to_json() for p in points], indent=1, default=str))
    else:
        for line in _history_table(points) if points else [f"no run in {results} measured {constant}"]:
            click.echo(line)
    if plot is not None and points:
        from lab.calibration.figures import constant_history as history_figure
        from lab.constants import read_entries

        fig = history_figure(points, constant, current=read_entries()[constant].value)
        fig.savefig(plot, dpi=110, bbox_inches="tight")
        click.echo(f"plot: {plot}")
    _exit_on_problems(problems)


def _exit_on_problems(problems: list[LabError]) -> None:
    """One line per run left out for a bad file, then exit 2 (the listing above stands)."""
    for exc in problems:
        click.echo(f"error: {type(exc).__name__}: {exc} (run left out)", err=True)
    if problems:
        sys.exit(LAB_ERROR_EXIT_CODE)


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
