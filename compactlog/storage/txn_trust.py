"""May the ``.txnindex`` files be believed? The check before a read_committed read uses them.

Kafka's ``LocalLog.collectAbortedTransactions`` trusts the transaction indexes as they are; an entry
that lies there serves aborted records to a read_committed consumer (or hides committed ones). So
before the first such read, every index is checked in log order against the ABORT/COMMIT markers of
its segment (``index_check.check_txn_index``, which carries each producer's transaction state from
segment to segment); when one contradicts them, the aborted transactions of every segment are taken
from the markers instead (``txn_index.aborted_from_markers``). The writer's ``LocalLog`` rewrites
the files with them, the read-only ``PartitionReader`` keeps them in memory: each says so its way.
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..errors import StorageError
from .index_check import SegmentLayout, TxnCarry, check_txn_index
from .txn_index import AbortedTxn, aborted_from_markers


def untrusted_txn_indexes(layouts: Sequence[SegmentLayout], paths: Sequence[str],
                          index_bytes: Callable[[int], bytes]) -> tuple[str, list[list[AbortedTxn]]] | None:
    """None when every segment's ``.txnindex`` agrees with its markers; else (the first problem,
    each segment's aborted transactions rebuilt from the markers).

    ``layouts``: the segments' batch headers in log order; ``index_bytes(i)``: the i-th index's
    entries as stored (a StorageError it raises is the problem)."""
    carry = TxnCarry()
    for i, layout in enumerate(layouts):
        next_base = layouts[i + 1].base_offset if i + 1 < len(layouts) else None
        try:
            raw = index_bytes(i)
        except StorageError as e:
            return str(e), aborted_from_markers(layouts)
        found = check_txn_index(raw, layout, next_base=next_base, path=paths[i], carry=carry)
        if found is not None:
            return str(found), aborted_from_markers(layouts)
    return None
