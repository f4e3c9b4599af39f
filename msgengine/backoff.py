"""Backoff arithmetic: pynsq's BackoffTimer with its exact numbers and
behaviour (the interval starts at ``min_interval``; it grows by a short unit,
the first ``short_length`` failures reaching ``ratio`` of the range, plus a
long unit, ``long_length`` failures reaching the rest; it shrinks the same way
on success and never leaves [min_interval, max_interval]), and the jittered
delay between reconnects."""
from __future__ import annotations

import random
from decimal import Decimal


class IntervalTypeError(TypeError, AssertionError):
    """An interval that is not a number (an AssertionError too, as pynsq asserts)."""


def _decimal(value: int | float | Decimal, name: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise IntervalTypeError("%s must be a number, not %r" % (name, value))
    return Decimal(str(value)) if isinstance(value, float) else Decimal(value)


class BackoffTimer:
    """Backoff interval in seconds driven by success() and failure() calls, as
    pynsq's: the interval starts at ``min_interval`` (``get_interval()``),
    ``failure()`` grows it, ``success()`` shrinks it (nothing to do at 0)."""

    def __init__(
        self,
        min_interval: int | float | Decimal,
        max_interval: int | float | Decimal,
        ratio: float = 0.25,
        short_length: int = 10,
        long_length: int = 250,
    ) -> None:
        self.min_interval = _decimal(min_interval, "min_interval")
        self.max_interval = _decimal(max_interval, "max_interval")
        span = self.max_interval - self.min_interval
        ratio_d = _decimal(ratio, "ratio")
        self.max_short_timer = span * ratio_d
        self.max_long_timer = span * (1 - ratio_d)
        self.short_unit = self.max_short_timer / short_length
        self.long_unit = self.max_long_timer / long_length
        self.short_interval = Decimal(0)
        self.long_interval = Decimal(0)
        self.interval = 0.0
        self.update_interval()

    def success(self) -> None:
        """Shrink the interval after a success (nothing to do while it is 0)."""
        if self.interval == 0.0:
            return
        self.short_interval = max(self.short_interval - self.short_unit, Decimal(0))
        self.long_interval = max(self.long_interval - self.long_unit, Decimal(0))
        self.update_interval()

    def failure(self) -> None:
        """Grow the interval after a failure, up to max_interval."""
        self.short_interval = min(self.short_interval + self.short_unit, self.max_short_timer)
        self.long_interval = min(self.long_interval + self.long_unit, self.max_long_timer)
        self.update_interval()

    def update_interval(self) -> None:
        self.interval = float(self.min_interval + self.short_interval + self.long_interval)

    def get_interval(self) -> float:
        return self.interval

    # Beyond pynsq's: what flow control asks.

    def is_reset(self) -> bool:
        """No failure is left to work off: the interval is back at min_interval."""
        return self.short_interval == 0 and self.long_interval == 0

    def reset(self) -> None:
        """Back to min_interval at once."""
        self.short_interval = Decimal(0)
        self.long_interval = Decimal(0)
        self.update_interval()


def reconnect_delay(failures: int, cap: float, base: float = 0.1) -> float:
    """Seconds to wait before reconnect attempt number ``failures + 1``:
    exponential from base, at most cap, with full jitter on the upper half."""
    delay = min(cap, base * (2 ** min(failures, 30)))
    return delay / 2 + random.random() * delay / 2
