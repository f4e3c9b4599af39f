"""The one place that picks the Pulsar wire codec: the compiled pulsarfast._wire
when it is importable (unless PULSARFAST_PURE_PYTHON=1 or NSQ_PURE_PYTHON=1), else
the pure-Python twin pulsarfast._wire_py. When the compiled module is missing (an
install without a compiler), it says so once, through the ``pulsarfast`` logger, at
import.
"""
from __future__ import annotations

import logging
import os
from types import ModuleType

from . import _wire_py as python_impl

compiled_impl: ModuleType | None
#: Why the compiled module could not be imported (None when it was).
compiled_import_error: ImportError | None = None
try:
    from . import _wire as compiled_impl
except ImportError as exc:  # not built (pure install, no compiler)
    compiled_impl = None
    compiled_import_error = exc


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip() not in ("", "0")


# NSQ_PURE_PYTHON too: `make test`'s pure run sets that one for the whole suite.
_FORCE_PURE = _flag("PULSARFAST_PURE_PYTHON") or _flag("NSQ_PURE_PYTHON")
_impl: ModuleType = python_impl if _FORCE_PURE or compiled_impl is None else compiled_impl

#: "cython" or "python": which implementation the names below come from.
IMPLEMENTATION: str = "python" if _impl is python_impl else "cython"

if compiled_impl is None and not _FORCE_PURE:
    logging.getLogger("pulsarfast").warning(
        "pulsarfast: the compiled wire codec (pulsarfast._wire) is not installed (%s); "
        "using the pure-Python codec, several times slower. Install a binary wheel of "
        "nsqfast, or build from source with a C compiler.", compiled_import_error)

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
GENERIC_METADATA_FIELDS: frozenset = _impl.GENERIC_METADATA_FIELDS

__all__ = [
    "IMPLEMENTATION",
    "python_impl",
    "compiled_impl",
    "Frame",
    *python_impl.__all__,
]
