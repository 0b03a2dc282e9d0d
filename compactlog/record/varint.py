"""Varints as Kafka writes them: unsigned LEB128, and ZigZag (LEB128 of the zigzag value).

Pure Python, for single values; the bulk paths use the numba kernels in ``kernels``.
"""

from __future__ import annotations

from ..errors import CorruptRecordError


def zigzag_encode(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def zigzag_decode(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


def encode_uvarint(u: int) -> bytes:
    """Encode a non-negative int as an unsigned varint (Kafka's ByteUtils.writeUnsignedVarint:
    the lengths and counts of the flexible protocol versions)."""
    if u < 0x80:
        return bytes((u,))
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _encode_varint(n: int) -> bytes:
    return encode_uvarint(zigzag_encode(n) & 0xFFFFFFFFFFFFFFFF)


# the varints of -1 (a null key or value) to 1023: a small record's lengths and deltas, looked up
# (a coordinator's record is four of them: issue 28)
_SMALL_VARINTS = tuple(_encode_varint(n) for n in range(-1, 1024))


def encode_varint(n: int) -> bytes:
    """Encode a signed int32/int64 as a zigzag varint."""
    if -1 <= n < 1024:
        return _SMALL_VARINTS[n + 1]
    return _encode_varint(n)


def varint_size(n: int) -> int:
    u = zigzag_encode(n) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


def decode_varint(buf, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Decode a zigzag varint at ``pos``; returns (value, next position).

    ``max_bytes`` is 5 for varint (int32) and 10 for varlong, as Kafka enforces.
    """
    u = 0
    shift = 0
    end = len(buf)
    for i in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError("truncated varint", position=pos)
        b = int(buf[pos])   # also for numpy buffers (no uint8 arithmetic)
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            # Kafka reads into a Java int/long: bits past 32 (varint) or 64 (varlong) are lost
            u &= 0xFFFFFFFF if max_bytes <= 5 else 0xFFFFFFFFFFFFFFFF
            return zigzag_decode(u), pos
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes", position=pos)
