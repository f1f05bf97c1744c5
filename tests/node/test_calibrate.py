"""Calibration runs against the real node: the notebook suite with the shortest parameters,
calibration.json against the notebooks' own outputs, the proposed diff, run comparison, a
failing notebook, the report rendered by headless Chromium (Debian's ``chromium``, installed
by ``make test``), and your mix priced end to end (the run prices ``example_mix``: its nodes in
the conclusion, the report's capacity table and calibration.json), Ctrl-C and --resume on a
``--my-mix`` capacity-alone run that finds this module's b_row run and says which (the
refusals that need no node are in tests/unit/test_calibration_params.py)."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.calibration.calibrate import CalibrationOptions, run_calibration
from lab.calibration.recommendations import MEASURES, NOT_MEASURED
from lab.calibration.registry import NOTEBOOKS, TARGET_RTT_NOTEBOOKS
from lab.constants import APPENDIX_B_PATH, load_constants, read_entries
from lab.measure.stats import MIN_INTERVAL_ROUNDS
from lab.project import PROJECT_DIR
from lab.results.jsonio import jsonable

pytestmark = pytest.mark.node

ROOT = Path(__file__).resolve().parents[2]
LAB = [sys.executable, "-m", "lab.cli"]
CHROMIUM = Path("/usr/bin/chromium")

# The shortest parameters each notebook accepts: this is a test of the pipeline, not a measurement.
TINY: dict[str, dict] = {
    "b_row": {"rows": 200, "min_repeats": 2, "max_repeats": 2, "partition_rows": 0, "compressions": ["lz4"],
              "fit_mixes": ["text_only", "text_long", "files_audio", "photos_small_thumbs"], "fit_rows": 120,
              "fit_repeats": 2, "show_progress": False},
    "in_limit": {"partition_rows": 120, "in_sizes": [1, 10, 100], "min_rounds": 4, "max_rounds": 4, "probe_sizes": [],
                 "show_progress": False},
    "empty_buckets": {"runs": [0, 2, 9], "scan_limits": [8], "min_rounds": 2, "max_rounds": 2, "rows_oldest": 5,
                      "hole_messages": 2000, "show_progress": False},
    "twcs_sstables": {"record_windows_days": [1, 7], "dedup_windows_hours": [1, 6], "record_days": 3,
                      "dedup_hours": 3, "rows_per_interval": 2, "expire_days": 1, "expire_hours": 1,
                      "short_ttl_seconds": 5, "show_progress": False},
    "grouped_reads": {"dataset_messages": 300, "mix_sizes": [20], "group_backlog": 40, "dm_count": 3,
                      "dm_backlog": 2, "repeats": 2, "show_progress": False},
    "capacity": {"show_progress": False, "my_mix": "example_mix", "my_mix_rows": 2000},
}


# The run's deployment round trip (lab calibrate --target-rtt): the latency notebooks sweep 1 and 2 ms too.
TARGET_RTT = {"target_rtt_us": 1000, "rtt_rounds": 2}


# The notebooks that feed appendix-B constants (b_row, in_limit, empty_buckets) plus capacity, which
# reads this run's b_row. twcs_sstables and grouped_reads only observe (tests/test_notebooks.py runs
# every notebook): leaving them out keeps this file near two minutes of the CI budget.
SUITE = ("b_row", "in_limit", "empty_buckets", "capacity")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("results")


@pytest.fixture(scope="module")
def run(cluster_config, results):
    """One quick calibration (TINY parameters) of SUITE, with --propose (allowed on a quick run)."""
    return run_calibration(cluster_config, CalibrationOptions(
        quick=True, results=results, notebooks=SUITE, propose=True,
        overrides={n: TINY[n] | (TARGET_RTT if n in TARGET_RTT_NOTEBOOKS else {}) for n in SUITE},
        allow_quick=True, progress=False))


@pytest.fixture(scope="module")
def failed_run(cluster_config, results):
    """Through the CLI: in_limit succeeds, then grouped_reads raises on an unknown profile."""
    env_home = ["--home", str(cluster_config.lab_home)]
    params = [f"--param=in_limit.{k}={json.dumps(v)}" for k, v in TINY["in_limit"].items()]
    params += [f"--param=grouped_reads.{k}={json.dumps(v)}" for k, v in TINY["grouped_reads"].items()]
    proc = subprocess.run([*LAB, "calibrate", "--quick", "--no-progress", "--notebooks", "in_limit,grouped_reads",
                           *params, "-p", "grouped_reads.profile=no_such_profile", "--results", str(results),
                           *env_home], capture_output=True, text=True, cwd=ROOT, timeout=600)
    dirs = [d for d in results.iterdir() if d.is_dir() and (d / "calibration.json").exists()
            and json.loads((d / "calibration.json").read_text())["status"] == "failed"]
    assert len(dirs) == 1, (proc.stdout, proc.stderr[-3000:])
    return proc, dirs[0]


def _scraps(notebook: Path) -> dict:
    """The values a notebook glued (scrapbook's JSON scraps in the executed notebook's outputs).
    Read from the outputs directly: ``scrapbook.read_notebook`` rejects a notebook that glued a
    None (its scrap schema has no null)."""
    import nbformat

    out = {}
    for cell in nbformat.read(notebook, as_version=4).cells:
        for output in cell.get("outputs", []):
            payload = output.get("data", {}).get("application/scrapbook.scrap.json+json")
            if payload is not None:
                out[payload["name"]] = payload["data"]
    return out


# ---- calibration.json: the contract ------------------------------------------------------------
def test_calibration_json_has_every_constant(run):
    cal = json.loads((run.run_dir / "calibration.json").read_text())
    assert cal == jsonable(run.calibration)  # the file is the run's typed result
    assert cal["status"] == "ok" and cal["error"] is None and cal["mode"] == "quick"
    entries = read_entries()
    assert set(cal["constants"]) == set(entries)
    for name, c in cal["constants"].items():
        assert {"current", "measured", "recommended", "unit", "confidence", "evidence", "figure", "notebook"} <= set(c)
        assert c["current"] == entries[name].value and c["unit"] == entries[name].unit
        if c["notebook"] is None:  # not measured: still listed, recommendation = current value
            assert c["measured"] is None and c["recommended"] == c["current"] and c["evidence"] == NOT_MEASURED
    assert cal["constants"]["b_row_bytes"]["measured"] > 0
    assert cal["constants"]["client_dedup_ttl_seconds"]["evidence"] == NOT_MEASURED
    bucket = cal["constants"]["message_seq_bucket_width"]
    assert bucket["guarded"] and bucket["recommended"] == bucket["current"] == 4096


def test_environment_and_round_trip(run, cluster_config):
    env = run.calibration.environment
    assert env["server"] in ("cassandra", "scylla") and env["server_version"]
    assert env["nodes"] >= 1 and env["replication_factor"] == cluster_config.replication_factor
    assert env["machine"]["cpus"] >= 1 and "git_commit" in env
    if env["embedded"]:
        assert env["node_startup_seconds"] > 0 and env["jar_resolution_seconds"] is not None
    assert env["parameters"]["notebooks"]["b_row"]["rows"] == TINY["b_row"]["rows"]
    assert env["cluster"]["password"] in (None, "***")
    rt = run.calibration.round_trip
    assert rt.n > 0 and 0 < rt.write_p50_us <= rt.write_p99_us and 0 < rt.read_p50_us <= rt.read_p99_us
    assert rt.seconds > 0


def test_every_notebook_left_its_outputs(run):
    cal = run.calibration.to_json()
    assert list(cal["notebooks"]) == list(SUITE)
    assert [n for n in NOTEBOOKS if n in SUITE] == list(SUITE)  # suite order kept
    for name, nb in cal["notebooks"].items():
        assert nb["status"] == "ok", (name, nb.get("error"))
        for key in ("notebook", "html", "values_file"):
            assert (run.run_dir / nb[key]).is_file(), (name, key)
        assert nb["figures"] and all((run.run_dir / f).is_file() for f in nb["figures"])
        assert nb["seconds"] > 0


def test_values_match_the_notebooks_own_outputs(run):
    """calibration.json against what each notebook wrote (values.json) and glued (scrapbook)."""
    cal = run.calibration.to_json()
    for name, nb in cal["notebooks"].items():
        own = json.loads((run.run_dir / nb["values_file"]).read_text())
        assert nb["values"] == own
        scraps = _scraps(run.run_dir / nb["notebook"])
        for key in ("b_row_bytes", "b_row_ci_low_bytes", "recommended_in_limit", "recommended_scan_limit"):
            if key in own:
                assert scraps.get(key) == own[key], (name, key)  # a None is not glued (no null scrap)
    for m in MEASURES:
        c = cal["constants"][m.constant]
        if m.notebook not in cal["notebooks"]:
            if not any(o.constant == m.constant and o.notebook in SUITE for o in MEASURES):
                assert c["notebook"] is None and c["evidence"] == NOT_MEASURED
            continue
        values = cal["notebooks"][m.notebook]["values"]
        assert c["notebook"] == m.notebook
        if m.measured is not None and values.get(m.measured) is not None:
            assert c["measured"] == pytest.approx(values[m.measured]), m.constant
            if m.ci:
                assert (c["ci_low"], c["ci_high"]) == pytest.approx((values[m.ci[0]], values[m.ci[1]]))
        if c["figure"]:
            assert c["figure"].startswith(f"{m.notebook}/") and (run.run_dir / c["figure"]).is_file()
    b_row = cal["constants"]["b_row_bytes"]
    if TINY["b_row"]["max_repeats"] < MIN_INTERVAL_ROUNDS:  # no interval from too few rounds: no change
        assert b_row["ci_low"] is None and b_row["ci_high"] is None and b_row["measured"] is not None
        assert b_row["recommended"] == b_row["current"] and b_row["confidence"] == "low"
        assert "too few rounds for an interval" in b_row["evidence"]
    else:
        assert b_row["ci_low"] <= b_row["measured"] <= b_row["ci_high"]
        inside = b_row["ci_low"] <= b_row["current"] <= b_row["ci_high"]
        assert (b_row["recommended"] == b_row["current"]) == inside or b_row["recommended"] == round(b_row["measured"])
    # the capacity notebook used the b_row measured in this very run
    capacity = cal["notebooks"]["capacity"]["values"]
    assert capacity["b_row_measured_bytes"] == pytest.approx(cal["notebooks"]["b_row"]["values"]["b_row_bytes"])
    assert str(run.run_dir.resolve()) in capacity["b_row_source"]


# ---- --propose -------------------------------------------------------------------------------
def _applies(diff: Path, constants: Path, tmp: Path) -> Path:
    """Apply ``diff`` to a copy of ``constants`` laid out as in the repository
    (lab/appendix_b.toml); returns the copy."""
    tree = tmp / "tree"
    (tree / "lab").mkdir(parents=True)
    target = tree / "lab" / "appendix_b.toml"
    shutil.copy(constants, target)
    check = subprocess.run(["git", "apply", "--check", "-v", str(diff.resolve())], cwd=tree, capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stderr
    dry = subprocess.run(["patch", "-p1", "--dry-run", "-i", str(diff.resolve())], cwd=tree, capture_output=True,
                         text=True)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    subprocess.run(["git", "apply", str(diff.resolve())], cwd=tree, check=True)
    return target


def test_propose_diff_of_the_run_applies_cleanly(run, tmp_path):
    """The diff edits appendix_b.toml only (the one source of appendix B), value lines only."""
    cal = run.calibration.to_json()
    diff = run.proposal_path
    assert diff is not None and diff.name == "appendix_b.diff"
    changed = {n: c for n, c in cal["constants"].items() if c["changed"] and not c["guarded"]}
    text = diff.read_text()
    if not changed:
        assert "No constant changes" in text and "@@" not in text
        return
    assert re.findall(r"^\+\+\+ (\S+)", text, re.M) == ["b/lab/appendix_b.toml"]
    edited = [line for line in text.splitlines() if line[:1] in ("+", "-") and line[:3] not in ("+++", "---")]
    assert all(line.startswith(("+value = ", "-value = ")) for line in edited), text
    target = _applies(diff, APPENDIX_B_PATH, tmp_path)
    applied = load_constants(target)
    for name, c in changed.items():
        assert getattr(applied, name) == c["recommended"]
        assert f"# {c['evidence']}" in text


def test_propose_against_a_moved_file_and_the_bucket_width_guard(run, tmp_path):
    """The constants file changed since the run: the proposal brings it back to the run's
    recommendation with the evidence line, and never touches message_seq_bucket_width."""
    from lab.calibration.propose import propose

    moved = tmp_path / "appendix_b.toml"
    text = APPENDIX_B_PATH.read_text()
    text = text.replace("[constants.b_row_bytes]\nvalue = 600", "[constants.b_row_bytes]\nvalue = 1")
    text = text.replace("[constants.message_seq_bucket_width]\nvalue = 4096",
                        "[constants.message_seq_bucket_width]\nvalue = 1024")
    moved.write_text(text)
    proposal = propose(run.run_dir, constants_path=moved, out=tmp_path / "moved.diff", allow_quick=True)
    b_row = run.calibration.constants["b_row_bytes"].to_json()
    assert proposal.changes["b_row_bytes"] == (1, b_row["recommended"])
    assert "message_seq_bucket_width" not in proposal.changes
    assert "message_seq_bucket_width" in proposal.skipped
    diff = proposal.path.read_text()
    assert f"+value = {b_row['recommended']}" in diff and "-value = 1\n" in diff
    assert "b_row notebook, run " + run.run_dir.name in diff and "value = 1024" not in diff.split("@@", 1)[1]
    applied = load_constants(_applies(proposal.path, moved, tmp_path))
    assert applied.b_row_bytes == b_row["recommended"] and applied.message_seq_bucket_width == 1024


def test_propose_from_an_existing_run_via_the_cli(run):
    """A quick run is a smoke test: --propose-from refuses it unless --allow-quick, and then the
    diff's header says it came from a quick run."""
    proc = subprocess.run([*LAB, "calibrate", "--propose-from", str(run.run_dir)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "quick run" in proc.stderr and "--allow-quick" in proc.stderr
    proc = subprocess.run([*LAB, "calibrate", "--propose-from", str(run.run_dir), "--allow-quick"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"proposal: {run.run_dir / 'appendix_b.diff'}" in proc.stdout
    assert "QUICK RUN (written with --allow-quick)" in (run.run_dir / "appendix_b.diff").read_text()


def test_propose_on_a_quick_run_is_refused_before_anything_runs(tmp_path, cluster_config):
    proc = subprocess.run([*LAB, "calibrate", "--quick", "--propose", "--notebooks", "b_row", "--results", str(tmp_path),
                           "--home", str(cluster_config.lab_home)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "--allow-quick" in proc.stderr
    assert list(tmp_path.iterdir()) == []  # no run folder


# ---- failures --------------------------------------------------------------------------------
def test_failed_notebook_names_notebook_and_cell_and_keeps_partial_results(failed_run):
    proc, run_dir = failed_run
    assert proc.returncode != 0
    assert "CalibrationError" in proc.stderr and "grouped_reads" in proc.stderr and "cell" in proc.stderr
    cal = json.loads((run_dir / "calibration.json").read_text())
    err = cal["error"]
    assert cal["status"] == "failed" and err["notebook"] == "grouped_reads"
    assert isinstance(err["cell"], int) and err["cell_source"] and err["ename"]
    assert "no_such_profile" in err["evalue"] or "no_such_profile" in proc.stderr
    assert cal["notebooks"]["in_limit"]["status"] == "ok"
    assert (run_dir / "in_limit" / "values.json").is_file() and (run_dir / "in_limit" / "in_limit.html").is_file()
    assert (run_dir / "grouped_reads" / "grouped_reads.ipynb").is_file()  # the partial notebook
    assert (run_dir / "report.html").is_file() and "Run failed" in (run_dir / "report.html").read_text()
    assert cal["constants"]["batch_read_in_list_limit"]["notebook"] == "in_limit"


# ---- lab compare -----------------------------------------------------------------------------
def test_compare_reports_the_differences(run, failed_run, results):
    _, other = failed_run
    proc = subprocess.run([*LAB, "compare", str(run.run_dir), str(other)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "per-interval medians, AR(1)-corrected" in out and "b_row_bytes" in out and "verdict:" in out
    folder = results / f"compare-{run.run_dir.name}-{other.name}"
    data = json.loads((folder / "comparison.json").read_text())
    by_name = {r["constant"]: r for r in data["constants"]}
    assert by_name["b_row_bytes"]["agreement"] == "not measured in B"  # measured in A only: nothing to differ on
    assert by_name["b_row_bytes"]["measured_b"] is None and not by_name["b_row_bytes"]["differs"]
    assert by_name["client_dedup_ttl_seconds"]["agreement"] == "not measured"
    assert data["comparable"] and {d["what"] for d in data["differences"]} <= {"notebook parameters"}
    in_limit = [r for r in data["samples"] if r["table"] == "in_limit/samples"]
    assert {r["group"] for r in in_limit} == {"in_size=1", "in_size=10", "in_size=100"}
    for r in in_limit:  # tested on per-round medians, or said to have too few rounds for a test
        t = r["test"]
        assert (t["p_value"] is not None and 0 <= t["p_value"] <= 1 and 0 <= t["p_adjusted"] <= 1) or \
            ("too few for a test" in t["verdict"] or "drifting together" in t["verdict"]), t
        assert r["n_a"] > 0 and r["n_b"] > 0 and t["intervals_a"] > 0
    assert "in_size=100" in out and "not measured" in out
    text = re.sub(r"<[^>]+>", "", (folder / "index.html").read_text())  # names may wrap at underscores (<wbr>)
    assert "b_row_bytes" in text and "in_size=100" in text


# ---- the report in a browser -----------------------------------------------------------------
def _chromium(*args: str, user_data: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                           "--no-first-run", "--disable-background-networking", "--disable-component-update",
                           "--disable-sync", f"--user-data-dir={user_data}", *args],
                          capture_output=True, text=True, timeout=180)


def _probe_dom(page: Path, script: str, *, user_data: Path) -> subprocess.CompletedProcess:
    """``page``'s DOM as headless Chromium lays it out at 1,280 px, after ``script`` ran on load
    (in a copy of the page beside it, removed afterwards)."""
    probe = page.with_name(f"{page.stem}-probe.html")
    probe.write_text(page.read_text().replace("</body>", f"<script>{script}</script></body>"))
    try:
        return _chromium("--virtual-time-budget=10000", "--window-size=1280,2000", "--dump-dom", probe.as_uri(),
                         user_data=user_data)
    finally:
        probe.unlink()


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (make test installs it)")
def test_report_renders_in_headless_chromium_with_its_figures(run, tmp_path):
    """Every figure decodes, the page fits a 1,280 px window (no horizontal scroll), it leads
    with the quick-run banner and the decisions, and a figure opens full size in its lightbox."""
    from PIL import Image

    report = run.report_path
    html = report.read_text()
    n_imgs = html.count("<img ")
    assert n_imgs >= len(SUITE)
    # what the browser decoded and laid out
    dom = _probe_dom(report, "window.addEventListener('load',()=>{const i=[...document.images];const h=[...document."
                             "querySelectorAll('h2')].map(x=>x.textContent);document.body.setAttribute('data-probe',"
                             "i.length+':'+i.filter(x=>x.complete&&x.naturalWidth>0).length);document.body."
                             "setAttribute('data-width',document.documentElement.scrollWidth);document.body."
                             "setAttribute('data-h2',h.join('|'));});", user_data=tmp_path / "ud1")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert f'data-probe="{n_imgs}:{n_imgs}"' in dom.stdout
    width = int(re.search(r'data-width="(\d+)"', dom.stdout).group(1))
    assert width <= 1280, f"the page is {width} px wide in a 1,280 px window"
    h2 = re.search(r'data-h2="([^"]*)"', dom.stdout).group(1).split("|")
    assert h2[0] == "Decisions" and "Evidence per constant" in h2 and "Notebooks" in h2
    assert "Quick run: a smoke test of the pipeline, not a calibration." in dom.stdout
    # the page itself, as a reader opens it from disk: not blank
    png = tmp_path / "report.png"
    shot = _chromium(f"--screenshot={png}", "--window-size=1280,2000", report.as_uri(), user_data=tmp_path / "ud2")
    assert shot.returncode == 0 and png.is_file(), shot.stderr[-2000:]
    img = Image.open(png).convert("RGB")
    assert img.size == (1280, 2000)
    assert len(img.getcolors(maxcolors=1 << 20)) > 50  # text, tables and plots; a blank page has one or two colours
    # a figure opened full size: the lightbox covers the window with the PNG (matplotlib's #1f77b4)
    figure = run.calibration.constants["b_row_bytes"].figure
    assert figure and "id='fig-b_row_bytes'" in html and f"href='{figure}'>full size" in html
    zoom = tmp_path / "zoom.png"
    shot = _chromium(f"--screenshot={zoom}", "--window-size=1280,900", report.as_uri() + "#fig-b_row_bytes",
                     user_data=tmp_path / "ud3")
    assert shot.returncode == 0 and zoom.is_file(), shot.stderr[-2000:]
    colors = Image.open(zoom).convert("RGB").getcolors(maxcolors=1 << 20)
    blue = sum(n for n, (r, g, b) in colors if abs(r - 31) < 12 and abs(g - 119) < 12 and abs(b - 180) < 12)
    dark = sum(n for n, (r, g, b) in colors if r < 60 and g < 60 and b < 60)  # the lightbox's backdrop
    assert blue > 2000 and dark > 50_000


PROBE = """
window.addEventListener('load', () => {
  const out = {};
  // names wrap at their underscores only: no part of a name spans two lines
  out.broken = [...document.querySelectorAll('.seg')].filter(s => s.getClientRects().length > 1).map(s => s.textContent);
  // headers over their own columns: every row as many cells as its table's header, numeric headers aligned as numbers
  out.misaligned = [];
  for (const t of document.querySelectorAll('table')) {
    const head = t.rows[0], n = head ? head.cells.length : 0;
    for (const r of [...t.rows].slice(1)) {
      if (r.cells.length !== n) out.misaligned.push(head.textContent.slice(0, 60) + ' / ' + r.textContent.slice(0, 60));
    }
    [...head.cells].forEach((th, i) => {
      const col = [...t.rows].slice(1).map(r => r.cells[i]).filter(Boolean);
      const numeric = col.length && col.every(c => c.classList.contains('num'));
      if (numeric && getComputedStyle(th).textAlign !== 'right') out.misaligned.push('header ' + th.textContent);
    });
  }
  // figures: large enough to read inline (two to a row, or beside their evidence)
  out.thumbs = [...document.querySelectorAll('img.thumb')].map(i => Math.round(i.getBoundingClientRect().width));
  // the caveats every row shares: said once, above the decisions
  out.caveats = document.querySelectorAll('.caveats .caveat').length;
  out.decisionRows = document.querySelectorAll('table.decisions tr').length;
  out.quickVerbs = [...document.querySelectorAll('table.decisions td.changed')].map(td => td.textContent.split(' ')[0] + ' ' + td.textContent.split(' ')[1]);
  out.capacityTags = [...document.querySelectorAll('h2')].filter(h => h.textContent.startsWith('Capacity')).length ?
    document.querySelectorAll('small[class^="conf-"]').length : -1;
  // the lightbox opens on its anchor and Escape closes it
  const box = document.getElementById('fig-b_row_bytes');
  location.hash = 'fig-b_row_bytes';
  out.open = getComputedStyle(box).display;
  document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true}));
  out.closed = getComputedStyle(box).display;
  out.width = document.documentElement.scrollWidth;
  document.body.setAttribute('data-layout', JSON.stringify(out));
});
"""


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (make test installs it)")
def test_report_layout_at_1280_px(run, tmp_path):
    """At 1,280 px in headless Chromium: names break only at underscores, every header sits over
    its own column, figures are at least 560 px wide inline, the caveats all rows share are said
    once above the decisions, a quick run's decisions read "would change", the capacity figures
    carry their confidence, and Escape closes the lightbox. The screenshot is kept beside the
    report (report-1280.png) for a reader to look at."""
    import html as html_lib

    report = run.report_path
    dom = _probe_dom(report, PROBE, user_data=tmp_path / "ud")
    assert dom.returncode == 0, dom.stderr[-2000:]
    layout = json.loads(html_lib.unescape(re.search(r'data-layout="([^"]*)"', dom.stdout).group(1)))
    assert layout["broken"] == [], "names broken inside a part"
    assert layout["misaligned"] == []
    assert layout["thumbs"] and min(layout["thumbs"]) >= 560, layout["thumbs"]
    assert layout["caveats"] >= 1
    # a quick run changes nothing in the imperative (which constants change depends on the tiny run:
    # tests/unit/test_report.py words a change; here every changed row, if any, as rendered)
    assert layout["decisionRows"] > 1 and set(layout["quickVerbs"]) <= {"would change"}, layout["quickVerbs"]
    assert layout["capacityTags"] >= 3  # measured b_row and your mix per tier, each with its confidence
    assert layout["open"] == "flex" and layout["closed"] == "none"
    assert layout["width"] <= 1280
    shot = report.with_name("report-1280.png")
    proc = _chromium(f"--screenshot={shot}", "--window-size=1280,2400", report.as_uri(), user_data=tmp_path / "ud2")
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]


# ---- --repeat-check --------------------------------------------------------------------------
def test_repeat_check_runs_twice_and_states_agreement(tmp_path, cluster_config):
    # b_row_bytes is what the two runs are compared on: no fit mixes (8 of TINY's 10 repeats, twice;
    # the row model is tested on this module's run and in test_notebooks)
    params = [f"--param=b_row.{k}={json.dumps(v)}" for k, v in (TINY["b_row"] | {"fit_mixes": []}).items()]
    proc = subprocess.run([*LAB, "calibrate", "--quick", "--repeat-check", "--no-progress", "--no-preflight",
                           "--notebooks", "b_row", *params, "--results", str(tmp_path),
                           "--home", str(cluster_config.lab_home)], capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = sorted(d for d in tmp_path.iterdir() if (d / "calibration.json").is_file())
    assert len(runs) == 2
    first, second = (json.loads((d / "calibration.json").read_text()) for d in runs)
    assert second["repeat_check"]["first_run"] == first["run_id"] and second["previous_run"] == str(runs[0])
    b_row = second["constants"]["b_row_bytes"]
    assert b_row["agreement"]["previous_run"] == first["run_id"]
    assert b_row["agreement"]["status"] in ("agree", "disagree")
    assert f"b_row_bytes: {b_row['agreement']['status']}" in proc.stdout
    comparison = Path(second["repeat_check"]["comparison"])
    rows = {r["constant"]: r for r in json.loads((comparison / "comparison.json").read_text())["constants"]}
    assert rows["b_row_bytes"]["agreement"] == b_row["agreement"]["status"]
    report = (runs[1] / "report.html").read_text()
    assert f"with run {first['run_id']}" in report and "the two runs compared" in report


# ---- your mix: priced by this module's run, no run of its own ----------------------------------
EXAMPLE = PROJECT_DIR / "datasets" / "profiles" / "example_mix.toml"


def test_the_example_mix_is_where_users_look():
    assert EXAMPLE.is_file()
    from lab.workload import load_profile

    assert load_profile("example_mix").name == "example_mix"


def test_the_mix_is_priced_in_calibration_json_and_the_conclusion(run):
    cal = run.calibration.to_json()
    mix = cal["my_mix"]
    assert mix["name"] == "example_mix" and mix["source"] == "datasets/profiles/example_mix.toml"
    assert mix["ci_low"] < mix["b_row_bytes"] < mix["ci_high"] and mix["confidence"] == "low"
    assert mix["row_model_run"] == run.run_dir.name and mix["row_model_from"] == "this run"
    tiers = cal["notebooks"]["capacity"]["values"]
    for tier, nodes in mix["nodes_disk"].items():
        assert nodes == tiers[f"nodes_needed_my_mix_{tier}"] >= 1
    conclusion = cal["notebooks"]["capacity"]["conclusion"]
    assert "example_mix" in conclusion and f"**{mix['nodes_disk']['20000000']} nodes**" in conclusion


def test_the_report_capacity_table_has_the_mix_and_cites_what_ran(run):
    cal = run.calibration.to_json()
    html = run.report_path.read_text()
    section = html[html.index("<h2>Capacity"):html.index("<h2>Evidence")]
    assert "example_mix" in section and f"{cal['my_mix']['nodes_disk']['20000000']}" in section
    assert "cpu_cost notebook of this run" not in section  # cpu_cost did not run
    assert "no CPU costs" in section and f"b_row notebook of this run ({run.run_dir.name})" in section


# ---- Ctrl-C and --resume, on a capacity-alone run that prices the mix from this module's b_row
# run (your mix, above): one small run, interrupted by a real SIGINT and resumed, no run of its own
def _interrupt_capacity_alone(results: Path, home: str) -> tuple[subprocess.CompletedProcess, Path]:
    """`lab calibrate --notebooks capacity --my-mix FILE`; SIGINT to its process group (what a
    terminal's Ctrl-C sends) once capacity is running."""
    proc = subprocess.Popen([*LAB, "calibrate", "--quick", "--no-preflight", "--no-progress", "--notebooks", "capacity",
                             "--my-mix", str(EXAMPLE), "-p", "capacity.show_progress=false",
                             "-p", "capacity.my_mix_rows=2000", "--results", str(results), "--home", home],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True,  # its own process group, as a terminal's foreground job
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    before, found = {d.name for d in results.iterdir()}, None
    deadline = time.monotonic() + 600
    try:
        while found is None and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            for d in results.iterdir():
                try:
                    cal = json.loads((d / "calibration.json").read_text()) if d.name not in before else {}
                except (OSError, ValueError):  # not written yet
                    continue
                if (cal.get("notebooks") or {}).get("capacity", {}).get("status") == "running":
                    found = d
            time.sleep(0.1)
        assert found is not None, "capacity never started"
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), found


def test_ctrl_c_before_the_environment_keeps_what_the_run_runs_with(results, cluster_config):
    """SIGINT as soon as the run folder exists (while the environment and round trip are measured,
    before any notebook): calibration.json already records the run's services and constants file,
    so --resume takes them, not whatever LAB_* says the day it resumes."""
    proc = subprocess.Popen([*LAB, "calibrate", "--quick", "--no-preflight", "--no-progress", "--notebooks", "none",
                             "--results", str(results), "--home", str(cluster_config.lab_home)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    before, found = {d.name for d in results.iterdir()}, None
    deadline = time.monotonic() + 300
    try:
        while found is None and time.monotonic() < deadline and proc.poll() is None:
            found = next((d for d in results.iterdir() if d.name not in before and (d / "calibration.json").exists()),
                         None)
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert found is not None and "Traceback" not in err, err[-3000:]
    cal = json.loads((found / "calibration.json").read_text())
    assert cal["status"] in ("interrupted", "ok"), cal["status"]  # ok: the run was quicker than the signal
    recorded = cal["environment"]["parameters"]
    assert recorded["services"]["outbox"] == "local" and recorded["constants_file"] and recorded["mode"] == "quick"


@pytest.fixture(scope="module")
def interrupted(run, results, cluster_config):
    return _interrupt_capacity_alone(results, str(cluster_config.lab_home))


def test_ctrl_c_ends_with_one_line_naming_the_notebook_and_the_folder(interrupted):
    proc, run_dir = interrupted
    assert proc.returncode == 130, (proc.stdout, proc.stderr[-3000:])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr and "Aborted!" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr
    assert lines[-1] == (f"interrupted in notebook capacity: partial results in {run_dir}; "
                         f"resume with: lab calibrate --resume {run_dir}"), proc.stderr
    assert len(lines) <= 2, proc.stderr  # the interrupted line (and at most the kernel's parting words)
    cal = json.loads((run_dir / "calibration.json").read_text())
    assert cal["status"] == "interrupted" and cal["notebooks"]["capacity"]["status"] == "interrupted"
    assert cal["environment"]["server"] and cal["measurements"]["round_trip"]
    assert cal["environment"]["parameters"]["services"]["outbox"] == "local"  # what --resume runs the rest on
    html = (run_dir / "report.html").read_text()
    top = html[:html.index("<h2>")]
    assert "INTERRUPTED" in top and "in notebook <b>capacity</b>" in top
    assert f"lab calibrate --resume {run_dir}" in top and "completed here" not in html


def test_resume_finishes_the_run_in_its_folder_and_prices_the_mix_from_the_latest_b_row(interrupted, run, results,
                                                                                         cluster_config):
    _, run_dir = interrupted
    before = set(results.iterdir())
    proc = subprocess.run([*LAB, "calibrate", "--resume", str(run_dir), "--no-preflight", "--no-progress",
                           "--home", str(cluster_config.lab_home)], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(results.iterdir()) == before  # no new run folder
    assert f"resuming run {run_dir.name}: capacity" in proc.stdout + proc.stderr
    cal = json.loads((run_dir / "calibration.json").read_text())
    assert cal["status"] == "ok" and cal["mode"] == "quick" and cal["notebooks"]["capacity"]["status"] == "ok"
    assert cal["notebooks"]["capacity"]["parameters"]["my_mix_rows"] == 2000  # the run's own parameters
    assert len(cal["resumed"]) == 1 and cal["wall_seconds"] > 0
    # capacity alone: the mix priced by the latest b_row run (this module's), which the run names
    assert cal["my_mix"]["row_model_run"] == run.run_dir.name
    assert "the latest b_row run" in cal["my_mix"]["row_model_from"]
    assert run.run_dir.name in cal["notebooks"]["capacity"]["conclusion"]
    assert "your mix example_mix" in proc.stdout  # the console names the mix and its price
    html = (run_dir / "report.html").read_text()
    assert "INTERRUPTED" not in html and "resumed" in html
    again = subprocess.run([*LAB, "calibrate", "--resume", str(run_dir), "--no-preflight"], capture_output=True,
                           text=True, cwd=ROOT, timeout=120)
    assert again.returncode == 2 and "nothing to resume" in again.stderr and "Traceback" not in again.stderr


def test_the_latency_constants_are_recommended_at_the_target_round_trip_from_a_sweep(run):
    """With a target round trip, in_limit and empty_buckets measure at 2, 3 and 4 ms through the proxy
    too; the report quotes the fitted model and its held-out check, and the IN limit proposed is
    the one the rule gives at the target."""
    cal = json.loads((run.run_dir / "calibration.json").read_text())
    for name, constant in (("in_limit", "batch_read_in_list_limit"),
                           ("empty_buckets", "history_max_empty_bucket_scan")):
        values = json.loads((run.run_dir / name / "values.json").read_text())
        sweep = values[f"{name}_rtt"]
        # the direct main curve is moved, not fitted: the proxy's hop is in the swept points only
        assert sweep["target_rtt_us"] == 1000 and sweep["model"]["rtts_us"] == [2000, 3000, 4000]
        assert set(sweep["choice_by_rtt"]) == {"0", "1000", "2000", "3000", "4000"}
        assert sweep["held_out"]["rtt_us"] == 3000
        evidence = cal["constants"][constant]["evidence"]
        assert "latency = RTT x (" in evidence and "held out RTT 3 ms" in evidence, evidence
    values = json.loads((run.run_dir / "in_limit" / "values.json").read_text())
    assert values["recommended_in_limit"] in (None, values["in_limit_rtt"]["choice_at_target"])
