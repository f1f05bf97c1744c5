"""ScyllaDB admin: the same numbers through Scylla's REST API (:10000) and its Prometheus
endpoint (:9180).

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Protocol

from lab.cluster.admin.admin_interface import ClusterAdmin, NodeCheck, ServerCounts, TableStats
from lab.cluster.admin.server_cpu import reactor_readings
from lab.errors import AdminError

REST_TIMEOUT_SECONDS = 600.0  # a major compaction of a big table returns when done
PROBE_TIMEOUT_SECONDS = 5.0
PROMETHEUS_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True, kw_only=True)
class RestCall:
    method: str
    path: str                      # with {placeholders} for path parameters
    query: tuple[str, ...] = ()    # query parameters the adapter may send


REST_CALLS = {
    "flush": RestCall(method="POST", path="/storage_service/keyspace_flush/{keyspace}", query=("cf",)),
    "major_compaction": RestCall(method="POST", path="/column_family/major_compaction/{name}",
                                 query=("flush_memtables",)),
    "live_ss_table_count": RestCall(method="GET", path="/column_family/metrics/live_ss_table_count/{name}"),
    "live_disk_space_used": RestCall(method="GET", path="/column_family/metrics/live_disk_space_used/{name}"),
    "total_disk_space_used": RestCall(method="GET", path="/column_family/metrics/total_disk_space_used/{name}"),
    "reads": RestCall(method="GET", path="/column_family/metrics/read/{name}"),
    "writes": RestCall(method="GET", path="/column_family/metrics/write/{name}"),
    "pending_tasks": RestCall(method="GET", path="/compaction_manager/metrics/pending_tasks"),
    "pending_tasks_by_table": RestCall(method="GET", path="/compaction_manager/metrics/pending_tasks_by_table"),
    "compactions": RestCall(method="GET", path="/compaction_manager/compactions"),
    "release_version": RestCall(method="GET", path="/storage_service/scylla_release_version"),
}


class Transport(Protocol):
    def __call__(self, method: str, host: str, port: int, path: str, params: dict[str, str],
                 timeout: float) -> Any: ...


def http_transport(method: str, host: str, port: int, path: str, params: dict[str, str], timeout: float) -> Any:
    """One HTTP request to a node's REST API; the decoded JSON body (None when empty)."""
    url = f"http://{host}:{port}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            body = resp.read().decode()
    except urllib.error.HTTPError as exc:
        raise AdminError(f"Scylla REST {method} {url} -> {exc.code}: {exc.read().decode(errors='replace')[:300]}",
                         url=url, status=exc.code) from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        refused = isinstance(reason, ConnectionRefusedError) or "refused" in str(reason).lower()
        what = "refused the connection" if refused else f"did not answer ({reason})"
        fix = unreachable_fix(host, port)
        raise AdminError(f"Scylla REST API {method} {url} {what}. {fix}", url=url, host=host, port=port,
                         setting="api_address", refused=refused, fix=fix) from exc
    return json.loads(body) if body.strip() else None


def unreachable_fix(host: str, port: int) -> str:
    return (f"A default ScyllaDB install binds its REST API to 127.0.0.1 (api_address in scylla.yaml; Docker: "
            f"--api-address): set `api_address: <node address>` on every node and restart it, or tunnel to "
            f"the node (ssh -L 10001:127.0.0.1:{port} <node>) and map it with rest_addresses "
            f"(LAB_REST_ADDRESSES={host}=127.0.0.1:10001).")


