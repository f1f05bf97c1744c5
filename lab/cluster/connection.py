"""The lab's CQL session: connecting from a ClusterConfig, request accounting.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, ResultSet, Session
from cassandra.policies import DCAwareRoundRobinPolicy, RetryPolicy, TokenAwarePolicy
from cassandra.query import BatchStatement, BatchType, PreparedStatement, SimpleStatement

from lab.cluster.accounting import RequestCounter, StatementInfo, classify
from lab.cluster.config import ClusterConfig
from lab.cluster.dialect import dialect_named
from lab.cluster.driver_errors import LabRetryPolicy, is_driver_error, map_driver_errors, translate
from lab.cluster.probe import CQL, NOT_CQL, PROBE_TIMEOUT_SECONDS, SILENT, probe_cql
from lab.cluster.reactors import reactor_class, stop_libev_loop_at_exit
from lab.cluster.row_factory import cached_named_tuple_factory, install_uuid_deserializer
from lab.cluster.rtt_proxy import ProxyEndPointFactory, RttProxy
from lab.errors import ClusterError, ConnectError, CredentialsNotUsed, LabError, RttProxyError, ValidationError

# A schema change (CREATE/DROP KEYSPACE, CREATE TABLE, TRUNCATE, ...) waits for the server to
# apply it and for schema agreement: seconds on a quiet node, well past the request timeout on a
# loaded one (tens of seconds on a busy 2-core machine). It is
# not what a run measures, so it gets this floor instead of the request timeout.
SCHEMA_TIMEOUT_SECONDS = 120.0
# Nagle off on every driver socket (ClusterConfig.tcp_nodelay): a request written while an earlier
# one is unacknowledged otherwise waits for the node's delayed ACK
NODELAY_SOCKOPT = (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


@dataclass(frozen=True)
class Stmt:
    """A prepared statement with what accounting needs to know about it."""

    prepared: PreparedStatement
    info: StatementInfo
    cql: str


def _consistency(name: str) -> int:
    return getattr(ConsistencyLevel, name)


class Connection:
    """A connected session plus request accounting. Close it when done (or use ``with``)."""

    def __init__(self, config: ClusterConfig, *, reactor: str | None = None) -> None:
        self.config = config
        self.counter = RequestCounter()
        self._prepared: dict[tuple[str, tuple[str, ...]], Stmt] = {}
        self._lock = threading.Lock()
        self._kind: str | None = None
        self.retry_policy = LabRetryPolicy()
        self.rtt_proxy: RttProxy | None = None  # the emulated network this connection runs through
        endpoints = None
        if config.rtt_us:
            self.rtt_proxy = RttProxy.start(upstream_host=config.contact_points[0], upstream_port=config.port,
                                            rtt_us=config.rtt_us)
            endpoints = ProxyEndPointFactory(self.rtt_proxy.listen_host, self.rtt_proxy.listen_port)
        try:
            self.cluster, self.session = _open(config, reactor=reactor, retry_policy=self.retry_policy,
                                               endpoints=endpoints)
            if endpoints is not None and len(endpoints.nodes_seen) > 1:
                self.cluster.shutdown()
                raise RttProxyError(f"an emulated round trip covers one node; the cluster has "
                                    f"{len(endpoints.nodes_seen)} ({', '.join(sorted(endpoints.nodes_seen))})",
                                    nodes=sorted(endpoints.nodes_seen))
        except BaseException:
            if self.rtt_proxy is not None:
                self.rtt_proxy.stop()
            raise
        self.credentials_unused = _credentials_unused(config, self.cluster)
        if self.credentials_unused:  # not the secured setup the run was meant to test: say so
            warnings.warn(CredentialsNotUsed(
                f"credentials given (username {config.username!r}) but the server at {config.contact_points[0]}:"
                f"{config.port} asked for none: it runs without an authenticator, so they were not checked",
                username=config.username), stacklevel=3)
        self.dialect = dialect_named(config.dialect if config.dialect != "auto" else self.server_kind())
        self.retry_policy.dialect = self.dialect

    # -- statements ------------------------------------------------------------
    def prepare(self, cql: str, *, key_columns: tuple[str, ...] = (), kind: str | None = None) -> Stmt:
        """Prepare once per text; ``key_columns`` lets accounting spot point reads."""
        key = (cql, key_columns)
        with self._lock:
            stmt = self._prepared.get(key)
        if stmt is not None:
            return stmt
        info = classify(cql, key_columns=key_columns)
        if kind is not None:
            info = StatementInfo(table=info.table, kind=kind)
        with map_driver_errors(info.table, self.dialect):
            prepared = self.session.prepare(cql)
        if info.kind == "lwt":
            prepared.serial_consistency_level = _consistency(self.config.serial_consistency)
        prepared.consistency_level = _consistency(
            self.config.read_consistency if info.kind.endswith("read") else self.config.write_consistency)
        stmt = Stmt(prepared, info, cql)
        with self._lock:
            self._prepared[key] = stmt
        return stmt

    def execute(self, stmt: Stmt | str, params: Sequence[Any] | dict | None = None, *,
                trace: bool = False, timeout: float | None = None, host: Any = None,
                consistency: str | None = None) -> Any:
        """Run one statement (prepared or text), count it, translate driver errors."""
        bound, info = self._bind(stmt, params, consistency)
        self.counter.add(info)
        with map_driver_errors(info.table, self.dialect):
            kwargs = {"trace": trace, "timeout": timeout or self._timeout(info)}
            if host is not None:
                kwargs["host"] = host
            if isinstance(stmt, Stmt) or params is None:
                return self.session.execute(bound, **kwargs)
            return self.session.execute(bound, params, **kwargs)

    def execute_concurrent(self, items: Sequence[tuple[Stmt, Sequence[Any]]], *,
                           concurrency: int = 32) -> list[Any]:
        """Run statements in parallel, ``concurrency`` in flight at any time (a sliding window:
        each completion starts the next statement); results in input order. The first error in
        input order is raised once every started statement finished; none is started after it."""
        n = len(items)
        if n == 0:
            return []
        bound = [self._bind(stmt, params, None) for stmt, params in items]
        results: list[Any] = [None] * n
        errors: list[BaseException | None] = [None] * n
        window = threading.Semaphore(max(1, concurrency))
        lock = threading.Lock()
        all_done = threading.Event()
        state = {"left": n, "failed": False}

        def finish(i: int, result: Any, error: BaseException | None) -> None:
            # on the driver's I/O thread (or inline when the future completed before its callbacks)
            results[i], errors[i] = result, error
            with lock:
                state["left"] -= 1
                state["failed"] |= error is not None
                last = state["left"] == 0
            window.release()
            if last:
                all_done.set()

        def ok(rows: Any, i: int, future: Any) -> None:
            future.clear_callbacks()  # a paged result re-fires them per page, fetched by the ResultSet
            finish(i, ResultSet(future, rows), None)

        def failed(error: BaseException, i: int) -> None:
            finish(i, None, error)

        timeout = self.config.request_timeout_seconds
        for i, (b, info) in enumerate(bound):
            window.acquire()
            if state["failed"]:  # stop starting work after a failure; count the unstarted as done
                window.release()
                with lock:
                    state["left"] -= n - i
                    last = state["left"] == 0
                if last:
                    all_done.set()
                break
            self.counter.add(info)
            try:
                future = self.session.execute_async(b, timeout=timeout)
            except Exception as exc:
                finish(i, None, exc)
                continue
            future.add_callbacks(ok, failed, callback_args=(i, future), errback_args=(i,))
        all_done.wait()
        for i, error in enumerate(errors):
            if error is not None:
                with map_driver_errors(bound[i][1].table, self.dialect):
                    raise error
        return results

    def _timeout(self, info: StatementInfo) -> float:
        if info.kind == "schema":
            return max(self.config.request_timeout_seconds, SCHEMA_TIMEOUT_SECONDS)
        return self.config.request_timeout_seconds

    def execute_async(self, stmt: Stmt, params: Sequence[Any]) -> Any:
        """Fire one statement; returns the driver's ResponseFuture (call :func:`wait`)."""
        bound, info = self._bind(stmt, params, None)
        self.counter.add(info)
        try:  # map_driver_errors, inline: a generator context manager per request costs the hot path
            return self.session.execute_async(bound, timeout=self.config.request_timeout_seconds)
        except LabError:
            raise
        except Exception as exc:
            if is_driver_error(exc):
                raise translate(exc, table=info.table, dialect=self.dialect) from exc
            raise

    def translate_error(self, error: BaseException, stmt: Stmt) -> BaseException:
        """What :meth:`execute` raises for ``error``, an error an asynchronous request of ``stmt``
        ended with (a callback's): the lab error a driver error maps to, anything else as it is."""
        if isinstance(error, Exception) and not isinstance(error, LabError) and is_driver_error(error):
            return translate(error, table=stmt.info.table, dialect=self.dialect)
        return error

    def batch_async(self, items: Sequence[tuple[Stmt, Sequence[Any]]]) -> Any:
        """Fire an UNLOGGED batch of prepared writes (no ``IF``) as one request; returns the
        driver's ResponseFuture. Counted as one request of the first statement's table, kind
        "write". Unlogged: each partition's mutation is applied on its own, none waits for the
        others, so a failed batch may have applied some of them (the caller retries each)."""
        if not items:
            raise ValidationError("a batch needs at least one statement", field="items")
        for stmt, _ in items:
            if not isinstance(stmt, Stmt) or stmt.info.kind != "write":
                raise ValidationError("a batch takes prepared writes without IF conditions", field="items",
                                      cql=getattr(stmt, "cql", stmt))
        info = items[0][0].info
        batch = BatchStatement(batch_type=BatchType.UNLOGGED,
                               consistency_level=_consistency(self.config.write_consistency))
        for stmt, params in items:
            batch.add(stmt.prepared.bind(params))
        self.counter.add(info)
        with map_driver_errors(info.table, self.dialect):
            return self.session.execute_async(batch, timeout=self.config.request_timeout_seconds)

    def _bind(self, stmt: Stmt | str, params: Any, consistency: str | None) -> tuple[Any, StatementInfo]:
        if isinstance(stmt, Stmt):
            bound = stmt.prepared.bind(params or ())
            if consistency:
                bound.consistency_level = _consistency(consistency)
            return bound, stmt.info
        info = classify(stmt)
        simple = SimpleStatement(stmt)
        if consistency:
            simple.consistency_level = _consistency(consistency)
        elif info.kind == "schema":
            simple.consistency_level = ConsistencyLevel.ONE
        return simple, info

    # -- server ----------------------------------------------------------------
    def server_kind(self) -> str:
        """'scylla' or 'cassandra', from the server's own tables (asked once)."""
        if self._kind is None:
            try:  # system.versions exists on Scylla only (db/virtual_tables.cc versions_table)
                self.session.execute("SELECT version FROM system.versions WHERE key = 'local'")
                self._kind = "scylla"
            except Exception:
                self._kind = "cassandra"
        return self._kind

    def server_version(self) -> str:
        with map_driver_errors("local"):
            row = self.session.execute("SELECT release_version FROM system.local").one()
        if self.server_kind() == "scylla":
            with contextlib.suppress(Exception):
                return self.session.execute("SELECT version FROM system.versions WHERE key = 'local'").one()[0]
        return row[0]

    def hosts(self) -> list[Any]:
        return list(self.cluster.metadata.all_hosts())

    def shards(self, host: Any) -> int:
        """Shards of one node: Scylla announces them when a connection opens (SCYLLA_NR_SHARDS,
        ``transport/server.cc``); a Cassandra node is one shard."""
        info = getattr(host, "sharding_info", None)
        return int(info.shards_count) if info is not None else 1

    def placement(self, stmt: Stmt, params: Sequence[Any]) -> list[tuple[str, int]]:
        """(node address, shard) of every replica of the partition ``stmt`` bound to ``params``
        addresses: the compaction groups its rows land in on a vnodes keyspace (each Scylla
        shard flushes and compacts its own SSTables; a Cassandra node is one group). Token ->
        replicas from the driver's token map; token -> shard with the node's announced sharding
        (``shard_id_from_token``, the server's own algorithm)."""
        bound = stmt.prepared.bind(params)
        key, keyspace = bound.routing_key, bound.keyspace
        metadata = self.cluster.metadata
        replicas = metadata.get_replicas(keyspace, key)
        if not replicas:  # a keyspace created a moment ago: the driver's schema events lag behind
            with map_driver_errors(dialect=self.dialect):
                self.cluster.refresh_keyspace_metadata(keyspace)
            metadata.token_map.rebuild_keyspace(keyspace, build_if_absent=True)
            replicas = metadata.get_replicas(keyspace, key)
        if not replicas:
            raise ClusterError(f"the driver knows no replica of a {keyspace} partition (no token map?)",
                               keyspace=keyspace)
        token = metadata.token_map.token_class.from_key(key)
        out = []
        for host in replicas:
            info = getattr(host, "sharding_info", None)
            out.append((str(host.address), int(info.shard_id_from_token(token.value)) if info is not None else 0))
        return out

    def create_keyspace(self, keyspace: str, replication: dict[str, Any] | None = None) -> None:
        """Create ``keyspace`` as the server's dialect spells the lab's replication settings."""
        replication = replication if replication is not None else self.config.replication_map()
        self.execute(self.dialect.create_keyspace(keyspace, replication, tablets=self.config.tablets))

    def wait_schema_agreement(self) -> None:
        with map_driver_errors():
            self.session.wait_for_schema_agreement(wait_time=60)

    def close(self) -> None:
        try:
            self.cluster.shutdown()
        finally:
            if self.rtt_proxy is not None:
                self.rtt_proxy.stop()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _ssl_context(config: ClusterConfig) -> ssl.SSLContext | None:
    if config.tls_ca_file is None:
        return None
    ctx = ssl.create_default_context(cafile=str(config.tls_ca_file))
    ctx.check_hostname = config.tls_verify_hostname
    if config.tls_cert_file is not None:
        ctx.load_cert_chain(str(config.tls_cert_file), str(config.tls_key_file))
    return ctx


