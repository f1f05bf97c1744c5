"""Identifiers as the store writes them (design §1).

More: docs/store-internals.md.
"""
from __future__ import annotations

import numbers
import os
import random
import re
import secrets
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import blake3

from lab.constants import Constants
from lab.errors import Bit63Violation, InvalidId, InvalidSeq, ValidationError
from lab.store.plumbing.wall_clock import wall_clock_ms

_DEFAULTS = Constants.appendix_b()

U128_BLOB_BYTES = 16
U128_MAX = (1 << 128) - 1
U64_MAX = (1 << 64) - 1
BIT63 = 1 << 63

DEFAULT_SEQ_BUCKET_WIDTH = _DEFAULTS.message_seq_bucket_width

SHARD_EPOCH_MAX = 0x7FFF  # §6.5: keeps bit 63 of mailbox_seq at zero
MAILBOX_COUNTER_BITS = 48
MAILBOX_COUNTER_MAX = (1 << MAILBOX_COUNTER_BITS) - 1

EVENT_ID_BYTES = 8

MESSAGE_ID_TIME_BITS = 48
MESSAGE_ID_NODE_BITS = 16
MESSAGE_ID_COUNTER_BITS = 64
MESSAGE_ID_TIME_MAX_MS = (1 << MESSAGE_ID_TIME_BITS) - 1
MESSAGE_ID_NODE_MAX = (1 << MESSAGE_ID_NODE_BITS) - 1
MESSAGE_ID_COUNTER_MAX = (1 << MESSAGE_ID_COUNTER_BITS) - 1
# Each new millisecond starts its counter at a random value below this, so two processes
# that were (wrongly) given the same node id still almost never mint the same id, while
# 2**62 increments of headroom remain before the counter would have to borrow a millisecond.
_COUNTER_START_BITS = 62

DEK_KEY_VERSION_MAX = (1 << 31) - 1  # CQL int is signed 32-bit


def _is_int(value: object) -> bool:
    # bool is an int subclass, but True as a sequence number is always a bug. A plain int (every
    # value the driver and the paths hand over) skips the numbers.Integral ABC check, which costs a
    # microsecond per call on the rows of every read.
    if type(value) is int:
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


# --- u128 <-> blob -------------------------------------------------------------------------

def u128_to_blob(value: int) -> bytes:
    """16-byte big-endian form, so that blob order in CQL is numeric order."""
    if not _is_int(value):
        raise InvalidId(f"u128 must be an int, got {type(value).__name__}", value=value)
    value = int(value)
    if not 0 <= value <= U128_MAX:
        raise InvalidId(f"u128 out of range: {value}", value=value)
    return value.to_bytes(U128_BLOB_BYTES, "big")


def blob_to_u128(blob: bytes | bytearray | memoryview) -> int:
    if type(blob) is bytes and len(blob) == U128_BLOB_BYTES:  # the driver's blob: no copy, no checks
        return int.from_bytes(blob, "big")
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise InvalidId(f"u128 blob must be bytes, got {type(blob).__name__}", value=blob)
    blob = bytes(blob)
    if len(blob) != U128_BLOB_BYTES:
        raise InvalidId(f"u128 blob must be {U128_BLOB_BYTES} bytes, got {len(blob)}", value=blob)
    return int.from_bytes(blob, "big")


# --- uuid ----------------------------------------------------------------------------------

# What the public API takes for tenant / conversation / user ids: a UUID or its string form,
# normalised by parse_uuid at the boundary (the store works with uuid.UUID inside).
IdLike = uuid.UUID | str


def parse_uuid(value: uuid.UUID | str) -> uuid.UUID:
    """Accept a UUID or its string forms; anything else is rejected before a write."""
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        raise InvalidId(f"expected a UUID or str, got {type(value).__name__}", value=value)
    try:
        return uuid.UUID(value)
    except ValueError as exc:
        raise InvalidId(f"malformed UUID: {value!r}", value=value) from exc


# --- text keys ---------------------------------------------------------------------------

# C0 controls and DEL. CQL text stores them, but a NUL or an escape inside a key
# (client_message_id, reaction_key) truncates C strings, splits log lines and breaks
# the protocol layer's framing downstream; no legitimate client id or reaction needs one.
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


