"""pulsarfast's exceptions and result codes, under one root, ``PulsarException``.

The names are the official ``pulsar`` module's: one exception class per
``Result`` code (``pulsar.Timeout``, ``pulsar.ProducerQueueIsFull``, ...),
each a subclass of ``PulsarException``, so that ``except pulsar.Timeout``
keeps working after ``import pulsarfast as pulsar``. ``send_async``
callbacks receive a ``Result``. Errors the broker reports (its
``ServerError`` codes) are mapped to these classes by ``from_server_error``;
``retriable`` says whether the operation may succeed after a fresh lookup.

Our own additions sit under the same root: ``ProtocolError`` (bytes that are
not the Pulsar protocol) and ``ForkedError`` (a client used in a forked child).
"""
from __future__ import annotations

import enum


class Result(enum.IntEnum):
    """The outcome codes of the official client (``pulsar.Result``)."""

    Ok = 0
    UnknownError = 1
    InvalidConfiguration = 2
    Timeout = 3
    LookupError = 4
    ConnectError = 5
    ReadError = 6
    AuthenticationError = 7
    AuthorizationError = 8
    ErrorGettingAuthenticationData = 9
    BrokerMetadataError = 10
    BrokerPersistenceError = 11
    ChecksumError = 12
    ConsumerBusy = 13
    NotConnected = 14
    AlreadyClosed = 15
    InvalidMessage = 16
    ConsumerNotInitialized = 17
    ProducerNotInitialized = 18
    ProducerBusy = 19
    TooManyLookupRequestException = 20
    InvalidTopicName = 21
    InvalidUrl = 22
    ServiceUnitNotReady = 23
    OperationNotSupported = 24
    ProducerBlockedQuotaExceededError = 25
    ProducerBlockedQuotaExceededException = 26
    ProducerQueueIsFull = 27
    MessageTooBig = 28
    TopicNotFound = 29
    SubscriptionNotFound = 30
    ConsumerNotFound = 31
    UnsupportedVersionError = 32
    TopicTerminated = 33
    CryptoError = 34
    IncompatibleSchema = 35
    ConsumerAssignError = 36
    CumulativeAcknowledgementNotAllowedError = 37
    TransactionCoordinatorNotFoundError = 38
    InvalidTxnStatusError = 39
    NotAllowedError = 40
    TransactionConflict = 41
    TransactionNotFound = 42
    ProducerFenced = 43
    MemoryBufferIsFull = 44
    Interrupted = 45


class PulsarException(Exception):
    """Root of every exception pulsarfast raises."""

    result: Result = Result.UnknownError
    #: the operation may succeed after a fresh lookup or reconnection
    retriable: bool = False

    def __init__(self, message: str = "", *args: object) -> None:
        super().__init__(message or self.result.name, *args)


#: Result -> exception class, filled below
_BY_RESULT: dict[Result, type[PulsarException]] = {}


def _define(result: Result, retriable: bool = False) -> type[PulsarException]:
    cls = type(result.name, (PulsarException,), {
        "result": result,
        "retriable": retriable,
        "__module__": __name__,
        "__doc__": "The operation ended with Result.%s." % result.name,
    })
    _BY_RESULT[result] = cls
    return cls


