"""The at-rest cipher: AES-256-GCM blobs bound to their row by the AAD (design §6).

More: docs/store-internals.md.
"""
from __future__ import annotations

import functools
import itertools
import os
import threading
import uuid
from collections.abc import Mapping
from typing import NamedTuple

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from lab.errors import DecryptError, ValidationError
from lab.store.rows.ids import BIT63, DEK_KEY_VERSION_MAX, DekId, check_bigint, parse_uuid

__all__ = ["AES_KEY_BYTES", "CONVERSATION_FACTS_ENTRIES", "KEY_SCOPE_CONVERSATION", "NONCE_BYTES", "Sealed",
           "TAG_BYTES", "aad", "check_blob", "conversation_dek_key_id", "conversation_facts", "open_blob", "row_aad",
           "seal_blob"]

AES_KEY_BYTES = 32
NONCE_BYTES = 12
NONCE_FIXED_BYTES = 8  # random per process; the other 4 count the seals
NONCE_INVOCATIONS_MAX = 1 << 8 * (NONCE_BYTES - NONCE_FIXED_BYTES)
TAG_BYTES = 16
KEY_SCOPE_CONVERSATION = "conversation"
# conversations whose key id and AAD prefix are kept (two short strings each); sealing and
# opening a row otherwise formats both UUIDs every time (a third of a row's open in the profile)
CONVERSATION_FACTS_ENTRIES = 65536


class Sealed(NamedTuple):
    """What :meth:`Encryptor.encrypt` returns: the column values blob and dek_id."""

    blob: bytes
    dek_id: DekId


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
    return conversation_facts(parse_uuid(tenant_id), parse_uuid(conversation_id))[0]


@functools.lru_cache(maxsize=CONVERSATION_FACTS_ENTRIES)
def conversation_facts(tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> tuple[str, bytes]:
    """(DEK key_id, the AAD's 32-byte prefix ``tenant_id || conversation_id``) of a conversation,
    for parsed UUIDs; cached, because every sealed and opened row needs both."""
    return f"{tenant_id}:{conversation_id}", tenant_id.bytes + conversation_id.bytes


def row_aad(prefix: bytes, conversation_seq: int, key_version: int) -> bytes:
    """:func:`aad` from a :func:`conversation_facts` prefix; the checks of :func:`aad` run only
    when a value is not a plain int in range (they then raise the same errors)."""
    if type(conversation_seq) is int and 0 <= conversation_seq < BIT63 \
            and type(key_version) is int and 1 <= key_version <= DEK_KEY_VERSION_MAX:
        return prefix + conversation_seq.to_bytes(8, "big") + key_version.to_bytes(4, "big")
    return aad(uuid.UUID(bytes=prefix[:16]), uuid.UUID(bytes=prefix[16:]), conversation_seq, key_version)


class _Nonces:
    """Unique 12-byte GCM nonces: fixed field (8 random bytes) || invocation counter (4 bytes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reseed()
        os.register_at_fork(after_in_child=self._reseed)  # a child must not repeat its parent's nonces

    def _reseed(self) -> None:
        self._fixed = os.urandom(NONCE_FIXED_BYTES)
        self._counter = itertools.count()  # next() is atomic under the GIL

    def next(self) -> bytes:
        fixed, n = self._fixed, next(self._counter)
        if n >= NONCE_INVOCATIONS_MAX:  # 2**32 seals in one process: a new fixed field
            with self._lock:
                if self._fixed is fixed:
                    self._reseed()
            return self.next()
        return fixed + n.to_bytes(NONCE_BYTES - NONCE_FIXED_BYTES, "big")


_NONCES = _Nonces()


def seal_blob(cipher: AESGCM, plaintext: bytes, associated: bytes) -> bytes:
    nonce = _NONCES.next()
    return nonce + cipher.encrypt(nonce, bytes(plaintext), associated)


def check_blob(blob: object, *, facts: Mapping[str, object]) -> bytes:
    """``blob`` as bytes if it can be a sealed blob at all; checked before any key is loaded."""
    if not isinstance(blob, (bytes, bytearray, memoryview)) or len(blob) < NONCE_BYTES + TAG_BYTES:
        raise DecryptError("ciphertext blob is too short or not bytes", **facts)
    return bytes(blob)


def open_blob(cipher: AESGCM, blob: bytes, associated: bytes, *, facts: Mapping[str, object]) -> bytes:
    """The plaintext of a :func:`check_blob`-ed blob, or DecryptError carrying ``facts``
    (never the key or the bytes)."""
    try:
        return cipher.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], associated)
    except InvalidTag:
        raise DecryptError("authentication failed: wrong key, wrong row (AAD) or tampered ciphertext",
                           **facts) from None
    except (ValueError, OverflowError) as exc:
        raise DecryptError(f"cannot decrypt: {type(exc).__name__}", **facts) from None
