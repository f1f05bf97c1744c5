"""The six tables of the design (§2), created from one spec and checked against the server.

Each table is a :class:`TableSpec`; the DDL is generated from it and :func:`check_schema`
reads ``system_schema`` back and lists every difference (keys, clustering order, column
types, compaction, TTL, gc_grace). The bucket width is recorded in message_record's table
comment when the table is created and refused if it differs later (§4.2, §27.2.4).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from lab.constants import Constants
from lab.errors import BucketWidthChanged, SchemaError

_BUCKET_COMMENT_RE = re.compile(r"message_seq_bucket_width=(\d+)")
TABLE_NAMES = ("message_record", "message_index", "client_dedup", "conversation_head",
               "message_reaction_summary", "message_reaction")


@dataclass(frozen=True, kw_only=True)
class TableSpec:
    name: str
    columns: tuple[tuple[str, str], ...]
    partition_key: tuple[str, ...]
    clustering: tuple[tuple[str, str], ...] = ()  # (column, 'ASC'|'DESC')
    compaction: dict[str, str] = field(default_factory=dict)
    default_ttl: int = 0
    gc_grace_seconds: int = 864000
    comment: str = ""

    @property
    def primary_key(self) -> tuple[str, ...]:
        return self.partition_key + tuple(c for c, _ in self.clustering)

    def ddl(self, keyspace: str, *, extra_options: tuple[str, ...] = ()) -> str:
        """``extra_options``: server-specific option text from the connection's dialect
        (e.g. Scylla's ``tombstone_gc`` for a scratch TWCS table)."""
        cols = ",\n    ".join(f"{n} {t}" for n, t in self.columns)
        pk = f"(({', '.join(self.partition_key)})" + "".join(f", {c}" for c, _ in self.clustering) + ")"
        opts = []
        if self.clustering:
            opts.append("CLUSTERING ORDER BY (" + ", ".join(f"{c} {o}" for c, o in self.clustering) + ")")
        opts.append("compaction = {" + ", ".join(f"'{k}': '{v}'" for k, v in self.compaction.items()) + "}")
        opts.append(f"default_time_to_live = {self.default_ttl}")
        opts.append(f"gc_grace_seconds = {self.gc_grace_seconds}")
        if self.comment:
            opts.append(f"comment = '{self.comment}'")
        opts += extra_options
        return (f"CREATE TABLE IF NOT EXISTS {keyspace}.{self.name} (\n    {cols},\n    PRIMARY KEY {pk}\n)"
                f" WITH " + "\n AND ".join(opts))


_LCS = {"class": "LeveledCompactionStrategy"}


def table_specs(constants: Constants) -> dict[str, TableSpec]:
    """The design's DDL (§2.1-§2.5), windows and TTLs taken from appendix B."""
    record = TableSpec(
        name="message_record",
        columns=(("tenant_id", "uuid"), ("conversation_id", "uuid"), ("seq_bucket", "bigint"),
                 ("conversation_seq", "bigint"), ("message_id", "blob"), ("last_activity_id", "blob"),
                 ("sender_id", "uuid"), ("sender_device_id", "uuid"), ("client_message_id", "text"),
                 ("message_type", "tinyint"), ("custom_type", "text"), ("schema_version", "int"),
                 ("payload_or_ciphertext", "blob"), ("media_metadata", "blob"),
                 ("reply_to_conversation_seq", "bigint"), ("mention_targets", "blob"), ("state", "tinyint"),
                 ("recall_event_conversation_seq", "bigint"), ("edited_at_activity_id", "blob"),
                 ("created_at", "bigint"), ("retention_class", "tinyint"),
                 ("dek_id", "frozen<tuple<text, text, int>>")),
        partition_key=("tenant_id", "conversation_id", "seq_bucket"),
        clustering=(("conversation_seq", "DESC"),),
        compaction={"class": "TimeWindowCompactionStrategy", "compaction_window_unit": "DAYS",
                    "compaction_window_size": str(constants.message_record_twcs_window_days)},
        default_ttl=0,
        gc_grace_seconds=constants.message_record_gc_grace_seconds,
        comment=f"message_seq_bucket_width={constants.message_seq_bucket_width}",
    )
    index = TableSpec(
        name="message_index",
        columns=(("tenant_id", "uuid"), ("message_id", "blob"), ("conversation_id", "uuid"),
                 ("conversation_seq", "bigint"), ("seq_bucket", "bigint")),
        partition_key=("tenant_id", "message_id"), compaction=_LCS)
    dedup = TableSpec(
        name="client_dedup",
        columns=(("tenant_id", "uuid"), ("sender_id", "uuid"), ("client_message_id", "text"),
                 ("message_id", "blob"), ("conversation_seq", "bigint"), ("state", "tinyint"),
                 ("created_at", "bigint")),
        partition_key=("tenant_id", "sender_id", "client_message_id"),
        compaction={"class": "TimeWindowCompactionStrategy", "compaction_window_unit": "HOURS",
                    "compaction_window_size": str(constants.client_dedup_twcs_window_hours)},
        default_ttl=constants.client_dedup_ttl_seconds,
        gc_grace_seconds=constants.client_dedup_gc_grace_seconds)
    head = TableSpec(
        name="conversation_head",
        columns=(("tenant_id", "uuid"), ("conversation_id", "uuid"), ("latest_conversation_seq", "bigint"),
                 ("earliest_available_conversation_seq", "bigint"), ("last_message_id", "blob"),
                 ("last_activity_id", "blob"), ("last_sender_id", "uuid"), ("preview_or_placeholder", "blob"),
                 ("member_count", "int"), ("updated_at", "bigint"), ("fencing_epoch", "bigint"),
                 ("head_version", "bigint")),
        partition_key=("tenant_id", "conversation_id"), compaction=_LCS)
    summary = TableSpec(
        name="message_reaction_summary",
        columns=(("tenant_id", "uuid"), ("conversation_id", "uuid"), ("seq_bucket", "bigint"),
                 ("conversation_seq", "bigint"), ("counts", "map<text, int>"), ("summary_version", "bigint"),
                 ("updated_at", "bigint")),
        partition_key=("tenant_id", "conversation_id", "seq_bucket"),
        clustering=(("conversation_seq", "DESC"),), compaction=_LCS)
    reaction = TableSpec(
        name="message_reaction",
        columns=(("tenant_id", "uuid"), ("conversation_id", "uuid"), ("conversation_seq", "bigint"),
                 ("user_id", "uuid"), ("reaction_key", "text"), ("created_at", "bigint")),
        partition_key=("tenant_id", "conversation_id", "conversation_seq"),
        clustering=(("user_id", "ASC"),), compaction=_LCS)
    return {t.name: t for t in (record, index, dedup, head, summary, reaction)}


def create_keyspace(conn: Any, keyspace: str, replication: dict[str, Any]) -> None:
    """As the connected server's dialect spells it (Scylla: NetworkTopologyStrategy, tablets off)."""
    conn.create_keyspace(keyspace, replication)


def recorded_bucket_width(conn: Any, keyspace: str) -> int | None:
    """The bucket width message_record was created with, or None when it does not exist."""
    row = conn.execute("SELECT comment FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
                       (keyspace, "message_record")).one()
    if row is None:
        return None
    m = _BUCKET_COMMENT_RE.search(row[0] or "")
    if m is None:
        raise SchemaError(f"{keyspace}.message_record exists but records no bucket width in its comment",
                          keyspace=keyspace)
    return int(m.group(1))


def create_schema(conn: Any, keyspace: str, constants: Constants,
                  replication: dict[str, Any] | None = None) -> None:
    """Create the keyspace (if missing) and the six tables; refuse a changed bucket width."""
    if replication is not None:
        create_keyspace(conn, keyspace, replication)
    recorded = recorded_bucket_width(conn, keyspace)
    if recorded is not None and recorded != constants.message_seq_bucket_width:
        raise BucketWidthChanged(
            f"{keyspace}.message_record was created with message_seq_bucket_width={recorded}; it cannot "
            f"change to {constants.message_seq_bucket_width} for existing tables (§27.2.4)",
            keyspace=keyspace, recorded=recorded, requested=constants.message_seq_bucket_width)
    for spec in table_specs(constants).values():
        conn.execute(spec.ddl(keyspace))
    conn.wait_schema_agreement()


@dataclass(frozen=True, kw_only=True)
class SchemaDifference:
    table: str
    what: str
    expected: Any
    actual: Any

    def __str__(self) -> str:
        return f"{self.table}.{self.what}: expected {self.expected!r}, found {self.actual!r}"


def _norm_type(t: str) -> str:
    return t.replace(" ", "").lower()


def check_schema(conn: Any, keyspace: str, constants: Constants) -> list[SchemaDifference]:
    """Every difference between the server's schema and the design's."""
    diffs: list[SchemaDifference] = []
    for spec in table_specs(constants).values():
        t = conn.execute("SELECT compaction, default_time_to_live, gc_grace_seconds, comment "
                         "FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
                         (keyspace, spec.name)).one()
        if t is None:
            diffs.append(SchemaDifference(table=spec.name, what="table", expected="present", actual="missing"))
            continue
        cols = list(conn.execute("SELECT column_name, kind, position, type, clustering_order FROM "
                                 "system_schema.columns WHERE keyspace_name = %s AND table_name = %s",
                                 (keyspace, spec.name)))
        actual_types = {c.column_name: _norm_type(c.type) for c in cols}
        expected_types = {n: _norm_type(ty) for n, ty in spec.columns}
        if actual_types != expected_types:
            diffs.append(SchemaDifference(table=spec.name, what="columns", expected=expected_types,
                                          actual=actual_types))
        pk = tuple(c.column_name for c in sorted((c for c in cols if c.kind == "partition_key"),
                                                 key=lambda c: c.position))
        if pk != spec.partition_key:
            diffs.append(SchemaDifference(table=spec.name, what="partition_key", expected=spec.partition_key, actual=pk))
        ck = tuple((c.column_name, c.clustering_order.upper()) for c in sorted(
            (c for c in cols if c.kind == "clustering"), key=lambda c: c.position))
        if ck != spec.clustering:
            diffs.append(SchemaDifference(table=spec.name, what="clustering", expected=spec.clustering, actual=ck))
        if t.default_time_to_live != spec.default_ttl:
            diffs.append(SchemaDifference(table=spec.name, what="default_time_to_live",
                                          expected=spec.default_ttl, actual=t.default_time_to_live))
        if t.gc_grace_seconds != spec.gc_grace_seconds:
            diffs.append(SchemaDifference(table=spec.name, what="gc_grace_seconds",
                                          expected=spec.gc_grace_seconds, actual=t.gc_grace_seconds))
        comp = dict(t.compaction or {})
        comp_class = comp.get("class", "").rsplit(".", 1)[-1]
        if comp_class != spec.compaction["class"]:
            diffs.append(SchemaDifference(table=spec.name, what="compaction.class",
                                          expected=spec.compaction["class"], actual=comp_class))
        for key, value in spec.compaction.items():
            if key != "class" and str(comp.get(key)) != value:
                diffs.append(SchemaDifference(table=spec.name, what=f"compaction.{key}", expected=value,
                                              actual=comp.get(key)))
        if spec.comment and spec.comment != (t.comment or ""):
            diffs.append(SchemaDifference(table=spec.name, what="comment", expected=spec.comment, actual=t.comment))
    return diffs

