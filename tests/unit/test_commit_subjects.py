"""Every commit after a fixed base has a subject of <= 72 characters and, when it has a body, a
blank second line (the house rule in DEVELOPMENT.md). Reads `git log`; skips outside a checkout."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE = "2e30ea8"  # main's head when the check was added: older subjects are history
SUBJECT_MAX = 72
SEP = "\x1e"

pytestmark = pytest.mark.spawns  # runs git: `make unit` deselects it, `make test` runs it


def commit_messages() -> list[tuple[str, str]]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no history to check")
    probe = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{BASE}^{{commit}}"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"base revision {BASE} not in this clone's history (shallow clone?)")
    out = subprocess.run(["git", "-C", str(ROOT), "log", "--no-merges", f"--format=%h%n%B{SEP}",
                          f"{BASE}..HEAD"], capture_output=True, text=True, check=True).stdout
    messages = []
    for chunk in out.split(SEP):
        chunk = chunk.strip("\n")
        if chunk:
            sha, _, message = chunk.partition("\n")
            messages.append((sha, message))
    return messages


def message_problems(message: str) -> list[str]:
    lines = message.rstrip("\n").split("\n")
    problems = []
    if len(lines[0]) > SUBJECT_MAX:
        problems.append(f"subject is {len(lines[0])} characters (> {SUBJECT_MAX})")
    if len(lines) > 1 and lines[1].strip():
        problems.append("second line is not blank")
    return problems


def test_message_problems_rules():
    assert message_problems("Short subject\n\nBody.\n") == []
    assert message_problems("x" * 73) == ["subject is 73 characters (> 72)"]
    assert message_problems("Subject\nbody glued on") == ["second line is not blank"]


def test_commit_subjects_after_base():
    bad = [f"{sha}: {p}" for sha, message in commit_messages() for p in message_problems(message)]
    assert not bad, "commit messages break the rule:\n" + "\n".join(bad)
