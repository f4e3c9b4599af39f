"""Input lines for the publishing commands: read from files or stdin
(``-``), one message per line, grouped into batches of at most ``max_count``
lines and ``max_bytes`` bytes. A batch also ends when the input pauses for
``linger`` seconds, so that ``tail -f app.log | nsqfast pub ...`` publishes
each line soon after it is written instead of waiting for a full batch.

Lines end with ``\\n`` (a ``\\r`` before it is dropped too); a last line
without one still counts. Reads go straight to the file descriptor (POSIX
``select`` tells whether more input is waiting), never through
``sys.stdin``'s buffer."""
from __future__ import annotations

import os
import select
import stat
import sys
from typing import Iterator, Sequence

CHUNK = 256 * 1024


class _Idle:
    """Marker: the input paused for the linger time."""


IDLE = _Idle()


def _lines(fd: int, linger: float | None) -> Iterator["bytes | _Idle"]:
    """The lines read from fd, with IDLE whenever the input pauses for linger
    seconds (pipes and terminals; a regular file never pauses)."""
    pauses = linger is not None and not stat.S_ISREG(os.fstat(fd).st_mode)
    rest = b""
    while True:
        if pauses:
            ready, _, _ = select.select([fd], [], [], linger)
            if not ready:
                yield IDLE
        chunk = os.read(fd, CHUNK)
        if not chunk:
            break
        if b"\n" not in chunk:
            rest += chunk
            continue
        parts = chunk.split(b"\n")
        parts[0] = rest + parts[0]
        rest = parts.pop()
        for line in parts:
            yield line[:-1] if line.endswith(b"\r") else line
    if rest:
        yield rest[:-1] if rest.endswith(b"\r") else rest


class LineBatches:
    """Iterate to get lists of lines (bytes, without their line end), file
    after file. ``skip_empty`` leaves out empty lines (counted in
    ``skipped``); ``lines_read`` counts the lines handed out."""

    def __init__(
        self,
        sources: Sequence[str],
        max_count: int,
        max_bytes: int,
        linger: float | None = 0.1,
        skip_empty: bool = False,
    ) -> None:
        if max_count < 1 or max_bytes < 1:
            raise ValueError("a batch needs room for at least one line")
        self.sources = list(sources) or ["-"]
        self.max_count = max_count
        self.max_bytes = max_bytes
        self.linger = linger
        self.skip_empty = skip_empty
        self.lines_read = 0
        self.skipped = 0

    def __iter__(self) -> Iterator[list[bytes]]:
        batch: list[bytes] = []
        size = 0
        for source in self.sources:
            for line in self._source_lines(source):
                if line is IDLE:
                    if batch:
                        yield batch
                        batch, size = [], 0
                    continue
                assert isinstance(line, bytes)
                if not line and self.skip_empty:
                    self.skipped += 1
                    continue
                if batch and (len(batch) >= self.max_count or size + len(line) > self.max_bytes):
                    yield batch
                    batch, size = [], 0
                batch.append(line)
                size += len(line)
                self.lines_read += 1
        if batch:
            yield batch

    def _source_lines(self, source: str) -> Iterator["bytes | _Idle"]:
        if source == "-":
            yield from _lines(sys.stdin.fileno(), self.linger)
            return
        fd = os.open(source, os.O_RDONLY)  # (OSError: reported by the command as one line)
        try:
            yield from _lines(fd, self.linger)
        finally:
            os.close(fd)
