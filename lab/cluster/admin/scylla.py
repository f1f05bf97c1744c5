"""ScyllaDB admin: the same numbers through Scylla's REST API (:10000) and its Prometheus
endpoint (:9180)."""
from __future__ import annotations

from typing import Any

from lab.cluster.admin.base import ClusterAdmin, ServerCounts, TableStats
from lab.errors import AdminError


class ScyllaAdmin(ClusterAdmin):
    """ScyllaDB through its REST API (:10000) and Prometheus metrics (:9180)."""

    name = "scylla"

    def _hosts(self) -> list[str]:
        hosts = [h.address for h in self.connection.hosts() if h.is_up]
        return hosts or list(self.config.contact_points)

    def _rest(self, method: str, host: str, path: str, params: dict | None = None) -> Any:
        import requests

        url = f"http://{host}:{self.config.rest_port}{path}"
        try:
            resp = requests.request(method, url, params=params, timeout=600)
        except requests.RequestException as exc:
            raise AdminError(f"Scylla REST {method} {url} failed: {exc}", url=url) from exc
        if resp.status_code >= 300:
            raise AdminError(f"Scylla REST {method} {url} -> {resp.status_code}: {resp.text[:300]}", url=url)
        return resp.json() if resp.text else None

    def flush(self, keyspace: str, table: str | None = None) -> None:
        for h in self._hosts():
            self._rest("POST", h, f"/storage_service/keyspace_flush/{keyspace}", {"cf": table} if table else None)

    def compact(self, keyspace: str, table: str) -> None:
        for h in self._hosts():
            self._rest("POST", h, f"/column_family/major_compaction/{keyspace}:{table}")

    def table_stats(self, keyspace: str, table: str) -> TableStats:
        per_node = []
        for h in self._hosts():
            cf = f"{keyspace}:{table}"
            per_node.append({
                "node": h,
                "sstable_count": int(self._rest("GET", h, f"/column_family/metrics/live_ss_table_count/{cf}")),
                "live_disk_bytes": int(self._rest("GET", h, f"/column_family/metrics/live_disk_space_used/{cf}")),
                "total_disk_bytes": int(self._rest("GET", h, f"/column_family/metrics/total_disk_space_used/{cf}")),
                "local_reads": int(self._rest("GET", h, f"/column_family/metrics/read/{cf}")),
                "local_writes": int(self._rest("GET", h, f"/column_family/metrics/write/{cf}")),
            })
        return TableStats(keyspace=keyspace, table=table,
                          sstable_count=sum(p["sstable_count"] for p in per_node),
                          live_disk_bytes=sum(p["live_disk_bytes"] for p in per_node),
                          total_disk_bytes=sum(p["total_disk_bytes"] for p in per_node),
                          local_reads=sum(p["local_reads"] for p in per_node),
                          local_writes=sum(p["local_writes"] for p in per_node),
                          per_node=tuple(per_node))

    def compactions_running(self) -> int | None:
        total = 0
        for h in self._hosts():
            total += int(self._rest("GET", h, "/compaction_manager/metrics/pending_tasks") or 0)
        return total

    def server_counts(self, keyspace: str, table: str) -> ServerCounts:
        stats = self.table_stats(keyspace, table)
        return ServerCounts(reads=stats.local_reads, writes=stats.local_writes)

    def prometheus(self, host: str | None = None) -> dict[str, float]:
        """Scylla's Prometheus metrics as ``{'name{labels}': value}`` (for tombstone reads etc.)."""
        import requests

        host = host or self._hosts()[0]
        url = f"http://{host}:{self.config.prometheus_port}/metrics"
        try:
            text = requests.get(url, timeout=30).text
        except requests.RequestException as exc:
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
