"""The one place that picks the frame codec: the compiled nsq._frame when it is
importable, else the pure-Python twin nsq._frame_py. NSQFAST_PURE_PYTHON=1 (or
its older names NSQ_PURE_PYTHON, PULSARFAST_PURE_PYTHON) forces the twin. When
the compiled module is missing (an install without a compiler), it says so once,
through the ``nsq`` logger, at import. ``msgengine.twins`` does the choosing.
"""
from __future__ import annotations

from msgengine.twins import load_twins

from nsq import _frame_py

_MISSING = ("nsq: the compiled frame codec (nsq._frame) is not installed (%s); using the pure-Python codec, "
            "about five times slower to decode. Install a binary wheel of nsqfast, or build from source with a C "
            "compiler.")

# IMPLEMENTATION: "cython" or "python", which implementation the names below come from;
# compiled_impl: the compiled module (None when missing), compiled_import_error: why it is.
_impl, IMPLEMENTATION, compiled_impl, compiled_import_error, python_impl = load_twins(
    "nsq._frame", _frame_py, "nsq", _MISSING)

MAGIC_V2: bytes = _impl.MAGIC_V2
FRAME_TYPE_RESPONSE: int = _impl.FRAME_TYPE_RESPONSE
FRAME_TYPE_ERROR: int = _impl.FRAME_TYPE_ERROR
FRAME_TYPE_MESSAGE: int = _impl.FRAME_TYPE_MESSAGE
MESSAGE_HEADER_SIZE: int = _impl.MESSAGE_HEADER_SIZE
DEFAULT_MAX_FRAME_SIZE: int = _impl.DEFAULT_MAX_FRAME_SIZE

FrameDecoder = _impl.FrameDecoder
decode_message = _impl.decode_message
encode_identify = _impl.encode_identify
encode_auth = _impl.encode_auth
encode_sub = _impl.encode_sub
encode_pub = _impl.encode_pub
encode_mpub = _impl.encode_mpub
encode_dpub = _impl.encode_dpub
encode_rdy = _impl.encode_rdy
encode_fin = _impl.encode_fin
encode_fin_many = _impl.encode_fin_many
encode_req = _impl.encode_req
encode_touch = _impl.encode_touch
encode_cls = _impl.encode_cls
encode_nop = _impl.encode_nop

__all__ = [
    "IMPLEMENTATION",
    "python_impl",
    "compiled_impl",
    *python_impl.__all__,
]
