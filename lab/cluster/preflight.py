"""``lab preflight``: before a long run, check what would stop it, and say how to fix each.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import contextlib
import json
import shutil
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from lab.cluster.admin import admin_for
from lab.cluster.config import ClusterConfig
from lab.cluster.connection import connect
from lab.cluster.embedded.node import EmbeddedCluster, NodeOptions
from lab.errors import LabError, LwtUnavailable

STATUSES = ("ok", "warn", "fail")
MIN_FREE_DISK_BYTES = 2 * 10**9      # below: a calibration run cannot finish its compactions
WARN_FREE_DISK_BYTES = 10 * 10**9
_SCRATCH_PREFIX = "lab_preflight_"
_TABLETS_SETTINGS = ("tablets_mode_for_new_keyspaces", "enable_tablets")


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    status: str   # ok | warn | fail
    value: str
    fix: str = ""


@dataclass(frozen=True, kw_only=True)
class PreflightReport:
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(c.status != "fail" for c in self.checks)

    @property
    def failed(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status == "fail")

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [asdict(c) for c in self.checks]}

    def to_text(self) -> str:
        width = max(len(c.name) for c in self.checks)
        lines = []
        for c in self.checks:
            lines.append(f"{c.status.upper():<4}  {c.name:<{width}}  {c.value}")
            if c.fix and c.status != "ok":
                lines.append(f"{'':<4}  {'':<{width}}  fix: {c.fix}")
        lines.append("preflight: " + ("ok" if self.ok else f"{len(self.failed)} check(s) failed"))
        return "\n".join(lines) + "\n"


def run_preflight(config: ClusterConfig, *, in_list_limit: int | None = None,
                  connection: Any = None, admin: Any = None) -> PreflightReport:
    """Every check against the cluster of ``config``. ``in_list_limit``: the lab's largest IN
    list (appendix B ``batch_read_in_list_limit``), compared with the server's limit."""

    with contextlib.ExitStack() as stack:
        if connection is None:
            try:
                connection = connect(config)
            except LabError as exc:
                return PreflightReport(checks=(Check(name="connect", status="fail", value=str(exc),
                                                     fix="check contact points, port, credentials and TLS "
                                                         "(`lab info` shows what the lab uses)"),))
            stack.callback(connection.close)
        if admin is None:
            admin = admin_for(config, connection)
            stack.callback(admin.close)
        checks: list[Check] = []
        for step in (_server, _nodes, _tablets, _lwt, _admin_endpoints, _in_limit, _replication,
                     _security, _free_disk):
            checks += _guarded(step, config, connection, admin, in_list_limit)
        return PreflightReport(checks=tuple(checks))


def _guarded(step: Callable[..., list[Check]], *args: Any) -> list[Check]:
    """A check that fails unexpectedly is a failed check, not a crashed preflight."""
    try:
        return step(*args)
    except LabError as exc:
        return [Check(name=step.__name__.strip("_").replace("_", " "), status="fail", value=str(exc)[:500])]


# ---- the checks ---------------------------------------------------------------------------
def _server(config: ClusterConfig, conn: Any, admin: Any, _limit: Any) -> list[Check]:
    kind = conn.server_kind()
    value = f"{kind} {conn.server_version()}; dialect {conn.dialect.name}; admin {admin.name}"
    if conn.dialect.name != kind or admin.name != kind:
        return [Check(name="server", status="warn", value=value,
                      fix=f"the server is {kind}: leave dialect and admin on auto unless testing an adapter")]
    return [Check(name="server", status="ok", value=value)]


def _nodes(config: ClusterConfig, conn: Any, admin: Any, _limit: Any) -> list[Check]:
    hosts = conn.hosts()
    up = [h for h in hosts if h.is_up]
    shards = {str(h.address): conn.shards(h) for h in hosts}
    value = (f"{len(hosts)} node(s), {len(up)} up; shards per node: "
             + ", ".join(f"{a} {n}" for a, n in sorted(shards.items())))
    if len(up) < config.replication_factor:
        return [Check(name="nodes", status="fail", value=value,
                      fix=f"replication_factor {config.replication_factor} needs that many nodes up: start "
                          "the missing nodes or lower the replication factor")]
    if len(up) < len(hosts):
        return [Check(name="nodes", status="warn", value=value, fix="a node is down: measurements would not "
                      "represent the cluster; bring it back before a long run")]
    return [Check(name="nodes", status="ok", value=value)]


