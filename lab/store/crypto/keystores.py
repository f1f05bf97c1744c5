"""Where conversation DEKs live (design §6, §21.3): the interface and its implementations.

More: docs/store-internals.md.
"""
from __future__ import annotations

import abc
import contextlib
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from lab.errors import CryptoError, DecryptError, KeyDestroyed, ValidationError
from lab.store.plumbing.wall_clock import wall_clock_ms
from lab.store.crypto.cipher import AES_KEY_BYTES, KEY_SCOPE_CONVERSATION, conversation_dek_key_id
from lab.store.rows.ids import DekId
from lab.store.plumbing.sqlite_file import SQLITE_BUSY_TIMEOUT_SECONDS, SqliteFile

__all__ = ["DataKey", "InMemoryKeyStore", "KEYSTORES", "KeyStore", "LocalKeyStore", "open_keystore"]


@dataclass(frozen=True, kw_only=True)
class DataKey:
    """A DEK and its id. ``material`` is kept out of repr so a key never reaches a log."""

    dek_id: DekId
    material: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.material, bytes) or len(self.material) != AES_KEY_BYTES:
            raise CryptoError("a DEK must be 32 bytes", dek_id=self.dek_id)


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
                     (KEY_SCOPE_CONVERSATION, key_id, version, key.material, wall_clock_ms()))
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
                         (KEY_SCOPE_CONVERSATION, key_id, wall_clock_ms()))
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
