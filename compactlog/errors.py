"""Errors raised by compactlog.

Every error that reaches a user names what is wrong: the file, the byte position or offset, the
field and its value, so that one line is enough to find the problem.
"""

from __future__ import annotations


class CompactlogError(Exception):
    """Base class of every error compactlog raises on purpose."""


class CorruptRecordError(CompactlogError):
    """Bytes that do not decode as Kafka records (Kafka's CorruptRecordException/InvalidRecordException)."""

    def __init__(self, message: str, *, file: str | None = None, position: int | None = None,
                 offset: int | None = None, field: str | None = None):
        self.detail = message
        self.file = file
        self.position = position
        self.offset = offset
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.file is not None:
            where.append(str(self.file))
        if self.position is not None:
            where.append(f"position {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        prefix = ", ".join(where)
        field = f"{self.field}: " if self.field else ""
        return f"{prefix}: {field}{self.detail}" if prefix else f"{field}{self.detail}"

    def located(self, *, file: str | None = None, position: int | None = None,
                offset: int | None = None) -> "CorruptRecordError":
        """The same error with a location filled in where it was missing."""
        return type(self)(self.detail,
                          file=self.file if self.file is not None else file,
                          position=self.position if self.position is not None else position,
                          offset=self.offset if self.offset is not None else offset,
                          field=self.field)


class InvalidRecordError(CompactlogError):
    """A record or batch that is well-formed but refused by the log (Kafka's InvalidRecordException)."""


class RecordTooLargeError(InvalidRecordError):
    """A batch larger than max.message.bytes or segment.bytes."""


class OffsetOutOfRangeError(CompactlogError):
    """A read below the log start offset or above the log end offset."""


class ConfigError(CompactlogError):
    """An unknown configuration name or a value out of its valid range."""


class TopicError(CompactlogError):
    """A topic that does not exist, exists already, or has an invalid name."""


class StorageError(CompactlogError):
    """A partition directory or file that cannot be used as it is."""


class DataDirLockedError(StorageError):
    """Another writer (a compactlog process or a Kafka broker) holds the data dir's ``.lock``."""

    def __init__(self, data_dir: str, pid: int | None, holder: str):
        self.data_dir = data_dir
        self.pid = pid
        self.holder = holder
        who = f"pid {pid} ({holder})" if pid is not None else holder
        super().__init__(f"{data_dir}: the data directory is locked by another writer, {who}; "
                         f"commands that write wait for it to finish (read-only commands work meanwhile)")


class ReadOnlyError(StorageError):
    """A write attempted through a data dir or log opened read-only."""
