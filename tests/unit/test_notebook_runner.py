"""The papermill runner: one notebook per measurement, failures name the cell, partial output kept."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.calibration.notebooks import run_notebook
from lab.calibration.registry import NOTEBOOKS
from lab.errors import CalibrationError


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("notebooks")


@pytest.mark.spawns
def test_a_failing_notebook_names_the_cell_and_keeps_partial_output(tmp_path, capfd):
    with pytest.raises(CalibrationError) as info:
        run_notebook("capacity", {"tiers": ["not a number"]}, tmp_path)
    # the kernel runs over IPC: no "[IPKernelApp] WARNING | Kernel is running over TCP" per notebook
    assert "running over TCP" not in capfd.readouterr().err
    err = info.value
    assert err.notebook == "capacity" and err.cell is not None and err.ename
    assert "capacity" in str(err) and f"cell {err.cell}" in str(err)
    assert (tmp_path / "capacity" / "capacity.ipynb").exists()
    assert (tmp_path / "capacity" / "capacity.html").exists()


@pytest.mark.spawns
def test_capacity_reads_the_measured_b_row(run_dir, notebook_artifacts):
    b_row_values = run_dir / "b_row" / "values.json"
    params = {"b_row_values": str(b_row_values)} if b_row_values.exists() else {"b_row_bytes": 1200.0}
    values = run_notebook("capacity", params, run_dir)
    notebook_artifacts(run_dir / "capacity", "capacity", "capacity")
    assert values["resident_tb_design_20000000"] == pytest.approx(15.768, rel=1e-3)  # §7: ~= 15.8 TB
    measured = values["b_row_measured_bytes"]
    assert values["resident_tb_measured_20000000"] == pytest.approx(15.768 * measured / 600, rel=1e-3)
    assert values["nodes_needed_measured_20000000"] >= 3
    import scrapbook as sb

    scraps = sb.read_notebook(str(run_dir / "capacity" / "capacity.ipynb")).scraps
    assert scraps["resident_tb_measured_20000000"].data == values["resident_tb_measured_20000000"]


def test_suite_has_one_notebook_per_measurement():
    root = Path(__file__).resolve().parents[2] / "notebooks"
    assert sorted(p.stem for p in root.glob("*.ipynb")) == sorted(NOTEBOOKS)
    for name in NOTEBOOKS:
        nb = json.loads((root / f"{name}.ipynb").read_text())
        params = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
        assert len(params) == 1, name
        assert not any(c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), f"{name} saved with outputs"


@pytest.mark.spawns
def test_the_kernel_is_killed_once_every_cell_has_run_not_left_to_exit(tmp_path):
    """Every cell runs and its outputs are kept; then the kernel is killed, not asked to exit:
    its own exit (IPython clearing its namespace, the driver's loop thread joined) took ~2 s of
    every notebook. A hook the kernel would run at exit never runs."""
    import nbformat

    from lab.calibration.kernel import KERNEL_NAME

    params = nbformat.v4.new_code_cell('marker = ""\nout_dir = ""')
    params.metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(cells=[params, nbformat.v4.new_code_cell(
        "import atexit, json, pathlib\n"
        "atexit.register(pathlib.Path(marker).write_text, 'the kernel exited by itself')\n"
        "pathlib.Path(out_dir, 'values.json').write_text(json.dumps({'ran': True}))")])
    nb.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": KERNEL_NAME, "language": "python"}
    (tmp_path / "nbs").mkdir()
    nbformat.write(nb, tmp_path / "nbs" / "probe.ipynb")
    marker = tmp_path / "exited"
    values = run_notebook("probe", {"marker": str(marker)}, tmp_path / "out", notebooks_dir=tmp_path / "nbs",
                          html=False)
    assert values == {"ran": True}
    assert not marker.exists()


@pytest.mark.spawns
def test_the_notebook_tools_load_without_jsonschemas_iri_grammar():
    """Reading a notebook's parameters (papermill), exporting HTML (nbconvert) and validating
    (nbformat) work without importing rfc3987_syntax, whose grammar took 6-10 s to build at import
    (lab.calibration.kernel). In a child process: this one may have imported it already."""
    import subprocess
    import sys

    code = ("import sys; from lab.calibration.notebooks import check_parameters, export_html, notebook_path; "
            "check_parameters('capacity', {}); import nbformat; nb = nbformat.read(notebook_path('capacity'), 4); "
            "nbformat.validate(nb); print(sys.modules.get('rfc3987_syntax'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "None"


@pytest.mark.spawns
def test_preload_leaves_nothing_to_import_before_a_notebooks_cells_run(tmp_path):
    """lab calibrate imports the notebook tools before it marks a notebook "running": Python drops
    a KeyboardInterrupt raised while an import releases its module lock, so a Ctrl-C during the
    first notebook's imports (papermill, nbclient, the kernel manager: 300 modules) was lost. In a
    child process (this one has imported them already): after preload(), running a notebook
    imports only what its HTML export needs, after its cells ran (html=False here: nothing)."""
    import subprocess
    import sys

    nbs = tmp_path / "nbs"
    nbs.mkdir()
    code = ("import sys, json; from pathlib import Path; import nbformat\n"
            "from lab.calibration import notebooks as nb\n"
            "from lab.calibration.kernel import KERNEL_NAME\n"
            "p = nbformat.v4.new_code_cell('out_dir = \"\"'); p.metadata['tags'] = ['parameters']\n"
            "book = nbformat.v4.new_notebook(cells=[p, nbformat.v4.new_code_cell("
            "'import json, pathlib; pathlib.Path(out_dir, \"values.json\").write_text(json.dumps({\"ran\": 1}))')])\n"
            "book.metadata['kernelspec'] = {'name': KERNEL_NAME, 'display_name': KERNEL_NAME, 'language': 'python'}\n"
            f"nbformat.write(book, {str(nbs / 'probe.ipynb')!r})\n"
            "nb.preload(); before = set(sys.modules)\n"
            f"nb.run_notebook('probe', {{}}, {str(tmp_path / 'out')!r}, notebooks_dir=Path({str(nbs)!r}), html=False)\n"
            "print(json.dumps(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []
