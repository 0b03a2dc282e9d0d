"""What a cleaning round knows about transactions (Kafka's CleanedTransactionMetadata).

Aborted transactions come from the ``.txnindex`` files; a data batch of a producer with an aborted
transaction in progress is discardable; a marker is discardable once no batch of its transaction
was read in this round (so data and marker disappear in different rounds).
"""

from __future__ import annotations

import heapq

from ..record.control import ABORT, COMMIT
from ..storage.txn_index import AbortedTxn


class _AbortedInProgress:
    __slots__ = ("txn", "last_observed_batch_offset")

    def __init__(self, txn: AbortedTxn):
        self.txn = txn
        self.last_observed_batch_offset: int | None = None


class CleanedTransactionState:
    def __init__(self):
        self.ongoing_committed: set[int] = set()
        self.ongoing_aborted: dict[int, _AbortedInProgress] = {}
        self._heap: list[tuple[int, int, AbortedTxn]] = []
        self._seq = 0
        self.cleaned_index: list[AbortedTxn] | None = None   # entries kept for the cleaned segment

    def add_aborted(self, txns) -> None:
        for t in txns:
            heapq.heappush(self._heap, (t.first_offset, self._seq, t))
            self._seq += 1

    def _consume_up_to(self, offset: int) -> None:
        heap = self._heap
        while heap and heap[0][0] <= offset:
            _, _, txn = heapq.heappop(heap)
            if txn.producer_id not in self.ongoing_aborted:
                self.ongoing_aborted[txn.producer_id] = _AbortedInProgress(txn)

    def on_data_batch(self, last_offset: int, producer_id: int, transactional: bool) -> bool:
        """True when the batch belongs to an aborted transaction (discardable)."""
        self._consume_up_to(last_offset)
        if transactional:
            aborted = self.ongoing_aborted.get(producer_id)
            if aborted is not None:
                aborted.last_observed_batch_offset = last_offset
                return True
            self.ongoing_committed.add(producer_id)
        return False

    def on_control_batch(self, last_offset: int, producer_id: int, control_type: int | None) -> bool:
        """True when the marker may be discarded; ``control_type`` None for an emptied control batch."""
        self._consume_up_to(last_offset)
        if control_type is None:
            return True
        if control_type == ABORT:
            aborted = self.ongoing_aborted.pop(producer_id, None)
            if aborted is not None and aborted.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(aborted.txn)
                return False
            return True
        if control_type == COMMIT:
            if producer_id in self.ongoing_committed:
                self.ongoing_committed.discard(producer_id)
                return False
            return True
        return False
