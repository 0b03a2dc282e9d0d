"""numba kernels that write records: a record's size and prefix, records re-encoded with new
timestamp deltas or encoded from columns, and byte spans gathered into Arrow buffers (one
llvm.memcpy per span).
"""

from __future__ import annotations

import numpy as np

from ..jit import intrinsic, njit


@njit(cache=True, inline="always")
def _uvarint_size(u):
    size = 1
    while u >= np.uint64(0x80):
        u >>= np.uint64(7)
        size += 1
    return size


@njit(cache=True, inline="always")
def _zigzag64(v):
    return np.uint64((v << 1) ^ (v >> 63))


@njit(cache=True, inline="always")
def _zigzag32(v):
    v32 = np.int64(np.int32(v))
    return np.uint64(np.uint32((v32 << 1) ^ (v32 >> 31)))


@njit(cache=True, inline="always")
def _write_uvarint(out, pos, u):
    while u >= np.uint64(0x80):
        out[pos] = np.uint8((u & np.uint64(0x7F)) | np.uint64(0x80))
        u >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(u)
    return pos + 1


@njit(cache=True, inline="always")
def _body_size(zts, zod, rest):
    """Bytes after a record's length varint: attributes, the zigzagged timestamp and offset
    deltas, then ``rest`` (key, value and headers as encoded)."""
    return 1 + _uvarint_size(zts) + _uvarint_size(zod) + rest


@njit(cache=True, inline="always")
def record_size(ts_delta, off_delta, rest):
    """A record's encoded size, its length varint included."""
    body = _body_size(_zigzag64(ts_delta), _zigzag32(off_delta), rest)
    return _uvarint_size(_zigzag32(body)) + body


@njit(cache=True, inline="always")
def _write_record_prefix(out, pos, ts_delta, off_delta, rest):
    """Write a record's length, attributes (0, as Kafka's writer) and deltas; where ``rest`` goes."""
    zts = _zigzag64(ts_delta)
    zod = _zigzag32(off_delta)
    pos = _write_uvarint(out, pos, _zigzag32(_body_size(zts, zod, rest)))
    out[pos] = 0
    pos = _write_uvarint(out, pos + 1, zts)
    return _write_uvarint(out, pos, zod)


@njit(cache=True, inline="always")
def write_record_from_tail(out, pos, ts_delta, off_delta, src, tail_pos, rec_end):
    """Write a record with the given deltas and key, value and headers copied as one byte span
    ``src[tail_pos:rec_end]`` of a scanned record; returns the end position."""
    tail = rec_end - tail_pos
    pos = _write_record_prefix(out, pos, ts_delta, off_delta, tail)
    out[pos:pos + tail] = src[tail_pos:rec_end]
    return pos + tail


@njit(cache=True)
def reencode_records(out, pos, src, keep_idx, new_ts_delta, off_delta, tail_pos, rec_end):
    """Append records ``keep_idx`` of a scanned section with new timestamp deltas.

    Offset deltas are kept; key, value and headers are copied as one byte span.
    """
    for j in range(keep_idx.shape[0]):
        i = keep_idx[j]
        pos = write_record_from_tail(out, pos, new_ts_delta[j], off_delta[i], src, tail_pos[i], rec_end[i])
    return pos


@njit(cache=True, inline="always")
def _put_be(out, p, v, n):
    """out[p:p + n] = ``v`` as an n-byte big-endian integer (two's complement)."""
    for k in range(n):
        out[p + n - 1 - k] = np.uint8(v & 0xFF)
        v >>= 8


def _copy_span(dst, dst_off, src, src_off, count):
    dst[dst_off:dst_off + count] = src[src_off:src_off + count]


@intrinsic(python=_copy_span)
def _memcpy(typingctx, dst, dst_off, src, src_off, count):
    """dst[dst_off:dst_off + count] = src[src_off:src_off + count] as one llvm.memcpy (no checks)."""
    from numba import types
    from numba.core import cgutils
    sig = types.void(dst, types.int64, src, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        d, doff, s, soff, cnt = args
        dptr = builder.gep(context.make_array(signature.args[0])(context, builder, d).data, [doff])
        sptr = builder.gep(context.make_array(signature.args[2])(context, builder, s).data, [soff])
        cgutils.raw_memcpy(builder, dptr, sptr, cnt, 1)
        return context.get_dummy_value()
    return sig, codegen


@njit(cache=True)
def gather_bytes(src0, src1, source, pos, length, out_off, out_data):
    """Copy items (position ``pos[i]``, length ``length[i]``, -1 = null) into one data buffer.

    Item i comes from ``src1`` when ``source[i]`` is 1, else ``src0``. ``out_off`` (n + 1,
    int32 or int64) receives Arrow offsets; ``out_data`` must hold the sum of the lengths, and
    every item must lie inside its source (the scan kernels guarantee it).
    """
    n = pos.shape[0]
    total = 0
    out_off[0] = 0
    for i in range(n):
        ln = np.int64(length[i])
        if ln > 0:
            if source[i] == 1:
                _memcpy(out_data, np.int64(total), src1, np.int64(pos[i]), ln)
            else:
                _memcpy(out_data, np.int64(total), src0, np.int64(pos[i]), ln)
            total += ln
        out_off[i + 1] = total
    return total


@njit(cache=True, work=lambda out, *_: out.shape[0])
def encode_records_memcpy(out, pos, ts_delta, off_delta, key_buf, key_off, key_null,
                          val_buf, val_off, val_null, hdr_buf, hdr_off):
    """Append records encoded from columns; returns the end position.

    Keys/values are slices [off[i], off[i+1]) of their buffers (null when the flag is set);
    ``hdr_buf[hdr_off[i]:hdr_off[i+1]]`` is the record's already-encoded header section
    (count varint and headers), empty meaning "no headers". Spans are copied with memcpy.
    """
    n = ts_delta.shape[0]
    for i in range(n):
        klen = key_off[i + 1] - key_off[i]
        vlen = val_off[i + 1] - val_off[i]
        hlen = hdr_off[i + 1] - hdr_off[i]
        rest = 0
        if key_null[i]:
            rest += 1
        else:
            rest += _uvarint_size(_zigzag32(klen)) + klen
        if val_null[i]:
            rest += 1
        else:
            rest += _uvarint_size(_zigzag32(vlen)) + vlen
        rest += hlen if hlen > 0 else 1
        pos = _write_record_prefix(out, pos, ts_delta[i], off_delta[i], rest)
        if key_null[i]:
            out[pos] = 1
            pos += 1
        else:
            pos = _write_uvarint(out, pos, _zigzag32(klen))
            if klen > 0:
                _memcpy(out, np.int64(pos), key_buf, np.int64(key_off[i]), np.int64(klen))
            pos += klen
        if val_null[i]:
            out[pos] = 1
            pos += 1
        else:
            pos = _write_uvarint(out, pos, _zigzag32(vlen))
            if vlen > 0:
                _memcpy(out, np.int64(pos), val_buf, np.int64(val_off[i]), np.int64(vlen))
            pos += vlen
        if hlen > 0:
            _memcpy(out, np.int64(pos), hdr_buf, np.int64(hdr_off[i]), np.int64(hlen))
            pos += hlen
        else:
            out[pos] = 0
            pos += 1
    return pos
