"""Kafka's retain rules for one cleaning round, as pure functions (log-cleaner.md §10.2-10.4).

Every execution path (in-task map, distributed map, explain) decides with these.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

import numpy as np


class BatchRetention(Enum):
    DELETE = "delete"              # drop without reading records
    RETAIN_EMPTY = "retain_empty"  # keep, as an empty header if no record survives
    DELETE_EMPTY = "delete_empty"  # drop if no record survives


class BatchDecision(NamedTuple):
    retention: BatchRetention
    discard_records: bool
    marker_for_empty_txn: bool
    reason: str   # why the batch is kept empty or deleted: "producer-state", "last-of-round", ...


def decide_batch(*, is_control: bool, can_discard: bool, has_delete_horizon: bool,
                 delete_horizon_ms: int | None, producer_id: int, producer_epoch: int,
                 last_offset: int, next_offset: int, active_producers: dict, upper_bound: int,
                 now_ms: int) -> BatchDecision:
    """checkBatchRetention: R1 (producer's last batch), R2 (last batch of the round), aborted data."""
    if is_control:
        discard_records = can_discard and has_delete_horizon and delete_horizon_ms <= now_ms
    else:
        discard_records = can_discard
    last_of_producer = False
    if producer_id >= 0:
        active = active_producers.get(producer_id)
        if active is not None:
            last_data_offset, epoch = active
            if last_data_offset is not None:
                last_of_producer = last_offset == last_data_offset
            else:
                last_of_producer = is_control and producer_epoch == epoch
    if producer_id >= 0 and last_of_producer:
        return BatchDecision(BatchRetention.RETAIN_EMPTY, discard_records, can_discard and is_control,
                             "producer-state")
    if next_offset == upper_bound:
        return BatchDecision(BatchRetention.RETAIN_EMPTY, discard_records, can_discard and is_control,
                             "last-of-round")
    if discard_records:
        return BatchDecision(BatchRetention.DELETE, True, can_discard and is_control,
                             "marker" if is_control else "aborted")
    return BatchDecision(BatchRetention.DELETE_EMPTY, False, can_discard and is_control, "")


def retain_deletes(*, magic: int, has_delete_horizon: bool, delete_horizon_ms: int | None,
                   now_ms: int, legacy_retain: bool) -> bool:
    """Whether tombstones of this batch are still kept (KIP-534 horizon; mtime rule for v0/v1)."""
    if magic >= 2:
        return (not has_delete_horizon) or now_ms < delete_horizon_ms
    return legacy_retain


# reasons a record is not retained, for explain
KEPT, SUPERSEDED, TOMBSTONE_EXPIRED, KEYLESS, DISCARDED_BATCH = 0, 1, 2, 3, 4


def record_fates(offsets: np.ndarray, has_key: np.ndarray, has_value: np.ndarray,
                 mapped_offsets: np.ndarray, latest_offset: int, retain_deletes_: bool,
                 exact: bool = False) -> np.ndarray:
    """shouldRetainRecord for a data batch's records: KEPT or the reason it goes (K1-K4).

    ``exact``: the map of a version strategy (cleaner/strategy.py) answers each key's winning
    offset, and every other record of the key is superseded, a later offset too."""
    beyond = offsets > latest_offset                           # K1
    if exact:
        latest = (mapped_offsets < 0) | (offsets == mapped_offsets)
    else:
        latest = offsets >= mapped_offsets                     # K3 (absent keys map to -1)
    fates = np.full(offsets.shape[0], KEPT, dtype=np.int8)
    if not retain_deletes_:
        fates[~has_value] = TOMBSTONE_EXPIRED
    fates[~latest] = SUPERSEDED
    fates[~has_key] = KEYLESS
    fates[beyond] = KEPT
    return fates


def needs_delete_horizon(*, magic: int, has_delete_horizon: bool, kept_tombstone: bool,
                         marker_for_empty_txn: bool) -> bool:
    return magic >= 2 and (kept_tombstone or marker_for_empty_txn) and not has_delete_horizon
