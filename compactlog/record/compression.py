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


# --- bounded decompression ---------------------------------------------------------------------
#
# Kafka checks a batch's size against max.message.bytes before it is written, but never what its
# records section inflates to: a 32 KiB zstd section of RLE blocks inflates to 1 GiB with a valid
# CRC. Kafka's readers stream records out of the codec and never hold a section; the numba record
# kernels here need the whole section in memory, so its size is capped instead. The cap is
# DECOMPRESSION_RATIO x the largest batch size that can be legal: 64 x max(max.message.bytes,
# the batch's own size, Kafka's default message.max.bytes). Real record sections compress 2-20x
# (text, JSON, Avro), highly repetitive ones a few hundred times at most, so a batch a real producer
# wrote stays far below the cap (64 MiB at the default 1 MiB limit), while a decompression bomb
# is refused after at most that many bytes. The default message.max.bytes is a floor because the
# topic's limit may have been lowered after older, bigger batches were written.

DECOMPRESSION_RATIO = 64
DEFAULT_MAX_MESSAGE_BYTES = 1048588   # Kafka's default message.max.bytes (1 MiB + record overhead)
_GZIP_STEP = 4 << 20                  # gzip output per zlib call (bounds the transient copy)
_ZSTD_BLOCK_MAX = 128 * 1024          # zstd: a compressed block never regenerates more than this
_LZ4_BLOCK_MAX = {4: 64 * 1024, 5: 256 * 1024, 6: 1 << 20, 7: 4 << 20}


class DecompressedSizeError(CorruptRecordError):
    """A compressed records section that inflates past the decompression limit.

    A subclass of CorruptRecordError so that every reader refuses the batch, but distinct because
    the batch itself may be valid for Kafka (its CRC matches): recovery must not cut a log there.
    """


def decompressed_limit(max_message_bytes: int, compressed_size: int = 0) -> int:
    """The most bytes a records section of ``compressed_size`` bytes may inflate to, for a topic
    whose max.message.bytes is ``max_message_bytes`` (see the comment above)."""
    return DECOMPRESSION_RATIO * max(int(max_message_bytes), int(compressed_size), DEFAULT_MAX_MESSAGE_BYTES)


def _too_big(name: str, limit: int, detail: str = "") -> DecompressedSizeError:
    return DecompressedSizeError(
        f"{name} records section inflates past the decompression limit of {limit} bytes "
        f"({DECOMPRESSION_RATIO} x max.message.bytes{detail}): refused as a decompression bomb",
        field="records")


def decompress(codec: int, data, *, max_size: int | None = None):
    """Decompress a records section; raises CorruptRecordError on bad input.

    The output never exceeds ``max_size`` bytes (default: ``decompressed_limit`` of Kafka's default
    message.max.bytes and this section's size). A section that would inflate further raises
    DecompressedSizeError as soon as that is known: no codec sizes its output from a length the
    input claims, so memory stays bounded by the limit. Returns a bytes-like object (``bytes`` or
    ``bytearray``).
    """
    if max_size is None:
        max_size = decompressed_limit(DEFAULT_MAX_MESSAGE_BYTES, len(data))
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return _gzip_decompress(data, max_size)
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data), max_size)
        if codec == LZ4:
            return _decompress_into(cramjam.lz4, "lz4", data, _lz4_frame_bound(data, max_size), max_size)
        if codec == ZSTD:
            return _decompress_into(cramjam.zstd, "zstd", data, _zstd_frame_bound(data, max_size), max_size)
    except CorruptRecordError:
        raise
    except Exception as e:  # the codec libraries raise assorted error types
        raise CorruptRecordError(f"cannot decompress {CODEC_NAMES.get(codec, codec)} data: {e}",
                                 field="records") from None
    raise CorruptRecordError(f"unknown compression codec {codec}", field="attributes")


def _decompress_into(module, name: str, data, bound: tuple[int, int], limit: int) -> bytearray:
    """Decompress into a buffer of min(upper bound, limit + 1) bytes; writing past it fails."""
    exact, upper = bound
    if exact > limit:
        # raw and RLE blocks alone regenerate more than the limit: refused without decompressing
        raise _too_big(name, limit, f"; its blocks declare at least {exact} bytes")
    out = bytearray(min(upper, limit + 1))
    try:
        n = module.decompress_into(bytes(data), out)
    except Exception as e:  # noqa: BLE001 - cramjam's DecompressionError and friends
        if upper > limit and "whole buffer" in str(e):
            raise _too_big(name, limit) from None
        raise CorruptRecordError(f"cannot decompress {name} data: {e}", field="records") from None
    if n > limit:
        raise _too_big(name, limit)
    del out[n:]
    return out


def _frame_start(view, pos: int, name: str) -> tuple[int, int | None]:
    """(magic number of the frame at ``pos``, the position after it when it is a skippable frame,
    else None): zstd and lz4 frames share the skippable frame format (magic 0x184D2A5?)."""
    n = len(view)
    if pos + 4 > n:
        raise CorruptRecordError(f"truncated {name} frame at byte {pos}", field="records")
    magic = int.from_bytes(view[pos:pos + 4], "little")
    if not 0x184D2A50 <= magic <= 0x184D2A5F:
        return magic, None
    if pos + 8 > n:
        raise CorruptRecordError(f"truncated skippable {name} frame at byte {pos}", field="records")
    return magic, pos + 8 + int.from_bytes(view[pos + 4:pos + 8], "little")


