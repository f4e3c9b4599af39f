"""``RawTableView``: the latest value of each key of a topic, kept by a
reader (the official extension's ``_pulsar.TableView``, whose values are
bytes; ``tableview.TableView`` decodes them with its schema).

The reader (``Client.open_table_view``) reads the whole topic, every
partition, from the earliest message with ``is_read_compacted=True``.
``start()`` applies what the topic holds, until ``has_message_available()``
is false, before the table view is handed out; then a task of the client's
backend follows the topic and calls the listeners registered with
``for_each_and_listen``, in the order of the messages.

A message with a key sets the key to its payload; an empty payload (a
tombstone) removes the key. Listeners hear of every message with a key,
tombstones too (with ``b""``), as the official ones do. A message without a
key changes nothing and is not heard of. A listener that raises is logged,
and the others are called; a callback that raises while ``for_each`` or the
first part of ``for_each_and_listen`` goes over the table reaches the
caller (and is then not registered). A listener runs on the following task,
holding the table view's delivery lock: it may read the table view (``get``,
``size``, ``for_each``) and close it, but not call ``for_each_and_listen``.

``close()`` closes the reader (the table keeps what it holds) and waits for
the following task; a second ``close()``, or one of a table view made
empty (``RawTableView()``), raises ``ConsumerNotInitialized``, as there.
Closing the client closes the reader too, and ``close()`` is then still
allowed once. The following task waits on the reader's consumer (which does
not keep the client alive) and holds the table view only while it applies a
message: a client dropped without ``close()``, with its table views, is
collected, and the task ends within ``FOLLOW_WAIT_MS``.
"""
from __future__ import annotations

import logging
import weakref
from typing import Any, Callable

from msgengine.runtime import Backend, from_any_thread, get_backend

from pulsarfast.base.parts import HandedOut
from pulsarfast.base.results import ConsumerNotInitialized, PulsarException, Timeout
from pulsarfast.consuming.consumer import Consumer
from pulsarfast.consuming.reader import Reader
from pulsarfast.wire.message import Message

logger = logging.getLogger(__name__)

#: how long the following task waits for a message before it looks whether the table view is still wanted
FOLLOW_WAIT_MS = 1000
#: how long close() waits for the following task (a listener's call under way finishes)
TASK_END_SECONDS = 5.0
#: how long start() waits for the first message it knows is there, before it asks the broker again
CATCH_UP_WAIT_MS = 1000

#: action(key, value): a for_each callback, or a listener
TableAction = Callable[[str, bytes], None]


def _incompatible(method: str, value: Any) -> TypeError:
    return TypeError("%s(): incompatible function arguments: %r is not of the type it takes" % (method, value))


def _key(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if not isinstance(value, str):
        raise _incompatible("get", value)
    return value


def _action(method: str, value: Any) -> TableAction:
    if not callable(value):
        raise _incompatible(method, value)
    return value


class RawTableView(HandedOut):
    """A topic's keys and their latest values (bytes); see the module docstring."""

    def __init__(self, reader: Reader | None = None) -> None:
        self._reader = reader
        self.backend: Backend = reader.backend if reader is not None else get_backend("threads")
        self._data: dict[str, bytes] = {}
        self._listeners: list[TableAction] = []
        #: held while a message is applied and its listeners called, and while for_each_and_listen
        #: goes over the table and registers its listener: each listener hears of every change once, in order
        self._delivering = self.backend.mutex()
        self._follower: Any = None
        self._follower_id: int | None = None
        #: close() was called (the client's close closes the reader only)
        self.closed = reader is None

    # -- starting and following (Client.open_table_view) -------------------------------------

    def start(self) -> None:
        """Apply what the topic holds now, then follow it on a task of its own."""
        reader = self._reader
        assert reader is not None
        while reader.has_message_available():
            wait = CATCH_UP_WAIT_MS
            while True:  # (what has arrived, without asking the broker after each message)
                try:
                    message = reader.read_next(wait)
                except Timeout:
                    break
                self.apply(message)
                wait = 0
        # (the task waits on the reader's consumer, which does not keep the client alive, as the reader does)
        self._follower = self.backend.spawn(_follow, weakref.ref(self), reader.consumer)

    def following(self) -> None:
        """The following task started (close() from a listener, on that task, does not wait for it)."""
        self._follower_id = self.backend.current_task_id()

    def stopped(self, error: PulsarException) -> None:
        """The following task ends: the reader was closed (by close(), or by the client's close)."""
        if not self.closed and self._reader is not None:
            logger.info("[%s] the table view stops following the topic: %s", self._reader.topic(), error)

    def apply(self, message: Message) -> None:
        """A message read: a key set or removed, and the listeners called (see the module docstring)."""
        if not message.has_partition_key():
            return
        key = message.partition_key()
        value = message.data()
        with self._delivering:
            if value:
                self._data[key] = value
            else:
                self._data.pop(key, None)
            for listener in list(self._listeners):
                try:
                    listener(key, value)
                except Exception:
                    logger.exception("a table view listener raised (key %r)", key)

    def join(self, timeout: float) -> None:
        """Wait, at most timeout, for the following task to end (unless called on it: a listener's)."""
        task = self._follower
        if task is not None and self._follower_id != self.backend.current_task_id():
            task.join(timeout)

    # -- the extension's API --------------------------------------------------------------------

    def get(self, key: str) -> tuple[bool, bytes]:
        """(True, value) for a key the table holds, else (False, b"")."""
        value = self._data.get(_key(key))
        return (False, b"") if value is None else (True, value)

    def size(self) -> int:
        return len(self._data)

    def for_each(self, action: TableAction) -> None:
        """action(key, value) for each key the table holds now."""
        _action("for_each", action)
        for key, value in list(self._data.items()):
            action(key, value)

    @from_any_thread()
    def for_each_and_listen(self, action: TableAction) -> None:
        """for_each(action), then action(key, value) for each later message with a key."""
        _action("for_each_and_listen", action)
        with self._delivering:
            for key, value in list(self._data.items()):
                action(key, value)
            self._listeners.append(action)

    @from_any_thread()
    def close(self) -> None:
        """Close the reader and wait for the following task (see the module docstring)."""
        if self.closed or self._reader is None:
            raise ConsumerNotInitialized("the table view is closed")
        self.closed = True
        self._reader.close()
        self.join(TASK_END_SECONDS)


def _follow(ref: "weakref.ref[RawTableView]", messages: Consumer) -> None:
    """The following task: each message of the reader's consumer applied to the table view, until the
    consumer is closed or the table view is gone (looked at after each message, and at least every
    FOLLOW_WAIT_MS: the task holds the table view only while it applies a message)."""
    table = ref()
    if table is None:
        return
    table.following()
    del table
    while True:
        message: Message | None = None
        error: PulsarException | None = None
        try:
            message = messages.receive(FOLLOW_WAIT_MS)
        except Timeout:
            pass
        except PulsarException as exc:
            error = exc
        table = ref()
        if table is None:
            return
        if error is not None:
            table.stopped(error)
            return
        if message is not None:
            table.apply(message)
        del table
