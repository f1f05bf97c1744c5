import json
import os
import stat
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.errors import (
    Bit63Violation,
    CryptoError,
    DecryptError,
    KeyDestroyed,
    ValidationError,
)
from lab.store import DekId
from lab.store.crypto import (
    DataKey,
    Encryptor,
    InMemoryKeyStore,
    KeyStore,
    LocalKeyStore,
    Sealed,
    aad,
    conversation_dek_key_id,
    open_keystore,
)

TENANT = uuid.UUID("11111111-1111-1111-1111-111111111111")
CONV = uuid.UUID("22222222-2222-2222-2222-222222222222")
OTHER_CONV = uuid.UUID("33333333-3333-3333-3333-333333333333")
OTHER_TENANT = uuid.UUID("44444444-4444-4444-4444-444444444444")
REPO = Path(__file__).resolve().parents[2]


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class CountingKeyStore(InMemoryKeyStore):
    def __init__(self):
        super().__init__()
        self.calls = {"current": 0, "get": 0}

    def current(self, tenant_id, conversation_id):
        self.calls["current"] += 1
        return super().current(tenant_id, conversation_id)

    def get(self, dek_id):
        self.calls["get"] += 1
        return super().get(dek_id)


@pytest.fixture
def enc():
    return Encryptor(InMemoryKeyStore())


def seal(enc, plaintext=b"hello", *, tenant=TENANT, conv=CONV, seq=7, e2ee=False):
    return enc.encrypt(plaintext, tenant_id=tenant, conversation_id=conv, conversation_seq=seq, e2ee=e2ee)


def open_(enc, sealed, *, tenant=TENANT, conv=CONV, seq=7, dek_id=None, e2ee=False):
    return enc.decrypt(sealed.blob, tenant_id=tenant, conversation_id=conv, conversation_seq=seq,
                       dek_id=dek_id or sealed.dek_id, e2ee=e2ee)


# --- AAD -----------------------------------------------------------------------------------

def test_aad_layout():
    data = aad(TENANT, CONV, 0x0102030405060708, 0x0A0B0C0D)
    assert len(data) == 44
    assert data[:16] == TENANT.bytes
    assert data[16:32] == CONV.bytes
    assert data[32:40] == bytes.fromhex("0102030405060708")
    assert data[40:] == bytes.fromhex("0a0b0c0d")
    assert aad(str(TENANT), str(CONV), 1, 1) == aad(TENANT, CONV, 1, 1)


def test_aad_guards_its_inputs():
    with pytest.raises(Bit63Violation):
        aad(TENANT, CONV, 2**63, 1)
    for version in (0, 2**31, True):
        with pytest.raises(ValidationError):
            aad(TENANT, CONV, 1, version)


# --- round trips ---------------------------------------------------------------------------

@settings(max_examples=60)
@given(plaintext=st.binary(max_size=4096), seq=st.integers(1, 2**63 - 1),
       tenant=st.uuids(), conv=st.uuids())
def test_round_trip(plaintext, seq, tenant, conv):
    enc = Encryptor(InMemoryKeyStore())
    sealed = seal(enc, plaintext, tenant=tenant, conv=conv, seq=seq)
    assert isinstance(sealed, Sealed)
    assert len(sealed.blob) == 12 + len(plaintext) + 16
    assert plaintext not in sealed.blob or len(plaintext) < 4
    assert open_(enc, sealed, tenant=tenant, conv=conv, seq=seq) == plaintext


def test_dek_id_names_the_conversation_key(enc):
    blob, dek_id = seal(enc)
    assert dek_id == DekId(key_scope="conversation", key_id=f"{TENANT}:{CONV}", key_version=1)
    assert conversation_dek_key_id(TENANT, CONV) == dek_id.key_id


def test_nonces_are_fresh(enc):
    assert seal(enc).blob[:12] != seal(enc).blob[:12]


def test_decrypt_accepts_the_dek_id_tuple_read_from_a_row(enc):
    sealed = seal(enc)
    assert open_(enc, sealed, dek_id=sealed.dek_id.as_tuple()) == b"hello"


