"""The official C extension's configuration objects, ``_pulsar.ClientConfiguration``,
``ProducerConfiguration``, ``ConsumerConfiguration`` and ``ReaderConfiguration``,
and ``_pulsar.Client``, the client built from them.

Each option is one method, as in the extension: ``conf.send_timeout_millis()``
reads it (the official default until set), ``conf.send_timeout_millis(1000)``
sets it and returns the configuration, or None for the options whose
official setter returns None (``ConsumerConfiguration.receiver_queue_size``,
...). Set-only options (``authentication``, ``listener_name``,
``tls_trust_certs_file_path``, ``property``, the listeners, the crypto ones)
have no reader, as there. Arguments are converted as the extension converts
them: an int for the number options (a float is refused), a str (or bytes)
for text, a bool from None, a bool or a number, the enum of the option;
anything else raises ``TypeError``. Values are stored as given, unchecked
(``io_threads(-3)`` reads back -3): the checks are the pulsarfast client's,
when the configuration is used.

``conf.kwargs()`` is what was set, as the keyword arguments of
``pulsarfast.Client(...)``, ``create_producer``, ``subscribe`` or
``create_reader`` (options never set are left out, so pulsarfast's defaults,
the official ones, apply). ``Client(service_url, ClientConfiguration)`` is a
``pulsarfast.Client`` made from one, whose ``create_producer(topic, conf)``,
``subscribe(topic, subscription_name, conf)`` and ``create_reader(topic,
start_message_id, conf)`` also take a configuration; they return pulsarfast's
``Producer``, ``Consumer`` and ``Reader``, whose methods are the top-level
classes' (``send(content, ...)``), not the extension's (``send(message)``).
The producer's, consumer's and reader's ``schema()`` reads (default: the
BYTES ``SchemaInfo``) or sets a ``_pulsar.SchemaInfo``: the factories register
it with the broker (``pulsarfast.schema.given``), and payloads stay bytes both
ways, as the extension's. ``Client.get_schema_info(topic, version)`` is the
extension's: the topic's registered schema of that version (negative: the
latest; ``pulsarfast.network.schemafetch``). ``subscribe`` also takes a
``TopicRegex`` as its topic: the pattern subscription of its pattern.
``TableViewConfiguration`` has two set-only options, ``subscription_name``
and ``schema`` (each returns None, as there); ``create_table_view(topic,
TableViewConfiguration)`` returns the extension's table view, a
``rawtable.RawTableView`` (bytes values).
"""
from __future__ import annotations

from enum import Enum
from typing import Any, Callable, Mapping

from pulsarfast.base.enums import (
    BatchingType,
    CompressionType,
    ConsumerCryptoFailureAction,
    ConsumerType,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    SchemaType,
)
from pulsarfast.base.logger import ConsoleLogger, FileLogger, LoggerLevel
from pulsarfast.base.topics import full_topic_name
from pulsarfast.client import Client as FastClient
from pulsarfast.consuming.consumer import Consumer
from pulsarfast.consuming.reader import Reader
from pulsarfast.endpoints.auth import Authentication
from pulsarfast.extension.policies import BatchReceivePolicy, DeadLetterPolicy, KeySharedPolicy
from pulsarfast.extension.topicregex import TopicRegex
from pulsarfast.network.schemafetch import SchemaSource
from pulsarfast.options.deadletterpolicy import ConsumerDeadLetterPolicy
from pulsarfast.options.keyshared import ConsumerKeySharedPolicy
from pulsarfast.options.settings import TableViewSettings
from pulsarfast.producing.producer import Producer
from pulsarfast.schema.given import schema_of_info
from pulsarfast.schema.info import SchemaInfo
from pulsarfast.wire.cryptokeys import AbstractCryptoKeyReader, CryptoKeyReader
from pulsarfast.wire.message import MessageId

__all__ = ["ClientConfiguration", "ProducerConfiguration", "ConsumerConfiguration", "ReaderConfiguration", "TableViewConfiguration",
           "Client",
           "convert_int", "convert_int64", "convert_bool", "convert_str"]

_INT32 = 1 << 31
#: what a configuration's schema() reads until set (the extension's default)
BYTES_SCHEMA_INFO = SchemaInfo(SchemaType.BYTES, "BYTES", "")
_INT64 = 1 << 63
Converter = Callable[[str, Any], Any]


def incompatible(method: str, value: Any) -> TypeError:
    return TypeError("%s(): incompatible function arguments: %r is not of the type it takes" % (method, value))


def _integer(method: str, value: Any, bound: int) -> int:
    if not isinstance(value, int) or not -bound <= value < bound:
        raise incompatible(method, value)
    return int(value)


def convert_int(method: str, value: Any) -> int:
    return _integer(method, value, _INT32)


