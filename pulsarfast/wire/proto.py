"""Pulsar's protobuf messages, written by hand from the field numbers of
PulsarApi.proto (apache/pulsar, ``pulsar-common/src/main/proto``).

Encoding: one function per command the client sends (``connect``,
``producer``, ``send``, ``subscribe``, ``flow``, ``ack``, ...), each returning
a serialized ``BaseCommand``, plus ``message_metadata`` and
``single_message_metadata`` for payloads. They write the fields directly:
no message objects are built on the way out.

Decoding: ``decode_command(bytes)`` returns ``(type, record)`` where the
record is the sub-command (``CommandSendReceipt``, ``CommandMessage``, ...)
as a plain object with every field of the schema as an attribute (absent
optional fields have their proto default, repeated ones a list);
``decode(SCHEMA, bytes)`` does the same for any schema below
(``MESSAGE_METADATA``, ``SINGLE_MESSAGE_METADATA``, ...). The byte-level
field reader is ``pulsarfast.wire.codec.read_fields`` (compiled when available).

Why hand-written rather than the ``protobuf`` package: the client sends a
few dozen fixed shapes and reads a few, and the two per-message ones (a SEND
frame, a MESSAGE and its metadata) have compiled encoders and decoders of
their own in ``pulsarfast/wire/_codec.pyx`` (``encode_send_frame``,
``decode_message``), several times faster than ``protobuf``'s upb runtime
(``benchmarks/pulsar_proto_choice.py``). What is left here (lookups,
subscribes, acks, ...) is not on a per-message path, needs no generated code
and no runtime dependency; this module is also the reference the hot path's
tests compare against.

Unknown fields are skipped, as protobuf does: a newer broker may send more.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from pulsarfast.base.results import ProtocolError
from pulsarfast.wire.codec import read_fields, varint

PROTOCOL_VERSION = 20
CLIENT_VERSION = "pulsarfast"

# BaseCommand.Type (each sub-command's field number in BaseCommand is its type's value)
CONNECT = 2
CONNECTED = 3
SUBSCRIBE = 4
PRODUCER = 5
SEND = 6
SEND_RECEIPT = 7
SEND_ERROR = 8
MESSAGE = 9
ACK = 10
FLOW = 11
UNSUBSCRIBE = 12
SUCCESS = 13
ERROR = 14
CLOSE_PRODUCER = 15
CLOSE_CONSUMER = 16
PRODUCER_SUCCESS = 17
PING = 18
PONG = 19
REDELIVER_UNACKNOWLEDGED_MESSAGES = 20
PARTITIONED_METADATA = 21
PARTITIONED_METADATA_RESPONSE = 22
LOOKUP = 23
LOOKUP_RESPONSE = 24
CONSUMER_STATS = 25
CONSUMER_STATS_RESPONSE = 26
REACHED_END_OF_TOPIC = 27
SEEK = 28
GET_LAST_MESSAGE_ID = 29
GET_LAST_MESSAGE_ID_RESPONSE = 30
ACTIVE_CONSUMER_CHANGE = 31
GET_TOPICS_OF_NAMESPACE = 32
GET_TOPICS_OF_NAMESPACE_RESPONSE = 33
GET_SCHEMA = 34
GET_SCHEMA_RESPONSE = 35
AUTH_CHALLENGE = 36
AUTH_RESPONSE = 37
ACK_RESPONSE = 38
NEW_TXN = 50
NEW_TXN_RESPONSE = 51
ADD_PARTITION_TO_TXN = 52
ADD_PARTITION_TO_TXN_RESPONSE = 53
ADD_SUBSCRIPTION_TO_TXN = 54
ADD_SUBSCRIPTION_TO_TXN_RESPONSE = 55
END_TXN = 56
END_TXN_RESPONSE = 57
TC_CLIENT_CONNECT_REQUEST = 62
TC_CLIENT_CONNECT_RESPONSE = 63
WATCH_TOPIC_LIST = 64
WATCH_TOPIC_LIST_SUCCESS = 65
WATCH_TOPIC_UPDATE = 66
WATCH_TOPIC_LIST_CLOSE = 67
TOPIC_MIGRATED = 68

# CommandSubscribe.SubType
SUB_EXCLUSIVE, SUB_SHARED, SUB_FAILOVER, SUB_KEY_SHARED = 0, 1, 2, 3
# KeySharedMeta.KeySharedMode (the values of enums.KeySharedMode)
KEY_SHARED_AUTO_SPLIT, KEY_SHARED_STICKY = 0, 1
# CommandSubscribe.InitialPosition
POSITION_LATEST, POSITION_EARLIEST = 0, 1
# CommandAck.AckType
ACK_INDIVIDUAL, ACK_CUMULATIVE = 0, 1
# CommandAck.ValidationError
VALIDATION_UNCOMPRESSED_SIZE, VALIDATION_DECOMPRESSION, VALIDATION_CHECKSUM, VALIDATION_BATCH = 0, 1, 2, 3
# CommandLookupTopicResponse.LookupType
LOOKUP_REDIRECT, LOOKUP_CONNECT, LOOKUP_FAILED = 0, 1, 2
# CommandPartitionedTopicMetadataResponse.LookupType
METADATA_SUCCESS, METADATA_FAILED = 0, 1
# TxnAction
TXN_COMMIT, TXN_ABORT = 0, 1
# CompressionType
COMPRESSION_NONE, COMPRESSION_LZ4, COMPRESSION_ZLIB, COMPRESSION_ZSTD, COMPRESSION_SNAPPY = 0, 1, 2, 3, 4


# -- writing --------------------------------------------------------------------------------

def _key(number: int, wire_type: int) -> bytes:
    return varint((number << 3) | wire_type)


def f_uint(number: int, value: int) -> bytes:
    """A varint field (uint64, uint32, int64, int32, enum)."""
    return _key(number, 0) + varint(value)


def f_bool(number: int, value: bool) -> bytes:
    return _key(number, 0) + (b"\x01" if value else b"\x00")


def f_bytes(number: int, value: bytes) -> bytes:
    """A length-delimited field (bytes, or an embedded message)."""
    return _key(number, 2) + varint(len(value)) + value


def f_str(number: int, value: str) -> bytes:
    return f_bytes(number, value.encode("utf-8"))


def base_command(kind: int, body: bytes) -> bytes:
    """A BaseCommand of type kind holding the serialized sub-command body."""
    return f_uint(1, kind) + f_bytes(kind, body)


def key_values(number: int, pairs: Mapping[str, str] | Iterable[tuple[str, str]]) -> bytes:
    """Repeated KeyValue {key = 1; value = 2} fields."""
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    return b"".join(f_bytes(number, f_str(1, str(k)) + f_str(2, str(v))) for k, v in items)


def message_id_data(ledger_id: int, entry_id: int, partition: int = -1, batch_index: int = -1,
                    batch_size: int = 0) -> bytes:
    """MessageIdData {ledgerId = 1; entryId = 2; partition = 3; batch_index = 4; batch_size = 6}
    (the fields' keys written out: every acknowledgement makes one)."""
    out = b"\x08" + varint(ledger_id) + b"\x10" + varint(entry_id)
    if partition >= 0:
        out += b"\x18" + varint(partition)
    if batch_index >= 0:
        out += b"\x20" + varint(batch_index)
    if batch_size > 0:
        out += b"\x30" + varint(batch_size)
    return out


def connect(client_version: str = CLIENT_VERSION, protocol_version: int = PROTOCOL_VERSION,
            auth_method_name: str | None = None, auth_data: bytes | None = None,
            proxy_to_broker_url: str | None = None, supports_auth_refresh: bool = False) -> bytes:
    body = f_str(1, client_version) + f_uint(4, protocol_version)
    if auth_method_name:
        body += f_str(5, auth_method_name)
    if auth_data is not None:
        body += f_bytes(3, auth_data)
    if proxy_to_broker_url:
        body += f_str(6, proxy_to_broker_url)
    if supports_auth_refresh:  # FeatureFlags {supports_auth_refresh = 1}: the broker may send AUTH_CHALLENGE
        body += f_bytes(10, f_bool(1, True))
    return base_command(CONNECT, body)


def auth_response(auth_method_name: str, auth_data: bytes, client_version: str = CLIENT_VERSION,
                  protocol_version: int = PROTOCOL_VERSION) -> bytes:
    """CommandAuthResponse {client_version = 1; response = 2 (AuthData {auth_method_name = 1;
    auth_data = 2}); protocol_version = 3}: the answer to an AUTH_CHALLENGE."""
    response = f_str(1, auth_method_name) + f_bytes(2, auth_data)
    return base_command(AUTH_RESPONSE, f_str(1, client_version) + f_bytes(2, response) + f_uint(3, protocol_version))


def ping() -> bytes:
    return base_command(PING, b"")


def pong() -> bytes:
    return base_command(PONG, b"")


def get_topics_of_namespace(namespace: str, request_id: int, mode: int = 0, topics_pattern: str | None = None,
                            topics_hash: str | None = None) -> bytes:
    """GET_TOPICS_OF_NAMESPACE: the namespace's topics (mode 0 persistent, 1 non-persistent, 2 all);
    with topics_pattern a broker may filter them, with topics_hash answer ``changed=False`` instead."""
    body = f_uint(1, request_id) + f_str(2, namespace) + f_uint(3, mode)
    if topics_pattern is not None:
        body += f_str(4, topics_pattern)
    if topics_hash is not None:
        body += f_str(5, topics_hash)
    return base_command(GET_TOPICS_OF_NAMESPACE, body)


def watch_topic_list(request_id: int, watcher_id: int, namespace: str, topics_pattern: str,
                     topics_hash: str | None = None) -> bytes:
    """WATCH_TOPIC_LIST: the broker answers with the namespace's (persistent) topics matching
    topics_pattern (a Java regex on the full name), then sends WATCH_TOPIC_UPDATE as they come and go."""
    body = f_uint(1, request_id) + f_uint(2, watcher_id) + f_str(3, namespace) + f_str(4, topics_pattern)
    if topics_hash is not None:
        body += f_str(5, topics_hash)
    return base_command(WATCH_TOPIC_LIST, body)


def watch_topic_list_close(request_id: int, watcher_id: int) -> bytes:
    return base_command(WATCH_TOPIC_LIST_CLOSE, f_uint(1, request_id) + f_uint(2, watcher_id))


def get_schema(topic: str, request_id: int, schema_version: bytes | None = None) -> bytes:
    """GET_SCHEMA: the topic's schema of schema_version (its 8 bytes, big-endian), or (None) its latest."""
    body = f_uint(1, request_id) + f_str(2, topic)
    if schema_version is not None:
        body += f_bytes(3, schema_version)
    return base_command(GET_SCHEMA, body)


def partitioned_metadata(topic: str, request_id: int) -> bytes:
    return base_command(PARTITIONED_METADATA, f_str(1, topic) + f_uint(2, request_id))


def lookup(topic: str, request_id: int, authoritative: bool = False, listener_name: str | None = None) -> bytes:
    """LOOKUP; with listener_name (advertised_listener_name), the broker answers that listener's URLs."""
    body = f_str(1, topic) + f_uint(2, request_id) + f_bool(3, authoritative)
    if listener_name:
        body += f_str(7, listener_name)
    return base_command(LOOKUP, body)


def producer(topic: str, producer_id: int, request_id: int, producer_name: str | None = None,
             user_provided_name: bool = False, epoch: int = 0,
             metadata: Mapping[str, str] | None = None, initial_subscription_name: str | None = None,
             access_mode: int = 0, topic_epoch: int | None = None, schema: bytes | None = None) -> bytes:
    """CommandProducer. access_mode: ProducerAccessMode's value (0: Shared, left out); topic_epoch: what
    the broker's PRODUCER_SUCCESS gave an exclusive producer, sent again when it is re-created; schema:
    a serialized Schema (``schema_message``), None for bytes."""
    body = f_str(1, topic) + f_uint(2, producer_id) + f_uint(3, request_id)
    if producer_name:
        body += f_str(4, producer_name)
    if metadata:
        body += key_values(6, metadata)
    if schema is not None:
        body += f_bytes(7, schema)
    body += f_uint(8, epoch) + f_bool(9, user_provided_name)
    if access_mode:
        body += f_uint(10, access_mode)
    if topic_epoch is not None:
        body += f_uint(11, topic_epoch)
    if initial_subscription_name:
        body += f_str(13, initial_subscription_name)  # (the broker creates this subscription with the producer)
    return base_command(PRODUCER, body)


def schema_message(name: str, schema_data: bytes, schema_type: int,
                   properties: Mapping[str, str] | None = None) -> bytes:
    """Schema {name = 1; schema_data = 3; type = 4 (Schema.Type, the values of enums.SchemaType's
    registered types); properties = 5 (KeyValue)}, what CommandProducer.schema = 7 and
    CommandSubscribe.schema = 12 carry."""
    body = f_str(1, name) + f_bytes(3, schema_data) + f_uint(4, schema_type)
    if properties:
        body += key_values(5, properties)
    return body


def schema_version_metadata(schema_version: bytes) -> bytes:
    """MessageMetadata.schema_version = 16, serialized (a producer's, from its PRODUCER_SUCCESS), to
    follow the other fields (as extra_metadata does)."""
    return f_bytes(16, schema_version)


def send(producer_id: int, sequence_id: int, num_messages: int = 1) -> bytes:
    body = f_uint(1, producer_id) + f_uint(2, sequence_id)
    if num_messages != 1:
        body += f_uint(3, num_messages)
    return base_command(SEND, body)


def close_producer(producer_id: int, request_id: int) -> bytes:
    return base_command(CLOSE_PRODUCER, f_uint(1, producer_id) + f_uint(2, request_id))


def subscribe(topic: str, subscription: str, sub_type: int, consumer_id: int, request_id: int,
              consumer_name: str | None = None, initial_position: int = POSITION_LATEST,
              durable: bool = True, start_message_id: bytes | None = None, read_compacted: bool = False,
              priority_level: int | None = None, metadata: Mapping[str, str] | None = None,
              replicate_subscription_state: bool = False, force_topic_creation: bool = True,
              key_shared_mode: int | None = None, allow_out_of_order: bool = False,
              hash_ranges: Iterable[tuple[int, int]] = (), schema: bytes | None = None) -> bytes:
    """CommandSubscribe (schema: a serialized Schema, ``schema_message``, None for bytes); on a KeyShared
    subscription (key_shared_mode not None) with its KeySharedMeta
    {keySharedMode = 1; hashRanges = 3 (IntRange {start = 1; end = 2}); allowOutOfOrderDelivery = 4}."""
    body = f_str(1, topic) + f_str(2, subscription) + f_uint(3, sub_type) + f_uint(4, consumer_id) + f_uint(5, request_id)
    if consumer_name:
        body += f_str(6, consumer_name)
    if priority_level is not None:
        body += f_uint(7, priority_level)
    if not durable:
        body += f_bool(8, False)
    if start_message_id is not None:
        body += f_bytes(9, start_message_id)
    if metadata:
        body += key_values(10, metadata)
    if read_compacted:
        body += f_bool(11, True)
    if schema is not None:
        body += f_bytes(12, schema)
    body += f_uint(13, initial_position)
    if replicate_subscription_state:
        body += f_bool(14, True)
    if not force_topic_creation:
        body += f_bool(15, False)
    if sub_type == SUB_KEY_SHARED and key_shared_mode is not None:
        meta = f_uint(1, key_shared_mode)
        for start, end in hash_ranges:
            meta += f_bytes(3, f_uint(1, start & 0xFFFFFFFFFFFFFFFF) + f_uint(2, end & 0xFFFFFFFFFFFFFFFF))
        if allow_out_of_order:
            meta += f_bool(4, True)
        body += f_bytes(17, meta)
    return base_command(SUBSCRIBE, body)


def flow(consumer_id: int, permits: int) -> bytes:
    return base_command(FLOW, f_uint(1, consumer_id) + f_uint(2, permits))


def message_id_ack_set(ledger_id: int, entry_id: int, partition: int, ack_set: Iterable[int]) -> bytes:
    """MessageIdData of a batch entry acknowledged in part: ack_set = 5 (repeated int64, unpacked),
    the words of a bit set (index i is bit i % 64 of word i // 64) whose set bits are the messages
    NOT acknowledged."""
    return message_id_data(ledger_id, entry_id, partition) + b"".join(
        f_uint(5, word & 0xFFFFFFFFFFFFFFFF) for word in ack_set)


def ack(consumer_id: int, ack_type: int, message_ids: Iterable[bytes], validation_error: int | None = None,
        txn: tuple[int, int] | None = None, request_id: int | None = None) -> bytes:
    """CommandAck of serialized MessageIdData (several for individual acks); in a transaction
    (txn: its (most, least) bits) with txnid_least_bits = 6, txnid_most_bits = 7; with a
    request_id = 8 the broker answers ACK_RESPONSE."""
    body = f_uint(1, consumer_id) + f_uint(2, ack_type) + b"".join(
        b"\x1a" + varint(len(message_id)) + message_id for message_id in message_ids)  # (field 3, bytes)
    if validation_error is not None:
        body += f_uint(4, validation_error)
    if txn is not None:
        body += f_uint(6, txn[1]) + f_uint(7, txn[0])
    if request_id is not None:
        body += f_uint(8, request_id)
    return base_command(ACK, body)


# -- transactions (the coordinator's commands; a SEND's and a message's fields: txn_send_fields) --

def tc_client_connect(request_id: int, tc_id: int) -> bytes:
    """CommandTcClientConnectRequest {request_id = 1; tc_id = 2}."""
    return base_command(TC_CLIENT_CONNECT_REQUEST, f_uint(1, request_id) + f_uint(2, tc_id))


def new_txn(request_id: int, tc_id: int, timeout_ms: int) -> bytes:
    """CommandNewTxn {request_id = 1; txn_ttl_seconds = 2 (milliseconds, whatever its name says: the
    broker and the Java client read it so); tc_id = 3}."""
    return base_command(NEW_TXN, f_uint(1, request_id) + f_uint(2, timeout_ms) + f_uint(3, tc_id))


def add_partition_to_txn(request_id: int, txn: tuple[int, int], partitions: Iterable[str]) -> bytes:
    """CommandAddPartitionToTxn {request_id = 1; txnid_least_bits = 2; txnid_most_bits = 3; partitions = 4}."""
    body = f_uint(1, request_id) + f_uint(2, txn[1]) + f_uint(3, txn[0])
    for partition in partitions:
        body += f_str(4, partition)
    return base_command(ADD_PARTITION_TO_TXN, body)


def add_subscription_to_txn(request_id: int, txn: tuple[int, int], subscriptions: Iterable[tuple[str, str]]) -> bytes:
    """CommandAddSubscriptionToTxn {request_id = 1; txnid_least_bits = 2; txnid_most_bits = 3;
    subscription = 4 (Subscription {topic = 1; subscription = 2})}."""
    body = f_uint(1, request_id) + f_uint(2, txn[1]) + f_uint(3, txn[0])
    for topic, subscription in subscriptions:
        body += f_bytes(4, f_str(1, topic) + f_str(2, subscription))
    return base_command(ADD_SUBSCRIPTION_TO_TXN, body)


def end_txn(request_id: int, txn: tuple[int, int], action: int) -> bytes:
    """CommandEndTxn {request_id = 1; txnid_least_bits = 2; txnid_most_bits = 3; txn_action = 4}."""
    return base_command(END_TXN, f_uint(1, request_id) + f_uint(2, txn[1]) + f_uint(3, txn[0]) + f_uint(4, action))


def txn_metadata(txn: tuple[int, int]) -> bytes:
    """MessageMetadata's txnid_least_bits = 22 and txnid_most_bits = 23, serialized (to follow the
    other fields, as extra_metadata does)."""
    return f_uint(22, txn[1]) + f_uint(23, txn[0])


def txn_send_fields(txn: tuple[int, int]) -> bytes:
    """CommandSend's txnid_least_bits = 4 and txnid_most_bits = 5, serialized (to follow its other fields)."""
    return f_uint(4, txn[1]) + f_uint(5, txn[0])


def redeliver_unacknowledged(consumer_id: int, message_ids: Iterable[bytes] = ()) -> bytes:
    body = f_uint(1, consumer_id)
    for message_id in message_ids:
        body += f_bytes(2, message_id)
    return base_command(REDELIVER_UNACKNOWLEDGED_MESSAGES, body)


def unsubscribe(consumer_id: int, request_id: int) -> bytes:
    return base_command(UNSUBSCRIBE, f_uint(1, consumer_id) + f_uint(2, request_id))


def close_consumer(consumer_id: int, request_id: int) -> bytes:
    return base_command(CLOSE_CONSUMER, f_uint(1, consumer_id) + f_uint(2, request_id))


def seek(consumer_id: int, request_id: int, message_id: bytes | None = None, publish_time: int | None = None) -> bytes:
    body = f_uint(1, consumer_id) + f_uint(2, request_id)
    if message_id is not None:
        body += f_bytes(3, message_id)
    if publish_time is not None:
        body += f_uint(4, publish_time)
    return base_command(SEEK, body)


def get_last_message_id(consumer_id: int, request_id: int) -> bytes:
    return base_command(GET_LAST_MESSAGE_ID, f_uint(1, consumer_id) + f_uint(2, request_id))


def message_metadata(producer_name: str, sequence_id: int, publish_time: int,
                     properties: Mapping[str, str] | None = None, partition_key: str | None = None,
                     event_time: int = 0, num_messages_in_batch: int | None = None,
                     compression: int = COMPRESSION_NONE, uncompressed_size: int = 0,
                     deliver_at_time: int | None = None, ordering_key: bytes | None = None,
                     replicate_to: Iterable[str] | None = None, highest_sequence_id: int | None = None,
                     null_value: bool = False) -> bytes:
    """MessageMetadata for a payload frame."""
    out = f_str(1, producer_name) + f_uint(2, sequence_id) + f_uint(3, publish_time)
    if properties:
        out += key_values(4, properties)
    if partition_key is not None:
        out += f_str(6, partition_key)
    if replicate_to:
        for cluster in replicate_to:
            out += f_str(7, cluster)
    if compression:
        out += f_uint(8, compression) + f_uint(9, uncompressed_size)
    if num_messages_in_batch is not None:
        out += f_uint(11, num_messages_in_batch)
    if event_time:
        out += f_uint(12, event_time)
    if ordering_key is not None:
        out += f_bytes(18, ordering_key)
    if deliver_at_time is not None:
        out += f_uint(19, deliver_at_time)
    if highest_sequence_id is not None:
        out += f_uint(24, highest_sequence_id)
    if null_value:
        out += f_bool(25, True)
    return out


def extra_metadata(ordering_key: bytes | None = None, replicate_to: Iterable[str] | None = None,
                   deliver_at_time: int | None = None, null_value: bool = False) -> bytes:
    """The rarely used MessageMetadata fields, serialized, to follow the common ones
    (``codec.encode_send_frame``'s extra_metadata; protobuf takes fields in any order)."""
    out = b""
    if replicate_to:
        for cluster in replicate_to:
            out += f_str(7, cluster)
    if ordering_key is not None:
        out += f_bytes(18, ordering_key)
    if deliver_at_time is not None:
        out += f_uint(19, deliver_at_time)
    if null_value:
        out += f_bool(25, True)
    return out


def compression_metadata(compression: int, uncompressed_size: int) -> bytes:
    """MessageMetadata's compression and uncompressed_size, serialized, to follow the
    other fields of a compressed payload's metadata (as extra_metadata does)."""
    return f_uint(8, compression) + f_uint(9, uncompressed_size)


def chunk_metadata(uuid: str, num_chunks: int, total_size: int, chunk_id: int) -> bytes:
    """MessageMetadata's chunk fields (uuid, num_chunks_from_msg, total_chunk_msg_size, chunk_id),
    serialized, to follow the other fields of a chunk's metadata (as extra_metadata does)."""
    return f_str(26, uuid) + f_uint(27, num_chunks) + f_uint(28, total_size) + f_uint(29, chunk_id)


def batch_entry_metadata(payload_size: int, properties: Iterable[tuple[bytes, bytes]] | None, partition_key: bytes | None,
                         event_time: int, sequence_id: int) -> bytes:
    """SingleMessageMetadata of one entry of a batch a producer builds (keys and values already UTF-8)."""
    out = b""
    if properties:
        out += b"".join(f_bytes(1, f_bytes(1, key) + f_bytes(2, value)) for key, value in properties)
    if partition_key is not None:
        out += f_bytes(2, partition_key)
    out += b"\x18" + varint(payload_size)  # (field 3, varint: the keys written out on the producer's hot path)
    if event_time:
        out += f_uint(5, event_time)
    return out + b"\x40" + varint(sequence_id)  # (field 8, varint)


def single_message_metadata(payload_size: int, properties: Mapping[str, str] | None = None,
                            partition_key: str | None = None, event_time: int = 0,
                            sequence_id: int | None = None, ordering_key: bytes | None = None) -> bytes:
    """SingleMessageMetadata of one entry of a batch."""
    out = b""
    if properties:
        out += key_values(1, properties)
    if partition_key is not None:
        out += f_str(2, partition_key)
    out += f_uint(3, payload_size)
    if event_time:
        out += f_uint(5, event_time)
    if ordering_key is not None:
        out += f_bytes(7, ordering_key)
    if sequence_id is not None:
        out += f_uint(8, sequence_id)
    return out


# -- reading --------------------------------------------------------------------------------

# field types
UINT, INT, BOOL, STR, BYTES, MSG = "uint", "int", "bool", "str", "bytes", "msg"


class Schema:
    """A message's fields: number -> (name, converter, repeated, sub-schema), and a record class
    whose class attributes are the defaults (a decoded record holds only the fields it had)."""

    def __init__(self, name: str, fields: list[tuple]) -> None:
        self.name = name
        self.fields: dict[int, tuple[str, str, bool, Schema | None]] = {}
        defaults: dict[str, Any] = {}
        for spec in fields:
            number, field_name, kind = spec[0], spec[1], spec[2]
            repeated = "repeated" in spec[3:]
            sub = next((extra for extra in spec[3:] if isinstance(extra, Schema)), None)
            default = () if repeated else _DEFAULTS[kind]
            for extra in spec[3:]:
                if isinstance(extra, tuple) and extra and extra[0] == "default":
                    default = extra[1]
            self.fields[number] = (field_name, kind, repeated, sub)
            defaults[field_name] = default
        self.defaults = defaults
        self.record: type[Record] = type(name, (Record,), {**defaults, "_schema": self})


class Record:
    """A decoded message: one attribute per schema field (absent ones give
    their default; repeated ones a list, or () when absent)."""

    _schema: Schema

    def __init__(self, **values: Any) -> None:
        unknown = set(values) - set(self._schema.defaults)
        if unknown:
            raise TypeError("%s has no field %s" % (self._schema.name, ", ".join(sorted(unknown))))
        self.__dict__.update(values)

    def __repr__(self) -> str:
        shown = ", ".join("%s=%r" % (n, getattr(self, n)) for n in self._schema.defaults
                          if getattr(self, n) != self._schema.defaults[n])
        return "%s(%s)" % (self._schema.name, shown)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, n) == getattr(other, n) for n in self._schema.defaults)

    __hash__ = None  # type: ignore[assignment]