def check_text_key(value: str, *, field: str, error: type[ValidationError] = ValidationError) -> str:
    """``value`` if it is valid UTF-8 without control characters, else ``error``.

    Lone surrogates are not UTF-8: the driver would fail at bind time with an untyped
    UnicodeEncodeError, after earlier statements of the same call were already written."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise error(f"{field} is not valid UTF-8 (lone surrogate)", field=field, value=value) from None
    match = _CONTROL_CHARS.search(value)
    if match:
        raise error(f"{field} holds the control character U+{ord(match.group()):04X}", field=field, value=value)
    return value


# --- bigint guard (S-2) --------------------------------------------------------------------

def check_bigint(value: int, *, column: str) -> int:
    """Return ``value`` as an int if it is a u64 with bit 63 clear, else raise.

    The design says "violation is a panic": callers must let :class:`Bit63Violation`
    propagate rather than clamp, because a clamped value would be written out of order.
    """
    if not _is_int(value):
        raise InvalidSeq(f"{column} must be an int, got {type(value).__name__}",
                         column=column, value=value)
    value = int(value)
    if value < 0 or value > U64_MAX or value & BIT63:
        raise Bit63Violation(f"{column}={value} has bit 63 set or is not a u64; "
                             "CQL bigint order would flip", column=column, value=value)
    return value


def check_conversation_seq(value: int, *, column: str = "conversation_seq") -> int:
    """conversation_seq starts at 1; 0 is the "no message yet" value of the head."""
    value = check_bigint(value, column=column)
    if value < 1:
        raise InvalidSeq(f"{column} must be >= 1, got {value}", column=column, value=value)
    return value


def seq_bucket(conversation_seq: int, width: int = DEFAULT_SEQ_BUCKET_WIDTH) -> int:
    """Partition bucket of a conversation_seq: integer division, never float (§4.2)."""
    conversation_seq = check_conversation_seq(conversation_seq)
    return conversation_seq // _check_width(width)


def seq_bucket_bounds(bucket: int, width: int = DEFAULT_SEQ_BUCKET_WIDTH) -> tuple[int, int]:
    """Inclusive (first, last) conversation_seq a bucket can hold; bucket 0 starts at 1."""
    bucket = check_bigint(bucket, column="seq_bucket")
    width = _check_width(width)
    first = check_conversation_seq(max(1, bucket * width))
    # The top bucket is cut short where conversation_seq itself ends (bit 63).
    return first, min(bucket * width + width - 1, BIT63 - 1)


def _check_width(width: int) -> int:
    if not _is_int(width) or width < 1:
        raise ValidationError(f"bucket width must be a positive int, got {width!r}", width=width)
    return int(width)


# --- mailbox_seq ---------------------------------------------------------------------------

class MailboxSeq(NamedTuple):
    shard_epoch: int
    counter: int


def compose_mailbox_seq(shard_epoch: int, counter: int) -> int:
    """shard_epoch in the high 16 bits; capping it at 0x7FFF is what keeps bit 63 clear."""
    if not _is_int(shard_epoch) or not 0 <= shard_epoch <= SHARD_EPOCH_MAX:
        raise InvalidSeq(f"shard_epoch must be an int in 0..{SHARD_EPOCH_MAX:#x}, got {shard_epoch!r}",
                         column="mailbox_seq", value=shard_epoch)
    if not _is_int(counter) or not 0 <= counter <= MAILBOX_COUNTER_MAX:
        raise InvalidSeq(f"mailbox counter must be an int in 0..2**48-1, got {counter!r}",
                         column="mailbox_seq", value=counter)
    return check_bigint((int(shard_epoch) << MAILBOX_COUNTER_BITS) | int(counter), column="mailbox_seq")


def split_mailbox_seq(value: int) -> MailboxSeq:
    value = check_bigint(value, column="mailbox_seq")
    return MailboxSeq(shard_epoch=value >> MAILBOX_COUNTER_BITS, counter=value & MAILBOX_COUNTER_MAX)


# --- event_id ------------------------------------------------------------------------------

def event_id(*parts: bytes) -> int:
    """First 8 bytes of blake3 over the parts, as a signed 64-bit int (a CQL bigint).

    Each part is prefixed with its 8-byte big-endian length before hashing, so that
    ("ab", "c") and ("a", "bc") do not collide: a plain concatenation would make two
    different events equal, and equality is the only thing event_id is used for.
    """
    if not parts:
        raise ValidationError("event_id needs at least one part")
    hasher = blake3.blake3()
    for index, part in enumerate(parts):
        if not isinstance(part, (bytes, bytearray, memoryview)):
            raise ValidationError(f"event_id part {index} must be bytes, got {type(part).__name__}",
                                  part=index)
        part = bytes(part)
        hasher.update(len(part).to_bytes(8, "big"))
        hasher.update(part)
    return int.from_bytes(hasher.digest(length=EVENT_ID_BYTES), "big", signed=True)


# --- dek_id --------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class DekId:
    """Column ``dek_id frozen<tuple<text,text,int>>`` (§1, §6); names a key, never holds one."""

    key_scope: str
    key_id: str
    key_version: int

    def __post_init__(self) -> None:
        for name in ("key_scope", "key_id"):
            text = getattr(self, name)
            if not isinstance(text, str) or not text:
                raise ValidationError(f"DekId.{name} must be a non-empty str, got {text!r}", field=name)
        if not _is_int(self.key_version) or not 1 <= self.key_version <= DEK_KEY_VERSION_MAX:
            raise ValidationError(f"DekId.key_version must be an int in 1..2**31-1, got {self.key_version!r}",
                                  field="key_version", value=self.key_version)

    def as_tuple(self) -> tuple[str, str, int]:
        return (self.key_scope, self.key_id, int(self.key_version))

    @classmethod
    def from_tuple(cls, value: Sequence[object]) -> DekId:
        """From the driver's tuple (or any 3-sequence) read back from the column."""
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 3:
            raise ValidationError(f"dek_id must be a (key_scope, key_id, key_version) tuple, got {value!r}",
                                  value=value)
        key_scope, key_id, key_version = value
        return cls(key_scope=key_scope, key_id=key_id, key_version=key_version)  # type: ignore[arg-type]