def _server_settings(conn: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """Settings by name: Scylla's ``system.config`` (values as JSON), Cassandra's
    ``system_views.settings`` (text)."""
    table = "system.config" if conn.server_kind() == "scylla" else "system_views.settings"
    out: dict[str, Any] = {}
    for row in conn.execute(f"SELECT name, value FROM {table}"):
        if row.name in names:
            try:
                out[row.name] = json.loads(row.value)
            except (TypeError, ValueError):
                out[row.name] = row.value
    return out


def _tablets(config: ClusterConfig, conn: Any, admin: Any, _limit: Any) -> list[Check]:
    if conn.server_kind() != "scylla":
        if config.tablets:
            return [Check(name="tablets", status="fail", value="Cassandra has no tablets",
                          fix="set tablets = false (LAB_TABLETS=false)")]
        return [Check(name="tablets", status="ok", value="none (Cassandra: vnodes/tokens)")]
    settings = _server_settings(conn, _TABLETS_SETTINGS)
    mode = settings.get("tablets_mode_for_new_keyspaces")
    value = f"new keyspaces: {mode or 'unset'} (enable_tablets {settings.get('enable_tablets')}); lab keyspaces: " + (
        "tablets" if config.tablets else "vnodes (tablets = {'enabled': false})")
    if mode == "enforced" and not config.tablets:
        return [Check(name="tablets", status="fail", value=value,
                      fix="tablets are enforced: set tablets = true (LAB_TABLETS=true); LWT then needs a Scylla "
                          "with the LWT_WITH_TABLETS feature")]
    return [Check(name="tablets", status="ok", value=value)]


def _lwt(config: ClusterConfig, conn: Any, admin: Any, _limit: Any) -> list[Check]:
    keyspace = f"{_SCRATCH_PREFIX}{uuid.uuid4().hex[:8]}"
    try:
        conn.create_keyspace(keyspace)
        conn.execute(f"CREATE TABLE {keyspace}.probe (k int PRIMARY KEY, v int)")
        conn.wait_schema_agreement()
        first = conn.execute(f"INSERT INTO {keyspace}.probe (k, v) VALUES (1, 1) IF NOT EXISTS").one()
        again = conn.execute(f"INSERT INTO {keyspace}.probe (k, v) VALUES (1, 2) IF NOT EXISTS").one()
    except LwtUnavailable as exc:
        return [Check(name="LWT", status="fail", value=str(exc)[:300],
                      fix="create the lab's keyspaces without tablets (tablets = false, the default) or use a "
                          "Scylla version with LWT_WITH_TABLETS")]
    except LabError as exc:
        return [Check(name="LWT", status="fail", value=f"{type(exc).__name__}: {str(exc)[:300]}",
                      fix="the lab's role must create keyspaces (GRANT CREATE ON ALL KEYSPACES) and LWT must work")]
    finally:
        with contextlib.suppress(LabError):
            conn.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
    if not (first[0] is True and again[0] is False):
        return [Check(name="LWT", status="fail", value=f"IF NOT EXISTS answered {first[0]!r} then {again[0]!r}",
                      fix="conditional writes do not behave: client_dedup cannot work on this cluster")]
    return [Check(name="LWT", status="ok", value="IF NOT EXISTS applied once, refused the second time")]


def _admin_endpoints(config: ClusterConfig, conn: Any, admin: Any, _limit: Any) -> list[Check]:
    what = "REST" if admin.name == "scylla" else "JMX"
    out = []
    for node in admin.check_nodes():
        out.append(Check(name=f"{what} {node.node}", status="ok" if node.ok else "fail",
                         value=f"{node.endpoint}: {node.detail}", fix=node.fix))
    return out or [Check(name=what, status="warn", value="no node to check")]


def _in_limit(config: ClusterConfig, conn: Any, admin: Any, lab_limit: int | None) -> list[Check]:
    settings = _server_settings(conn, conn.dialect.in_limit_settings)
    limits = {k: int(v) for k, v in settings.items() if str(v).lstrip("-").isdigit() and int(v) > 0
              and "warn" not in k}
    shown = ", ".join(f"{k}={v}" for k, v in sorted(settings.items())) or "no setting readable"
    value = f"{shown}; the lab's IN lists: up to {lab_limit if lab_limit is not None else '?'}"
    too_small = {k: v for k, v in limits.items() if lab_limit is not None and v < lab_limit}
    if too_small:
        name, limit = min(too_small.items(), key=lambda kv: kv[1])
        return [Check(name="IN-list limit", status="fail", value=value,
                      fix=f"the server refuses IN lists over {limit} ({name}): lower batch_read_in_list_limit to "
                          f"{limit} in appendix_b.toml, or raise {name} on every node")]
    return [Check(name="IN-list limit", status="ok", value=value)]


def _replication(config: ClusterConfig, conn: Any, admin: Any, _limit: Any) -> list[Check]:
    row = conn.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                       (config.keyspace,)).one()
    wanted = conn.dialect.create_keyspace(config.keyspace, config.replication_map(), tablets=config.tablets)
    if row is None:
        return [Check(name="replication", status="ok", value=f"{config.keyspace} does not exist yet; the lab will "
                      f"run: {wanted}")]
    replication = admin.replication(config.keyspace)
    value = f"{config.keyspace}: {dict(row[0])} ({replication.copies} copies on {replication.total_nodes} node(s))"
    rf = max(replication.factors.values() or [0])
    if rf != config.replication_factor:
        return [Check(name="replication", status="warn", value=value,
                      fix=f"the keyspace exists with RF {rf}, the config says {config.replication_factor}: the lab "
                          "never alters a keyspace; drop it or set replication_factor to match")]
    return [Check(name="replication", status="ok", value=value)]


