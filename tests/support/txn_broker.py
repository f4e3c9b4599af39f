"""A real Pulsar standalone broker with the transaction coordinator on, and the admin helpers of
transaction tests: the coordinators' state, and moving a coordinator mid-transaction.

What standalone 4.0.7 needs for transactions: ``transactionCoordinatorEnabled=true`` (off in the
run's shared broker, see below) and the system topics on (``systemTopicEnabled``, true by default:
each namespace's transaction buffer keeps its snapshots in ``__transaction_buffer_snapshot``).
``PulsarStandaloneStarter`` itself creates the namespace ``pulsar/system`` and, with the coordinator
on, the partitioned topic ``persistent://pulsar/system/transaction_coordinator_assign`` (one
partition: one coordinator, id 0). Nothing else: but a coordinator is loaded only when a client
connects to it (TC_CLIENT_CONNECT_REQUEST on the broker owning partition ``N`` of that topic), so
before that ``GET /admin/v3/transactions/coordinatorStats`` answers 500 "Transaction coordinator not
found". ``TxnPulsarBroker`` is ready when every coordinator answers ``Ready``: its readiness check
looks each partition up and sends that request itself (stdlib sockets, a few hand-written protobuf
bytes), so the first client's first transaction does not pay for the coordinator's recovery.

Why a broker of its own rather than the coordinator on the run's shared broker: with it on, every
topic the broker loads gets a transaction buffer (a reader on its namespace's snapshot topic) and
the namespaces grow system topics (``__transaction_buffer_snapshot``, ``__change_events``) that the
non-transaction tests never expect; and its start (ready with the coordinator loaded) is a few
seconds longer. Only the transaction tests pay for it, once per run (tests/support/shared_broker.py
serves it to every worker the way it serves the shared broker).

Moving a coordinator: ``unload_coordinator(broker, tc_id)`` unloads partition ``tc_id`` of the assign
topic (the admin API's special case for it: the broker closes that coordinator's metadata store; a
client's next request to it fails with TransactionCoordinatorNotFound and the client connects to it
again, which loads it again from its log). ``TxnPulsarBroker.stop(keep_data=True)`` then ``start()``
restarts the whole broker on the same ports and data (no --wipe-data).
"""
from __future__ import annotations

import http.client
import socket
import struct
import time
import urllib.parse
from typing import Any, Callable, Mapping, Optional, Sequence

from .pulsar_broker import DEFAULT_JVM_ARGS, DEFAULT_START_TIMEOUT, PulsarAdminError, PulsarBroker
from .shared_broker import SharedPulsarBroker

__all__ = [
    "COORDINATOR_ASSIGN",
    "TXN_CONFIG",
    "CoordinatorAdmin",
    "SharedTxnPulsarBroker",
    "TxnPulsarBroker",
    "connect_coordinator",
    "unload_coordinator",
]

#: the partitioned topic whose partition N's owner runs the transaction coordinator N
COORDINATOR_ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"
_ASSIGN_PATH = "/admin/v2/persistent/pulsar/system/transaction_coordinator_assign"

#: broker.conf entries of a broker with transactions (on top of PulsarBroker's defaults, which already
#: have acknowledgmentAtBatchIndexLevelEnabled=true)
TXN_CONFIG: Mapping[str, str] = {
    "transactionCoordinatorEnabled": "true",
    "systemTopicEnabled": "true",  # (the 4.0.7 default, written out: transactions need it)
}

#: the name the shared_broker service and its run-dir files use for the run's transaction broker
SHARED_NAME = "pulsar-txn"

_CONNECT_TIMEOUT = 5.0


# --------------------------------------------------------------------------- the binary protocol bits

