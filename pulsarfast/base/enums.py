"""The official ``pulsar`` module's enums, with the same member names and values
(and the same ``str()``: ``ConsumerType.Shared``)."""
from __future__ import annotations

import enum


class OfficialEnum(enum.IntEnum):
    """An IntEnum whose str() is ``Name.member``, as the official module's enums print."""

    def __str__(self) -> str:
        return "%s.%s" % (type(self).__name__, self.name)


class ConsumerType(OfficialEnum):
    Exclusive = 0
    Shared = 1
    Failover = 2
    KeyShared = 3


class InitialPosition(OfficialEnum):
    Latest = 0
    Earliest = 1


class CompressionType(OfficialEnum):
    NONE = 0
    LZ4 = 1
    ZLib = 2
    ZSTD = 3
    SNAPPY = 4


class PartitionsRoutingMode(OfficialEnum):
    UseSinglePartition = 0
    RoundRobinDistribution = 1
    CustomPartition = 2


class HashingScheme(OfficialEnum):
    """The C++ library's schemes (the official Python client always uses BoostHash)."""

    Murmur3_32Hash = 0
    BoostHash = 1
    JavaStringHash = 2


class BatchingType(OfficialEnum):
    Default = 0
    KeyBased = 1


class ProducerAccessMode(OfficialEnum):
    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3


class KeySharedMode(OfficialEnum):
    AutoSplit = 0
    Sticky = 1


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
