"""``__transaction_state`` as the coordinator uses it: Kafka's ``TransactionStateManager`` partition
formula, topic configs and loading (``loadTransactionsForTxnTopicPartition``), and
``TransactionLog`` (a transition's record), over the codec in ``record/transaction_log.py``.

Loading replays a partition from its log start to its end: each record replaces its id's
metadata, a tombstone removes it (transactions.md §4.4). A key of an unknown version is skipped
with a warning, as Kafka does. Anything else that does not read (an unknown value version or state,
a null key, a Dead or PrepareEpochFence state, a non-Empty value without partitions) refuses the
whole partition (``StateLogError``): Kafka would log it and keep what it read before that record;
compactlog rather serves none of the partition's ids than forget a later decision (spec §4.2).
"""

from __future__ import annotations

import functools
import logging

from ...record import consumer_offsets as R
from ...record import transaction_log as TL
from .metadata import COMPLETED, PREPARED, TransactionMetadata, TxnState, TxnTransit

TRANSACTION_STATE_TOPIC = "__transaction_state"

log = logging.getLogger("kafka.coordinator.transaction.TransactionStateManager")


class StateLogError(Exception):
    """A ``__transaction_state`` record the coordinator cannot load (its offset named)."""


@functools.lru_cache(maxsize=65536)
def partition_for(transactional_id: str, num_partitions: int) -> int:
    """TransactionStateManager.partitionFor: ``Utils.abs(String.hashCode) % partitions``, the
    formula groups use for ``__consumer_offsets``. Cached: a transaction asks it several times,
    and Java's string hash in Python is a loop over the id's characters."""
    return R.partition_for(transactional_id, num_partitions)


@functools.lru_cache(maxsize=65536)
def key_bytes(transactional_id: str) -> bytes:
    """TransactionLog.keyToBytes: an id's key, the same bytes for every record of it (three
    records a transaction)."""
    return TL.encode_key(transactional_id)


def topic_configs(broker) -> dict[str, str]:
    """TransactionStateManager.transactionTopicConfigs: compacted, uncompressed, the broker's
    segment size and min ISR (1 on one node), no unclean election."""
    return {"cleanup.policy": "compact", "compression.type": "uncompressed",
            "segment.bytes": str(broker.get("transaction.state.log.segment.bytes")),
            "min.insync.replicas": str(broker.get("transaction.state.log.min.isr")),
            "unclean.leader.election.enable": "false"}


def value_version(transaction_version: int) -> int:
    """TransactionVersion.transactionLogValueVersion: v1 (flexible) from level 1 on."""
    return 1 if transaction_version >= 1 else 0


# the sections of a value that a producer repeats every transaction (its partitions, its
# tagged fields), by what decides them; a transaction's three records only change the header's
# state and epoch and the timestamps around them (issue 28)
VALUE_SECTIONS_KEPT = 1024
_SECTIONS: dict = {}


def value_bytes(transit: TxnTransit, transaction_version: int) -> bytes:
    """TransactionLog.valueToBytes. Tag 2 (client transaction version) when not 0; tags 0 and 1
    (previous and next producer id) when they say something (a previous id other than the current
    one, a next id at all: KAFKA-20310 persists them so that a retry after a restart is not
    fenced); tag 3 (KIP-939's next producer epoch) never."""
    version = value_version(transaction_version)
    prev = transit.prev_producer_id if transit.prev_producer_id != transit.producer_id else -1
    empty = transit.state == TxnState.EMPTY            # no partition list at all (null)
    partitions = transit.partitions
    if partitions.__class__ is not frozenset:          # a key must be hashable
        partitions = frozenset(partitions)
    key = (version, empty, partitions, prev, transit.next_producer_id, transit.client_tv)
    sections = _SECTIONS.get(key)
    if sections is None:
        partitions = TL.partitions_section(transit.sorted_partitions(), version == 1)
        tagged = TL.tagged_section(prev, transit.next_producer_id, transit.client_tv) if version == 1 else b""
        if len(_SECTIONS) >= VALUE_SECTIONS_KEPT:
            _SECTIONS.clear()
        sections = _SECTIONS[key] = (partitions, tagged)
    return TL.assemble_value(version, transit.producer_id, transit.producer_epoch, transit.txn_timeout_ms,
                             int(transit.state), sections[0], transit.last_update_ms, transit.txn_start_ms,
                             sections[1])


def transit_of(value: TL.TransactionLogValue, where: str) -> TxnTransit:
    """The state a stored value describes (TransactionLog.readTxnRecordValue); the last producer
    epoch is not stored and comes back as -1."""
    try:
        state = TxnState(value.transaction_status)
    except ValueError:
        raise StateLogError(f"{where}: unknown transaction state {value.transaction_status}") from None
    if state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
        raise StateLogError(f"{where}: state {state.display} is never written to the log")
    if value.partitions is None and state != TxnState.EMPTY:
        raise StateLogError(f"{where}: a {state.display} value without its partition list")
    parts = frozenset() if state == TxnState.EMPTY else \
        frozenset((t, p) for t, ids in value.partitions for p in ids)
    return TxnTransit(value.producer_id, value.previous_producer_id, value.next_producer_id,
                      value.producer_epoch, -1, value.transaction_timeout_ms, state, parts,
                      value.start_timestamp_ms, value.last_update_timestamp_ms, value.client_transaction_version)


def replay(lg) -> tuple[dict[str, TransactionMetadata], int]:
    """Every id's latest state in the partition log ``lg``, and the records read."""
    txns: dict[str, TransactionMetadata] = {}
    n = 0
    for b in lg.batches(lg.log_start_offset, lg.log_end_offset):
        if b.is_control:
            continue                    # no coordinator writes markers here; an admin's would be no state
        for r in b.records():
            where = f"{lg.name} offset {r.offset}"
            if r.key is None:
                raise StateLogError(f"{where}: a record without a key")
            try:
                tid = TL.read_key(r.key)
                if tid is None:
                    log.warning(f"{where}: unknown transaction log key version, record skipped")
                    continue
                if r.value is None:
                    txns.pop(tid, None)
                else:
                    txns[tid] = TransactionMetadata.from_transit(tid, transit_of(TL.read_value(r.value), where))
            except TL.TransactionLogError as e:
                raise StateLogError(f"{where}: {e}") from None
            n += 1
    return txns, n


def describe_loaded(txns: dict[str, TransactionMetadata]) -> str:
    """A one-line account of a loaded partition for the log."""
    prepared = sum(1 for m in txns.values() if m.state in PREPARED)
    done = sum(1 for m in txns.values() if m.state in COMPLETED)
    return f"{len(txns)} transactional id(s), {prepared} with markers to write, {done} complete"
