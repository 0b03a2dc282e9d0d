"""ZigZag varints (record-format.md §1), against the spec's examples and Kafka's reader limits."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from compactlog.errors import CorruptRecordError
from compactlog.record.varint import (decode_varint, encode_uvarint, encode_varint, varint_size,
                                      zigzag_decode, zigzag_encode)

INT32 = st.integers(-(2 ** 31), 2 ** 31 - 1)
INT64 = st.integers(-(2 ** 63), 2 ** 63 - 1)

SPEC_EXAMPLES = [
    (0, "00"), (-1, "01"), (1, "02"), (2, "04"), (3, "06"), (5, "0a"), (11, "16"), (63, "7e"),
    (64, "80 01"), (-86499980, "97 8a bf 52"),
]


@pytest.mark.parametrize("value,hexed", SPEC_EXAMPLES)
def test_spec_examples(value, hexed):
    raw = bytes.fromhex(hexed)
    assert encode_varint(value) == raw
    assert varint_size(value) == len(raw)
    assert decode_varint(raw, 0) == (value, len(raw))
    assert decode_varint(raw, 0, 10) == (value, len(raw))


def test_extremes():
    assert encode_varint(2 ** 31 - 1) == bytes.fromhex("fe ff ff ff 0f")
    assert encode_varint(-(2 ** 31)) == bytes.fromhex("ff ff ff ff 0f")
    assert encode_varint(2 ** 63 - 1) == bytes.fromhex("fe ff ff ff ff ff ff ff ff 01")
    assert encode_varint(-(2 ** 63)) == bytes.fromhex("ff ff ff ff ff ff ff ff ff 01")
    assert decode_varint(encode_varint(-(2 ** 63)), 0, 10) == (-(2 ** 63), 10)


@pytest.mark.parametrize("value,hexed", [
    (0, "00"), (1, "01"), (127, "7f"), (128, "80 01"), (300, "ac 02"), (16383, "ff 7f"),
    (16384, "80 80 01"), (2 ** 32 - 1, "ff ff ff ff 0f"),
])
def test_unsigned_varint(value, hexed):
    # the flexible protocol versions' compact lengths (Kafka's ByteUtils.writeUnsignedVarint)
    assert encode_uvarint(value) == bytes.fromhex(hexed)


@given(INT64)
def test_zigzag_varint_is_the_unsigned_varint_of_the_zigzag_value(n):
    assert encode_varint(n) == encode_uvarint(zigzag_encode(n) & 0xFFFFFFFFFFFFFFFF)


@given(INT32)
def test_varint_round_trip(n):
    raw = encode_varint(n)
    assert len(raw) <= 5 and len(raw) == varint_size(n)
    assert decode_varint(raw + b"\x99", 0) == (n, len(raw))


@given(INT64)
def test_varlong_round_trip(n):
    raw = encode_varint(n)
    assert len(raw) <= 10 and len(raw) == varint_size(n)
    assert decode_varint(b"\x00" + raw, 1, 10) == (n, 1 + len(raw))


@given(INT64)
def test_zigzag(n):
    u = zigzag_encode(n) & 0xFFFFFFFFFFFFFFFF
    assert zigzag_decode(u) == n
    # small magnitudes map to small unsigned values, alternating sign
    if 0 <= n < 2 ** 62:
        assert u == 2 * n
    elif -(2 ** 62) <= n < 0:
        assert u == -2 * n - 1


def test_too_long():
    with pytest.raises(CorruptRecordError, match="longer than 5"):
        decode_varint(bytes([0x80] * 5 + [0x01]), 0)
    with pytest.raises(CorruptRecordError, match="longer than 10"):
        decode_varint(bytes([0x80] * 10 + [0x01]), 0, 10)
    # exactly 5 / 10 bytes are fine
    assert decode_varint(bytes([0x80] * 4 + [0x01]), 0) == (zigzag_decode(1 << 28), 5)


def test_truncated():
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_varint(b"", 0)


def test_five_byte_varint_wraps_to_32_bits_like_java():
    # Kafka accumulates into a Java int: the top bits of the 5th byte are lost.
    # ff ff ff ff 7f has u = 2^35 - 1; as an int that is 0xFFFFFFFF -> zigzag -2^31.
    assert decode_varint(bytes.fromhex("ff ff ff ff 7f"), 0) == (-(2 ** 31), 5)
    # 80 80 80 80 10: bit 32 only -> 0 as an int
    assert decode_varint(bytes.fromhex("80 80 80 80 10"), 0) == (0, 5)
    # the numba reader agrees
    import numpy as np
    from compactlog.record import kernels
    for raw in (bytes.fromhex("ff ff ff ff 7f"), bytes.fromhex("80 80 80 80 10"),
                bytes.fromhex("fe ff ff ff 0f")):
        v, p = kernels._read_varint(np.frombuffer(raw, np.uint8), 0, len(raw))
        assert (int(v), int(p)) == decode_varint(raw, 0)


def test_decode_from_numpy_and_memoryview_buffers():
    import numpy as np
    raw = encode_varint(-(2 ** 31)) + encode_varint(2 ** 62)
    for buf in (np.frombuffer(raw, np.uint8), memoryview(raw), bytearray(raw)):
        v, p = decode_varint(buf, 0)
        assert (v, p) == (-(2 ** 31), 5) and type(v) is int
        assert decode_varint(buf, p, 10) == (2 ** 62, len(raw))


def test_the_looked_up_small_varints_are_the_encoding():
    # -1 .. 1023 come from a table; every one, and its edges, is the encoding of its zigzag value
    for n in range(-70, 1100):
        assert encode_varint(n) == encode_uvarint(zigzag_encode(n) & 0xFFFFFFFFFFFFFFFF), n
        assert decode_varint(encode_varint(n), 0) == (n, len(encode_varint(n)))
