"""Maven resolution of a Java server's classpath: artifacts plus their runtime dependencies.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template

from lab.errors import MavenError
from lab.measure import Stopwatch

TEMPLATES = Path(__file__).with_name("templates")
MARKER = ".complete"
_PART = r"[A-Za-z0-9_.\-]+"
_COORDINATE_RE = re.compile(rf"^({_PART}):({_PART}):({_PART})$")
_UNREACHABLE_RE = re.compile(r"UnknownHost|Could not transfer|Connection refused|timed out|Network is unreachable")
_OUTPUT_TAIL_CHARS = 2000


@dataclass(frozen=True, kw_only=True)
class Coordinate:
    """One Maven artifact, ``group:artifact:version``."""

    group_id: str
    artifact_id: str
    version: str

    @classmethod
    def parse(cls, text: str) -> Coordinate:
        m = _COORDINATE_RE.match(text.strip()) if isinstance(text, str) else None
        if m is None:
            raise MavenError(f"{text!r} is not a Maven coordinate group:artifact:version "
                             "(e.g. org.apache.cassandra:cassandra-all:5.0.9)", coordinate=text)
        return cls(group_id=m.group(1), artifact_id=m.group(2), version=m.group(3))

    def __str__(self) -> str:
        return f"{self.group_id}:{self.artifact_id}:{self.version}"


def is_resolved(target: Path) -> bool:
    return (Path(target) / MARKER).exists()


def render_pom(coordinates: Sequence[Coordinate]) -> str:
    dependency = Template((TEMPLATES / "maven-dependency.xml").read_text())
    blocks = "".join(dependency.substitute(group_id=c.group_id, artifact_id=c.artifact_id, version=c.version)
                     for c in coordinates)
    return Template((TEMPLATES / "maven-pom.xml").read_text()).substitute(dependencies=blocks.rstrip("\n"))


def resolve(coordinates: str | Sequence[str], target: Path | str, *,
            local_repository: Path | str | None = None) -> float:
    """Copy the artifacts and their runtime dependencies into ``target`` (once).

    ``coordinates``: one ``group:artifact:version`` or several. ``local_repository`` is Maven's
    download cache (default: Maven's own, ``~/.m2``). Returns the seconds spent, 0.0 when
    ``target`` was complete already. Raises :class:`MavenError` naming the coordinates when
    Maven is missing, Central is unreachable, or an artifact does not exist.
    """
    wanted = [Coordinate.parse(c) for c in ([coordinates] if isinstance(coordinates, str) else coordinates)]
    if not wanted:
        raise MavenError("no Maven coordinates to resolve", coordinate=None)
    target = Path(target)
    if is_resolved(target):
        return 0.0
    mvn = shutil.which("mvn")
    names = ", ".join(map(str, wanted))
    if mvn is None:
        raise MavenError(f"Maven (mvn) is not on PATH: install Maven to resolve {names}", coordinate=names)
    target.mkdir(parents=True, exist_ok=True)
    watch = Stopwatch()
    with tempfile.TemporaryDirectory(prefix="lab-mvn-") as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_text(render_pom(wanted))
        cmd = [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={target}"]
        if local_repository is not None:
            cmd.append(f"-Dmaven.repo.local={local_repository}")
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        out = (proc.stdout + proc.stderr)[-_OUTPUT_TAIL_CHARS:]
        why = "Maven Central is unreachable" if _UNREACHABLE_RE.search(out) else "Maven could not resolve the jars"
        raise MavenError(f"{why} ({names}):\n{out}", command=" ".join(cmd), coordinate=names)
    missing = [str(c) for c in wanted if not any(target.glob(f"{c.artifact_id}-*.jar"))]
    if missing:
        raise MavenError(f"Maven finished but no jar of {', '.join(missing)} is in {target}", coordinate=names)
    (target / MARKER).write_text("\n".join(map(str, wanted)) + "\n")
    return watch.seconds()
