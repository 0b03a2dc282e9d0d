"""Control records (record-format.md §7): keys, marker values, marker batches."""

from __future__ import annotations

import struct

import pytest

from compactlog.errors import CorruptRecordError
from compactlog.record import compression
from compactlog.record.batch import BatchSpec, Record, encode_batch, encode_marker, iter_batches
from compactlog.record.control import (ABORT, COMMIT, CONTROL_TYPE_NAMES, UNKNOWN, ControlKey, control_key, marker_value, parse_control_key, parse_marker_value)


def test_key_and_value_layout():
    assert control_key(ABORT) == bytes.fromhex("00 00 00 00")
    assert control_key(COMMIT) == bytes.fromhex("00 00 00 01")
    assert marker_value(0) == bytes.fromhex("00 00 00 00 00 00")
    assert marker_value(0x01020304) == bytes.fromhex("00 00 01 02 03 04")
    assert parse_marker_value(marker_value(77)) == 77
    assert parse_marker_value(marker_value(-5)) == -5


@pytest.mark.parametrize("ctype", sorted(CONTROL_TYPE_NAMES))
def test_known_types(ctype):
    key = parse_control_key(struct.pack(">hh", 0, ctype))
    assert key == ControlKey(0, ctype)
    assert key.name == CONTROL_TYPE_NAMES[ctype]


def test_names():
    assert CONTROL_TYPE_NAMES[0] == "ABORT" and CONTROL_TYPE_NAMES[1] == "COMMIT"
    assert ControlKey(0, UNKNOWN).name == "UNKNOWN"


@pytest.mark.parametrize("ctype", [7, 100, 32767, -1, -32768])
def test_unknown_type_is_not_an_error(ctype):
    assert parse_control_key(struct.pack(">hh", 0, ctype)).type == UNKNOWN


@pytest.mark.parametrize("version", [1, 2, 32767])
def test_higher_versions_read_by_their_first_fields(version):
    # a newer key version may carry more fields after version and type
    key = struct.pack(">hh", version, COMMIT) + b"\x01\x02\x03"
    assert parse_control_key(key) == ControlKey(version, COMMIT)


@pytest.mark.parametrize("version", [-1, -2, -32768])
def test_negative_version_is_corrupt(version):
    with pytest.raises(CorruptRecordError) as e:
        parse_control_key(struct.pack(">hh", version, COMMIT))
    assert e.value.field == "key"


@pytest.mark.parametrize("key", [None, b"", b"\x00", b"\x00\x00\x00"])
def test_short_or_null_key_is_corrupt(key):
    with pytest.raises(CorruptRecordError):
        parse_control_key(key)


@pytest.mark.parametrize("value", [None, b"", b"\x00\x00\x00\x00\x00", b"\xff\xff\x00\x00\x00\x00"])
def test_bad_marker_value(value):
    with pytest.raises(CorruptRecordError):
        parse_marker_value(value)


def test_marker_value_higher_version_ok():
    assert parse_marker_value(struct.pack(">hi", 1, 9) + b"extra") == 9


@pytest.mark.parametrize("commit", [True, False])
def test_encode_marker(commit):
    raw = encode_marker(offset=41, commit=commit, producer_id=123456789, producer_epoch=7,
                        coordinator_epoch=3, timestamp=1_600_000_000_000, partition_leader_epoch=5)
    assert len(raw) == 78
    (b,) = iter_batches(raw)
    h = b.header
    assert h.attributes == 0x30 and h.is_control and h.is_transactional
    assert h.compression == compression.NONE and h.timestamp_type == 0
    assert (h.base_offset, h.last_offset_delta, h.records_count) == (41, 0, 1)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (123456789, 7, -1)
    assert h.partition_leader_epoch == 5
    assert b.is_valid()
    assert b.control_type() == (COMMIT if commit else ABORT)
    (r,) = b.records()
    assert r == Record(41, 1_600_000_000_000, control_key(COMMIT if commit else ABORT),
                       marker_value(3), ())
    assert parse_marker_value(r.value) == 3
    # record of 17 bytes (§7): length varint 16 = 0x20 + 16 body bytes
    assert raw[61] == 0x20 and len(raw) - 61 == 17


@pytest.mark.parametrize("commit", [True, False])
@pytest.mark.parametrize("coordinator_epoch", [0, 3, 2**31 - 1])
def test_encode_marker_is_the_general_encoders_batch(commit, coordinator_epoch):
    """``encode_marker`` packs the header itself around a cached records section: byte for byte
    the batch ``encode_batch`` makes of the same control record."""
    for offset, timestamp, epoch in ((0, 0, 0), (41, 1_600_000_000_000, 5), (2**40, 1_700_000_000_123, -1)):
        spec = BatchSpec(base_offset=offset, partition_leader_epoch=epoch, transactional=True, control=True,
                         producer_id=123456789, producer_epoch=7)
        general = encode_batch(spec, [(offset, timestamp, control_key(COMMIT if commit else ABORT),
                                       marker_value(coordinator_epoch))])
        assert encode_marker(offset=offset, commit=commit, producer_id=123456789, producer_epoch=7,
                             coordinator_epoch=coordinator_epoch, timestamp=timestamp,
                             partition_leader_epoch=epoch) == general


def _control_batch(key, value=b"\x00" * 6):
    spec = BatchSpec(transactional=True, control=True, producer_id=1, producer_epoch=0)
    return encode_batch(spec, [(0, 10, key, value)])


def test_control_type_of_batches():
    (b,) = iter_batches(_control_batch(struct.pack(">hh", 0, 5)))
    assert b.control_type() == 5
    (b,) = iter_batches(_control_batch(struct.pack(">hh", 3, 200) + b"zz"))
    assert b.control_type() == UNKNOWN
    (b,) = iter_batches(_control_batch(struct.pack(">hh", -1, COMMIT)))
    with pytest.raises(CorruptRecordError):
        b.control_type()
    (b,) = iter_batches(_control_batch(None))
    with pytest.raises(CorruptRecordError):
        b.control_type()
    (b,) = iter_batches(_control_batch(b"\x00\x01"))
    with pytest.raises(CorruptRecordError):
        b.control_type()
    # a data batch has no control type, even with a marker-like key
    (b,) = iter_batches(encode_batch(BatchSpec(), [(0, 1, control_key(COMMIT), marker_value(0))]))
    assert b.control_type() is None
