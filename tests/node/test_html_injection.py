"""Every HTML page the lab writes, opened in headless Chromium with hostile strings in everything
a user controls (a profile's name, paths, notebook parameters, run folder names): no script
runs and no element is injected."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lab.calibration.capacity_model.row_model import REGRESSORS, fit_row_model

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
MARK = "PWNED"
# a script, an element that runs code on error, a backtick that would close a code span, and a
# plain element: none may reach the DOM as markup
SCRIPT = f"x`<script>document.title='{MARK}'</script>"
IMG = f"\"><img id=injected src=x onerror=\"document.title='{MARK}'\">"
PLAIN = "<i id=injected2>i</i>"
HOSTILE = SCRIPT + IMG + PLAIN
# a folder name cannot hold "/": the same payloads without one
HOSTILE_DIR = f"run`<svg id=injected3 onload=\"document.title='{MARK}'\">" + "<b id=injected4>b<b>"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (make test installs it)")


def run_lab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)


def dom_of(page: Path, user_data: Path) -> str:
    proc = subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={user_data}", "--virtual-time-budget=5000", "--dump-dom",
                           page.as_uri()], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def assert_inert(page: Path, tmp_path: Path, *, shown: str) -> None:
    html = page.read_text()
    assert shown in re.sub(r"<[^>]+>", "", html).replace("&amp;", "&") or "&lt;" in html, page  # it is on the page
    dom = dom_of(page, tmp_path / f"ud-{page.stem}")
    title = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert title is None or title.group(1).strip() != MARK, f"a script ran in {page.name}"
    injected = re.findall(r"<[a-z]+[^>]*\bid=\"?injected\d?", dom)
    assert not injected, f"{page.name}: injected elements {injected[:3]}"
    assert not re.search(r"<[a-z]+[^>]*\bon(error|load)=", dom), f"{page.name}: an event handler attribute"


def _b_row_run(folder: Path) -> Path:
    """A b_row run's values.json with a row model (synthetic observations), to price the mix."""
    rng = np.random.default_rng(7)
    rows = []
    for mix, (pay, meta, thumb) in {"text_only": (90, 0, 0), "text_long": (970, 0, 0), "files_audio": (16, 80, 0),
                                    "photos_small_thumbs": (345, 105, 1480), "chat_mix": (280, 20, 900)}.items():
        for r in range(3):
            x = np.array([pay, meta, thumb]) * rng.uniform(0.95, 1.05, 3)
            rows.append({"mix": mix, "repeat": r, **dict(zip(REGRESSORS, x)),
                         "b_row_bytes": 130 + x @ np.array([1.03, 0.9, 1.02]) + rng.normal(0, 2.0)})
    model = fit_row_model(pd.DataFrame(rows), held_out="chat_mix")
    (folder / "b_row").mkdir(parents=True)
    path = folder / "b_row" / "values.json"
    path.write_text(json.dumps({"b_row_bytes": 1200.0, "preset": "full", "row_model": model.to_json()}))
    return path


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    results = base / "results"
    _b_row_run(results / HOSTILE_DIR)
    profile = base / "mix.toml"
    profile.write_text(f"name = {json.dumps(HOSTILE)}\ndescription = {json.dumps(HOSTILE)}\n"
                       "[messages]\ntext = 0.9\nimage = 0.1\n")
    proc = run_lab("calibrate", "--quick", "--notebooks", "capacity", "--my-mix", str(profile), "--no-preflight",
                   "--no-progress", "-p", f"capacity.cpu_values={base / HOSTILE_DIR / 'values.json'}",
                   "--results", str(results))
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = max((p for p in results.iterdir() if (p / "calibration.json").is_file()), key=lambda p: p.stat().st_mtime)
    return base, results, run


def test_the_capacity_notebook_page_shows_hostile_names_and_paths_as_text(hostile_run, tmp_path):
    _, _, run = hostile_run
    page = run / "capacity" / "capacity.html"
    assert "&lt;script&gt;" in page.read_text()
    assert_inert(page, tmp_path, shown="<script>")


def test_the_report_shows_them_as_text(hostile_run, tmp_path):
    _, _, run = hostile_run
    assert_inert(run / "report.html", tmp_path, shown="<script>")


def test_the_compare_page_shows_hostile_run_folders_as_text(hostile_run, tmp_path):
    base, results, run = hostile_run
    other = results / (HOSTILE_DIR + "-b")
    _b_row_run(other)
    proc = run_lab("compare", str(results / HOSTILE_DIR), str(other), "--results", str(base / "cmp"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    pages = list((base / "cmp").glob("compare-*/index.html"))
    assert len(pages) == 1
    assert_inert(pages[0], tmp_path, shown="<svg")
