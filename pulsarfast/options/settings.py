"""Settings, validated once: ``ClientSettings``, ``ProducerSettings``,
``ConsumerSettings`` and ``ReaderSettings``, the frozen objects that
``Client(...)``, ``create_producer``, ``subscribe`` and ``create_reader``
build from the official keyword arguments, before any network traffic, and
hand whole to what they make.

Each argument is a field declared with ``option(default, check)``: its
default is written here, once (the Client's signatures take their defaults
from these classes: ``receiver_queue_size: int =
ConsumerSettings.receiver_queue_size``), and its check beside it. A check
raises what the official client raises (``ValueError`` for a wrong type or
value; ``InvalidConfiguration`` where pulsarfast refuses a setting); it
may normalise the value it keeps (an int to its enum, a ``HashingScheme`` to
its name, a topic to its full name). ``__post_init__`` runs the checks in
field order, then each class's ``_derive``: the checks that involve several
arguments, and the fields that are not arguments but what the producers and
consumers use (seconds for milliseconds, full topic names, the resolved
compression codec, the TLS context, the unacked timeout, the start position).

Adding an official option: a field, ``name: type = option(default, check)``,
in its class, and the parameter ``name: type = XSettings.name`` in the
Client's method, which passes its arguments whole
(``XSettings.from_arguments(locals())``).
"""
from __future__ import annotations

import dataclasses
import re
import secrets
import ssl
from typing import Any, Callable, Mapping, TypeVar

from msgengine.runtime import BackendSetting

from pulsarfast.base.enums import (
    BatchingType,
    CompressionType,
    ConsumerCryptoFailureAction,
    ConsumerType,
    InitialPosition,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
)
from pulsarfast.base.logger import logger_arg
from pulsarfast.base.results import InvalidConfiguration
from pulsarfast.base.topics import full_topic_name
from pulsarfast.endpoints.auth import Authentication
from pulsarfast.endpoints.endpoint import Endpoint, TlsOptions, make_endpoint
from pulsarfast.endpoints.failover import AutoClusterFailover
from pulsarfast.endpoints.serviceinfo import ServiceInfo, ServiceInfoProvider
from pulsarfast.options.batchreceive import (
    DEFAULT as DEFAULT_BATCH_RECEIVE,
    ConsumerBatchReceivePolicy,
    batch_receive_policy_arg,
)
from pulsarfast.options.deadletterpolicy import ConsumerDeadLetterPolicy
from pulsarfast.options.keyshared import ConsumerKeySharedPolicy, key_shared_policy_arg
from pulsarfast.options.startposition import StartPosition, is_earliest, is_latest
from pulsarfast.schema.schema import BytesSchema, Schema
from pulsarfast.wire import proto
from pulsarfast.wire.compression import Codec, codec_for
from pulsarfast.wire.crypto import PayloadDecryptor, PayloadEncryptor, key_names
from pulsarfast.wire.cryptokeys import CryptoKeyReader
from pulsarfast.wire.hashing import DEFAULT_HASHING_SCHEME, HASHING_SCHEMES
from pulsarfast.wire.message import Message, MessageId

#: a check: (argument name, value) -> the value to keep; raises when the value is wrong
Check = Callable[[str, Any], Any]
#: a consumer's message listener: listener(consumer, message)
Listener = Callable[[Any, Message], None]

#: the smallest unacked_messages_timeout_ms (the Java client's; the official Python client asks for 10000)
MIN_UNACKED_TIMEOUT_MS = 1000
#: the official message when an optional name is not a str (the other one: producer_name's)
EITHER_NONE_OR_STR = "Argument %s is expected to be either None or of type 'str'"

_CHECK = "check"


def option(default: Any = dataclasses.MISSING, check: Check | None = None) -> Any:
    """A field that is an official argument: its default (none: a required argument), and the
    check its value passes."""
    return dataclasses.field(default=default, metadata={_CHECK: check} if check is not None else {})


# -- checks ----------------------------------------------------------------------------------


