"""Encryption at rest of payload_or_ciphertext and preview_or_placeholder (design §6).

Each conversation has a data encryption key (DEK). Rows store ``dek_id`` =
("conversation", "<tenant>:<conversation>", version) so that:

- compliance erasure needs no DELETE (§3): destroying the conversation's DEKs makes every
  row unreadable while the rows themselves wait for their TTL;
- rotation adds a version; rows keep naming the version that sealed them.

Cipher: AES-256-GCM, blob = 12-byte random nonce || ciphertext || 16-byte tag. Random
nonces are safe here because one key only ever sees one conversation's messages, far below
GCM's 2**32 messages-per-key bound. The AAD binds the row's coordinates,
``tenant_id || conversation_id || conversation_seq (8 B BE) || key_version (4 B BE)``, so a
ciphertext copied to another row, conversation or tenant fails to decrypt.

E2EE (``e2ee=True``): the payload is the sender's end-to-end ciphertext (flags.ENCRYPTED).
The server does not hold that key and never interprets, parses or decrypts that layer; it
still seals the bytes with the DEK like any payload, so crypto-erasure covers them too, and
``decrypt`` hands back the E2EE ciphertext unchanged. The flag does not enter the AAD: §6
fixes the AAD, and the flag lives in the row beside the blob.

Key material never appears in a repr, str, error or log line. :class:`LocalKeyStore` keeps
DEKs in a local SQLite file in the clear (mode 0600): a production store wraps them with a
KMS key; the lab measures the store, not the KMS.
"""
from __future__ import annotations

import abc
import contextlib
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from lab.constants import Constants
from lab.store.sqlite_file import SQLITE_BUSY_TIMEOUT_SECONDS, SqliteFile
from lab.errors import CryptoError, DecryptError, KeyDestroyed, ValidationError
from lab.store.ids import DEK_KEY_VERSION_MAX, DekId, check_bigint, parse_uuid

__all__ = ["AES_KEY_BYTES", "DataKey", "Encryptor", "InMemoryKeyStore", "KEYSTORES", "KeyStore",
           "LocalKeyStore", "NONCE_BYTES", "Sealed", "TAG_BYTES", "aad", "conversation_dek_key_id",
           "open_keystore"]

_DEFAULTS = Constants.appendix_b()

AES_KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
KEY_SCOPE_CONVERSATION = "conversation"
DEFAULT_DEK_CACHE_TTL_SECONDS = _DEFAULTS.dek_cache_ttl_seconds
# Expired cache entries are dropped lazily; past this size a sweep keeps memory bounded by
# the keys used within one TTL.
_DEK_CACHE_SWEEP_ENTRIES = 10_000


def aad(tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str, conversation_seq: int,
        key_version: int) -> bytes:
    """Associated data binding a ciphertext to its row (§6), 44 bytes."""
    conversation_seq = check_bigint(conversation_seq, column="conversation_seq")
    if not isinstance(key_version, int) or isinstance(key_version, bool) \
            or not 1 <= key_version <= DEK_KEY_VERSION_MAX:
        raise ValidationError(f"key_version must be an int in 1..2**31-1, got {key_version!r}",
                              field="key_version", value=key_version)
    return (parse_uuid(tenant_id).bytes + parse_uuid(conversation_id).bytes
            + conversation_seq.to_bytes(8, "big") + key_version.to_bytes(4, "big"))


def conversation_dek_key_id(tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str) -> str:
    return f"{parse_uuid(tenant_id)}:{parse_uuid(conversation_id)}"


@dataclass(frozen=True, kw_only=True)
class DataKey:
    """A DEK and its id. ``material`` is kept out of repr so a key never reaches a log."""

    dek_id: DekId
    material: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.material, bytes) or len(self.material) != AES_KEY_BYTES:
            raise CryptoError("a DEK must be 32 bytes", dek_id=self.dek_id)


class Sealed(NamedTuple):
    """What :meth:`Encryptor.encrypt` returns: the column values blob and dek_id."""

    blob: bytes
    dek_id: DekId