# --- a moved, wrong-keyed or tampered ciphertext fails -------------------------------------

def test_a_ciphertext_moved_to_another_row_fails_to_decrypt(enc):
    sealed = seal(enc, seq=7)
    with pytest.raises(DecryptError) as info:
        open_(enc, sealed, seq=8)
    assert info.value.conversation_seq == 8


def test_a_ciphertext_moved_to_another_conversation_fails(enc):
    sealed = seal(enc)
    seal(enc, conv=OTHER_CONV)  # the other conversation has its own key
    with pytest.raises(DecryptError):
        open_(enc, sealed, conv=OTHER_CONV)  # with the original dek_id
    other_dek = DekId(key_scope="conversation", key_id=conversation_dek_key_id(TENANT, OTHER_CONV), key_version=1)
    with pytest.raises(DecryptError):
        open_(enc, sealed, conv=OTHER_CONV, dek_id=other_dek)  # with the target row's dek_id


def test_a_ciphertext_moved_to_another_tenant_fails(enc):
    sealed = seal(enc)
    with pytest.raises(DecryptError):
        open_(enc, sealed, tenant=OTHER_TENANT)


def test_a_wrong_key_version_fails(enc):
    sealed = seal(enc)
    enc.rotate(TENANT, CONV)
    wrong = DekId(key_scope="conversation", key_id=sealed.dek_id.key_id, key_version=2)
    with pytest.raises(DecryptError):
        open_(enc, sealed, dek_id=wrong)
    unknown = DekId(key_scope="conversation", key_id=sealed.dek_id.key_id, key_version=9)
    with pytest.raises(DecryptError):
        open_(enc, sealed, dek_id=unknown)


def test_a_wrong_key_fails():
    sealed = seal(Encryptor(InMemoryKeyStore()))
    with pytest.raises(DecryptError):
        open_(Encryptor(InMemoryKeyStore()), sealed)  # same ids, different key material


@settings(max_examples=60)
@given(st.data())
def test_any_flipped_bit_fails(data):
    enc = Encryptor(InMemoryKeyStore())
    sealed = seal(enc, data.draw(st.binary(min_size=0, max_size=64)))
    index = data.draw(st.integers(0, len(sealed.blob) - 1))
    bit = data.draw(st.integers(0, 7))
    tampered = bytearray(sealed.blob)
    tampered[index] ^= 1 << bit
    with pytest.raises(DecryptError):
        open_(enc, Sealed(bytes(tampered), sealed.dek_id))


@pytest.mark.parametrize("blob", [b"", b"\x00" * 27, None, "text"])
def test_short_or_non_bytes_blobs_fail_as_decrypt_error(enc, blob):
    sealed = seal(enc)
    with pytest.raises(DecryptError):
        open_(enc, Sealed(blob, sealed.dek_id))


def test_truncated_and_extended_blobs_fail(enc):
    sealed = seal(enc)
    for blob in (sealed.blob[:-1], sealed.blob + b"\x00"):
        with pytest.raises(DecryptError):
            open_(enc, Sealed(blob, sealed.dek_id))


def test_decrypt_error_is_a_crypto_error_and_carries_no_key(enc):
    sealed = seal(enc, seq=7)
    material = enc.keystore.current(TENANT, CONV).material
    with pytest.raises(CryptoError) as info:
        open_(enc, sealed, seq=8)
    text = str(info.value) + repr(info.value.facts)
    assert material.hex() not in text and repr(material) not in text


# --- rotate, destroy, cache ----------------------------------------------------------------

def test_rotate_keeps_old_versions_readable(enc):
    old = seal(enc, b"before")
    assert enc.rotate(TENANT, CONV).key_version == 2
    new = seal(enc, b"after")
    assert new.dek_id.key_version == 2
    assert open_(enc, old) == b"before"
    assert open_(enc, new) == b"after"
    assert enc.rotate(TENANT, CONV).key_version == 3


