"""Record-section codecs in the framings Kafka writes and reads (record-format.md §6)."""

from __future__ import annotations

import gzip
import os
import random
import struct
import zlib

import cramjam
import pytest
from hypothesis import given, settings, strategies as st

from compactlog.errors import CorruptRecordError
from compactlog.record import compression as C

CODECS = [C.NONE, C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]


def _mixed(n: int, seed: int = 1) -> bytes:
    """n bytes that compress somewhat (text-like runs and random stretches)."""
    rnd = random.Random(seed)
    out = bytearray()
    while len(out) < n:
        if rnd.random() < 0.5:
            out += rnd.randbytes(rnd.randint(1, 64))
        else:
            out += (b"key-%d value-%d " % (rnd.randint(0, 99), rnd.randint(0, 9))) * rnd.randint(1, 8)
    return bytes(out[:n])


SIZES = [0, 1, 100, 32 * 1024 - 1, 32 * 1024, 32 * 1024 + 1, 64 * 1024, 64 * 1024 + 1, 200_000]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: C.CODEC_NAMES[c])
@pytest.mark.parametrize("size", SIZES)
def test_round_trip(codec, size):
    data = _mixed(size, seed=size)
    assert C.decompress(codec, C.compress(codec, data)) == data
    incompressible = os.urandom(size)
    assert C.decompress(codec, C.compress(codec, incompressible)) == incompressible


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CODECS), st.binary(max_size=3000))
def test_round_trip_property(codec, data):
    assert C.decompress(codec, memoryview(C.compress(codec, data))) == data


def test_codec_names():
    assert C.CODEC_BY_NAME == {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4,
                               "uncompressed": 0}


def test_unknown_codec():
    for codec in (5, 6, 7):
        with pytest.raises(CorruptRecordError):
            C.decompress(codec, b"abc")
        with pytest.raises(CorruptRecordError):
            C.compress(codec, b"abc")


# --- gzip -------------------------------------------------------------------------------------

def test_gzip_is_rfc1952_and_read_by_stdlib():
    data = _mixed(50_000)
    out = C.compress(C.GZIP, data)
    assert out[:3] == b"\x1f\x8b\x08"
    assert gzip.decompress(out) == data
    # stdlib/Java-written gzip (any level, with a file name) reads back
    assert C.decompress(C.GZIP, gzip.compress(data, compresslevel=9)) == data
    co = zlib.compressobj(1, zlib.DEFLATED, 31)
    assert C.decompress(C.GZIP, co.compress(data) + co.flush()) == data


def test_gzip_concatenated_members_and_trailing_garbage_like_java():
    a, b = _mixed(1000, 1), _mixed(1000, 2)
    # java.util.zip.GZIPInputStream reads concatenated members...
    assert C.decompress(C.GZIP, gzip.compress(a) + gzip.compress(b)) == a + b
    # ...and ignores bytes after the last member that are not a gzip header
    assert C.decompress(C.GZIP, gzip.compress(a) + b"\x00junk") == a


def test_gzip_corrupt():
    out = C.compress(C.GZIP, _mixed(5000))
    for broken in (out[:-1], out[:20], b"", b"\x1f\x8b", out[:-8] + b"\x00" * 8, b"not gzip"):
        with pytest.raises(CorruptRecordError) as e:
            C.decompress(C.GZIP, broken)
        assert e.value.field == "records"


# --- snappy: xerial framing written, xerial and raw read --------------------------------------

def _xerial_blocks(framed: bytes) -> list[bytes]:
    assert framed[:16] == bytes.fromhex("82 53 4e 41 50 50 59 00 00 00 00 01 00 00 00 01")
    blocks, pos = [], 16
    while pos < len(framed):
        (n,) = struct.unpack_from(">i", framed, pos)
        blocks.append(framed[pos + 4:pos + 4 + n])
        pos += 4 + n
    assert pos == len(framed)
    return blocks


def test_snappy_writes_xerial_framing():
    assert C.XERIAL_HEADER == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" * 2
    data = _mixed(100)
    out = C.compress(C.SNAPPY, data)
    blocks = _xerial_blocks(out)
    assert len(blocks) == 1
    assert bytes(cramjam.snappy.decompress_raw(blocks[0])) == data


