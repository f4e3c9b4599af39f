"""The one place that picks the blocking publish path of ``nsq.Writer``: the
compiled ``nsq._publish`` when it is importable, else its pure-Python twin
``nsq._publish_py`` (the lanes, their answers, a blocking caller's wait and
``Publisher.pub``; see that module). The same switch as the codec's
(``msgengine.twins``): ``NSQFAST_PURE_PYTHON=1`` forces the twin. A missing
compiled module is not announced again here: the codec's warning (``nsq.codec``)
already says the compiled modules are not installed.
"""
from __future__ import annotations

from msgengine.twins import load_twins

from nsq import _publish_py, codec

_MISSING = ("nsq: the compiled publish path (nsq._publish) is not installed (%s); using the pure-Python one. "
            "Install a binary wheel of nsqfast, or build from source with a C compiler.")

# IMPLEMENTATION: "cython" or "python", which implementation the names below come from;
# compiled_impl: the compiled module (None when missing), compiled_import_error: why it is.
_impl, IMPLEMENTATION, compiled_impl, compiled_import_error, python_impl = load_twins(
    "nsq._publish", _publish_py, "nsq", _MISSING, warn=codec.compiled_impl is not None)

BATCH_MAX_COUNT: int = _impl.BATCH_MAX_COUNT
Publisher = _impl.Publisher
TopicLane = _impl.TopicLane
LaneAnswer = _impl.LaneAnswer
Waiter = _impl.Waiter
lane_lock = _impl.lane_lock

__all__ = ["IMPLEMENTATION", "compiled_impl", "python_impl", *python_impl.__all__]
