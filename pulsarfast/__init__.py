"""pulsarfast: an Apache Pulsar client on gevent or threads, with the
official ``pulsar`` module's names (``import pulsarfast as pulsar``).

Built on ``msgengine`` (runtime, transport, driver, supervisor, request
correlation, flow control), like the ``nsq`` client, which it does not import.

Layout:
    client.py      Client: backend, connection pool, lookups, the supervisor, ids
    config.py      the settings each Client method builds from its arguments: defaults, checks, derived values
    owner.py       Owner: the Client as its producers, consumers and readers see it (a Protocol)
    producer.py    Producer (routing over partitions) and PartitionProducer (sends, receipts, resends)
    consumer.py    Consumer (queue, acks, listener, seek) and TopicConsumer (subscribe, permits, batches)
    reader.py      Reader: a non-durable subscription from a chosen position
    tableview.py   TableView (the official pulsar.tableview): a topic's latest value per key, decoded
    asyncio.py     the official pulsar.asyncio module: the sync API on the asyncio backend, awaited (not imported here)
    aiotake.py     Takes: pulsarfast.asyncio's receives, a cancelled one losing no message
    table.py       RawTableView (_pulsar.TableView): the reader, catching up, following, listeners
    position.py    StartPosition: where a subscription starts, what before it is dropped
    connection.py  BrokerConnection: the engine's driver running the protocol object
    sansio.py      PulsarProtocol: bytes in, events out; commands in, bytes out
    proto.py       the protobuf messages, written by hand from PulsarApi.proto's field numbers
    wire.py        picks the wire codec: _wire.pyx (compiled) or _wire_py.py (its twin)
    lookup.py      partitioned-topic metadata and LOOKUP with redirects
    pool.py        one connection per broker
    topics.py      topic names and service URLs
    hashing.py     partition-key hashes (the official client's BoostHash, and the others)
    link.py        the close mechanics of a producer or consumer on one connection (what the supervisor keeps)
    auth.py        AuthenticationToken, AuthenticationTLS (what CONNECT and AUTH_RESPONSE carry)
    tls.py         the SSLContext of pulsar+ssl:// (trust file, hostname check, client certificate)
    redelivery.py  the unacked-message timeout (timed buckets of entries) and the consumer's dead-letter hooks
    deadletter.py  ConsumerDeadLetterPolicy and the dead-letter topic's producer
    keyshared.py   ConsumerKeySharedPolicy: KeyShared modes, sticky hash ranges and their checks
    batchreceive.py ConsumerBatchReceivePolicy: when Consumer.batch_receive() ends
    compression.py LZ4, ZLib, ZSTD and SNAPPY payloads (codec libraries imported on first use)
    message.py     Message and MessageId
    enums.py       ConsumerType, InitialPosition, ... (the official values)
    errors.py      PulsarException and one class per Result code
    logger.py      LoggerLevel, ConsoleLogger, FileLogger: where Client(logger=...) sends the pulsarfast logs
    service.py     ServiceInfo (Client.get_service_info()) and the ServiceInfoProvider base class
    failover.py    AutoClusterFailover and the probing that switches a client between clusters
    discovery.py   the service a client uses now (switched by a provider) and its lookups
    endpoint.py    a service URL with its TLS context and authentication
    httplookup.py  lookups over the broker's HTTP API (http:// and https:// service URLs)
    _pulsar.py     the names programs import from the official C extension (`import pulsarfast._pulsar as _pulsar`)
    configuration.py _pulsar's ClientConfiguration, ProducerConfiguration, ... and the Client built from one
    policies.py    _pulsar's BatchReceivePolicy, KeySharedPolicy, DeadLetterPolicyBuilder, DeadLetterPolicy
    messagebatch.py MessageBatch: the messages of a batched entry's payload
    messagebuilder.py _pulsar's MessageBuilder
    cryptokeys.py  CryptoKeyReader, EncryptionKey, EncryptionContext (the names)
    crypto.py      end-to-end encryption: AES-GCM payloads, RSA-OAEP data keys (the `encryption` extra)
    exceptions.py  the official pulsar.exceptions module (the exception classes)
    functions/     the official pulsar.functions package: Function, Context, SerDe, PickleSerDe, IdentitySerDe
    schema/        the official pulsar.schema package: Record and its fields, BytesSchema, StringSchema, JsonSchema, AvroSchema, ProtobufNativeSchema
    schemafetch.py a topic's registered schema by version (GET_SCHEMA): what AvroSchema reads older messages with
    topicregex.py  _pulsar's TopicRegex
    metrics.py     the Prometheus collector of producers, consumers and readers (extra `metrics`; not imported here)
"""
from __future__ import annotations

from .auth import (
    Authentication,
    AuthenticationAthenz,
    AuthenticationBasic,
    AuthenticationOauth2,
    AuthenticationTLS,
    AuthenticationToken,
)
from .batchreceive import ConsumerBatchReceivePolicy
from .client import Client
from .consumer import Consumer
from .deadletter import ConsumerDeadLetterPolicy
from .enums import (
    BatchingType,
    CompressionType,
    ConsumerCryptoFailureAction,
    ConsumerType,
    HashingScheme,
    InitialPosition,
    KeySharedMode,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
)
from .errors import *  # noqa: F401,F403 - the official module's exception names
from .errors import EXCEPTION_NAMES, ForkedError, ProtocolError, PulsarException, Result
from .keyshared import ConsumerKeySharedPolicy
from .logger import ConsoleLogger, FileLogger, LoggerLevel
from .message import Message, MessageId
from .producer import Producer
from .reader import Reader
from . import tableview  # the official sub-module (pulsar.tableview)
from .tableview import TableView
from .failover import AutoClusterFailover
from .service import ServiceInfo, ServiceInfoProvider
from .version import __version__
from . import exceptions, functions  # the official sub-modules (pulsar.exceptions, pulsar.functions)
from .cryptokeys import CryptoKeyReader, EncryptionContext, EncryptionKey
from .functions import Context, Function, IdentitySerDe, PickleSerDe, SerDe
from .messagebatch import MessageBatch
from .policies import BatchReceivePolicy, DeadLetterPolicyBuilder, KeySharedPolicy
from . import schema  # the official sub-package (pulsar.schema: Record, JsonSchema, AvroSchema, ...)
from .schema import BytesSchema


__all__ = [
    "schema", "Client", "Producer", "Consumer", "Reader", "Message", "MessageId", "Result", "PulsarException", "ProtocolError",
    "ForkedError", "ConsumerType", "InitialPosition", "CompressionType", "PartitionsRoutingMode", "HashingScheme",
    "BatchingType", "ProducerAccessMode", "KeySharedMode", "BytesSchema", "ConsumerDeadLetterPolicy", "__version__",
    *EXCEPTION_NAMES,
    "Authentication", "AuthenticationToken", "AuthenticationTLS", "AuthenticationAthenz", "AuthenticationOauth2",
    "AuthenticationBasic", "ConsoleLogger", "FileLogger", "LoggerLevel", "ServiceInfo", "ServiceInfoProvider",
    "AutoClusterFailover",
    "ConsumerCryptoFailureAction", "RegexSubscriptionMode", "ConsumerKeySharedPolicy", "ConsumerBatchReceivePolicy",
    "BatchReceivePolicy", "KeySharedPolicy", "DeadLetterPolicyBuilder", "CryptoKeyReader", "EncryptionContext",
    "EncryptionKey", "MessageBatch", "Function", "Context", "SerDe", "PickleSerDe", "IdentitySerDe",
    "TableView",
]
