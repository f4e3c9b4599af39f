"""The publishing commands' progress: a counter rewritten in place on
stderr while lines are acknowledged (only when stderr is a terminal, at most
a few times a second), and one summary line at the end with the rate."""
from __future__ import annotations

import sys
import time
from typing import TextIO

REFRESH = 0.25  # seconds between two updates of the counter


def summary(verb: str, count: int, target: str, seconds: float) -> str:
    """'published 1,000 lines to events in 0.52s (1,923 lines/s)'."""
    rate = count / seconds if seconds > 0 else 0.0
    return "%s %s lines to %s in %.2fs (%s lines/s)" % (verb, format(count, ","), target, seconds,
                                                        format(round(rate), ","))


class Progress:
    """Counts acknowledged lines; ``finish`` writes the summary."""

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None, quiet: bool = False) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            try:
                enabled = self.stream.isatty()
            except (AttributeError, ValueError):
                enabled = False
        self.live = bool(enabled) and not quiet
        self.quiet = quiet
        self.started = time.monotonic()
        self._shown_at = 0.0
        self._shown = False

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def update(self, done: int) -> None:
        if not self.live:
            return
        now = time.monotonic()
        if now - self._shown_at < REFRESH:
            return
        self._shown_at = now
        self._shown = True
        seconds = now - self.started
        self.stream.write("\r\033[K%s lines acknowledged (%s lines/s)..."
                          % (format(done, ","), format(round(done / seconds) if seconds > 0 else 0, ",")))
        self.stream.flush()

    def finish(self, summary: str) -> None:
        """Clear the counter and write summary (unless quiet or empty)."""
        if self._shown:
            self.stream.write("\r\033[K")
        if summary and not self.quiet:
            self.stream.write(summary + "\n")
        self.stream.flush()