def _security(config: ClusterConfig, conn: Any, admin: Any, _limit: Any) -> list[Check]:
    auth = f"auth as {config.username!r}" if config.username else "no auth"
    tls = f"TLS (CA {config.tls_ca_file})" if config.tls else "no TLS"
    if getattr(conn, "credentials_unused", False):
        return [Check(name="auth/TLS", status="warn", value=f"{auth}, but the server asked for no credentials; {tls}",
                      fix="the server runs without an authenticator and accepts anyone: set authenticator: "
                          "PasswordAuthenticator on the nodes, or drop --username / LAB_USERNAME / LAB_PASSWORD")]
    return [Check(name="auth/TLS", status="ok", value=f"{auth}; {tls}")]


def _free_disk(config: ClusterConfig, conn: Any, admin: Any, _limit: Any) -> list[Check]:
    """Free bytes under the data folder of each embedded node; a remote node's disk is out of
    reach of CQL, JMX and Scylla's REST API alike."""

    local = {n.address: n for n in EmbeddedCluster(NodeOptions(home=config.lab_home)).running()}
    out = []
    for host in conn.hosts():
        node = local.get(str(host.address))
        if node is None:
            out.append(Check(name=f"disk {host.address}", status="warn", value="not measurable from here",
                             fix="check free space on the node (df on its data directory) before a long run"))
            continue
        free = shutil.disk_usage(node.data_directory).free
        status = "fail" if free < MIN_FREE_DISK_BYTES else "warn" if free < WARN_FREE_DISK_BYTES else "ok"
        out.append(Check(name=f"disk {host.address}", status=status,
                         value=f"{free / 1e9:.1f} GB free under {node.data_directory}",
                         fix=f"free space: compactions need room for both copies (at least "
                             f"{MIN_FREE_DISK_BYTES / 1e9:.0f} GB)"))
    return out