def _zstd_frame_bound(data, limit: int) -> tuple[int, int]:
    """(bytes the raw and RLE blocks regenerate, an upper bound of the whole output) of the zstd
    frames in ``data``, from the block headers alone (RFC 8878 §3.1); stops once past ``limit``."""
    view = memoryview(data)
    n = len(view)
    pos = exact = upper = 0
    while pos < n:
        magic, skip_to = _frame_start(view, pos, "zstd")
        if skip_to is not None:
            pos = skip_to
            continue
        if magic != 0xFD2FB528 or pos + 5 > n:
            raise CorruptRecordError(f"no zstd frame at byte {pos}", field="records")
        fhd = view[pos + 4]
        single_segment = fhd & 0x20
        # header: magic, descriptor, window (absent in single-segment frames), dictionary id, content size
        pos += 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3] \
            + ((1 if single_segment else 0), 2, 4, 8)[fhd >> 6]
        while True:
            if pos + 3 > n:
                raise CorruptRecordError("truncated zstd block header", field="records")
            header = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
            pos += 3
            kind, size = (header >> 1) & 3, header >> 3
            if kind == 0:          # raw: size bytes copied
                exact += size
                upper += size
                pos += size
            elif kind == 1:        # RLE: one byte repeated size times
                exact += size
                upper += size
                pos += 1
            elif kind == 2:        # compressed: at most one block's maximum
                upper += _ZSTD_BLOCK_MAX
                pos += size
            else:
                raise CorruptRecordError("reserved zstd block type", field="records")
            if exact > limit:
                return exact, upper
            if header & 1:
                break
        if fhd & 0x04:
            pos += 4               # content checksum
    return exact, upper


def _lz4_frame_bound(data, limit: int) -> tuple[int, int]:
    """(bytes of the stored blocks, an upper bound of the whole output) of the lz4 frames in
    ``data``, from the frame and block headers alone; stops once past ``limit``."""
    view = memoryview(data)
    n = len(view)
    pos = exact = upper = 0
    while pos < n:
        magic, skip_to = _frame_start(view, pos, "lz4")
        if skip_to is not None:
            pos = skip_to
            continue
        if magic != 0x184D2204 or pos + 7 > n:
            raise CorruptRecordError(f"no lz4 frame at byte {pos}", field="records")
        flg, bd = view[pos + 4], view[pos + 5]
        block_max = _LZ4_BLOCK_MAX.get((bd >> 4) & 7)
        if block_max is None:
            raise CorruptRecordError(f"invalid lz4 block maximum size code {(bd >> 4) & 7}", field="records")
        pos += 7 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
        while True:
            if pos + 4 > n:
                raise CorruptRecordError("truncated lz4 block header", field="records")
            word = int.from_bytes(view[pos:pos + 4], "little")
            pos += 4
            if word == 0:
                break
            size = word & 0x7FFFFFFF
            if word & 0x80000000:
                exact += size
                upper += size
            else:
                upper += block_max
            pos += size + (4 if flg & 0x10 else 0)
            if exact > limit:
                return exact, upper
        if flg & 0x04:
            pos += 4
    return exact, upper


def _gzip_decompress(data, limit: int) -> bytearray:
    """As Java's GZIPInputStream: concatenated members are read on; bytes after the last member
    that do not start another gzip header are ignored; a truncated member is an error. The output
    is produced a few MiB at a time and refused once it passes ``limit``."""
    out = bytearray()
    data = bytes(data)
    while True:
        d = zlib.decompressobj(31)
        pending = data
        while not d.eof:
            step = min(limit + 1 - len(out), _GZIP_STEP)
            chunk = d.decompress(pending, step)
            out += chunk
            if len(out) > limit:
                raise _too_big("gzip", limit)
            pending = d.unconsumed_tail
            if not pending and len(chunk) < step and not d.eof:
                raise CorruptRecordError("truncated gzip stream", field="records")
        data = d.unused_data
        if not data.startswith(b"\x1f\x8b\x08"):
            return out


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


def _snappy_decompress(data: bytes, limit: int):
    """A raw snappy block, or the xerial framing of raw blocks; every block declares its
    uncompressed length, which is checked against ``limit`` before anything is allocated."""
    if not data.startswith(XERIAL_MAGIC):
        n = cramjam.snappy.decompress_raw_len(data)
        if n > limit:
            raise _too_big("snappy", limit, f"; the block declares {n} bytes")
        return bytes(cramjam.snappy.decompress_raw(data))
    pos = 16
    blocks = []
    total = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("truncated snappy block length", field="records")
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise CorruptRecordError(f"snappy block length {n} out of range", field="records")
        block = data[pos:pos + n]
        size = cramjam.snappy.decompress_raw_len(block)
        total += size
        if total > limit:
            raise _too_big("snappy", limit, f"; its blocks declare at least {total} bytes")
        blocks.append((block, size))
        pos += n
    out = bytearray(total)
    view = memoryview(out)
    at = 0
    for block, size in blocks:
        cramjam.snappy.decompress_raw_into(block, view[at:at + size])
        at += size
    view.release()
    return out


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
