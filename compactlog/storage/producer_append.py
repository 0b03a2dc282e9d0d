"""What an append does to producer state, checked before a byte is written: Kafka's
``UnifiedLog.analyzeAndValidateProducerState`` and ``updateProducers``, with
``ProducerAppendInfo.append(batch)`` (``apply_batch_to_producer``).

An append is validated in full first (``analyze``: epochs, sequences, transaction state, for every
batch of the request) and applied only once every batch passed (``apply``). Within one request a
batch is checked against the state the batches before it will leave, which is not applied yet:
``pending`` maps each producer id to its entry as those batches leave it (``entry_after``), so a
two-batch request is judged exactly as two requests of one batch would be.

Transactional batches from a client (or a coordinator writing offsets in a transaction) are held
to KIP-890's verification when the caller asks for it with a ``verification_guard``
(``check_transactional_batch``): a batch that does not continue the producer's open transaction
in the partition needs the guard its verification was started with; without one, nothing is
required (verification disabled, tools, tests, the loader).
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field

from ..errors import InvalidProducerEpochError, InvalidTxnStateError
from ..record.control import ABORT, COMMIT, parse_control_key, parse_marker_value
from ..record.layout import MAGIC_V2
from ..record.types import LOG_APPEND_TIME
from .producer_state import (CLIENT, COORDINATOR, SENTINEL, BatchMetadata, CompletedTxn, ProducerAppendInfo,
                             ProducerStateEntry, ProducerStateManager, VerificationGuard)
from .txn_index import AbortedTxn, TransactionIndex


class Pending(dict):
    """producer id -> its entry as the batches already validated in this request leave it; and
    the producers whose verification one of those batches already consumed (a plain dict serves
    where no verification is in flight)."""

    def __init__(self):
        super().__init__()
        self.verification_consumed: set[int] = set()


@dataclass
class ProducerUpdates:
    """The producer-state changes of an append: one ProducerAppendInfo per producer id and the
    transactions its markers complete."""
    infos: dict[int, ProducerAppendInfo] = field(default_factory=dict)
    completed: list[CompletedTxn] = field(default_factory=list)


def apply_batch_to_producer(info: ProducerAppendInfo, b, transaction_version: int = 0) -> CompletedTxn | None:
    """Replay one v2 batch into a ProducerAppendInfo (data batch or transaction marker); the
    transaction a marker completes, if any. ``transaction_version`` 2: a marker of a TV2
    transaction, which must carry an epoch above the producer's (KIP-1228)."""
    h = b.header
    if h.is_control:
        if h.records_count == 0:
            return None
        # the first record's key, value and timestamp straight from the batch's columns (what
        # ``records()[0]`` holds, without building every record: a marker is one)
        cols = b.columns()
        data = cols.data
        kp, kl = int(cols.key_pos[0]), int(cols.key_len[0])
        key = parse_control_key(bytes(data[kp:kp + kl]) if kl >= 0 else None)
        if key.type not in (ABORT, COMMIT):
            return None
        vp, vl = int(cols.val_pos[0]), int(cols.val_len[0])
        coordinator_epoch = parse_marker_value(bytes(data[vp:vp + vl]) if vl >= 0 else None)
        timestamp = (h.max_timestamp if h.timestamp_type == LOG_APPEND_TIME
                     else h.base_timestamp + int(cols.ts_delta[0]))
        return info.append_end_txn_marker(key.type == COMMIT, h.producer_epoch, coordinator_epoch,
                                          h.base_offset, timestamp, transaction_version)
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


def check_transactional_batch(state: ProducerStateManager, info: ProducerAppendInfo, header,
                              verification_guard: VerificationGuard | None) -> None:
    """UnifiedLog.analyzeAndValidateProducerState for a transactional batch that does not continue
    its producer's open transaction (of the same epoch): a stale epoch is fenced (47) before
    anything else, then, when verification is required, the batch must carry the guard of the
    verification in flight (a marker or another transactional append since consumed it, or none
    was started: INVALID_TXN_STATE)."""
    entry = info.updated
    if entry.current_txn_first_offset is not None and entry.producer_epoch == header.producer_epoch:
        return
    if header.producer_epoch < entry.producer_epoch:
        raise InvalidProducerEpochError(
            f"{state.partition}: epoch {header.producer_epoch} of producer {header.producer_id} is smaller "
            f"than the last seen epoch {entry.producer_epoch}")
    if verification_guard is None:
        return
    in_flight = info.verification
    if verification_guard is SENTINEL or in_flight is None or in_flight.guard is not verification_guard:
        raise InvalidTxnStateError(
            f"{state.partition}: the transactional batch of producer {header.producer_id} (epoch "
            f"{header.producer_epoch}) is not part of an ongoing transaction: it was not verified "
            f"with the transaction coordinator, or the transaction ended meanwhile")