def test_destroy_makes_every_version_unreadable_and_refuses_new_keys(enc):
    v1 = seal(enc, b"one")
    enc.rotate(TENANT, CONV)
    v2 = seal(enc, b"two")
    other = seal(enc, b"other", conv=OTHER_CONV)
    enc.destroy(TENANT, CONV)
    for sealed in (v1, v2):
        with pytest.raises(KeyDestroyed):
            open_(enc, sealed)
    with pytest.raises(KeyDestroyed):
        seal(enc)
    with pytest.raises(KeyDestroyed):
        enc.rotate(TENANT, CONV)
    enc.destroy(TENANT, CONV)  # idempotent
    assert open_(enc, other, conv=OTHER_CONV) == b"other"


def test_destroy_invalidates_the_cache_at_once():
    clock = FakeClock()
    enc = Encryptor(InMemoryKeyStore(), cache_ttl_seconds=300, clock=clock)
    sealed = seal(enc)
    assert open_(enc, sealed) == b"hello"  # now cached under both slots
    enc.destroy(TENANT, CONV)
    with pytest.raises(KeyDestroyed):
        open_(enc, sealed)
    with pytest.raises(KeyDestroyed):
        seal(enc)


def test_cache_saves_key_store_calls_until_its_ttl():
    clock = FakeClock()
    store = CountingKeyStore()
    enc = Encryptor(store, cache_ttl_seconds=300, clock=clock)
    sealed = seal(enc)
    for _ in range(5):
        seal(enc)
        open_(enc, sealed)
    assert store.calls == {"current": 1, "get": 1}
    clock.now += 301
    seal(enc)
    open_(enc, sealed)
    assert store.calls == {"current": 2, "get": 2}


def test_a_key_loaded_while_being_destroyed_is_not_cached():
    loaded, proceed = threading.Event(), threading.Event()

    class SlowKeyStore(InMemoryKeyStore):
        def get(self, dek_id):
            key = super().get(dek_id)
            loaded.set()
            proceed.wait(10)
            return key

    store = SlowKeyStore()
    enc = Encryptor(store, cache_ttl_seconds=300, clock=FakeClock())
    sealed = seal(enc)
    results = []
    reader = threading.Thread(target=lambda: results.append(open_(enc, sealed)))
    reader.start()
    assert loaded.wait(10)
    enc.destroy(TENANT, CONV)  # lands while the reader holds a freshly loaded key
    proceed.set()
    reader.join(10)
    assert results == [b"hello"]  # the read that started before the destroy may finish
    with pytest.raises(KeyDestroyed):
        open_(enc, sealed)  # but its key must not have been cached past the destroy


def test_cache_ttl_zero_disables_caching():
    store = CountingKeyStore()
    enc = Encryptor(store, cache_ttl_seconds=0)
    sealed = seal(enc)
    seal(enc)
    open_(enc, sealed)
    open_(enc, sealed)
    assert store.calls == {"current": 2, "get": 2}


def test_rotate_through_the_encryptor_drops_the_cached_current_key():
    enc = Encryptor(InMemoryKeyStore(), cache_ttl_seconds=300, clock=FakeClock())
    assert seal(enc).dek_id.key_version == 1
    enc.rotate(TENANT, CONV)
    assert seal(enc).dek_id.key_version == 2


def test_destroy_elsewhere_takes_effect_when_the_cache_expires(tmp_path):
    path = tmp_path / "keys.sqlite"
    clock = FakeClock()
    enc = Encryptor(LocalKeyStore(path), cache_ttl_seconds=300, clock=clock)
    sealed = seal(enc)
    open_(enc, sealed)
    LocalKeyStore(path).destroy(TENANT, CONV)  # e.g. the compliance tool in another process
    assert open_(enc, sealed) == b"hello"  # within the documented cache bound
    enc.invalidate()
    with pytest.raises(KeyDestroyed):
        open_(enc, sealed)
    enc2 = Encryptor(LocalKeyStore(path), cache_ttl_seconds=300, clock=clock)
    with pytest.raises(KeyDestroyed):
        seal(enc2, conv=CONV)


