"""Encryptor: seals and opens row payloads with the conversation's DEK (design §6, §21.3.4).

More: docs/store-internals.md.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from lab.errors import CryptoError, DecryptError, KeyNotCached, LabError, ValidationError
from lab.store.crypto.cipher import (KEY_SCOPE_CONVERSATION, NONCE_BYTES, TAG_BYTES, Sealed, check_blob,
                                     conversation_dek_key_id, conversation_facts, open_blob, row_aad, seal_blob)
from lab.store.crypto.dek_cache import DEFAULT_DEK_CACHE_TTL_SECONDS, CachedKey, DekCache
from lab.store.crypto.keystores import KeyStore
from lab.store.rows.ids import BIT63, DekId, parse_uuid

__all__ = ["Encryptor", "MIN_BLOB_BYTES"]

MIN_BLOB_BYTES = NONCE_BYTES + TAG_BYTES


def _not_cached(dek_id: DekId) -> Any:
    raise KeyNotCached(f"the key {dek_id} is not cached", dek_id=dek_id)


class Encryptor:
    """Seals and opens row payloads with cached conversation DEKs. ``cache_ttl_seconds=0``
    disables caching; ``clock`` (monotonic seconds) times the cache entries."""

    def __init__(self, keystore: KeyStore, cache_ttl_seconds: float = DEFAULT_DEK_CACHE_TTL_SECONDS, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(keystore, KeyStore):
            raise ValidationError("keystore must be a KeyStore")
        self.keystore = keystore
        self._cache = DekCache(cache_ttl_seconds, clock=clock)
        self.cache_ttl_seconds = cache_ttl_seconds

    def __repr__(self) -> str:
        return f"Encryptor(keystore={self.keystore!r}, cache_ttl_seconds={self.cache_ttl_seconds})"

    def invalidate(self, tenant_id: uuid.UUID | str | None = None,
                   conversation_id: uuid.UUID | str | None = None) -> None:
        """Drop cached keys of one conversation, or all of them when called without ids."""
        if tenant_id is None and conversation_id is None:
            self._cache.invalidate()
        else:
            self._cache.invalidate(conversation_dek_key_id(tenant_id, conversation_id))  # type: ignore[arg-type]

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

    # -- keys ahead of use: a walk on the driver's loop loads a missing key in a blocking step ---
    def sealing_key_ready(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> bool:
        """Whether :meth:`encrypt` for the conversation would find its key cached (no key store read)."""
        return self._cache.holds_current(conversation_facts(tenant_id, conversation_id)[0])

    def load_sealing_key(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> None:
        """Read the conversation's newest key into the cache (a key store read: where blocking is
        allowed); raises what :meth:`encrypt` would (KeyDestroyed)."""
        key_id, _ = conversation_facts(tenant_id, conversation_id)
        self._cache.current(key_id, lambda: self.keystore.current(tenant_id, conversation_id))

    def unready_keys(self, dek_ids: Iterable[Any]) -> list[DekId]:
        """Of the dek_ids of a read's rows (tuples or DekIds; None and malformed ones skipped: their
        rows fail in the decode, as they would), those the cache does not hold."""
        values: Iterable[Any] = dek_ids
        if not isinstance(values, (set, frozenset)):  # a page's rows: mostly one key, asked as a set
            values = list(values)
            try:
                values = set(values)
            except TypeError:  # an unhashable value: the decode reports its row
                pass
        unready: dict[DekId, None] = {}
        for value in values:
            try:
                dek_id = value if isinstance(value, DekId) else DekId.from_tuple(value)
            except (LabError, TypeError, ValueError):
                continue
            if not self._cache.holds_version(dek_id):
                unready[dek_id] = None
        return list(unready)

    def load_keys(self, dek_ids: Iterable[Any]) -> None:
        """Read into the cache the keys of these dek_ids (a read's rows' values, as
        :meth:`unready_keys` takes them) that it does not hold: a key store read each. A key that
        cannot be had (destroyed, missing) is left out: the decode that needs it reports it as it
        always does."""
        for dek_id in self.unready_keys(dek_ids):
            try:
                self._cache.version(dek_id, lambda d=dek_id: self.keystore.get(d))
            except CryptoError:
                pass

    # -- payloads -----------------------------------------------------------------------------

    def encrypt(self, plaintext: bytes, *, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str,
                conversation_seq: int, e2ee: bool = False) -> Sealed:
        """Seal with the conversation's newest DEK. ``e2ee``: see the module docstring."""
        if not isinstance(plaintext, (bytes, bytearray, memoryview)):
            raise ValidationError(f"plaintext must be bytes, got {type(plaintext).__name__}")
        _check_e2ee(e2ee)
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        key_id, prefix = conversation_facts(tenant_id, conversation_id)
        entry = self._cache.current(key_id, lambda: self.keystore.current(tenant_id, conversation_id))
        associated = row_aad(prefix, conversation_seq, entry.key.dek_id.key_version)
        return Sealed(blob=seal_blob(entry.cipher, plaintext, associated), dek_id=entry.key.dek_id)

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
        key_id, prefix = conversation_facts(tenant_id, conversation_id)
        associated = row_aad(prefix, conversation_seq, dek_id.key_version)
        if dek_id.key_scope != KEY_SCOPE_CONVERSATION or dek_id.key_id != key_id:
            raise DecryptError("dek_id names another conversation's key: the row was moved", **facts)
        blob = check_blob(blob, facts=facts)  # before loading a key: a bad blob needs no key store call
        entry = self._cache.version(dek_id, lambda: self.keystore.get(dek_id))
        return open_blob(entry.cipher, blob, associated, facts=facts)


    def opening_key(self, *, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str,
                    dek_id: DekId | tuple[str, str, int], cached_only: bool = False) -> tuple[AESGCM, bytes, bytes]:
        """``(cipher, aad_prefix, version_suffix)`` that open the rows of one conversation sealed
        with ``dek_id``: a row's AAD is ``aad_prefix + conversation_seq (8 B BE) + version_suffix``.
        The key check and the key lookup (KeyDestroyed, DecryptError for a moved row) happen here,
        once per batch of rows instead of once per row (lab.store.rows.records.decode_rows).
        Meant for one read's rows: the key is held for the caller's read, not the cache TTL.
        ``cached_only``: raise :class:`KeyNotCached` instead of reading the key store."""
        entry, prefix, version, _ = self._opening_entry(tenant_id, conversation_id, dek_id, cached_only)
        return entry.cipher, prefix, version

    def native_opening_key(self, *, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str,
                           dek_id: DekId | tuple[str, str, int],
                           cached_only: bool = False) -> tuple[Any, bytes, bytes, DekId]:
        """:meth:`opening_key` with the key's compiled cipher (``lab_native.AesGcmKey``, None without
        lab_native) in place of the AESGCM object, and the parsed dek_id: what decode_rows' compiled
        path opens a page's rows with. Raises what :meth:`opening_key` raises."""
        entry, prefix, version, dek_id = self._opening_entry(tenant_id, conversation_id, dek_id, cached_only)
        return entry.native, prefix, version, dek_id

    def _opening_entry(self, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str,
                       dek_id: DekId | tuple[str, str, int],
                       cached_only: bool = False) -> tuple[CachedKey, bytes, bytes, DekId]:
        if not isinstance(dek_id, DekId):
            dek_id = DekId.from_tuple(dek_id)
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        key_id, prefix = conversation_facts(tenant_id, conversation_id)
        if dek_id.key_scope != KEY_SCOPE_CONVERSATION or dek_id.key_id != key_id:
            raise DecryptError("dek_id names another conversation's key: the row was moved", tenant_id=tenant_id,
                               conversation_id=conversation_id, dek_id=dek_id)
        entry = self._cache.version(dek_id, (lambda: _not_cached(dek_id)) if cached_only  # type: ignore[arg-type]
                                    else (lambda: self.keystore.get(dek_id)))
        return entry, prefix, dek_id.key_version.to_bytes(4, "big"), dek_id

    def opener(self, *, tenant_id: uuid.UUID | str, conversation_id: uuid.UUID | str,
               dek_id: DekId | tuple[str, str, int]) -> Callable[[bytes, int], bytes]:
        """``open(blob, conversation_seq) -> plaintext`` for the rows of one conversation sealed
        with ``dek_id`` (:meth:`opening_key` once, then one AES-GCM open per blob). Errors per
        blob are :meth:`decrypt`'s."""
        if not isinstance(dek_id, DekId):
            dek_id = DekId.from_tuple(dek_id)
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        cipher, prefix, version = self.opening_key(tenant_id=tenant_id, conversation_id=conversation_id,
                                                   dek_id=dek_id)

        def open_(blob: bytes, conversation_seq: int) -> bytes:
            if type(blob) is not bytes or len(blob) < MIN_BLOB_BYTES or type(conversation_seq) is not int \
                    or not 0 <= conversation_seq < BIT63:  # the unusual: decrypt() checks and names it
                return self.decrypt(blob, tenant_id=tenant_id, conversation_id=conversation_id,
                                    conversation_seq=conversation_seq, dek_id=dek_id)
            try:  # bytes slices: cheaper than a memoryview and its slices for a row's few hundred bytes
                return cipher.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:],
                                      prefix + conversation_seq.to_bytes(8, "big") + version)
            except InvalidTag:
                raise DecryptError("authentication failed: wrong key, wrong row (AAD) or tampered ciphertext",
                                   tenant_id=tenant_id, conversation_id=conversation_id,
                                   conversation_seq=conversation_seq, dek_id=dek_id) from None
        return open_


def _check_e2ee(e2ee: object) -> None:
    if not isinstance(e2ee, bool):
        raise ValidationError(f"e2ee must be a bool, got {e2ee!r}", field="e2ee")
