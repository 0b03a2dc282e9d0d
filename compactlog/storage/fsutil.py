"""Crash-safe file replacement (write new, fsync, rename, fsync the directory) and text reads that
name the file and line of a byte that is not UTF-8.

The replacement is Kafka's ``Utils.atomicMoveWithFallback`` after writing ``<file>.tmp`` as its
CheckpointFile does; unlike Kafka, a failed write (disk full, read-only mount) removes the ``.tmp``
it started, so no half-written file is left behind.
"""

from __future__ import annotations

import errno
import os
import stat

from ..errors import StorageError


def open_regular(path: str, mode: str = "rb", **kw):
    """``open(path, mode)`` for reading, refusing a file that is not a regular file (a symlink to
    one counts): a FIFO in place of an index, a snapshot or a checkpoint would block the open
    until some process writes to it, so it is opened non-blocking and refused by its type, an
    OSError naming the path."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        kind = os.fstat(fd).st_mode
        if not stat.S_ISREG(kind):
            what = "a directory" if stat.S_ISDIR(kind) else "a FIFO" if stat.S_ISFIFO(kind) else "a device or socket"
            raise OSError(errno.EINVAL, f"not a regular file ({what})", path)
        os.set_blocking(fd, True)
        return open(fd, mode, **kw)
    except BaseException:
        os.close(fd)
        raise


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, *, sync: bool = True, mode: int | None = None,
                 sync_dir: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new content;
    ``mode``: the new file's permissions from its creation on (else the umask's).

    ``sync_dir=False``: the caller fsyncs the directory itself, after its other changes there
    (one directory fsync for several files); until then the rename may not survive a crash.
    An OSError names the file it concerns (a failed ``write`` on an open file would not).
    """
    tmp = path + ".tmp"
    try:
        if mode is not None:
            _remove_quietly(tmp)
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode))
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        _remove_quietly(tmp)
        if e.filename is None:
            raise OSError(e.errno, e.strerror, tmp) from None
        raise
    except BaseException:
        _remove_quietly(tmp)
        raise
    if sync and sync_dir:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass    # never created, or the directory refuses even this: the original error matters


def fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_text(path: str) -> str:
    """The file's text; a byte that is not UTF-8 is a StorageError naming the file, line and column.

    FileNotFoundError is left to the caller (a missing file often means "empty"); any other
    failure to read is a StorageError naming the file.
    """
    try:
        with open_regular(path) as f:
            raw = f.read()
    except FileNotFoundError:
        raise
    except OSError as e:
        raise StorageError(f"{path}: cannot be read: {e.strerror or e}") from None
    return decode_utf8(raw, path)


def decode_utf8(raw: bytes, path: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line_start = raw.rfind(b"\n", 0, e.start) + 1
        line = raw.count(b"\n", 0, e.start) + 1
        raise StorageError(f"{path}: line {line}: byte 0x{raw[e.start]:02x} at column {e.start - line_start + 1} "
                           f"is not UTF-8 text") from None
