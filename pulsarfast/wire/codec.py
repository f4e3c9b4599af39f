"""The one place that picks the Pulsar wire codec: the compiled pulsarfast.wire._codec
when it is importable, else the pure-Python twin pulsarfast.wire._codec_py.
NSQFAST_PURE_PYTHON=1 (or its older names PULSARFAST_PURE_PYTHON, NSQ_PURE_PYTHON:
`make test`'s pure run sets the latter for the whole suite) forces the twin. When
the compiled module is missing (an install without a compiler), it says so once,
through the ``pulsarfast`` logger, at import. ``msgengine.twins`` does the choosing.
"""
from __future__ import annotations

from msgengine.twins import load_twins

from pulsarfast.wire import _codec_py

_MISSING = ("pulsarfast: the compiled wire codec (pulsarfast.wire._codec) is not installed (%s); using the pure-Python "
            "codec, several times slower. Install a binary wheel of nsqfast, or build from source with a C compiler.")

# IMPLEMENTATION: "cython" or "python", which implementation the names below come from;
# compiled_impl: the compiled module (None when missing), compiled_import_error: why it is.
_impl, IMPLEMENTATION, compiled_impl, compiled_import_error, python_impl = load_twins(
    "pulsarfast.wire._codec", _codec_py, "pulsarfast", _MISSING)

MAGIC_CRC32C: int = _impl.MAGIC_CRC32C
DEFAULT_MAX_FRAME_SIZE: int = _impl.DEFAULT_MAX_FRAME_SIZE
WIRE_VARINT: int = _impl.WIRE_VARINT
WIRE_FIXED64: int = _impl.WIRE_FIXED64
WIRE_BYTES: int = _impl.WIRE_BYTES
WIRE_FIXED32: int = _impl.WIRE_FIXED32
Frame = _impl.Frame

crc32c = _impl.crc32c
varint = _impl.varint
read_fields = _impl.read_fields
encode_simple = _impl.encode_simple
encode_payload = _impl.encode_payload
FrameDecoder = _impl.FrameDecoder
split_batch = _impl.split_batch
encode_batch_entry = _impl.encode_batch_entry
encode_send_frame = _impl.encode_send_frame
decode_message = _impl.decode_message
decode_single_metadata = _impl.decode_single_metadata
split_batch_decoded = _impl.split_batch_decoded
untrack = _impl.untrack
GENERIC_METADATA_FIELDS: frozenset = _impl.GENERIC_METADATA_FIELDS

__all__ = [
    "IMPLEMENTATION",
    "python_impl",
    "compiled_impl",
    "Frame",
    *python_impl.__all__,
]
