"""A fresh clone's `make git-filters` leaves git's stat cache fresh: a run's environment
(lab.results.environment.git_dirty, a `git status` that must not write the index) then puts
no notebook through the clean filter. Before, in a fresh clone every file was as new as the
index, each run's `git status` ran nbstripout on every notebook, hit its 10 s timeout and
recorded git_dirty as unknown."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lab.results.environment import git_dirty

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("make") is None, reason="needs git and make")
@pytest.mark.spawns
def test_a_fresh_clone_s_git_status_filters_no_notebook(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    index = clone / ".git" / "index"
    notebooks = subprocess.run(["git", "ls-files", "*.ipynb"], cwd=clone, capture_output=True, text=True,
                               check=True).stdout.split()
    assert notebooks
    stamp = index.stat().st_mtime_ns
    for nb in notebooks:  # a fresh checkout: files as new as the index ("racily clean")
        os.utime(clone / nb, ns=(stamp, stamp))
    subprocess.run(["make", "-s", "git-filters", f"BIN={Path(sys.executable).parent}", f"STAMP={index}"],
                   cwd=clone, check=True, capture_output=True)
    calls = tmp_path / "filter-calls"
    subprocess.run(["git", "config", "filter.nbstripout.clean", f"sh -c 'echo x >> {calls}; cat'"], cwd=clone,
                   check=True)
    assert git_dirty(clone) is False
    assert not calls.exists(), calls.read_text()  # no notebook went through the filter
