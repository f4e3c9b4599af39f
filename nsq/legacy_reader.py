"""pynsq's deprecated LegacyReader: one Reader per task in `all_tasks`, each on
its own channel ("<channel>.<task>" when there are several tasks).
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

from nsq.reader import Reader


class LegacyReader:
    """Deprecated: make one nsq.Reader per handler instead."""

    def __init__(self, all_tasks: dict[str, Callable[..., Any]], topic: str, channel: str, **kwargs: Any) -> None:
        warnings.warn("LegacyReader is deprecated; use one nsq.Reader per handler", DeprecationWarning, stacklevel=2)
        if not isinstance(all_tasks, dict) or not all_tasks:
            raise TypeError("all_tasks must be a non-empty dict of name -> handler")
        self.readers: list[Reader] = []
        for task, handler in all_tasks.items():
            task_channel = channel if len(all_tasks) == 1 else "%s.%s" % (channel, task)
            self.readers.append(Reader(topic, task_channel, message_handler=handler, **kwargs))

    def close(self) -> None:
        for reader in self.readers:
            reader.close()

    def is_closed(self) -> bool:
        return all(reader.is_closed() for reader in self.readers)
