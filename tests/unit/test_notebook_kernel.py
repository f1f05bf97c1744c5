"""Notebooks as engineers keep them (no node): the project's kernel (and python3 beside it),
progress bars as widgets without TqdmWarning, a failed connection as one line with its fix,
and outputs never committed (nbstripout as the git filter the Makefile installs)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from lab.calibration import kernel
from lab.calibration.notebooks import KERNEL_NAME, ensure_kernel, run_notebook
from lab.calibration.registry import NOTEBOOKS
from lab.cluster.config import ClusterConfig
from lab.errors import CalibrationError

ROOT = Path(__file__).resolve().parents[2]


def _outputs(path: Path) -> list[dict]:
    return [o for c in json.loads(path.read_text())["cells"] for o in c.get("outputs", [])]


@pytest.mark.spawns  # installs the kernel (a subprocess) when its spec is missing or stale
def test_the_notebooks_name_the_projects_kernel_and_both_kernels_exist():
    from jupyter_client.kernelspec import KernelSpecManager

    assert KERNEL_NAME == kernel.KERNEL_NAME == "message-store-lab"
    for name in NOTEBOOKS:
        spec = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())["metadata"]["kernelspec"]
        assert spec["name"] == KERNEL_NAME and spec["display_name"] == "Message-store lab", name
    ensure_kernel()
    specs = KernelSpecManager().find_kernel_specs()
    assert {KERNEL_NAME, "python3"} <= set(specs)
    project = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    assert project.display_name.startswith("Message-store lab (Python 3.")
    assert project.argv[0] == sys.executable and project.argv[-2:] == ["--ext", "lab.calibration.kernel"]
    assert kernel.installed()


@pytest.fixture
def tiny_notebooks(tmp_path) -> Path:
    """A notebook folder with one notebook that shows a tqdm.auto progress bar."""
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("out_dir = None\nshow_progress = True")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(
        "from tqdm.auto import tqdm\nimport json, pathlib\n"
        "n = sum(1 for _ in tqdm(range(50), desc='work', disable=not show_progress))\n"
        "pathlib.Path(out_dir, 'values.json').write_text(json.dumps({'n': n}))")]
    nb.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": "Message-store lab", "language": "python"}
    folder = tmp_path / "notebooks"
    folder.mkdir()
    nbformat.write(nb, folder / "bar.ipynb")
    return folder


@pytest.mark.spawns
def test_progress_bars_are_widgets_without_tqdm_warning(tiny_notebooks, tmp_path):
    values = run_notebook("bar", {"show_progress": True}, tmp_path / "run", notebooks_dir=tiny_notebooks, html=False)
    assert values == {"n": 50}
    outputs = _outputs(tmp_path / "run" / "bar" / "bar.ipynb")
    assert not any("TqdmWarning" in json.dumps(o) or "IProgress" in json.dumps(o) for o in outputs), outputs
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs), outputs


@pytest.mark.spawns
def test_headless_runs_leave_the_bars_out(tiny_notebooks, tmp_path):
    """A widget is saved at 0% by a headless run; the runner turns progress off unless asked."""
    run_notebook("bar", {}, tmp_path / "run", notebooks_dir=tiny_notebooks, html=False)
    assert not any("widget" in json.dumps(o) for o in _outputs(tmp_path / "run" / "bar" / "bar.ipynb"))


@pytest.mark.spawns
def test_a_failed_connection_is_one_line_with_the_fix(tmp_path):
    with pytest.raises(CalibrationError) as info:
        run_notebook("b_row", {"rows": 10, "repeats": 1}, tmp_path, config=ClusterConfig(port=1), html=False)
    assert info.value.ename == "ConnectError"
    errors = [o for o in _outputs(tmp_path / "b_row" / "b_row.ipynb") if o["output_type"] == "error"]
    assert len(errors) == 1 and len(errors[0]["traceback"]) == 1, errors
    line = errors[0]["traceback"][0]
    assert "ConnectError" in line and "cannot connect to 127.0.0.1:1: connection refused" in line
    assert "`lab node start`" in line and "cluster parameter" in line
    assert "NoHostAvailable" not in line and "Traceback" not in line


@pytest.mark.spawns
def test_outputs_never_reach_git(tmp_path):
    """`make git-filters` in a clone: a notebook run with outputs is stored without them, and
    running its cells again (JupyterLab's autosave) changes nothing git sees."""
    if shutil.which("git") is None or shutil.which("make") is None:
        pytest.fail("git and make are needed (the Makefile's git-filters target)")
    repo = tmp_path / "clone"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True, text=True)  # noqa: E731
    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    shutil.copy(ROOT / ".gitattributes", repo / ".gitattributes")
    make = subprocess.run(["make", "-f", str(ROOT / "Makefile"), "git-filters", f"BIN={Path(sys.executable).parent}"],
                          cwd=repo, capture_output=True, text=True)
    assert make.returncode == 0 and "nbstripout: installed" in make.stdout, make.stdout + make.stderr
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("rows = 2000\nrows")
    cell.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "2000"}, execution_count=1)]
    cell.execution_count = 1
    nb.cells = [cell]
    nbformat.write(nb, repo / "b_row.ipynb")
    git("add", "b_row.ipynb", ".gitattributes")
    git("commit", "-qm", "notebook")
    stored = json.loads(git("show", "HEAD:b_row.ipynb").stdout)
    assert stored["cells"][0]["outputs"] == [] and stored["cells"][0]["execution_count"] is None
    cell.outputs[0]["data"]["text/plain"] = "2001"  # run again: other outputs only
    cell.execution_count = 7
    nbformat.write(nb, repo / "b_row.ipynb")
    assert git("status", "--porcelain").stdout == ""