UnknownError = _define(Result.UnknownError)
InvalidConfiguration = _define(Result.InvalidConfiguration)
Timeout = _define(Result.Timeout)
LookupError = _define(Result.LookupError, retriable=True)  # noqa: A001 - the official name
ConnectError = _define(Result.ConnectError, retriable=True)
ReadError = _define(Result.ReadError, retriable=True)
AuthenticationError = _define(Result.AuthenticationError)
AuthorizationError = _define(Result.AuthorizationError)
ErrorGettingAuthenticationData = _define(Result.ErrorGettingAuthenticationData)
BrokerMetadataError = _define(Result.BrokerMetadataError, retriable=True)
BrokerPersistenceError = _define(Result.BrokerPersistenceError, retriable=True)
ChecksumError = _define(Result.ChecksumError)
ConsumerBusy = _define(Result.ConsumerBusy)
NotConnected = _define(Result.NotConnected, retriable=True)
AlreadyClosed = _define(Result.AlreadyClosed)
InvalidMessage = _define(Result.InvalidMessage)
ConsumerNotInitialized = _define(Result.ConsumerNotInitialized)
ProducerNotInitialized = _define(Result.ProducerNotInitialized)
ProducerBusy = _define(Result.ProducerBusy)
TooManyLookupRequestException = _define(Result.TooManyLookupRequestException, retriable=True)
InvalidTopicName = _define(Result.InvalidTopicName)
InvalidUrl = _define(Result.InvalidUrl)
ServiceUnitNotReady = _define(Result.ServiceUnitNotReady, retriable=True)
OperationNotSupported = _define(Result.OperationNotSupported)
ProducerBlockedQuotaExceededError = _define(Result.ProducerBlockedQuotaExceededError)
ProducerBlockedQuotaExceededException = _define(Result.ProducerBlockedQuotaExceededException)
ProducerQueueIsFull = _define(Result.ProducerQueueIsFull)
MessageTooBig = _define(Result.MessageTooBig)
TopicNotFound = _define(Result.TopicNotFound)
SubscriptionNotFound = _define(Result.SubscriptionNotFound)
ConsumerNotFound = _define(Result.ConsumerNotFound)
UnsupportedVersionError = _define(Result.UnsupportedVersionError)
TopicTerminated = _define(Result.TopicTerminated)
CryptoError = _define(Result.CryptoError)
IncompatibleSchema = _define(Result.IncompatibleSchema)
ConsumerAssignError = _define(Result.ConsumerAssignError)
CumulativeAcknowledgementNotAllowedError = _define(Result.CumulativeAcknowledgementNotAllowedError)
TransactionCoordinatorNotFoundError = _define(Result.TransactionCoordinatorNotFoundError)
InvalidTxnStatusError = _define(Result.InvalidTxnStatusError)
NotAllowedError = _define(Result.NotAllowedError)
TransactionConflict = _define(Result.TransactionConflict)
TransactionNotFound = _define(Result.TransactionNotFound)
ProducerFenced = _define(Result.ProducerFenced)
MemoryBufferIsFull = _define(Result.MemoryBufferIsFull)
Interrupted = _define(Result.Interrupted)


class ProtocolError(PulsarException):
    """Bytes from the broker that are not the Pulsar protocol (the connection is closed)."""

    result = Result.ReadError


class ForkedError(NotConnected):  # type: ignore[misc,valid-type]
    """The client was created before os.fork(): its connections belong to the parent."""


#: the broker's ServerError codes (PulsarApi.proto) -> Result
_SERVER_ERRORS: dict[int, Result] = {
    0: Result.UnknownError,
    1: Result.BrokerMetadataError,
    2: Result.BrokerPersistenceError,
    3: Result.AuthenticationError,
    4: Result.AuthorizationError,
    5: Result.ConsumerBusy,
    6: Result.ServiceUnitNotReady,
    7: Result.ProducerBlockedQuotaExceededError,
    8: Result.ProducerBlockedQuotaExceededException,
    9: Result.ChecksumError,
    10: Result.UnsupportedVersionError,
    11: Result.TopicNotFound,
    12: Result.SubscriptionNotFound,
    13: Result.ConsumerNotFound,
    14: Result.TooManyLookupRequestException,
    15: Result.TopicTerminated,
    16: Result.ProducerBusy,
    17: Result.InvalidTopicName,
    18: Result.IncompatibleSchema,
    19: Result.ConsumerAssignError,
    20: Result.TransactionCoordinatorNotFoundError,
    21: Result.InvalidTxnStatusError,
    22: Result.NotAllowedError,
    23: Result.TransactionConflict,
    24: Result.TransactionNotFound,
    25: Result.ProducerFenced,
}


def exception_for(result: Result) -> type[PulsarException]:
    """The exception class of a Result code."""
    return _BY_RESULT.get(result, UnknownError)


def from_server_error(code: int | None, message: str) -> PulsarException:
    """The exception for a broker's ServerError code and message."""
    result = _SERVER_ERRORS.get(code if code is not None else 0, Result.UnknownError)
    return exception_for(result)(message or result.name)


def result_of(error: BaseException | None) -> Result:
    """The Result code a callback reports for an outcome (None: Ok)."""
    if error is None:
        return Result.Ok
    if isinstance(error, PulsarException):
        return error.result
    return Result.UnknownError


EXCEPTION_NAMES = tuple(r.name for r in Result if r is not Result.Ok)

__all__ = ["Result", "PulsarException", "ProtocolError", "ForkedError", "exception_for", "from_server_error",
           "result_of", *EXCEPTION_NAMES]
