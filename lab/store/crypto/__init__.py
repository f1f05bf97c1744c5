"""Encryption at rest of payload_or_ciphertext and preview_or_placeholder (design §6).

    cipher      AES-256-GCM blob format and the AAD that binds a ciphertext to its row
    keystores   where DEKs live: the KeyStore interface, the SQLite-file and in-memory
                stores, the name -> class registry (KEYSTORES, open_keystore)
    dek_cache   the TTL cache of loaded keys (appendix B.5.3 dek_cache_ttl_seconds)
    encryptor   Encryptor: seals and opens row payloads with cipher + keystore + cache

More: docs/store-internals.md.
"""
from __future__ import annotations

from lab.store.crypto.cipher import (AES_KEY_BYTES, KEY_SCOPE_CONVERSATION, NONCE_BYTES, TAG_BYTES, Sealed, aad,
                                     conversation_dek_key_id)
from lab.store.crypto.dek_cache import DEFAULT_DEK_CACHE_TTL_SECONDS, DekCache
from lab.store.crypto.encryptor import Encryptor
from lab.store.crypto.keystores import KEYSTORES, DataKey, InMemoryKeyStore, KeyStore, LocalKeyStore, open_keystore

__all__ = ["AES_KEY_BYTES", "DEFAULT_DEK_CACHE_TTL_SECONDS", "DataKey", "DekCache", "Encryptor", "InMemoryKeyStore",
           "KEYSTORES", "KEY_SCOPE_CONVERSATION", "KeyStore", "LocalKeyStore", "NONCE_BYTES", "Sealed", "TAG_BYTES",
           "aad", "conversation_dek_key_id", "open_keystore"]
