"""Run the measurement notebooks headless (papermill) and read back what they measured.

More: docs/calibration-internals.md.
"""
from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lab.calibration import kernel
from lab.calibration.kernel import (
    KERNEL_NAME,  # the project's kernel (papermill, JupyterLab)
    skip_iri_grammar,
)
from lab.calibration.registry import SUITE
from lab.cluster.config import ClusterConfig
from lab.cluster.services import ServicesConfig
from lab.errors import CalibrationError
from lab.project import NOTEBOOKS_DIR, PROJECT_DIR
from lab.results.html import markdown
from lab.results.run_files import read_run_json

# once, before any function here imports papermill, nbformat or nbconvert (lab.calibration.kernel)
skip_iri_grammar()

VALUES_FILE = "values.json"

# What a notebook reads from the notebooks before it in the same run: parameter -> (notebook
# whose values.json it is, parameters that make it unnecessary when the caller gives them).
RUN_INPUTS: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {
    s.name: {param: (i.source, i.unless) for param, i in s.run_inputs.items()} for s in SUITE if s.run_inputs}


def with_run_inputs(name: str, params: Mapping[str, Any], run_dir: Path | str, ran: tuple[str, ...] | list[str] |
                    Mapping[str, Any]) -> dict[str, Any]:
    """``params`` plus the values files of this run's earlier notebooks that ``name`` reads
    (:data:`RUN_INPUTS`), for those in ``ran``, unless the caller set them (or what replaces them)."""
    out = dict(params)
    for param, (source, unless) in RUN_INPUTS.get(name, {}).items():
        if source in ran and param not in out and not any(k in out for k in unless):
            out[param] = str((Path(run_dir) / source / VALUES_FILE).resolve())
    return out


def failed_inputs(name: str, params: Mapping[str, Any], run_dir: Path | str,
                  statuses: Mapping[str, str]) -> list[str]:
    """The notebooks of this run whose values ``name`` was given to read (:data:`RUN_INPUTS`,
    by :func:`with_run_inputs`) and that did not finish ("failed", "not run", ...): ``name``
    would only fail on their missing or partial values.json. A path the caller gave instead
    (another run's values) is not this run's and never blocks."""
    out = []
    for param, (source, _) in RUN_INPUTS.get(name, {}).items():
        ours = str((Path(run_dir) / source / VALUES_FILE).resolve())
        if params.get(param) == ours and statuses.get(source, "ok") != "ok":
            out.append(source)
    return out


def notebook_path(name: str, notebooks_dir: Path = NOTEBOOKS_DIR) -> Path:
    path = Path(notebooks_dir) / f"{name}.ipynb"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in Path(notebooks_dir).glob("*.ipynb")))
        raise CalibrationError(f"no notebook {name!r} in {notebooks_dir} (known: {known})", notebook=name)
    return path


_TYPE_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string", list: "a list",
               dict: "a table (JSON object)"}
_PLURALS = {int: "integers", float: "numbers", str: "strings", bool: "booleans"}


def _type_word(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list) and value and len({type(v) for v in value}) == 1 and type(value[0]) in _PLURALS:
        return f"a list of {_PLURALS[type(value[0])]}"
    return _TYPE_WORDS.get(type(value), type(value).__name__)


def _fits(value: Any, default: Any) -> bool:
    """Does ``value`` have the type of the parameter's ``default`` (None: any value)?"""
    if default is None:
        return True
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, int | float)
    if isinstance(default, list):
        if not isinstance(value, list):
            return False
        kinds = {type(d) for d in default}
        return len(kinds) != 1 or all(_fits(v, default[0]) for v in value)
    return isinstance(value, type(default))


def _declared(path: Path) -> dict[str, Any]:
    import papermill as pm

    return pm.inspect_notebook(str(path))


