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
    """The outcome codes of the official client (``pulsar.Result``); str() is ``Result.Ok``, as there."""

    def __str__(self) -> str:
        return "Result.%s" % self.name

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


class UnknownError(PulsarException):
    """The operation ended with Result.UnknownError."""

    result = Result.UnknownError


class InvalidConfiguration(PulsarException):
    """The operation ended with Result.InvalidConfiguration."""

    result = Result.InvalidConfiguration


class Timeout(PulsarException):
    """The operation ended with Result.Timeout."""

    result = Result.Timeout


class LookupError(PulsarException):  # noqa: A001 - the official name
    """The operation ended with Result.LookupError."""

    result = Result.LookupError
    retriable = True


class ConnectError(PulsarException):
    """The operation ended with Result.ConnectError."""

    result = Result.ConnectError
    retriable = True


class ReadError(PulsarException):
    """The operation ended with Result.ReadError."""

    result = Result.ReadError
    retriable = True


class AuthenticationError(PulsarException):
    """The operation ended with Result.AuthenticationError."""

    result = Result.AuthenticationError


class AuthorizationError(PulsarException):
    """The operation ended with Result.AuthorizationError."""

    result = Result.AuthorizationError


class ErrorGettingAuthenticationData(PulsarException):
    """The operation ended with Result.ErrorGettingAuthenticationData."""

    result = Result.ErrorGettingAuthenticationData


class BrokerMetadataError(PulsarException):
    """The operation ended with Result.BrokerMetadataError."""

    result = Result.BrokerMetadataError
    retriable = True


class BrokerPersistenceError(PulsarException):
    """The operation ended with Result.BrokerPersistenceError."""

    result = Result.BrokerPersistenceError
    retriable = True


class ChecksumError(PulsarException):
    """The operation ended with Result.ChecksumError."""

    result = Result.ChecksumError


class ConsumerBusy(PulsarException):
    """The operation ended with Result.ConsumerBusy."""

    result = Result.ConsumerBusy


class NotConnected(PulsarException):
    """The operation ended with Result.NotConnected."""

    result = Result.NotConnected
    retriable = True


class AlreadyClosed(PulsarException):
    """The operation ended with Result.AlreadyClosed."""

    result = Result.AlreadyClosed


class InvalidMessage(PulsarException):
    """The operation ended with Result.InvalidMessage."""

    result = Result.InvalidMessage


class ConsumerNotInitialized(PulsarException):
    """The operation ended with Result.ConsumerNotInitialized."""

    result = Result.ConsumerNotInitialized


class ProducerNotInitialized(PulsarException):
    """The operation ended with Result.ProducerNotInitialized."""

    result = Result.ProducerNotInitialized


class ProducerBusy(PulsarException):
    """The operation ended with Result.ProducerBusy."""

    result = Result.ProducerBusy


class TooManyLookupRequestException(PulsarException):
    """The operation ended with Result.TooManyLookupRequestException."""

    result = Result.TooManyLookupRequestException
    retriable = True


class InvalidTopicName(PulsarException):
    """The operation ended with Result.InvalidTopicName."""

    result = Result.InvalidTopicName


class InvalidUrl(PulsarException):
    """The operation ended with Result.InvalidUrl."""

    result = Result.InvalidUrl


class ErrorResult:
    """The official extension's ``_pulsar.Error``: a result code and its message, what its
    asynchronous callbacks are given (read-only properties ``error`` and ``message``)."""

    __slots__ = ("_error", "_message")

    def __init__(self, error: Result, message: str = "") -> None:
        self._error = error
        self._message = message

    @property
    def error(self) -> Result:
        return self._error

    @property
    def message(self) -> str:
        return self._message

    def __repr__(self) -> str:
        return "<Error %s: %s>" % (self._error.name, self._message)


class InvalidServiceUrl(InvalidUrl, ValueError):
    """A service URL that ``Client()`` refuses: the official client raises ValueError there (with
    these messages), pulsarfast did InvalidUrl; both ``except`` forms catch it."""


class ServiceUnitNotReady(PulsarException):
    """The operation ended with Result.ServiceUnitNotReady."""

    result = Result.ServiceUnitNotReady
    retriable = True