def int_arg(name: str, value: Any, minimum: int | None = 0) -> int:
    """An int (not a bool) of at least minimum (None: any)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError("Argument %s is expected to be of type 'int' and not '%s'" % (name, type(value).__name__))
    if minimum is not None and value < minimum:
        raise ValueError("Argument %s must be at least %d, not %d" % (name, minimum, value))
    return value


def integer(minimum: int | None = 0) -> Check:
    """Check: an int of at least minimum (None: any int)."""
    def check(name: str, value: Any) -> int:
        return int_arg(name, value, minimum)
    return check


def optional(check: Check) -> Check:
    """Check: None, or a value that passes check."""
    def check_unless_none(name: str, value: Any) -> Any:
        return None if value is None else check(name, value)
    return check_unless_none


def each(*checks: Check) -> Check:
    """Check: the value passes each check in turn (each keeps what the one before kept)."""
    def check_all(name: str, value: Any) -> Any:
        for check in checks:
            value = check(name, value)
        return value
    return check_all


def boolean(name: str, value: Any) -> bool:
    """Check: a bool."""
    if not isinstance(value, bool):
        raise ValueError("Argument %s is expected to be of type 'bool' and not '%s'" % (name, type(value).__name__))
    return value


def truth(_name: str, value: Any) -> bool:
    """Check: anything, kept as its truth value (the arguments pulsarfast never refused)."""
    return bool(value)


def optional_str(message: str = EITHER_NONE_OR_STR) -> Check:
    """Check: None or a str; message (with the argument's name) otherwise."""
    def check(name: str, value: Any) -> str | None:
        if value is not None and not isinstance(value, str):
            raise ValueError(message % name)
        return value
    return check


def callable_or_none(name: str, value: Any) -> Any:
    """Check: None or a callable."""
    if value is not None and not callable(value):
        raise ValueError("%s must be callable" % name)
    return value


def crypto_key_reader_arg(name: str, value: Any) -> Any:
    """Check: None or a ``pulsar.CryptoKeyReader`` (the official check and message)."""
    if value is not None and not isinstance(value, CryptoKeyReader):
        raise ValueError("Argument %s is expected to be either None or of type 'CryptoKeyReader'" % name)
    return value


def enum_of(kind: Callable[[Any], Any]) -> Check:
    """Check: a member of the enum kind, or its value (kept as the member)."""
    def check(_name: str, value: Any) -> Any:
        return kind(value)
    return check


#: the schema create_producer, subscribe and create_reader default to (one instance, as the official
#: defaults are): bytes as they are, none sent to the broker
BYTES_SCHEMA = BytesSchema()


def schema_arg(name: str, value: Any) -> Any:
    """Check: a ``pulsarfast.schema`` schema (BytesSchema, StringSchema, JsonSchema, ...); anything
    else, None too, is the official ValueError."""
    if not isinstance(value, Schema):
        raise ValueError("Argument %s is expected to be of type 'Schema' and not '%s'" % (name, type(value).__name__))
    return value


def value_schema(schema: Schema | None) -> Schema | None:
    """The schema that encodes and decodes values: None for no schema or bytes (payloads as they are)."""
    return None if schema is None or isinstance(schema, BytesSchema) else schema


def wire_schema(schema: Schema | None) -> bytes | None:
    """The serialized Schema the PRODUCER and SUBSCRIBE commands carry (None for bytes: none, as
    the official client sends none)."""
    if value_schema(schema) is None:
        return None
    assert schema is not None
    info = schema.schema_info()
    return proto.schema_message(info.name(), info.schema().encode("utf-8"), info.schema_type().value,
                                info.properties())


def of_type(kind: type, type_name: str) -> Check:
    """Check: an instance of kind, as the official client's type checks test it (so an
    int check takes a bool, as there); type_name in the message."""
    def check(name: str, value: Any) -> Any:
        if not isinstance(value, kind):
            raise ValueError("Argument %s is expected to be of type '%s' and not '%s'"
                             % (name, type_name, type(value).__name__))
        return value
    return check


def optional_dict(name: str, value: Any) -> dict | None:
    """Check: None or a dict (kept as a copy)."""
    if value is not None and not isinstance(value, dict):
        raise ValueError("Argument %s is expected to be either None or of type 'dict'" % name)
    return dict(value) if value is not None else None


def str_arg(name: str, value: Any) -> str:
    """Check: a str."""
    if not isinstance(value, str):
        raise ValueError("Argument %s is expected to be of type 'str' and not '%s'" % (name, type(value).__name__))
    return value


def service_url_arg(_name: str, value: Any) -> Any:
    """Check: Client's service_url, a str (parse_service_url says whether it is a service URL), an
    AutoClusterFailover or a ServiceInfoProvider."""
    if isinstance(value, (AutoClusterFailover, ServiceInfoProvider)):
        return value
    if not isinstance(value, str):
        raise ValueError("Argument service_url is expected to be of type 'str', 'AutoClusterFailover' or "
                         "'ServiceInfoProvider'")
    return value


def initial_service_info(service_url: Any, authentication: Any, trust_file: str | None) -> ServiceInfo | None:
    """The ServiceInfo a Client given an AutoClusterFailover (its primary) or a ServiceInfoProvider (its
    initial_service_info()) starts on; None for a str. Authentication and a trust file go on each
    ServiceInfo then (ValueError otherwise, as there)."""
    if not isinstance(service_url, (AutoClusterFailover, ServiceInfoProvider)):
        return None
    if authentication is not None:
        raise ValueError("Argument authentication is not supported when service_url is an AutoClusterFailover or "
                         "ServiceInfoProvider; set authentication on each ServiceInfo instead")
    if trust_file is not None:
        raise ValueError("Argument tls_trust_certs_file_path is not supported when service_url is an "
                         "AutoClusterFailover or ServiceInfoProvider; set tls_trust_certs_file_path on each "
                         "ServiceInfo instead")
    if isinstance(service_url, AutoClusterFailover):
        return service_url.primary
    initial = service_url.initial_service_info()
    if not isinstance(initial, ServiceInfo):
        raise ValueError("Expected a pulsar.ServiceInfo or _pulsar.ServiceInfo instance")
    return initial


def message_id_arg(name: str, value: Any) -> MessageId:
    """Check: a MessageId."""
    if not isinstance(value, MessageId):
        raise ValueError("Argument %s is expected to be of type 'MessageId' and not '%s'"
                         % (name, type(value).__name__))
    return value


def topic_arg(_name: str, value: Any) -> str:
    """Check: a topic name, kept as its full name (InvalidTopicName otherwise)."""
    return full_topic_name(value)


def topics_arg(_name: str, value: Any) -> Any:
    """Check: subscribe()'s topic, one name, a non-empty list of names, or a compiled pattern
    (``re.compile(...)``; a str is a topic name, as in the official client) whose text names
    its namespace as a topic name does (``persistent://public/default/prefix-.*``)."""
    if isinstance(value, re.Pattern):
        if not isinstance(value.pattern, str):
            raise ValueError("Argument topic: a pattern of str is expected, not %r" % (value,))
        full_topic_name(value.pattern)  # (InvalidTopicName: no tenant/namespace in it)
        return value
    names = [value] if isinstance(value, str) else value
    if not (isinstance(names, (list, tuple)) and names and all(isinstance(topic, str) for topic in names)):
        raise ValueError("Argument topic is expected to be of type 'str' or 'list', not %r" % (value,))
    for topic in names:
        full_topic_name(topic)  # (InvalidTopicName)
    return value


def subscription_name_arg(name: str, value: Any) -> str:
    """Check: a non-empty str."""
    if not isinstance(value, str) or not value:
        raise ValueError("Argument %s must be a non-empty str" % name)
    return value


def unacked_timeout_arg(name: str, value: Any) -> int | None:
    """Check: None or 0 (off), or at least MIN_UNACKED_TIMEOUT_MS."""
    if value is None:
        return None
    int_arg(name, value, None)
    if value != 0 and value < MIN_UNACKED_TIMEOUT_MS:
        raise ValueError("%s must be at least %d ms (0 or None turns it off), not %d"
                         % (name, MIN_UNACKED_TIMEOUT_MS, value))
    return value


def dead_letter_policy_arg(name: str, value: Any) -> ConsumerDeadLetterPolicy | None:
    """Check: None or a dead-letter policy (also the official module's), kept as a checked
    ConsumerDeadLetterPolicy."""
    if value is None:
        return None
    try:
        return ConsumerDeadLetterPolicy(value.max_redeliver_count, value.dead_letter_topic or None,
                                        value.initial_subscription_name or None)
    except AttributeError:
        raise ValueError("Argument %s is expected to be a ConsumerDeadLetterPolicy, not %r" % (name, value)) from None


def hashing_scheme_arg(name: str, value: Any) -> str:
    """Check: a scheme's name or a HashingScheme, kept as the name."""
    if value in HASHING_SCHEMES:
        return str(value)
    scheme = getattr(value, "name", None)
    if scheme not in HASHING_SCHEMES:
        raise InvalidConfiguration("%s must be one of %s" % (name, ", ".join(HASHING_SCHEMES)))
    return str(scheme)


def access_mode_arg(name: str, value: Any) -> ProducerAccessMode:
    """Check: a ``ProducerAccessMode`` (the official client refuses anything else, None and its int
    values too, with this ValueError)."""
    if not isinstance(value, ProducerAccessMode):
        raise ValueError("Argument %s is expected to be of type 'ProducerAccessMode' and not '%s'"
                         % (name, type(value).__name__))
    return value


def authentication_arg(name: str, value: Any) -> Authentication | None:
    """Check: None or one of pulsarfast's Authentication objects."""
    if value is not None and not isinstance(value, Authentication):
        raise ValueError("Argument %s is expected to be a pulsarfast Authentication (such as "
                         "pulsarfast.AuthenticationToken), not %s" % (name, type(value).__name__))
    return value


# -- the settings ----------------------------------------------------------------------------

S = TypeVar("S", bound="Settings")


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the settings classes share: being built from a Client method's
    arguments, each field's check run in order, then the class's ``_derive``."""

    @classmethod
    def from_arguments(cls: type[S], arguments: Mapping[str, Any]) -> S:
        """Built from a Client method's ``locals()``: its parameters are the fields (``self`` aside)."""
        values = {name: value for name, value in arguments.items() if name != "self"}
        return cls(**values)

    def __post_init__(self) -> None:
        for spec in dataclasses.fields(self):
            check = spec.metadata.get(_CHECK)
            if check is not None:
                value = getattr(self, spec.name)
                kept = check(spec.name, value)
                if kept is not value:
                    object.__setattr__(self, spec.name, kept)
        self._derive()

    def _derive(self) -> None:
        """The checks of several arguments together, and the derived fields (set with _set)."""

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)


