"""numba kernels that hash keys for the cleaner's key map: xxHash64 and MurmurHash3 x64-128 (the
128-bit digest of every non-null key of a scanned section, in one pass).
"""

from __future__ import annotations

import numpy as np

from ..jit import njit


# --- xxHash64, for the cleaner's key map ------------------------------------------------------

_P1 = np.uint64(11400714785074694791)
_P2 = np.uint64(14029467366897019727)
_P3 = np.uint64(1609587929392839161)
_P4 = np.uint64(9650029242287828579)
_P5 = np.uint64(2870177450012600261)


@njit(cache=True, inline="always")
def _rotl(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, inline="always")
def _read64(buf, p):
    v = np.uint64(0)
    for k in range(8):
        v |= np.uint64(buf[p + k]) << np.uint64(8 * k)
    return v


@njit(cache=True, inline="always")
def _read32(buf, p):
    v = np.uint64(0)
    for k in range(4):
        v |= np.uint64(buf[p + k]) << np.uint64(8 * k)
    return v


@njit(cache=True, inline="always")
def _round(acc, lane):
    acc = acc + lane * _P2
    acc = _rotl(acc, 31)
    return acc * _P1


@njit(cache=True, inline="always")
def _merge(acc, val):
    acc ^= _round(np.uint64(0), val)
    return acc * _P1 + _P4


@njit(cache=True)
def xxh64(buf, start, length, seed):
    p = start
    end = start + length
    seed = np.uint64(seed)
    if length >= 32:
        v1 = seed + _P1 + _P2
        v2 = seed + _P2
        v3 = seed
        v4 = seed - _P1
        while p + 32 <= end:
            v1 = _round(v1, _read64(buf, p))
            v2 = _round(v2, _read64(buf, p + 8))
            v3 = _round(v3, _read64(buf, p + 16))
            v4 = _round(v4, _read64(buf, p + 24))
            p += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = seed + _P5
    h += np.uint64(length)
    while p + 8 <= end:
        h ^= _round(np.uint64(0), _read64(buf, p))
        h = _rotl(h, 27) * _P1 + _P4
        p += 8
    if p + 4 <= end:
        h ^= _read32(buf, p) * _P1
        h = _rotl(h, 23) * _P2 + _P3
        p += 4
    while p < end:
        h ^= np.uint64(buf[p]) * _P5
        h = _rotl(h, 11) * _P1
        p += 1
    h ^= h >> np.uint64(33)
    h *= _P2
    h ^= h >> np.uint64(29)
    h *= _P3
    h ^= h >> np.uint64(32)
    return h


@njit(cache=True, work=lambda buf, key_pos, key_len, *_: 16 * key_len.shape[0] + int(key_len.sum()))
def hash_keys(buf, key_pos, key_len, out_h1, out_h2):
    """The 128-bit digest (MurmurHash3 x64-128, one pass) of every non-null key."""
    for i in range(key_pos.shape[0]):
        if key_len[i] >= 0:
            out_h1[i], out_h2[i] = murmur3_128(buf, key_pos[i], key_len[i])


_C1 = np.uint64(0x87C37B91114253D5)
_C2 = np.uint64(0x4CF5AD432745937F)


@njit(cache=True, inline="always")
def _fmix64(k):
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
    return k


@njit(cache=True)
def murmur3_128(buf, start, length):
    h1 = np.uint64(0)
    h2 = np.uint64(0)
    nblocks = length // 16
    p = start
    for _ in range(nblocks):
        k1 = _read64(buf, p)
        k2 = _read64(buf, p + 8)
        p += 16
        k1 *= _C1
        k1 = _rotl(k1, 31)
        k1 *= _C2
        h1 ^= k1
        h1 = _rotl(h1, 27)
        h1 += h2
        h1 = h1 * np.uint64(5) + np.uint64(0x52DCE729)
        k2 *= _C2
        k2 = _rotl(k2, 33)
        k2 *= _C1
        h2 ^= k2
        h2 = _rotl(h2, 31)
        h2 += h1
        h2 = h2 * np.uint64(5) + np.uint64(0x38495AB5)
    rem = length - nblocks * 16
    if rem > 8:
        k2 = np.uint64(0)
        for j in range(rem - 1, 7, -1):
            k2 = (k2 << np.uint64(8)) | np.uint64(buf[p + j])
        k2 *= _C2
        k2 = _rotl(k2, 33)
        k2 *= _C1
        h2 ^= k2
    if rem > 0:
        k1 = np.uint64(0)
        for j in range(min(rem, 8) - 1, -1, -1):
            k1 = (k1 << np.uint64(8)) | np.uint64(buf[p + j])
        k1 *= _C1
        k1 = _rotl(k1, 31)
        k1 *= _C2
        h1 ^= k1
    h1 ^= np.uint64(length)
    h2 ^= np.uint64(length)
    h1 += h2
    h2 += h1
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 += h2
    h2 += h1
    return h1, h2
