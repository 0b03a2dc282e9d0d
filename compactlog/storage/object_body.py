"""A segment's ``.log`` whose bytes stay in a bucket: a sparse local file of the object's size,
marked with the object's key, that the storage layer reads by ranged GETs instead of from disk.

``clean`` over a bucket (a Kafka data dir copied to it) opens a *shadow* of the data dir: every
small file (indexes, snapshots, checkpoints) fetched, every ``.log`` a sparse file (no blocks on
disk) carrying its object's key in an extended attribute. The data dir, its logs, Kafka's loader
and the cleaner's planner then run unchanged on the shadow; the few places that read a ``.log``'s
bytes (``FileRecords``, ``layout.map_file``, ``pinned``, ``LocalDirSource``) ask ``body_of``
first and read the object. The mark is an attribute of the file, so Kafka's renames
(``.cleaned`` -> ``.swap`` -> live -> ``.deleted``) carry it; a file created afresh has none.
Where the file system keeps no user attributes the mark is kept in this process by inode, and
trusted only while the file still looks like the sparse file ``mark`` made (no block on disk, no
longer than the object): a deleted file's inode number is soon given to a new file (ext4 and tmpfs
reuse it at once), whose own bytes must not be read from the old file's object.

Only a process that called ``activate`` looks for marks (one ``getxattr`` per segment opened);
everywhere else this module costs nothing. Kafka has no counterpart (its log is local files).
"""

from __future__ import annotations

import errno
import os
import threading
from contextlib import contextmanager

XATTR = "user.compactlog.object"
READ_AHEAD = 1 << 20        # a ranged GET fetches at least this much (batch-header walks read 64 KiB)

_active = {"config": None}
_by_inode: dict[tuple[int, int], tuple[str, int]] = {}   # where the file system keeps no xattrs: key, size
_lock = threading.Lock()


@contextmanager
def activate(get_range):
    """Marked files are read through ``get_range(key, start, end) -> bytes`` (the bucket's store,
    a StorageError naming a missing object) while this lasts."""
    prev = _active["config"]
    _active["config"] = get_range
    try:
        yield
    finally:
        _active["config"] = prev
        if prev is None:
            _by_inode.clear()


def active() -> bool:
    return _active["config"] is not None


def mark(path: str, key: str, size: int) -> None:
    """``path`` made (or kept) a sparse file of ``size`` bytes whose bytes are the object ``key``."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, size)
        try:
            os.setxattr(fd, XATTR, key.encode())
        except OSError as e:
            if e.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
                raise
            st = os.fstat(fd)
            with _lock:
                if size:
                    _by_inode[(st.st_dev, st.st_ino)] = (key, size)
                else:   # an empty object: the empty file reads the same, and an empty new file is not it
                    _by_inode.pop((st.st_dev, st.st_ino), None)
    finally:
        os.close(fd)


def key_of(fd_or_path) -> str | None:
    """The object key a marked file stands for (None: a real file, or no ``activate`` here)."""
    if _active["config"] is None:
        return None
    try:
        return os.getxattr(fd_or_path, XATTR).decode()
    except OSError as e:
        if e.errno not in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
            if e.errno == errno.ENOENT:
                return None
            raise
    if not _by_inode:
        return None
    try:
        st = os.stat(fd_or_path)
    except FileNotFoundError:
        return None
    found = _by_inode.get((st.st_dev, st.st_ino))
    if found is None:
        return None
    key, size = found
    # the marked file or, after its deletion, a new file given its inode number: a file written to
    # has blocks, and a marked one only ever shrinks (the loader truncating a torn tail)
    if st.st_blocks or not 0 < st.st_size <= size:
        return None
    return key


class Body:
    """The bytes of one marked file: ranged GETs, with a read-ahead block kept (a walk of batch
    headers reads 64 KiB at a time: one GET per MiB, not per read)."""

    def __init__(self, key: str, path: str = ""):
        self.key = key
        self.path = path
        self._block = (0, b"")


    def read(self, position: int, length: int, size: int) -> bytes:
        end = min(position + length, size)
        if end <= position:
            return b""
        start, block = self._block
        if start <= position and end <= start + len(block):
            return block[position - start:end - start]
        want = min(max(end, position + READ_AHEAD), size)
        data = self._get(position, want)
        self._block = (position, data)
        return data[:end - position]

    def whole(self, size: int) -> bytes:
        """[0, size) in one GET (the cleaner's and readers' per-segment buffer)."""
        return self._get(0, size) if size else b""

    def _get(self, start: int, end: int) -> bytes:
        data = _active["config"](self.key, start, end)
        if len(data) < end - start:
            from ..errors import CorruptRecordError
            raise CorruptRecordError(f"object {self.key} holds fewer bytes than its segment file "
                                     f"({start + len(data)} < {end})", file=self.path)
        return data


def body_of(fd_or_path, path: str = "") -> Body | None:
    key = key_of(fd_or_path)
    return None if key is None else Body(key, path or (fd_or_path if isinstance(fd_or_path, str) else ""))
