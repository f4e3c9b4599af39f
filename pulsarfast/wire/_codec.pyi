# Type stubs for the compiled Pulsar wire codec pulsarfast.wire._codec (same API as pulsarfast.wire._codec_py).
from typing import Any, Iterable, Mapping

MAGIC_CRC32C: int
DEFAULT_MAX_FRAME_SIZE: int
WIRE_VARINT: int
WIRE_FIXED64: int
WIRE_BYTES: int
WIRE_FIXED32: int
CRC32C_HARDWARE: bool
GENERIC_METADATA_FIELDS: frozenset[int]

Frame = tuple

def crc32c(data: Any, value: int = 0) -> int: ...
def _crc32c_software(data: Any, value: int = 0) -> int: ...
def varint(value: int) -> bytes: ...
def read_fields(data: Any) -> list[Any]: ...
def encode_simple(command: Any) -> bytes: ...
def encode_payload(command: Any, metadata: Any, payload: Any) -> bytes: ...

class FrameDecoder:
    def __init__(self, max_frame_size: int = ...) -> None: ...
    @property
    def max_frame_size(self) -> int: ...
    @max_frame_size.setter
    def max_frame_size(self, max_frame_size: int) -> None: ...
    def pending_bytes(self) -> int: ...
    def feed(self, data: bytes | bytearray | memoryview) -> list[tuple[bytes, bytes | None, bytes | None, bool]]: ...

def split_batch(payload: Any, count: int) -> list[tuple[bytes, bytes]]: ...
def encode_batch_entry(single_metadata: Any, body: Any) -> bytes: ...

# the hot paths (see pulsarfast.wire._codec_py for the rules)
_Buffer = bytes | bytearray | memoryview

def encode_send_frame(
    producer_id: int,
    sequence_id: int,
    producer_name: _Buffer,
    publish_time: int,
    payload: Any,
    properties: Iterable[tuple[_Buffer, _Buffer]] | Mapping[bytes, bytes] | None = None,
    partition_key: _Buffer | None = None,
    event_time: int = 0,
    extra_metadata: Any = b"",
    num_messages: int = 1,
    highest_sequence_id: int | None = None,
) -> bytes: ...

# (consumer_id, ledger_id, entry_id, partition, batch_index, redelivery_count, producer_name, sequence_id,
#  publish_time, properties, partition_key, event_time, num_messages_in_batch, compression, uncompressed_size,
#  ordering_key, null_value, schema_version, generic)
MessageTuple = tuple[
    int, int, int, int, int, int, str, int, int, dict[str, str], str | None, int, int | None, int, int,
    bytes | None, bool, bytes, bool,
]
# (properties, partition_key, payload_size, compacted_out, event_time, ordering_key, sequence_id, null_value)
SingleMetadataTuple = tuple[dict[str, str], str | None, int, bool, int, bytes | None, int | None, bool]

def decode_message(command: Any, metadata: Any) -> MessageTuple | None: ...
def decode_single_metadata(data: Any) -> SingleMetadataTuple: ...
def split_batch_decoded(payload: Any, count: int) -> list[tuple[SingleMetadataTuple, bytes]]: ...
def untrack(objects: list[Any], start: int = 0) -> None: ...