_DEFAULTS = {UINT: 0, INT: 0, BOOL: False, STR: "", BYTES: b"", MSG: None}


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def decode(schema: Schema, data: Any) -> Any:
    """A record of schema from serialized bytes (ProtocolError when malformed)."""
    cls = schema.record
    record = cls.__new__(cls)
    values = record.__dict__
    fields = schema.fields
    raw = read_fields(data)
    for i in range(0, len(raw), 2):
        spec = fields.get(raw[i])
        if spec is None:
            continue  # unknown (newer) field
        name, kind, repeated, sub = spec
        value = raw[i + 1]
        if kind is UINT:
            if value.__class__ is not int:
                raise ProtocolError("%s.%s: expected a number" % (schema.name, name))
        elif kind is STR:
            if value.__class__ is not bytes:
                raise ProtocolError("%s.%s: expected a string" % (schema.name, name))
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError:
                raise ProtocolError("%s.%s: not UTF-8" % (schema.name, name)) from None
        elif kind is MSG:
            if value.__class__ is not bytes:
                raise ProtocolError("%s.%s: expected a message" % (schema.name, name))
            value = decode(sub, value)  # type: ignore[arg-type]
        elif kind is INT:
            if value.__class__ is not int:
                raise ProtocolError("%s.%s: expected a number" % (schema.name, name))
            if value >= 1 << 63:
                value -= 1 << 64
        elif kind is BOOL:
            if value.__class__ is not int:
                raise ProtocolError("%s.%s: expected a bool" % (schema.name, name))
            value = bool(value)
        elif value.__class__ is not bytes:  # BYTES
            raise ProtocolError("%s.%s: expected bytes" % (schema.name, name))
        if repeated:
            items = values.get(name)
            if items is None:
                values[name] = [value]
            else:
                items.append(value)
        else:
            values[name] = value
    return record


