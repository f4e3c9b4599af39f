"""The official ``pulsar`` module's enums, with the same member names and values."""
from __future__ import annotations

import enum


class ConsumerType(enum.IntEnum):
    Exclusive = 0
    Shared = 1
    Failover = 2
    KeyShared = 3


class InitialPosition(enum.IntEnum):
    Latest = 0
    Earliest = 1


class CompressionType(enum.IntEnum):
    NONE = 0
    LZ4 = 1
    ZLib = 2
    ZSTD = 3
    SNAPPY = 4


class PartitionsRoutingMode(enum.IntEnum):
    UseSinglePartition = 0
    RoundRobinDistribution = 1
    CustomPartition = 2


class HashingScheme(enum.IntEnum):
    """The C++ library's schemes (the official Python client always uses BoostHash)."""

    Murmur3_32Hash = 0
    BoostHash = 1
    JavaStringHash = 2


class BatchingType(enum.IntEnum):
    Default = 0
    KeyBased = 1


class ProducerAccessMode(enum.IntEnum):
    Shared = 0
    Exclusive = 1
    WaitForExclusive = 2
    ExclusiveWithFencing = 3


class KeySharedMode(enum.IntEnum):
    AutoSplit = 0
    Sticky = 1