def _open(config: ClusterConfig, *, reactor: str | None = None, retry_policy: RetryPolicy | None = None,
          endpoints: ProxyEndPointFactory | None = None) -> tuple[Cluster, Session]:
    """``reactor`` names the driver's I/O loop (``lab.cluster.reactors``); None keeps the driver
    default. ``endpoints`` pins every node to a latency proxy (``lab.cluster.rtt_proxy``)."""

    extra: dict[str, Any] = {}
    connection_class = reactor_class(reactor)
    stop_libev_loop_at_exit()  # the driver's default loop made every process wait ~5 s at exit
    install_uuid_deserializer()  # UUID cells without uuid.UUID's general constructor (lab.cluster.row_factory)
    if connection_class is not None:
        extra["connection_class"] = connection_class
    if config.tcp_nodelay:
        extra["sockopts"] = [NODELAY_SOCKOPT]
    contact_points, port = list(config.contact_points), config.port
    if endpoints is not None:
        extra["endpoint_factory"] = endpoints
        contact_points, port = [endpoints.host], endpoints.port
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=config.local_dc)),
        consistency_level=_consistency(config.read_consistency),
        serial_consistency_level=_consistency(config.serial_consistency),
        request_timeout=config.request_timeout_seconds,
        retry_policy=retry_policy or RetryPolicy(),
        row_factory=cached_named_tuple_factory,
    )
    auth = None
    if config.username is not None:
        auth = PlainTextAuthProvider(username=config.username, password=config.password)
    try:
        ssl_context = _ssl_context(config)
    except (OSError, ssl.SSLError) as exc:
        raise ConnectError(f"cannot load TLS files: {exc}") from exc
    _refuse_other_services(config, ssl_context)
    cluster = Cluster(
        contact_points=contact_points, port=port, auth_provider=auth,
        ssl_context=ssl_context, execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        connect_timeout=config.connect_timeout_seconds, control_connection_timeout=config.connect_timeout_seconds,
        protocol_version=4,  # what ScyllaDB speaks; keeps both servers on one protocol
        **extra,
    )
    try:
        session = cluster.connect()
    except Exception as exc:
        cluster.shutdown()
        where = ", ".join(f"{c}:{config.port}" for c in config.contact_points)
        detail = _failure_detail(exc)
        raise ConnectError(f"cannot connect to {where}: {detail}{_failure_fix(config, str(exc))}",
                           contact_points=config.contact_points, port=config.port, detail=detail) from exc
    return cluster, session


