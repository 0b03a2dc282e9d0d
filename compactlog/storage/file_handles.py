"""Open file descriptors of segment files, bounded by the process's open-file limit.

Kafka keeps a ``FileChannel`` (``FileRecords``) and two index mappings open for every segment of
every log for the log's whole life, and asks operators to raise ``ulimit -n`` to match. compactlog
opens a segment's ``.log`` and index files when they are used and keeps at most a budget of them
open, closing the least recently used first (an LRU, as RocksDB's ``max_open_files`` table cache):
a broker with 10,000 partitions runs under ``ulimit -n 1024``.

A ``PooledFile`` is one path: ``use()`` yields its descriptor and pins it (an evicting thread never
closes a descriptor another thread is reading or writing through); between uses the descriptor
may be closed by the cache and is opened again by the next use. Reopening checks that the path
still names the same file (device and inode) as when it was first opened: a segment replaced by a
swap or deleted meanwhile fails loudly instead of reading the new file's bytes.

``close()`` ends the handle for good (a segment closed, deleted or replaced): a later use fails as
a closed descriptor would. ``rename`` updates the path under the cache's lock, so a reopen never
races the rename.

When the limit is hit anyway (sockets, other files), the cache evicts and retries once, then raises
``TooManyOpenFilesError``: one line that names the limit and ``ulimit -n``.
"""

from __future__ import annotations

import errno
import os
import resource
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterator

from ..errors import StorageError

# descriptors left to everything else (sockets, checkpoints, snapshots, pipes) below the limit
_RESERVED = 256
_MIN_BUDGET = 16


class TooManyOpenFilesError(StorageError):
    """The process's open-file limit was reached (EMFILE/ENFILE)."""