class OperationNotSupported(PulsarException):
    """The operation ended with Result.OperationNotSupported."""

    result = Result.OperationNotSupported


class ProducerBlockedQuotaExceededError(PulsarException):
    """The operation ended with Result.ProducerBlockedQuotaExceededError."""

    result = Result.ProducerBlockedQuotaExceededError


class ProducerBlockedQuotaExceededException(PulsarException):
    """The operation ended with Result.ProducerBlockedQuotaExceededException."""

    result = Result.ProducerBlockedQuotaExceededException


class ProducerQueueIsFull(PulsarException):
    """The operation ended with Result.ProducerQueueIsFull."""

    result = Result.ProducerQueueIsFull


class MessageTooBig(PulsarException):
    """The operation ended with Result.MessageTooBig."""

    result = Result.MessageTooBig


class TopicNotFound(PulsarException):
    """The operation ended with Result.TopicNotFound."""

    result = Result.TopicNotFound


class SubscriptionNotFound(PulsarException):
    """The operation ended with Result.SubscriptionNotFound."""

    result = Result.SubscriptionNotFound


class ConsumerNotFound(PulsarException):
    """The operation ended with Result.ConsumerNotFound."""

    result = Result.ConsumerNotFound


class UnsupportedVersionError(PulsarException):
    """The operation ended with Result.UnsupportedVersionError."""

    result = Result.UnsupportedVersionError


class TopicTerminated(PulsarException):
    """The operation ended with Result.TopicTerminated."""

    result = Result.TopicTerminated


class CryptoError(PulsarException):
    """The operation ended with Result.CryptoError."""

    result = Result.CryptoError


class IncompatibleSchema(PulsarException):
    """The operation ended with Result.IncompatibleSchema."""

    result = Result.IncompatibleSchema


class ConsumerAssignError(PulsarException):
    """The operation ended with Result.ConsumerAssignError."""

    result = Result.ConsumerAssignError


class CumulativeAcknowledgementNotAllowedError(PulsarException):
    """The operation ended with Result.CumulativeAcknowledgementNotAllowedError."""

    result = Result.CumulativeAcknowledgementNotAllowedError


class TransactionCoordinatorNotFoundError(PulsarException):
    """The operation ended with Result.TransactionCoordinatorNotFoundError."""

    result = Result.TransactionCoordinatorNotFoundError


class InvalidTxnStatusError(PulsarException):
    """The operation ended with Result.InvalidTxnStatusError."""

    result = Result.InvalidTxnStatusError


class NotAllowedError(PulsarException):
    """The operation ended with Result.NotAllowedError."""

    result = Result.NotAllowedError


class TransactionConflict(PulsarException):
    """The operation ended with Result.TransactionConflict."""

    result = Result.TransactionConflict


class TransactionNotFound(PulsarException):
    """The operation ended with Result.TransactionNotFound."""

    result = Result.TransactionNotFound


class ProducerFenced(PulsarException):
    """The operation ended with Result.ProducerFenced."""

    result = Result.ProducerFenced


class MemoryBufferIsFull(PulsarException):
    """The operation ended with Result.MemoryBufferIsFull."""

    result = Result.MemoryBufferIsFull


class Interrupted(PulsarException):
    """The operation ended with Result.Interrupted."""

    result = Result.Interrupted


class ReceiveInterrupted(Interrupted, KeyboardInterrupt):
    """A KeyboardInterrupt (Ctrl-C) that ended a blocked ``receive()``/``read_next()``: the
    official client raises ``Interrupted`` there; this is both, so ``except pulsar.Interrupted``
    and ``except KeyboardInterrupt`` each catch it."""


#: Result -> exception class
_BY_RESULT: dict[Result, type[PulsarException]] = {
    cls.result: cls for cls in PulsarException.__subclasses__()
}


class ProtocolError(PulsarException):
    """Bytes from the broker that are not the Pulsar protocol (the connection is closed)."""

    result = Result.ReadError


class ForkedError(NotConnected):
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

__all__ = ["Result", "PulsarException", "ProtocolError", "ForkedError", "InvalidServiceUrl", "ErrorResult", "exception_for",
           "from_server_error",
           "result_of", *EXCEPTION_NAMES]