def _refuse_other_services(config: ClusterConfig, ssl_context: ssl.SSLContext | None) -> None:
    """Before the driver waits out its timeouts: when no contact point answers in CQL and one
    answers otherwise (another service on that port), say so at once (:mod:`lab.cluster.probe`)."""

    seconds = min(PROBE_TIMEOUT_SECONDS, config.connect_timeout_seconds)
    wrong = []
    for host in config.contact_points:
        result = probe_cql(host, config.port, timeout_seconds=seconds, ssl_context=ssl_context)
        if result.verdict == CQL:
            return
        if result.verdict in (NOT_CQL, SILENT):
            wrong.append(result)
    if wrong:
        raise ConnectError("cannot connect: " + "; ".join(r.describe() for r in wrong)
                           + f". Is {config.port} the CQL port? (Cassandra and ScyllaDB listen on 9042; --port / "
                             "LAB_PORT, or a notebook's cluster parameter)",
                           contact_points=config.contact_points, port=config.port, detail="not CQL")


def _failure_detail(exc: BaseException) -> str:
    """One short reason per host from the driver's NoHostAvailable ({host: error}), not its repr."""
    errors = getattr(exc, "errors", None)
    if not isinstance(errors, dict) or not errors:
        return f"{type(exc).__name__}: {exc}"
    parts = []
    for host, err in errors.items():
        text = str(err.strerror) if isinstance(err, OSError) and err.strerror else str(err)
        if "Last error:" in text:  # "Tried connecting to [('127.0.0.1', 1)]. Last error: Connection refused"
            text = text.rsplit("Last error:", 1)[1].strip()
        text = text[:1].lower() + text[1:]
        parts.append(f"{text} ({host})" if len(errors) > 1 else text)
    return "; ".join(parts)