def convert_int64(method: str, value: Any) -> int:
    return _integer(method, value, _INT64)


def convert_bool(method: str, value: Any) -> bool:
    if value is not None and not isinstance(value, (bool, int, float)):
        raise incompatible(method, value)
    return bool(value)


def convert_str(method: str, value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if not isinstance(value, str):
        raise incompatible(method, value)
    return value


def convert_enum(kind: type[Enum]) -> Converter:
    def convert(method: str, value: Any) -> Any:
        if isinstance(value, kind):
            return value
        if type(value).__name__ == kind.__name__ and getattr(value, "name", None) in kind.__members__:
            return kind[value.name]  # (the official module's enum)
        raise incompatible(method, value)
    return convert


def convert_instance(kind: type) -> Converter:
    def convert(method: str, value: Any) -> Any:
        if not isinstance(value, kind):
            raise incompatible(method, value)
        return value
    return convert


def convert_callable(method: str, value: Any) -> Any:
    if not callable(value):
        raise incompatible(method, value)
    return value


def option(name: str, default: Any, convert: Converter, chain: bool = True, readable: bool = True) -> Any:
    """The method of one option (see the module docstring): read with no argument, set with one."""
    missing = object()

    def method(self: "Configuration", value: Any = missing) -> Any:
        if value is missing:
            if not readable:
                raise TypeError("%s(): incompatible function arguments: it takes one argument" % name)
            return self._values.get(name, default)
        self._values[name] = convert(name, value)
        return self if chain else None

    method.__name__ = method.__qualname__ = name
    method.__doc__ = "Read %s (no argument) or set it%s." % (name, " (returns the configuration)" if chain else "")
    return method


class Configuration:
    """What the four configurations share: the options set, by method name."""

    #: method name -> pulsarfast keyword argument (the methods not here have the same name)
    KEYWORDS: Mapping[str, str] = {}

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def kwargs(self) -> dict[str, Any]:
        """The options set, as pulsarfast keyword arguments."""
        return {self.KEYWORDS.get(name, name): self._keyword_value(name, value) for name, value in self._values.items()}

    def _keyword_value(self, name: str, value: Any) -> Any:
        if isinstance(value, AbstractCryptoKeyReader):  # (create_producer and subscribe take the pulsar one)
            return CryptoKeyReader.of(value)
        return schema_of_info(value) if isinstance(value, SchemaInfo) else value

    def __repr__(self) -> str:
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % item for item in sorted(self._values.items())))


class ClientConfiguration(Configuration):
    """``_pulsar.ClientConfiguration()``."""

    KEYWORDS = {"connection_timeout": "connection_timeout_ms"}

    authentication = option("authentication", None, convert_instance(Authentication), readable=False)
    concurrent_lookup_requests = option("concurrent_lookup_requests", 50000, convert_int)
    connection_timeout = option("connection_timeout", 10000, convert_int)
    io_threads = option("io_threads", 1, convert_int)
    listener_name = option("listener_name", None, convert_str, readable=False)
    message_listener_threads = option("message_listener_threads", 1, convert_int)
    operation_timeout_seconds = option("operation_timeout_seconds", 30, convert_int)
    stats_interval_in_seconds = option("stats_interval_in_seconds", 600, convert_int)
    tls_allow_insecure_connection = option("tls_allow_insecure_connection", False, convert_bool)
    tls_certificate_file_path = option("tls_certificate_file_path", "", convert_str)
    tls_private_key_file_path = option("tls_private_key_file_path", "", convert_str)
    tls_trust_certs_file_path = option("tls_trust_certs_file_path", None, convert_str, readable=False)
    tls_validate_hostname = option("tls_validate_hostname", None, convert_bool, readable=False)

    def set_logger(self, logger: Any) -> "ClientConfiguration":
        """The logger the client writes to (a ``logging.Logger``; checked by the client)."""
        self._values["logger"] = logger
        return self

    def set_console_logger(self, level: LoggerLevel) -> "ClientConfiguration":
        self._values["logger"] = ConsoleLogger(convert_enum(LoggerLevel)("set_console_logger", level))
        return self

    def set_file_logger(self, level: LoggerLevel, path: str) -> "ClientConfiguration":
        self._values["logger"] = FileLogger(convert_enum(LoggerLevel)("set_file_logger", level),
                                            convert_str("set_file_logger", path))
        return self


