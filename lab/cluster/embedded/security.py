"""Auth and TLS for the embedded node: a local CA, the node's keystore, and the lab's role.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import ipaddress
import os
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.cluster.config import DEFAULT_KEYSPACE, ClusterConfig
from lab.cluster.connection import connect
from lab.cluster.embedded.node import EmbeddedCluster
from lab.errors import ConfigError, ConnectError, InvalidRequest, LabError, NodeTimeout

TLS_DIRNAME = "tls"
CA_FILENAME = "ca.pem"
KEYSTORE_FILENAME = "node-keystore.p12"
KEYSTORE_PASSWORD_FILENAME = "keystore.password"
CERT_VALIDITY_DAYS = 365
CERT_RENEW_BEFORE_DAYS = 7
DEFAULT_ROLE = "lab"
DEFAULT_SUPERUSER = "cassandra"
DEFAULT_SUPERUSER_PASSWORD = "cassandra"  # Cassandra's built-in default, public knowledge
PASSWORD_ENV = "LAB_PASSWORD"
MONITORING_KEYSPACE = "system_views"
LOGIN_WAIT_SECONDS = 30.0
_LOGIN_RETRY_SECONDS = 1.0
PASSWORD_CHANGE_INTERVAL_SECONDS = 5.5  # Cassandra 5.0: one password change per role per 5000 ms
_PASSWORD_RATE_LIMITED = "can only be changed every"
_ROLE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,47}$")
_MASK = "***"


# ---- certificates -------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class TlsMaterial:
    """The files a TLS node and its clients need. The keystore password is masked in repr."""

    ca_file: Path
    keystore: Path
    keystore_password: str = field(repr=False)
    addresses: tuple[str, ...] = ()


def ensure_tls_material(directory: Path, addresses: tuple[str, ...] | list[str]) -> TlsMaterial:
    """Reuse the CA and keystore in ``directory`` when they cover ``addresses`` and are not
    about to expire; otherwise make new ones (a new CA too: its key was never kept)."""
    directory = Path(directory)
    addresses = tuple(addresses)
    existing = _load_material(directory)
    if existing is not None and set(addresses) <= set(existing.addresses):
        return existing
    return generate_tls_material(directory, addresses)


def generate_tls_material(directory: Path, addresses: tuple[str, ...] | list[str], *,
                          validity_days: int = CERT_VALIDITY_DAYS) -> TlsMaterial:
    """A fresh CA and a server certificate for ``addresses`` (IP SANs), written to ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    addresses = tuple(addresses)
    try:
        ips = [ipaddress.ip_address(a) for a in addresses]
    except ValueError as exc:
        raise ConfigError(f"TLS certificates are made for IP addresses: {exc}", field="addresses") from None
    now = _dt.datetime.now(_dt.UTC) - _dt.timedelta(minutes=5)  # tolerate clock skew
    until = now + _dt.timedelta(days=validity_days)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "message-store-lab local CA"),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, "message-store-lab")])
    ca_cert = (x509.CertificateBuilder()
               .subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now).not_valid_after(until)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False,
                                            encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
               .sign(ca_key, hashes.SHA256()))

    node_key = ec.generate_private_key(ec.SECP256R1())
    node_cert = (x509.CertificateBuilder()
                 .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, addresses[0]),
                                          x509.NameAttribute(NameOID.ORGANIZATION_NAME, "message-store-lab")]))
                 .issuer_name(ca_name)
                 .public_key(node_key.public_key())
                 .serial_number(x509.random_serial_number())
                 .not_valid_before(now).not_valid_after(until)
                 .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ip) for ip in ips]), critical=False)
                 .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                 .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False,
                                              content_commitment=False, data_encipherment=False,
                                              key_agreement=True, key_cert_sign=False, crl_sign=False,
                                              encipher_only=False, decipher_only=False), critical=True)
                 .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                 .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                                critical=False)
                 .sign(ca_key, hashes.SHA256()))

    password = secrets.token_urlsafe(24)
    # PBES2/AES-256 with an HMAC-SHA256 MAC: what JDK 17's PKCS12 keystore reads
    encryption = (serialization.PrivateFormat.PKCS12.encryption_builder()
                  .kdf_rounds(50_000)
                  .key_cert_algorithm(pkcs12.PBES.PBESv2SHA256AndAES256CBC)
                  .hmac_hash(hashes.SHA256())
                  .build(password.encode()))
    keystore = pkcs12.serialize_key_and_certificates(b"node", node_key, node_cert, [ca_cert], encryption)

    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    _write_private(directory / KEYSTORE_PASSWORD_FILENAME, password.encode())
    _write_private(directory / KEYSTORE_FILENAME, keystore)
    (directory / CA_FILENAME).write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    return TlsMaterial(ca_file=directory / CA_FILENAME, keystore=directory / KEYSTORE_FILENAME,
                       keystore_password=password, addresses=addresses)


