"""The one place that picks the socket calls that never wait: the compiled
``msgengine._sockio`` (they keep the GIL through the system call) when it is
importable, else the pure-Python twin ``msgengine._sockio_py``. The same
switch as the codecs' (``msgengine.twins``); a missing compiled module is not
announced here (the codecs' warnings say the compiled modules are missing).
"""
from __future__ import annotations

from msgengine import _sockio_py
from msgengine.twins import load_twins

_impl, IMPLEMENTATION, compiled_impl, compiled_import_error, python_impl = load_twins(
    "msgengine._sockio", _sockio_py, "msgengine", "", warn=False)

recv_nowait = _impl.recv_nowait
send_nowait = _impl.send_nowait

__all__ = ["IMPLEMENTATION", "compiled_impl", "python_impl", "recv_nowait", "send_nowait"]