def check_parameters(name: str, params: Mapping[str, Any], notebooks_dir: Path = NOTEBOOKS_DIR) -> None:
    """Refuse, before anything runs, parameters the notebook's ``parameters`` cell does not declare
    (papermill injects any name; a misspelt one would be silently ignored) and values whose type
    is not that of the declared default (``-p b_row.rows=abc`` would fail seconds later inside
    the notebook with a TypeError)."""
    import ast

    declared = _declared(notebook_path(name, notebooks_dir))
    unknown = sorted(set(params) - set(declared))
    if unknown:
        raise CalibrationError(f"notebook {name} has no parameter {', '.join(unknown)} "
                               f"(its parameters: {', '.join(sorted(declared))})", notebook=name, parameters=unknown)
    for key, value in params.items():
        try:
            default = ast.literal_eval(declared[key]["default"])
        except (ValueError, SyntaxError):  # not a literal: nothing to type it against
            continue
        if not _fits(value, default):
            raise CalibrationError(f"notebook {name}: parameter {key} takes {_type_word(default)} (its default is "
                                   f"{declared[key]['default']}), got {json.dumps(value)} ({_type_word(value)})",
                                   notebook=name, parameter=key, value=value, default=default)


def cluster_parameter(config: ClusterConfig) -> dict[str, Any]:
    """The ``cluster`` parameter for a notebook: the config's fields, password left out."""
    return {k: v for k, v in config.redacted().items() if k != "password" and v is not None}


def services_parameter(services: ServicesConfig) -> dict[str, Any]:
    """The ``services`` parameter for a notebook: the outbox and hot-window fields, passwords left
    out (the kernel reads them from ``LAB_*``, as the cluster's), paths as strings."""
    return {k: v for k, v in services.redacted().items()
            if v is not None and k not in ("kafka_sasl_password", "redis_password")}


def _markdown_outputs_escaped(nb: Any) -> Any:
    """Markdown a cell displayed (the conclusions, which quote names and paths users chose) as the
    HTML report.html shows: rendered with raw HTML escaped, never as the exporter's raw Markdown."""

    for cell in nb.cells:
        for output in cell.get("outputs", ()):
            data = output.get("data") or {}
            if "text/markdown" in data:
                data["text/html"] = markdown(data.pop("text/markdown"))
    return nb


def export_html(notebook: Path) -> Path | None:
    """``<notebook>.html`` next to the executed notebook (figures embedded), or None."""
    if not notebook.exists():
        return None
    import warnings

    import nbformat
    from nbconvert import HTMLExporter

    with warnings.catch_warnings():  # scrap outputs have no HTML form; nbconvert warns per scrap
        warnings.simplefilter("ignore", UserWarning)
        body, _ = HTMLExporter().from_notebook_node(_markdown_outputs_escaped(nbformat.read(notebook, as_version=4)))
    html = notebook.with_suffix(".html")
    html.write_text(body)
    return html


def read_values(folder: Path, notebook: Path | None = None) -> dict[str, Any]:
    """values.json of a notebook folder, else the scrapbook scraps of the executed notebook."""
    path = Path(folder) / VALUES_FILE
    if path.exists():
        return read_run_json(path)
    if notebook is not None and notebook.exists():
        import scrapbook as sb

        return {name: scrap.data for name, scrap in sb.read_notebook(str(notebook)).scraps.items()}
    return {}


