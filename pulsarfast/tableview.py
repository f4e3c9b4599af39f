"""``TableView`` (the official ``pulsar.tableview.TableView``, also
``pulsar.TableView``): what ``Client.create_table_view`` returns, the latest
value of each key of a topic, decoded with the table view's schema.

It wraps a ``rawtable.RawTableView`` (the values as bytes, the reader that
keeps them, the listeners; see rawtable.py for what a table view does with
tombstones, messages without a key and listeners that raise) and decodes:
``get(key)`` (None for a key it does not hold), ``for_each(callback)``,
``for_each_and_listen(callback)``, each callback called as
``callback(key, value)``. ``len()`` is the number of keys; ``str()`` names
the topic as given, and the subscription when one was.
"""
from __future__ import annotations

from typing import Any, Callable

from pulsarfast.consuming.rawtable import RawTableView
from pulsarfast.schema.schema import Schema

__all__ = ["TableView"]

#: callback(key, value): a for_each callback, or a listener
Callback = Callable[[str, Any], None]


class TableView:
    """``TableView(table_view, topic, subscription, schema)``: made by ``Client.create_table_view``."""

    def __init__(self, table_view: RawTableView, topic: str, subscription: str | None, schema: Schema) -> None:
        self.table_view = table_view
        self.topic = topic
        self.subscription = subscription
        self.schema = schema

    def _decoding(self, callback: Callback) -> Callable[[str, bytes], None]:
        decode = self.schema.decode

        def call(key: str, value: bytes) -> None:
            callback(key, decode(value))
        return call

    def get(self, key: str) -> Any | None:
        """The value of key, decoded; None when the table view does not hold the key."""
        found, value = self.table_view.get(key)
        return self.schema.decode(value) if found else None

    def for_each(self, callback: Callback) -> None:
        """callback(key, value) for each key the table view holds now."""
        self.table_view.for_each(self._decoding(callback))

    def for_each_and_listen(self, callback: Callback) -> None:
        """callback(key, value) for each key held now, then for each later message with a key
        (a tombstone's value: the schema's decoding of b"")."""
        self.table_view.for_each_and_listen(self._decoding(callback))

    def close(self) -> None:
        """Close the table view's reader (what it holds stays readable)."""
        self.table_view.close()

    def __len__(self) -> int:
        return self.table_view.size()

    def __str__(self) -> str:
        if self.subscription is None:
            return "TableView(topic=%s)" % self.topic
        return "TableView(topic=%s, subscription=%s)" % (self.topic, self.subscription)

    def __repr__(self) -> str:
        return str(self)
