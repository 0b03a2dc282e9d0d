"""Fixed-width entry files preallocated and trimmed like Kafka's AbstractIndex."""

from __future__ import annotations

import os

import numpy as np

from ..errors import StorageError
from .file_handles import PooledFile
from .fsutil import open_regular


def used_length(raw, entry_size: int) -> int:
    """Bytes of the entries before the zero-filled slots a preallocated (untrimmed) index ends with."""
    arr = np.frombuffer(raw, dtype=np.uint8)
    rows = arr[:len(arr) - len(arr) % entry_size].reshape(-1, entry_size)
    nonzero = np.flatnonzero(rows.any(axis=1))
    return (int(nonzero[-1]) + 1) * entry_size if nonzero.size else 0


class IndexFile:
    """Entries of ``entry_size`` bytes; an active index is preallocated (sparse) to its maximum size.

    Kafka counts every whole entry slot of a loaded file as valid, which is why an index must be
    trimmed to its entries before it is handed over (on roll, close and after recovery).

    Opened ``read_only``, the file is read once and never written: entries added or removed (by
    an in-memory recovery) live in memory only.
    """

    entry_size = 8
    reserved_slots = 0      # slots ``is_full`` keeps free (the time index keeps one)

    def __init__(self, path: str, base_offset: int, max_index_size: int, *, preallocate: bool,
                 read_only: bool = False):
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        # the entry count at which the index is full (a segment rolls before an append would
        # need more: LogSegment.shouldRoll)
        self.full_at = max_index_size // self.entry_size - self.reserved_slots
        self.read_only = read_only
        self._entries: list[tuple[int, int]] = []
        self.untrimmed_slots = 0     # zero-filled slots after the entries (a preallocated index)
        # the entries' bytes as read from the file, kept until the index check takes them (see
        # entry_bytes), and how many leading entries they still hold
        self._loaded = b""
        self._loaded_entries = 0
        # the file's write descriptor, from the process's file-handle cache: opened by the first
        # write and possibly closed between writes (open descriptors stay bounded)
        self._file: PooledFile | None = None
        newly_created = not os.path.exists(path)
        if read_only:
            self.length = 0 if newly_created else os.path.getsize(path)
            if not newly_created:
                self._entries = self._read_entries()
        elif newly_created:
            with open(path, "wb") as f:
                if preallocate:
                    f.truncate(self._round(max_index_size))
            self.length = self._round(max_index_size) if preallocate else 0
        else:
            self.length = self._disk_length = os.path.getsize(path)
            self._entries = self._read_entries()
            if preallocate:
                self.resize(max_index_size)
        # the file's size on disk, which ``length`` (what the index may grow to) can exceed after
        # ``reserve``: a resize that leaves the disk as it is makes no system call
        self._disk_length = self.length

    def _round(self, n: int) -> int:
        return n - n % self.entry_size

    # -- subclass hooks
    def _decode(self, raw: bytes) -> list[tuple[int, int]]:
        raise NotImplementedError

    def _encode(self, entry: tuple[int, int]) -> bytes:
        raise NotImplementedError

    def _read_entries(self) -> list[tuple[int, int]]:
        """The entries before the zero-filled slots a preallocated (untrimmed) index ends with.

        A file left untrimmed by a crash or by a running writer is mostly a sparse run of zeros
        (up to segment.index.bytes, 2 GiB at most): only its data part is read, found with
        SEEK_HOLE, and the zero slots are counted in ``untrimmed_slots`` instead of decoded.
        """
        size = self._round(self.length)
        with open_regular(self.path) as f:
            data_end = size
            try:
                hole = os.lseek(f.fileno(), 0, os.SEEK_HOLE)
                try:
                    more = os.lseek(f.fileno(), hole, os.SEEK_DATA) < size
                except OSError:
                    more = False      # ENXIO: no data after the hole
                if not more:
                    data_end = min(size, self._round(hole + self.entry_size - 1))
            except OSError:
                pass
            f.seek(0)
            raw = f.read(data_end)
        used = used_length(raw, self.entry_size)
        self.untrimmed_slots = (size - used) // self.entry_size
        self._loaded = raw if used == len(raw) else raw[:used]
        self._loaded_entries = used // self.entry_size
        return self._decode(self._loaded)

    @property
    def max_entries(self) -> int:
        return self.length // self.entry_size if self.length else self.max_index_size // self.entry_size

    @property
    def entries(self) -> int:
        return len(self._entries)

    def all_entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    def entry_bytes(self) -> bytes:
        """The entries as the file encodes them (what index_check takes), from the bytes read at
        load: only entries added since are encoded one by one. The loaded bytes are handed over,
        not kept (the check runs once per segment); a later call encodes every entry."""
        k, size = self._loaded_entries, self.entry_size
        head = self._loaded if len(self._loaded) == k * size else self._loaded[:k * size]
        self._loaded, self._loaded_entries = b"", 0
        if k == len(self._entries):
            return head
        return head + b"".join(self._encode(e) for e in self._entries[k:])

    def is_full(self) -> bool:
        return len(self._entries) >= self.full_at

    def _writing(self):
        """The write descriptor (pinned for the block)."""
        if self._file is None:
            self._file = PooledFile(self.path, os.O_RDWR)
        return self._file.use()

    def _write_entry(self, entry: tuple[int, int]) -> None:
        pos = len(self._entries) * self.entry_size
        if not self.read_only:
            try:
                with self._writing() as fd:
                    os.pwrite(fd, self._encode(entry), pos)
            except BaseException:
                self._disk_length = -1          # unknown: the next resize sets it
                raise
            self._disk_length = max(self._disk_length, pos + self.entry_size)
        self._entries.append(entry)
        self.length = max(self.length, pos + self.entry_size)

    def resize(self, new_size: int) -> None:
        size = max(self._round(new_size), len(self._entries) * self.entry_size)
        if size != self.length or size != self._disk_length:
            if not self.read_only and size != self._disk_length:
                with self._writing() as fd:
                    os.ftruncate(fd, size)
                self._disk_length = size
            self.length = size

    def reserve(self, new_size: int) -> None:
        """Let the index grow to ``new_size`` (an active segment loaded from disk) without
        preallocating the file: entries are written where they belong and the file grows with
        them, so that opening and closing a log nobody appends to touches no index file."""
        self.length = max(self.length, self._round(new_size), len(self._entries) * self.entry_size)

    def trim_to_valid_size(self) -> None:
        self.resize(len(self._entries) * self.entry_size)

    def truncate_entries(self, n: int) -> None:
        """Keep the first n entries (the slots after them are zeroed as Kafka's mmap would leave)."""
        if n < len(self._entries):
            del self._entries[n:]
            self._loaded_entries = min(self._loaded_entries, n)
            if self.read_only:
                return
            with self._writing() as fd:
                os.ftruncate(fd, n * self.entry_size)
                if self.length > n * self.entry_size:
                    os.ftruncate(fd, self.length)
            self._disk_length = max(self.length, n * self.entry_size)

    def cut_back(self, n: int) -> None:
        """Undo a failed append: the first ``n`` entries kept and the file cut to them, then
        zero-filled again to its length (as ``truncate_entries``, but also when the failed
        write's bytes landed without an entry being counted), fsynced."""
        del self._entries[n:]
        self._loaded_entries = min(self._loaded_entries, n)
        if self.read_only or self._disk_length == n * self.entry_size:
            return
        with self._writing() as fd:
            os.ftruncate(fd, n * self.entry_size)
            if self.length > n * self.entry_size:
                os.ftruncate(fd, self.length)
            os.fsync(fd)
        self._disk_length = max(self.length, n * self.entry_size)

    def reset(self) -> None:
        """No entries, room for ``max_index_size`` bytes of them: the file is emptied but not
        preallocated again (as ``reserve``), so that rebuilding an index makes one system call at
        most (none for an empty file) and its trim none."""
        self._entries = []
        self.untrimmed_slots = 0
        self._loaded, self._loaded_entries = b"", 0
        self.length = self._round(self.max_index_size)
        if self.read_only:
            return
        if self._disk_length != 0:
            with self._writing() as fd:
                os.ftruncate(fd, 0)
            self._disk_length = 0

    def flush(self) -> None:
        if self._file is not None and not self._file.closed:
            with self._file.use() as fd:
                os.fsync(fd)

    def close(self) -> None:
        """Let go of the descriptor; a later write opens the file again."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def rename(self, new_path: str) -> None:
        if self.read_only:
            raise StorageError(f"{self.path}: opened read-only")
        if self._file is not None and not self._file.closed:
            self._file.rename(new_path)
        elif os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        if self.read_only:
            raise StorageError(f"{self.path}: opened read-only")
        self.close()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass

    def corrupt(self, message: str) -> StorageError:
        return StorageError(f"{self.path}: {message}")