def ipc_kernel_manager(socket_dir: Path | None = None) -> type:
    """The kernel manager papermill starts kernels with: IPC sockets instead of loopback TCP.
    A TCP kernel logs "Kernel is running over TCP without encryption" at every start (one line
    per notebook on the console of ``lab calibrate``); over IPC only this user can reach it.
    The sockets go in ``socket_dir`` (jupyter_client's default is ``kernel-ipc-N`` in the
    working folder, the user's)."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class IpcKernelManager(AsyncKernelManager):
        @default("transport")
        def _transport_default(self) -> str:
            return "ipc"

        @default("ip")
        def _ip_default(self) -> str:
            return str((socket_dir or Path(tempfile.gettempdir())) / "kernel-ipc")

        async def _async_pre_start_kernel(self, **kw: Any) -> Any:
            _LIVE_KERNELS.append(self)
            return await super()._async_pre_start_kernel(**kw)

    return IpcKernelManager


_LIVE_KERNELS: list[Any] = []   # the kernel managers papermill started here (for Ctrl-C)
KERNEL_STOP_SECONDS = 10.0


def stop_kernels() -> None:
    """Kill the kernels this process started and remove their connection files. On Ctrl-C the
    kernel (its own session: the terminal's SIGINT does not reach it) would otherwise run its
    cell on until it notices its parent gone, then print "Parent appears to have exited" after
    the command's last line."""
    while _LIVE_KERNELS:
        km = _LIVE_KERNELS.pop()
        process = getattr(km.provisioner, "process", None) if km.provisioner is not None else None
        with contextlib.suppress(Exception):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(timeout=KERNEL_STOP_SECONDS)
        with contextlib.suppress(Exception):
            km.cleanup_connection_file()
            km.cleanup_ipc_files()


def preload() -> None:
    """Import what running a notebook imports on first use (papermill, nbclient, the kernel
    manager and its provisioner, the kernel spec check, nbconvert's HTML exporter), before a
    notebook is marked running: a Ctrl-C that lands while an import releases its module lock is
    dropped by Python ("Exception ignored in _get_module_lock.<locals>.cb: KeyboardInterrupt"),
    and the notebook then ran to its end as if nobody had asked it to stop (seen once in
    test_calibrate's Ctrl-C test, which signals as soon as capacity is "running")."""
    import nbclient  # noqa: F401
    import papermill  # noqa: F401
    import papermill.engines  # noqa: F401
    from jupyter_client.provisioning import LocalProvisioner  # noqa: F401
    from nbconvert import HTMLExporter  # noqa: F401

    ipc_kernel_manager()
    if sys.executable not in _KERNELS_CHECKED:
        ensure_kernel()


def run_notebook(name: str, params: Mapping[str, Any] | None, out_dir: Path | str, *,
                 config: ClusterConfig | None = None, services: ServicesConfig | None = None,
                 notebooks_dir: Path = NOTEBOOKS_DIR,
                 kernel_name: str = KERNEL_NAME, cell_timeout_seconds: float | None = None,
                 html: bool = True, cwd: Path = PROJECT_DIR) -> dict[str, Any]:
    """Execute one notebook into ``out_dir/<name>/`` and return the values it recorded."""
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    source = notebook_path(name, notebooks_dir)
    if kernel_name == KERNEL_NAME and sys.executable not in _KERNELS_CHECKED:
        ensure_kernel()  # a fresh venv without `make setup` still runs the suite
    folder = Path(out_dir).resolve() / name
    folder.mkdir(parents=True, exist_ok=True)
    executed = folder / f"{name}.ipynb"
    parameters = dict(params or {})
    parameters["out_dir"] = str(folder)
    if "show_progress" in _declared(source):
        # headless, a progress bar is a widget saved at 0% (its later states are not in the
        # notebook): the console shows per-notebook progress instead; -p ...show_progress=true wins
        parameters.setdefault("show_progress", False)
    if config is not None:
        parameters["cluster"] = cluster_parameter(config)
    if services is not None and "services" in _declared(source):  # a notebook without a store takes none
        parameters["services"] = services_parameter(services)
    sockets = Path(tempfile.mkdtemp(prefix="lab-kernel-"))  # short: a socket path has 107 bytes at most
    try:
        # shutdown_kernel="immediate": once every cell has run and papermill holds its outputs, the
        # kernel is killed instead of asked to exit: its own exit (IPython clearing the namespace,
        # the driver's loop thread joined) takes seconds per notebook (docs/measurements.md)
        pm.execute_notebook(str(source), str(executed), parameters=parameters, kernel_name=kernel_name,
                            cwd=str(cwd), progress_bar=False, request_save_on_cell_execute=True,
                            execution_timeout=cell_timeout_seconds, kernel_manager_class=ipc_kernel_manager(sockets),
                            shutdown_kernel="immediate")
    except KeyboardInterrupt:
        stop_kernels()
        raise
    except PapermillExecutionError as exc:
        raise CalibrationError(
            f"notebook {name} failed in cell {exc.exec_count} (index {exc.cell_index}): {exc.ename}: {exc.evalue}; "
            f"partial output in {executed}", notebook=name, cell=exc.exec_count, cell_index=exc.cell_index,
            ename=exc.ename, evalue=exc.evalue, output=str(executed)) from exc
    except Exception as exc:  # kernel died, timed out, bad parameters: still a failed notebook
        raise CalibrationError(f"notebook {name} could not run: {type(exc).__name__}: {exc}; partial output in "
                               f"{executed}", notebook=name, cell=None, ename=type(exc).__name__, evalue=str(exc),
                               output=str(executed)) from exc
    finally:
        _LIVE_KERNELS.clear()  # papermill shut it down (or stop_kernels killed it)
        shutil.rmtree(sockets, ignore_errors=True)
        if html:
            try:
                export_html(executed)
            except Exception:  # an HTML failure must not hide the notebook's own result or error
                pass
    return read_values(folder, executed)


# ---- JupyterLab ---------------------------------------------------------------------------
_KERNELS_CHECKED: set[str] = set()


def ensure_kernel(python: str | None = None) -> Path:
    """Make sure both kernels run this venv's Python: the project's (``lab.calibration.kernel``,
    what the notebooks name and papermill runs) and ``python3`` (``make setup`` installs both;
    this repairs a missing or foreign spec). Returns the project kernel's spec folder."""
    import subprocess
    import sys

    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel


    python = python or sys.executable
    if not kernel.installed(python):
        kernel.install(python)
    try:
        spec = KernelSpecManager().get_kernel_spec(kernel.PLAIN_KERNEL_NAME)
        argv0 = spec.argv[0] if spec.argv else ""
        # "python" is resolved by jupyter_client to the Python that launches the kernel: ours
        plain_ok = argv0 in ("python", "python3", python) and Path(spec.resource_dir).is_relative_to(sys.prefix)
    except NoSuchKernel:
        plain_ok = False
    if not plain_ok:
        subprocess.run([python, "-m", "ipykernel", "install", "--sys-prefix", "--name", kernel.PLAIN_KERNEL_NAME],
                       check=True, capture_output=True)
    _KERNELS_CHECKED.add(python)
    return Path(KernelSpecManager().get_kernel_spec(KERNEL_NAME).resource_dir)


def output_filter_installed(project_dir: Path = PROJECT_DIR) -> bool | None:
    """Is nbstripout this clone's git filter for notebooks (``make git-filters``)? None: not a git clone."""
    import subprocess

    try:
        inside = subprocess.run(["git", "rev-parse", "--git-dir"], cwd=project_dir, capture_output=True, text=True)
        if inside.returncode != 0:
            return None
        clean = subprocess.run(["git", "config", "--get", "filter.nbstripout.clean"], cwd=project_dir,
                               capture_output=True, text=True)
    except OSError:  # no git at all
        return None
    return clean.returncode == 0 and "nbstripout" in clean.stdout


def jupyter_command(*, home: Path, notebooks_dir: Path = NOTEBOOKS_DIR, ip: str = "127.0.0.1",
                    port: int | None = None, browser: bool = False, extra: tuple[str, ...] = (),
                    env: Mapping[str, str] | None = None, is_root: bool | None = None) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) that start JupyterLab on ``notebooks_dir`` with the project's kernel.

    The environment carries ``LAB_HOME`` (absolute) so the notebooks' cluster settings find the
    embedded node's state whatever the kernel's working folder."""
    import os
    import sys

    argv = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={Path(notebooks_dir).resolve()}",
            f"--ServerApp.ip={ip}", f"--MultiKernelManager.default_kernel_name={KERNEL_NAME}",
            "--KernelManager.transport=ipc",  # no "Kernel is running over TCP" line per kernel start
            f"--KernelManager.ip={Path(tempfile.gettempdir()) / 'lab-jupyter-kernel-ipc'}"]  # not in the user's folder
    if port is not None:
        argv.append(f"--ServerApp.port={port}")
    if not browser:
        argv.append("--no-browser")
    if (os.geteuid() == 0) if is_root is None else is_root:
        argv.append("--allow-root")  # jupyter refuses to start as root without it
    argv += list(extra)
    environment = dict(os.environ if env is None else env)
    environment["LAB_HOME"] = str(Path(home).resolve())
    return argv, environment
