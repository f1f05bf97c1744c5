"""Rounds of one Lua script's calls on a Redis connection of their own: the hot window's puts.

More: docs/store-internals.md.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Any

import redis

__all__ = ["ScriptRounds"]

_CRLF = b"\r\n"


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(value), value)


def _as_bytes(value: str | bytes | int) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, int):
        return b"%d" % value
    return value.encode()


class ScriptRounds:
    """Rounds of calls of one script (its text) with one key each: ``run([(key, args), ...])``
    returns the script's replies in the calls' order."""

    def __init__(self, client: redis.Redis, script: str) -> None:
        self.client = client
        self.script = script
        self.sha = hashlib.sha1(script.encode()).hexdigest()  # what SCRIPT LOAD answers
        self._connection: Any = None
        self._pid = os.getpid()

    def pack(self, calls: Sequence[tuple[str, Sequence[str | bytes | int]]]) -> bytes:
        """The round's EVALSHA commands in the Redis protocol (RESP), one buffer."""
        head = _bulk(b"EVALSHA") + _bulk(self.sha.encode()) + _bulk(b"1")
        parts = []
        for key, args in calls:
            parts.append(b"*%d\r\n" % (4 + len(args)))
            parts.append(head)
            parts.append(_bulk(key.encode()))
            parts.extend([_bulk(_as_bytes(a)) for a in args])
        return b"".join(parts)

    def run(self, calls: Sequence[tuple[str, Sequence[str | bytes | int]]]) -> list[Any]:
        """One round (replayed once after NOSCRIPT); redis errors as redis-py raises them."""
        for attempt in (1, 2):
            try:
                return self._round(calls)
            except redis.exceptions.NoScriptError:
                if attempt == 2:
                    raise
                self.sha = self.client.script_load(self.script)
        raise AssertionError("unreachable")

    def _round(self, calls: Sequence[tuple[str, Sequence[str | bytes | int]]]) -> list[Any]:
        packed = self.pack(calls)
        conn = self._connect()

        def attempt() -> list[Any]:
            conn.send_packed_command([packed], check_health=False)
            replies, first_error = [], None
            for _ in calls:
                try:
                    replies.append(conn.read_response())
                except redis.exceptions.ResponseError as exc:  # an error reply: the rest still follow
                    replies.append(exc)
                    first_error = first_error or exc
            if first_error is not None:
                raise first_error
            return replies

        try:
            return conn.retry.call_with_retry(attempt, lambda _error: conn.disconnect())
        except redis.exceptions.ResponseError:
            raise  # the connection read every reply: still in step
        except BaseException:
            self.close()
            raise

    def _connect(self) -> Any:
        if self._pid != os.getpid():  # a forked child never shares its parent's socket
            self._connection, self._pid = None, os.getpid()
        if self._connection is None:
            self._connection = self.client.connection_pool.make_connection()
        return self._connection

    def close(self) -> None:
        conn, self._connection = self._connection, None
        if conn is not None and self._pid == os.getpid():
            conn.disconnect()
