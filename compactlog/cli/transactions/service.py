"""What each ``transactions`` subcommand does, as Kafka's ``TransactionsCommand`` does it, over a
backend (``backends``: a broker, or a data dir) that answers with plain data.

* ``list``: every broker's ListTransactions, one row per transactional id.
* ``describe``: DescribeTransactions of one id, with its duration so far.
* ``describe-producers``: DescribeProducers of one partition.
* ``abort``: the producer whose open transaction starts at ``--start-offset`` (DescribeProducers),
  then an ABORT marker for it with its producer id and epoch and the coordinator epoch the
  partition last saw (0 when it saw none, as Kafka's tool conservatively takes: no coordinator
  epoch is smaller).
* ``find-hanging``: Kafka's rule. Candidates are the partitions' open transactions whose producer
  last wrote more than ``--max-transaction-timeout`` minutes ago (no transaction may legally
  stay open that long); a candidate hangs when no transactional id has its producer id
  (ListTransactions filtered by producer id), when that id is unknown (DescribeTransactions), or
  when the id's transaction does not hold the partition (the coordinator will never write its
  marker there).

Tables are Kafka's ``prettyPrintTable``: each column padded to its widest value and followed by a
tab, the header first. Failures are one line naming what failed, as Kafka's messages do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ...errors import CompactlogError

MAX_BATCH_SIZE = 500        # partitions per DescribeProducers, topics per describe (Kafka's batches)
MINUTE_MS = 60_000

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions")
PRODUCER_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                    "CurrentTransactionStartOffset")
HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)")


# -- what backends answer ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Listing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class Description:
    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_ms: int                 # -1: no transaction started
    partitions: tuple             # ((topic, partition), ...)


@dataclass(frozen=True)
class Producer:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int        # -1: none seen
    txn_start_offset: int         # -1: no open transaction


class RequestError(CompactlogError):
    """A request the broker (or the data dir) answered with a Kafka error: its name and what it says."""

    def __init__(self, error_name: str, detail: str = ""):
        super().__init__(f"{error_name}: {detail}" if detail else error_name)
        self.error_name = error_name


class TransactionalIdNotFound(RequestError):
    def __init__(self, detail: str = ""):
        super().__init__("TRANSACTIONAL_ID_NOT_FOUND", detail)


def _tp(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"          # Kafka's TopicPartition.toString


# -- the table ---------------------------------------------------------------------------------------

def table(headers: Iterable[str], rows: list[list[str]]) -> list[str]:
    """Kafka's prettyPrintTable: every cell padded to its column's width and followed by a tab."""
    headers = list(headers)
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return ["".join(cell.ljust(w) + "\t" for cell, w in zip(row, widths)) for row in [headers, *rows]]


# -- the subcommands ------------------------------------------------------------------------------------

def list_transactions(backend) -> list[str]:
    try:
        by_broker = backend.list_transactions()
    except RequestError as e:
        raise CompactlogError(f"Failed to list transactions: {e}") from None
    rows = [[t.transactional_id, str(broker), str(t.producer_id), t.state]
            for broker, listings in by_broker.items() for t in listings]
    return table(LIST_HEADERS, rows)


def describe(backend, transactional_id: str, now_ms: int) -> list[str]:
    try:
        d = backend.describe(transactional_id)
    except RequestError as e:
        raise CompactlogError(f"Failed to describe transaction state of transactional-id "
                              f"`{transactional_id}`: {e}") from None
    started = str(d.start_ms) if d.start_ms >= 0 else "None"
    duration = str(now_ms - d.start_ms) if d.start_ms >= 0 else "None"
    row = [str(d.coordinator_id), transactional_id, str(d.producer_id), str(d.producer_epoch), d.state,
           str(d.timeout_ms), started, duration, ",".join(_tp(t, p) for t, p in sorted(d.partitions))]
    return table(DESCRIBE_HEADERS, [row])


def describe_producers(backend, topic: str, partition: int, broker_id: int | None) -> list[str]:
    try:
        producers = backend.describe_producers([(topic, partition)], broker_id)[(topic, partition)]
    except RequestError as e:
        where = f"broker {broker_id}" if broker_id is not None else "leader"
        raise CompactlogError(f"Failed to describe producers for partition {_tp(topic, partition)} on {where}: "
                              f"{e}") from None
    rows = [[str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch), str(p.last_sequence),
             str(p.last_timestamp), str(p.txn_start_offset) if p.txn_start_offset >= 0 else "None"]
            for p in producers]
    return table(PRODUCER_HEADERS, rows)


@dataclass(frozen=True)
class AbortSpec:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def __str__(self) -> str:                  # Kafka's AbortTransactionSpec.toString
        return (f"AbortTransactionSpec(topicPartition={_tp(self.topic, self.partition)}, producerId="
                f"{self.producer_id}, producerEpoch={self.producer_epoch}, coordinatorEpoch={self.coordinator_epoch})")


def abort_spec(backend, topic: str, partition: int, start_offset: int) -> AbortSpec:
    """The producer whose open transaction starts at ``start_offset`` (AbortTransactionCommand.buildAbortSpec)."""
    try:
        producers = backend.describe_producers([(topic, partition)], None)[(topic, partition)]
    except RequestError as e:
        raise CompactlogError(f"Failed to validate producer state for partition {_tp(topic, partition)}: "
                              f"{e}") from None
    found = next((p for p in producers if p.txn_start_offset >= 0 and p.txn_start_offset == start_offset), None)
    if found is None:
        raise CompactlogError(f"Could not find any open transactions starting at offset {start_offset} on "
                              f"partition {_tp(topic, partition)}")
    # a producer that never saw a marker here reports -1; 0 is no larger than any real epoch
    return AbortSpec(topic, partition, found.producer_id, found.producer_epoch, max(found.coordinator_epoch, 0))


def abort(backend, topic: str, partition: int, start_offset: int) -> AbortSpec:
    spec = abort_spec(backend, topic, partition, start_offset)
    try:
        backend.abort(spec.topic, spec.partition, spec.producer_id, spec.producer_epoch, spec.coordinator_epoch)
    except RequestError as e:
        raise CompactlogError(f"Failed to abort transaction {spec}: {e}") from None
    return spec


@dataclass(frozen=True)
class OpenTransaction:
    topic: str
    partition: int
    producer: Producer


def find_hanging(backend, *, broker_id: int | None, topic: str | None, partition: int | None,
                 max_timeout_ms: int, now_ms: int) -> list[str]:
    """FindHangingTransactionsCommand: the hanging transactions of the partitions searched."""
    hanging = hanging_transactions(backend, broker_id=broker_id, topic=topic, partition=partition,
                                   max_timeout_ms=max_timeout_ms, now_ms=now_ms)
    rows = [[h.topic, str(h.partition), str(h.producer.producer_id), str(h.producer.producer_epoch),
             str(h.producer.coordinator_epoch), str(h.producer.txn_start_offset), str(h.producer.last_timestamp),
             str((now_ms - h.producer.last_timestamp) // MINUTE_MS)] for h in hanging]
    return table(HANGING_HEADERS, rows)


def hanging_transactions(backend, *, broker_id: int | None, topic: str | None, partition: int | None,
                         max_timeout_ms: int, now_ms: int) -> list[OpenTransaction]:
    tps = _partitions_to_search(backend, broker_id, topic, partition)
    candidates = _candidates(backend, broker_id, tps, max_timeout_ms, now_ms)
    if not candidates:
        return []
    by_producer: dict[int, list[OpenTransaction]] = {}
    for c in candidates:
        by_producer.setdefault(c.producer.producer_id, []).append(c)
    try:
        ids = {t.producer_id: t.transactional_id
               for listings in backend.list_transactions(sorted(by_producer)).values() for t in listings
               if t.producer_id in by_producer}
    except RequestError as e:
        raise CompactlogError(f"Failed to list transactions for {len(by_producer)} producers: {e}") from None
    descriptions = _describe_all(backend, sorted(set(ids.values())))
    out = []
    for pid, opens in by_producer.items():
        d = descriptions.get(ids.get(pid))
        if d is None:
            out += opens            # no id, or its coordinator does not know it: nothing will end it
        else:
            # partitions still to get a marker from the coordinator are in its description
            out += [o for o in opens if (o.topic, o.partition) not in set(d.partitions)]
    return out


def _partitions_to_search(backend, broker_id, topic, partition) -> list[tuple[str, int]]:
    if topic is not None and partition is not None:
        return [(topic, partition)]
    topics = [topic] if topic is not None else _listed_topics(backend)
    out = []
    for i in range(0, len(topics), MAX_BATCH_SIZE):
        batch = topics[i:i + MAX_BATCH_SIZE]
        try:
            out += backend.topic_partitions(batch, broker_id)
        except RequestError as e:
            raise CompactlogError(f"Failed to describe {len(batch)} topics: {e}") from None
    return out


def _listed_topics(backend) -> list[str]:
    try:
        return backend.topics()
    except RequestError as e:
        raise CompactlogError(f"Failed to list topics: {e}") from None


def _candidates(backend, broker_id, tps, max_timeout_ms: int, now_ms: int) -> list[OpenTransaction]:
    """Open transactions whose producer has been silent longer than any transaction may last."""
    out = []
    for i in range(0, len(tps), MAX_BATCH_SIZE):
        batch = tps[i:i + MAX_BATCH_SIZE]
        try:
            found = backend.describe_producers(batch, broker_id)
        except RequestError as e:
            raise CompactlogError(f"Failed to describe producers for {len(batch)} partitions on broker "
                                  f"{broker_id if broker_id is not None else '(leaders)'}: {e}") from None
        for (t, p) in batch:
            out += [OpenTransaction(t, p, pr) for pr in found.get((t, p), ())
                    if pr.txn_start_offset >= 0 and now_ms - pr.last_timestamp > max_timeout_ms]
    return out


def _describe_all(backend, transactional_ids: list[str]) -> dict[str, Description]:
    """Each id's description; an id the coordinator does not know is left out."""
    out = {}
    for tid in transactional_ids:
        try:
            out[tid] = backend.describe(tid)
        except TransactionalIdNotFound:
            continue
        except RequestError as e:
            raise CompactlogError(f"Failed to describe {len(transactional_ids)} transactions: {e}") from None
    return out

