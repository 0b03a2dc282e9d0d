"""The record-section codecs of Kafka batches, with the framings Kafka's readers accept.

Written as Kafka writes them: gzip (RFC 1952), snappy in the xerial snappy-java stream framing,
lz4 as a frame with independent 64 KiB blocks and no checksums, zstd as a plain frame.
Read: the same, plus raw snappy blocks (written by some non-Java clients) and any valid lz4 frame.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from ..errors import CorruptRecordError

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CODEC_BY_NAME = {name: code for code, name in CODEC_NAMES.items()}
CODEC_BY_NAME["uncompressed"] = NONE

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024

LZ4_MAGIC = b"\x04\x22\x4d\x18"
LZ4_BLOCK_SIZE = 64 * 1024
LZ4_FLG = 0x60  # version 01, independent blocks, no block/content checksum, no content size
LZ4_BD = 0x40   # 64 KiB maximum block size


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32, only for the 2-byte lz4 frame descriptor (the header checksum)."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x, r):
        return ((x << r) | (x >> (32 - r))) & mask

    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + p1 + p2) & mask, (seed + p2) & mask, seed & mask, (seed - p1) & mask]
        while i + 16 <= n:
            for j in range(4):
                lane = int.from_bytes(data[i:i + 4], "little")
                v[j] = (rotl((v[j] + lane * p2) & mask, 13) * p1) & mask
                i += 4
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & mask
    else:
        h = (seed + p5) & mask
    h = (h + n) & mask
    while i + 4 <= n:
        h = (rotl((h + int.from_bytes(data[i:i + 4], "little") * p3) & mask, 17) * p4) & mask
        i += 4
    while i < n:
        h = (rotl((h + data[i] * p5) & mask, 11) * p1) & mask
        i += 1
    h ^= h >> 15
    h = (h * p2) & mask
    h ^= h >> 13
    h = (h * p3) & mask
    h ^= h >> 16
    return h


LZ4_FRAME_HEADER = LZ4_MAGIC + bytes([LZ4_FLG, LZ4_BD, (_xxh32(bytes([LZ4_FLG, LZ4_BD])) >> 8) & 0xFF])


def compress(codec: int, data: bytes) -> bytes:
    """Compress a records section with the codec's default level, in Kafka's framing."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        c = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _snappy_xerial_compress(data)
    if codec == LZ4:
        return _lz4_frame_compress(data)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(bytes(data), level=3))
    raise CorruptRecordError(f"unknown compression codec {codec}", field="attributes")


def decompress(codec: int, data) -> bytes:
    """Decompress a records section; raises CorruptRecordError on bad input."""
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return _gzip_decompress(bytes(data))
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(bytes(data)))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except CorruptRecordError:
        raise
    except Exception as e:  # the codec libraries raise assorted error types
        raise CorruptRecordError(f"cannot decompress {CODEC_NAMES.get(codec, codec)} data: {e}",
                                 field="records") from None
    raise CorruptRecordError(f"unknown compression codec {codec}", field="attributes")


def _gzip_decompress(data: bytes) -> bytes:
    """As Java's GZIPInputStream: concatenated members are read on; bytes after the last member
    that do not start another gzip header are ignored; a truncated member is an error."""
    parts = []
    while True:
        d = zlib.decompressobj(31)
        parts.append(d.decompress(data))
        if not d.eof:
            raise CorruptRecordError("truncated gzip stream", field="records")
        data = d.unused_data
        if not data.startswith(b"\x1f\x8b\x08"):
            return b"".join(parts)


def lz4_fix_header_checksum(data: bytes) -> bytes:
    """The lz4 frame with its header checksum byte recomputed.

    Kafka wrote magic v0 lz4 wrappers with a wrong header checksum (computed over the magic too)
    and reads them ignoring it; this lets a strict frame decoder read them.
    """
    data = bytes(data)
    if len(data) < 7 or not data.startswith(LZ4_MAGIC):
        return data
    flg = data[4]
    hc_pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if hc_pos >= len(data):
        return data
    hc = (_xxh32(data[4:hc_pos]) >> 8) & 0xFF
    return data[:hc_pos] + bytes([hc]) + data[hc_pos + 1:]


def _snappy_xerial_compress(data: bytes) -> bytes:
    out = [XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(bytes(view[start:start + XERIAL_BLOCK_SIZE])))
        out.append(struct.pack(">i", len(block)))
        out.append(block)
    return b"".join(out)


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    pos = 16
    parts = []
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("truncated snappy block length", field="records")
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise CorruptRecordError(f"snappy block length {n} out of range", field="records")
        parts.append(bytes(cramjam.snappy.decompress_raw(data[pos:pos + n])))
        pos += n
    return b"".join(parts)


def _lz4_frame_compress(data: bytes) -> bytes:
    out = [LZ4_FRAME_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), LZ4_BLOCK_SIZE):
        raw = bytes(view[start:start + LZ4_BLOCK_SIZE])
        block = bytes(cramjam.lz4.compress_block(raw, store_size=False))
        if len(block) >= len(raw):
            out.append(struct.pack("<I", len(raw) | 0x80000000))
            out.append(raw)
        else:
            out.append(struct.pack("<I", len(block)))
            out.append(block)
    out.append(b"\x00\x00\x00\x00")
    return b"".join(out)