def test_snappy_multi_block_32k():
    data = _mixed(100_000)
    blocks = _xerial_blocks(C.compress(C.SNAPPY, data))
    assert len(blocks) == 4            # 32 KiB of input per block
    plain = [bytes(cramjam.snappy.decompress_raw(b)) for b in blocks]
    assert [len(p) for p in plain] == [32768, 32768, 32768, 100_000 - 3 * 32768]
    assert b"".join(plain) == data


def test_snappy_reads_raw_block_and_other_xerial_writers():
    data = _mixed(70_000)
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert C.decompress(C.SNAPPY, raw) == data
    # xerial stream with different block sizes (e.g. kafka-python / snappy-java settings)
    framed = C.XERIAL_HEADER + b"".join(
        struct.pack(">i", len(blk)) + blk
        for blk in (bytes(cramjam.snappy.compress_raw(data[i:i + 10_000]))
                    for i in range(0, len(data), 10_000)))
    assert C.decompress(C.SNAPPY, framed) == data


def test_snappy_corrupt():
    out = C.compress(C.SNAPPY, _mixed(5000))
    for broken in (out[:-1], out[:18], C.XERIAL_HEADER + b"\xff\xff\xff\xff",
                   C.XERIAL_HEADER + b"\x00\x00\x01\x00abc", b"", b"\xff\xff\xff\xff\x0f"):
        with pytest.raises(CorruptRecordError):
            C.decompress(C.SNAPPY, broken)


# --- lz4: a frame like Kafka's KafkaLZ4BlockOutputStream -------------------------------------

def _lz4_blocks(frame: bytes) -> list[tuple[bool, bytes]]:
    assert frame[:7] == bytes.fromhex("04 22 4d 18 60 40 82")
    blocks, pos = [], 7
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if word == 0:
            break
        n = word & 0x7FFFFFFF
        blocks.append((bool(word & 0x80000000), frame[pos:pos + n]))
        pos += n
    assert pos == len(frame), "no content checksum after the end mark"
    return blocks


def test_lz4_frame_header_like_kafka():
    assert C.LZ4_FRAME_HEADER == bytes.fromhex("04 22 4d 18 60 40 82")
    assert C.LZ4_FLG == 0x60 and C.LZ4_BD == 0x40
    out = C.compress(C.LZ4, b"hello hello hello hello")
    assert out.startswith(bytes.fromhex("04 22 4d 18 60 40 82"))
    assert out.endswith(b"\x00\x00\x00\x00")


def _lz4_block_decode(src: bytes) -> bytes:
    """A plain LZ4 block decoder with no dictionary: a match reaching before the block fails."""
    out = bytearray()
    i = 0
    while True:
        token = src[i]
        i += 1
        lit = token >> 4
        if lit == 15:
            while True:
                b = src[i]
                i += 1
                lit += b
                if b != 255:
                    break
        out += src[i:i + lit]
        i += lit
        if i >= len(src):
            return bytes(out)
        off = src[i] | src[i + 1] << 8
        i += 2
        assert 0 < off <= len(out), "match refers to data before the block"
        mlen = token & 15
        if mlen == 15:
            while True:
                b = src[i]
                i += 1
                mlen += b
                if b != 255:
                    break
        mlen += 4
        for _ in range(mlen):
            out.append(out[-off])


def test_lz4_blocks_are_independent_and_64k():
    data = _mixed(200_000)
    blocks = _lz4_blocks(C.compress(C.LZ4, data))
    assert len(blocks) == 4
    plain = []
    for stored, blk in blocks:
        if stored:
            plain.append(blk)
        else:
            # each block decodes on its own, without the previous block as dictionary
            plain.append(_lz4_block_decode(blk))
    assert [len(p) for p in plain] == [65536, 65536, 65536, 200_000 - 3 * 65536]
    assert b"".join(plain) == data


def test_lz4_incompressible_blocks_stored_uncompressed():
    data = os.urandom(70_000)
    blocks = _lz4_blocks(C.compress(C.LZ4, data))
    assert [stored for stored, _ in blocks] == [True, True]
    assert b"".join(b for _, b in blocks) == data


def test_lz4_header_checksum_matches_reference_lz4():
    lz4frame = pytest.importorskip("lz4.frame", reason="the lz4 module is not installed")
    ref = lz4frame.compress(b"abc", block_size=lz4frame.BLOCKSIZE_MAX64KB, block_linked=False,
                            content_checksum=False, store_size=False)
    assert ref[:7] == C.LZ4_FRAME_HEADER
    # and the reference library reads our frames
    data = _mixed(150_000)
    assert lz4frame.decompress(C.compress(C.LZ4, data)) == data


