"""pynsq's ``nsq._compat``: the Python 2/3 shims pynsq's modules import, which
its test suite and some programs import too. nsqfast runs on Python 3 only, so
``PY2`` is False and every name is its Python 3 spelling; nothing else of the
package uses this module (``import nsq`` does not load it)."""
from __future__ import annotations

import struct
import sys
from inspect import signature
from typing import Any, Callable, Iterable, Mapping
from urllib import parse as urlparse
from urllib.parse import parse_qs, urlencode

from nsq.protocol import bytes_types

PY2 = sys.version_info[0] == 2

text_type = str
string_types = (str,)
integer_types = (int,)

# big-endian int32, int64, int16: NSQ's sizes, frame types, timestamps, attempts
struct_l = struct.Struct(">l")
struct_q = struct.Struct(">q")
struct_h = struct.Struct(">h")


def itervalues(mapping: Mapping[Any, Any], *args: Any, **kwargs: Any) -> Iterable[Any]:
    """``mapping.values()``."""
    return mapping.values(*args, **kwargs)


def iteritems(mapping: Mapping[Any, Any], *args: Any, **kwargs: Any) -> Iterable[tuple[Any, Any]]:
    """``mapping.items()``."""
    return mapping.items(*args, **kwargs)


def to_bytes(x: Any, charset: str = "utf-8", errors: str = "strict") -> bytes:
    """Bytes-like objects copied to ``bytes``, text encoded with ``charset``;
    anything else is a TypeError."""
    if isinstance(x, bytes_types):
        return bytes(x)
    if isinstance(x, str):
        return x.encode(charset, errors)
    raise TypeError("expected bytes or a string, not %r" % type(x))


def func_args(func: Callable[..., Any]) -> list[str]:
    """The names of ``func``'s parameters that may be passed by position or by
    keyword (``*args``, keyword-only and ``**kwargs`` ones left out)."""
    params = signature(func).parameters.values()
    return [param.name for param in params if param.kind is param.POSITIONAL_OR_KEYWORD]
