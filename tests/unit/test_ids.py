import dataclasses
import itertools
import threading
import time
import uuid

import blake3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lab.errors import Bit63Violation, InvalidId, InvalidSeq, ValidationError
from lab.store.rows import ids
from lab.store.rows.ids import (
    DekId,
    MessageIdGenerator,
    blob_to_u128,
    check_bigint,
    compose_mailbox_seq,
    compose_message_id,
    event_id,
    message_id_time_ms,
    minted_message_id,
    parse_uuid,
    seq_bucket,
    seq_bucket_bounds,
    split_mailbox_seq,
    split_message_id,
    u128_to_blob,
)

u128s = st.integers(min_value=0, max_value=2**128 - 1)
u63s = st.integers(min_value=0, max_value=2**63 - 1)


# --- u128 ----------------------------------------------------------------------------------

@given(u128s)
def test_u128_round_trip_is_16_bytes(value):
    blob = u128_to_blob(value)
    assert len(blob) == 16
    assert blob_to_u128(blob) == value


@given(u128s, u128s)
def test_u128_byte_order_is_numeric_order(a, b):
    assert (u128_to_blob(a) < u128_to_blob(b)) == (a < b)


def test_u128_big_endian_layout():
    assert u128_to_blob(1) == b"\x00" * 15 + b"\x01"
    assert u128_to_blob(1 << 120) == b"\x01" + b"\x00" * 15


@pytest.mark.parametrize("bad", [-1, 2**128, True, 1.0, "1", None])
def test_u128_rejects_out_of_range_and_wrong_types(bad):
    with pytest.raises(InvalidId):
        u128_to_blob(bad)


@pytest.mark.parametrize("bad", [b"", b"\x00" * 15, b"\x00" * 17, "0" * 16, 5])
def test_blob_to_u128_rejects_wrong_length_or_type(bad):
    with pytest.raises(InvalidId):
        blob_to_u128(bad)


def test_blob_to_u128_accepts_bytearray_and_memoryview():
    blob = u128_to_blob(12345)
    assert blob_to_u128(bytearray(blob)) == 12345
    assert blob_to_u128(memoryview(blob)) == 12345


# --- uuid ----------------------------------------------------------------------------------

def test_parse_uuid_accepts_uuid_and_str():
    value = uuid.uuid4()
    assert parse_uuid(value) is value
    assert parse_uuid(str(value)) == value
    assert parse_uuid(str(value).upper()) == value


@pytest.mark.parametrize("bad", ["", "not-a-uuid", "1234", None, 42, b"\x00" * 16, uuid.UUID(int=0x49BD4AC97C2A49C1A88BF025C0A00616).bytes])
def test_parse_uuid_rejects_malformed_and_wrong_type(bad):
    with pytest.raises(InvalidId) as info:
        parse_uuid(bad)
    assert info.value.value == bad


# --- bit-63 guard (S-2) --------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, 1, 2**62, 2**62 + 1, 2**63 - 1])
def test_check_bigint_passes_values_with_bit63_clear(value):
    assert check_bigint(value, column="conversation_seq") == value


@pytest.mark.parametrize("value", [2**63, 2**62 + 2**62, 2**63 + 5, 2**64 - 1, 2**64, -1, -(2**63)])
def test_check_bigint_fires_on_bit63_or_outside_u64(value):
    with pytest.raises(Bit63Violation) as info:
        check_bigint(value, column="mailbox_seq")
    assert info.value.column == "mailbox_seq"
    assert info.value.value == value


@pytest.mark.parametrize("bad", [True, False, 1.0, "1", None])
def test_check_bigint_rejects_wrong_types_including_bool(bad):
    with pytest.raises(InvalidSeq) as info:
        check_bigint(bad, column="conversation_seq")
    assert info.value.column == "conversation_seq"
    assert not isinstance(info.value, Bit63Violation)


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_check_bigint_accepts_exactly_the_values_whose_signed_order_matches(value):
    signed = int.from_bytes(value.to_bytes(8, "big"), "big", signed=True)
    if signed == value:  # what CQL bigint would store keeps its unsigned order
        assert check_bigint(value, column="c") == value
    else:
        with pytest.raises(Bit63Violation):
            check_bigint(value, column="c")