@dataclasses.dataclass(frozen=True)
class ClientSettings(Settings):
    """``Client(...)``'s arguments (the official client's, then pulsarfast's
    ``backend`` and ``keep_alive_interval_seconds``)."""

    #: a str, an AutoClusterFailover or a ServiceInfoProvider
    service_url: Any = option(check=service_url_arg)
    authentication: Authentication | None = option(None, authentication_arg)
    operation_timeout_seconds: int = option(30, integer(1))
    io_threads: int = option(1, of_type(int, "int"))
    message_listener_threads: int = option(1, of_type(int, "int"))
    concurrent_lookup_requests: int = option(50000, of_type(int, "int"))
    log_conf_file_path: str | None = option(None)
    stats_interval_in_seconds: int = option(600, of_type(int, "int"))
    use_tls: bool = option(False, boolean)
    tls_trust_certs_file_path: str | None = option(None, optional_str())
    tls_allow_insecure_connection: bool = option(False, boolean)
    tls_validate_hostname: bool = option(False, boolean)
    connection_timeout_ms: int = option(10000, integer(1))
    listener_name: str | None = option(None)
    tls_private_key_file_path: str | None = option(None, optional_str())
    tls_certificate_file_path: str | None = option(None, optional_str())
    #: None, a logging.Logger, a ConsoleLogger or a FileLogger (checked after the others, as there)
    logger: Any = option(None, logger_arg)
    #: "auto", "gevent", "threads" or a Backend; read back, always the Backend
    backend: BackendSetting = BackendSetting()
    keep_alive_interval_seconds: int = option(30, integer(1))
    #: how often a consumer of a partitioned topic asks whether it has more partitions now (the C++
    #: client's partitionsUpdateInterval, 60 s, which the official Python wrapper does not expose)
    partitions_update_interval_seconds: int = option(60, integer(1))

    # derived
    #: the service used first: service_url's, or the provider's initial ServiceInfo's (endpoint.py)
    endpoint: Endpoint = dataclasses.field(init=False, repr=False, compare=False)
    #: what every endpoint's TLS context is made with
    tls_options: TlsOptions = dataclasses.field(init=False, repr=False)
    scheme: str = dataclasses.field(init=False)
    hosts: list[tuple[str, int]] = dataclasses.field(init=False)
    #: connections use TLS: a pulsar+ssl:// or https:// URL, or use_tls
    tls: bool = dataclasses.field(init=False)
    #: what every TLS connection of the client uses (None without TLS); its files are loaded here
    ssl_context: ssl.SSLContext | None = dataclasses.field(init=False, repr=False, compare=False)
    operation_timeout: float = dataclasses.field(init=False)
    connect_timeout: float = dataclasses.field(init=False)
    keep_alive: float = dataclasses.field(init=False)

    def _derive(self) -> None:
        options = TlsOptions(self.use_tls, self.tls_allow_insecure_connection, self.tls_validate_hostname,
                             self.tls_certificate_file_path, self.tls_private_key_file_path)
        self._set("tls_options", options)
        initial = initial_service_info(self.service_url, self.authentication, self.tls_trust_certs_file_path)
        if initial is None:
            endpoint = make_endpoint(self.service_url, self.authentication, self.tls_trust_certs_file_path, options)
        else:
            endpoint = make_endpoint(initial.service_url, initial.authentication, initial.tls_trust_certs_file_path,
                                     options)
        self._set("endpoint", endpoint)
        self._set("scheme", endpoint.scheme)
        self._set("hosts", endpoint.hosts)
        self._set("tls", endpoint.tls)
        self._set("ssl_context", endpoint.ssl_context)
        self._set("operation_timeout", float(self.operation_timeout_seconds))
        self._set("connect_timeout", self.connection_timeout_ms / 1000.0)
        self._set("keep_alive", float(self.keep_alive_interval_seconds))


