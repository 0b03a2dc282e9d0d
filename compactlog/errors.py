"""Errors raised by compactlog.

Every error that reaches a user names what is wrong: the file, the byte position or offset, the
field and its value, so that one line is enough to find the problem.

Each class names, in ``kafka_error_name``, the member of kio's ``ErrorCode`` (Kafka's ``Errors``
enum, the one table of Kafka error codes compactlog uses) that a broker answers for it; Kafka maps
its exception classes to codes the same way, in ``Errors.forException``. A request handler reads
``error.kafka_error``, that member, so it picks the code from the class and never from the
message. ``unknown_server_error`` (-1) is the answer for anything without a more precise code.

The member is looked up on first use, not when this module is imported: importing
``kio.schema.errors`` costs about 125 ms (it pulls in hypothesis), which every CLI command would
pay at start-up, while only the broker ever needs the codes.
"""

from __future__ import annotations

import functools


@functools.cache
def kafka_error_code(name: str):
    """kio's ``ErrorCode`` member called ``name`` (imported here, on the first call)."""
    from kio.schema.errors import ErrorCode
    return ErrorCode[name]


class _KafkaErrorCode:
    """``kafka_error``: the ErrorCode member named by the class's ``kafka_error_name``."""

    def __get__(self, instance, owner):
        return kafka_error_code(owner.kafka_error_name)


class CompactlogError(Exception):
    """Base class of every error compactlog raises on purpose."""

    kafka_error_name = "unknown_server_error"
    kafka_error = _KafkaErrorCode()


class CorruptRecordError(CompactlogError):
    """Bytes that do not decode as Kafka records (Kafka's CorruptRecordException/InvalidRecordException)."""

    kafka_error_name = "corrupt_message"

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

    kafka_error_name = "invalid_record"

    def __init__(self, message: str = "", *, record_errors: list[tuple[int, str | None]] | None = None):
        super().__init__(message)
        self.record_errors = list(record_errors or [])


class RecordTooLargeError(InvalidRecordError):
    """A batch larger than max.message.bytes (Kafka's RecordTooLargeException)."""

    kafka_error_name = "message_too_large"


class RecordListTooLargeError(RecordTooLargeError):
    """A validated batch larger than segment.bytes (Kafka's RecordBatchTooLargeException)."""

    kafka_error_name = "record_list_too_large"


class InvalidTimestampError(InvalidRecordError):
    """A record timestamp outside message.timestamp.before/after.max.ms (InvalidTimestampException)."""

    kafka_error_name = "invalid_timestamp"


class OutOfOrderSequenceError(InvalidRecordError):
    """An idempotent producer's batch whose first sequence does not follow the last one."""

    kafka_error_name = "out_of_order_sequence_number"


class DuplicateSequenceError(InvalidRecordError):
    """A batch that repeats one already written (Kafka answers it as a success since 2.x)."""

    kafka_error_name = "duplicate_sequence_number"


class InvalidProducerEpochError(InvalidRecordError):
    """A producer epoch below the one the partition last saw (InvalidProducerEpochException)."""

    kafka_error_name = "invalid_producer_epoch"


class InvalidTxnStateError(InvalidRecordError):
    """A transactional write that does not fit the producer's transaction state."""

    kafka_error_name = "invalid_txn_state"


class TransactionCoordinatorFencedError(InvalidRecordError):
    """A transaction marker whose coordinator epoch is older than the one the partition last saw
    from its producer: written by a coordinator that has since been replaced
    (TransactionCoordinatorFencedException)."""

    kafka_error_name = "transaction_coordinator_fenced"


class UnknownProducerIdError(InvalidRecordError):
    """A producer id the partition has no state for, where state is required."""

    kafka_error_name = "unknown_producer_id"


class OffsetOutOfRangeError(CompactlogError):
    """A read below the log start offset or above the log end offset."""

    kafka_error_name = "offset_out_of_range"


class ConfigError(CompactlogError):
    """An unknown configuration name or a value out of its valid range."""

    kafka_error_name = "invalid_config"


class TopicError(CompactlogError):
    """A topic that does not exist, exists already, or has an invalid name."""

    kafka_error_name = "unknown_topic_or_partition"


class UnknownTopicError(TopicError):
    """A topic or partition that does not exist."""

    kafka_error_name = "unknown_topic_or_partition"


class TopicExistsError(TopicError):
    """A topic created twice."""

    kafka_error_name = "topic_already_exists"


class InvalidTopicError(TopicError):
    """A topic name Kafka refuses (characters, length, ``.``/``..``)."""

    kafka_error_name = "invalid_topic_exception"


class StorageError(CompactlogError):
    """A partition directory or file that cannot be used as it is."""

    kafka_error_name = "kafka_storage_error"


class LogOfflineError(StorageError):
    """A partition taken offline after a write it could not undo, or a failed fsync (after which
    the kernel may have dropped the pages it could not write): every read and write of it is
    refused (KAFKA_STORAGE_ERROR) until the writer restarts and recovery checks its files, as
    Kafka's LogDirFailureChannel takes a log dir offline."""


class LogChangedError(StorageError):
    """A read-only reader could not hold one consistent state of a partition: a writer beside it
    (a broker's cleaner or retention) kept swapping or deleting the segment files it needed. The
    read stops rather than return records of two states of the log; running it again reads one."""


class DataDirLockedError(StorageError):
    """Another writer (a compactlog process or a Kafka broker) holds the data dir's ``.lock``."""

    kafka_error_name = "unknown_server_error"

    def __init__(self, data_dir: str, pid: int | None, holder: str, *, bootstrap: str | None = None):
        self.data_dir = data_dir
        self.pid = pid
        self.holder = holder
        self.bootstrap = bootstrap      # the address of the broker that holds it, when it said
        who = f"pid {pid} ({holder})" if pid is not None else holder
        if bootstrap:
            super().__init__(f"{data_dir}: the data directory is locked by another writer, {who}, a broker "
                             f"listening on {bootstrap}; write through it (--bootstrap-server {bootstrap}) "
                             f"or stop it first (read-only commands work meanwhile)")
            return
        super().__init__(f"{data_dir}: the data directory is locked by another writer, {who}; "
                         f"stop it or wait for it to finish before running a command that writes "
                         f"(read-only commands work meanwhile)")


class ReadOnlyError(StorageError):
    """A write attempted through a data dir or log opened read-only."""
