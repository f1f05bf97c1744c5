"""conversation_head: the monotonic per-conversation head (design §2.4, §5.1 step 7).

The send path hands a :class:`HeadUpdate` to :class:`HeadWriter` after the ack; a
background worker applies it, so a slow or failing head never delays SEND_ACK nor fanout
(§7.4). Failures are retried and, when retries run out, counted (``head_update_failures``).

Monotonic. A blind write gives no ordering guarantee, so the writer reads the head, compares
in the application and only then writes (§2.4); an update whose conversation_seq is below
the stored one is dropped and counted (``head_regressions_dropped``). One worker thread per
store applies updates in submission order, so this store never races itself; two writers
on one conversation race only in the read-to-write gap, as the design accepts.

Failover form (deviation, spec README "Lab decisions"). §2.4's
``IF fencing_epoch < ? OR (fencing_epoch = ? AND head_version < ?)`` cannot run: CQL ``IF``
has no ``OR``. :meth:`HeadWriter.apply` in failover mode therefore reads (epoch, version),
evaluates that predicate in the application, and writes with the compare-and-set
``IF fencing_epoch = <read> AND head_version = <read>``; losing the race re-reads and
retries (``head_cas_retries``). head_version is the conversation_seq of the update, which
only grows within a writer's epoch.

preview_or_placeholder is sealed with the conversation DEK (§6) and the AAD of
(tenant, conversation, latest_conversation_seq, key_version). The table has no dek_id column,
so the blob is ``key_version (4 bytes BE) || sealed envelope``; the envelope is the one
of :mod:`lab.store.records` (flag byte || preview), and an E2EE message gets an empty placeholder
because the server cannot read its text.
"""
from __future__ import annotations

import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from lab.store.context import StoreContext
from lab.store.crypto import KEY_SCOPE_CONVERSATION, conversation_dek_key_id
from lab.errors import ClusterError, CrashInjected, CryptoError, LabError, ValidationError
from lab.store.ids import DekId, blob_to_u128, check_bigint, check_conversation_seq, parse_uuid, u128_to_blob
from lab.store.records import open_payload, seal_payload

__all__ = ["ConversationHead", "HeadUpdate", "HeadWriter", "read_head"]

PREVIEW_MAX_BYTES = 128
KEY_VERSION_BYTES = 4
HEAD_WRITE_ATTEMPTS = 3
HEAD_RETRY_BACKOFF_SECONDS = 0.05
HEAD_CAS_ATTEMPTS = 8
# What "no messages trimmed yet" reads as: the design's E bound with nothing below seq 1.
# Only lab.store.earliest (the advancer) moves it; the head writer never writes E.
EARLIEST_AVAILABLE_DEFAULT = 1

_HEAD_COLUMNS = ("latest_conversation_seq, earliest_available_conversation_seq, last_message_id, "
                 "last_activity_id, last_sender_id, preview_or_placeholder, member_count, updated_at, "
                 "fencing_epoch, head_version")
_KEY = ("tenant_id", "conversation_id")


@dataclass(frozen=True, kw_only=True)
class ConversationHead:
    tenant_id: uuid.UUID
    conversation_id: uuid.UUID
    latest_conversation_seq: int
    earliest_available_conversation_seq: int = EARLIEST_AVAILABLE_DEFAULT
    last_message_id: int | None = None
    last_activity_id: int | None = None
    last_sender_id: uuid.UUID | None = None
    preview: bytes | None = field(default=None, repr=False)  # decrypted; None if absent/unreadable
    preview_e2ee: bool = False
    member_count: int | None = None
    updated_at_ms: int | None = None
    fencing_epoch: int | None = None
    head_version: int | None = None


@dataclass(frozen=True, kw_only=True)
class HeadUpdate:
    tenant_id: uuid.UUID
    conversation_id: uuid.UUID
    conversation_seq: int
    message_id: int
    last_activity_id: int
    sender_id: uuid.UUID
    preview: bytes = field(default=b"", repr=False)
    e2ee: bool = False

    def __post_init__(self) -> None:
        # Checked here, not at apply time: submit() runs on another thread, where a bad
        # value would only surface as a counted failure instead of the caller's error.
        for name in ("tenant_id", "conversation_id", "sender_id"):
            object.__setattr__(self, name, parse_uuid(getattr(self, name)))
        check_conversation_seq(self.conversation_seq)
        u128_to_blob(self.message_id)
        u128_to_blob(self.last_activity_id)
        if not isinstance(self.preview, (bytes, bytearray, memoryview)):
            raise ValidationError(f"preview must be bytes, got {type(self.preview).__name__}", field="preview")
        if not isinstance(self.e2ee, bool):
            raise ValidationError(f"e2ee must be a bool, got {self.e2ee!r}", field="e2ee")


