"""pulsarfast: an Apache Pulsar client on gevent or threads, with the
official ``pulsar`` module's names (``import pulsarfast as pulsar``).

Built on ``msgengine`` (runtime, transport, driver, supervisor, request
correlation, flow control), like the ``nsq`` client, which it does not import.

Layout: the top level is what programs import, the official module paths and pulsarfast's own
public modules; the machinery sits in folders named for their job. Each entry imports only
entries listed after it (docs/architecture.md draws it; tests/packaging/test_layers.py checks it):
    __init__.py    this module: the official pulsar module's names
    _pulsar.py, asyncio.py, exceptions.py
                   the official _pulsar (the C extension's names), pulsar.asyncio and pulsar.exceptions
    spark/, cli/   Pulsar as a PySpark data source and sink; the pulsarfast command
    metrics.py     the Prometheus collector of producers, consumers and readers (extra `metrics`; not imported here)
    extension/     the C extension's own objects that _pulsar exposes: configuration objects and the Client
                   made from one, policies, MessageBuilder, TopicRegex
    client.py      Client: backend, connection pool, lookups, the supervisor, ids
    tableview.py   the official pulsar.tableview: TableView, the decoded view of consuming/rawtable.py's
    producing/     Producer (routing over partitions) and PartitionProducer (sends, receipts, resends);
                   a message's argument checks
    consuming/     Consumer, Reader, redelivery and dead letters, pattern subscriptions, partitions added
                   later, the table view's reader, asyncio's receives
    network/       connections and their pool, lookups (binary and HTTP), the service in use, schemas by
                   version, Owner (the Client as its parts see it), a dropped client's end
    options/       the settings each Client method builds from its arguments, checked once, and the
                   option objects they take (policies, start position)
    wire/          the frame codec (compiled _codec.pyx, pure twin), protobuf messages, the sans-I/O
                   protocol, Message and MessageId, batches, chunks, compression, encryption, key hashes
    endpoints/     service URLs made ready (TLS context, authentication), ServiceInfo,
                   AutoClusterFailover, TLS, authentication (OAuth 2.0 too)
    schema/, functions/
                   the official pulsar.schema and pulsar.functions packages
    version.py     the package version
    base/          Result and one exception class per code, the official enums, topic names and
                   service URLs, loggers, the client's parts
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from msgengine.lazy import LazyNames
from pulsarfast.base.enums import (
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
from pulsarfast.base.logger import ConsoleLogger, FileLogger, LoggerLevel
from pulsarfast.base.results import *  # noqa: F401,F403 - the official module's exception names
from pulsarfast.base.results import EXCEPTION_NAMES, ForkedError, ProtocolError, PulsarException, Result
from pulsarfast.version import __version__

if TYPE_CHECKING:  # (at run time these load when first used: _HOMES below)
    from pulsarfast import exceptions, functions, schema, tableview
    from pulsarfast.client import Client
    from pulsarfast.consuming.consumer import Consumer
    from pulsarfast.consuming.reader import Reader
    from pulsarfast.endpoints.auth import (
        Authentication,
        AuthenticationAthenz,
        AuthenticationBasic,
        AuthenticationOauth2,
        AuthenticationTLS,
        AuthenticationToken,
    )
    from pulsarfast.endpoints.failover import AutoClusterFailover
    from pulsarfast.endpoints.serviceinfo import ServiceInfo, ServiceInfoProvider
    from pulsarfast.extension.policies import BatchReceivePolicy, DeadLetterPolicyBuilder, KeySharedPolicy
    from pulsarfast.functions import Context, Function, IdentitySerDe, PickleSerDe, SerDe
    from pulsarfast.options.batchreceive import ConsumerBatchReceivePolicy
    from pulsarfast.options.deadletterpolicy import ConsumerDeadLetterPolicy
    from pulsarfast.options.keyshared import ConsumerKeySharedPolicy
    from pulsarfast.producing.producer import Producer
    from pulsarfast.schema import BytesSchema
    from pulsarfast.tableview import TableView
    from pulsarfast.transactions.transaction import Transaction, TransactionId, TransactionState
    from pulsarfast.wire.cryptokeys import CryptoKeyReader, EncryptionContext, EncryptionKey
    from pulsarfast.wire.message import Message, MessageId
    from pulsarfast.wire.messagebatch import MessageBatch

#: where each name loaded at its first use lives (import time: issue 49); the enums, exceptions,
#: loggers and version above load with the package
_HOMES = {
    "pulsarfast.client": ("Client",),
    "pulsarfast.producing.producer": ("Producer",),
    "pulsarfast.consuming.consumer": ("Consumer",),
    "pulsarfast.consuming.reader": ("Reader",),
    "pulsarfast.wire.message": ("Message", "MessageId"),
    "pulsarfast.wire.messagebatch": ("MessageBatch",),
    "pulsarfast.wire.cryptokeys": ("CryptoKeyReader", "EncryptionContext", "EncryptionKey"),
    "pulsarfast.endpoints.auth": ("Authentication", "AuthenticationToken", "AuthenticationTLS", "AuthenticationAthenz",
                                  "AuthenticationOauth2", "AuthenticationBasic"),
    "pulsarfast.endpoints.failover": ("AutoClusterFailover",),
    "pulsarfast.endpoints.serviceinfo": ("ServiceInfo", "ServiceInfoProvider"),
    "pulsarfast.extension.policies": ("BatchReceivePolicy", "DeadLetterPolicyBuilder", "KeySharedPolicy"),
    "pulsarfast.options.batchreceive": ("ConsumerBatchReceivePolicy",),
    "pulsarfast.options.deadletterpolicy": ("ConsumerDeadLetterPolicy",),
    "pulsarfast.options.keyshared": ("ConsumerKeySharedPolicy",),
    "pulsarfast.functions": ("Function", "Context", "SerDe", "PickleSerDe", "IdentitySerDe"),
    "pulsarfast.schema": ("BytesSchema",),
    "pulsarfast.tableview": ("TableView",),
    "pulsarfast.transactions.transaction": ("Transaction", "TransactionId", "TransactionState"),
}
#: the sub-modules shown as attributes: the official pulsar.schema, .exceptions, .functions and
#: .tableview, and the folders that importing the package used to load
_SUBMODULES = ("schema", "exceptions", "functions", "tableview", "client", "version", "base", "wire", "endpoints",
               "options", "network", "transactions", "producing", "consuming", "extension")
_lazy = LazyNames(globals(), {name: home for home, names in _HOMES.items() for name in names}, _SUBMODULES)
__dir__ = _lazy.dir

if not TYPE_CHECKING:  # (so that mypy still reports a misspelt pulsarfast.<name>)
    __getattr__ = _lazy.getattr

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
    "TableView", "Transaction", "TransactionId", "TransactionState",
]
