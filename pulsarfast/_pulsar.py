"""The names programs import from the official client's C extension,
``_pulsar``: ``import pulsarfast._pulsar as _pulsar`` (or
``from pulsarfast._pulsar import ConsumerType, Result``) in their place.

Here are the ones that are the same objects as the official ``pulsar``
module's (``pulsar.Result is _pulsar.Result`` there): ``Result``, the
enums, ``LoggerLevel``, ``PulsarException`` and one exception class per
result code, each pulsarfast's own (so ``_pulsar.ConsumerType.Shared is
pulsarfast.ConsumerType.Shared``); and ``MessageId`` and ``ServiceInfo``,
which are two classes there (the extension's and the Python wrapper) and one
here. ``ConsumerCryptoFailureAction``, ``RegexSubscriptionMode`` and
``SchemaType`` are the official enums, with their values (pulsarfast takes
no option that uses them yet).

Not here: the extension's own ``Client``, ``Producer``, ``Consumer``,
``Reader``, ``Message``, ``MessageBatch``, ``TableView``, the
``Authentication*`` classes (built from C++ providers), ``MessageBuilder``,
``SchemaInfo``, ``TopicRegex``, ``Error``, the crypto key readers and the
``*Configuration`` objects (``ClientConfiguration``,
``ProducerConfiguration``, ``ConsumerConfiguration``, ...), which only
configure the extension's ``Client``; and the policies pulsarfast does not
have yet (``BatchReceivePolicy``, ``KeySharedPolicy``,
``DeadLetterPolicyBuilder``, ``DeadLetterPolicy``).
"""
from __future__ import annotations

from .enums import (
    BatchingType,
    CompressionType,
    ConsumerCryptoFailureAction,
    ConsumerType,
    InitialPosition,
    KeySharedMode,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    SchemaType,
)
from .errors import (  # one exception class per Result code
    AlreadyClosed,
    AuthenticationError,
    AuthorizationError,
    BrokerMetadataError,
    BrokerPersistenceError,
    ChecksumError,
    ConnectError,
    ConsumerAssignError,
    ConsumerBusy,
    ConsumerNotFound,
    ConsumerNotInitialized,
    CryptoError,
    CumulativeAcknowledgementNotAllowedError,
    ErrorGettingAuthenticationData,
    IncompatibleSchema,
    Interrupted,
    InvalidConfiguration,
    InvalidMessage,
    InvalidTopicName,
    InvalidTxnStatusError,
    InvalidUrl,
    LookupError,
    MemoryBufferIsFull,
    MessageTooBig,
    NotAllowedError,
    NotConnected,
    OperationNotSupported,
    ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException,
    ProducerBusy,
    ProducerFenced,
    ProducerNotInitialized,
    ProducerQueueIsFull,
    PulsarException,
    ReadError,
    Result,
    ServiceUnitNotReady,
    SubscriptionNotFound,
    Timeout,
    TooManyLookupRequestException,
    TopicNotFound,
    TopicTerminated,
    TransactionConflict,
    TransactionCoordinatorNotFoundError,
    TransactionNotFound,
    UnknownError,
    UnsupportedVersionError,
)
from .errors import EXCEPTION_NAMES
from .logger import LoggerLevel
from .message import MessageId
from .service import ServiceInfo


__all__ = [
    "BatchingType", "CompressionType", "ConsumerType", "InitialPosition", "KeySharedMode", "PartitionsRoutingMode",
    "ProducerAccessMode", "ConsumerCryptoFailureAction", "RegexSubscriptionMode", "SchemaType", "LoggerLevel",
    "MessageId", "ServiceInfo", "Result", "PulsarException", *EXCEPTION_NAMES,
]