def test_xxh32_known_values():
    assert C._xxh32(b"") == 0x02CC5D05
    assert C._xxh32(b"a") == 0x550D7456
    assert C._xxh32(b"abc") == 0x32D153FF
    assert C._xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    assert C._xxh32(bytes([0x60, 0x40])) >> 8 & 0xFF == 0x82


def test_lz4_reads_frames_of_other_writers():
    lz4frame = pytest.importorskip("lz4.frame", reason="the lz4 module is not installed")
    data = _mixed(100_000)
    for kwargs in (dict(store_size=True), dict(content_checksum=True), dict(block_checksum=True),
                   dict(block_size=lz4frame.BLOCKSIZE_MAX4MB)):
        assert C.decompress(C.LZ4, lz4frame.compress(data, block_linked=False, **kwargs)) == data


def test_lz4_fix_header_checksum_for_legacy_v0():
    good = C.compress(C.LZ4, b"some data some data")
    bad = good[:6] + bytes([good[6] ^ 0x55]) + good[7:]
    with pytest.raises(CorruptRecordError):
        C.decompress(C.LZ4, bad)
    assert C.lz4_fix_header_checksum(bad) == good
    assert C.decompress(C.LZ4, C.lz4_fix_header_checksum(bad)) == b"some data some data"
    assert C.lz4_fix_header_checksum(b"xx") == b"xx"


def test_lz4_corrupt():
    out = C.compress(C.LZ4, _mixed(5000))
    for broken in (out[:-5], out[:7], b"", b"\x04\x22\x4d\x18", out[:7] + b"\xff\xff\x00\x00"):
        with pytest.raises(CorruptRecordError):
            C.decompress(C.LZ4, broken)


# --- zstd -------------------------------------------------------------------------------------

def test_zstd_standard_frame():
    data = _mixed(100_000)
    out = C.compress(C.ZSTD, data)
    assert out[:4] == bytes.fromhex("28 b5 2f fd")
    zstandard = pytest.importorskip("zstandard", reason="the zstandard module is not installed")
    assert zstandard.ZstdDecompressor().decompress(out) == data
    # a frame without the content size (streaming writers such as zstd-jni's stream)
    cobj = zstandard.ZstdCompressor(level=3, write_content_size=False).compressobj()
    streamed = cobj.compress(data) + cobj.flush()
    assert C.decompress(C.ZSTD, streamed) == data


def test_zstd_corrupt():
    out = C.compress(C.ZSTD, _mixed(5000))
    for broken in (out[:-3], out[:4], b"", b"\x28\xb5\x2f\xfd\x00"):
        with pytest.raises(CorruptRecordError):
            C.decompress(C.ZSTD, broken)


def test_zstd_concatenated_frames_and_skippable_frames():
    # zstd-jni's stream reader (Kafka's) reads on across frames
    a, b = _mixed(3000, 1), _mixed(3000, 2)
    assert C.decompress(C.ZSTD, C.compress(C.ZSTD, a) + C.compress(C.ZSTD, b)) == a + b
    skippable = b"\x50\x2a\x4d\x18" + (4).to_bytes(4, "little") + b"abcd"
    assert C.decompress(C.ZSTD, C.compress(C.ZSTD, a) + skippable) == a


# --- bounded decompression --------------------------------------------------------------------

def zstd_rle_bomb(total: int, block: int = 128 * 1024) -> bytes:
    """A zstd frame of RLE blocks: 4 bytes per 128 KiB of output (1 GiB in 32 KiB)."""
    n = total // block
    out = bytearray(b"\x28\xb5\x2f\xfd\x00\x38")   # magic, no checksum/size, 128 KiB window
    for i in range(n):
        out += ((block << 3) | (1 << 1) | (1 if i == n - 1 else 0)).to_bytes(3, "little") + b"\x00"
    return bytes(out)


