"""The hot window of archiver mode on Redis (design §2.1 note, §18.1.2b).

More: docs/store-internals.md.
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import redis

from lab.errors import HotWindowError, ValidationError
from lab.measure import now_ns
from lab.store.hot import HotLayer
from lab.store.hot.script_rounds import ScriptRounds
from lab.store.plumbing.lanes import Lanes
from lab.store.rows.ids import check_conversation_seq, parse_uuid
from lab.store.rows.model import MessageState
from lab.store.rows.encoded import WIRE_JSON, EncodedRecord
from lab.store.rows.records import Message

__all__ = ["HotWindow", "HotWindowLayer", "open_hot_window"]

SECONDS_PER_DAY = 86_400
DEFAULT_TRIM_PER_WRITE = 16  # expired members dropped per write at most: bounded work per send
DEFAULT_PUT_CONNECTIONS = 4  # rounds of puts in flight at once at most, each on a Redis connection of its own
_CAS_ATTEMPTS = 16
_SEQ_DIGITS = 20
_TIME_DIGITS = 13
_SPARSE_FACTOR = 4  # a batch group spanning more than 4x its size reads seq by seq

# KEYS[1] the conversation's set; ARGV: seq (zero-padded, as in the member), member, window ms, cutoff ms, trim max
_PUT = """
local prefix = ARGV[1] .. '|'
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[1])) do
  if m ~= ARGV[2] and string.sub(m, 1, #prefix) == prefix then redis.call('ZREM', KEYS[1], m) end
end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local cutoff = tonumber(ARGV[4])
for i = 1, tonumber(ARGV[5]) do
  local first = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
  if not first or tonumber(string.sub(first, 22, 34)) >= cutoff then break end
  redis.call('ZREM', KEYS[1], first)
end
return 1
"""
# KEYS[1]; ARGV: seq, old member, new member
_SWAP = """
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[3])
return 1
"""


def _padded(seq: int) -> str:
    return f"{seq:0{_SEQ_DIGITS}d}"


def _member(record: EncodedRecord) -> bytes:
    wire = WIRE_JSON(record.to_wire())
    return f"{_padded(record.conversation_seq)}|{record.created_at:0{_TIME_DIGITS}d}|{wire}".encode()


def _parse(member: bytes) -> tuple[int, int, EncodedRecord]:
    seq, created, wire = member.split(b"|", 2)
    return int(seq), int(created), EncodedRecord.from_wire(json.loads(wire))


class HotWindow:
    """The hot layer of one store keyspace (``namespace``) on one Redis."""

    def __init__(self, client: redis.Redis, *, namespace: str, window_seconds: int,
                 trim_per_write: int = DEFAULT_TRIM_PER_WRITE,
                 put_connections: int = DEFAULT_PUT_CONNECTIONS) -> None:
        if not isinstance(window_seconds, int) or window_seconds <= 0:
            raise ValidationError(f"window_seconds must be a positive int, got {window_seconds!r}",
                                  field="window_seconds")
        if not isinstance(put_connections, int) or put_connections <= 0:
            raise ValidationError(f"put_connections must be a positive int, got {put_connections!r}",
                                  field="put_connections")
        self.client = client
        self.namespace = namespace
        self.window_seconds = window_seconds
        self.trim_per_write = trim_per_write
        # the puts' rounds, each lane on a connection of its own (made at its first round)
        self._rounds = [ScriptRounds(client, _PUT) for _ in range(put_connections)]
        self._swap = client.register_script(_SWAP)
        self.requests = 0  # Redis round trips issued (the read/write paths report them; counted under a lock:
        # several rounds of puts run at once)
        # the callers' time in put (encoding, waiting for and taking part in a round), and the puts
        # timed: the hot window's own time per send (lab bench store --outboxes)
        self.put_ns = 0
        self.puts_timed = 0
        self._counting = threading.Lock()
        # concurrent puts (a store's sending threads): a free lane's round each while there is one,
        # else grouped into the next pipelined round of the least loaded lane (lab.store.plumbing.lanes)
        self._puts: Lanes[tuple[str, list[Any]], Any] = Lanes(
            [lambda items, lane=lane: self._put_round(items, lane=lane) for lane in range(put_connections)])

    @classmethod
    def open(cls, services: Any, *, namespace: str, window_days: int,
             put_connections: int = DEFAULT_PUT_CONNECTIONS) -> HotWindow:
        """From :class:`lab.cluster.services.ServicesConfig`; checks that Redis answers."""
        client = redis.Redis(**services.redis_client_kwargs())
        window = cls(client, namespace=namespace, window_seconds=window_days * SECONDS_PER_DAY,
                     put_connections=put_connections)
        window._call(client.ping)
        return window

    @property
    def put_rounds(self) -> int:
        """Rounds of puts run so far (puts / rounds: the grouping the puts got)."""
        return self._puts.rounds

    @property
    def put_rounds_in_flight_max(self) -> int:
        """Rounds of puts in flight at once, at most so far (at most ``put_connections``)."""
        return self._puts.most_in_flight

    def __repr__(self) -> str:
        kw = self.client.connection_pool.connection_kwargs
        return f"HotWindow({kw.get('host')}:{kw.get('port')}, namespace={self.namespace!r}, {self.window_seconds}s)"

    def key(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID) -> str:
        return f"{self.namespace}:hot:{{{tenant_id}:{conversation_id}}}"

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with self._counting:
            self.requests += 1
        try:
            return fn(*args, **kwargs)
        except redis.RedisError as exc:
            raise HotWindowError(f"the hot window (Redis) failed: {type(exc).__name__}: {exc}",
                                 namespace=self.namespace) from exc

    def _cutoff_ms(self, now_ms: int | None) -> int:
        return (time.time_ns() // 1_000_000 if now_ms is None else now_ms) - self.window_seconds * 1000

    # ---- writes ---------------------------------------------------------------------------
    def put(self, record: EncodedRecord, *, now_ms: int | None = None) -> bool:
        """Write one message (its encoded record). Returns False, writing nothing, when it is
        older than the window already (a very late resume)."""
        if not isinstance(record, EncodedRecord):
            raise ValidationError(f"the hot window stores EncodedRecords, got {type(record).__name__}", field="record")
        cutoff = self._cutoff_ms(now_ms)
        if record.created_at < cutoff:
            return False
        start = now_ns()
        key = self.key(record.tenant_id, record.conversation_id)
        self._puts.submit((key, [_padded(record.conversation_seq), _member(record), self.window_seconds * 1000,
                                 cutoff, self.trim_per_write]))
        elapsed = now_ns() - start
        with self._counting:
            self.put_ns += elapsed
            self.puts_timed += 1
        return True

    def swap(self, old: EncodedRecord, new: EncodedRecord) -> bool:
        """Replace the copy ``old`` of a message by ``new``, only if the window still holds exactly
        ``old`` (a racing attempt of the same send, whose copy nobody has recalled or edited since)."""
        key = self.key(old.tenant_id, old.conversation_id)
        return bool(self._call(self._swap, keys=[key], args=[_padded(old.conversation_seq), _member(old),
                                                             _member(new)]))

    def _put_round(self, items: list[tuple[str, list[Any]]], *, lane: int = 0) -> list[Any]:
        """The puts of concurrent callers (one alone, or many) in one pipelined round trip on the
        lane's connection: EVALSHA each, packed and sent at once (:mod:`lab.store.hot.script_rounds`;
        the script is loaded again if the server lost it). Each put is an upsert of its own member
        (an atomic script), so rounds in flight at once on other lanes, and a round replayed (after
        NOSCRIPT, or a connection error by the client's retry policy), write what one round would."""
        return self._call(self._rounds[lane].run, items)

    def _update(self, tenant_id: Any, conversation_id: Any, seq: int,
                change: Callable[[EncodedRecord], EncodedRecord | None]) -> bool:
        """Read-modify-swap one member; ``change`` returns the new record or None (no change).
        Returns True when the message is in the window (changed or left as it was)."""
        tenant_id, conversation_id = parse_uuid(tenant_id), parse_uuid(conversation_id)
        key = self.key(tenant_id, conversation_id)
        for _ in range(_CAS_ATTEMPTS):
            current = self._members(key, seq, seq)
            if not current:
                return False
            old = current[0]
            new = change(_parse(old)[2])
            if new is None or self._call(self._swap, keys=[key], args=[_padded(seq), old, _member(new)]):
                return True
        raise HotWindowError(f"the hot copy of seq {seq} kept changing under {_CAS_ATTEMPTS} updates",
                             namespace=self.namespace, conversation_seq=seq)

    def recall(self, tenant_id: Any, conversation_id: Any, seq: int, *, recall_event_conversation_seq: int) -> bool:
        def change(record: EncodedRecord) -> EncodedRecord | None:
            if record.recall_event_conversation_seq is not None:
                return None
            return record.replace(state=int(MessageState.RECALLED),
                                  recall_event_conversation_seq=recall_event_conversation_seq)
        return self._update(tenant_id, conversation_id, seq, change)

    def edit(self, tenant_id: Any, conversation_id: Any, seq: int, *, payload_or_ciphertext: bytes,
             dek_id: tuple, edited_at_activity_id: bytes) -> bool:
        def change(record: EncodedRecord) -> EncodedRecord | None:
            previous = record.edited_at_activity_id
            if record.state == int(MessageState.RECALLED) or (previous is not None
                                                              and previous >= edited_at_activity_id):
                return None  # recalled stays recalled; an older edit never replaces a newer one
            return record.replace(payload_or_ciphertext=payload_or_ciphertext, dek_id=tuple(dek_id),
                                  edited_at_activity_id=edited_at_activity_id, state=int(MessageState.EDITED))
        return self._update(tenant_id, conversation_id, seq, change)

    # ---- reads ----------------------------------------------------------------------------
    def _members(self, key: str, low: int, high: int, *, newest_first: bool = False,
                 limit: int | None = None) -> list[bytes]:
        """Members with low <= seq <= high (exact, whatever the double scores round to).

        Scores are exact up to 2**53 only: near 2**63 every seq within 1024 of another shares its
        score (members of one score sort by member, the zero-padded seq: still seq order). So a
        range by score may return members outside [low, high] first; they are filtered out, and
        with a ``limit`` the next members are fetched until the limit is met or the range ends."""
        fetch = None if limit is None else limit + 2
        out: list[bytes] = []
        start = 0
        while True:
            if newest_first:
                got = self._call(self.client.zrevrangebyscore, key, high, low,
                                 start=start if fetch else None, num=fetch)
            else:
                got = self._call(self.client.zrangebyscore, key, low, high, start=start if fetch else None, num=fetch)
            out += [m for m in got if low <= int(m[:_SEQ_DIGITS]) <= high]
            if limit is None or len(out) >= limit or len(got) < fetch:
                return out if limit is None else out[:limit]
            start, fetch = start + len(got), fetch * 2

    def range(self, tenant_id: Any, conversation_id: Any, *, low: int, high: int, newest_first: bool,
              limit: int, now_ms: int | None = None) -> list[EncodedRecord]:
        """Up to ``limit`` messages with ``low <= seq <= high`` (encoded records), newest
        first or oldest first; members older than the window are skipped."""
        if high < low or limit <= 0:
            return []
        cutoff = self._cutoff_ms(now_ms)
        key = self.key(parse_uuid(tenant_id), parse_uuid(conversation_id))
        rows = [_parse(m) for m in self._members(key, low, high, newest_first=newest_first, limit=limit)]
        return [cols for _, created, cols in rows if created >= cutoff]

    def at(self, tenant_id: Any, conversation_id: Any, seqs: Iterable[int], *,
           now_ms: int | None = None) -> dict[int, EncodedRecord]:
        """The messages at these seqs that the window holds, by seq (one request for a dense set)."""
        wanted = sorted({check_conversation_seq(s) for s in seqs})
        if not wanted:
            return {}
        cutoff = self._cutoff_ms(now_ms)
        key = self.key(parse_uuid(tenant_id), parse_uuid(conversation_id))
        if wanted[-1] - wanted[0] + 1 <= _SPARSE_FACTOR * len(wanted):
            members = self._members(key, wanted[0], wanted[-1])
        else:
            pipe = self.client.pipeline(transaction=False)
            for s in wanted:
                pipe.zrangebyscore(key, s, s)
            members = [m for got in self._call(pipe.execute) for m in got]
        want = set(wanted)
        out = {}
        for member in members:
            seq, created, cols = _parse(member)
            if seq in want and created >= cutoff:
                out[seq] = cols
        return out

    def ttl_seconds(self, tenant_id: Any, conversation_id: Any) -> int:
        """The conversation key's remaining TTL (-2: no key, -1: no TTL)."""
        return self._call(self.client.ttl, self.key(parse_uuid(tenant_id), parse_uuid(conversation_id)))

    def close(self) -> None:
        for rounds in self._rounds:
            rounds.close()
        self.client.close()


class HotWindowLayer(HotLayer):
    """The Redis hot window as the read paths' hot layer: decoded with the store's encryptor."""

    def __init__(self, window: HotWindow, *, decode: Callable[[EncodedRecord], Message],
                 bucket_width: int) -> None:
        self.window = window
        self._decode = decode
        self._width = bucket_width

    def bucket_range(self, tenant_id: uuid.UUID, conversation_id: uuid.UUID, seq_bucket: int, *,
                     low: int, high: int, limit: int | None = None, descending: bool = True) -> list[Message]:
        low = max(low, seq_bucket * self._width)
        high = min(high, seq_bucket * self._width + self._width - 1)
        rows = self.window.range(tenant_id, conversation_id, low=low, high=high, newest_first=descending,
                                 limit=self._width if limit is None else limit)
        return [self._decode(cols) for cols in rows]

    def lookup(self, tenant_id: uuid.UUID,
               coordinates: Mapping[int, tuple[uuid.UUID, int]]) -> dict[int, Message]:
        by_conversation: dict[uuid.UUID, dict[int, int]] = {}
        for message_id, (conversation_id, seq) in coordinates.items():
            by_conversation.setdefault(conversation_id, {})[seq] = message_id
        out: dict[int, Message] = {}
        for conversation_id, wanted in by_conversation.items():
            for seq, cols in self.window.at(tenant_id, conversation_id, wanted).items():
                message = self._decode(cols)
                if message.message_id == wanted[seq]:
                    out[message.message_id] = message
        return out


def open_hot_window(services: Any, *, namespace: str, constants: Any,
                    decode: Callable[[EncodedRecord], Message]) -> tuple[HotWindow, HotWindowLayer]:
    """Archiver mode's hot window on Redis and the read paths' layer over it (``MessageStore.open``)."""
    hot = HotWindow.open(services, namespace=namespace, window_days=constants.history_hot_window_days)
    return hot, HotWindowLayer(hot, decode=decode, bucket_width=constants.message_seq_bucket_width)