KEY_VALUE = Schema("KeyValue", [(1, "key", STR), (2, "value", STR)])
MESSAGE_ID_DATA = Schema("MessageIdData", [
    (1, "ledgerId", UINT), (2, "entryId", UINT), (3, "partition", INT, ("default", -1)),
    (4, "batch_index", INT, ("default", -1)), (5, "ack_set", INT, "repeated"), (6, "batch_size", INT),
])
FEATURE_FLAGS = Schema("FeatureFlags", [
    (1, "supports_auth_refresh", BOOL), (2, "supports_broker_entry_metadata", BOOL),
    (3, "supports_partial_producer", BOOL), (4, "supports_topic_watchers", BOOL),
])
MESSAGE_METADATA = Schema("MessageMetadata", [
    (1, "producer_name", STR), (2, "sequence_id", UINT), (3, "publish_time", UINT),
    (4, "properties", MSG, "repeated", KEY_VALUE), (5, "replicated_from", STR), (6, "partition_key", STR, ("default", None)),
    (7, "replicate_to", STR, "repeated"), (8, "compression", UINT), (9, "uncompressed_size", UINT),
    (11, "num_messages_in_batch", INT, ("default", None)), (12, "event_time", UINT),
    (14, "encryption_algo", STR), (16, "schema_version", BYTES), (17, "partition_key_b64_encoded", BOOL),
    (18, "ordering_key", BYTES, ("default", None)), (19, "deliver_at_time", INT), (20, "marker_type", INT, ("default", None)),
    (24, "highest_sequence_id", UINT), (25, "null_value", BOOL), (26, "uuid", STR), (27, "num_chunks_from_msg", INT),
    (28, "total_chunk_msg_size", INT), (29, "chunk_id", INT), (30, "null_partition_key", BOOL),
])
SINGLE_MESSAGE_METADATA = Schema("SingleMessageMetadata", [
    (1, "properties", MSG, "repeated", KEY_VALUE), (2, "partition_key", STR, ("default", None)), (3, "payload_size", INT),
    (4, "compacted_out", BOOL), (5, "event_time", UINT), (6, "partition_key_b64_encoded", BOOL),
    (7, "ordering_key", BYTES, ("default", None)), (8, "sequence_id", UINT), (9, "null_value", BOOL),
    (10, "null_partition_key", BOOL),
])

