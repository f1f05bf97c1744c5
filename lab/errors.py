"""The lab's one error tree.

Every error the library raises derives from :class:`LabError`; the CLI turns them into
messages and exit codes in one place (``lab.cli``). Driver exceptions are translated at one
boundary (``lab.cluster.driver_errors.map_driver_errors``) and never leak to callers.

    LabError
    ├── ConfigError                 bad cluster configuration (flags, env, TOML)
    ├── NodeError                   the embedded node
    │   ├── JavaNotFound            no usable ``java`` (JDK 17)
    │   ├── MavenError              Maven missing or the jars could not be resolved
    │   ├── PortInUse               a port the node needs is taken
    │   ├── NodeDied                the JVM exited during start-up (carries the log tail)
    │   └── NodeTimeout             CQL did not answer in time
    ├── ClusterError                talking to a cluster
    │   ├── ConnectError            no contact point answered / auth / TLS refused
    │   ├── RequestError            a request failed on the server
    │   │   ├── RequestTimeout      the server or the driver timed out
    │   │   ├── Unavailable         not enough replicas for the consistency level
    │   │   ├── InvalidRequest      the server rejected the statement (syntax, limits)
    │   │   │   ├── InListTooLong   an IN list over the server's limit (size, limit, setting)
    │   │   │   └── LwtUnavailable  the keyspace refuses LWT (Scylla tablets without LWT support)
    │   │   └── Overloaded          the server shed the request
    │   ├── AdminError              flush/compact/metrics through nodetool or REST failed
    │   └── RttProxyError           the latency proxy could not be built, started or kept in the path
    ├── SchemaError                 the server schema differs from the design
    │   └── BucketWidthChanged      message_seq_bucket_width changed after tables exist
    ├── ValidationError             bad input: raised before anything is written
    │   ├── InvalidId               malformed UUID / u128 / message_id / client_message_id
    │   ├── Bit63Violation          a u64 with bit 63 set (S-2)
    │   ├── InvalidSeq              zero/negative conversation_seq, or out of range
    │   ├── PayloadTooLarge         payload or thumbnail over its limit
    │   ├── UnknownRetentionClass   retention class not in the design's set
    │   ├── UnknownEnum             any other enum value outside its set
    │   └── BadRunFile              a run folder's file: unreadable, malformed, or a path outside its folder
    ├── StoreError                  the store's own invariants
    │   ├── BucketOverflow          a partition read returned > bucket width rows (S-4)
    │   ├── NotFound                no such message / conversation
    │   ├── InvalidState            the message's state forbids it (editing a recalled message)
    │   ├── HeadConflict            conditional conversation_head update lost its race
    │   ├── Fenced                  a higher fencing_epoch owns the conversation: this writer may not write it
    │   ├── ReactionConflict        the reaction summary kept changing under concurrent overwrites
    │   ├── OutboxError             the outbox could not append or read
    │   └── HotWindowError          the hot window (Redis) could not be written or read
    ├── CryptoError                 encryption at rest
    │   ├── DecryptError            wrong key, wrong AAD (moved ciphertext), tampering
    │   └── KeyDestroyed            the DEK was crypto-erased
    ├── KeyNotCached                a cache-only key lookup missed (a signal inside the store)
    ├── CrashInjected               a fault-injection hook fired (tests of crash points)
    ├── CalibrationError            a calibration run failed (names notebook and cell)
    ├── LoadError                   a load run could not start or its processes failed
    │   └── CoordinatorError        a distributed run's coordinator unreachable, or it refused a worker
    └── BenchError                  a benchmark could not measure (a profiler or a workload failed)

Warnings (``warnings.warn``; the CLI prints them as one ``warning:`` line):

    LabWarning (UserWarning)
    └── CredentialsNotUsed          credentials given to a server without an authenticator
"""
from __future__ import annotations

from typing import Any


class LabError(Exception):
    """Base of every error the lab raises. Keyword facts become attributes."""

    def __init__(self, message: str = "", **facts: Any) -> None:
        super().__init__(message)
        self.message = message
        self.facts = facts
        for key, value in facts.items():
            setattr(self, key, value)

    def __str__(self) -> str:
        return self.message or self.__class__.__name__


class ConfigError(LabError):
    pass


class NodeError(LabError):
    pass


class JavaNotFound(NodeError):
    pass


class MavenError(NodeError):
    pass


class PortInUse(NodeError):
    pass


class NodeDied(NodeError):
    pass


class NodeTimeout(NodeError):
    pass


class ClusterError(LabError):
    pass


class ConnectError(ClusterError):
    pass


class RequestError(ClusterError):
    pass


class RequestTimeout(RequestError):
    pass


class Unavailable(RequestError):
    pass


class InvalidRequest(RequestError):
    pass


class InListTooLong(InvalidRequest):
    pass


class LwtUnavailable(InvalidRequest):
    pass


class Overloaded(RequestError):
    pass


class AdminError(ClusterError):
    pass


class RttProxyError(ClusterError):
    pass


class SchemaError(LabError):
    pass


class BucketWidthChanged(SchemaError):
    pass


class ValidationError(LabError, ValueError):
    pass


class InvalidId(ValidationError):
    pass


class Bit63Violation(ValidationError):
    pass


class InvalidSeq(ValidationError):
    pass


class PayloadTooLarge(ValidationError):
    pass


class UnknownRetentionClass(ValidationError):
    pass


class UnknownEnum(ValidationError):
    pass


class BadRunFile(ValidationError):
    """A file of a run folder (or a profile) is unreadable, malformed, of the wrong type, or names a
    path outside its folder. Carries ``file`` and ``field`` (None for the whole file)."""


class StoreError(LabError):
    pass


class BucketOverflow(StoreError):
    pass


class NotFound(StoreError):
    pass


class InvalidState(StoreError):
    pass


class HeadConflict(StoreError):
    pass


class Fenced(StoreError):
    """This writer lost the conversation to a higher fencing epoch (design §2.4): raised before
    anything is written. Facts: tenant_id, conversation_id, epoch (this writer's), head_epoch."""


class ReactionConflict(StoreError):
    pass


class OutboxError(StoreError):
    pass


class HotWindowError(StoreError):
    pass


class CryptoError(LabError):
    pass


class DecryptError(CryptoError):
    pass


class KeyDestroyed(CryptoError):
    pass


class KeyNotCached(LabError):
    """A key lookup made with ``cached_only`` found its key not in the DEK cache: a read on the
    driver's loop thread never waits for the key store, so its walk reads the keys in a blocking
    step and decodes again. A signal inside the store (no CryptoError: a key that failed is not
    one), never an error a caller sees."""


class CrashInjected(LabError):
    pass


class CalibrationError(LabError):
    pass


class LoadError(LabError):
    """A load run could not start or its processes failed."""


class CoordinatorError(LoadError):
    """The master's coordinator could not be reached or refused a worker."""


class BenchError(LabError):
    """A benchmark could not measure: a profiler run or a benchmark's own workload failed."""


class LabWarning(UserWarning):
    """Base of the lab's warnings: something worked, but not as the user meant it to."""

    def __init__(self, message: str = "", **facts: Any) -> None:
        super().__init__(message)
        self.message = message
        self.facts = facts


class CredentialsNotUsed(LabWarning):
    pass