class ScyllaAdmin(ClusterAdmin):
    """ScyllaDB through its REST API (:10000) and Prometheus metrics (:9180)."""

    name = "scylla"

    def __init__(self, config: Any, connection: Any, *, transport: Transport | None = None) -> None:
        super().__init__(config, connection)
        self._transport = transport or http_transport

    def _hosts(self) -> list[str]:
        hosts = [str(h.address) for h in self.connection.hosts() if h.is_up] if self.connection is not None else []
        return hosts or list(self.config.contact_points)

    def _call(self, call_name: str, node: str, /, *, timeout: float = REST_TIMEOUT_SECONDS,
              params: dict[str, str] | None = None, **path_params: str) -> Any:
        call = REST_CALLS[call_name]
        params = {k: v for k, v in (params or {}).items() if v is not None}
        unknown = set(params) - set(call.query)
        if unknown:
            raise AdminError(f"REST call {call_name} takes no query parameter {', '.join(sorted(unknown))}",
                             call=call_name)
        path = call.path.format(**{k: urllib.parse.quote(v, safe=":") for k, v in path_params.items()})
        host, port = self.config.rest_endpoint(node)
        return self._transport(call.method, host, port, path, params, timeout)

    def flush(self, keyspace: str, table: str | None = None) -> None:
        for h in self._hosts():
            self._call("flush", h, keyspace=keyspace, params={"cf": table})

    def compact(self, keyspace: str, table: str) -> None:
        # major compaction flushes first (flush_memtables defaults to true) and returns when done;
        # it leaves one SSTable per shard (and per tablet) that holds data, not one per node
        for h in self._hosts():
            self._call("major_compaction", h, name=f"{keyspace}:{table}")

    def table_stats(self, keyspace: str, table: str) -> TableStats:
        per_node = []
        name = f"{keyspace}:{table}"
        for h in self._hosts():
            per_node.append({
                "node": h,
                "sstable_count": int(self._call("live_ss_table_count", h, name=name)),
                "live_disk_bytes": int(self._call("live_disk_space_used", h, name=name)),
                "total_disk_bytes": int(self._call("total_disk_space_used", h, name=name)),
                "local_reads": int(self._call("reads", h, name=name)),
                "local_writes": int(self._call("writes", h, name=name)),
            })
        replicas = self.replication(keyspace).replicas_among(len(per_node)) if self.connection is not None else 1.0
        return TableStats.from_nodes(keyspace, table, per_node, replicas=replicas)

    def compactions_running(self, keyspace: str | None = None) -> int | None:
        """Pending estimate plus running compactions. With ``keyspace``: that keyspace's tables
        only (``pending_tasks_by_table`` and the running list carry ks/cf); the node-wide
        ``pending_tasks`` counts every table, system ones included."""
        total = 0
        for h in self._hosts():
            running = self._call("compactions", h) or []
            if keyspace is None:
                total += int(self._call("pending_tasks", h) or 0) + len(running)
                continue
            pending = self._call("pending_tasks_by_table", h) or []
            total += sum(int(p.get("task", 0)) for p in pending if p.get("ks") == keyspace)
            total += sum(1 for c in running if c.get("ks") == keyspace)
        return total

    def server_counts(self, keyspace: str, table: str) -> ServerCounts:
        stats = self.table_stats(keyspace, table)
        return ServerCounts(reads=stats.local_reads, writes=stats.local_writes)

    def check_nodes(self) -> list[NodeCheck]:
        checks = []
        for h in self._hosts():
            host, port = self.config.rest_endpoint(h)
            try:
                version = self._call("release_version", h, timeout=PROBE_TIMEOUT_SECONDS)
                checks.append(NodeCheck(node=h, endpoint=f"{host}:{port}", ok=True, detail=f"REST API answers ({version})"))
            except AdminError as exc:
                fix = exc.facts.get("fix", "")
                checks.append(NodeCheck(node=h, endpoint=f"{host}:{port}", ok=False,
                                        detail=str(exc).replace(fix, "").strip(), fix=fix))
        return checks

    def cpu_readings(self) -> list[Any]:
        """Each shard's reactor busy time (``scylla_reactor_cpu_busy_ms``) on every node."""

        return [r for h in self._hosts() for r in reactor_readings(h, self.prometheus(h))]

    def prometheus(self, host: str | None = None) -> dict[str, float]:
        """Scylla's Prometheus metrics as ``{'name{labels}': value}`` (for tombstone reads etc.)."""
        host = host or self._hosts()[0]
        url = f"http://{host}:{self.config.prometheus_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=PROMETHEUS_TIMEOUT_SECONDS) as resp:
                text = resp.read().decode()
        except (urllib.error.URLError, OSError) as exc:
            raise AdminError(f"Scylla Prometheus {url} failed: {exc}", url=url) from exc
        return parse_prometheus(text)


def parse_prometheus(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            continue
    return out
