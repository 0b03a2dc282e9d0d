"""Each error class names its Kafka error code as a member of kio's ErrorCode, resolved on first
use: the codes are those Kafka answers for these exceptions, and importing the module does not
import kio (the CLI's start-up must not pay for it)."""

from __future__ import annotations

import os
import subprocess
import sys

from kio.schema.errors import ErrorCode

from compactlog import errors

# the codes each class carried as plain ints before they named kio's members
EXPECTED = {
    errors.CompactlogError: -1, errors.CorruptRecordError: 2, errors.InvalidRecordError: 87,
    errors.RecordTooLargeError: 10, errors.RecordListTooLargeError: 18,
    errors.InvalidTimestampError: 32, errors.OutOfOrderSequenceError: 45,
    errors.DuplicateSequenceError: 46, errors.InvalidProducerEpochError: 47,
    errors.InvalidTxnStateError: 48, errors.UnknownProducerIdError: 59,
    errors.TransactionCoordinatorFencedError: 52,
    errors.OffsetOutOfRangeError: 1, errors.ConfigError: 40, errors.TopicError: 3,
    errors.UnknownTopicError: 3, errors.TopicExistsError: 36, errors.InvalidTopicError: 17,
    errors.StorageError: 56, errors.DataDirLockedError: -1, errors.ReadOnlyError: 56,
    errors.LogChangedError: 56, errors.LogOfflineError: 56,
}


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_class_names_a_kio_member_with_kafkas_code():
    classes = {errors.CompactlogError, *(c for c in _subclasses(errors.CompactlogError)
                                         if c.__module__ == errors.__name__)}
    assert classes == set(EXPECTED)
    for cls, code in EXPECTED.items():
        assert cls.kafka_error is ErrorCode[cls.kafka_error_name]
        assert cls.kafka_error == code, cls.__name__


def test_instances_answer_the_class_code():
    e = errors.InvalidTimestampError("too old", record_errors=[(0, "x")])
    assert e.kafka_error is ErrorCode.invalid_timestamp
    assert errors.DataDirLockedError("/d", 1, "kafka").kafka_error is ErrorCode.unknown_server_error


def test_importing_errors_does_not_import_kio():
    code = "import sys, compactlog.errors; print(sorted(m for m in sys.modules if m.startswith('kio')))"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": root}, cwd=root)
    assert out.stdout.strip() == "[]"
