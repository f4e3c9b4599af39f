"""A Spark driver crash at a chosen point of the exactly-once Pulsar sink, for the
tests that SIGKILL a driver program (tests/support/programs/spark_eo_driver.py) and
restart its query from the checkpoint. Nothing of this is in the library: the
program registers ``CrashingPulsarDataSource`` as its ``pulsar`` format, a subclass
whose stream writer wraps the sink's methods (its Python workers import it from
here, so it must stay an importable module, not the program's ``__main__``).

Options of that format, on top of the sink's: ``crashAt`` = ``write:B`` (a task of
micro-batch B has sent its rows in its transaction, the other tasks may still be
writing), ``precommit:B`` (every task wrote, before the driver's commit of B) or
``postcommit:B`` (the driver's commit of B returned: every END_TXN done, before Spark
records the batch); ``crashPid``: the driver program's process id; ``crashMarker``:
a file written just before the crash (what crashed, where).

A crash freezes the driver program and every process under it (its JVM, Spark's
Python workers: SIGSTOP, so that nothing moves on between the kills), then
SIGKILLs them all, the calling worker last.
"""
from __future__ import annotations

import os
import signal
from typing import Any, Iterator

from pulsarfast.spark.datasource import PulsarDataSource
from pulsarfast.spark.sink import PulsarStreamWriter, SinkConfig, prepare_output


def descendants(pid: int) -> list[int]:
    """pid's children, their children, and so on (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def crash(root: int, marker: str | None, what: str) -> None:
    """SIGKILL root and every process under it (each frozen first), this one last."""
    if marker:
        with open(marker, "w") as f:
            f.write(what)
    me = os.getpid()
    victims = [pid for pid in [root] + descendants(root) if pid != me]
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        for pid in victims:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    os.kill(me, signal.SIGKILL)


class CrashingStreamWriter(PulsarStreamWriter):
    """The sink's stream writer, crashing the driver at its ``crashAt`` point."""

    def __init__(self, config: SinkConfig, options: Any) -> None:
        super().__init__(config)
        point, _, batch = (options.get("crashAt") or "").partition(":")
        self.point = point
        self.batch = int(batch) if batch else -1
        self.pid = int(options.get("crashPid") or 0)
        self.marker = options.get("crashMarker")

    def _crash(self, batch: int) -> None:
        crash(self.pid, self.marker, "%s:%d" % (self.point, batch))

    def write(self, iterator: Iterator[Any]) -> Any:
        from pyspark import TaskContext

        message = super().write(iterator)
        context = TaskContext.get()
        if self.point == "write" and message.batch_id == self.batch and context is not None \
                and context.partitionId() == 0:
            self._crash(self.batch)
        return message

    def commit(self, messages: list[Any], batchId: int) -> None:
        if self.point == "precommit" and batchId == self.batch:
            self._crash(batchId)
        super().commit(messages, batchId)
        if self.point == "postcommit" and batchId == self.batch:
            self._crash(batchId)


class CrashingPulsarDataSource(PulsarDataSource):
    """The ``pulsar`` format, its stream writer a ``CrashingStreamWriter``."""

    def streamWriter(self, schema: Any, overwrite: bool) -> CrashingStreamWriter:
        config = SinkConfig.from_options(self.options, schema, streaming=True)
        prepare_output(config)
        return CrashingStreamWriter(config, self.options)
