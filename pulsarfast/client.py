"""``Client``: the entry point, with the official ``pulsar.Client``'s
arguments. It owns what its producers and consumers share: the runtime
backend (gevent or threads, chosen as the NSQ client chooses: gevent when
the socket module is monkey-patched, else threads, or ``backend=``), the
connection pool (one connection per broker), lookups, the supervisor that
re-creates producers and consumers after a broker closed them or a
connection died, the producer and consumer id counters, and what every
connection uses to secure itself: the TLS context (``pulsarfast.endpoints.tls``, for
``pulsar+ssl://``) and the authentication (``pulsarfast.endpoints.auth``).

After ``os.fork()`` (gunicorn ``--preload``, Celery prefork, multiprocessing),
a client made in the parent works in the child on connections of its own,
made at its first use there: its producers go on sending (the messages still
waiting in the parent at the fork are the parent's, and only the parent's
receipts settle them), lookups and new producers and consumers work. Consumers
and readers started in the parent raise ``ForkedError`` in the child (their
subscriptions and unacknowledged messages are the parent's), and so does a
producer with a name of its own (the name can be on the topic once). The
parent's connections are left untouched by the child, as in ``nsq.Writer``.

Lifetime. ``close()`` returns once no task of the client is left: it waits (at
most ``TASK_END_SECONDS`` each) for its connections' reading tasks and for a
listener's call under way. A client dropped without ``close()``, with every
producer, consumer and reader it made, is freed the moment its last reference
goes (the parts it hands its work to hold it weakly, ``_owner``, and it holds
the ones it hands its user weakly: ``lifetime.py``), and its finalizer shuts it
down and waits for its tasks, so its threads are gone by the next statement, as
the official client's destructor joins its own. A producer, consumer or reader
its user still holds keeps it alive.
"""
from __future__ import annotations

import itertools
import logging
import re
import weakref
from typing import Any, Callable, Sequence, cast

from msgengine.backoff import reconnect_delay
from msgengine.runtime import Backend, ProcessLock, fork_generation, from_any_thread, monotonic, on_fork_in_child
from msgengine.supervisor import Supervisor
from msgengine.taskgroup import TaskGroup

from pulsarfast.base.enums import (
    CompressionType,
    ConsumerType,
    InitialPosition,
    PartitionsRoutingMode,
    RegexSubscriptionMode,
)
from pulsarfast.base.logger import route_logs
from pulsarfast.base.parts import Parts
from pulsarfast.base.results import (
    AlreadyClosed,
    BrokerMetadataError,
    BrokerPersistenceError,
    PulsarException,
    Result,
    ServiceUnitNotReady,
    TooManyLookupRequestException,
)
from pulsarfast.base.topics import full_topic_name, partition_name
from pulsarfast.consuming.consumer import Consumer, MessageListener, TopicConsumer
from pulsarfast.consuming.partitionwatch import (
    PartitionClient,
    PartitionWatch,
    join_consumer_partitions,
    join_producer_partitions,
)
from pulsarfast.consuming.pattern import PatternClient, PatternWatch, TopicPattern, list_namespace, open_topic_watch
from pulsarfast.consuming.rawtable import RawTableView
from pulsarfast.consuming.reader import Reader, ReaderListener
from pulsarfast.endpoints.serviceinfo import ServiceInfo
from pulsarfast.network.connection import BrokerConnection
from pulsarfast.network.discovery import Discovery
from pulsarfast.network.lifetime import TASK_END_SECONDS, ClientLifetime
from pulsarfast.network.owner import Owner, Supervised
from pulsarfast.network.pool import ConnectionPool
from pulsarfast.network.schemafetch import attach_schema_source
from pulsarfast.options.settings import (
    ClientSettings,
    ConsumerSettings,
    ProducerSettings,
    ReaderSettings,
    TableViewSettings,
)
from pulsarfast.producing.producer import PartitionProducer, Producer
from pulsarfast.tableview import TableView
from pulsarfast.transactions.coordinator import CoordinatorHost, Coordinators
from pulsarfast.transactions.transaction import (
    DEFAULT_TIMEOUT_MS,
    Transaction,
    check_timeout_ms,
    open_transaction,
    transaction_id,
)
from pulsarfast.wire.message import MessageId