class ProducerConfiguration(Configuration):
    """``_pulsar.ProducerConfiguration()``."""

    KEYWORDS = {"partitions_routing_mode": "message_routing_mode"}

    access_mode = option("access_mode", ProducerAccessMode.Shared, convert_enum(ProducerAccessMode))
    batching_enabled = option("batching_enabled", True, convert_bool)
    batching_max_allowed_size_in_bytes = option("batching_max_allowed_size_in_bytes", 131072, convert_int64)
    batching_max_messages = option("batching_max_messages", 1000, convert_int)
    batching_max_publish_delay_ms = option("batching_max_publish_delay_ms", 10, convert_int64)
    batching_type = option("batching_type", BatchingType.Default, convert_enum(BatchingType))
    block_if_queue_full = option("block_if_queue_full", False, convert_bool)
    chunking_enabled = option("chunking_enabled", False, convert_bool)
    compression_type = option("compression_type", CompressionType.NONE, convert_enum(CompressionType))
    crypto_key_reader = option("crypto_key_reader", None, convert_instance(object), readable=False)
    encryption_key = option("encryption_key", None, convert_str, readable=False)
    initial_sequence_id = option("initial_sequence_id", -1, convert_int64)
    lazy_start_partitioned_producers = option("lazy_start_partitioned_producers", False, convert_bool)
    max_pending_messages = option("max_pending_messages", 1000, convert_int)
    max_pending_messages_across_partitions = option("max_pending_messages_across_partitions", 50000, convert_int)
    message_router = option("message_router", None, convert_callable, chain=False, readable=False)
    partitions_routing_mode = option("partitions_routing_mode", PartitionsRoutingMode.RoundRobinDistribution,
                                     convert_enum(PartitionsRoutingMode))
    producer_name = option("producer_name", "", convert_str)
    schema = option("schema", BYTES_SCHEMA_INFO, convert_instance(SchemaInfo))
    send_timeout_millis = option("send_timeout_millis", 30000, convert_int)

    def property(self, key: str, value: str) -> "ProducerConfiguration":
        """One producer property (``create_producer``'s ``properties``)."""
        self._values.setdefault("properties", {})[convert_str("property", key)] = convert_str("property", value)
        return self


def _consumer_policy(name: str, value: Any) -> Any:
    """A raw policy object as the Consumer* wrapper subscribe() takes."""
    if isinstance(value, BatchReceivePolicy):
        return value.consumer_policy()
    if isinstance(value, KeySharedPolicy):
        return ConsumerKeySharedPolicy(value.get_key_shared_mode(), value.is_allow_out_of_order_delivery(),
                                       value.get_sticky_ranges() or None)
    if isinstance(value, DeadLetterPolicy):
        return ConsumerDeadLetterPolicy(value.getMaxRedeliverCount(), value.getDeadLetterTopic() or None,
                                        value.getInitialSubscriptionName() or None)
    return value


class ConsumerConfiguration(Configuration):
    """``_pulsar.ConsumerConfiguration()``."""

    KEYWORDS = {"subscription_initial_position": "initial_position", "read_compacted": "is_read_compacted"}

    auto_ack_oldest_chunked_message_on_queue_full = option("auto_ack_oldest_chunked_message_on_queue_full", False,
                                                           convert_bool)
    batch_index_ack_enabled = option("batch_index_ack_enabled", False, convert_bool)
    batch_receive_policy = option("batch_receive_policy", BatchReceivePolicy(-1, 10 * 1024 * 1024, 100),
                                  convert_instance(BatchReceivePolicy), chain=False)
    broker_consumer_stats_cache_time_ms = option("broker_consumer_stats_cache_time_ms", 30000, convert_int64,
                                                 chain=False)
    consumer_name = option("consumer_name", "", convert_str, chain=False)
    consumer_type = option("consumer_type", ConsumerType.Exclusive, convert_enum(ConsumerType))
    crypto_failure_action = option("crypto_failure_action", ConsumerCryptoFailureAction.FAIL,
                                   convert_enum(ConsumerCryptoFailureAction))
    crypto_key_reader = option("crypto_key_reader", None, convert_instance(object), readable=False)
    dead_letter_policy = option("dead_letter_policy", DeadLetterPolicy(), convert_instance(DeadLetterPolicy),
                                chain=False)
    key_shared_policy = option("key_shared_policy", KeySharedPolicy(), convert_instance(KeySharedPolicy))
    max_pending_chunked_message = option("max_pending_chunked_message", 10, convert_int)
    max_total_receiver_queue_size_across_partitions = option("max_total_receiver_queue_size_across_partitions", 50000,
                                                             convert_int, chain=False)
    message_listener = option("message_listener", None, convert_callable, readable=False)
    negative_ack_redelivery_delay_ms = option("negative_ack_redelivery_delay_ms", 60000, convert_int64, chain=False)
    pattern_auto_discovery_period = option("pattern_auto_discovery_period", 60, convert_int, chain=False)
    read_compacted = option("read_compacted", False, convert_bool, chain=False)
    receiver_queue_size = option("receiver_queue_size", 1000, convert_int, chain=False)
    regex_subscription_mode = option("regex_subscription_mode", RegexSubscriptionMode.PersistentOnly,
                                     convert_enum(RegexSubscriptionMode))
    replicate_subscription_state_enabled = option("replicate_subscription_state_enabled", False, convert_bool,
                                                  chain=False)
    schema = option("schema", BYTES_SCHEMA_INFO, convert_instance(SchemaInfo))
    start_message_id_inclusive = option("start_message_id_inclusive", False, convert_bool)
    subscription_initial_position = option("subscription_initial_position", InitialPosition.Latest,
                                           convert_enum(InitialPosition), chain=False)
    unacked_messages_timeout_ms = option("unacked_messages_timeout_ms", 0, convert_int64, chain=False)

    def property(self, key: str, value: str) -> "ConsumerConfiguration":
        """One consumer property (``subscribe``'s ``properties``)."""
        self._values.setdefault("properties", {})[convert_str("property", key)] = convert_str("property", value)
        return self

    def _keyword_value(self, name: str, value: Any) -> Any:
        return _consumer_policy(name, super()._keyword_value(name, value))


