"""Driver exceptions into the lab's error tree: the one boundary where they are translated.

More: docs/cluster-internals.md.
"""
from __future__ import annotations

import contextlib
from typing import Any
from collections.abc import Iterator

from cassandra import (AlreadyExists, AuthenticationFailed, CoordinationFailure, DriverException, FunctionFailure,
                       InvalidRequest as _InvalidRequest, OperationTimedOut, ReadFailure,
                       RequestExecutionException, RequestValidationException, Timeout, Unauthorized,
                       Unavailable as _Unavailable, UnsupportedOperation, WriteFailure)
from cassandra.cluster import NoHostAvailable
from cassandra.policies import RetryPolicy
from cassandra.cluster import QueryExhausted, TraceUnavailable, UserTypeDoesNotExist
from cassandra.connection import (ConnectionBusy, ConnectionException, CrcException, ProtocolError)
from cassandra.protocol import (ConfigurationException, ErrorMessage, IsBootstrappingErrorMessage,
                                OverloadedErrorMessage, ReadTimeoutErrorMessage, ServerError,
                                SyntaxException, UnavailableErrorMessage, WriteTimeoutErrorMessage)
from cassandra.protocol import RequestValidationException as _ValidationMessage
from cassandra.cluster import NoConnectionsAvailable
from cassandra import DependencyException
from cassandra.protocol import InternalError, NotSupportedError

from lab.cluster.dialect import Dialect
from lab.errors import (ClusterError, ConnectError, InvalidRequest, LabError, Overloaded, RequestError,
                        RequestTimeout, Unavailable)

# Driver exception -> lab error. Order matters: the first isinstance match wins.
DRIVER_ERROR_MAP: tuple[tuple[type[BaseException], type[LabError]], ...] = (
    (NoHostAvailable, ConnectError),
    (AuthenticationFailed, ConnectError),
    (OperationTimedOut, RequestTimeout),
    (Timeout, RequestTimeout),  # ReadTimeout, WriteTimeout, CDCWriteFailure-free timeouts
    (_Unavailable, Unavailable),
    (OverloadedErrorMessage, Overloaded),
    (IsBootstrappingErrorMessage, Unavailable),
    (AlreadyExists, InvalidRequest),
    (SyntaxException, InvalidRequest),
    (ConfigurationException, InvalidRequest),
    (_InvalidRequest, InvalidRequest),
    (Unauthorized, RequestError),
    (RequestValidationException, InvalidRequest),
    (ReadFailure, RequestError),
    (WriteFailure, RequestError),
    (CoordinationFailure, RequestError),
    (FunctionFailure, RequestError),
    (ServerError, RequestError),
    (RequestExecutionException, RequestError),
    (ReadTimeoutErrorMessage, RequestTimeout),
    (WriteTimeoutErrorMessage, RequestTimeout),
    (UnavailableErrorMessage, Unavailable),
    (_ValidationMessage, InvalidRequest),
    (UserTypeDoesNotExist, InvalidRequest),
    (ErrorMessage, RequestError),  # any other error reply of the server
    (NoConnectionsAvailable, ConnectError),
    (ConnectionBusy, ConnectError),
    (ConnectionException, ConnectError),
    (ProtocolError, ConnectError),
    (CrcException, ConnectError),
    (QueryExhausted, RequestError),
    (TraceUnavailable, RequestError),
    (UnsupportedOperation, ClusterError),
    (DependencyException, ClusterError),
    (InternalError, ClusterError),
    (NotSupportedError, ClusterError),
    (DriverException, ClusterError),
    (Exception, ClusterError),  # anything else raised from inside the driver
)


def translate(exc: BaseException, *, table: str | None = None, dialect: Dialect | None = None) -> LabError:
    """The lab error for a driver exception (keeps the original as ``__cause__``): the
    dialect's more precise one when it recognises the server's text, else by class."""
    if dialect is not None:
        err = dialect.translate_error(exc, table=table)
        if err is not None:
            err.__cause__ = exc
            return err
    for driver_cls, lab_cls in DRIVER_ERROR_MAP:
        if isinstance(exc, driver_cls):
            err = lab_cls(f"{type(exc).__name__}: {exc}", table=table, driver_error=type(exc).__name__)
            err.__cause__ = exc
            return err
    raise TypeError(f"not a driver exception: {exc!r}")


def is_driver_error(exc: BaseException) -> bool:
    specific = tuple(c for c, _ in DRIVER_ERROR_MAP if c is not Exception)
    return isinstance(exc, specific) or type(exc).__module__.startswith("cassandra")


@contextlib.contextmanager
def map_driver_errors(table: str | None = None, dialect: Dialect | None = None) -> Iterator[None]:
    """Translate driver exceptions raised inside the block into lab errors."""
    try:
        yield
    except LabError:
        raise
    except Exception as exc:
        if is_driver_error(exc):
            raise translate(exc, table=table, dialect=dialect) from exc
        raise


class LabRetryPolicy(RetryPolicy):
    """The driver's default policy, except for a server error that rejects the statement
    itself (the dialect says so): every host would answer the same, so it is raised at once
    instead of being retried on each host and ending as NoHostAvailable."""

    def __init__(self) -> None:
        super().__init__()
        self.dialect: Dialect | None = None  # set once the connection knows its server

    def on_request_error(self, query: Any, consistency: Any, error: Any, retry_num: int) -> tuple[int, Any]:
        if isinstance(error, ServerError) and self.dialect is not None and self.dialect.rejects_statement(error):
            return self.RETHROW, None
        return super().on_request_error(query, consistency, error, retry_num)
