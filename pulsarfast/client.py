"""``Client``: the entry point, with the official ``pulsar.Client``'s
arguments. It owns what its producers and consumers share: the runtime
backend (gevent or threads, chosen as the NSQ client chooses: gevent when
the socket module is monkey-patched, else threads, or ``backend=``), the
connection pool (one connection per broker), lookups, the supervisor that
re-creates producers and consumers after a broker closed them or a
connection died, the producer and consumer id counters, and what every
connection uses to secure itself: the TLS context (``pulsarfast.tls``, for
``pulsar+ssl://``) and the authentication (``pulsarfast.auth``).

A client created before ``os.fork()`` cannot be used in the child: every
call there raises ``ForkedError`` (create a new Client in the child). The
parent's connections are left untouched by the child.
"""
from __future__ import annotations

import itertools
import logging
import re
from typing import Any

from msgengine.backoff import reconnect_delay
from msgengine.runtime import Backend, fork_generation, from_any_thread, get_backend, monotonic, on_fork_in_child
from msgengine.supervisor import Supervisor

from .auth import Authentication
from .compression import codec_for as compression_codec
from .connection import BrokerConnection
from .consumer import Consumer, MessageListener, TopicConsumer
from .deadletter import dead_letter_policy_arg
from .enums import CompressionType, ConsumerType, InitialPosition, PartitionsRoutingMode
from .errors import (
    AlreadyClosed,
    BrokerMetadataError,
    BrokerPersistenceError,
    ForkedError,
    InvalidConfiguration,
    PulsarException,
    Result,
    ServiceUnitNotReady,
    TooManyLookupRequestException,
)
from .hashing import DEFAULT_HASHING_SCHEME, HASHING_SCHEMES
from .lookup import Lookup
from .message import MessageId
from .pool import ConnectionPool
from .position import is_earliest, is_latest
from .producer import PartitionProducer, Producer
from .reader import Reader, ReaderListener, check_partitioned_start, check_reader_arguments, reader_subscription_name
from .redelivery import unacked_timeout_arg
from .tls import check_argument_types, make_client_context
from .topics import full_topic_name, parse_service_url, partition_name

logger = logging.getLogger(__name__)

#: a live broker's "not now" when a producer or consumer is created: tried again within the operation timeout
#: the longest wait between two attempts to re-create a producer or consumer whose broker is gone
MAX_RECONNECT_SECONDS = 30.0

_NOT_READY_YET = (BrokerPersistenceError, BrokerMetadataError, ServiceUnitNotReady, TooManyLookupRequestException)