def open_file_limit() -> int:
    """The soft RLIMIT_NOFILE (``ulimit -n``)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def default_budget(limit: int | None = None) -> int:
    """How many segment files may be open at once: half the limit, and at least 256 descriptors
    left for the rest when the limit allows."""
    limit = open_file_limit() if limit is None else limit
    return max(_MIN_BUDGET, min(limit // 2, limit - _RESERVED))


def too_many_open_files(path: str, e: OSError | None = None) -> TooManyOpenFilesError:
    limit = open_file_limit()
    what = "the system's open-file table is full" if e is not None and e.errno == errno.ENFILE else \
        f"too many open files (ulimit -n is {limit})"
    return TooManyOpenFilesError(f"{path}: {what}; raise the limit with `ulimit -n` (e.g. ulimit -n "
                                 f"{max(4 * limit, 65536)}) before starting compactlog")


def is_too_many_open_files(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in (errno.EMFILE, errno.ENFILE)


class FileHandleCache:
    """The open descriptors of pooled files, least recently used first."""

    def __init__(self, budget: int | None = None):
        self.lock = threading.Lock()
        self._budget = budget
        self._open: OrderedDict[PooledFile, None] = OrderedDict()

    @property
    def budget(self) -> int:
        if self._budget is None:
            self._budget = default_budget()
        return self._budget

    @budget.setter
    def budget(self, n: int | None) -> None:
        self._budget = n

    def open_count(self) -> int:
        with self.lock:
            return len(self._open)

    # -- under self.lock
    def _evict_locked(self, keep: int) -> None:
        """Close unpinned descriptors, least recently used first, until at most ``keep`` are open."""
        if len(self._open) <= keep:
            return
        for handle in list(self._open):
            if len(self._open) <= keep:
                break
            if handle._pins == 0:
                del self._open[handle]
                fd, handle._fd = handle._fd, None
                os.close(fd)

    def _opened_locked(self, handle: "PooledFile") -> int:
        """Open ``handle``'s file (evicting first when at the budget)."""
        self._evict_locked(self.budget - 1)
        try:
            fd = handle._open_fd()
        except OSError as e:
            if not is_too_many_open_files(e):
                raise
            self._evict_locked(len(self._open) // 2)       # the limit is shared: make room, once
            try:
                fd = handle._open_fd()
            except OSError as e2:
                if is_too_many_open_files(e2):
                    raise too_many_open_files(handle.path, e2) from None
                raise
        handle._fd = fd
        self._open[handle] = None
        return fd

    def _forget_locked(self, handle: "PooledFile") -> None:
        """A closed handle's descriptor: closed now, or by its last user when it is pinned (a
        descriptor closed under a reader could be reused for another file before it reads)."""
        if handle._pins:
            return
        self._open.pop(handle, None)
        if handle._fd is not None:
            fd, handle._fd = handle._fd, None
            os.close(fd)


# one cache per process: the limit it shares is the process's
HANDLES = FileHandleCache()


class PooledFile:
    """One file opened on demand through the cache (``flags`` as for ``os.open``)."""

    __slots__ = ("path", "flags", "_fd", "_pins", "_identity", "_closed", "_cache", "__weakref__")

    def __init__(self, path: str, flags: int, *, cache: FileHandleCache = HANDLES, fd: int | None = None,
                 identity: tuple[int, int] | None = None):
        """``fd``: the file already open (it joins the cache); ``identity``: (device, inode) the
        path named when the caller looked (a reopen must find the same file)."""
        self.path = path
        self.flags = flags
        self._cache = cache
        self._fd: int | None = None
        self._pins = 0
        self._closed = False
        self._identity = identity
        if fd is not None:
            st = os.fstat(fd)
            self._identity = (st.st_dev, st.st_ino)
            with cache.lock:
                cache._evict_locked(cache.budget - 1)
                self._fd = fd
                cache._open[self] = None

    def _open_fd(self) -> int:
        fd = os.open(self.path, self.flags)
        st = os.fstat(fd)
        if self._identity is None:
            self._identity = (st.st_dev, st.st_ino)
        elif (st.st_dev, st.st_ino) != self._identity:
            os.close(fd)
            raise StorageError(f"{self.path}: replaced by another file since it was opened")
        return fd

    @property
    def is_open(self) -> bool:
        """Whether a descriptor is open right now (it may be closed by the cache at any time)."""
        return self._fd is not None

    @property
    def closed(self) -> bool:
        return self._closed

    def _pin(self) -> int:
        """The descriptor, opened if needed, pinned until ``_unpin``."""
        cache = self._cache
        with cache.lock:
            if self._closed:
                raise OSError(errno.EBADF, "file closed", self.path)
            fd = self._fd
            if fd is None:
                fd = cache._opened_locked(self)
            else:
                cache._open.move_to_end(self)
            self._pins += 1
        return fd

    def _unpin(self) -> None:
        cache = self._cache
        with cache.lock:
            self._pins -= 1
            if self._closed:
                cache._forget_locked(self)

    @contextmanager
    def use(self) -> Iterator[int]:
        """The descriptor, opened if needed and kept open (pinned) until the block ends."""
        fd = self._pin()
        try:
            yield fd
        finally:
            self._unpin()

    def pwrite(self, data, offset: int) -> int:
        """``os.pwrite`` through the descriptor, pinned as ``use`` pins it: the append path's
        one call, without a generator context manager per write (issue 28: a single-record
        transaction makes five appends)."""
        fd = self._pin()
        try:
            return os.pwrite(fd, data, offset)
        finally:
            self._unpin()

    def dup(self) -> int:
        """A new descriptor of the same open file (the caller closes it): it keeps reading the
        same bytes even if this handle is closed or the file replaced meanwhile."""
        with self.use() as fd:
            return os.dup(fd)

    def rename(self, new_path: str) -> None:
        """``os.replace`` the file and follow it, atomically for the cache."""
        with self._cache.lock:
            os.replace(self.path, new_path)
            self.path = new_path

    def close(self) -> None:
        """Close the descriptor and end the handle (later uses fail)."""
        cache = self._cache
        with cache.lock:
            self._closed = True
            cache._forget_locked(self)

    def __repr__(self) -> str:
        return f"PooledFile({self.path!r}, open={self._fd is not None})"