def gzip_of_zeros(total: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    parts = [c.compress(zeros) for _ in range(total >> 20)]
    return b"".join(parts) + c.flush()


def test_default_limit_is_64_times_the_largest_legal_batch():
    assert C.decompressed_limit(1048588) == 64 * 1048588
    # the topic's max.message.bytes, or the batch itself when bigger (written before a lower limit)
    assert C.decompressed_limit(10 << 20) == 64 * (10 << 20)
    assert C.decompressed_limit(1000, compressed_size=3 << 20) == 64 * (3 << 20)
    # never below the limit of Kafka's default message.max.bytes
    assert C.decompressed_limit(1000) == 64 * C.DEFAULT_MAX_MESSAGE_BYTES


def test_zstd_rle_bomb_is_refused_from_its_block_headers():
    bomb = zstd_rle_bomb(1 << 30)
    assert len(bomb) < 33 * 1024
    with pytest.raises(C.DecompressedSizeError) as e:
        C.decompress(C.ZSTD, bomb)
    assert isinstance(e.value, CorruptRecordError) and e.value.field == "records"
    assert "zstd" in str(e.value) and str(C.decompressed_limit(C.DEFAULT_MAX_MESSAGE_BYTES)) in str(e.value)
    # the same frame, small enough, is an ordinary zstd frame
    assert C.decompress(C.ZSTD, zstd_rle_bomb(1 << 20)) == bytes(1 << 20)


@pytest.mark.parametrize("codec", [C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD], ids=lambda c: C.CODEC_NAMES[c])
def test_output_up_to_the_limit_passes_one_byte_more_is_refused(codec):
    data = _mixed(300_000, seed=7)
    packed = C.compress(codec, data)
    assert C.decompress(codec, packed, max_size=len(data)) == data
    with pytest.raises(C.DecompressedSizeError):
        C.decompress(codec, packed, max_size=len(data) - 1)
    zeros = C.compress(codec, bytes(4 << 20))      # compressed blocks only: no size known upfront
    with pytest.raises(C.DecompressedSizeError):
        C.decompress(codec, zeros, max_size=1 << 20)
    assert C.decompress(codec, zeros, max_size=4 << 20) == bytes(4 << 20)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from([C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD]), st.binary(max_size=5000),
       st.integers(min_value=0, max_value=6000), st.booleans())
def test_limit_property(codec, data, limit, concatenate):
    packed = C.compress(codec, data)
    if concatenate and codec in (C.GZIP, C.ZSTD, C.LZ4):
        packed, data = packed + packed, data + data
    if len(data) <= limit:
        assert C.decompress(codec, packed, max_size=limit) == data
    else:
        with pytest.raises(C.DecompressedSizeError):
            C.decompress(codec, packed, max_size=limit)


def test_snappy_declared_length_is_checked_before_anything_is_allocated():
    raw = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10      # a raw block claiming 4 GiB
    with pytest.raises(C.DecompressedSizeError):
        C.decompress(C.SNAPPY, raw)
    block = bytes(cramjam.snappy.compress_raw(bytes(32 * 1024)))
    framed = C.XERIAL_HEADER + (struct.pack(">i", len(block)) + block) * 40   # 1.25 MiB declared
    with pytest.raises(C.DecompressedSizeError):
        C.decompress(C.SNAPPY, framed, max_size=1 << 20)
    assert C.decompress(C.SNAPPY, framed, max_size=40 * 32 * 1024) == bytes(40 * 32 * 1024)


_RSS_SCRIPT = """
import resource, sys, zlib
from compactlog.record import compression as C
from compactlog.record.compression_test import gzip_of_zeros, zstd_rle_bomb
codec = int(sys.argv[1])
bomb = zstd_rle_bomb(1 << 30) if codec == C.ZSTD else gzip_of_zeros(256 << 20)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    C.decompress(codec, bomb)
    print("no error")
except C.DecompressedSizeError as e:
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""


@pytest.mark.slow          # a fresh process per codec, its memory measured
@pytest.mark.parametrize("codec", [C.ZSTD, C.GZIP], ids=lambda c: C.CODEC_NAMES[c])
def test_a_bomb_costs_at_most_the_limit_in_memory(codec):
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, str(codec)], capture_output=True, text=True,
                       cwd=root, timeout=300)
    assert p.returncode == 0, p.stderr
    grown_kb = int(p.stdout.strip())
    limit_kb = C.decompressed_limit(C.DEFAULT_MAX_MESSAGE_BYTES) // 1024
    # the zstd bomb is refused from its block headers; gzip inflates a few MiB at a time up to the limit
    assert grown_kb < limit_kb + 16 * 1024, grown_kb
