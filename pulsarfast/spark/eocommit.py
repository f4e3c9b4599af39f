"""The driver side of the exactly-once sink (``deliveryGuarantee=exactly-once``):
each task leaves its rows in an open transaction (``eolog.TaskTxn`` in its commit
message); here the driver ends them all, at once.

A batch job (``commit_job`` / ``abort_job``) commits every task's transaction, or
aborts them all. A streaming micro-batch (``commit_micro_batch``) goes through the
query's records in the log topic (``eolog``), so that Spark running the batch again
after a driver crash puts it in the output once:

- the query's last record is for another batch (or there is none): a fresh commit:
  ``committing`` with the transactions (stored by the broker), every END_TXN at
  once, then ``committed``;
- it is this batch's ``committed``: an earlier attempt committed it, and Spark did
  not record that before the crash: this attempt's transactions are aborted;
- it is this batch's ``committing``: the earlier attempt is rolled forward (each of
  its transactions committed again: those still open commit now; for those that
  ended, the admin API tells whether they were aborted). All of them committed:
  as above, this attempt is aborted. None visible (each aborted by its timeout):
  this attempt is committed as a fresh one. Some of each: ``ExactlyOnceError``.

``abort_micro_batch`` (Spark's abort, also called when a commit raised) aborts
the attempt's transactions, unless the log says that their commit had begun: then
it rolls them forward. ``prepare_partitions`` runs before the tasks write (see
there). Nothing here imports pyspark.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

from pulsarfast.base.results import InvalidTxnStatusError, PulsarException, TransactionNotFound
from pulsarfast.client import Client
from pulsarfast.spark.admin import Admin
from pulsarfast.spark.eolog import COMMITTED, COMMITTING, ExactlyOnceLog, LogRecord, TaskTxn

logger = logging.getLogger(__name__)

#: END_TXNs in flight at once
MAX_PARALLEL = 64
#: a micro-batch whose earliest transaction is this close to its timeout is aborted, not committed
#: (committing it could see the coordinator abort some of its transactions in the middle)
DEADLINE_MARGIN_MS = 2000
#: how long the roll-forward of one transaction waits while its coordinator is ending it
SETTLE_TIMEOUT_S = 60.0


class ExactlyOnceError(PulsarException):
    """The exactly-once sink could not commit a batch or micro-batch whole (the message says what
    the output holds)."""


def _ids(txns: Sequence[TaskTxn]) -> str:
    return ", ".join(str(t) for t in txns) or "none"


def end_all(client: Client, txns: Sequence[TaskTxn], commit: bool) -> list[tuple[TaskTxn, BaseException]]:
    """Commit (or abort) every transaction, the END_TXNs all in flight at once; the ones that
    failed, with their error."""
    if not txns:
        return []

    def end(txn: TaskTxn) -> None:
        handle = client.transaction(txn.id)
        if commit:
            handle.commit()
        else:
            handle.abort()

    with ThreadPoolExecutor(max_workers=min(len(txns), MAX_PARALLEL), thread_name_prefix="pulsar-end-txn") as pool:
        futures = [(txn, pool.submit(end, txn)) for txn in txns]
    return [(txn, error) for txn, future in futures if (error := future.exception()) is not None]


def abort_quietly(client: Client, txns: Sequence[TaskTxn], why: str) -> None:
    """Abort every transaction, logging (not raising) the ones that could not be aborted (those
    that ended already, or time out anyway)."""
    for txn, error in end_all(client, txns, commit=False):
        if not isinstance(error, TransactionNotFound):
            logger.warning("pulsar sink: abort of transaction %s (%s) failed: %s", txn, why, error)


def settle(client: Client, admin: Admin, txn: TaskTxn, timeout_s: float = SETTLE_TIMEOUT_S) -> bool:
    """Roll one transaction of an earlier attempt forward: True when it is (now) committed, False
    when it was aborted. Committed again: Ok means it was still open; TransactionNotFound means it
    ended, and the transaction buffer of a partition it wrote to says whether it was aborted; while
    its coordinator is ending it (InvalidTxnStatus), again after a pause."""
    deadline = time.monotonic() + timeout_s
    pause = 0.05
    while True:
        try:
            client.transaction(txn.id).commit()
            return True
        except TransactionNotFound:
            if not txn.partitions:
                return True  # (it wrote nothing: nothing to see either way)
            return not admin.transaction_aborted(txn.partitions[0], txn.most_bits, txn.least_bits)
        except InvalidTxnStatusError as exc:
            if time.monotonic() >= deadline:
                raise ExactlyOnceError("pulsar sink (exactly-once): transaction %s was still being ended by its "
                                       "coordinator after %.0f s: %s" % (txn, timeout_s, exc)) from exc
            time.sleep(pause)
            pause = min(pause * 2, 1.0)


def settle_all(client: Client, admin: Admin, txns: Sequence[TaskTxn]) -> tuple[list[TaskTxn], list[TaskTxn]]:
    """Roll every transaction forward at once: (those committed, those aborted)."""
    if not txns:
        return [], []
    with ThreadPoolExecutor(max_workers=min(len(txns), MAX_PARALLEL), thread_name_prefix="pulsar-settle") as pool:
        outcomes = list(pool.map(lambda t: settle(client, admin, t), txns))
    return ([t for t, ok in zip(txns, outcomes) if ok], [t for t, ok in zip(txns, outcomes) if not ok])


def prepare_partitions(client: Client, admin: Admin | None, topic: str) -> list[str]:
    """Have each partition of topic whose transaction buffer has no snapshot yet take its first one,
    one partition at a time, before the tasks write to them all at once; returns those partitions.

    A partition's transaction buffer takes its first snapshot before it stores its first
    transactional message. On brokers without the fix of apache/pulsar#24945 (4.0.7 among them),
    two producers whose first transactional messages reach a partition together leave it refusing
    every transactional message from then on (ServiceUnitNotReady: "Transaction Buffer take first
    snapshot failed"; until the topic is unloaded): the sink's tasks are such producers. One message
    sent to each such partition in a transaction that is then aborted (no reader ever gets it) makes
    the snapshot. Without the admin API every partition is taken to need it."""
    partitions = client.get_topic_partitions(topic)
    if admin is not None:
        partitions = [p for p in partitions
                      if not (admin.transaction_buffer_stats(p) or {}).get("lastSnapshotTimestamps")]
    if not partitions:
        return []
    txn = client.new_transaction()
    try:
        for partition in partitions:
            producer = client.create_producer(partition, batching_enabled=False)
            try:
                producer.send(b"", transaction=txn)
            finally:
                producer.close()
    finally:
        txn.abort()
    return partitions


# -- batch jobs -------------------------------------------------------------------------------------


def commit_job(client: Client, txns: Sequence[TaskTxn]) -> None:
    """Commit every task's transaction of a batch job."""
    failed = end_all(client, txns, commit=True)
    if failed:
        raise ExactlyOnceError("pulsar sink (exactly-once): %d of %d transactions of the job did not commit (%s); "
                               "the other %d did, so the output holds part of the job" % (
                                   len(failed), len(txns), "; ".join("%s: %s" % f for f in failed),
                                   len(txns) - len(failed)))


def abort_job(client: Client, txns: Sequence[TaskTxn]) -> None:
    """Abort every task's transaction of a failed batch job."""
    abort_quietly(client, txns, "job aborted")


# -- micro-batches ----------------------------------------------------------------------------------


def _record(query: str, batch: int, state: str, txns: Sequence[TaskTxn]) -> LogRecord:
    return LogRecord(query, batch, state, tuple(txns), min((t.deadline_ms for t in txns), default=0))


def commit_micro_batch(client: Client, admin: Callable[[], Admin], log: ExactlyOnceLog, query: str, batch: int,
                       txns: Sequence[TaskTxn]) -> str:
    """Commit micro-batch ``batch`` of ``query`` (its tasks' transactions txns) exactly once, as
    the module says; returns what was done (for the log)."""
    last = log.last(query)
    if last is not None and last.batch == batch:
        committed: list[TaskTxn]
        aborted: list[TaskTxn]
        if last.state == COMMITTED:
            committed, aborted = list(last.txns), []
        else:
            committed, aborted = settle_all(client, admin(), last.txns)
        if not aborted:
            abort_quietly(client, txns, "micro-batch %d was committed by an earlier attempt" % batch)
            if last.state != COMMITTED:
                log.append(_record(query, batch, COMMITTED, last.txns))
            return ("micro-batch %d was committed by an earlier attempt (transactions %s): this attempt's %d "
                    "aborted" % (batch, _ids(last.txns), len(txns)))
        if committed:
            abort_quietly(client, txns, "micro-batch %d is half committed" % batch)
            raise ExactlyOnceError(
                "pulsar sink (exactly-once): micro-batch %d of query %s is half committed by an earlier attempt: "
                "transactions %s committed and %s were aborted (the driver stopped between their END_TXNs and "
                "stayed down past transactionTimeoutMs); the output holds part of that batch. Log topic %s"
                % (batch, query, _ids(committed), _ids(aborted), log.topic))
        logger.info("pulsar sink: micro-batch %d: the earlier attempt's transactions %s were aborted (timed out): "
                    "committing this attempt's", batch, _ids(aborted))
    if not txns:
        return "micro-batch %d wrote nothing" % batch
    now_ms = int(time.time() * 1000)
    earliest = min(t.deadline_ms for t in txns)
    if now_ms >= earliest - DEADLINE_MARGIN_MS:
        abort_quietly(client, txns, "too close to its timeout")
        raise ExactlyOnceError(
            "pulsar sink (exactly-once): micro-batch %d reached its commit %d ms before the timeout of its first "
            "transaction (transactionTimeoutMs counts from each task's start): its transactions were aborted, "
            "nothing of it is in the output; raise transactionTimeoutMs above a micro-batch's duration"
            % (batch, earliest - now_ms))
    log.append(_record(query, batch, COMMITTING, txns))
    failed = end_all(client, txns, commit=True)
    if failed:  # (once more, as a restarted driver would: each ends committed, or aborted by its coordinator)
        _, aborted = settle_all(client, admin(), [t for t, _ in failed])
        if aborted:
            raise ExactlyOnceError(
                "pulsar sink (exactly-once): transactions %s of micro-batch %d were aborted by their coordinator "
                "while the driver committed it (%s); the others committed, so the output holds part of the batch"
                % (_ids(aborted), batch, "; ".join("%s: %s" % f for f in failed)))
    log.append(_record(query, batch, COMMITTED, txns))
    return "micro-batch %d: %d transactions committed" % (batch, len(txns))


def abort_micro_batch(client: Client, admin: Callable[[], Admin], log: ExactlyOnceLog, query: str, batch: int,
                      txns: Sequence[TaskTxn]) -> str:
    """Spark's abort of micro-batch ``batch``: abort its transactions, unless the log says their
    commit had begun (Spark aborts after a commit that raised): then roll them forward."""
    if not txns:
        return "micro-batch %d aborted: no transactions" % batch
    last = log.last(query)
    ours = {t.id for t in txns}
    if last is not None and last.batch == batch and last.state == COMMITTING and ours & {t.id for t in last.txns}:
        try:
            committed, aborted = settle_all(client, admin(), last.txns)
        except PulsarException as exc:
            logger.warning("pulsar sink: micro-batch %d: rolling its commit forward failed (%s); a restart does it",
                           batch, exc)
            return "micro-batch %d: commit begun, roll-forward left to a restart" % batch
        return "micro-batch %d: its commit had begun: rolled forward (%d committed, %d aborted)" % (
            batch, len(committed), len(aborted))
    abort_quietly(client, txns, "micro-batch %d aborted" % batch)
    return "micro-batch %d aborted: %d transactions" % (batch, len(txns))