# --- seq_bucket ----------------------------------------------------------------------------

@pytest.mark.parametrize("seq,bucket", [(1, 0), (4095, 0), (4096, 1), (8191, 1), (8192, 2), (100_000, 24)])
def test_seq_bucket_integer_division_with_default_width(seq, bucket):
    assert seq_bucket(seq) == bucket


def test_seq_bucket_default_width_is_appendix_b():
    assert ids.DEFAULT_SEQ_BUCKET_WIDTH == 4096


def test_seq_bucket_exact_near_2_to_63_where_floats_would_round():
    seq = 2**63 - 1
    assert seq_bucket(seq, 4096) == (2**63 - 1) // 4096
    assert seq_bucket(seq, 4096) != int(seq / 4096)


@pytest.mark.parametrize("seq,error", [(0, InvalidSeq), (-1, Bit63Violation), (2**63, Bit63Violation),
                                       (True, InvalidSeq), (1.5, InvalidSeq)])
def test_seq_bucket_rejects_bad_seqs(seq, error):
    with pytest.raises(error):
        seq_bucket(seq, 4096)


@pytest.mark.parametrize("width", [0, -4096, 4096.0, True, "4096"])
def test_seq_bucket_rejects_bad_width(width):
    with pytest.raises(ValidationError):
        seq_bucket(10, width)


@given(st.integers(min_value=1, max_value=2**63 - 1), st.integers(min_value=1, max_value=2**20))
def test_seq_is_inside_its_bucket_bounds(seq, width):
    first, last = seq_bucket_bounds(seq_bucket(seq, width), width)
    assert first <= seq <= last
    assert last - first + 1 <= width


def test_seq_bucket_bounds_are_contiguous_and_bucket_zero_starts_at_one():
    assert seq_bucket_bounds(0, 4096) == (1, 4095)
    assert seq_bucket_bounds(1, 4096) == (4096, 8191)
    assert seq_bucket_bounds(24, 4096) == (98304, 102399)


def test_seq_bucket_bounds_stop_at_the_largest_conversation_seq():
    top = (2**63 - 1) // 4096
    assert seq_bucket_bounds(top, 4096) == (top * 4096, 2**63 - 1)
    with pytest.raises(Bit63Violation):
        seq_bucket_bounds(top + 1, 4096)


# --- mailbox_seq ---------------------------------------------------------------------------

@given(st.integers(0, 0x7FFF), st.integers(0, 2**48 - 1))
def test_mailbox_seq_round_trip_and_bit63_clear(epoch, counter):
    value = compose_mailbox_seq(epoch, counter)
    assert value & (1 << 63) == 0
    assert split_mailbox_seq(value) == (epoch, counter)
    assert split_mailbox_seq(value).shard_epoch == epoch


@given(st.tuples(st.integers(0, 0x7FFF), st.integers(0, 2**48 - 1)),
       st.tuples(st.integers(0, 0x7FFF), st.integers(0, 2**48 - 1)))
def test_mailbox_seq_order_is_epoch_then_counter(a, b):
    assert (compose_mailbox_seq(*a) < compose_mailbox_seq(*b)) == (a < b)


def test_mailbox_seq_layout():
    assert compose_mailbox_seq(1, 0) == 1 << 48
    assert compose_mailbox_seq(0x7FFF, 2**48 - 1) == 2**63 - 1


@pytest.mark.parametrize("epoch,counter", [(0x8000, 0), (-1, 0), (0, 2**48), (0, -1), (True, 0), (0, 1.0)])
def test_compose_mailbox_seq_rejects_out_of_range(epoch, counter):
    with pytest.raises(InvalidSeq):
        compose_mailbox_seq(epoch, counter)


def test_split_mailbox_seq_guards_bit63():
    with pytest.raises(Bit63Violation):
        split_mailbox_seq(0x8000 << 48)


# --- event_id ------------------------------------------------------------------------------

def _reference_event_id(*parts):
    hasher = blake3.blake3()
    for part in parts:
        hasher.update(len(part).to_bytes(8, "big") + part)
    return int.from_bytes(hasher.digest()[:8], "big", signed=True)


