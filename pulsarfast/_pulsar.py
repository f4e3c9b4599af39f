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
    ConsumerType,
    InitialPosition,
    KeySharedMode,
    OfficialEnum,
    PartitionsRoutingMode,
    ProducerAccessMode,
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


class ConsumerCryptoFailureAction(OfficialEnum):
    """What a consumer does with a message it cannot decrypt (the official enum)."""

    FAIL = 0
    DISCARD = 1
    CONSUME = 2


class RegexSubscriptionMode(OfficialEnum):
    """Which topics a pattern subscription takes (the official enum)."""

    PersistentOnly = 0
    NonPersistentOnly = 1
    AllTopics = 2


class SchemaType(OfficialEnum):
    """The schema types (the official enum, with its values)."""

    NONE = 0
    STRING = 1
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FLOAT = 10
    DOUBLE = 11
    BYTES = -1
    JSON = 2
    PROTOBUF = 3
    AVRO = 4
    AUTO_CONSUME = -3
    AUTO_PUBLISH = -4
    KEY_VALUE = 15
    PROTOBUF_NATIVE = 20


__all__ = [
    "BatchingType", "CompressionType", "ConsumerType", "InitialPosition", "KeySharedMode", "PartitionsRoutingMode",
    "ProducerAccessMode", "ConsumerCryptoFailureAction", "RegexSubscriptionMode", "SchemaType", "LoggerLevel",
    "MessageId", "ServiceInfo", "Result", "PulsarException", *EXCEPTION_NAMES,
]
