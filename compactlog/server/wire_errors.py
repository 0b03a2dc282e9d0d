"""A failure as a client sees it: Kafka's error code for it, and a message naming no server file.

Kafka's ``Errors.forException`` picks a code by the exception's class; an I/O failure of a log dir
is a ``KafkaStorageException`` (KAFKA_STORAGE_ERROR) for the partitions it holds, and the
coordinators, whose state lives in ``__consumer_offsets`` / ``__transaction_state``, answer
COORDINATOR_NOT_AVAILABLE while they cannot use it (GroupCoordinator / TransactionCoordinator).
Here the same rules apply to compactlog's exceptions and to ``OSError`` (a full disk, a read-only
mount, an I/O error), in one place: the request handlers that answer per partition or per
resource call ``partition_error`` / ``coordinator_error``, and the transport calls
``request_error`` for an exception no handler caught.

The broker logs the full error, with its paths; the message on the wire is scrubbed
(``scrub``): paths inside the data dir become partition-relative (``t-0/00000000000000000000.log``),
any other absolute path its file name, so that a client never learns the server's layout.
"""

from __future__ import annotations

import os
import re

from kio.schema.errors import ErrorCode

from ..errors import CompactlogError, DataDirLockedError, ReadOnlyError, StorageError

STORAGE_MESSAGE = "Disk error when trying to access log file on the disk"
COORDINATOR_MESSAGE = "The coordinator is not available."

_ABSOLUTE_PATH = re.compile(r"(?<![\w.])/(?:[^\s'\":,;()\[\]]+/)*([^\s'\":,;()\[\]/]+)")


def is_storage_failure(e: BaseException) -> bool:
    """An I/O failure of the data dir: any OSError, or a StorageError other than the ones that are
    a caller's mistake (a read-only open, a lock held by another writer)."""
    if isinstance(e, OSError):
        return True
    return isinstance(e, StorageError) and not isinstance(e, (ReadOnlyError, DataDirLockedError))


def scrub(message: str, data_dir: str | None) -> str:
    """``message`` without server paths: inside ``data_dir`` relative to it, elsewhere the base name."""
    if data_dir:
        root = os.path.abspath(data_dir).rstrip(os.sep) + os.sep
        message = message.replace(root, "")
    return _ABSOLUTE_PATH.sub(lambda m: m.group(1), message)


def _reason(e: BaseException, data_dir: str | None) -> str:
    if isinstance(e, OSError):
        return e.strerror or type(e).__name__
    return scrub(str(e), data_dir)


def partition_error(e: BaseException, data_dir: str | None) -> tuple[ErrorCode, str]:
    """A data partition's failure: (code, message). I/O -> KAFKA_STORAGE_ERROR; a compactlog
    error -> its own code; anything else -> UNKNOWN_SERVER_ERROR."""
    if isinstance(e, OSError):
        return ErrorCode.kafka_storage_error, f"{STORAGE_MESSAGE}: {_reason(e, data_dir)}"
    if isinstance(e, CompactlogError):
        return e.kafka_error, scrub(str(e), data_dir)
    return ErrorCode.unknown_server_error, f"{type(e).__name__}: {scrub(str(e), data_dir)}"


def admin_error(e: BaseException, data_dir: str | None) -> tuple[ErrorCode, str | None]:
    """A topic or config change that failed on the data dir: KAFKA_STORAGE_ERROR for a storage
    failure (with its reason), UNKNOWN_SERVER_ERROR without a message otherwise (a bug: the log
    has it)."""
    if is_storage_failure(e):
        return partition_error(e, data_dir) if isinstance(e, OSError) else \
            (ErrorCode.kafka_storage_error, scrub(str(e), data_dir))
    return ErrorCode.unknown_server_error, None


def coordinator_error(e: BaseException, data_dir: str | None) -> tuple[ErrorCode, str]:
    """A coordinator's failure: a storage one -> COORDINATOR_NOT_AVAILABLE."""
    if is_storage_failure(e):
        return ErrorCode.coordinator_not_available, f"{COORDINATOR_MESSAGE} ({_reason(e, data_dir)})"
    return partition_error(e, data_dir)


def request_error(e: BaseException, coordinator: bool, data_dir: str | None) -> tuple[ErrorCode, str]:
    """What the transport answers for an exception a handler did not catch (its message names
    the exception's class, as Kafka's ``ApiError.fromThrowable`` does); ``coordinator``: the API
    is a coordinator's (``ApiHandler.coordinator``: a storage failure makes it unavailable)."""
    code, message = coordinator_error(e, data_dir) if coordinator else partition_error(e, data_dir)
    if isinstance(e, CompactlogError) and not (coordinator and is_storage_failure(e)):
        message = f"{type(e).__name__}: {message}"
    return code, message
