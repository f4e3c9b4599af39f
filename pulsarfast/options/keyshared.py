"""KeyShared subscriptions: ``ConsumerKeySharedPolicy`` (the official
``pulsar.ConsumerKeySharedPolicy``) and what SUBSCRIBE carries for it.

On a ``ConsumerType.KeyShared`` subscription the broker hashes each
message's ordering key (else its partition key) with Murmur3 32, modulo
65536, and gives every hash to one consumer. ``KeySharedMode.AutoSplit``
(the default) lets the broker split the hash space among the consumers;
``KeySharedMode.Sticky`` gives this consumer the ``sticky_ranges`` it names
(inclusive ``(start, end)`` pairs), and the broker refuses a consumer whose
ranges overlap another consumer's (``ConsumerAssignError``), as it refuses a
range whose start is after its end. ``allow_out_of_order_delivery`` lets the
broker deliver a key to a new consumer before the earlier consumer has
acknowledged its messages of that key.

The constructor checks what the official one (its C++ library) checks, in
the same order and with the same exceptions: ``Sticky`` without ranges,
an empty list, a range starting below 0 or ending above 65535, ranges that
share a hash (two equal ranges are not compared), and a wrong type
(``TypeError``, as the C extension's argument conversion raises). A range
whose start is after its end is accepted here and refused by the broker at
subscribe, as with the official client.
"""
from __future__ import annotations

from typing import Any, Sequence

from pulsarfast.base.enums import KeySharedMode

#: the hash space the broker divides (hashes are 0..65535)
HASH_RANGE_SIZE = 65536
_INT32 = (-(1 << 31), (1 << 31) - 1)

__all__ = ["ConsumerKeySharedPolicy", "HASH_RANGE_SIZE", "KeySharedMode", "key_shared_policy_arg"]


def _mode(value: Any) -> KeySharedMode:
    if isinstance(value, KeySharedMode):
        return value
    if type(value).__name__ == "KeySharedMode" and getattr(value, "name", None) in KeySharedMode.__members__:
        return KeySharedMode[value.name]  # (the official module's enum)
    raise TypeError("set_key_shared_mode(): incompatible function arguments: a KeySharedMode, not %r" % (value,))


def _flag(value: Any) -> bool:
    """A bool as the C extension converts one: None is False, numbers by their truth, others refused."""
    if value is None:
        return False
    if isinstance(value, bool) or hasattr(type(value), "__bool__") and not isinstance(value, (str, bytes)):
        return bool(value)
    raise TypeError("set_allow_out_of_order_delivery(): incompatible function arguments: a bool, not %r" % (value,))


def _ranges(value: Any) -> list[tuple[int, int]]:
    """The sticky ranges as (start, end) int pairs (TypeError for anything else)."""
    wrong = TypeError("set_sticky_ranges(): incompatible function arguments: a list of (int, int) pairs, not %r"
                      % (value,))
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise wrong
    ranges = []
    for pair in value:
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise wrong
        start, end = pair
        if not (isinstance(start, int) and isinstance(end, int)) or not (
                _INT32[0] <= start <= _INT32[1] and _INT32[0] <= end <= _INT32[1]):
            raise wrong
        ranges.append((int(start), int(end)))
    return ranges


def check_sticky_ranges(ranges: list[tuple[int, int]]) -> None:
    """The official checks of sticky ranges (ValueError), in its order: none at all; then, range by
    range, its bounds and whether it shares a hash with another (different) range."""
    if not ranges:
        raise ValueError("Ranges for KeyShared policy must not be empty.")
    for start, end in ranges:
        if start < 0 or end >= HASH_RANGE_SIZE:
            raise ValueError("KeySharedPolicy Exception: Ranges must be [0, 65535].")
        for other in ranges:
            if other != (start, end) and min(end, other[1]) >= max(start, other[0]):
                raise ValueError("Ranges for KeyShared policy with overlap.")


class ConsumerKeySharedPolicy:
    """How a KeyShared consumer shares the keys, as the official client's::

        ConsumerKeySharedPolicy(key_shared_mode=KeySharedMode.AutoSplit, allow_out_of_order_delivery=False,
                                sticky_ranges=None)

    See the module docstring for the modes and the checks.
    """

    def __init__(self, key_shared_mode: KeySharedMode = KeySharedMode.AutoSplit,
                 allow_out_of_order_delivery: bool = False,
                 sticky_ranges: list[tuple[int, int]] | None = None) -> None:
        if key_shared_mode == KeySharedMode.Sticky and sticky_ranges is None:
            raise ValueError("When using key_shared_mode = KeySharedMode.Sticky you must also provide sticky_ranges")
        self._mode = _mode(key_shared_mode)
        self._allow_out_of_order_delivery = _flag(allow_out_of_order_delivery)
        self._ranges: list[tuple[int, int]] = []
        if sticky_ranges is not None:
            ranges = _ranges(sticky_ranges)
            check_sticky_ranges(ranges)
            self._ranges = ranges

    @property
    def key_shared_mode(self) -> KeySharedMode:
        return self._mode

    @property
    def allow_out_of_order_delivery(self) -> bool:
        return self._allow_out_of_order_delivery

    @property
    def sticky_ranges(self) -> list[tuple[int, int]]:
        """The ranges given (a copy; [] when none were)."""
        return list(self._ranges)

    def policy(self) -> "ConsumerKeySharedPolicy":
        return self

    def hash_ranges(self) -> list[tuple[int, int]]:
        """The ranges SUBSCRIBE carries: a Sticky policy's (the broker ignores them with AutoSplit, and
        the official client sends none then)."""
        return list(self._ranges) if self._mode == KeySharedMode.Sticky else []

    def __repr__(self) -> str:
        return "ConsumerKeySharedPolicy(key_shared_mode=%s, allow_out_of_order_delivery=%r, sticky_ranges=%r)" % (
            self._mode, self._allow_out_of_order_delivery, self._ranges)


def key_shared_policy_arg(name: str, value: Any) -> ConsumerKeySharedPolicy | None:
    """subscribe()'s key_shared_policy: None, or a ConsumerKeySharedPolicy (the official module's too,
    read through its properties), kept as pulsarfast's."""
    if value is None or isinstance(value, ConsumerKeySharedPolicy):
        return value
    if type(value).__name__ != "ConsumerKeySharedPolicy":
        raise ValueError("Argument %s is expected to be either None or of type 'ConsumerKeySharedPolicy'" % name)
    ranges = value.sticky_ranges
    return ConsumerKeySharedPolicy(_mode(value.key_shared_mode), value.allow_out_of_order_delivery,
                                   ranges if ranges or value.key_shared_mode.name == "Sticky" else None)