# --- message_id ----------------------------------------------------------------------------

class MessageIdParts(NamedTuple):
    time_ms: int
    node_id: int
    counter: int


def compose_message_id(*, time_ms: int, node_id: int, counter: int) -> int:
    """48-bit unix ms | 16-bit node id | 64-bit counter: numeric order is time order."""
    for name, value, top in (("time_ms", time_ms, MESSAGE_ID_TIME_MAX_MS),
                             ("node_id", node_id, MESSAGE_ID_NODE_MAX),
                             ("counter", counter, MESSAGE_ID_COUNTER_MAX)):
        if not _is_int(value) or not 0 <= value <= top:
            raise InvalidId(f"message_id {name} must be an int in 0..{top}, got {value!r}",
                            field=name, value=value)
    return ((int(time_ms) << (MESSAGE_ID_NODE_BITS + MESSAGE_ID_COUNTER_BITS))
            | (int(node_id) << MESSAGE_ID_COUNTER_BITS) | int(counter))


def minted_message_id(*, time_ms: int, node_id: int, random_bits: Callable[[int], int] = secrets.randbits) -> int:
    """A message_id shaped as :class:`MessageIdGenerator` mints the first of a millisecond: the
    counter starts at a random value below 2**62 (``random_bits(62)``). For rows written
    without the allocator whose bytes on disk must be a sent row's: ~8 random bytes per id that
    no compressor shrinks, where a small counter's zero bytes compress away."""
    return compose_message_id(time_ms=time_ms, node_id=node_id, counter=random_bits(_COUNTER_START_BITS))


def split_message_id(message_id: int) -> MessageIdParts:
    u128_to_blob(message_id)  # range and type check
    return MessageIdParts(
        time_ms=message_id >> (MESSAGE_ID_NODE_BITS + MESSAGE_ID_COUNTER_BITS),
        node_id=(message_id >> MESSAGE_ID_COUNTER_BITS) & MESSAGE_ID_NODE_MAX,
        counter=message_id & MESSAGE_ID_COUNTER_MAX,
    )


def message_id_time_ms(message_id: int) -> int:
    return split_message_id(message_id).time_ms


# Where a generator's millisecond counters start: a generator seeded from os.urandom once per
# process (again in a forked child, which must not repeat its parent's draws), not os.urandom per
# millisecond (secrets.randbits): that syscall gives up the GIL inside the allocator's critical
# section, so the other senders queued behind a thread waiting to get the GIL back (one give-up
# per send; the cipher's nonces avoid it for the same reason, lab.store.crypto.cipher). The start
# only spreads ids of writers that share a node id; it is no secret (an id shows its counter).
_COUNTER_STARTS = random.Random()
os.register_at_fork(after_in_child=_COUNTER_STARTS.seed)


class MessageIdGenerator:
    """Per-node, thread-safe source of strictly increasing u128 ids.

    Used for message_id and last_activity_id alike (§5.1 step 2 allocates both in one
    critical section). If the wall clock steps back, the generator keeps the last
    millisecond it used and only advances the counter, so ids never go backwards within a
    process; the embedded time then reads as that later millisecond. Uniqueness across
    processes relies on distinct node ids (and, as a fallback, the random counter start,
    ``random_bits(62)`` per millisecond: by default a per-process generator seeded from
    os.urandom, see ``_COUNTER_STARTS``).
    """

    def __init__(self, node_id: int, *, clock_ms: Callable[[], int] = wall_clock_ms,
                 random_bits: Callable[[int], int] = _COUNTER_STARTS.getrandbits) -> None:
        if not _is_int(node_id) or not 0 <= node_id <= MESSAGE_ID_NODE_MAX:
            raise ValidationError(f"node_id must be an int in 0..{MESSAGE_ID_NODE_MAX}, got {node_id!r}",
                                  node_id=node_id)
        self.node_id = int(node_id)
        self._clock_ms = clock_ms
        self._random_bits = random_bits
        self._lock = threading.Lock()
        self._last_ms = -1
        self._counter = 0

    def __repr__(self) -> str:
        return f"MessageIdGenerator(node_id={self.node_id})"

    def next_id(self) -> int:
        with self._lock:
            now_ms = int(self._clock_ms())
            if now_ms > self._last_ms:
                self._last_ms = now_ms
                self._counter = self._random_bits(_COUNTER_START_BITS)  # as minted_message_id
            elif self._counter < MESSAGE_ID_COUNTER_MAX:
                self._counter += 1
            else:  # counter exhausted within one millisecond: borrow the next one
                self._last_ms += 1
                self._counter = 0
            return compose_message_id(time_ms=self._last_ms, node_id=self.node_id, counter=self._counter)

    def next_blob(self) -> bytes:
        return u128_to_blob(self.next_id())