def _failure_fix(config: ClusterConfig, text: str) -> str:
    if "Authentication" in text or "credentials" in text.lower():
        return " (authentication failed: check --username and LAB_PASSWORD)"
    if "SSL" in text or "certificate" in text.lower():
        return " (TLS handshake failed: check the CA file and that the server speaks TLS)"
    if not config.tls and ("reset by peer" in text or "ConnectionShutdown" in text):
        return " (the server dropped a plain connection: does it require TLS? give --tls-ca-file)"
    if "refused" in text.lower() or "Unable to connect" in text or "timed out" in text.lower():
        return (" (nothing answers there: is the node running? `lab node start` starts the embedded one; else "
                "check the contact points and port: --contact-points / --port, LAB_CONTACT_POINTS / LAB_PORT, or "
                "a notebook's cluster parameter)")
    return ""


def _credentials_unused(config: ClusterConfig, cluster: Cluster) -> bool:
    """Credentials given to a server that never asked for them (no authenticator): the driver
    connects all the same and only logs it. The control connection's authenticator learns the
    server's authenticator class from its AUTHENTICATE message; it stays None without one."""
    if config.username is None and config.password is None:
        return False
    authenticator = getattr(getattr(cluster.control_connection, "_connection", None), "authenticator", None)
    return authenticator is not None and getattr(authenticator, "server_authenticator_class", None) is None


def connect(config: ClusterConfig, *, reactor: str | None = None) -> Connection:
    return Connection(config, reactor=reactor)
