"""Chunked messages: a message larger than the broker's max message size, split by its producer
into chunks, each its own SEND (and its own entry on the broker), put back together by consumers.

Producing (``chunk_frames``, with ``chunking_enabled=True`` and batching off): the payload (after
compression; an encrypting producer's then encrypts each piece on its own, as the official ones do) is
cut into pieces that fit the broker's limit with their metadata; each piece's
frame carries the message's metadata, its sequence id, and the chunk fields the official clients
write: ``uuid`` (the producer's name, "-", the sequence id), ``num_chunks_from_msg``,
``total_chunk_msg_size`` (the whole payload's size) and ``chunk_id`` (0, 1, ...).

Consuming (``ChunkAssembler``, one per partition consumer, on its connection's reading task):
chunks are gathered per uuid, so the chunks of messages of several producers may be interleaved;
a message is handed out whole when its last chunk arrived, its chunks having come in order. At
most ``max_pending_chunked_message`` incomplete messages are kept: a new one makes room by
dropping the oldest, whose chunks are acknowledged when
``auto_ack_oldest_chunked_message_on_queue_full``, else left unacknowledged for the broker to
deliver again (as the official client does). A chunk that does not continue its message (its
first chunk was not seen, or one is missing) drops what was gathered of it, unacknowledged. An
incomplete message whose first chunk came ``expire_time_of_incomplete_chunked_message_ms`` ago
(60 s by default, as the C++ and Java clients') is dropped and its chunks acknowledged, as theirs
are: its producer is not going to finish it.

The whole message's id (``ChunkedMessageId``) is its last chunk's entry, as the official
client's is, and knows every chunk's entry: acknowledging it acknowledges each, and a negative
acknowledgement asks for each again.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Callable

from pulsarfast.wire import proto
from pulsarfast.wire.codec import encode_send_frame
from pulsarfast.wire.message import MessageId

logger = logging.getLogger(__name__)

#: room left in each chunk's frame for the chunk fields, whose varints vary by a few bytes
_CHUNK_FIELDS_SLACK = 32

Entry = tuple[int, int]


def chunk_frames(producer_id: int, sequence_id: int, name: bytes, publish_time: int, payload: bytes,
                 metadata_args: tuple, max_size: int,
                 seal: Callable[[bytes], tuple[bytes, bytes]] | None = None) -> list[bytes]:
    """The SEND frames of a payload larger than max_size: one per chunk, in order, each frame's
    metadata and payload within max_size (the broker's limit). With seal (an encrypting producer's
    ``encrypt``: piece -> (ciphertext, metadata fields)), each chunk is encrypted on its own and
    carries its own encryption fields, as the official producers write them;
    ``total_chunk_msg_size`` stays the size before encryption."""
    pairs, key, event_time, extra = metadata_args
    if pairs is not None and not isinstance(pairs, (list, tuple)):
        pairs = list(pairs.items() if isinstance(pairs, dict) else pairs)  # (encoded once per chunk)
    uuid = "%s-%d" % (name.decode("utf-8"), sequence_id)
    total = len(payload)
    probe = proto.chunk_metadata(uuid, 1, total, 0)
    grows = 0
    if seal is not None:  # (the encryption fields' size is the same for every chunk; the tag adds to each)
        sealed_empty, fields = seal(b"")
        probe += fields
        grows = len(sealed_empty)
    overhead = len(encode_send_frame(producer_id, sequence_id, name, publish_time, b"", pairs, key, event_time,
                                     extra + probe))
    size = max_size - overhead - grows - _CHUNK_FIELDS_SLACK
    if size <= 0:
        raise ValueError("the message's metadata (%d bytes) leaves no room for a chunk within %d bytes"
                         % (overhead, max_size))
    count = (total + size - 1) // size
    view = memoryview(payload)
    frames = []
    for i in range(count):
        piece: Any = view[i * size:(i + 1) * size]
        fields = b""
        if seal is not None:
            piece, fields = seal(bytes(piece))
        frames.append(encode_send_frame(producer_id, sequence_id, name, publish_time, piece, pairs, key, event_time,
                                        extra + fields + proto.chunk_metadata(uuid, count, total, i)))
    return frames


class ChunkedMessageId(MessageId):
    """A chunked message's id: its last chunk's entry, and the entries of all its chunks."""

    __slots__ = ("chunk_entries",)

    def __init__(self, partition: int, ledger_id: int, entry_id: int, topic: str | None,
                 chunk_entries: list[Entry]) -> None:
        super().__init__(partition, ledger_id, entry_id, -1, 0, topic)
        #: (ledger, entry) of every chunk, in order (the last is this id's)
        self.chunk_entries = chunk_entries


class _Partial:
    __slots__ = ("num_chunks", "total_size", "parts", "entries", "due")

    def __init__(self, num_chunks: int, total_size: int, due: float) -> None:
        self.num_chunks = num_chunks
        self.total_size = total_size
        self.parts: list[bytes] = []
        self.entries: list[Entry] = []
        #: when (monotonic seconds) it expires if still incomplete
        self.due = due


class ChunkAssembler:
    """The incomplete chunked messages of one partition consumer, oldest first.

    ``acknowledge(entries)`` is called with the chunks' entries of an incomplete message given up
    on: dropped to make room (when ``auto_ack_oldest``), or expired. An incomplete message whose
    first chunk came ``expire_seconds`` ago is dropped and its chunks acknowledged, as the official
    clients do (their producer will not finish it); the check runs on a timer of ``backend``
    (``call_later``/``spawn``) while one is pending. ``add`` runs on the partition's reading task
    and the expiry on a task of its own, so the pending messages are under a lock, never held
    while acknowledging (which may send)."""

    def __init__(self, topic: str, max_pending: int, auto_ack_oldest: bool,
                 acknowledge: Callable[[list[Entry]], None], expire_seconds: float = 60.0,
                 backend: Any = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._topic = topic
        self._max_pending = max_pending  # (0 or less: no bound)
        self._auto_ack = auto_ack_oldest
        self._acknowledge = acknowledge
        self._expire_seconds = expire_seconds
        self._backend = backend  # (None: no timer; expire() is called by whoever owns the assembler)
        self._clock = clock
        self._lock = threading.Lock()  # (never held across a switch: gevent's greenlets share it safely)
        self._pending: collections.OrderedDict[str, _Partial] = collections.OrderedDict()
        self._timer: Any = None
        self._closed = False

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, metadata: Any, payload: bytes, entry: Entry) -> tuple[bytes, list[Entry]] | None:
        """One chunk (metadata: the decoded MessageMetadata): the whole payload and every chunk's
        entry when it completes its message, else None."""
        given_up: list[list[Entry]] = []
        with self._lock:
            whole = self._add(metadata, payload, entry, given_up)
            arm = self._pending and self._timer is None and self._backend is not None and not self._closed
            if arm:
                self._timer = True  # (armed below, outside the lock)
        for entries in given_up:
            self._acknowledge(entries)
        if arm:
            self._arm()
        return whole

    def _add(self, metadata: Any, payload: bytes, entry: Entry,
             given_up: list[list[Entry]]) -> tuple[bytes, list[Entry]] | None:
        uuid: str = metadata.uuid
        count: int = metadata.num_chunks_from_msg
        chunk_id: int = metadata.chunk_id
        pending = self._pending
        if count < 1 or not 0 <= chunk_id < count:
            logger.error("[%s] chunk %d of %d of message %r at %d:%d: not a valid chunk; dropped",
                         self._topic, chunk_id, count, uuid, *entry)
            return None
        if chunk_id == 0:
            if pending.pop(uuid, None) is None:  # (else: delivered again from its start)
                if 0 < self._max_pending <= len(pending):
                    self._drop_oldest(given_up)
            partial = pending[uuid] = _Partial(count, metadata.total_chunk_msg_size,
                                               self._clock() + self._expire_seconds)
        else:
            found = pending.get(uuid)
            if found is None or len(found.parts) != chunk_id or found.num_chunks != count:
                if found is not None and chunk_id < len(found.parts) and entry in found.entries:
                    return None  # (the same entry again)
                logger.warning("[%s] chunk %d of message %r at %d:%d does not continue what arrived of it; "
                               "the message is dropped unacknowledged", self._topic, chunk_id, uuid, *entry)
                pending.pop(uuid, None)
                return None
            partial = found
        partial.parts.append(payload)
        partial.entries.append(entry)
        if len(partial.parts) < count:
            return None
        del pending[uuid]
        whole = b"".join(partial.parts)
        if len(whole) != partial.total_size:
            logger.error("[%s] chunked message %r: %d bytes arrived, its chunks said %d; dropped unacknowledged",
                         self._topic, uuid, len(whole), partial.total_size)
            return None
        return whole, partial.entries

    def _drop_oldest(self, given_up: list[list[Entry]]) -> None:
        uuid, partial = self._pending.popitem(last=False)
        if self._auto_ack:
            logger.warning("[%s] more than %d incomplete chunked messages: the oldest (%r) is dropped and "
                           "acknowledged", self._topic, self._max_pending, uuid)
            given_up.append(partial.entries)
        else:
            logger.warning("[%s] more than %d incomplete chunked messages: the oldest (%r) is dropped, "
                           "unacknowledged", self._topic, self._max_pending, uuid)

    def expire(self) -> float | None:
        """Drop and acknowledge the incomplete messages that are due; the seconds until the next
        one is (None: none pending)."""
        given_up: list[list[Entry]] = []
        with self._lock:
            now = self._clock()
            pending = self._pending
            while pending:
                uuid, partial = next(iter(pending.items()))  # (the oldest first: the first due)
                if partial.due > now:
                    break
                del pending[uuid]
                logger.warning("[%s] chunked message %r still has %d of its %d chunks missing after %.0f s: "
                               "dropped, and its chunks acknowledged", self._topic, uuid,
                               partial.num_chunks - len(partial.parts), partial.num_chunks, self._expire_seconds)
                given_up.append(partial.entries)
            wait = next(iter(pending.values())).due - now if pending else None
        for entries in given_up:
            self._acknowledge(entries)
        return wait

    def _arm(self, wait: float | None = None) -> None:
        if wait is None:
            with self._lock:
                wait = next(iter(self._pending.values())).due - self._clock() if self._pending else 0.0
        timer = self._backend.call_later(max(0.0, wait), self._due)
        with self._lock:
            if self._closed:
                timer.cancel()
            else:
                self._timer = timer

    def _due(self) -> None:  # (a timer callback must not block: the work goes in a task)
        self._backend.spawn(self._expire_and_rearm)

    def _expire_and_rearm(self) -> None:
        try:
            wait = self.expire()
        except Exception:  # (an acknowledgement that could not go: the broker redelivers)
            logger.exception("[%s] expiring incomplete chunked messages", self._topic)
            wait = None
        with self._lock:
            rearm = wait is not None and not self._closed
            self._timer = True if rearm else None
        if rearm:
            self._arm(wait)

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()

    def close(self) -> None:
        """No more expiry (the consumer closed)."""
        with self._lock:
            self._closed = True
            self._pending.clear()
            timer, self._timer = self._timer, None
        if timer is not None and timer is not True:
            timer.cancel()


__all__ = ["chunk_frames", "ChunkedMessageId", "ChunkAssembler"]
