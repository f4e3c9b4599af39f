"""The one place that picks the frame codec: the compiled nsq._frame when it is
importable (unless NSQ_PURE_PYTHON=1), else the pure-Python twin nsq._frame_py.
When the compiled module is missing (an install without a compiler), it says so
once, through the ``nsq`` logger, at import.
"""
from __future__ import annotations

import logging
import os
from types import ModuleType

from . import _frame_py as python_impl

compiled_impl: ModuleType | None
#: Why the compiled module could not be imported (None when it was).
compiled_import_error: ImportError | None = None
try:
    from . import _frame as compiled_impl
except ImportError as exc:  # not built (pure install, no compiler)
    compiled_impl = None
    compiled_import_error = exc

_FORCE_PURE = os.environ.get("NSQ_PURE_PYTHON", "").strip() not in ("", "0")
_impl: ModuleType = python_impl if _FORCE_PURE or compiled_impl is None else compiled_impl

#: "cython" or "python": which implementation the names below come from.
IMPLEMENTATION: str = "python" if _impl is python_impl else "cython"

if compiled_impl is None and not _FORCE_PURE:
    logging.getLogger("nsq").warning(
        "nsq: the compiled frame codec (nsq._frame) is not installed (%s); using the "
        "pure-Python codec, about five times slower to decode. Install a binary wheel "
        "of nsqfast, or build from source with a C compiler.", compiled_import_error)

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