INT_RANGE = Schema("IntRange", [(1, "start", INT), (2, "end", INT)])
KEY_SHARED_META = Schema("KeySharedMeta", [
    (1, "keySharedMode", UINT), (3, "hashRanges", MSG, "repeated", INT_RANGE), (4, "allowOutOfOrderDelivery", BOOL),
])

_COMMANDS: dict[int, Schema] = {}


def _command(kind: int, name: str, fields: list[tuple]) -> Schema:
    schema = _COMMANDS[kind] = Schema(name, fields)
    return schema


_command(CONNECT, "CommandConnect", [
    (1, "client_version", STR), (3, "auth_data", BYTES), (4, "protocol_version", INT), (5, "auth_method_name", STR),
    (6, "proxy_to_broker_url", STR), (10, "feature_flags", MSG, FEATURE_FLAGS),
])
_command(CONNECTED, "CommandConnected", [
    (1, "server_version", STR), (2, "protocol_version", INT), (3, "max_message_size", INT),
    (4, "feature_flags", MSG, FEATURE_FLAGS),
])
_command(SUBSCRIBE, "CommandSubscribe", [
    (1, "topic", STR), (2, "subscription", STR), (3, "subType", UINT), (4, "consumer_id", UINT), (5, "request_id", UINT),
    (6, "consumer_name", STR), (7, "priority_level", INT), (8, "durable", BOOL, ("default", True)),
    (9, "start_message_id", MSG, MESSAGE_ID_DATA), (11, "read_compacted", BOOL), (13, "initialPosition", UINT),
    (17, "keySharedMeta", MSG, KEY_SHARED_META),
])
_command(PRODUCER, "CommandProducer", [
    (1, "topic", STR), (2, "producer_id", UINT), (3, "request_id", UINT), (4, "producer_name", STR),
    (8, "epoch", UINT), (9, "user_provided_producer_name", BOOL, ("default", True)),
    (10, "producer_access_mode", UINT), (11, "topic_epoch", UINT, ("default", None)),
])
_command(SEND, "CommandSend", [
    (1, "producer_id", UINT), (2, "sequence_id", UINT), (3, "num_messages", INT, ("default", 1)),
    (4, "txnid_least_bits", UINT), (5, "txnid_most_bits", UINT), (6, "highest_sequence_id", UINT),
])
_command(SEND_RECEIPT, "CommandSendReceipt", [
    (1, "producer_id", UINT), (2, "sequence_id", UINT), (3, "message_id", MSG, MESSAGE_ID_DATA),
    (4, "highest_sequence_id", UINT),
])
_command(SEND_ERROR, "CommandSendError", [
    (1, "producer_id", UINT), (2, "sequence_id", UINT), (3, "error", UINT), (4, "message", STR),
])
_command(MESSAGE, "CommandMessage", [
    (1, "consumer_id", UINT), (2, "message_id", MSG, MESSAGE_ID_DATA), (3, "redelivery_count", UINT),
    (4, "ack_set", INT, "repeated"), (5, "consumer_epoch", UINT),
])
_command(ACK, "CommandAck", [
    (1, "consumer_id", UINT), (2, "ack_type", UINT), (3, "message_id", MSG, "repeated", MESSAGE_ID_DATA),
    (4, "validation_error", UINT, ("default", None)), (6, "txnid_least_bits", UINT), (7, "txnid_most_bits", UINT),
    (8, "request_id", UINT),
])
_command(FLOW, "CommandFlow", [(1, "consumer_id", UINT), (2, "messagePermits", UINT)])
_command(UNSUBSCRIBE, "CommandUnsubscribe", [(1, "consumer_id", UINT), (2, "request_id", UINT)])
_command(SUCCESS, "CommandSuccess", [(1, "request_id", UINT)])
_command(ERROR, "CommandError", [(1, "request_id", UINT), (2, "error", UINT), (3, "message", STR)])
_command(CLOSE_PRODUCER, "CommandCloseProducer", [
    (1, "producer_id", UINT), (2, "request_id", UINT), (3, "assignedBrokerServiceUrl", STR),
    (4, "assignedBrokerServiceUrlTls", STR),
])
_command(CLOSE_CONSUMER, "CommandCloseConsumer", [
    (1, "consumer_id", UINT), (2, "request_id", UINT), (3, "assignedBrokerServiceUrl", STR),
    (4, "assignedBrokerServiceUrlTls", STR),
])
_command(PRODUCER_SUCCESS, "CommandProducerSuccess", [
    (1, "request_id", UINT), (2, "producer_name", STR), (3, "last_sequence_id", INT, ("default", -1)),
    (4, "schema_version", BYTES), (5, "topic_epoch", UINT, ("default", None)), (6, "producer_ready", BOOL, ("default", True)),
])
_command(PING, "CommandPing", [])
_command(PONG, "CommandPong", [])
_command(REDELIVER_UNACKNOWLEDGED_MESSAGES, "CommandRedeliverUnacknowledgedMessages", [
    (1, "consumer_id", UINT), (2, "message_ids", MSG, "repeated", MESSAGE_ID_DATA), (3, "consumer_epoch", UINT),
])
_command(PARTITIONED_METADATA, "CommandPartitionedTopicMetadata", [(1, "topic", STR), (2, "request_id", UINT)])
_command(PARTITIONED_METADATA_RESPONSE, "CommandPartitionedTopicMetadataResponse", [
    (1, "partitions", UINT), (2, "request_id", UINT), (3, "response", UINT), (4, "error", UINT, ("default", None)),
    (5, "message", STR),
])
_command(LOOKUP, "CommandLookupTopic", [(1, "topic", STR), (2, "request_id", UINT), (3, "authoritative", BOOL),
                                        (7, "advertised_listener_name", STR)])