class ReaderConfiguration(Configuration):
    """``_pulsar.ReaderConfiguration()``."""

    KEYWORDS = {"read_compacted": "is_read_compacted"}

    crypto_failure_action = option("crypto_failure_action", ConsumerCryptoFailureAction.FAIL,
                                   convert_enum(ConsumerCryptoFailureAction))
    crypto_key_reader = option("crypto_key_reader", None, convert_instance(object), readable=False)
    read_compacted = option("read_compacted", False, convert_bool, chain=False)
    reader_listener = option("reader_listener", None, convert_callable, readable=False)
    reader_name = option("reader_name", "", convert_str, chain=False)
    receiver_queue_size = option("receiver_queue_size", 1000, convert_int, chain=False)
    schema = option("schema", BYTES_SCHEMA_INFO, convert_instance(SchemaInfo))
    start_message_id_inclusive = option("start_message_id_inclusive", False, convert_bool)
    subscription_role_prefix = option("subscription_role_prefix", "", convert_str, chain=False)


class TableViewConfiguration(Configuration):
    """``_pulsar.TableViewConfiguration()``: set-only options, whose setters return None."""

    schema = option("schema", None, convert_instance(SchemaInfo), chain=False, readable=False)
    subscription_name = option("subscription_name", None, convert_str, chain=False, readable=False)


def _configuration(kind: type[Configuration], method: str, value: Any) -> Configuration:
    if not isinstance(value, kind):
        raise incompatible(method, value)
    return value


class Client(FastClient):
    """``_pulsar.Client(service_url, ClientConfiguration)``: a pulsarfast ``Client`` (see the module
    docstring); its three factories take a configuration as their last argument too."""

    def __init__(self, service_url: str, configuration: ClientConfiguration) -> None:
        super().__init__(service_url, **_configuration(ClientConfiguration, "__init__", configuration).kwargs())

    def create_producer(self, topic: str, *args: Any, **kwargs: Any) -> Producer:
        if len(args) == 1 and not kwargs and isinstance(args[0], ProducerConfiguration):
            return super().create_producer(topic, **args[0].kwargs())
        return super().create_producer(topic, *args, **kwargs)

    def subscribe(self, topic: Any, subscription_name: str, *args: Any,
                  **kwargs: Any) -> Consumer:
        if isinstance(topic, TopicRegex):
            topic = topic.compiled()
        if len(args) == 1 and not kwargs and isinstance(args[0], ConsumerConfiguration):
            return super().subscribe(topic, subscription_name, **args[0].kwargs())
        return super().subscribe(topic, subscription_name, *args, **kwargs)

    def create_reader(self, topic: str, start_message_id: MessageId, *args: Any,
                      **kwargs: Any) -> Reader:
        if len(args) == 1 and not kwargs and isinstance(args[0], ReaderConfiguration):
            return super().create_reader(topic, start_message_id, **args[0].kwargs())
        return super().create_reader(topic, start_message_id, *args, **kwargs)

    def get_schema_info(self, topic: str, version: int) -> SchemaInfo:
        """The topic's registered schema of version (negative: the latest), as the extension's."""
        name = full_topic_name(convert_str("get_schema_info", topic))
        return SchemaSource(self).get_schema_info(name, convert_int64("get_schema_info", version))

    def create_table_view(self, topic: str, *args: Any, **kwargs: Any) -> Any:
        """With a TableViewConfiguration: the extension's table view (``rawtable.RawTableView``)."""
        if len(args) == 1 and not kwargs and isinstance(args[0], TableViewConfiguration):
            return self.open_table_view(TableViewSettings(topic=topic, **args[0].kwargs()))
        return super().create_table_view(topic, *args, **kwargs)
