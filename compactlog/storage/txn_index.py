"""The aborted-transaction index (``.txnindex``): 34-byte entries, created on first use."""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

import numpy as np

from ..errors import StorageError
from ..record.layout import CONTROL_FLAG, MAGIC_V2, TRANSACTIONAL_FLAG

ENTRY = struct.Struct(">hqqqq")      # version, producer id, first, last, last stable offset
ENTRY_SIZE = ENTRY.size
LAST_OFFSET_AT = 18                   # byte position of an entry's last offset within it
_ENTRY_DTYPE = np.dtype([("version", ">i2"), ("pid", ">i8"), ("first", ">i8"), ("last", ">i8"), ("lso", ">i8")])


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(0, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)


class TransactionIndex:
    def __init__(self, path: str, base_offset: int, *, read_only: bool = False):
        self.path = path
        self.base_offset = base_offset
        self.read_only = read_only   # entries change in memory only
        self._entries: list[AbortedTxn] | None = None

    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return []
        return self._decode(raw)

    def load(self, raw: bytes) -> None:
        """Take the entries from the file's bytes, already read by the caller."""
        self._entries = self._decode(raw)

    def _decode(self, raw: bytes) -> list[AbortedTxn]:
        """The entries, checked at once (numpy) before any is made an object: the whole 2-byte
        version (its low byte was not read: version 1 passed), and Kafka's sanityCheck (an entry's
        last offset below the segment's base offset is a corrupt index: ``sanity_check``, which
        the loader calls, raised it only after every entry was made). A 1 GiB zero-filled file of
        a segment at base 40 was decoded into 31 million entries (29 s of a clean that cleaned
        nothing); its first entry now fails the check. (Entries out of order are left to
        ``txn_trust``, which rebuilds the index from the markers and says so.)"""
        n = len(raw) // ENTRY_SIZE
        if not n:
            return []
        e = np.frombuffer(raw, dtype=_ENTRY_DTYPE, count=n)
        bad = np.flatnonzero(e["version"] != 0)
        if bad.size:
            i = int(bad[0])
            raise StorageError(f"{self.path}: position {i * ENTRY_SIZE}: unexpected aborted transaction "
                               f"version {int(e['version'][i])}")
        last = e["last"]
        below = np.flatnonzero(last < self.base_offset)
        if below.size:
            i = int(below[0])
            raise StorageError(f"{self.path}: position {i * ENTRY_SIZE}: last offset {int(last[i])} of an aborted "
                               f"transaction is below the segment's base offset {self.base_offset}")
        # an append refuses a last offset that does not increase (``append``, Kafka's
        # TransactionIndex.append): a file whose entries go back was not written by an append. A
        # zero-filled 1 GiB file of a segment at base 0 passes the check above, and was made into
        # 31 million entries (explain: 41 s and 4.8 GB; clean: 85 s and 7.6 GB) before txn_trust
        # found its second entry out of order; refused here, the segment goes to recovery, which
        # rebuilds its aborted transactions from the markers.
        back = np.flatnonzero(last[1:] <= last[:-1])
        if back.size:
            i = int(back[0]) + 1
            raise StorageError(f"{self.path}: position {i * ENTRY_SIZE}: last offset {int(last[i])} of an aborted "
                               f"transaction is not above the previous entry's {int(last[i - 1])}")
        return [AbortedTxn(*t) for t in zip(e["pid"].tolist(), e["first"].tolist(), last.tolist(),
                                            e["lso"].tolist())]

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries()
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise StorageError(f"{self.path}: the last offset of appended aborted transaction "
                               f"({txn.last_offset}) must exceed the previous one ({entries[-1].last_offset})")
        if not self.read_only:
            with open(self.path, "ab") as f:
                f.write(txn.encode())
        entries.append(txn)

    def entry_count(self) -> int:
        """Entries so far (0, without reading the file, for one nobody has read or written)."""
        if self._entries is None and not os.path.exists(self.path):
            self._entries = []      # as ``entries`` would read it: asked on every append, stat once
        return len(self.entries())

    def cut_back(self, n: int) -> None:
        """Undo a failed append: the first ``n`` entries kept, the file cut to them and fsynced."""
        if self._entries is None and n == 0 and not os.path.exists(self.path):
            return
        del self.entries()[n:]
        if self.read_only or not os.path.exists(self.path):
            return
        fd = os.open(self.path, os.O_RDWR)
        try:
            if os.fstat(fd).st_size != n * ENTRY_SIZE:
                os.ftruncate(fd, n * ENTRY_SIZE)
                os.fsync(fd)
        finally:
            os.close(fd)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping [fetch_offset, upper_bound); True once the search is complete."""
        found = []
        for txn in self.entries():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        kept = [t for t in self.entries() if t.last_offset < offset]
        if len(kept) != len(self.entries()):
            self._rewrite(kept)

    def reset(self) -> None:
        self._entries = []
        if not self.read_only and os.path.exists(self.path):
            with open(self.path, "r+b") as f:
                f.truncate(0)

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        self._entries = list(entries)
        if self.read_only or (not entries and not os.path.exists(self.path)):
            return
        from .fsutil import atomic_write
        atomic_write(self.path, b"".join(t.encode() for t in entries))

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def sanity_check(self) -> None:
        for t in self.entries():
            if t.last_offset < self.base_offset:
                raise StorageError(f"{self.path}: last offset of aborted transaction {t} is below the "
                                   f"segment base offset {self.base_offset}")

    def flush(self) -> None:
        if not self.read_only and os.path.exists(self.path):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename(self, new_path: str) -> None:
        if self.read_only:
            raise StorageError(f"{self.path}: opened read-only")
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        if self.read_only:
            raise StorageError(f"{self.path}: opened read-only")
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass


def collect_aborted(indexes, start: int, upper_bound: int) -> list[AbortedTxn]:
    """Aborted transactions overlapping [start, upper_bound): Kafka's walk over the txn indexes
    from the segment holding ``start`` onward, stopping once an entry proves the search complete."""
    out = []
    for index in indexes:
        found, complete = index.collect(start, upper_bound)
        out.extend(found)
        if complete:
            break
    return out


def aborted_from_markers(layouts) -> list[list[AbortedTxn]]:
    """Each segment's aborted transactions rebuilt from the batch headers (``index_check``
    layouts, in log order), as the producer state records them when the ABORT marker is appended:
    first offset = the producer's first transactional data batch since its previous marker (the
    marker itself when none is left, e.g. after compaction), last stable offset = the earliest
    other open transaction, else marker + 1 (Kafka's ProducerStateManager.lastStableOffset)."""
    from .index_check import ABORT, COMMIT
    open_first: dict[int, int] = {}
    out: list[list[AbortedTxn]] = []
    for lay in layouts:
        found: list[AbortedTxn] = []
        for i in range(lay.batches):
            if int(lay.magic[i]) != MAGIC_V2:
                continue
            pid, attrs, ctype = int(lay.pid[i]), int(lay.attrs[i]), int(lay.ctype[i])
            if ctype in (ABORT, COMMIT):
                first = open_first.pop(pid, None)
                if ctype == ABORT:
                    marker = int(lay.base[i])
                    lso = min(open_first.values()) if open_first else marker + 1
                    found.append(AbortedTxn(pid, marker if first is None else first, marker, lso))
            elif attrs & TRANSACTIONAL_FLAG and not attrs & CONTROL_FLAG:
                open_first.setdefault(pid, int(lay.base[i]))
        out.append(found)
    return out
