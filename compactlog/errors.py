"""Errors raised by compactlog.

Every error that reaches a user names what is wrong: the file, the byte position or offset, the
field and its value, so that one line is enough to find the problem.

Each class carries ``kafka_error``, the code of Kafka's ``Errors`` enum that a broker answers for it
(Kafka maps its exception classes to codes the same way, in ``Errors.forException``), so a request
handler picks the code from the class and never from the message. ``UNKNOWN_SERVER_ERROR`` (-1) is
the answer for anything without a more precise code.
"""

from __future__ import annotations


UNKNOWN_SERVER_ERROR = -1


class CompactlogError(Exception):
    """Base class of every error compactlog raises on purpose."""

    kafka_error = UNKNOWN_SERVER_ERROR


class CorruptRecordError(CompactlogError):
    """Bytes that do not decode as Kafka records (Kafka's CorruptRecordException/InvalidRecordException)."""

    kafka_error = 2     # CORRUPT_MESSAGE

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
    """A record or batch that is well-formed but refused by the log (Kafka's InvalidRecordException).

    ``record_errors``: (index of the record in its batch, message) for each record refused on its
    own (a keyless record on a compacted topic, a timestamp out of range), as Kafka's
    ``RecordError`` list that Produce v8+ returns.
    """

    kafka_error = 87    # INVALID_RECORD

    def __init__(self, message: str = "", *, record_errors: list[tuple[int, str | None]] | None = None):
        super().__init__(message)
        self.record_errors = list(record_errors or [])


class RecordTooLargeError(InvalidRecordError):
    """A batch larger than max.message.bytes (Kafka's RecordTooLargeException)."""

    kafka_error = 10    # MESSAGE_TOO_LARGE


class RecordListTooLargeError(RecordTooLargeError):
    """A validated batch larger than segment.bytes (Kafka's RecordBatchTooLargeException)."""

    kafka_error = 18    # RECORD_LIST_TOO_LARGE


class InvalidTimestampError(InvalidRecordError):
    """A record timestamp outside message.timestamp.before/after.max.ms (InvalidTimestampException)."""

    kafka_error = 32    # INVALID_TIMESTAMP


class OutOfOrderSequenceError(InvalidRecordError):
    """An idempotent producer's batch whose first sequence does not follow the last one."""

    kafka_error = 45    # OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(InvalidRecordError):
    """A batch that repeats one already written (Kafka answers it as a success since 2.x)."""

    kafka_error = 46    # DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(InvalidRecordError):
    """A producer epoch below the one the partition last saw (InvalidProducerEpochException)."""

    kafka_error = 47    # INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(InvalidRecordError):
    """A transactional write that does not fit the producer's transaction state."""

    kafka_error = 48    # INVALID_TXN_STATE


class UnknownProducerIdError(InvalidRecordError):
    """A producer id the partition has no state for, where state is required."""

    kafka_error = 59    # UNKNOWN_PRODUCER_ID


class OffsetOutOfRangeError(CompactlogError):
    """A read below the log start offset or above the log end offset."""

    kafka_error = 1     # OFFSET_OUT_OF_RANGE


class ConfigError(CompactlogError):
    """An unknown configuration name or a value out of its valid range."""

    kafka_error = 40    # INVALID_CONFIG


class TopicError(CompactlogError):
    """A topic that does not exist, exists already, or has an invalid name."""

    kafka_error = 3     # UNKNOWN_TOPIC_OR_PARTITION


class UnknownTopicError(TopicError):
    """A topic or partition that does not exist."""

    kafka_error = 3     # UNKNOWN_TOPIC_OR_PARTITION


class TopicExistsError(TopicError):
    """A topic created twice."""

    kafka_error = 36    # TOPIC_ALREADY_EXISTS


class InvalidTopicError(TopicError):
    """A topic name Kafka refuses (characters, length, ``.``/``..``)."""

    kafka_error = 17    # INVALID_TOPIC_EXCEPTION


class StorageError(CompactlogError):
    """A partition directory or file that cannot be used as it is."""

    kafka_error = 56    # KAFKA_STORAGE_ERROR


class DataDirLockedError(StorageError):
    """Another writer (a compactlog process or a Kafka broker) holds the data dir's ``.lock``."""

    kafka_error = UNKNOWN_SERVER_ERROR

    def __init__(self, data_dir: str, pid: int | None, holder: str):
        self.data_dir = data_dir
        self.pid = pid
        self.holder = holder
        who = f"pid {pid} ({holder})" if pid is not None else holder
        super().__init__(f"{data_dir}: the data directory is locked by another writer, {who}; "
                         f"stop it or wait for it to finish before running a command that writes "
                         f"(read-only commands work meanwhile)")


class ReadOnlyError(StorageError):
    """A write attempted through a data dir or log opened read-only."""
