"""An nsqd that times messages out and brings deferred ones back on a test's channels from its
first moment, not up to 5 s later.

nsqd (1.3.0) times out in-flight messages (the client's msg_timeout, or the messages of a
connection that went away) and requeues deferred ones (REQ with a delay, DPUB) in its queue-scan
loop. That loop scans the channels it knew at the last refresh of its list: at startup, and then
every 5 s (QueueScanRefreshInterval, which no flag sets). A channel made after nsqd started has
its timeouts and deferred messages wait for the next refresh, up to 5 s after its own timeout:
a test of a 1 s msg_timeout took 5 s.

nsqd reads its metadata file (``nsqd.dat`` in its data dir: the topics and channels it had) before
the scan loop starts, so ``nsqd_with_channels`` writes the test's topics and channels there first:
their timeouts and deferrals then take the time the test set, plus at most one 100 ms scan.
"""
from __future__ import annotations

import json
import os
from typing import Callable, Iterable, Mapping

from .servers import Nsqd

__all__ = ["nsqd_with_channels", "write_nsqd_metadata"]


def write_nsqd_metadata(data_dir: str, channels: Mapping[str, Iterable[str]]) -> None:
    """Write ``nsqd.dat`` in data_dir: these topics (unpaused) with these channels (unpaused), in
    the format nsqd 1.3.0 writes it."""
    metadata = {
        "topics": [
            {"name": topic, "paused": False, "channels": [{"name": name, "paused": False} for name in names]}
            for topic, names in channels.items()
        ],
        "version": "1.3.0",
    }
    with open(os.path.join(data_dir, "nsqd.dat"), "w") as f:
        json.dump(metadata, f)


def nsqd_with_channels(nsqd_factory: Callable[..., Nsqd], channels: Mapping[str, Iterable[str]],
                       *extra_flags: str, **kwargs) -> Nsqd:
    """``nsqd_factory(*extra_flags, **kwargs)``, started with ``channels`` ({topic: [channel, ...]})
    already there and in the list its queue scan goes through (see the module docstring)."""
    server = nsqd_factory(*extra_flags, start=False, **kwargs)
    write_nsqd_metadata(server.data_dir, channels)
    server.start()
    assert server.channel_stats(*_first(channels)) is not None, "nsqd did not load its metadata file"
    return server


def _first(channels: Mapping[str, Iterable[str]]) -> tuple:
    for topic, names in channels.items():
        for name in names:
            return topic, name
    raise ValueError("no channel given")