def _load_material(directory: Path) -> TlsMaterial | None:
    """The material in ``directory`` if complete, readable and valid for a while longer."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import pkcs12

    paths = [directory / n for n in (CA_FILENAME, KEYSTORE_FILENAME, KEYSTORE_PASSWORD_FILENAME)]
    if not all(p.is_file() for p in paths):
        return None
    password = paths[2].read_text().strip()
    try:
        _, cert, _ = pkcs12.load_key_and_certificates(paths[1].read_bytes(), password.encode())
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return None
    renew_at = _dt.datetime.now(_dt.UTC) + _dt.timedelta(days=CERT_RENEW_BEFORE_DAYS)
    if cert is None or cert.not_valid_after_utc < renew_at:
        return None
    addresses = tuple(str(ip) for ip in sans.get_values_for_type(x509.IPAddress))
    return TlsMaterial(ca_file=paths[0], keystore=paths[1], keystore_password=password, addresses=addresses)


def _write_private(path: Path, data: bytes) -> None:
    """Write a file only its owner can read (created 0600, never world-readable for an instant)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


# ---- roles --------------------------------------------------------------------------------
def create_role(connection: Any, name: str, password: str, *, keyspace: str | None = None,
                create_keyspaces: bool = True) -> None:
    """Create (or reset the password of) a login role; grant it the lab keyspace.

    ``connection`` must be logged in as a superuser. ``create_keyspaces`` grants CREATE ON
    ALL KEYSPACES: the creator of a keyspace holds every permission on it, which the lab's
    per-test keyspaces need. ``keyspace``, when it exists, is granted in full; when missing it
    is left for the role to create (or, without ``create_keyspaces``, created here with the
    connection's replication). SELECT on ``system_views`` lets the admin adapter read server
    counters. No superuser rights. The password is never logged nor kept: errors come back
    with it masked.
    """
    if not _ROLE_RE.match(name or ""):
        raise ConfigError(f"role name {name!r} is not a plain CQL identifier "
                          "(letters, digits, underscores; starts with a letter)", field="role")
    if not password:
        raise ConfigError("the role's password is empty", field="password")
    literal = "'" + password.replace("'", "''") + "'"
    # CREATE ROLE IF NOT EXISTS then ALTER would trip Cassandra 5.0's limit of one password
    # change per role every few seconds: look first. LIST ROLES works on Scylla too.
    exists = any(row[0] == name for row in connection.execute("LIST ROLES"))
    verb = "ALTER" if exists else "CREATE"  # an existing role takes the password given now
    for attempt in range(2):
        try:
            with _masked(password):
                connection.execute(f"{verb} ROLE {name} WITH PASSWORD = {literal} AND LOGIN = true")
            break
        except LabError as exc:  # the role was (re)set a moment ago: wait out the limit once
            if attempt or _PASSWORD_RATE_LIMITED not in str(exc):
                raise
            time.sleep(PASSWORD_CHANGE_INTERVAL_SECONDS)
    if create_keyspaces:
        connection.execute(f"GRANT CREATE ON ALL KEYSPACES TO {name}")
    # the Cassandra admin adapter reads per-table counters from system_views (absent on Scylla)
    with contextlib.suppress(InvalidRequest):
        connection.execute(f"GRANT SELECT ON KEYSPACE {MONITORING_KEYSPACE} TO {name}")
    if keyspace is None:
        return
    exists = connection.execute("SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = %s",
                                (keyspace,)).one() is not None
    if not exists and create_keyspaces:
        return  # the role will create it, and a keyspace's creator holds every permission on it
    if not exists:
        connection.create_keyspace(keyspace)
    connection.execute(f"GRANT ALL PERMISSIONS ON KEYSPACE {keyspace} TO {name}")


