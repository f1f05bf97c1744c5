"""`lab compare` on real load runs: its significance test does not call two runs of one plan,
side by side, different ("no difference"); the same run slowed down is found slower, in words; a
run compared with itself is a warning; the page reads at 1,280 px in headless Chromium.

The runs are real `lab load` runs on the node (short, low rate). The slowed run is the first
run with every recorded latency multiplied by :data:`SLOWDOWN` (its HDR interval logs, totals
and summary rewritten), a difference whose size is known."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lab.load.runner import LoadOptions, run_load
from lab.load.verdict import Limits
from lab.measure.hdr import HIGHEST_US, decode, encode, new_histogram, summarize_histogram
from lab.results.scratch import scratch_keyspace

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
SLOWDOWN = 4.0
# the machine check off: lab compare refuses runs of unlike verdicts, and other work on a shared machine
# (its cores busy at 85 % or more) turned both runs machine-bound; side by side, both saw that machine
PLAN = {"profile": "chat", "rate": 20.0, "duration_seconds": 25.0, "warmup_seconds": 3.0, "processes": 1,
        "seed_size": "tiny", "audit": False, "limits": Limits(max_machine_cpu_percent=100.0)}


def _lab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env=dict(os.environ))


@pytest.fixture(scope="module")
def two_runs(cluster_config, connection, tmp_path_factory):
    """Two runs of the same plan at the same time, each from the same start: a keyspace of its
    own. One after the other, the runs differed for real whenever the shared machine's load
    changed between them (a fresh-clone CI at load average 10-13: B 2.7x slower in 5 of 6 tests),
    and back to back in one keyspace the first was slower (a cold start) or the second's reacts
    were (the first run's reactions still there). Run side by side, both see the same machine, as
    the guide's interleaved ratios do, and the same node, cold or warm: a cold start falls on both
    at once (it once took a throwaway run of the plan before them, when they ran one after the
    other); the plan's 3 s warmup keeps its first seconds out of both windows. And each call is
    due at a point of its slot drawn per call (lab.load.pacing): with one fixed phase per user,
    whichever users' calls met in time met on every call, and the rare operations carried an
    offset of their own for the whole run (react found 1.4-2.0x apart in 3 of 20 side-by-side
    pairs and in 2 of 9 whole-suite runs, each time in react)."""
    from concurrent.futures import ThreadPoolExecutor

    results = tmp_path_factory.mktemp("results")
    states = []

    def load(name: str, plan: dict, folder: Path):
        with scratch_keyspace(connection, name, create=False) as keyspace:
            result = run_load(cluster_config.replace(keyspace=keyspace), LoadOptions(results=folder, **plan))
        states.append(result.state_root)
        return result

    with ThreadPoolExecutor(2) as pool:  # run_load leaves signal handlers to the main thread
        futures = [pool.submit(load, "cmptest", PLAN, results) for _ in range(2)]
        out = [f.result() for f in futures]
    yield [r.load_dir.parent for r in sorted(out, key=lambda r: r.load_dir.parent.name)]
    for state in states:
        shutil.rmtree(state, ignore_errors=True)


def _scaled(hist, factor: float):
    """``hist`` with every value times ``factor``: only the non-empty buckets are visited (hdrh's
    recorded iterator walks every bucket in Python, minutes for a run's intervals on a busy box)."""
    out = new_histogram()
    counts = np.ctypeslib.as_array(hist.counts)[: hist.counts_len]
    for index in np.flatnonzero(counts):
        value = hist.get_highest_equivalent_value(hist.get_value_from_index(int(index)))
        out.record_value(min(int(value * factor), HIGHEST_US), int(counts[index]))
    return out


def _slowed_copy(run: Path, dest: Path, factor: float) -> Path:
    """``run`` with every latency in its interval logs, totals and summary times ``factor``."""
    shutil.copytree(run, dest)
    load = dest / "load"
    for log in (load / "hdr").glob("*.hlog"):
        lines = []
        for line in log.read_text().splitlines():
            if line.startswith("Tag="):
                head, payload = line.rsplit(",", 1)
                tag, start, length, _max = head.split(",")
                hist = _scaled(decode(payload), factor)
                line = f"{tag},{start},{length},{hist.get_max_value() / 1000:.3f},{encode(hist)}"
            lines.append(line)
        log.write_text("\n".join(lines) + "\n")
    summary = json.loads((load / "summary.json").read_text())
    for path in (load / "totals").glob("*.json"):
        totals = json.loads(path.read_text())
        for op, stats in totals["totals"].items():
            for kind in ("service", "corrected"):
                hist = _scaled(decode(stats[kind]), factor)
                stats[kind] = encode(hist)
                entry = summary["operations"].get(op)
                if entry is not None and f"{kind}_us" in entry:
                    entry[f"{kind}_us"] = summarize_histogram(hist).to_json()
        path.write_text(json.dumps(totals))
    (load / "summary.json").write_text(json.dumps(summary))
    return dest


def test_two_runs_of_one_plan_are_no_difference(two_runs, tmp_path):
    """At a family-wise level of 1e-4 (Holm): runs of one plan are judged different by chance in at
    most 1 of 10,000 runs; at the default 0.05 they would be in up to 5%."""
    a, b = two_runs
    proc = _lab("compare", str(a), str(b), "--results", str(tmp_path), "--alpha", "0.0001")
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / f"compare-{a.name}-{b.name}" / "comparison.json").read_text())
    assert data["alpha"] == 0.0001 and "alpha 0.0001" in proc.stdout
    tested = [t for r in data["operations"] for t in r["tests"].values() if t["p_value"] is not None]
    assert tested, proc.stdout  # at least the frequent operations had enough intervals for a test
    assert not any(t["significant"] for t in tested), proc.stdout
    assert "no difference found" in proc.stdout and "SIGNIFICANT" not in proc.stdout
    assert "B slower by" not in proc.stdout and "B faster by" not in proc.stdout
    assert re.search(r"achieved rate", proc.stdout) and "corrected" in proc.stdout