@given(st.lists(st.binary(max_size=64), min_size=1, max_size=5))
def test_event_id_is_signed_first_8_bytes_of_blake3(parts):
    value = event_id(*parts)
    assert value == _reference_event_id(*parts)
    assert -(2**63) <= value < 2**63
    assert event_id(*parts) == value  # deterministic


def test_event_id_parts_are_not_ambiguous():
    assert event_id(b"ab", b"c") != event_id(b"a", b"bc")
    assert event_id(b"abc") != event_id(b"ab", b"c")


def test_event_id_rejects_no_parts_and_non_bytes():
    with pytest.raises(ValidationError):
        event_id()
    with pytest.raises(ValidationError):
        event_id(b"a", "b")


# --- DekId ---------------------------------------------------------------------------------

@given(st.text(min_size=1), st.text(min_size=1), st.integers(1, 2**31 - 1))
def test_dek_id_tuple_round_trip(scope, key_id, version):
    dek = DekId(key_scope=scope, key_id=key_id, key_version=version)
    assert dek.as_tuple() == (scope, key_id, version)
    assert DekId.from_tuple(dek.as_tuple()) == dek
    assert DekId.from_tuple(list(dek.as_tuple())) == dek


@pytest.mark.parametrize("kwargs", [
    {"key_scope": "", "key_id": "k", "key_version": 1},
    {"key_scope": "conversation", "key_id": None, "key_version": 1},
    {"key_scope": "conversation", "key_id": "k", "key_version": 0},
    {"key_scope": "conversation", "key_id": "k", "key_version": 2**31},
    {"key_scope": "conversation", "key_id": "k", "key_version": True},
])
def test_dek_id_validates_fields(kwargs):
    with pytest.raises(ValidationError):
        DekId(**kwargs)


@pytest.mark.parametrize("bad", [("a", "b"), ("a", "b", 1, 2), "abc", None])
def test_dek_id_from_tuple_rejects_bad_shapes(bad):
    with pytest.raises(ValidationError):
        DekId.from_tuple(bad)


