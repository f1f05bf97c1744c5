"""Is a CQL server at a contact point? One OPTIONS request before the driver connects.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass

PROBE_TIMEOUT_SECONDS = 3.0
CQL = "cql"              # a CQL response header
NOT_CQL = "not-cql"      # answered, but not a CQL frame
SILENT = "silent"        # accepted the connection, no answer in time
UNKNOWN = "unknown"      # refused, unreachable, reset, TLS failure: the driver says why
_FIRST_WAIT_SHARE = 0.4  # of the timeout, before the line end is sent
_NUDGE = b"\r\n"  # after the OPTIONS frame: the line end a line-based service (HTTP) waits for
OPTIONS_FRAME = bytes([0x04, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00])  # v4 request, stream 0, OPTIONS
_RESPONSE_FLAG = 0x80
_OPCODES = (0x00, 0x06)  # ERROR (an unsupported protocol version), SUPPORTED
_LOOKS_LIKE = (  # first bytes of a reply -> the service that sends them
    (b"HTTP/", "an HTTP server"), (b"<!DOCTYPE", "an HTTP server"), (b"<html", "an HTTP server"),
    (b"-ERR", "Redis"), (b"-NOAUTH", "Redis"), (b"+", "Redis or another RESP server"),
    (b"SSH-", "an SSH server"),
    (b"\x15\x03", "a TLS server (give --tls-ca-file)"),
)


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    host: str
    port: int
    verdict: str           # CQL, NOT_CQL, SILENT or UNKNOWN
    reply: bytes = b""     # the first bytes received (NOT_CQL)
    seconds: float = 0.0   # the probe's timeout (SILENT)

    @property
    def looks_like(self) -> str | None:
        for prefix, name in _LOOKS_LIKE:
            if self.reply.startswith(prefix):
                return name
        return None

    def describe(self) -> str:
        """Why this is not a CQL server, in a sentence (NOT_CQL and SILENT only)."""
        where = f"{self.host}:{self.port}"
        if self.verdict == SILENT:
            return (f"{where} accepts connections but did not answer a CQL request within {self.seconds:g} s "
                    "(a Cassandra or ScyllaDB node answers at once): another service listens there")
        shown = self.reply[:40].decode("ascii", "backslashreplace").split("\r")[0].split("\n")[0]
        what = f" ({self.looks_like})" if self.looks_like else ""
        return f"{where} answers, but not in CQL: its reply starts {shown!r}{what}"


def _looks_cql(header: bytes) -> bool:
    return len(header) >= 5 and header[0] & _RESPONSE_FLAG and 1 <= header[0] & 0x7F <= 6 and header[4] in _OPCODES


def _read_reply(sock: socket.socket, seconds: float) -> bytes | None:
    """Up to a frame header's worth of bytes; b"" when the peer closed, None when it stayed silent."""
    sock.settimeout(seconds)
    reply = b""
    try:
        while len(reply) < len(OPTIONS_FRAME):
            chunk = sock.recv(len(OPTIONS_FRAME) - len(reply))
            if not chunk:
                return reply
            reply += chunk
            sock.settimeout(0.2)  # the rest of a header follows at once
    except TimeoutError:
        return reply or None
    return reply


def _read_more(sock: socket.socket, limit: int = 64) -> bytes:
    sock.settimeout(0.2)
    try:
        return sock.recv(limit)
    except OSError:
        return b""


def probe_cql(host: str, port: int, *, timeout_seconds: float = PROBE_TIMEOUT_SECONDS,
              ssl_context: ssl.SSLContext | None = None) -> ProbeResult:
    """Send OPTIONS to ``host:port`` and judge the reply (never raises for network errors)."""
    unknown = ProbeResult(host=host, port=port, verdict=UNKNOWN)
    try:
        sock = socket.create_connection((host, port), timeout=timeout_seconds)
    except OSError:
        return unknown
    try:
        if ssl_context is not None:
            sock = ssl_context.wrap_socket(sock, server_hostname=host if ssl_context.check_hostname else None)
        sock.sendall(OPTIONS_FRAME)
        reply = _read_reply(sock, timeout_seconds * _FIRST_WAIT_SHARE)
        if reply is None:  # a line-based service (Redis, HTTP) waits for a line end: one, to hear who it is
            sock.sendall(_NUDGE)
            reply = _read_reply(sock, timeout_seconds * (1 - _FIRST_WAIT_SHARE))
        if reply and not _looks_cql(reply):  # the rest of its first line, to name it
            reply += _read_more(sock)
    except TimeoutError:  # the TLS handshake got no answer
        reply = None
    except (OSError, ssl.SSLError):
        return unknown
    finally:
        sock.close()
    if reply is None:
        return ProbeResult(host=host, port=port, verdict=SILENT, seconds=timeout_seconds)
    if not reply:  # closed without a word: a TLS-only port, an internode port (the driver says which)
        return unknown
    return ProbeResult(host=host, port=port, verdict=CQL if _looks_cql(reply) else NOT_CQL, reply=reply)
