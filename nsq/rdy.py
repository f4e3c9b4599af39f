"""NSQ's names for flow control: RDY is the engine's credit.

``RdyManager`` is ``msgengine.flow.FlowControl`` with pynsq's vocabulary
(``total_rdy``, ``max_rdy_count``), and ``RdyCount`` is the per-connection
``LinkCredit`` that a connection's protocol object keeps up to date (the one
copy of a connection's RDY and in-flight counts).
"""
from __future__ import annotations

from typing import Hashable

from msgengine.flow import Action, FlowControl, LinkCredit

__all__ = ["Action", "DEFAULT_MAX_RDY_COUNT", "RdyCount", "RdyManager"]

#: What a connection assumes when nsqd's IDENTIFY response does not say.
DEFAULT_MAX_RDY_COUNT = 2500


class RdyCount(LinkCredit):
    """A connection's RDY (the credit), messages left under it, and messages in flight."""

    __slots__ = ()

    @property
    def rdy(self) -> int:
        return self.credit

    @property
    def max_rdy_count(self) -> int:
        return self.max_credit


class RdyManager(FlowControl):
    """Spreads max_in_flight over nsqd connections as RDY counts."""

    @property
    def total_rdy(self) -> int:
        return self.total_credit

    def add_conn(self, key: Hashable, max_rdy_count: int = DEFAULT_MAX_RDY_COUNT) -> list[Action]:
        """A connection whose counts the manager keeps itself (tests, tools)."""
        return self.add_link(RdyCount(key, max_rdy_count))