@pytest.fixture(scope="module")
def slowed(two_runs, tmp_path_factory):
    """The first run against its slowed copy: the CLI's result and the comparison's folder."""
    a = two_runs[0]
    tmp = tmp_path_factory.mktemp("slowed")
    slow = _slowed_copy(a, tmp / f"{a.name}-slowed", SLOWDOWN)
    proc = _lab("compare", str(a), str(slow), "--results", str(tmp))
    return proc, tmp / f"compare-{a.name}-{slow.name}"


def test_a_slowed_run_is_found_slower_in_words(slowed):
    proc, folder = slowed
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((folder / "comparison.json").read_text())
    tests = [t for r in data["operations"] for t in r["tests"].values()]
    assert all(t["ratio_b_over_a"] == pytest.approx(SLOWDOWN, rel=0.05) for t in tests if t["ratio_b_over_a"])
    # every test made either finds B slower or has too wide an interval to say; the frequent
    # operations find it (which ones depends on how much this run's intervals drifted)
    found = [t for t in tests if t["significant"]]
    assert found and all(t["verdict"].startswith("B slower by 300% (4.0x)") for t in found), proc.stdout
    assert "B faster" not in proc.stdout and "verdict: B differs in" in proc.stdout


def test_a_run_compared_with_itself_is_a_warning(two_runs, tmp_path):
    a = two_runs[0]
    proc = _lab("compare", str(a), str(a), "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "warning: A and B are the same run" in proc.stdout + proc.stderr


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (make test installs it)")
def test_the_comparison_page_reads_at_1280_px(slowed, tmp_path):
    """No horizontal scroll; every number on one line (no number broken mid-digit), every name
    broken at an underscore if at all (not "backfill_s1_grou p"); one unit per table, said in its
    heading; no empty section."""
    proc, folder = slowed
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = folder / "index.html"
    html = page.read_text()
    probe = page.with_name("probe.html")
    probe.write_text(html.replace("</body>", """<script>window.addEventListener('load',()=>{
      const broken=[];
      for (const td of document.querySelectorAll('td.num, td.name, td:first-child')) {
        const walker=document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
        for (let n=walker.nextNode(); n; n=walker.nextNode()) {
          const r=document.createRange(); r.selectNodeContents(n);
          if (n.textContent.trim() && r.getClientRects().length>1) broken.push(n.textContent.trim());
        }
      }
      const h2=[...document.querySelectorAll('h2')].map(h=>h.textContent);
      const empty=[...document.querySelectorAll('h2')].filter(h=>!h.nextElementSibling||h.nextElementSibling.tagName==='H2').map(h=>h.textContent);
      document.body.setAttribute('data-width', document.documentElement.scrollWidth);
      document.body.setAttribute('data-broken', broken.join('|'));
      document.body.setAttribute('data-h2', h2.join('|'));
      document.body.setAttribute('data-empty', empty.join('|'));
    });</script></body>"""))
    proc = subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'ud'}", "--virtual-time-budget=10000",
                           "--window-size=1280,2000", "--dump-dom", probe.as_uri()],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert int(re.search(r'data-width="(\d+)"', dom).group(1)) <= 1280
    assert re.search(r'data-broken="([^"]*)"', dom).group(1) == "", "numbers or names wrapped mid-word"
    assert re.search(r'data-empty="([^"]*)"', dom).group(1) == "", "a section heading with nothing under it"
    h2 = re.search(r'data-h2="([^"]*)"', dom).group(1).split("|")
    assert not any("constants" in h.lower() for h in h2)  # a load run has none: no header for them
    for h in h2:
        if "latency" in h.lower() or "time" in h.lower():
            assert "(ms)" in h and "µs" not in h, h
    assert "B slower by 300%" in html