@contextlib.contextmanager
def _masked(secret: str) -> Iterator[None]:
    """Re-raise a LabError with ``secret`` masked in its message and facts, and without its
    cause (the driver's exception text may quote the statement)."""
    try:
        yield
    except LabError as exc:
        facts = {k: (v.replace(secret, _MASK) if isinstance(v, str) else v) for k, v in exc.facts.items()}
        raise type(exc)(str(exc).replace(secret, _MASK), **facts) from None


# ---- a secure embedded node ----------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class SecureNode:
    """What a client needs to reach a secure embedded node (no password: that is the caller's)."""

    state: Any  # lab.cluster.embedded.node.ClusterState
    ca_file: Path
    role: str
    keyspace: str


def start_secure(options: Any, *, role: str = DEFAULT_ROLE, password: str,
                 keyspace: str = DEFAULT_KEYSPACE,
                 superuser_password: str = DEFAULT_SUPERUSER_PASSWORD) -> SecureNode:
    """Start (or reuse) the embedded node with auth and TLS, certificates in ``<home>/tls``,
    then create the login role ``role`` with ``password`` and grant it ``keyspace``."""

    if not password:
        raise ConfigError(f"a secure node needs the lab role's password: set {PASSWORD_ENV}", field="password")
    if not _ROLE_RE.match(role or ""):
        raise ConfigError(f"role name {role!r} is not a plain CQL identifier", field="role")
    home = Path(options.home).resolve()
    options, material = with_local_tls(dataclasses.replace(options, auth=True))
    cluster = EmbeddedCluster(options)
    state = cluster.start()
    if state.reused and not (state.auth and state.tls):
        raise ConfigError("the running embedded node was started without auth and TLS: "
                          "`lab node stop` it first, then start it with --secure", field="secure")
    admin = ClusterConfig(contact_points=state.contact_points, port=state.nodes[0].native_port,
                          username=DEFAULT_SUPERUSER, password=superuser_password,
                          tls_ca_file=material.ca_file, keyspace=keyspace, lab_home=home,
                          read_consistency="ONE", write_consistency="ONE")
    with wait_for_login(admin) as conn:
        create_role(conn, role, password, keyspace=keyspace)
    return SecureNode(state=state, ca_file=material.ca_file, role=role, keyspace=keyspace)


def with_local_tls(options: Any) -> tuple[Any, TlsMaterial]:
    """``options`` (lab.cluster.embedded.node.NodeOptions) with TLS on, from the certificates in ``<home>/tls``
    (made now if missing or not covering the nodes' addresses)."""

    # a running cluster will be reused as it is: never replace the CA it was started with
    running = EmbeddedCluster(options).running()
    addresses = [n.address for n in running] or options.addresses()
    material = ensure_tls_material(Path(options.home).resolve() / TLS_DIRNAME, addresses)
    return dataclasses.replace(options, tls_keystore=material.keystore,
                               tls_keystore_password=material.keystore_password), material


def wait_for_login(config: ClusterConfig, timeout_seconds: float = LOGIN_WAIT_SECONDS) -> Any:
    """A Connection as soon as ``config`` can log in. A fresh node creates its default
    superuser a moment after CQL opens, so early logins are refused for a while."""

    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            return connect(config)
        except ConnectError as exc:
            if time.monotonic() >= deadline:
                raise NodeTimeout(f"no login as {config.username!r} within {timeout_seconds:.0f}s: {exc}",
                                  username=config.username) from None
            time.sleep(_LOGIN_RETRY_SECONDS)