def test_cache_expiry_picks_up_a_destroy_elsewhere(tmp_path):
    path = tmp_path / "keys.sqlite"
    clock = FakeClock()
    enc = Encryptor(LocalKeyStore(path), cache_ttl_seconds=300, clock=clock)
    sealed = seal(enc)
    open_(enc, sealed)
    LocalKeyStore(path).destroy(TENANT, CONV)
    clock.now += 300
    with pytest.raises(KeyDestroyed):
        open_(enc, sealed)


# --- E2EE ----------------------------------------------------------------------------------

def test_e2ee_payload_is_carried_opaque(enc):
    e2ee_ciphertext = os.urandom(200)  # what the client's sender key produced
    sealed = seal(enc, e2ee_ciphertext, e2ee=True)
    assert e2ee_ciphertext not in sealed.blob  # still DEK-sealed at rest
    assert open_(enc, sealed, e2ee=True) == e2ee_ciphertext  # never unwrapped further


def test_e2ee_flag_must_be_a_bool(enc):
    with pytest.raises(ValidationError):
        seal(enc, e2ee="yes")


def test_plaintext_must_be_bytes(enc):
    with pytest.raises(ValidationError):
        seal(enc, "text")


# --- keys never leak -----------------------------------------------------------------------

def test_reprs_hide_key_material(tmp_path):
    store = LocalKeyStore(tmp_path / "k.sqlite")
    enc = Encryptor(store)
    seal(enc)
    key = store.current(TENANT, CONV)
    material = key.material
    for text in (repr(key), str(key), repr(enc), str(enc), repr(store), repr(enc.keystore)):
        assert material.hex() not in text
        assert repr(material) not in text
        assert "material=" not in text


def test_data_key_must_be_32_bytes():
    with pytest.raises(CryptoError):
        DataKey(dek_id=DekId(key_scope="conversation", key_id="k", key_version=1), material=b"short")


# --- the durable store ---------------------------------------------------------------------

def test_local_keystore_survives_reopen(tmp_path):
    path = tmp_path / "keys.sqlite"
    sealed = seal(Encryptor(LocalKeyStore(path)), b"durable")
    assert open_(Encryptor(LocalKeyStore(path)), sealed) == b"durable"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_destroy_removes_the_material_from_the_files(tmp_path):
    path = tmp_path / "keys.sqlite"
    store = LocalKeyStore(path)
    material = store.current(TENANT, CONV).material
    keep = store.current(TENANT, OTHER_CONV).material

    def on_disk():
        return b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())

    assert material in on_disk()  # the check below can see keys at all
    store.destroy(TENANT, CONV)
    blob = on_disk()
    assert material not in blob
    assert keep in blob
    store.close()


def test_keystore_registry():
    assert isinstance(open_keystore("memory"), InMemoryKeyStore)
    with pytest.raises(ValidationError):
        open_keystore("vault")
    assert issubclass(LocalKeyStore, KeyStore)


def test_keystore_errors_are_crypto_errors(tmp_path):
    with pytest.raises(CryptoError):
        LocalKeyStore(tmp_path)  # a directory, not a database file


