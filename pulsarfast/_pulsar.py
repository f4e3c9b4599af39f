"""The names programs import from the official client's C extension,
``_pulsar``: ``import pulsarfast._pulsar as _pulsar`` (or
``from pulsarfast._pulsar import ConsumerType, Result``) in their place.

The same objects as the official ``pulsar`` module's (``pulsar.Result is
_pulsar.Result`` there): ``Result``, the enums, ``LoggerLevel``,
``PulsarException`` and one exception class per result code,
``BatchReceivePolicy``, ``KeySharedPolicy`` and ``DeadLetterPolicyBuilder``,
each pulsarfast's own (so ``_pulsar.ConsumerType.Shared is
pulsarfast.ConsumerType.Shared``). ``MessageId`` and ``ServiceInfo`` are two
classes there (the extension's and the Python wrapper) and one here.
``ConsumerCryptoFailureAction``, ``RegexSubscriptionMode`` and ``SchemaType``
are the official enums, with their values.

The extension's own objects, which the official module wraps:
- ``ClientConfiguration``, ``ProducerConfiguration``,
  ``ConsumerConfiguration``, ``ReaderConfiguration`` (``configobjects.py``)
  and ``Client(service_url, ClientConfiguration)``, a ``pulsarfast.Client``;
- ``MessageBuilder`` (``messagebuilder.py``), ``MessageBatch``
  (``messagebatch.py``), ``DeadLetterPolicy`` (``policies.py``),
  ``AbstractCryptoKeyReader``, ``CryptoKeyReader``, ``EncryptionKey``,
  ``EncryptionContext`` (``cryptokeys.py``): their own classes here;
- ``Producer``, ``Consumer``, ``Reader``, ``Message`` and the
  ``Authentication*`` classes are pulsarfast's top-level classes (there are no
  wrapped objects behind them: the methods are the top-level ones).

``Error`` is the extension's result-and-message pair of its callbacks
(``results.ErrorResult``; pulsarfast's callbacks get a ``Result``, as the
official module's do). ``SchemaInfo`` is ``pulsarfast.schema.info``'s,
``TopicRegex`` ``topicregex.py``'s (``Client.subscribe`` takes one).
``TableView`` is ``rawtable.RawTableView`` (values as bytes: ``get(key)`` is a
``(found, value)`` pair, ``size()``, ``for_each``, ``for_each_and_listen``,
``close()``; ``TableView()`` is an empty one, as there) and
``TableViewConfiguration`` is configobjects.py's: ``_pulsar.Client``'s
``create_table_view(topic, TableViewConfiguration)`` returns the former.
"""
from __future__ import annotations

from pulsarfast.base.enums import (
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
from pulsarfast.base.logger import LoggerLevel
from pulsarfast.base.results import *  # noqa: F401,F403 - one exception class per Result code (results.EXCEPTION_NAMES)
from pulsarfast.base.results import EXCEPTION_NAMES
from pulsarfast.base.results import ErrorResult as Error
from pulsarfast.consuming.consumer import Consumer
from pulsarfast.consuming.rawtable import RawTableView as TableView
from pulsarfast.consuming.reader import Reader
from pulsarfast.endpoints.auth import (
    Authentication,
    AuthenticationAthenz,
    AuthenticationBasic,
    AuthenticationOauth2,
    AuthenticationTLS,
    AuthenticationToken,
)
from pulsarfast.endpoints.serviceinfo import ServiceInfo
from pulsarfast.extension.configobjects import (
    Client,
    ClientConfiguration,
    ConsumerConfiguration,
    ProducerConfiguration,
    ReaderConfiguration,
    TableViewConfiguration,
)
from pulsarfast.extension.messagebuilder import MessageBuilder
from pulsarfast.extension.policies import BatchReceivePolicy, DeadLetterPolicy, DeadLetterPolicyBuilder, KeySharedPolicy
from pulsarfast.extension.topicregex import TopicRegex
from pulsarfast.producing.producer import Producer
from pulsarfast.schema.info import SchemaInfo
from pulsarfast.wire.cryptokeys import AbstractCryptoKeyReader
from pulsarfast.wire.cryptokeys import RawCryptoKeyReader as CryptoKeyReader
from pulsarfast.wire.cryptokeys import RawEncryptionContext as EncryptionContext
from pulsarfast.wire.cryptokeys import RawEncryptionKey as EncryptionKey
from pulsarfast.wire.message import Message, MessageId
from pulsarfast.wire.messagebatch import RawMessageBatch as MessageBatch


__all__ = [
    "BatchingType", "CompressionType", "ConsumerType", "InitialPosition", "KeySharedMode", "PartitionsRoutingMode",
    "ProducerAccessMode", "ConsumerCryptoFailureAction", "RegexSubscriptionMode", "SchemaType", "LoggerLevel",
    "MessageId", "ServiceInfo", "Result", "PulsarException", *EXCEPTION_NAMES,
    "Authentication", "AuthenticationAthenz", "AuthenticationBasic", "AuthenticationOauth2", "AuthenticationTLS",
    "AuthenticationToken", "Client", "ClientConfiguration", "ConsumerConfiguration", "ProducerConfiguration",
    "ReaderConfiguration", "Consumer", "Producer", "Reader", "Message", "MessageBatch", "MessageBuilder",
    "AbstractCryptoKeyReader", "CryptoKeyReader", "EncryptionContext", "EncryptionKey", "BatchReceivePolicy",
    "DeadLetterPolicy", "DeadLetterPolicyBuilder", "KeySharedPolicy", "Error", "SchemaInfo", "TopicRegex",
    "TableView", "TableViewConfiguration",
]
