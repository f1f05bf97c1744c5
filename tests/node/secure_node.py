"""A secure embedded node of a test's own: `lab node start --secure` (TLS, PasswordAuthenticator,
a login role without superuser rights) in a fresh home beside the shared node, reusing its jars;
stopped by its recorded PID afterwards. tests/node/test_security.py checks the node itself;
tests/node/test_head_groups.py needs it because Cassandra's guardrails spare superusers (and
with the shared node's AllowAllAuthenticator every client is one)."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from awkward_password import PASSWORD

from lab.cluster.config import ClusterConfig
from lab.cluster.embedded.node import EmbeddedCluster, NodeOptions
from lab.cluster.embedded.security import CA_FILENAME, TLS_DIRNAME

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SecureNode:
    home: Path
    address: str
    jmx_port: int
    role: str
    cluster: EmbeddedCluster
    start_output: str  # what `lab node start` printed (stdout and stderr)

    @property
    def ca(self) -> Path:
        return self.home / TLS_DIRNAME / CA_FILENAME

    def config(self, **kw) -> ClusterConfig:
        """A config that logs in as the node's role over TLS; ``kw`` overrides (None: left out)."""
        values = dict(contact_points=(self.address,), username=self.role, password=PASSWORD, tls_ca_file=self.ca,
                      lab_home=self.home, jmx_port=self.jmx_port, connect_timeout_seconds=5.0)
        values.update(kw)
        return ClusterConfig(**{k: v for k, v in values.items() if v is not None})


def env_without_lab(**extra: str) -> dict[str, str]:
    """This process's environment without its ``LAB_*`` variables, plus ``extra``."""
    return {k: v for k, v in os.environ.items() if not k.startswith("LAB_")} | extra


@contextlib.contextmanager
def secure_node(folder: Path, lab_home: Path, *, address: str, jmx_port: int, role: str,
                throwaway: bool = False) -> Iterator[SecureNode]:
    """Start the node in ``folder``/home (the shared home's jars linked in), yield it, stop it."""
    jars = EmbeddedCluster(NodeOptions(home=lab_home)).lib_dir
    home = folder / "home"
    (home / "jars" / jars.parent.name).mkdir(parents=True)
    (home / "jars" / jars.parent.name / "lib").symlink_to(jars)
    cluster = EmbeddedCluster(NodeOptions(home=home))
    try:
        out = subprocess.run([sys.executable, "-m", "lab.cli", "node", "start", "--secure",
                              *(["--throwaway"] if throwaway else []), "--role", role, "--home", str(home),
                              "--address", address, "--jmx-port", str(jmx_port), "--no-broker", "--no-redis"],
                             capture_output=True, text=True, cwd=ROOT, timeout=300,
                             env=env_without_lab(LAB_PASSWORD=PASSWORD))
        assert out.returncode == 0, out.stderr[-3000:]
        yield SecureNode(home=home, address=address, jmx_port=jmx_port, role=role, cluster=cluster,
                         start_output=out.stdout + out.stderr)
    finally:
        cluster.stop()