def _seal_preview(ctx: StoreContext, update: HeadUpdate) -> bytes:
    text = b"" if update.e2ee else bytes(update.preview[:PREVIEW_MAX_BYTES])
    blob, dek_id = seal_payload(text, e2ee=update.e2ee, encryptor=ctx.encryptor, tenant_id=update.tenant_id,
                                conversation_id=update.conversation_id, conversation_seq=update.conversation_seq)
    return dek_id.key_version.to_bytes(KEY_VERSION_BYTES, "big") + blob


def _open_preview(ctx: StoreContext, tenant_id: uuid.UUID, conversation_id: uuid.UUID, seq: int,
                  blob: bytes) -> tuple[bytes | None, bool]:
    if blob is None or len(blob) <= KEY_VERSION_BYTES:
        return None, False
    version = int.from_bytes(blob[:KEY_VERSION_BYTES], "big")
    dek_id = DekId(key_scope=KEY_SCOPE_CONVERSATION, key_id=conversation_dek_key_id(tenant_id, conversation_id),
                   key_version=version)
    try:
        return open_payload(blob[KEY_VERSION_BYTES:], encryptor=ctx.encryptor, tenant_id=tenant_id,
                            conversation_id=conversation_id, conversation_seq=seq, dek_id=dek_id)
    except (CryptoError, ValidationError):
        # An erased conversation (or a preview sealed for another seq) must not make the
        # head unreadable: the bounds are what the read path needs from it.
        return None, False


def read_head(ctx: StoreContext, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str) -> ConversationHead | None:
    """The stored head (one point read), or None for a conversation without one."""
    tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
    stmt = ctx.prepare(f"SELECT {_HEAD_COLUMNS} FROM {{ks}}.conversation_head WHERE tenant_id = ? AND conversation_id = ?",
                       key_columns=_KEY)
    row = ctx.connection.execute(stmt, (tenant_id, conversation_id)).one()
    if row is None or row.latest_conversation_seq is None:
        return None
    preview, e2ee = _open_preview(ctx, tenant_id, conversation_id, row.latest_conversation_seq,
                                  row.preview_or_placeholder)
    earliest = row.earliest_available_conversation_seq
    return ConversationHead(
        tenant_id=tenant_id, conversation_id=conversation_id, latest_conversation_seq=row.latest_conversation_seq,
        earliest_available_conversation_seq=EARLIEST_AVAILABLE_DEFAULT if earliest is None else earliest,
        last_message_id=None if row.last_message_id is None else blob_to_u128(row.last_message_id),
        last_activity_id=None if row.last_activity_id is None else blob_to_u128(row.last_activity_id),
        last_sender_id=row.last_sender_id, preview=preview, preview_e2ee=e2ee, member_count=row.member_count,
        updated_at_ms=row.updated_at, fencing_epoch=row.fencing_epoch, head_version=row.head_version)


