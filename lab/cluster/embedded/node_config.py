"""One embedded node's configuration files, rendered from ``templates/``.

``cassandra.yaml`` is ``templates/cassandra.yaml`` with the node's addresses, token and
folders filled in, plus one authentication fragment (``cassandra-auth-password.yaml`` or
``cassandra-auth-none.yaml``) and, with TLS, ``cassandra-client-tls.yaml``. ``logback.xml``
sends the node's log to ``logs/system.log``; ``logback-quiet.xml`` keeps nodetool to errors.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

TEMPLATES = Path(__file__).with_name("templates")
STORAGE_PORT = 7000
NATIVE_PORT = 9042
TOKEN_SPAN = 2**64
_PKCS12_SUFFIXES = (".p12", ".pfx")


@dataclass(frozen=True, kw_only=True)
class NodeConfig:
    """What differs between the nodes of one cluster, and between clusters."""

    address: str
    index: int
    addresses: tuple[str, ...]
    auth: bool = False
    tls_keystore: Path | None = None
    tls_keystore_password: str | None = field(default=None, repr=False)

    @property
    def initial_token(self) -> int:
        return -(2**63) + self.index * (TOKEN_SPAN // len(self.addresses))


def template(name: str) -> Template:
    return Template((TEMPLATES / name).read_text())


def render_cassandra_yaml(node: NodeConfig, node_dir: Path) -> str:
    authentication = (TEMPLATES / ("cassandra-auth-password.yaml" if node.auth else "cassandra-auth-none.yaml")).read_text()
    client_encryption = ""
    if node.tls_keystore is not None:
        keystore = Path(node.tls_keystore).resolve()
        # the JDK's default JKS type reads PKCS12 only in compatibility mode: say what it is
        store_type = "PKCS12" if keystore.suffix.lower() in _PKCS12_SUFFIXES else "JKS"
        client_encryption = template("cassandra-client-tls.yaml").substitute(
            keystore=keystore, keystore_password=json.dumps(node.tls_keystore_password or ""), store_type=store_type)
    return template("cassandra.yaml").substitute(
        initial_token=node.initial_token, seed=node.addresses[0], storage_port=STORAGE_PORT,
        native_port=NATIVE_PORT, address=node.address, auto_bootstrap="true" if node.index == 0 else "false",
        data_dir=node_dir / "data", authentication=authentication, client_encryption=client_encryption)


def render_logback(log: Path) -> str:
    return template("logback.xml").substitute(log=log)


def quiet_logback() -> str:
    return (TEMPLATES / "logback-quiet.xml").read_text()


def write_node_config(node: NodeConfig, node_dir: Path) -> None:
    """``conf/cassandra.yaml`` and ``conf/logback.xml`` of the node in ``node_dir``."""
    conf = node_dir / "conf"
    # it may hold the keystore password: readable by its owner only, from the first byte
    yaml_path = conf / "cassandra.yaml"
    yaml_path.unlink(missing_ok=True)
    with os.fdopen(os.open(yaml_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write(render_cassandra_yaml(node, node_dir))
    (conf / "logback.xml").write_text(render_logback(node_dir / "logs" / "system.log"))