@dataclasses.dataclass(frozen=True)
class ProducerSettings(Settings):
    """``create_producer``'s arguments (the official client's, then pulsarfast's
    ``hashing_scheme``, ``initial_subscription_name`` and ``batching_eager``)."""

    topic: str = option(check=each(str_arg, topic_arg))
    producer_name: str | None = option(None, optional_str())
    schema: Any = option(BYTES_SCHEMA, schema_arg)
    initial_sequence_id: int | None = option(None, optional(integer(-1)))
    send_timeout_millis: int = option(30000, integer(0))
    compression_type: CompressionType = option(CompressionType.NONE)
    max_pending_messages: int = option(1000, integer(1))
    max_pending_messages_across_partitions: int = option(50000, integer(1))
    block_if_queue_full: bool = option(False, boolean)
    batching_enabled: bool = option(False, boolean)
    batching_max_messages: int = option(1000, integer(1))
    batching_max_allowed_size_in_bytes: int = option(128 * 1024, integer(1))
    batching_max_publish_delay_ms: int = option(10, integer(0))
    chunking_enabled: bool = option(False, truth)
    message_routing_mode: PartitionsRoutingMode = option(PartitionsRoutingMode.RoundRobinDistribution,
                                                         enum_of(PartitionsRoutingMode))
    lazy_start_partitioned_producers: bool = option(False, boolean)
    properties: dict[str, str] | None = option(None, optional_dict)
    #: Default, or KeyBased: a batch then holds the messages of one key, and carries it (producer.py)
    batching_type: BatchingType = option(BatchingType.Default, of_type(BatchingType, "BatchingType"))
    #: the name of the key the payloads are encrypted for (with crypto_key_reader: both, or no encryption)
    encryption_key: str | None = option(None, optional_str())
    crypto_key_reader: CryptoKeyReader | None = option(None, crypto_key_reader_arg)
    #: Shared, or one of the exclusive modes (what the PRODUCER command asks for; see producer.py)
    access_mode: ProducerAccessMode = option(ProducerAccessMode.Shared, access_mode_arg)
    #: message_router(message, partitions) -> the partition's index
    message_router: Any = option(None)
    hashing_scheme: str = option(DEFAULT_HASHING_SCHEME, hashing_scheme_arg)
    #: a subscription the broker creates on the topic with the producer (a dead-letter topic's)
    initial_subscription_name: str | None = option(None, optional_str("Argument %s is expected to be of type 'str'"))
    #: a batch also goes at the end of the loop's turn when none of the producer waits for its receipt
    #: (the asyncio backend's turns; no effect on threads or gevent): producer.py's _send_early
    batching_eager: bool = option(False, boolean)

    # derived
    #: compresses each frame's payload (None: not compressed)
    codec: Codec | None = dataclasses.field(init=False, compare=False)
    #: a send fails after this many seconds without a receipt (0: never)
    send_timeout: float = dataclasses.field(init=False)
    #: how long Producer.flush() waits (None: for ever)
    flush_timeout: float | None = dataclasses.field(init=False)
    batch_delay: float = dataclasses.field(init=False)
    #: the properties, as the PRODUCER command carries them
    metadata: dict[str, str] = dataclasses.field(init=False)
    #: encodes what send() is given (None: bytes, sent as they are)
    value_schema: Schema | None = dataclasses.field(init=False, compare=False)
    #: the serialized Schema the PRODUCER command carries (None: bytes, none)
    wire_schema: bytes | None = dataclasses.field(init=False, compare=False)
    #: encrypts each frame's payload, after compression (None: not encrypted; crypto.py)
    encryptor: PayloadEncryptor | None = dataclasses.field(init=False, compare=False)

    def _derive(self) -> None:
        self._set("value_schema", value_schema(self.schema))
        self._set("wire_schema", wire_schema(self.schema))
        # (as the official client: encryption takes both a key name and a key reader; ImportError without
        # the cryptography library; a key that cannot be read fails each send with CryptoError)
        names = key_names(self.encryption_key)
        self._set("encryptor", PayloadEncryptor(names, self.crypto_key_reader, self.topic)
                  if names and self.crypto_key_reader is not None else None)
        # (ValueError for what is not a CompressionType; InvalidConfiguration when its library is missing)
        self._set("codec", codec_for(self.compression_type))
        if self.chunking_enabled and self.batching_enabled:
            raise ValueError("Batching and chunking of messages can't be enabled together.")
        self._set("send_timeout", self.send_timeout_millis / 1000.0)
        self._set("flush_timeout", self.send_timeout if self.send_timeout_millis else None)
        self._set("batch_delay", self.batching_max_publish_delay_ms / 1000.0)
        self._set("metadata", dict(self.properties or {}))

    def pending_per_partition(self, partitions: int) -> int:
        """Each partition's share of the messages that may wait for a receipt."""
        return max(1, min(self.max_pending_messages, self.max_pending_messages_across_partitions // partitions))


@dataclasses.dataclass(frozen=True)
class ConsumerSettings(Settings):
    """``subscribe``'s arguments (the official client's, then pulsarfast's
    ``ack_grouping_time_ms`` and ``expire_time_of_incomplete_chunked_message_ms``), and what a reader's consumer sets beside them."""

    #: one topic, a list of topics, or a pattern (re.compile(...): pattern.py)
    topic: str | list[str] | re.Pattern = option(check=topics_arg)
    subscription_name: str = option(check=subscription_name_arg)
    consumer_type: ConsumerType = option(ConsumerType.Exclusive, enum_of(ConsumerType))
    schema: Any = option(BYTES_SCHEMA, schema_arg)
    #: message_listener(consumer, message)
    message_listener: Listener | None = option(None, callable_or_none)
    receiver_queue_size: int = option(1000, integer(0))
    max_total_receiver_queue_size_across_partitions: int = option(50000, integer(1))
    consumer_name: str | None = option(None, optional_str())
    #: None or 0: off
    unacked_messages_timeout_ms: int | None = option(None, unacked_timeout_arg)
    broker_consumer_stats_cache_time_ms: int = option(30000, of_type(int, "int"))
    negative_ack_redelivery_delay_ms: int = option(60000, integer(0))
    is_read_compacted: bool = option(False, boolean)
    properties: dict[str, str] | None = option(None, optional_dict)
    #: seconds between two listings of a pattern's namespace (below 1: 1)
    pattern_auto_discovery_period: int = option(60, of_type(int, "int"))
    initial_position: InitialPosition = option(InitialPosition.Latest, enum_of(InitialPosition))
    crypto_key_reader: CryptoKeyReader | None = option(None, crypto_key_reader_arg)
    replicate_subscription_state_enabled: bool = option(False, truth)
    max_pending_chunked_message: int = option(10)
    auto_ack_oldest_chunked_message_on_queue_full: bool = option(False)
    start_message_id_inclusive: bool = option(False, truth)
    batch_receive_policy: ConsumerBatchReceivePolicy | None = option(None, batch_receive_policy_arg)
    #: (on a KeyShared subscription; ignored on the others, as by the official client)
    key_shared_policy: ConsumerKeySharedPolicy | None = option(None, key_shared_policy_arg)
    batch_index_ack_enabled: bool = option(False, boolean)
    regex_subscription_mode: RegexSubscriptionMode = option(
        RegexSubscriptionMode.PersistentOnly, of_type(RegexSubscriptionMode, "RegexSubscriptionMode"))
    dead_letter_policy: ConsumerDeadLetterPolicy | None = option(None, dead_letter_policy_arg)
    crypto_failure_action: ConsumerCryptoFailureAction = option(
        ConsumerCryptoFailureAction.FAIL, of_type(ConsumerCryptoFailureAction, "ConsumerCryptoFailureAction"))
    #: individual acknowledgements go together at most this often (0: each at once)
    ack_grouping_time_ms: int = option(100, integer(0))
    #: an incomplete chunked message whose first chunk came this long ago is dropped and its chunks
    #: acknowledged (the C++ and Java clients' expireTimeOfIncompleteChunkedMessage, 60 s by default)
    expire_time_of_incomplete_chunked_message_ms: int = option(60000, integer(1))
    # not subscribe()'s: a reader's consumer (ReaderSettings.consumer_settings)
    #: False: a non-durable subscription, which starts at start_message_id
    durable: bool = True
    start_message_id: MessageId | None = None

    # derived
    #: the topics' full names (none for a pattern)
    topics: tuple[str, ...] = dataclasses.field(init=False)
    #: a pattern subscription's pattern (None: topics)
    pattern: re.Pattern | None = dataclasses.field(init=False, compare=False)
    #: what Consumer.topic() says: the topic, or the topics joined with commas
    label: str = dataclasses.field(init=False)
    #: the messages one topic may hold unread (at least 1)
    queue_size: int = dataclasses.field(init=False)
    negative_ack_delay: float = dataclasses.field(init=False)
    ack_grouping_seconds: float = dataclasses.field(init=False)
    #: the unacked-message timeout (0: off)
    unacked_timeout_ms: int = dataclasses.field(init=False)
    #: the unacked-message timeout or a dead-letter policy is on (redelivery.py)
    delivery_controls: bool = dataclasses.field(init=False)
    #: the properties, as the SUBSCRIBE command carries them
    metadata: dict[str, str] = dataclasses.field(init=False)
    #: where a non-durable subscription starts (None: a durable one's, where the broker says)
    start_position: StartPosition | None = dataclasses.field(init=False, compare=False)
    #: what one batch_receive() returns at most (the policy given or the default, its count capped)
    batch_receive: ConsumerBatchReceivePolicy = dataclasses.field(init=False, compare=False)
    #: decodes what Message.value() gives (None: bytes, the payload as it is)
    value_schema: Schema | None = dataclasses.field(init=False, compare=False)
    #: the serialized Schema the SUBSCRIBE command carries (None: bytes, none)
    wire_schema: bytes | None = dataclasses.field(init=False, compare=False)
    #: decrypts encrypted messages (None: no crypto_key_reader; crypto.py, and crypto_failure_action)
    decryptor: PayloadDecryptor | None = dataclasses.field(init=False, compare=False)

    def _derive(self) -> None:
        self._set("value_schema", value_schema(self.schema))
        self._set("wire_schema", wire_schema(self.schema))
        reader = self.crypto_key_reader
        self._set("decryptor", PayloadDecryptor(reader, self.subscription_name) if reader is not None else None)
        topic = self.topic
        names = [topic] if isinstance(topic, str) else list(topic) if isinstance(topic, (list, tuple)) else []
        topics = tuple(full_topic_name(name) for name in names)
        self._set("topics", topics)
        self._set("pattern", topic if isinstance(topic, re.Pattern) else None)
        self._set("label", topic.pattern if isinstance(topic, re.Pattern) else ",".join(topics))
        self._set("queue_size", max(1, self.receiver_queue_size))
        self._set("negative_ack_delay", self.negative_ack_redelivery_delay_ms / 1000.0)
        self._set("ack_grouping_seconds", self.ack_grouping_time_ms / 1000.0)
        unacked_ms = self.unacked_messages_timeout_ms or 0
        self._set("unacked_timeout_ms", unacked_ms)
        self._set("delivery_controls", bool(unacked_ms) or self.dead_letter_policy is not None)
        self._set("metadata", dict(self.properties or {}))
        start = self.start_message_id
        self._set("start_position", StartPosition(start, self.start_message_id_inclusive)
                  if start is not None else None)
        self._set("batch_receive", (self.batch_receive_policy or DEFAULT_BATCH_RECEIVE).capped(self.queue_size))

    def receive_budget(self, partitions: int) -> int:
        """The messages the consumer may hold unread over its topics and partitions."""
        if partitions <= 1:
            return self.queue_size
        return min(self.queue_size * partitions, max(1, self.max_total_receiver_queue_size_across_partitions))


@dataclasses.dataclass(frozen=True)
class ReaderSettings(Settings):
    """``create_reader``'s arguments (the official client's)."""

    topic: str = option(check=each(str_arg, topic_arg))
    start_message_id: MessageId = option(check=message_id_arg)
    schema: Any = option(BYTES_SCHEMA, schema_arg)
    #: reader_listener(reader, message)
    reader_listener: Callable[[Any, Message], None] | None = option(None, callable_or_none)
    #: (any int, as the official reader takes: below 1 is 1)
    receiver_queue_size: int = option(1000, integer(None))
    reader_name: str | None = option(None, optional_str())
    subscription_role_prefix: str | None = option(None, optional_str())
    is_read_compacted: bool = option(False, boolean)
    crypto_key_reader: CryptoKeyReader | None = option(None, crypto_key_reader_arg)
    start_message_id_inclusive: bool = option(False, boolean)
    crypto_failure_action: ConsumerCryptoFailureAction = option(
        ConsumerCryptoFailureAction.FAIL, of_type(ConsumerCryptoFailureAction, "ConsumerCryptoFailureAction"))

    # derived
    #: the reader's subscription: ``reader-`` and ten random hex digits, after ``<subscription_role_prefix>-``
    subscription_name: str = dataclasses.field(init=False)
    initial_position: InitialPosition = dataclasses.field(init=False)
    #: MessageId.latest, inclusive: the topic's last message is read first (a seek to it)
    starts_at_last_message: bool = dataclasses.field(init=False)

    def _derive(self) -> None:
        name = "reader-" + secrets.token_hex(5)
        prefix = self.subscription_role_prefix
        self._set("subscription_name", "%s-%s" % (prefix, name) if prefix else name)
        start = self.start_message_id
        self._set("initial_position", InitialPosition.Earliest if is_earliest(start) else InitialPosition.Latest)
        self._set("starts_at_last_message", self.start_message_id_inclusive and is_latest(start))

    def check_partitions(self, partitions: int) -> None:
        """A reader of a partitioned topic (partitions > 0) starts at MessageId.earliest or MessageId.latest."""
        start = self.start_message_id
        if partitions > 0 and not (is_earliest(start) or is_latest(start)):
            raise InvalidConfiguration(
                "%s has %d partitions: a reader on a partitioned topic starts at MessageId.earliest or "
                "MessageId.latest (a message id names one partition: read '%s-partition-<n>' to start from it)"
                % (self.topic, partitions, self.topic))

    def consumer_settings(self, listener: Listener | None) -> ConsumerSettings:
        """The settings of the reader's consumer: a non-durable Exclusive subscription from
        start_message_id (subscribe()'s defaults for the rest); listener(consumer, message)."""
        return ConsumerSettings(
            topic=self.topic, subscription_name=self.subscription_name, consumer_type=ConsumerType.Exclusive,
            message_listener=listener, receiver_queue_size=max(1, self.receiver_queue_size),
            consumer_name=self.reader_name, is_read_compacted=self.is_read_compacted,
            initial_position=self.initial_position, start_message_id_inclusive=self.start_message_id_inclusive,
            durable=False, start_message_id=self.start_message_id, schema=self.schema,
            crypto_key_reader=self.crypto_key_reader, crypto_failure_action=self.crypto_failure_action,
        )


@dataclasses.dataclass(frozen=True)
class TableViewSettings(Settings):
    """``create_table_view``'s arguments (the official client's checks and messages)."""

    #: (kept as given: the table view's str() shows it so; the reader's settings take its full name)
    topic: str = option(check=str_arg)
    #: the reader's subscription (None or "": ``reader-`` and ten random hex digits, as a reader's)
    subscription_name: str | None = option(None, optional_str())
    #: decodes the values (and is the reader's schema: the broker checks it against the topic's)
    schema: Schema = option(BYTES_SCHEMA, schema_arg)

    def reader_settings(self) -> ReaderSettings:
        """The table view's reader: compacted reads of the whole topic from the earliest message."""
        settings = ReaderSettings(topic=self.topic, start_message_id=MessageId.earliest, schema=self.schema,
                                  is_read_compacted=True)
        if self.subscription_name:
            settings._set("subscription_name", self.subscription_name)
        return settings