def test_dek_id_is_frozen_and_keyword_only():
    dek = DekId(key_scope="conversation", key_id="k", key_version=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        dek.key_version = 2
    with pytest.raises(TypeError):
        DekId("conversation", "k", 1)


# --- message_id ----------------------------------------------------------------------------

def test_message_id_layout():
    mid = compose_message_id(time_ms=0x0123456789AB, node_id=0xCDEF, counter=0x1122334455667788)
    assert u128_to_blob(mid).hex() == "0123456789ab" + "cdef" + "1122334455667788"
    assert split_message_id(mid) == (0x0123456789AB, 0xCDEF, 0x1122334455667788)
    assert message_id_time_ms(mid) == 0x0123456789AB


@pytest.mark.parametrize("kwargs", [{"time_ms": 2**48, "node_id": 0, "counter": 0},
                                    {"time_ms": 0, "node_id": 2**16, "counter": 0},
                                    {"time_ms": 0, "node_id": 0, "counter": 2**64},
                                    {"time_ms": -1, "node_id": 0, "counter": 0}])
def test_compose_message_id_rejects_out_of_range(kwargs):
    with pytest.raises(InvalidId):
        compose_message_id(**kwargs)


def test_minted_message_id_is_shaped_as_the_generator_mints_a_milliseconds_first():
    """Its counter is random_bits(62), as MessageIdGenerator starts each millisecond: ~8 random
    bytes, which b_row needs for bytes on disk that match a sent row's."""
    asked = []

    def bits(k: int) -> int:
        asked.append(k)
        return (1 << k) - 1 - len(asked)

    mid = minted_message_id(time_ms=1_700_000_000_123, node_id=1, random_bits=bits)
    assert split_message_id(mid) == (1_700_000_000_123, 1, (1 << 62) - 2) and asked == [62]
    first = MessageIdGenerator(1, clock_ms=lambda: 1_700_000_000_123).next_id()
    assert split_message_id(first).counter < 1 << 62
    counters = {split_message_id(minted_message_id(time_ms=5, node_id=1)).counter for _ in range(50)}
    assert len(counters) == 50 and max(counters) > 1 << 48   # random, not a small row counter


def test_generator_embeds_clock_and_node():
    gen = MessageIdGenerator(7, clock_ms=lambda: 1_700_000_000_123)
    parts = split_message_id(gen.next_id())
    assert parts.time_ms == 1_700_000_000_123
    assert parts.node_id == 7


def test_generator_uses_wall_clock_by_default():
    before = time.time_ns() // 1_000_000
    mid = MessageIdGenerator(1).next_id()
    after = time.time_ns() // 1_000_000
    assert before <= message_id_time_ms(mid) <= after


def test_generator_is_strictly_increasing_when_the_clock_goes_backwards():
    ticks = iter([1000, 1000, 999, 500, 1000, 1001, 3, 1002])
    gen = MessageIdGenerator(1, clock_ms=lambda: next(ticks))
    out = [gen.next_id() for _ in range(8)]
    assert out == sorted(out) and len(set(out)) == 8
    assert [message_id_time_ms(m) for m in out] == [1000, 1000, 1000, 1000, 1000, 1001, 1001, 1002]
    blobs = [u128_to_blob(m) for m in out]
    assert blobs == sorted(blobs)


@given(st.lists(st.integers(0, 2**48 - 2), min_size=1, max_size=50))
def test_generator_increases_for_any_clock_sequence(clock_values):
    ticks = iter(clock_values)
    gen = MessageIdGenerator(3, clock_ms=lambda: next(ticks))
    out = [gen.next_id() for _ in clock_values]
    assert all(a < b for a, b in zip(out, out[1:]))
    assert message_id_time_ms(out[-1]) == max(clock_values)


def test_generator_borrows_a_millisecond_when_the_counter_is_exhausted():
    gen = MessageIdGenerator(1, clock_ms=lambda: 5000, random_bits=lambda bits: ids.MESSAGE_ID_COUNTER_MAX - 1)
    out = [gen.next_id() for _ in range(3)]
    assert out == sorted(out) and len(set(out)) == 3
    assert [split_message_id(m).counter for m in out] == [ids.MESSAGE_ID_COUNTER_MAX - 1, ids.MESSAGE_ID_COUNTER_MAX, 0]
    assert message_id_time_ms(out[-1]) == 5001


@pytest.mark.spawns
def test_generator_counter_starts_are_random_per_process_and_fork():
    """Each millisecond's counter starts at a random value below 2**62 (the ids of writers that
    share a node id spread), drawn without a syscall per millisecond (ids._COUNTER_STARTS, seeded
    once per process); a forked child draws other starts than its parent."""
    import os

    ticks = itertools.count(1000)
    gen = MessageIdGenerator(2, clock_ms=lambda: next(ticks))
    counters = [split_message_id(gen.next_id()).counter for _ in range(50)]
    assert len(set(counters)) == 50 and max(counters) > 1 << 48 and max(counters) < 1 << 62
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next draw goes to the parent, then it leaves without cleanup
        os.write(write, ids._COUNTER_STARTS.getrandbits(62).to_bytes(8, "big"))
        os._exit(0)
    os.waitpid(pid, 0)
    child = int.from_bytes(os.read(read, 8), "big")
    assert child != ids._COUNTER_STARTS.getrandbits(62)


def test_generator_is_thread_safe():
    ticks = itertools.count()

    def clock_ms():
        # A clock that yields the GIL and advances now and then, so that threads interleave
        # exactly between reading the clock and updating the counter.
        time.sleep(0)
        return next(ticks) // 16

    gen = MessageIdGenerator(9, clock_ms=clock_ms)
    per_thread = 200
    results: list[list[int]] = [[] for _ in range(8)]

    def work(slot):
        for _ in range(per_thread):
            results[slot].append(gen.next_id())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [m for chunk in results for m in chunk]
    assert len(set(everything)) == 8 * per_thread
    for chunk in results:
        assert chunk == sorted(chunk)


@pytest.mark.parametrize("node_id", [-1, 2**16, True, "1"])
def test_generator_rejects_bad_node_id(node_id):
    with pytest.raises(ValidationError):
        MessageIdGenerator(node_id)


def test_generator_next_blob_is_16_bytes():
    assert len(MessageIdGenerator(1).next_blob()) == 16