@pytest.mark.spawns
def test_lab_jupyter_serves_the_kernel_over_ipc_with_widgets(tmp_path):
    """`lab jupyter` started, driven over Jupyter's REST and websocket API for a few seconds, stopped
    by PID: its default kernel is the project's, the widgets extension is there, a cell's
    ConnectError is one line, and the console has no 'Kernel is running over TCP' line."""
    import os
    import signal
    import time
    import urllib.request
    import uuid

    import websocket

    from lab.load.processes import free_port

    port, token = free_port(), uuid.uuid4().hex
    err = tmp_path / "jupyter.err"
    with open(err, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "lab.cli", "jupyter", "--port", str(port),
                                 f"--IdentityProvider.token={token}"], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=f, text=True, env={**os.environ, "LAB_HOME": str(tmp_path / "home")})
    base = f"127.0.0.1:{port}"

    def get(path: str, data: bytes | None = None) -> dict:
        req = urllib.request.Request(f"http://{base}{path}", data=data, method="POST" if data else "GET",
                                     headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                specs = get("/api/kernelspecs")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
                time.sleep(0.5)
        assert specs["default"] == KERNEL_NAME and KERNEL_NAME in specs["kernelspecs"]
        extensions = {e["name"]: e for e in get("/lab/api/extensions")}
        widgets = extensions.get("jupyter-widgets-jupyterlab-manager")  # ipywidgets' JupyterLab side
        assert widgets is not None and widgets["enabled"] and widgets["status"] == "ok", sorted(extensions)
        kid = get("/api/kernels", json.dumps({"name": KERNEL_NAME}).encode())["id"]
        ws = websocket.create_connection(f"ws://{base}/api/kernels/{kid}/channels?token={token}", timeout=60)
        msg_id = uuid.uuid4().hex
        code = ("import ipywidgets\nfrom lab.errors import ConnectError\n"
                "raise ConnectError('cannot connect to 127.0.0.1:1: connection refused (the fix)')")
        ws.send(json.dumps({"header": {"msg_id": msg_id, "username": "t", "session": uuid.uuid4().hex,
                                       "msg_type": "execute_request", "version": "5.3"},
                            "parent_header": {}, "metadata": {}, "channel": "shell",
                            "content": {"code": code, "silent": False, "store_history": False,
                                        "user_expressions": {}, "allow_stdin": False}}))
        errors = []
        while True:
            m = json.loads(ws.recv())
            if m.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "error":
                errors.append(m["content"])
            if m["msg_type"] == "execute_reply":
                break
        ws.close()
    finally:
        proc.send_signal(signal.SIGTERM)  # by PID: JupyterLab replaced `lab jupyter` (exec)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert len(errors) == 1 and errors[0]["ename"] == "ConnectError" and len(errors[0]["traceback"]) == 1, errors
    assert "running over TCP" not in err.read_text()
