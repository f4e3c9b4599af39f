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
  ``ConsumerConfiguration``, ``ReaderConfiguration`` (``configuration.py``)
  and ``Client(service_url, ClientConfiguration)``, a ``pulsarfast.Client``;
- ``MessageBuilder`` (``messagebuilder.py``), ``MessageBatch``
  (``messagebatch.py``), ``DeadLetterPolicy`` (``policies.py``),
  ``AbstractCryptoKeyReader``, ``CryptoKeyReader``, ``EncryptionKey``,
  ``EncryptionContext`` (``cryptokeys.py``): their own classes here;
- ``Producer``, ``Consumer``, ``Reader``, ``Message`` and the
  ``Authentication*`` classes are pulsarfast's top-level classes (there are no
  wrapped objects behind them: the methods are the top-level ones).

``Error`` is the extension's result-and-message pair of its callbacks
(``errors.ErrorResult``; pulsarfast's callbacks get a ``Result``, as the
official module's do). ``SchemaInfo`` is ``pulsarfast.schema.info``'s,
``TopicRegex`` ``topicregex.py``'s (``Client.subscribe`` takes one).
``TableView`` is ``table.RawTableView`` (values as bytes: ``get(key)`` is a
``(found, value)`` pair, ``size()``, ``for_each``, ``for_each_and_listen``,
``close()``; ``TableView()`` is an empty one, as there) and
``TableViewConfiguration`` is configuration.py's: ``_pulsar.Client``'s
``create_table_view(topic, TableViewConfiguration)`` returns the former.
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
from .configuration import (
    Client,
    ClientConfiguration,
    ConsumerConfiguration,
    ProducerConfiguration,
    ReaderConfiguration,
    TableViewConfiguration,
)
from .consumer import Consumer
from .cryptokeys import AbstractCryptoKeyReader
from .cryptokeys import RawCryptoKeyReader as CryptoKeyReader
from .cryptokeys import RawEncryptionContext as EncryptionContext
from .cryptokeys import RawEncryptionKey as EncryptionKey
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
from .errors import *  # noqa: F401,F403 - one exception class per Result code (errors.EXCEPTION_NAMES)
from .errors import EXCEPTION_NAMES
from .errors import ErrorResult as Error
from .logger import LoggerLevel
from .message import Message, MessageId
from .messagebatch import RawMessageBatch as MessageBatch
from .messagebuilder import MessageBuilder
from .policies import BatchReceivePolicy, DeadLetterPolicy, DeadLetterPolicyBuilder, KeySharedPolicy
from .producer import Producer
from .reader import Reader
from .schema.info import SchemaInfo
from .service import ServiceInfo
from .table import RawTableView as TableView
from .topicregex import TopicRegex


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