logger = logging.getLogger(__name__)

#: a live broker's "not now" when a producer or consumer is created: tried again within the operation timeout
#: the longest wait between two attempts to re-create a producer or consumer whose broker is gone
MAX_RECONNECT_SECONDS = 30.0
_NOT_READY_YET = (BrokerPersistenceError, BrokerMetadataError, ServiceUnitNotReady, TooManyLookupRequestException)


class Client:
    """A connection to a Pulsar cluster: ``Client("pulsar://localhost:6650")``.

    Each method's arguments become one settings object (settings.py, where
    their defaults are written: the signatures take them from there), checked
    before any network traffic and handed whole to what the method makes.
    """

    def __init__(
        self,
        service_url: Any,
        authentication: Any = ClientSettings.authentication,
        operation_timeout_seconds: int = ClientSettings.operation_timeout_seconds,
        io_threads: int = ClientSettings.io_threads,
        message_listener_threads: int = ClientSettings.message_listener_threads,
        concurrent_lookup_requests: int = ClientSettings.concurrent_lookup_requests,
        log_conf_file_path: str | None = ClientSettings.log_conf_file_path,
        stats_interval_in_seconds: int = ClientSettings.stats_interval_in_seconds,
        use_tls: bool = ClientSettings.use_tls,
        tls_trust_certs_file_path: str | None = ClientSettings.tls_trust_certs_file_path,
        tls_allow_insecure_connection: bool = ClientSettings.tls_allow_insecure_connection,
        tls_validate_hostname: bool = ClientSettings.tls_validate_hostname,
        logger: Any = ClientSettings.logger,
        connection_timeout_ms: int = ClientSettings.connection_timeout_ms,
        listener_name: str | None = ClientSettings.listener_name,
        tls_private_key_file_path: str | None = ClientSettings.tls_private_key_file_path,
        tls_certificate_file_path: str | None = ClientSettings.tls_certificate_file_path,
        *,
        backend: str | Backend = ClientSettings.backend,
        keep_alive_interval_seconds: int = ClientSettings.keep_alive_interval_seconds,
        partitions_update_interval_seconds: int = ClientSettings.partitions_update_interval_seconds,
    ) -> None:
        settings = ClientSettings.from_arguments(locals())
        route_logs(settings.logger)
        self.settings = settings
        self.service_url = service_url
        self.use_tls = settings.tls
        #: the backend, through a group that counts the client's tasks (its finalizer and close() wait for them)
        self._tasks = TaskGroup(settings.backend) if settings.backend.name != "asyncio" else None
        self.backend: Backend = self._tasks or settings.backend
        self.operation_timeout = settings.operation_timeout
        self.connect_timeout = settings.connect_timeout
        self.keep_alive = settings.keep_alive
        self.max_message_size = 5 * 1024 * 1024
        #: what the producers', consumers' and connections' parts hold: the client, weakly, so that a
        #: client dropped without close() (with every producer, consumer and reader it made) is collected
        self._owner = cast(Owner, weakref.proxy(self))
        self._pool = ConnectionPool(self.backend, _Weakly(self._make_connection, raising=True))
        self._discovery = Discovery(settings, self._pool, _Weakly(self._service_switched))
        self._supervisor = self._new_supervisor()
        #: the transaction coordinators, connected on first use (new_transaction)
        self._coordinators = Coordinators(cast(CoordinatorHost, self._owner))
        #: what a dropped client's finalizer shuts down, and the producers, consumers and table views
        #: (each follows its topic until closed, as the official ones do) that close() closes
        self._lifetime = ClientLifetime(self.backend, self._pool, self._discovery, self._supervisor, self._tasks)
        weakref.finalize(self, self._lifetime).atexit = False
        self._producers: Parts[Producer] = self._lifetime.producers
        self._consumers: Parts[Consumer] = self._lifetime.consumers
        self._table_views: Parts[RawTableView] = self._lifetime.table_views
        self._producer_ids = itertools.count()
        self._consumer_ids = itertools.count()
        self._fork_generation = fork_generation()  # the process whose connections the client uses
        self._fork_lock = ProcessLock()
        self._closed = False
        self._discovery.start()
        on_fork_in_child(self)

    def _new_supervisor(self) -> Supervisor[Supervised]:
        return Supervisor(self.backend, "pulsar client", self._establish, max_reconnect_delay=MAX_RECONNECT_SECONDS,
                          reconnect_after_close=0.2)

    # -- what producers and consumers share -------------------------------------------------

    def _make_connection(self, logical_url: str, address: tuple[str, int], through_proxy: bool) -> BrokerConnection:
        return BrokerConnection(self.backend, logical_url, address, connect_timeout=self.connect_timeout,
                                keep_alive_seconds=self.keep_alive,
                                proxy_to_broker_url=logical_url if through_proxy else None,
                                ssl_context=self._discovery.endpoint.ssl_context,
                                authentication=self._discovery.endpoint.authentication,
                                on_unknown_send_error=_Weakly(self._unknown_send_error))

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

    def _service_switched(self) -> None:
        """The service changed (AutoClusterFailover, a ServiceInfoProvider): close the connections, so that
        producers and consumers re-connect through lookups on the new service."""
        for conn in self._pool.connections():
            conn.close()

    def connection_for(self, topic: str) -> BrokerConnection:
        """The connection to the broker that serves topic (a lookup, then the shared connection)."""
        self.check_usable()
        logical_url, address, through_proxy = self._discovery.broker_for(topic)
        conn = self._pool.get(logical_url, address, through_proxy)
        self.max_message_size = conn.max_message_size
        return conn

    def partition_count(self, topic: str) -> int:
        """How many partitions topic has (0: not partitioned)."""
        return self._discovery.partitions(topic)

    def broker_connections(self) -> list[BrokerConnection]:
        """Diagnostics: the client's open broker connections (one per broker
        and socket address, shared by its producers, consumers and lookups)."""
        return self._pool.connections()

    def new_producer_id(self) -> int:
        return next(self._producer_ids)

    def new_consumer_id(self) -> int:
        return next(self._consumer_ids)

    @staticmethod
    def _establish(target: Supervised) -> Any:
        return target.establish()

    def forget_producer(self, producer: Supervised) -> None:
        self._supervisor.release(producer)

    def forget_consumer(self, consumer: Supervised) -> None:
        self._supervisor.release(consumer)

    def producer_closed(self, producer: object) -> None:
        if isinstance(producer, Producer):
            self._producers.discard(producer)

    def consumer_closed(self, consumer: object) -> None:
        if isinstance(consumer, Consumer):
            self._consumers.discard(consumer)

    def forked(self) -> bool:
        """This process forked from the one whose connections the client uses (it has not been used here yet)."""
        return self._fork_generation != fork_generation()

    def check_usable(self) -> None:
        """Raise AlreadyClosed once closed; the first use in a forked child takes the client over there."""
        if self._closed:
            raise AlreadyClosed("the client is closed")
        if self._fork_generation != fork_generation():
            self._start_in_child()

    def _start_in_child(self) -> None:
        """The first use in a forked child: a supervisor of the child's, which creates the parent's
        producers again on the child's own connections (their sends wait for that meanwhile)."""
        with self._fork_lock:
            if self._fork_generation == fork_generation():
                return
            self._supervisor = self._lifetime.supervisor = self._new_supervisor()
            self._fork_generation = fork_generation()
            partitions = [partition for producer in self._producers for partition in producer.partition_producers()]
        for partition in partitions:
            if partition.usable_in_child():
                self._supervisor.keep(partition)

    def _partitions_of(self, topic: str) -> list[tuple[str, int]]:
        count = self._discovery.partitions(topic)
        if count <= 0:
            return [(topic, -1)]
        return [(partition_name(topic, index), index) for index in range(count)]

    # -- the official API ----------------------------------------------------------------------

    # -- transactions (pulsarfast's: the official client has none) ---------------------------------

    @from_any_thread()
    def new_transaction(self, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Transaction:
        """Open a transaction on the cluster's coordinators (connected on first use): messages sent
        and acknowledgements made in it (``transaction=``) take effect together at ``commit()``.
        Its coordinator aborts it once ``timeout_ms`` have passed without a commit. Raises
        TransactionCoordinatorNotFoundError when the cluster has no coordinator."""
        self.check_usable()
        return open_transaction(self._coordinators, self.backend, check_timeout_ms(timeout_ms))

    def transaction(self, txn_id: Any) -> Transaction:
        """A handle on a transaction opened elsewhere (another client or process), by its id (a
        TransactionId or a (most_bits, least_bits) pair): send and acknowledge in it, commit or
        abort it. Its timeout is its opener's, which this handle does not know."""
        self.check_usable()
        return Transaction(self._coordinators, self.backend, transaction_id(txn_id), None)

    @from_any_thread()
    def get_topic_partitions(self, topic: str) -> list[str]:
        """The partitions' names of a partitioned topic, or [topic] for another one."""
        self.check_usable()
        return [name for name, _index in self._partitions_of(full_topic_name(topic))]

    def get_service_info(self) -> ServiceInfo:
        """The service this client uses: its URL, whether it uses TLS, and the trust file it was given
        (None: the system's CAs; the official client reports certifi's file there). Works after close(),
        as there."""
        return self._discovery.service_info()

    @from_any_thread()
    def create_producer(
        self,
        topic: str,
        producer_name: str | None = ProducerSettings.producer_name,
        schema: Any = ProducerSettings.schema,
        initial_sequence_id: int | None = ProducerSettings.initial_sequence_id,
        send_timeout_millis: int = ProducerSettings.send_timeout_millis,
        compression_type: CompressionType = ProducerSettings.compression_type,
        max_pending_messages: int = ProducerSettings.max_pending_messages,
        max_pending_messages_across_partitions: int = ProducerSettings.max_pending_messages_across_partitions,
        block_if_queue_full: bool = ProducerSettings.block_if_queue_full,
        batching_enabled: bool = ProducerSettings.batching_enabled,
        batching_max_messages: int = ProducerSettings.batching_max_messages,
        batching_max_allowed_size_in_bytes: int = ProducerSettings.batching_max_allowed_size_in_bytes,
        batching_max_publish_delay_ms: int = ProducerSettings.batching_max_publish_delay_ms,
        chunking_enabled: bool = ProducerSettings.chunking_enabled,
        message_routing_mode: PartitionsRoutingMode = ProducerSettings.message_routing_mode,
        lazy_start_partitioned_producers: bool = ProducerSettings.lazy_start_partitioned_producers,
        properties: dict[str, str] | None = ProducerSettings.properties,
        batching_type: Any = ProducerSettings.batching_type,
        encryption_key: str | None = ProducerSettings.encryption_key,
        crypto_key_reader: Any = ProducerSettings.crypto_key_reader,
        access_mode: Any = ProducerSettings.access_mode,
        message_router: Any = ProducerSettings.message_router,
        *,
        hashing_scheme: str = ProducerSettings.hashing_scheme,
        initial_subscription_name: str | None = ProducerSettings.initial_subscription_name,
        batching_eager: bool = ProducerSettings.batching_eager,
    ) -> Producer:
        """A producer on topic (every partition of it, when partitioned); raises when the broker refuses it."""
        self.check_usable()
        settings = ProducerSettings.from_arguments(locals())
        names = self._partitions_of(settings.topic)
        max_pending = settings.pending_per_partition(len(names))
        partitions = [PartitionProducer(self._owner, name, index, settings, max_pending) for name, index in names]
        self._start(partitions, lambda p: p.close(self.operation_timeout))
        producer = Producer(self._owner, settings, partitions)
        producer.keep_alive = self  # (its user's reference keeps the client, as the official one's)
        self._producers.add(producer)
        if names[0][1] >= 0:  # (partitions added to the topic later are produced to: partitionwatch.py)
            watch = PartitionWatch(cast(PartitionClient, self._owner), producer, {settings.topic: len(names)},
                                   self.settings.partitions_update_interval_seconds, join_producer_partitions)
            producer.partition_watch = watch
            watch.start()
        return producer

    def start_partition_producers(self, producer: Producer, parts: list[tuple[str, int]]) -> None:
        """Start a producer on partitions added to its topic (errors reach the caller, and the ones
        started are closed again); its routing takes them from then on."""
        settings = producer.settings
        max_pending = settings.pending_per_partition(len(producer.partition_producers()) + len(parts))
        added = [PartitionProducer(self._owner, name, index, settings, max_pending) for name, index in parts]
        self._start(added, lambda p: p.close(self.operation_timeout))
        if not producer.add_partitions(added):  # (closed meanwhile: these close too)
            for partition in added:
                self.forget_producer(partition)
                partition.close(self.operation_timeout)

    @from_any_thread()
    def subscribe(
        self,
        topic: str | list[str] | re.Pattern,
        subscription_name: str,
        consumer_type: ConsumerType = ConsumerSettings.consumer_type,
        schema: Any = ConsumerSettings.schema,
        message_listener: MessageListener | None = ConsumerSettings.message_listener,
        receiver_queue_size: int = ConsumerSettings.receiver_queue_size,
        max_total_receiver_queue_size_across_partitions: int = (
            ConsumerSettings.max_total_receiver_queue_size_across_partitions),
        consumer_name: str | None = ConsumerSettings.consumer_name,
        unacked_messages_timeout_ms: int | None = ConsumerSettings.unacked_messages_timeout_ms,
        broker_consumer_stats_cache_time_ms: int = ConsumerSettings.broker_consumer_stats_cache_time_ms,
        negative_ack_redelivery_delay_ms: int = ConsumerSettings.negative_ack_redelivery_delay_ms,
        is_read_compacted: bool = ConsumerSettings.is_read_compacted,
        properties: dict[str, str] | None = ConsumerSettings.properties,
        pattern_auto_discovery_period: int = ConsumerSettings.pattern_auto_discovery_period,
        initial_position: InitialPosition = ConsumerSettings.initial_position,
        crypto_key_reader: Any = ConsumerSettings.crypto_key_reader,
        replicate_subscription_state_enabled: bool = ConsumerSettings.replicate_subscription_state_enabled,
        max_pending_chunked_message: int = ConsumerSettings.max_pending_chunked_message,
        auto_ack_oldest_chunked_message_on_queue_full: bool = (
            ConsumerSettings.auto_ack_oldest_chunked_message_on_queue_full),
        start_message_id_inclusive: bool = ConsumerSettings.start_message_id_inclusive,
        batch_receive_policy: Any = ConsumerSettings.batch_receive_policy,
        key_shared_policy: Any = ConsumerSettings.key_shared_policy,
        batch_index_ack_enabled: bool = ConsumerSettings.batch_index_ack_enabled,
        regex_subscription_mode: Any = ConsumerSettings.regex_subscription_mode,
        dead_letter_policy: Any = ConsumerSettings.dead_letter_policy,
        crypto_failure_action: Any = ConsumerSettings.crypto_failure_action,
        *,
        ack_grouping_time_ms: int = ConsumerSettings.ack_grouping_time_ms,
        expire_time_of_incomplete_chunked_message_ms: int = (
            ConsumerSettings.expire_time_of_incomplete_chunked_message_ms),
    ) -> Consumer:
        """A consumer of subscription_name on one topic, a list of topics, and every partition of each;
        or on the topics a pattern (``re.compile(...)``) takes, listed again every
        pattern_auto_discovery_period seconds (pattern.py)."""
        self.check_usable()
        settings = ConsumerSettings.from_arguments(locals())
        attach_schema_source(settings.schema, self._owner)
        consumer = Consumer(self._owner, settings)
        consumer.keep_alive = self  # (its user's reference keeps the client, as the official one's)
        if settings.pattern is not None:
            watch = PatternWatch(cast(PatternClient, self._owner), consumer,
                                 TopicPattern(settings.pattern, settings.regex_subscription_mode),
                                 settings.pattern_auto_discovery_period)
            self._start_consumer(consumer, watch.first_topics())
            consumer.topic_watch = watch
            watch.start()
            return consumer
        counts: dict[str, int] = {}
        names = []
        for topic_name in settings.topics:
            parts = self._partitions_of(topic_name)
            names.extend(parts)
            if parts[0][1] >= 0:
                counts[topic_name] = len(parts)
        self._start_consumer(consumer, names)
        if counts:  # (partitions added to these topics later are joined: partitionwatch.py)
            partitions = PartitionWatch(cast(PartitionClient, self._owner), consumer, counts,
                                        self.settings.partitions_update_interval_seconds, join_consumer_partitions)
            consumer.topic_watch = partitions
            partitions.start()
        return consumer

    def watch_namespace(self, namespace: str, sink: Any) -> tuple[Any, int] | None:
        """A topic-list watch of namespace for a pattern subscription (None: the broker takes none)."""
        return open_topic_watch(self._discovery.lookup, namespace, sink, self.operation_timeout)

    def topics_of_namespace(self, namespace: str, mode: RegexSubscriptionMode) -> list[str]:
        """The topics the broker lists in namespace (a pattern subscription's listing)."""
        return list_namespace(self._discovery.lookup, namespace, mode, self.operation_timeout)

    def add_topics(self, consumer: Consumer, parts: Sequence[tuple[str, int]],
                   initial_position: InitialPosition | None = None) -> None:
        """Subscribe a running consumer on more topics or partitions (name, index): a pattern's new
        topics, a topic's new partitions (initial_position: where their subscriptions start, when
        not the consumer's). Raises, with none of them left in the consumer, when one cannot be
        subscribed; a consumer closed meanwhile closes them too."""
        added = [consumer.add_topic(name, index) for name, index in parts]
        for each in added:
            each.initial_position = initial_position
        consumer.spread_budget()
        try:
            self._start(added, lambda c: c.close())  # (the ones started are closed again on an error)
        except PulsarException:
            for each in added:
                consumer.remove_topic(each)
            consumer.spread_budget()
            raise
        if consumer.closed:  # (closed while joining: what joined closes too)
            for each in added:
                self.forget_consumer(each)
                try:
                    each.close()
                except PulsarException as exc:
                    logger.info("[%s] closing %s: %s", consumer.topic(), each.topic, exc)

    @from_any_thread()
    def create_reader(
        self,
        topic: str,
        start_message_id: MessageId,
        schema: Any = ReaderSettings.schema,
        reader_listener: ReaderListener | None = ReaderSettings.reader_listener,
        receiver_queue_size: int = ReaderSettings.receiver_queue_size,
        reader_name: str | None = ReaderSettings.reader_name,
        subscription_role_prefix: str | None = ReaderSettings.subscription_role_prefix,
        is_read_compacted: bool = ReaderSettings.is_read_compacted,
        crypto_key_reader: Any = ReaderSettings.crypto_key_reader,
        start_message_id_inclusive: bool = ReaderSettings.start_message_id_inclusive,
        crypto_failure_action: Any = ReaderSettings.crypto_failure_action,
    ) -> Reader:
        """A reader of topic from start_message_id (MessageId.earliest, MessageId.latest or a stored id)."""
        self.check_usable()
        return self.open_reader(ReaderSettings.from_arguments(locals()))

    def open_reader(self, settings: ReaderSettings) -> Reader:
        """A reader made from its settings (create_reader's, or a table view's), subscribed now
        on every partition of its topic."""
        self.check_usable()
        attach_schema_source(settings.schema, self._owner)
        names = self._partitions_of(settings.topic)
        settings.check_partitions(len(names) if names[0][1] >= 0 else 0)
        reader = Reader(self._owner, settings)
        reader.keep_alive = self
        self._start_consumer(reader.consumer, names, reader.start_at_last_message
                             if settings.starts_at_last_message else None)
        return reader

    @from_any_thread()
    def create_table_view(
        self,
        topic: str,
        subscription_name: str | None = TableViewSettings.subscription_name,
        schema: Any = TableViewSettings.schema,
    ) -> TableView:
        """A table view of topic (tableview.py, rawtable.py): returned once it holds what the topic holds."""
        settings = TableViewSettings.from_arguments(locals())
        return TableView(self.open_table_view(settings), settings.topic, settings.subscription_name,
                         settings.schema)

    @from_any_thread()
    def open_table_view(self, settings: TableViewSettings) -> RawTableView:
        """The table view of its settings, started (the client closes its reader at close())."""
        reader = self.open_reader(settings.reader_settings())
        table_view = RawTableView(reader)
        try:
            table_view.start()
        except BaseException:
            reader.close()
            raise
        reader.keep_alive = None  # (the table view keeps the client for its user: the client keeps it)
        table_view.keep_alive = self
        for each in self._table_views:
            if each.closed:
                self._table_views.discard(each)
        self._table_views.add(table_view)
        return table_view

    def _start_consumer(self, consumer: Consumer, names: list[tuple[str, int]],
                        then: Callable[[], None] | None = None) -> None:
        """Subscribe consumer on each topic or partition (name, index) now (errors reach the
        caller), then (a reader's) ``then()``; then its listener starts, and the client keeps it."""
        for topic, index in names:
            consumer.add_topic(topic, index)
        consumer.spread_budget()
        self._start(consumer.topic_consumers(), lambda c: c.close())
        if then is not None:
            try:
                then()
            except BaseException:
                consumer.close()
                raise
        consumer.start_listener()
        self._consumers.add(consumer)

    def _start(self, targets: Sequence[Supervised], undo: Callable[[Any], None]) -> None:
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

    def establish_retrying(self, target: Supervised) -> Any:
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
        closing = list(self._consumers)
        for consumer in closing:
            try:
                consumer.close()
            except PulsarException as exc:
                logger.warning("closing a consumer: %s", exc)
        self._closed = True
        self._discovery.close()
        self._supervisor.close()
        self._pool.close(join_timeout=TASK_END_SECONDS)
        for consumer in closing:
            consumer.join_listener(TASK_END_SECONDS)
        for table_view in self._table_views:
            table_view.join(TASK_END_SECONDS)
        if self._tasks is not None:  # (the short ones: a send of acknowledgements, a batch's flush)
            self._tasks.join(TASK_END_SECONDS)
        for parts in (self._producers, self._consumers, self._table_views):
            parts.close()
        self._lifetime.ended = True

    @from_any_thread()
    def shutdown(self) -> None:
        """Close every connection at once, without closing producers and
        consumers on the broker: sends still waiting fail, and blocked
        receive() calls raise AlreadyClosed."""
        self._closed = True
        self._lifetime.shutdown()

    def after_fork_in_child(self) -> None:
        """In a forked child: forget the parent's connections, timers, broker-side producers and
        the sends waiting for the parent's receipts (the first use here starts over: check_usable)."""
        self._supervisor.forget_after_fork()
        self._pool.forget_after_fork()
        self._coordinators.forget_all()
        for producer in self._producers:
            producer.after_fork_in_child()
        for consumer in self._consumers:
            consumer.after_fork_in_child()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Weakly:
    """A bound method of the client called through a weak reference: what the client hands to the
    parts that outlive a dropped client (connections, timers), so that they do not keep it alive.
    Once the client is gone a call does nothing, or raises AlreadyClosed with ``raising``."""

    __slots__ = ("_method", "_raising")

    def __init__(self, method: Callable[..., Any], raising: bool = False) -> None:
        self._method = weakref.WeakMethod(method)
        self._raising = raising

    def __call__(self, *args: Any) -> Any:
        method = self._method()
        if method is not None:
            return method(*args)
        if self._raising:
            raise AlreadyClosed("the client was dropped without close()")
        return None