def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field_uint(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _field_bytes(number: int, value: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _frame(kind: int, body: bytes) -> bytes:
    # BaseCommand {type = 1; <sub-command> = its type's number}, behind totalSize and commandSize
    command = _field_uint(1, kind) + _field_bytes(kind, body)
    return struct.pack(">II", len(command) + 4, len(command)) + command


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _fields(data: bytes) -> dict[int, Any]:
    """The varint and length-delimited fields of a protobuf message (the last of repeated ones)."""
    out: dict[int, Any] = {}
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            out[number], pos = _read_varint(data, pos)
        elif wire_type == 2:
            length, pos = _read_varint(data, pos)
            out[number] = data[pos:pos + length]
            pos += length
        else:
            raise ValueError("unexpected protobuf wire type %d" % wire_type)
    return out


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def _read_command(sock: socket.socket) -> dict[int, Any]:
    total = struct.unpack(">I", _recv_exactly(sock, 4))[0]
    frame = _recv_exactly(sock, total)
    size = struct.unpack(">I", frame[:4])[0]
    return _fields(frame[4:4 + size])


_CONNECT, _CONNECTED, _ERROR = 2, 3, 14
_TC_CLIENT_CONNECT_REQUEST, _TC_CLIENT_CONNECT_RESPONSE = 62, 63


def connect_coordinator(host: str, port: int, tc_id: int, timeout: float = _CONNECT_TIMEOUT) -> Optional[str]:
    """Send TC_CLIENT_CONNECT_REQUEST for coordinator ``tc_id`` to the broker at host:port, which loads
    that coordinator if it owns it. Returns None when it answered without error, else its error text."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        # CommandConnect {client_version = 1; protocol_version = 4}
        sock.sendall(_frame(_CONNECT, _field_bytes(1, b"nsqfast-tests") + _field_uint(4, 20)))
        answer = _read_command(sock)
        if answer.get(1) != _CONNECTED:
            return "CONNECT answered with command type %s" % answer.get(1)
        # CommandTcClientConnectRequest {request_id = 1; tc_id = 2}
        sock.sendall(_frame(_TC_CLIENT_CONNECT_REQUEST, _field_uint(1, 1) + _field_uint(2, tc_id)))
        answer = _read_command(sock)
        if answer.get(1) != _TC_CLIENT_CONNECT_RESPONSE:
            return "TC_CLIENT_CONNECT_REQUEST answered with command type %s" % answer.get(1)
        # CommandTcClientConnectResponse {request_id = 1; error = 2; message = 3}
        response = _fields(answer[_TC_CLIENT_CONNECT_RESPONSE])
        if 2 in response:
            return "error %s: %s" % (response[2], response.get(3, b"").decode("utf-8", "replace"))
        return None


# --------------------------------------------------------------------------- admin helpers


class CoordinatorAdmin:
    """The transaction coordinators of a broker, through its admin API (mixed into the broker classes:
    needs ``admin()`` and ``web_url``)."""

    # (PulsarBroker's; annotations only, so that they do not hide the broker class's own)
    admin: Callable[..., Any]
    web_url: str

    def coordinator_count(self) -> int:
        """How many coordinators the broker has: the assign topic's partitions (0: it has none yet)."""
        try:
            return int(self.admin("GET", _ASSIGN_PATH + "/partitions")["partitions"])
        except PulsarAdminError as exc:
            if exc.status == 404:
                return 0
            raise

    @staticmethod
    def coordinator_topic(tc_id: int) -> str:
        """``persistent://pulsar/system/transaction_coordinator_assign-partition-<tc_id>``."""
        return "%s-partition-%d" % (COORDINATOR_ASSIGN, tc_id)

    def coordinator_stats(self) -> dict[int, dict]:
        """``{tc_id: {"state": "Ready", "ongoingTxnSize": ..., ...}}`` of the loaded coordinators
        (PulsarAdminError 500 when one of them is not loaded)."""
        stats = self.admin("GET", "/admin/v3/transactions/coordinatorStats") or {}
        return {int(k): v for k, v in stats.items()}

    def transaction_metadata(self, most_bits: int, least_bits: int) -> dict:
        """The coordinator's record of one transaction (status, produced partitions, acked subscriptions);
        PulsarAdminError 404 once it has ended (a transaction's record goes when it is committed or aborted).
        The broker asks each produced partition's transaction buffer too: where that topic is not loaded
        (after a restart) the call waits 10 s and fails with 500; load it first (``topic_stats``, a consumer)."""
        return self.admin("GET", "/admin/v3/transactions/transactionMetadata/%d/%d" % (most_bits, least_bits))

    def owner_address(self, tc_id: int) -> tuple[str, int]:
        """Look partition ``tc_id`` of the assign topic up (the broker then owns it): its broker's host, port."""
        topic = urllib.parse.quote(self.coordinator_topic(tc_id)[len("persistent://"):])
        answer = self.admin("GET", "/lookup/v2/topic/persistent/" + topic)
        url = urllib.parse.urlsplit(answer["brokerUrl"])
        return str(url.hostname), int(url.port or 6650)

    def load_coordinators(self) -> bool:
        """Make every coordinator load (look it up, then connect to it as a client does) and say whether
        each answers ``Ready`` now. Errors on the way (a broker still starting) count as not ready."""
        try:
            count = self.coordinator_count()
            if count == 0:
                return False
            try:
                stats = self.coordinator_stats()
            except PulsarAdminError as exc:
                if exc.status not in (404, 500):  # 500: "Transaction coordinator not found! coordinator id : N"
                    raise
                stats = {}
            missing = [i for i in range(count) if stats.get(i, {}).get("state") != "Ready"]
            for tc_id in missing:
                host, port = self.owner_address(tc_id)
                if connect_coordinator(host, port, tc_id) is not None:
                    return False
            if missing:
                stats = self.coordinator_stats()
            return all(stats.get(i, {}).get("state") == "Ready" for i in range(count))
        except (OSError, http.client.HTTPException, PulsarAdminError, ValueError, KeyError):
            return False

    def wait_coordinators_ready(self, timeout: float = 60.0) -> None:
        """Wait until every coordinator is loaded and ``Ready`` (loading it if need be); AssertionError
        after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while not self.load_coordinators():
            if time.monotonic() >= deadline:
                raise AssertionError("the transaction coordinators of %s were not Ready within %g s"
                                     % (self.web_url, timeout))
            time.sleep(0.1)

    def unload_coordinator(self, tc_id: Optional[int] = None) -> list[int]:
        """Unload coordinator ``tc_id`` (every one when None) through the admin API; returns the ids
        unloaded. The broker closes its metadata store: until a client connects to it again it is not
        loaded (a client's request to it fails with TransactionCoordinatorNotFound, which makes the
        client reconnect; ``wait_coordinators_ready()`` loads it at once)."""
        ids = list(range(self.coordinator_count())) if tc_id is None else [tc_id]
        for i in ids:
            self.admin("PUT", "%s-partition-%d/unload" % (_ASSIGN_PATH, i))
        return ids


def unload_coordinator(broker: CoordinatorAdmin, tc_id: Optional[int] = None) -> list[int]:
    """``broker.unload_coordinator(tc_id)``: unload a transaction coordinator (all of them when None)."""
    return broker.unload_coordinator(tc_id)


# --------------------------------------------------------------------------- the brokers


class TxnPulsarBroker(CoordinatorAdmin, PulsarBroker):
    """A PulsarBroker with transactions: the coordinator on, ready once every coordinator is Ready.

    ``TxnPulsarBroker(config=None, ...)``: ``config`` entries override TXN_CONFIG and PulsarBroker's
    defaults. ``stop(keep_data=True)`` (or ``kill(keep_data=True)``) then ``start()`` restarts it on the
    same ports and data: the coordinator recovers its open transactions from its log.
    """

    binary_name = "pulsar-standalone-txn"
    ready_check = "its admin API lists public/default and every transaction coordinator answers Ready"

    def __init__(
        self,
        config: Optional[Mapping[str, Any]] = None,
        jvm_args: Sequence[str] = DEFAULT_JVM_ARGS,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        lib_dir: Optional[str] = None,
        admin_headers: Optional[Mapping[str, str]] = None,
        started_by_lasting_thread: bool = False,
    ):
        merged = dict(TXN_CONFIG)
        merged.update({str(k): str(v) for k, v in (config or {}).items()})
        super().__init__(merged, jvm_args, start_timeout, lib_dir, admin_headers, started_by_lasting_thread)

    def _ready(self) -> bool:
        return super()._ready() and self.load_coordinators()


class SharedTxnPulsarBroker(CoordinatorAdmin, SharedPulsarBroker):
    """A handle on the run's shared transaction broker: its addresses, admin API and coordinator helpers,
    not its process (a test that restarts a broker uses ``private_txn_broker``)."""

    def __repr__(self) -> str:
        return f"<SharedTxnPulsarBroker {self.service_url} web={self.web_url}>"