def test_threads_agree_on_one_key(tmp_path):
    store = LocalKeyStore(tmp_path / "keys.sqlite")
    seen = []

    def work():
        seen.append(store.current(TENANT, CONV).material)

    threads = [threading.Thread(target=work) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 16 and len(set(seen)) == 1


_CHILD = """
import json, sys, time, uuid
from lab.store.crypto import LocalKeyStore
path, tenant, conv, start = sys.argv[1], uuid.UUID(sys.argv[2]), uuid.UUID(sys.argv[3]), float(sys.argv[4])
while time.time() < start:
    time.sleep(0.001)
store = LocalKeyStore(path)
first = store.current(tenant, conv)
rotated = store.rotate(tenant, conv)
print(json.dumps({"v1": first.material.hex() if first.dek_id.key_version == 1 else None,
                  "rotated": rotated.key_version}))
"""


@pytest.mark.spawns
def test_processes_share_one_local_keystore_safely(tmp_path):
    import time
    path = tmp_path / "keys.sqlite"
    start = time.time() + 1.5  # let every child import first, then race
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, str(path), str(TENANT), str(CONV), str(start)],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(6)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    store = LocalKeyStore(path)
    v1 = store.get(DekId(key_scope="conversation", key_id=conversation_dek_key_id(TENANT, CONV), key_version=1))
    # every child that saw version 1 saw the same key, and no rotation reused a version
    assert {r["v1"] for r in results if r["v1"]} <= {v1.material.hex()}
    assert sorted(r["rotated"] for r in results) == list(range(2, 8))
    assert store.current(TENANT, CONV).dek_id.key_version == 7


@pytest.mark.spawns
def test_gcm_nonces_never_repeat_across_threads_wraps_and_forks(monkeypatch):
    """SP 800-38D deterministic nonces (lab.store.crypto.cipher): a per-process random fixed
    field and a counter; a new fixed field when the counter wraps and in a forked child."""
    import os
    import threading

    from lab.store.crypto import cipher

    nonces = cipher._Nonces()
    seen: list[bytes] = []
    threads = [threading.Thread(target=lambda: seen.extend(nonces.next() for _ in range(2000))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == len(set(seen)) == 16000 and all(len(n) == cipher.NONCE_BYTES for n in seen)
    monkeypatch.setattr(cipher, "NONCE_INVOCATIONS_MAX", 3)
    wrapped = cipher._Nonces()
    first = [wrapped.next() for _ in range(3)]
    after = wrapped.next()
    assert len({n[:cipher.NONCE_FIXED_BYTES] for n in first}) == 1 and after[:8] != first[0][:8]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its nonce goes to the parent, then it leaves without cleanup
        os.write(write, cipher._NONCES.next())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, cipher.NONCE_BYTES)
    assert child[:8] != cipher._NONCES.next()[:8]


# ---- keys ahead of use (a walk on the driver's loop reads a missing key in a blocking step) ----------
def test_a_sealing_key_loaded_ahead_is_used_without_another_key_store_read():
    store, clock = CountingKeyStore(), FakeClock()
    enc = Encryptor(store, cache_ttl_seconds=60, clock=clock)
    assert not enc.sealing_key_ready(TENANT, CONV)
    enc.load_sealing_key(TENANT, CONV)
    assert enc.sealing_key_ready(TENANT, CONV) and store.calls["current"] == 1
    seal(enc)
    assert store.calls["current"] == 1
    clock.now += 61  # expired: not ready, and the next use reads again
    assert not enc.sealing_key_ready(TENANT, CONV)


def test_unready_keys_names_each_missing_key_once_and_load_keys_fills_the_cache():
    store, clock = CountingKeyStore(), FakeClock()
    writer, reader = Encryptor(store), Encryptor(store, cache_ttl_seconds=60, clock=clock)
    sealed = seal(writer)
    rows = [sealed.dek_id.as_tuple(), sealed.dek_id.as_tuple(), sealed.dek_id, None, ("bad",), 7, ["unhashable"]]
    assert reader.unready_keys(rows) == [sealed.dek_id]  # None and malformed ids are the decode's to report
    reader.load_keys([sealed.dek_id])
    gets = store.calls["get"]
    assert reader.unready_keys(rows) == []
    assert open_(reader, sealed) == b"hello" and store.calls["get"] == gets


def test_load_keys_leaves_a_destroyed_key_to_the_decode():
    enc = Encryptor(InMemoryKeyStore())
    sealed = seal(enc)
    enc.destroy(TENANT, CONV)
    enc.load_keys(enc.unready_keys([sealed.dek_id]))  # no error here
    with pytest.raises(KeyDestroyed):
        open_(enc, sealed)
