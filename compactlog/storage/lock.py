"""The data-dir lock: one writer per data directory, as Kafka's ``.lock`` in every log dir.

Kafka's LogManager locks ``<log.dir>/.lock`` with ``FileChannel.tryLock``, which is a POSIX record
lock (``fcntl(F_SETLK)``) on Linux. compactlog takes the same lock on the same file, so a Kafka
broker and a compactlog writer exclude each other too, and the kernel releases it when the holder
dies (kill -9 included). The file's content is ignored by Kafka; compactlog writes its pid and
command there so that a refused writer can say who holds the dir.

POSIX record locks belong to a process, not to a file descriptor: a second lock taken by the same
process would succeed, and closing any descriptor of the file would drop the lock. A process-wide
registry therefore refuses a second writer inside the process too, and only this module opens the
lock file.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import threading

from ..errors import DataDirLockedError, StorageError

LOCK_FILE = ".lock"
BOOTSTRAP_NOTE = "bootstrap"     # a broker's address, on its own line after the holder's

_held: dict[tuple[int, int], "DataDirLock"] = {}
_held_guard = threading.Lock()

# struct flock on Linux (x86_64 and aarch64): short l_type, short l_whence, off_t l_start,
# off_t l_len, pid_t l_pid, padded to 32 bytes
_FLOCK = struct.Struct("@hhqqi4x")


def _holder_pid(fd: int) -> int | None:
    """The pid holding a conflicting lock on ``fd``'s file (F_GETLK), or None."""
    try:
        raw = fcntl.fcntl(fd, fcntl.F_GETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
    except OSError:
        return None
    l_type, _, _, _, pid = _FLOCK.unpack(raw)
    return pid if l_type != fcntl.F_UNLCK and pid > 0 else None


def _describe(fd: int) -> str:
    """The holder's first line: ``<pid> <command>``."""
    return _note_lines(fd)[0]


def _note_lines(fd: int) -> list[str]:
    """The lock file's lines: ``<pid> <command>``, then ``key=value`` notes (a broker's address)."""
    try:
        raw = os.pread(fd, 4096, 0)
    except OSError:
        return [""]
    lines = raw.decode("utf-8", errors="replace").strip().splitlines()
    return [line.strip() for line in lines] or [""]


def _broker_address(fd: int) -> str | None:
    """The ``--bootstrap-server`` address a broker holding the lock recorded (``bootstrap=``)."""
    for line in _note_lines(fd)[1:]:
        key, sep, value = line.partition("=")
        if sep and key == BOOTSTRAP_NOTE and value:
            return value
    return None


def describe_holder(path: str) -> str | None:
    """Who holds the lock of data dir ``path`` (pid and command), or None when nobody does.

    Opening the lock file read-only and asking F_GETLK takes no lock and writes nothing.
    """
    lock_path = os.path.join(path, LOCK_FILE)
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        with _held_guard:
            mine = _held.get((st.st_dev, st.st_ino))
        if mine is not None:
            return f"pid {os.getpid()} ({mine.command}, this process)"
        pid = _holder_pid(fd)
        if pid is None:
            return None
        text = _describe(fd)
        return f"pid {pid}" + (f" ({text.split(' ', 1)[1]})" if text.startswith(f"{pid} ") else "")
    finally:
        os.close(fd)


def _locked_error(fd: int, data_dir: str) -> DataDirLockedError:
    """The refusal of a writer whose lock file ``fd`` another process holds."""
    pid = _holder_pid(fd)
    text = _describe(fd)
    mine = pid is not None and text.startswith(f"{pid} ")
    bootstrap = _broker_address(fd) if mine else None
    what = text.split(" ", 1)[1] if mine else (text or "not compactlog: a Kafka broker or another tool")
    return DataDirLockedError(os.path.abspath(data_dir), pid, what, bootstrap=bootstrap)


def refuse_if_held(path: str) -> None:
    """Raise the refusal a writer of data dir ``path`` would get (``DataDirLockedError``) when
    another process holds its lock now; nothing when the dir, its lock file or a holder is
    missing. Read-only (F_GETLK): a command that must check other things before it takes the lock
    (``serve`` binds its ports first) names the holder first, and creates nothing."""
    try:
        fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDONLY)
    except OSError:
        return
    try:
        if _holder_pid(fd) is not None:
            raise _locked_error(fd, path)
    finally:
        os.close(fd)


class DataDirLock:
    """An exclusive lock on ``<data dir>/.lock`` for the life of a writer."""

    def __init__(self, data_dir: str, command: str):
        self.data_dir = os.path.abspath(data_dir)
        self.command = command
        self.path = os.path.join(self.data_dir, LOCK_FILE)
        self._fd: int | None = None
        self._key: tuple[int, int] | None = None
        self._acquire()

    def _acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise StorageError(f"{self.data_dir}: cannot write to this data directory "
                                   f"({os.strerror(e.errno)}): {self.command} needs to write") from None
            raise StorageError(f"{self.path}: cannot open the lock file: {os.strerror(e.errno)}") from None
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        with _held_guard:
            other = _held.get(key)
            if other is not None:
                os.close(fd)   # POSIX locks are per process: this close keeps the other's lock
                raise DataDirLockedError(self.data_dir, os.getpid(), f"{other.command}, this process")
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EACCES, errno.EAGAIN):
                    os.close(fd)
                    raise StorageError(f"{self.path}: cannot lock: {os.strerror(e.errno)}") from None
                error = _locked_error(fd, self.data_dir)
                os.close(fd)
                raise error from None
            _held[key] = self
        self._fd, self._key = fd, key
        try:
            note = f"{os.getpid()} {self.command}\n".encode("utf-8")
            os.ftruncate(fd, 0)
            os.pwrite(fd, note, 0)
        except OSError:
            pass   # the note is a courtesy; the lock is what matters

    def note_broker_address(self, bootstrap: str) -> None:
        """Record where the broker holding this lock listens (``host:port``), so that a writer it
        refuses can say to go through it (``--bootstrap-server``)."""
        if self._fd is None:
            return
        try:
            note = f"{os.getpid()} {self.command}\n{BOOTSTRAP_NOTE}={bootstrap}\n".encode("utf-8")
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, note, 0)
        except OSError:
            pass   # a courtesy, as the holder line

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        with _held_guard:
            _held.pop(self._key, None)
            try:
                os.ftruncate(self._fd, 0)
            except OSError:
                pass
            os.close(self._fd)   # closing drops the POSIX lock
        self._fd = None

    def __enter__(self) -> "DataDirLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