_command(LOOKUP_RESPONSE, "CommandLookupTopicResponse", [
    (1, "brokerServiceUrl", STR), (2, "brokerServiceUrlTls", STR), (3, "response", UINT, ("default", None)),
    (4, "request_id", UINT), (5, "authoritative", BOOL), (6, "error", UINT, ("default", None)), (7, "message", STR),
    (8, "proxy_through_service_url", BOOL),
])
_command(REACHED_END_OF_TOPIC, "CommandReachedEndOfTopic", [(1, "consumer_id", UINT)])
_command(SEEK, "CommandSeek", [
    (1, "consumer_id", UINT), (2, "request_id", UINT), (3, "message_id", MSG, MESSAGE_ID_DATA),
    (4, "message_publish_time", UINT, ("default", None)),
])
_command(GET_LAST_MESSAGE_ID, "CommandGetLastMessageId", [(1, "consumer_id", UINT), (2, "request_id", UINT)])
_command(GET_LAST_MESSAGE_ID_RESPONSE, "CommandGetLastMessageIdResponse", [
    (1, "last_message_id", MSG, MESSAGE_ID_DATA), (2, "request_id", UINT),
    (3, "consumer_mark_delete_position", MSG, MESSAGE_ID_DATA),
])
_command(ACTIVE_CONSUMER_CHANGE, "CommandActiveConsumerChange", [(1, "consumer_id", UINT), (2, "is_active", BOOL)])
_command(GET_TOPICS_OF_NAMESPACE, "CommandGetTopicsOfNamespace", [
    (1, "request_id", UINT), (2, "namespace", STR), (3, "mode", UINT), (4, "topics_pattern", STR),
    (5, "topics_hash", STR),
])
_command(GET_TOPICS_OF_NAMESPACE_RESPONSE, "CommandGetTopicsOfNamespaceResponse", [
    (1, "request_id", UINT), (2, "topics", STR, "repeated"), (3, "filtered", BOOL), (4, "topics_hash", STR),
    (5, "changed", BOOL, ("default", True)),
])
SCHEMA = Schema("Schema", [
    (1, "name", STR), (3, "schema_data", BYTES), (4, "type", UINT), (5, "properties", MSG, "repeated", KEY_VALUE),
])
_command(GET_SCHEMA, "CommandGetSchema", [(1, "request_id", UINT), (2, "topic", STR), (3, "schema_version", BYTES)])
_command(GET_SCHEMA_RESPONSE, "CommandGetSchemaResponse", [
    (1, "request_id", UINT), (2, "error_code", UINT, ("default", None)), (3, "error_message", STR),
    (4, "schema", MSG, SCHEMA), (5, "schema_version", BYTES),
])
AUTH_DATA = Schema("AuthData", [(1, "auth_method_name", STR), (2, "auth_data", BYTES)])
_command(AUTH_CHALLENGE, "CommandAuthChallenge", [
    (1, "server_version", STR), (2, "challenge", MSG, AUTH_DATA), (3, "protocol_version", INT),
])
_command(AUTH_RESPONSE, "CommandAuthResponse", [
    (1, "client_version", STR), (2, "response", MSG, AUTH_DATA), (3, "protocol_version", INT),
])
_command(ACK_RESPONSE, "CommandAckResponse", [
    (1, "consumer_id", UINT), (4, "error", UINT, ("default", None)), (5, "message", STR), (6, "request_id", UINT),
])
_command(TC_CLIENT_CONNECT_RESPONSE, "CommandTcClientConnectResponse", [
    (1, "request_id", UINT), (2, "error", UINT, ("default", None)), (3, "message", STR),
])
_TXN_ANSWER = [
    (1, "request_id", UINT), (2, "txnid_least_bits", UINT), (3, "txnid_most_bits", UINT),
    (4, "error", UINT, ("default", None)), (5, "message", STR),
]
_command(NEW_TXN_RESPONSE, "CommandNewTxnResponse", _TXN_ANSWER)
_command(ADD_PARTITION_TO_TXN_RESPONSE, "CommandAddPartitionToTxnResponse", _TXN_ANSWER)
_command(ADD_SUBSCRIPTION_TO_TXN_RESPONSE, "CommandAddSubscriptionToTxnResponse", _TXN_ANSWER)
_command(END_TXN_RESPONSE, "CommandEndTxnResponse", _TXN_ANSWER)
_command(NEW_TXN, "CommandNewTxn", [(1, "request_id", UINT), (2, "txn_ttl_seconds", UINT), (3, "tc_id", UINT)])
_command(TC_CLIENT_CONNECT_REQUEST, "CommandTcClientConnectRequest", [(1, "request_id", UINT), (2, "tc_id", UINT)])
_command(END_TXN, "CommandEndTxn", [
    (1, "request_id", UINT), (2, "txnid_least_bits", UINT), (3, "txnid_most_bits", UINT), (4, "txn_action", UINT),
])
_command(WATCH_TOPIC_LIST, "CommandWatchTopicList", [
    (1, "request_id", UINT), (2, "watcher_id", UINT), (3, "namespace", STR), (4, "topics_pattern", STR),
    (5, "topics_hash", STR),
])
_command(WATCH_TOPIC_LIST_SUCCESS, "CommandWatchTopicListSuccess", [
    (1, "request_id", UINT), (2, "watcher_id", UINT), (3, "topic", STR, "repeated"), (4, "topics_hash", STR),
])
_command(WATCH_TOPIC_UPDATE, "CommandWatchTopicUpdate", [
    (1, "watcher_id", UINT), (2, "new_topics", STR, "repeated"), (3, "deleted_topics", STR, "repeated"),
    (4, "topics_hash", STR),
])
_command(WATCH_TOPIC_LIST_CLOSE, "CommandWatchTopicListClose", [(1, "request_id", UINT), (2, "watcher_id", UINT)])
_command(TOPIC_MIGRATED, "CommandTopicMigrated", [
    (1, "resource_id", UINT), (2, "resource_type", UINT), (3, "brokerServiceUrl", STR), (4, "brokerServiceUrlTls", STR),
])


def decode_command(data: Any) -> tuple[int, Any]:
    """(type, sub-command record) of a serialized BaseCommand; a type this
    module has no schema for comes back with the record None."""
    raw = read_fields(data)
    kind = -1
    body: Any = None
    for i in range(0, len(raw), 2):
        number = raw[i]
        if number == 1:
            kind = raw[i + 1]
        elif number == kind or body is None and number > 1:
            body = (number, raw[i + 1])
    if not isinstance(kind, int) or kind < 0:  # (a length-delimited type is bytes: no < on it)
        raise ProtocolError("BaseCommand without a type")
    schema = _COMMANDS.get(kind)
    if schema is None:
        return kind, None
    if body is None or body[0] != kind:
        if not schema.fields:
            return kind, schema.record()
        raise ProtocolError("BaseCommand of type %d without its command" % kind)
    if not isinstance(body[1], bytes):
        raise ProtocolError("BaseCommand of type %d: the command is not a message" % kind)
    return kind, decode(schema, body[1])


def command_schema(kind: int) -> Schema | None:
    """The schema of a BaseCommand type (None if this module does not read it)."""
    return _COMMANDS.get(kind)