class HeadWriter:
    """Applies head updates on one background thread (``submit``) or inline (``apply``)."""

    def __init__(self, ctx: StoreContext, *, fencing_epoch: int = 0, failover: bool = False) -> None:
        self.ctx = ctx
        self.fencing_epoch = check_bigint(fencing_epoch, column="fencing_epoch")
        self.failover = failover
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="conversation-head")
        self._closed = False
        self._sets = ("latest_conversation_seq = ?, last_message_id = ?, last_activity_id = ?, last_sender_id = ?, "
                      "preview_or_placeholder = ?, updated_at = ?, fencing_epoch = ?, head_version = ?")

    # -- statements ---------------------------------------------------------------------------
    def _select(self):
        return self.ctx.prepare("SELECT latest_conversation_seq, fencing_epoch, head_version FROM {ks}.conversation_head "
                                "WHERE tenant_id = ? AND conversation_id = ?", key_columns=_KEY)

    def _values(self, update: HeadUpdate) -> tuple:
        seq = check_conversation_seq(update.conversation_seq)
        return (seq, u128_to_blob(update.message_id), u128_to_blob(update.last_activity_id), update.sender_id,
                _seal_preview(self.ctx, update), self.ctx.clock_ms(), self.fencing_epoch, seq)

    # -- applying -----------------------------------------------------------------------------
    def submit(self, update: HeadUpdate) -> Future:
        """Queue ``update``; never raises for the update's own failures (they are counted)."""
        return self._executor.submit(self._apply_counted, update)

    def _apply_counted(self, update: HeadUpdate) -> str:
        self.ctx.faults.hit("before_head")
        for attempt in range(HEAD_WRITE_ATTEMPTS):
            try:
                return self.apply(update)
            except ClusterError:  # transient: timeouts, unavailable replicas
                if attempt + 1 == HEAD_WRITE_ATTEMPTS:
                    break
                time.sleep(HEAD_RETRY_BACKOFF_SECONDS * (attempt + 1))
            except CrashInjected:
                raise
            except LabError:  # e.g. the conversation's DEK was erased: retrying cannot help
                break
        # Nobody waits on this future: an uncounted failure would be invisible.
        self.ctx.alerts.incr("head_update_failures")
        return "failed"

    def apply(self, update: HeadUpdate) -> str:
        """Apply now. Returns "written", "unchanged" (same seq already there) or "dropped"."""
        return self._apply_cas(update) if self.failover else self._apply_blind(update)

    def _apply_blind(self, update: HeadUpdate) -> str:
        key = (update.tenant_id, update.conversation_id)
        row = self.ctx.connection.execute(self._select(), key).one()
        verdict = self._compare(update, row)
        if verdict != "write":
            return verdict
        stmt = self.ctx.prepare(f"UPDATE {{ks}}.conversation_head SET {self._sets} "
                                "WHERE tenant_id = ? AND conversation_id = ?")
        self.ctx.connection.execute(stmt, (*self._values(update), *key))
        return "written"

    def _compare(self, update: HeadUpdate, row) -> str:
        latest = None if row is None else row.latest_conversation_seq
        if latest is not None and latest > update.conversation_seq:
            self.ctx.alerts.incr("head_regressions_dropped")
            return "dropped"
        if latest == update.conversation_seq:
            return "unchanged"  # a resumed send re-submitting the same head
        return "write"

    def _apply_cas(self, update: HeadUpdate) -> str:
        key = (update.tenant_id, update.conversation_id)
        insert = self.ctx.prepare(
            "INSERT INTO {ks}.conversation_head (tenant_id, conversation_id, latest_conversation_seq, last_message_id, "
            "last_activity_id, last_sender_id, preview_or_placeholder, updated_at, fencing_epoch, head_version) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS")
        cas = self.ctx.prepare(f"UPDATE {{ks}}.conversation_head SET {self._sets} WHERE tenant_id = ? AND "
                               "conversation_id = ? IF fencing_epoch = ? AND head_version = ?")
        for _ in range(HEAD_CAS_ATTEMPTS):
            row = self.ctx.connection.execute(self._select(), key, consistency="SERIAL").one()
            if row is None:
                applied = self.ctx.connection.execute(insert, (*key, *self._values(update))).one()
            else:
                epoch, version = row.fencing_epoch, row.head_version
                # §2.4's predicate, evaluated here because CQL IF has no OR. A missing epoch or
                # version (a row written before fencing existed) loses to any fenced writer.
                newer = (epoch is None or self.fencing_epoch > epoch
                         or (self.fencing_epoch == epoch and (version is None or update.conversation_seq > version)))
                if not newer:
                    verdict = self._compare(update, row)
                    if verdict == "write":  # same seq ahead but fenced out: still a dropped regression
                        self.ctx.alerts.incr("head_regressions_dropped")
                        return "dropped"
                    return verdict
                verdict = self._compare(update, row)
                if verdict != "write":
                    return verdict
                applied = self.ctx.connection.execute(cas, (*self._values(update), *key, epoch, version)).one()
            if applied[0]:
                return "written"
            self.ctx.alerts.incr("head_cas_retries")
        self.ctx.alerts.incr("head_update_failures")
        return "failed"

    def drain(self, timeout_seconds: float | None = None) -> None:
        """Wait until every update submitted so far has been applied (one worker: FIFO)."""
        if self._closed:
            return
        self._executor.submit(lambda: None).result(timeout=timeout_seconds)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._executor.shutdown(wait=True)
