"""What a ``Client`` hands its user (producers, consumers, readers' consumers, table views: its
*parts*), and the register it keeps them in.

The client and its parts keep each other alive without a reference cycle, so that CPython frees a
client the moment its last reference goes, as the official client is freed, with no
``gc.collect()`` (``lifetime.py`` says what it does then):

- a part its user holds keeps its client (``keep_alive``), and the client holds it weakly
  (``Parts``);
- a part its user drops while the client lives is taken back by the client (``HandedOut``'s
  ``__del__`` hands it to its ``Parts``, which then holds it strongly and clears its
  ``keep_alive``), so that ``close()`` still closes it, as the official client's does.
"""
from __future__ import annotations

import weakref
from typing import Any, Generic, Iterator, TypeVar


class HandedOut:
    """What a client hands its user (a mixin): taken back by the client when its user drops it."""

    #: what this part keeps alive for its user: its Client (None once taken back, or for a part of a part)
    keep_alive: object = None
    #: the client's register of such parts (Parts.add sets it)
    handed_out_by: "Parts[Any] | None" = None

    def __del__(self) -> None:
        parts = self.handed_out_by
        if parts is not None:
            try:
                parts.dropped(self)
            except Exception:  # pragma: no cover - an interpreter shutting down
                pass


P = TypeVar("P", bound=HandedOut)


class Parts(Generic[P]):
    """A client's parts of one kind, in the order they were made: each held weakly while its user
    may hold it, strongly once its user dropped it (until the client closes or is gone)."""

    def __init__(self) -> None:
        #: id -> (a weak reference, the part itself once dropped by its user)
        self._entries: dict[int, tuple["weakref.ref[P]", P | None]] = {}
        self._open = True

    def add(self, part: P) -> None:
        part.handed_out_by = self
        self._entries[id(part)] = (weakref.ref(part), None)

    def discard(self, part: P) -> None:
        """The part closed: the client no longer closes it with itself."""
        if self._find(part):
            del self._entries[id(part)]

    def __contains__(self, part: object) -> bool:
        return self._find(part)

    def __iter__(self) -> Iterator[P]:
        """The parts still there (a snapshot)."""
        parts = []
        for ref, kept in list(self._entries.values()):
            part = kept if kept is not None else ref()
            if part is not None:
                parts.append(part)
        return iter(parts)

    def dropped(self, part: P) -> None:
        """Its user let go of part (its ``__del__``): kept from now on, without keeping the client."""
        if self._open and self._find(part, dying=True):
            part.keep_alive = None
            self._entries[id(part)] = (self._entries[id(part)][0], part)

    def close(self) -> None:
        """The client closed or is gone: let go of every part, and take none back any more."""
        self._open = False
        self._entries.clear()

    def _find(self, part: object, dying: bool = False) -> bool:
        entry = self._entries.get(id(part))
        if entry is None:
            return False
        found = entry[0]()
        # (a part collected in a cycle has lost its weak references when its __del__ runs; its id is
        # still its own then, as it is not freed yet)
        return found is part or (dying and found is None)