def analyze(state: ProducerStateManager, batches, origin: str, pending: Pending | None = None, *,
            verification_guard: VerificationGuard | None = None, transaction_version: int = 0,
            record: bool = True) -> ProducerUpdates:
    """The producer-state changes of ``batches``, validated and not applied (raises the error of
    the first rule broken). With ``pending``, each producer is checked against its pending entry
    when it has one, and its entry after these batches is recorded there, unless ``record`` is
    False (the request's last batch: nothing after it asks). ``verification_guard``:
    transactional data batches of a client or coordinator must be verified with it
    (``check_transactional_batch``); None requires nothing."""
    updates = ProducerUpdates()
    for b in batches:
        if b.magic != MAGIC_V2 or b.producer_id < 0:
            continue
        h = b.header
        pid = h.producer_id
        info = updates.infos.get(pid)
        if info is None:
            earlier = pending.get(pid) if pending is not None else None
            if earlier is None:
                info = state.prepare_update(pid, origin)
            else:
                consumed = pid in getattr(pending, "verification_consumed", ())
                info = ProducerAppendInfo(state.partition, pid, earlier, origin,
                                          None if consumed else state.verification_entry(pid))
            updates.infos[pid] = info
        if h.is_transactional and not h.is_control and origin in (CLIENT, COORDINATOR):
            check_transactional_batch(state, info, h, verification_guard)
        done = apply_batch_to_producer(info, b, transaction_version)
        if done is not None:
            updates.completed.append(done)
    if pending is not None and record:
        for pid, info in updates.infos.items():
            pending[pid] = entry_after(info)
            if info.consumes_verification and isinstance(pending, Pending):
                pending.verification_consumed.add(pid)
    return updates


def analyze_marker(state: ProducerStateManager, producer_id: int, producer_epoch: int, commit: bool,
                   coordinator_epoch: int, offset: int, timestamp: int, transaction_version: int = 0) -> ProducerUpdates:
    """``analyze`` of the one COMMIT/ABORT marker the broker encodes itself (``Log.append_control``),
    from the fields it was encoded with rather than read back from its record; the same checks
    and the same changes (a marker is a COORDINATOR append, never verified)."""
    updates = ProducerUpdates()
    if producer_id < 0:
        return updates
    info = state.prepare_update(producer_id, COORDINATOR)
    updates.infos[producer_id] = info
    done = info.append_end_txn_marker(commit, producer_epoch, coordinator_epoch, offset, timestamp,
                                      transaction_version)
    if done is not None:
        updates.completed.append(done)
    return updates


def aborted_entries(state: ProducerStateManager, updates: ProducerUpdates) -> list[AbortedTxn]:
    """The ``.txnindex`` entries the aborted transactions of ``updates`` add, each with the last
    stable offset right after it, as ``apply`` would leave the state at that point; computed
    before anything is applied, so that the file can be written first and a failed write leaves
    the producer state untouched."""
    if not any(txn.is_aborted for txn in updates.completed):
        return []           # every append but an abort marker's: no copy of the open transactions
    ongoing = dict(state.ongoing_txns)
    for info in updates.infos.values():
        for first in info.started_txn_first_offsets:
            ongoing[first] = info.producer_id
    out = []
    for txn in updates.completed:
        if txn.is_aborted:
            lso = next((first for first in sorted(ongoing) if ongoing[first] != txn.producer_id),
                       txn.last_offset + 1)
            out.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
        ongoing.pop(txn.first_offset, None)
    return out


def apply(state: ProducerStateManager, updates: ProducerUpdates) -> None:
    """Apply validated changes, in memory (their ``.txnindex`` entries are written already)."""
    for info in updates.infos.values():
        state.update(info)
    for txn in updates.completed:
        state.complete_txn(txn)