def _int_arg(name: str, value: Any, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError("Argument %s is expected to be of type 'int' and not '%s'" % (name, type(value).__name__))
    if value < minimum:
        raise ValueError("Argument %s must be at least %d, not %d" % (name, minimum, value))
    return value


class Client:
    """A connection to a Pulsar cluster: ``Client("pulsar://localhost:6650")``."""

    def __init__(
        self,
        service_url: str,
        authentication: Any = None,
        operation_timeout_seconds: int = 30,
        io_threads: int = 1,
        message_listener_threads: int = 1,
        concurrent_lookup_requests: int = 50000,
        log_conf_file_path: str | None = None,
        stats_interval_in_seconds: int = 600,
        use_tls: bool = False,
        tls_trust_certs_file_path: str | None = None,
        tls_allow_insecure_connection: bool = False,
        tls_validate_hostname: bool = False,
        logger: Any = None,
        connection_timeout_ms: int = 10000,
        listener_name: str | None = None,
        tls_private_key_file_path: str | None = None,
        tls_certificate_file_path: str | None = None,
        *,
        backend: str | Backend = "auto",
        keep_alive_interval_seconds: int = 30,
    ) -> None:
        if not isinstance(service_url, str):
            raise ValueError("Argument service_url is expected to be of type 'str' and not '%s'"
                             % type(service_url).__name__)
        scheme, hosts = parse_service_url(service_url)
        if authentication is not None and not isinstance(authentication, Authentication):
            raise ValueError("Argument authentication is expected to be a pulsarfast Authentication (such as "
                             "pulsarfast.AuthenticationToken), not %s" % type(authentication).__name__)
        check_argument_types(use_tls, tls_trust_certs_file_path, tls_allow_insecure_connection, tls_validate_hostname,
                             tls_certificate_file_path, tls_private_key_file_path)
        self.use_tls = scheme == "pulsar+ssl" or use_tls
        self._authentication = authentication
        self._ssl_context = None
        if self.use_tls:
            client_certificate = authentication.client_certificate() if authentication is not None else None
            certificate_file, key_file = client_certificate or (tls_certificate_file_path, tls_private_key_file_path)
            self._ssl_context = make_client_context(tls_trust_certs_file_path, tls_allow_insecure_connection,
                                                    tls_validate_hostname, certificate_file, key_file)
        elif authentication is not None and authentication.client_certificate() is not None:
            raise InvalidConfiguration("AuthenticationTLS needs a pulsar+ssl:// service URL (or use_tls=True)")
        _int_arg("operation_timeout_seconds", operation_timeout_seconds, 1)
        _int_arg("connection_timeout_ms", connection_timeout_ms, 1)
        _int_arg("keep_alive_interval_seconds", keep_alive_interval_seconds, 1)
        self.service_url = service_url
        self.backend = get_backend(backend)
        self.operation_timeout = float(operation_timeout_seconds)
        self.connect_timeout = connection_timeout_ms / 1000.0
        self.keep_alive = float(keep_alive_interval_seconds)
        self.max_message_size = 5 * 1024 * 1024
        self._pool = ConnectionPool(self.backend, self._make_connection)
        self._lookup = Lookup(self._pool, service_url, hosts, self.operation_timeout, use_tls=self.use_tls)
        self._supervisor = Supervisor(self.backend, "pulsar client", self._establish,
                                      max_reconnect_delay=MAX_RECONNECT_SECONDS,
                                      reconnect_after_close=0.2)
        self._producer_ids = itertools.count()
        self._consumer_ids = itertools.count()
        self._producers: list[Producer] = []
        self._consumers: list[Consumer] = []
        self._fork_generation = fork_generation()
        self._closed = False
        on_fork_in_child(self)

    # -- what producers and consumers share -------------------------------------------------

    def _make_connection(self, logical_url: str, address: tuple[str, int], through_proxy: bool) -> BrokerConnection:
        return BrokerConnection(self.backend, logical_url, address, connect_timeout=self.connect_timeout,
                                keep_alive_seconds=self.keep_alive,
                                proxy_to_broker_url=logical_url if through_proxy else None,
                                ssl_context=self._ssl_context, authentication=self._authentication,
                                on_unknown_send_error=self._unknown_send_error)

    def _unknown_send_error(self, event: Any) -> None:
        """A SEND_ERROR for a producer its connection no longer has: when a topic is
        terminated under sends in flight, the broker closes the producer, then fails
        those sends with TopicTerminated (and re-creating the producer then fails with
        ServiceUnitNotReady until the send timeout). That error is final for the topic,
        whichever life of the producer it reaches; other late errors are dropped."""
        if event.error.result is not Result.TopicTerminated:
            return
        for target in self._supervisor.targets():
            if isinstance(target, PartitionProducer) and target.producer_id == event.producer_id:
                target.terminated(event.error)

    def connection_for(self, topic: str) -> BrokerConnection:
        """The connection to the broker that serves topic (a lookup, then the shared connection)."""
        self.check_usable()
        logical_url, address, through_proxy = self._lookup.broker_for(topic)
        conn = self._pool.get(logical_url, address, through_proxy)
        self.max_message_size = conn.max_message_size
        return conn

    def broker_connections(self) -> list[BrokerConnection]:
        """Diagnostics: the client's open broker connections (one per broker
        and socket address, shared by its producers, consumers and lookups)."""
        return self._pool.connections()

    def new_producer_id(self) -> int:
        return next(self._producer_ids)

    def new_consumer_id(self) -> int:
        return next(self._consumer_ids)

    @staticmethod
    def _establish(target: Any) -> Any:
        return target.establish()

    def forget_producer(self, producer: PartitionProducer) -> None:
        self._supervisor.release(producer)

    def forget_consumer(self, consumer: TopicConsumer) -> None:
        self._supervisor.release(consumer)

    def producer_closed(self, producer: Producer) -> None:
        if producer in self._producers:
            self._producers.remove(producer)

    def consumer_closed(self, consumer: Consumer) -> None:
        if consumer in self._consumers:
            self._consumers.remove(consumer)

    def forked(self) -> bool:
        """This process forked from the one that made the client."""
        return self._fork_generation != fork_generation()

    def check_usable(self) -> None:
        """Raise ForkedError in a forked child, AlreadyClosed once closed."""
        if self._fork_generation != fork_generation():
            raise ForkedError("this Client was created before os.fork(); create a new Client in the child process")
        if self._closed:
            raise AlreadyClosed("the client is closed")

    def _partitions_of(self, topic: str) -> list[tuple[str, int]]:
        count = self._lookup.partitions(topic)
        if count <= 0:
            return [(topic, -1)]
        return [(partition_name(topic, index), index) for index in range(count)]

    # -- the official API ----------------------------------------------------------------------

    @from_any_thread()
    def get_topic_partitions(self, topic: str) -> list[str]:
        """The partitions' names of a partitioned topic, or [topic] for another one."""
        self.check_usable()
        return [name for name, _index in self._partitions_of(full_topic_name(topic))]

    @from_any_thread()
    def create_producer(
        self,
        topic: str,
        producer_name: str | None = None,
        schema: Any = None,
        initial_sequence_id: int | None = None,
        send_timeout_millis: int = 30000,
        compression_type: CompressionType = CompressionType.NONE,
        max_pending_messages: int = 1000,
        max_pending_messages_across_partitions: int = 50000,
        block_if_queue_full: bool = False,
        batching_enabled: bool = False,
        batching_max_messages: int = 1000,
        batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = 10,
        chunking_enabled: bool = False,
        message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
        lazy_start_partitioned_producers: bool = False,
        properties: dict[str, str] | None = None,
        batching_type: Any = None,
        encryption_key: str | None = None,
        crypto_key_reader: Any = None,
        access_mode: Any = None,
        message_router: Any = None,
        *,
        hashing_scheme: str = DEFAULT_HASHING_SCHEME,
        initial_subscription_name: str | None = None,
    ) -> Producer:
        """A producer on topic (every partition of it, when partitioned); raises when the broker refuses it."""
        self.check_usable()
        topic = full_topic_name(topic)
        _int_arg("send_timeout_millis", send_timeout_millis)
        _int_arg("max_pending_messages", max_pending_messages, 1)
        _int_arg("max_pending_messages_across_partitions", max_pending_messages_across_partitions, 1)
        _int_arg("batching_max_messages", batching_max_messages, 1)
        _int_arg("batching_max_allowed_size_in_bytes", batching_max_allowed_size_in_bytes, 1)
        _int_arg("batching_max_publish_delay_ms", batching_max_publish_delay_ms)
        if producer_name is not None and not isinstance(producer_name, str):
            raise ValueError("Argument producer_name is expected to be of type 'str'")
        if initial_sequence_id is not None:
            _int_arg("initial_sequence_id", initial_sequence_id, -1)
        if initial_subscription_name is not None and not isinstance(initial_subscription_name, str):
            raise ValueError("Argument initial_subscription_name is expected to be of type 'str'")
        codec = compression_codec(compression_type)  # (ValueError; InvalidConfiguration when its library is missing)
        if chunking_enabled and batching_enabled:
            raise ValueError("Batching and chunking of messages can't be enabled together")
        if chunking_enabled:
            raise InvalidConfiguration("chunking is not supported by pulsarfast yet (messages up to the broker's "
                                       "max message size go whole)")
        if access_mode is not None and getattr(access_mode, "name", access_mode) not in ("Shared", 0):
            raise InvalidConfiguration("producer access modes other than Shared are not supported by pulsarfast yet")
        if encryption_key is not None or crypto_key_reader is not None:
            raise InvalidConfiguration("end-to-end encryption is not supported by pulsarfast")
        if schema is not None and type(schema).__name__ != "BytesSchema":
            raise InvalidConfiguration("schemas other than bytes are not supported by pulsarfast yet")
        if hashing_scheme not in HASHING_SCHEMES:
            name = getattr(hashing_scheme, "name", None)
            if name not in HASHING_SCHEMES:
                raise InvalidConfiguration("hashing_scheme must be one of %s" % ", ".join(HASHING_SCHEMES))
            hashing_scheme = name
        names = self._partitions_of(topic)
        per_partition = max(1, min(max_pending_messages, max_pending_messages_across_partitions // len(names)))
        partitions = [
            PartitionProducer(self, name, index, producer_name=producer_name, initial_sequence_id=initial_sequence_id,
                              send_timeout_millis=send_timeout_millis, max_pending_messages=per_partition,
                              block_if_queue_full=block_if_queue_full, properties=properties,
                              batching=bool(batching_enabled), batching_max_messages=batching_max_messages,
                              batching_max_allowed_size_in_bytes=batching_max_allowed_size_in_bytes,
                              batching_max_publish_delay_ms=batching_max_publish_delay_ms, compression=codec,
                              initial_subscription_name=initial_subscription_name)
            for name, index in names
        ]
        self._start(partitions, lambda p: p.close(self.operation_timeout))
        producer = Producer(self, topic, partitions, routing_mode=PartitionsRoutingMode(message_routing_mode),
                            hashing_scheme=hashing_scheme, message_router=message_router,
                            send_timeout_millis=send_timeout_millis)
        self._producers.append(producer)
        return producer

    @from_any_thread()
    def subscribe(
        self,
        topic: str | list[str] | re.Pattern,
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerType.Exclusive,
        schema: Any = None,
        message_listener: MessageListener | None = None,
        receiver_queue_size: int = 1000,
        max_total_receiver_queue_size_across_partitions: int = 50000,
        consumer_name: str | None = None,
        unacked_messages_timeout_ms: int | None = None,
        broker_consumer_stats_cache_time_ms: int = 30000,
        negative_ack_redelivery_delay_ms: int = 60000,
        is_read_compacted: bool = False,
        properties: dict[str, str] | None = None,
        pattern_auto_discovery_period: int = 60,
        initial_position: InitialPosition = InitialPosition.Latest,
        crypto_key_reader: Any = None,
        replicate_subscription_state_enabled: bool = False,
        max_pending_chunked_message: int = 10,
        auto_ack_oldest_chunked_message_on_queue_full: bool = False,
        start_message_id_inclusive: bool = False,
        batch_receive_policy: Any = None,
        key_shared_policy: Any = None,
        batch_index_ack_enabled: bool = False,
        regex_subscription_mode: Any = None,
        dead_letter_policy: Any = None,
        crypto_failure_action: Any = None,
        *,
        ack_grouping_time_ms: int = 100,
    ) -> Consumer:
        """A consumer of subscription_name on one topic, a list of topics, and every partition of each."""
        self.check_usable()
        if isinstance(topic, re.Pattern):
            raise InvalidConfiguration("pattern subscriptions are not supported by pulsarfast yet")
        if isinstance(topic, str):
            topics = [full_topic_name(topic)]
            label = topics[0]
        elif isinstance(topic, (list, tuple)) and topic and all(isinstance(t, str) for t in topic):
            topics = [full_topic_name(t) for t in topic]
            label = ",".join(topics)
        else:
            raise ValueError("Argument topic is expected to be of type 'str' or 'list', not %r" % (topic,))
        if not isinstance(subscription_name, str) or not subscription_name:
            raise ValueError("Argument subscription_name must be a non-empty str")
        _int_arg("receiver_queue_size", receiver_queue_size)
        _int_arg("max_total_receiver_queue_size_across_partitions", max_total_receiver_queue_size_across_partitions, 1)
        _int_arg("negative_ack_redelivery_delay_ms", negative_ack_redelivery_delay_ms)
        _int_arg("ack_grouping_time_ms", ack_grouping_time_ms)
        if message_listener is not None and not callable(message_listener):
            raise ValueError("message_listener must be callable")
        unacked_messages_timeout_ms = unacked_timeout_arg(unacked_messages_timeout_ms)
        if key_shared_policy is not None:
            raise InvalidConfiguration("key_shared_policy is not supported by pulsarfast yet (KeyShared uses AutoSplit)")
        if schema is not None and type(schema).__name__ != "BytesSchema":
            raise InvalidConfiguration("schemas other than bytes are not supported by pulsarfast yet")
        if crypto_key_reader is not None:
            raise InvalidConfiguration("end-to-end encryption is not supported by pulsarfast")
        dead_letter_policy = dead_letter_policy_arg(dead_letter_policy, ConsumerType(consumer_type))
        consumer = Consumer(
            self, label, subscription_name, consumer_type=ConsumerType(consumer_type),
            receiver_queue_size=receiver_queue_size,
            max_total_receiver_queue_size_across_partitions=max_total_receiver_queue_size_across_partitions,
            consumer_name=consumer_name, negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
            initial_position=InitialPosition(initial_position), read_compacted=is_read_compacted,
            properties=properties, replicate_subscription_state=replicate_subscription_state_enabled,
            message_listener=message_listener, ack_grouping_time_ms=ack_grouping_time_ms,
            unacked_messages_timeout_ms=unacked_messages_timeout_ms, dead_letter_policy=dead_letter_policy,
        )
        for name in topics:
            for partition_topic, index in self._partitions_of(name):
                consumer.add_topic(partition_topic, index)
        consumer.spread_budget()
        self._start(consumer.topic_consumers(), lambda c: c.close())
        consumer.start_listener()
        self._consumers.append(consumer)
        return consumer

    @from_any_thread()
    def create_reader(
        self,
        topic: str,
        start_message_id: MessageId,
        schema: Any = None,
        reader_listener: ReaderListener | None = None,
        receiver_queue_size: int = 1000,
        reader_name: str | None = None,
        subscription_role_prefix: str | None = None,
        is_read_compacted: bool = False,
        crypto_key_reader: Any = None,
        start_message_id_inclusive: bool = False,
        crypto_failure_action: Any = None,
    ) -> Reader:
        """A reader of topic from start_message_id (MessageId.earliest, MessageId.latest or a stored id)."""
        self.check_usable()
        check_reader_arguments(topic, start_message_id, reader_listener, receiver_queue_size, reader_name,
                               subscription_role_prefix, is_read_compacted, crypto_key_reader,
                               start_message_id_inclusive, schema)
        topic = full_topic_name(topic)
        names = self._partitions_of(topic)
        check_partitioned_start(topic, len(names) if names[0][1] >= 0 else 0, start_message_id)
        reader = Reader(self)
        consumer = Consumer(
            self, topic, reader_subscription_name(subscription_role_prefix), consumer_type=ConsumerType.Exclusive,
            receiver_queue_size=receiver_queue_size, max_total_receiver_queue_size_across_partitions=50000,
            consumer_name=reader_name, negative_ack_redelivery_delay_ms=60000,
            initial_position=InitialPosition.Earliest if is_earliest(start_message_id) else InitialPosition.Latest,
            read_compacted=is_read_compacted, properties=None, replicate_subscription_state=False,
            message_listener=reader.listener_for(reader_listener), durable=False,
            start_message_id=start_message_id, start_message_id_inclusive=start_message_id_inclusive,
        )
        for partition_topic, index in names:
            consumer.add_topic(partition_topic, index)
        consumer.spread_budget()
        self._start(consumer.topic_consumers(), lambda c: c.close())
        reader.attach(consumer)
        if start_message_id_inclusive and is_latest(start_message_id):
            try:
                reader.start_at_last_message()
            except BaseException:
                consumer.close()
                raise
        consumer.start_listener()
        self._consumers.append(consumer)
        return reader

    def _start(self, targets: list[Any], undo: Any) -> None:
        """Create each producer or consumer on its broker now (errors reach the
        caller, and the ones created are closed again); then the supervisor
        keeps them."""
        started = []
        try:
            for target in targets:
                link = self.establish_retrying(target)
                started.append((target, link))
        except BaseException:
            for target, _link in started:
                try:
                    undo(target)
                except PulsarException:
                    pass
            raise
        for target, link in started:
            self._supervisor.adopt(target, link)

    def establish_retrying(self, target: Any) -> Any:
        """target.establish(), tried again with backoff while the broker answers that it cannot
        serve yet (its storage or metadata not ready, a bundle moving, too many lookups), within
        the operation timeout, as the official clients do; other errors reach the caller at once."""
        deadline = monotonic() + self.operation_timeout
        failures = 0
        while True:
            try:
                return target.establish()
            except _NOT_READY_YET as exc:
                failures += 1
                delay = reconnect_delay(failures, cap=1.0)
                if monotonic() + delay >= deadline:
                    raise
                logger.info("creating %r: %s; trying again in %.2fs", target, exc, delay)
                self.backend.sleep(delay)

    @from_any_thread()
    def close(self) -> None:
        """Close every producer (after their messages in flight) and consumer, then the connections."""
        if self._closed:
            return
        if self._fork_generation != fork_generation():
            self._closed = True
            return
        for producer in list(self._producers):
            try:
                producer.close()
            except PulsarException as exc:
                logger.warning("closing a producer: %s", exc)
        for consumer in list(self._consumers):
            try:
                consumer.close()
            except PulsarException as exc:
                logger.warning("closing a consumer: %s", exc)
        self._closed = True
        self._supervisor.close()
        self._pool.close()

    @from_any_thread()
    def shutdown(self) -> None:
        """Close every connection at once, without closing producers and
        consumers on the broker: sends still waiting fail, and blocked
        receive() calls raise AlreadyClosed."""
        self._closed = True
        self._supervisor.close()
        self._pool.close()
        for producer in list(self._producers):
            producer.abort()
        for consumer in list(self._consumers):
            consumer.abort()
        self._producers.clear()
        self._consumers.clear()

    def after_fork_in_child(self) -> None:
        """In a forked child: forget the parent's connections and timers (they belong to the parent)."""
        self._supervisor.forget_after_fork()
        self._pool.forget_after_fork()
        for consumer in self._consumers:
            consumer.after_fork_in_child()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