class KeyStore(abc.ABC):
    """Where conversation DEKs live. Implementations must be safe for concurrent callers."""

    @abc.abstractmethod
    def current(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> DataKey:
        """The newest DEK of the conversation, created (version 1) on first use.

        Raises KeyDestroyed once the conversation was erased: a new key must not quietly
        resurrect an erased conversation.
        """

    @abc.abstractmethod
    def get(self, dek_id: DekId) -> DataKey:
        """A specific version, for decrypting rows sealed before a rotation."""

    @abc.abstractmethod
    def rotate(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> DekId:
        """Add a new version; earlier versions keep decrypting."""

    @abc.abstractmethod
    def destroy(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> None:
        """Crypto-erase every version of the conversation's DEK. Idempotent."""

    def close(self) -> None:
        pass

    def __enter__(self) -> KeyStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS dek (
    key_scope     TEXT    NOT NULL,
    key_id        TEXT    NOT NULL,
    key_version   INTEGER NOT NULL,
    material      BLOB    NOT NULL,
    created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (key_scope, key_id, key_version)
);
CREATE TABLE IF NOT EXISTS erased (
    key_scope     TEXT    NOT NULL,
    key_id        TEXT    NOT NULL,
    erased_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (key_scope, key_id)
);
"""


class LocalKeyStore(KeyStore):
    """DEKs in a SQLite file, shared safely by threads and by several processes.

    Writers take SQLite's write lock up front (``BEGIN IMMEDIATE``), so two processes
    creating the first key of a conversation agree on one version 1, and concurrent
    rotations get distinct versions. ``destroy`` marks the conversation erased and
    overwrites its key material with zeros, with ``secure_delete`` on (freed space is
    zeroed), then truncates the WAL, so the material leaves the files;
    what the filesystem or its backups keep is outside the lab's reach.
    """

    def __init__(self, path: Path | str, *, busy_timeout_seconds: float = SQLITE_BUSY_TIMEOUT_SECONDS) -> None:
        self.path = str(path)
        self._busy_timeout_seconds = busy_timeout_seconds
        self._db = SqliteFile(path, schema=_SCHEMA, error=CryptoError, what="key store",
                              busy_timeout_seconds=busy_timeout_seconds, secure_delete=True, private=True)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"

    def _session(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """The connection under the lock; SQLite failures surface as CryptoError."""
        return self._db.session()

    def _write(self, work: Callable[[sqlite3.Connection], object]) -> object:
        return self._db.write(work)

    @staticmethod
    def _check_not_erased(conn: sqlite3.Connection, key_id: str) -> None:
        row = conn.execute("SELECT 1 FROM erased WHERE key_scope = ? AND key_id = ?",
                           (KEY_SCOPE_CONVERSATION, key_id)).fetchone()
        if row:
            raise KeyDestroyed(f"the DEK of conversation {key_id} was destroyed", key_id=key_id)

    @staticmethod
    def _newest(conn: sqlite3.Connection, key_id: str) -> DataKey | None:
        row = conn.execute("SELECT key_version, material FROM dek WHERE key_scope = ? AND key_id = ? "
                           "ORDER BY key_version DESC LIMIT 1", (KEY_SCOPE_CONVERSATION, key_id)).fetchone()
        if row is None:
            return None
        return DataKey(dek_id=DekId(key_scope=KEY_SCOPE_CONVERSATION, key_id=key_id, key_version=row[0]),
                       material=bytes(row[1]))

    @staticmethod
    def _insert(conn: sqlite3.Connection, key_id: str, version: int) -> DataKey:
        key = DataKey(dek_id=DekId(key_scope=KEY_SCOPE_CONVERSATION, key_id=key_id, key_version=version),
                      material=AESGCM.generate_key(bit_length=AES_KEY_BYTES * 8))
        conn.execute("INSERT INTO dek (key_scope, key_id, key_version, material, created_at_ms) "
                     "VALUES (?, ?, ?, ?, ?)",
                     (KEY_SCOPE_CONVERSATION, key_id, version, key.material, time.time_ns() // 1_000_000))
        return key

    def current(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> DataKey:
        key_id = conversation_dek_key_id(tenant_id, conversation_id)
        with self._session() as conn:  # read first: the common case needs no write lock
            self._check_not_erased(conn, key_id)
            key = self._newest(conn, key_id)
        if key is not None:
            return key

        def create(conn: sqlite3.Connection) -> DataKey:
            self._check_not_erased(conn, key_id)
            return self._newest(conn, key_id) or self._insert(conn, key_id, 1)
        return self._write(create)  # type: ignore[return-value]

    def get(self, dek_id: DekId) -> DataKey:
        with self._session() as conn:
            if dek_id.key_scope == KEY_SCOPE_CONVERSATION:
                self._check_not_erased(conn, dek_id.key_id)
            row = conn.execute("SELECT material FROM dek WHERE key_scope = ? AND key_id = ? AND key_version = ?",
                               dek_id.as_tuple()).fetchone()
        if row is None:
            raise DecryptError(f"no DEK {dek_id.key_scope}/{dek_id.key_id} version {dek_id.key_version}",
                               dek_id=dek_id)
        return DataKey(dek_id=dek_id, material=bytes(row[0]))

    def rotate(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> DekId:
        key_id = conversation_dek_key_id(tenant_id, conversation_id)

        def add_version(conn: sqlite3.Connection) -> DekId:
            self._check_not_erased(conn, key_id)
            newest = self._newest(conn, key_id)
            version = 1 if newest is None else newest.dek_id.key_version + 1
            return self._insert(conn, key_id, version).dek_id
        return self._write(add_version)  # type: ignore[return-value]

    def destroy(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> None:
        key_id = conversation_dek_key_id(tenant_id, conversation_id)

        def erase(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT OR IGNORE INTO erased (key_scope, key_id, erased_at_ms) VALUES (?, ?, ?)",
                         (KEY_SCOPE_CONVERSATION, key_id, time.time_ns() // 1_000_000))
            # Overwrite rather than remove: the row stays as a record that the version
            # existed, and secure_delete zeroes the cell that held the key.
            conn.execute("UPDATE dek SET material = zeroblob(length(material)) WHERE key_scope = ? AND key_id = ?",
                         (KEY_SCOPE_CONVERSATION, key_id))
        self._write(erase)
        if self.path != ":memory:":
            with self._session() as conn:
                # Copy the zeroed pages into the main file and empty the WAL, which still
                # holds the frames that once wrote the key. Best effort: a concurrent reader
                # can delay it until the next checkpoint.
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def close(self) -> None:
        self._db.close()


class InMemoryKeyStore(LocalKeyStore):
    """Same behaviour without a file, for pure tests; keys die with the object."""

    def __init__(self) -> None:
        super().__init__(":memory:")

    def __repr__(self) -> str:
        return "InMemoryKeyStore()"


KEYSTORES: dict[str, type[KeyStore]] = {"local": LocalKeyStore, "memory": InMemoryKeyStore}


def open_keystore(name: str, **options: object) -> KeyStore:
    """A key store by registry name, e.g. ``open_keystore("local", path=...)``."""
    try:
        cls = KEYSTORES[name]
    except KeyError:
        raise ValidationError(f"unknown key store {name!r} (known: {', '.join(KEYSTORES)})", name=name) from None
    return cls(**options)  # type: ignore[call-arg]


class _CacheEntry(NamedTuple):
    key: DataKey
    cipher: AESGCM
    expires_at: float


class Encryptor:
    """Seals and opens row payloads with cached conversation DEKs (§6, §21.3.4).

    The cache saves a key-store round trip per message for ``cache_ttl_seconds``
    (appendix B.5.3). ``destroy``/``rotate`` through this object drop its cache at once;
    a destroy done elsewhere (another process) takes effect here when entries expire,
    which is the bound that TTL exists to set. ``cache_ttl_seconds=0`` disables caching.
    """

    def __init__(self, keystore: KeyStore, cache_ttl_seconds: float = DEFAULT_DEK_CACHE_TTL_SECONDS, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(keystore, KeyStore):
            raise ValidationError("keystore must be a KeyStore")
        if not isinstance(cache_ttl_seconds, (int, float)) or isinstance(cache_ttl_seconds, bool) \
                or cache_ttl_seconds < 0:
            raise ValidationError(f"cache_ttl_seconds must be >= 0, got {cache_ttl_seconds!r}",
                                  value=cache_ttl_seconds)
        self.keystore = keystore
        self.cache_ttl_seconds = cache_ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._current: dict[str, _CacheEntry] = {}
        self._by_id: dict[DekId, _CacheEntry] = {}
        # Bumped by every invalidation: a key loaded before a destroy must not be cached after it.
        self._generation = 0

    def __repr__(self) -> str:
        return f"Encryptor(keystore={self.keystore!r}, cache_ttl_seconds={self.cache_ttl_seconds})"

    # -- cache --------------------------------------------------------------------------------

    def _cached(self, table: dict, slot: object, load: Callable[[], DataKey]) -> _CacheEntry:
        now = self._clock()
        with self._lock:
            entry = table.get(slot)
            if entry is not None and entry.expires_at > now:
                return entry
            generation = self._generation
        key = load()  # outside the lock: a slow key store must not serialise every caller
        entry = _CacheEntry(key=key, cipher=AESGCM(key.material), expires_at=now + self.cache_ttl_seconds)
        if self.cache_ttl_seconds > 0:
            with self._lock:
                if generation != self._generation:
                    return entry
                if len(table) >= _DEK_CACHE_SWEEP_ENTRIES:
                    for stale in [s for s, e in table.items() if e.expires_at <= now]:
                        del table[stale]
                table[slot] = entry
        return entry

    def invalidate(self, tenant_id: uuid.UUID | str | None = None,
                   conversation_id: uuid.UUID | str | None = None) -> None:
        """Drop cached keys of one conversation, or all of them when called without ids."""
        with self._lock:
            self._generation += 1
            if tenant_id is None and conversation_id is None:
                self._current.clear()
                self._by_id.clear()
                return
            key_id = conversation_dek_key_id(tenant_id, conversation_id)  # type: ignore[arg-type]
            self._current.pop(key_id, None)
            for dek_id in [d for d in self._by_id if d.key_id == key_id]:
                del self._by_id[dek_id]

    # -- keys ---------------------------------------------------------------------------------

    def rotate(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str) -> DekId:
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        dek_id = self.keystore.rotate(tenant_id, conversation_id)
        self.invalidate(tenant_id, conversation_id)
        return dek_id

    def destroy(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str) -> None:
        """Crypto-erasure (§3): every row of the conversation becomes unreadable."""
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        self.keystore.destroy(tenant_id, conversation_id)
        self.invalidate(tenant_id, conversation_id)

    # -- payloads -----------------------------------------------------------------------------

    def encrypt(self, plaintext: bytes, *, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str,
                conversation_seq: int, e2ee: bool = False) -> Sealed:
        """Seal with the conversation's newest DEK. ``e2ee``: see the module docstring."""
        if not isinstance(plaintext, (bytes, bytearray, memoryview)):
            raise ValidationError(f"plaintext must be bytes, got {type(plaintext).__name__}")
        _check_e2ee(e2ee)
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        key_id = conversation_dek_key_id(tenant_id, conversation_id)
        entry = self._cached(self._current, key_id, lambda: self.keystore.current(tenant_id, conversation_id))
        associated = aad(tenant_id, conversation_id, conversation_seq, entry.key.dek_id.key_version)
        nonce = os.urandom(NONCE_BYTES)
        return Sealed(blob=nonce + entry.cipher.encrypt(nonce, bytes(plaintext), associated), dek_id=entry.key.dek_id)

    def decrypt(self, blob: bytes, *, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str,
                conversation_seq: int, dek_id: DekId | tuple[str, str, int], e2ee: bool = False) -> bytes:
        """Open a row's blob; any mismatch of key, row coordinates or bytes is DecryptError.

        With ``e2ee=True`` the result is the client's E2EE ciphertext, returned as is.
        """
        _check_e2ee(e2ee)
        if not isinstance(dek_id, DekId):
            dek_id = DekId.from_tuple(dek_id)
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        facts = {"tenant_id": tenant_id, "conversation_id": conversation_id,
                 "conversation_seq": conversation_seq, "dek_id": dek_id}
        associated = aad(tenant_id, conversation_id, conversation_seq, dek_id.key_version)
        if dek_id.key_scope != KEY_SCOPE_CONVERSATION \
                or dek_id.key_id != conversation_dek_key_id(tenant_id, conversation_id):
            raise DecryptError("dek_id names another conversation's key: the row was moved", **facts)
        if not isinstance(blob, (bytes, bytearray, memoryview)) or len(blob) < NONCE_BYTES + TAG_BYTES:
            raise DecryptError("ciphertext blob is too short or not bytes", **facts)
        blob = bytes(blob)
        entry = self._cached(self._by_id, dek_id, lambda: self.keystore.get(dek_id))
        try:
            return entry.cipher.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], associated)
        except InvalidTag:
            raise DecryptError("authentication failed: wrong key, wrong row (AAD) or tampered ciphertext",
                               **facts) from None
        except (ValueError, OverflowError) as exc:
            raise DecryptError(f"cannot decrypt: {type(exc).__name__}", **facts) from None


def _check_e2ee(e2ee: object) -> None:
    if not isinstance(e2ee, bool):
        raise ValidationError(f"e2ee must be a bool, got {e2ee!r}", field="e2ee")
