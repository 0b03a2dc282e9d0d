"""What an append does to producer state, checked before a byte is written: Kafka's
``UnifiedLog.analyzeAndValidateProducerState`` and ``updateProducers``, with
``ProducerAppendInfo.append(batch)`` (``apply_batch_to_producer``).

An append is validated in full first (``analyze``: epochs, sequences, transaction state, for every
batch of the request) and applied only once every batch passed (``apply``). Within one request a
batch is checked against the state the batches before it will leave, which is not applied yet:
``pending`` maps each producer id to its entry as those batches leave it (``entry_after``), so a
two-batch request is judged exactly as two requests of one batch would be.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field

from ..record.control import ABORT, COMMIT, parse_control_key, parse_marker_value
from ..record.layout import MAGIC_V2
from .producer_state import (BatchMetadata, CompletedTxn, ProducerAppendInfo, ProducerStateEntry,
                             ProducerStateManager)
from .txn_index import AbortedTxn, TransactionIndex

# producer id -> its entry as the batches already validated in this request leave it
Pending = dict[int, ProducerStateEntry]


@dataclass
class ProducerUpdates:
    """The producer-state changes of an append: one ProducerAppendInfo per producer id and the
    transactions its markers complete."""
    infos: dict[int, ProducerAppendInfo] = field(default_factory=dict)
    completed: list[CompletedTxn] = field(default_factory=list)


def apply_batch_to_producer(info: ProducerAppendInfo, b) -> CompletedTxn | None:
    """Replay one v2 batch into a ProducerAppendInfo (data batch or transaction marker); the
    transaction a marker completes, if any."""
    h = b.header
    if h.is_control:
        if h.records_count == 0:
            return None
        rec = b.records()[0]
        key = parse_control_key(rec.key)
        if key.type not in (ABORT, COMMIT):
            return None
        coordinator_epoch = parse_marker_value(rec.value)
        return info.append_end_txn_marker(key.type == COMMIT, h.producer_epoch, coordinator_epoch,
                                          h.base_offset, rec.timestamp)
    info.append_data_batch(h.producer_epoch, h.base_sequence, h.last_sequence, h.max_timestamp,
                           h.base_offset, h.last_offset, h.is_transactional)
    return None


def find_duplicate(state: ProducerStateManager, header, pending: Pending | None = None) -> BatchMetadata | None:
    """The batch already written (or validated earlier in this request) that ``header`` repeats."""
    entry = (pending or {}).get(header.producer_id) or state.producers.get(header.producer_id)
    if entry is None:
        return None
    return entry.find_duplicate(header.producer_epoch, header.base_sequence, header.last_sequence)


def entry_after(info: ProducerAppendInfo) -> ProducerStateEntry:
    """The producer's entry as ``ProducerStateManager.update(info)`` will leave it, made without
    touching the manager."""
    entry = dataclasses.replace(info.current, batches=deque(info.current.batches))
    entry.update_from(info.updated)
    return entry


def analyze(state: ProducerStateManager, batches, origin: str, pending: Pending | None = None) -> ProducerUpdates:
    """The producer-state changes of ``batches``, validated and not applied (raises the error of
    the first rule broken). With ``pending``, each producer is checked against its pending entry
    when it has one, and its entry after these batches is recorded there."""
    updates = ProducerUpdates()
    for b in batches:
        if b.magic != MAGIC_V2 or b.producer_id < 0:
            continue
        pid = b.header.producer_id
        info = updates.infos.get(pid)
        if info is None:
            earlier = pending.get(pid) if pending is not None else None
            info = (state.prepare_update(pid, origin) if earlier is None
                    else ProducerAppendInfo(state.partition, pid, earlier, origin))
            updates.infos[pid] = info
        done = apply_batch_to_producer(info, b)
        if done is not None:
            updates.completed.append(done)
    if pending is not None:
        for pid, info in updates.infos.items():
            pending[pid] = entry_after(info)
    return updates


def apply(state: ProducerStateManager, updates: ProducerUpdates, txn_index: TransactionIndex) -> None:
    """Apply validated changes; an aborted transaction is indexed in ``txn_index`` (the segment
    its marker went to) with the last stable offset right after it."""
    for info in updates.infos.values():
        state.update(info)
    for txn in updates.completed:
        if txn.is_aborted:
            lso = state.last_stable_offset_after(txn)
            txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
        state.complete_txn(txn)
