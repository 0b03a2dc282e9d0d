import numpy as np
import pytest

from compactlog.cleaner.distributed_map import INT64_MAX, WinnersMap
from compactlog.cleaner.offset_map import CompactOffsetMap, InTaskOffsetMap, VersionMap


def digests(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2**63, n, dtype=np.uint64), rng.integers(0, 2**63, n, dtype=np.uint64)


def test_latest_offset_per_key_and_growth():
    for m in (InTaskOffsetMap(), CompactOffsetMap(base_offset=1000)):
        h1, h2 = digests(50_000)
        offsets = 1000 + np.arange(100_000, dtype=np.int64)
        m.put(np.concatenate([h1, h1]), np.concatenate([h2, h2]), offsets)
        assert len(m) == 50_000
        assert (m.get(h1, h2) == offsets[50_000:]).all()
        other1, other2 = digests(100, seed=1)
        assert (m.get(other1, other2) == -1).all()


def test_keys_sharing_the_first_64_bits_stay_apart():
    h1 = np.array([7, 7], dtype=np.uint64)
    h2 = np.array([1 << 63, 2 << 60], dtype=np.uint64)   # different top bits of the second word
    m = CompactOffsetMap(base_offset=0)
    m.put(h1[:1], h2[:1], np.array([5]))
    m.put(h1[1:], h2[1:], np.array([9]))
    assert len(m) == 2
    assert m.get(h1, h2).tolist() == [5, 9]


def test_put_max_keeps_the_largest_offset_whatever_the_order():
    h1, h2 = digests(1000)
    m = InTaskOffsetMap()
    m.put_max(h1, h2, np.full(1000, 50, dtype=np.int64))
    m.put_max(h1, h2, np.full(1000, 10, dtype=np.int64))
    assert (m.get(h1, h2) == 50).all()
    assert sorted(m.offsets().tolist()) == [50] * 1000


def test_compact_map_refuses_ranges_beyond_40_bits():
    assert CompactOffsetMap.fits(0, 2**40 - 2)
    assert not CompactOffsetMap.fits(0, 2**40)


def test_winners_map_answers_from_offsets_alone():
    m = WinnersMap(first_dirty=100, end_offset=200, winners=np.array([150, 120]), superseded=np.array([40]))
    offsets = np.array([150, 149, 120, 40, 41])
    got = m.get(None, None, offsets)
    # dirty winners map to themselves, other dirty records look superseded,
    # clean records superseded by the dirty range look superseded, the others absent
    assert got.tolist() == [150, INT64_MAX, 120, INT64_MAX, -1]
    assert m.latest_offset == 199


def test_a_sized_table_is_not_doubled_by_a_big_put_of_known_keys():
    # a segment's records put at once: most are keys already mapped; the table sized for the
    # keys there are must not double for the worst case (every record a new key)
    import numpy as np
    from compactlog.cleaner.offset_map import CompactOffsetMap
    keys = 20_000
    m = CompactOffsetMap(0, keys)
    cap = m.t1.shape[0]
    rng = np.random.default_rng(5)
    ids = rng.integers(0, keys, 8 * keys).astype(np.uint64)
    h1 = ids * np.uint64(0x9E3779B97F4A7C15) + np.uint64(1)
    h2 = ids * np.uint64(0xC2B2AE3D27D4EB4F) + np.uint64(7)
    m.put(h1, h2, np.arange(ids.size, dtype=np.int64))
    assert len(m) == np.unique(ids).size
    assert m.t1.shape[0] == cap
    got = m.get(h1, h2, np.arange(ids.size, dtype=np.int64))
    last = np.zeros(keys, dtype=np.int64)
    last[ids.astype(np.int64)] = np.arange(ids.size)      # numpy keeps the last write of a repeated index
    assert (got == last[ids.astype(np.int64)]).all()


def test_the_version_map_keeps_each_keys_version_through_growth():
    """Two passes over the same keys, the second with lower versions for even keys: the winners
    are the first pass's for those, the second's for the rest, with the map grown many times
    between (the versions move with their slots)."""
    n = 20_000
    h1, h2 = digests(n, seed=3)
    m = VersionMap(0, expected_keys=16)
    has = np.ones(n, dtype=np.bool_)
    first = np.arange(n, dtype=np.int64)
    m.put(h1, h2, first, np.full(n, 100, dtype=np.int64), has)
    assert m.t1.shape[0] > 16 * 512
    second = first + n
    versions = np.where(first % 2 == 0, 99, 101).astype(np.int64)
    m.put(h1, h2, second, versions, has)
    assert len(m) == n
    assert (m.get(h1, h2) == np.where(first % 2 == 0, first, second)).all()


def test_a_big_table_is_sized_to_its_keys_not_to_a_power_of_two():
    # 50M expected keys: 2**27 slots (2.1 GB, 43 bytes a key) as the next power of two at 3/4;
    # sized at 0.6 full, 1.33 GB (27 bytes a key). np.zeros: no page is touched here.
    from compactlog.cleaner.offset_map import BYTES_PER_KEY
    m = CompactOffsetMap(0, 50_000_000)
    assert m.bytes_used / 50_000_000 <= BYTES_PER_KEY == 27
    assert 50_000_000 <= m.t1.shape[0] * CompactOffsetMap.SIZED_LOAD < 50_001_000
    v = VersionMap(0, 50_000_000)
    assert v.bytes_used / 50_000_000 < 40.01     # 24-byte slots


def test_a_small_table_is_half_full():
    m = CompactOffsetMap(0, 1_000_000)
    assert 0.49 < 1_000_000 / m.t1.shape[0] <= 0.5


def test_probes_wrap_from_the_last_slot_of_a_table_of_any_size():
    # keys whose home is the table's last slot (the digest's top 32 bits all ones): the probes
    # of all but the first run past the end to slot 0 on
    m = CompactOffsetMap(0, 16)
    n = 40
    h1 = (np.uint64(0xFFFFFFFF) << np.uint64(32)) | np.arange(n, dtype=np.uint64)
    h2 = np.arange(n, dtype=np.uint64) << np.uint64(50)
    m.put(h1, h2, np.arange(n, dtype=np.int64))
    assert len(m) == n
    assert m.tv[:n - 1].any()                    # some went round to the table's start
    assert m.get(h1, h2).tolist() == list(range(n))
    other = h1 ^ np.uint64(1 << 20)
    assert (m.get(other, h2) == -1).all()


def test_any_table_size_through_growth_and_version_columns():
    for expected in (16, 1000, 3333, 70_001):
        for m in (CompactOffsetMap(0, expected), VersionMap(0, expected)):
            h1, h2 = digests(20_000, seed=expected)
            offs = np.arange(20_000, dtype=np.int64)
            if isinstance(m, VersionMap):
                m.put(h1, h2, offs, offs, np.ones(20_000, dtype=np.bool_))
            else:
                m.put(h1, h2, offs)
            assert len(m) == 20_000 and (m.get(h1, h2) == offs).all()
            assert len(m) <= m.t1.shape[0] * m.LOAD


def test_a_big_table_grows_to_its_sized_load_not_double(monkeypatch):
    # "big" scaled down: past FAST_BYTES a table whose estimate was low grows ~1.4x (old and new
    # tables are both resident while it moves)
    for cls in (CompactOffsetMap, VersionMap):
        monkeypatch.setattr(cls, "FAST_BYTES", 4096 * cls.SLOT_BYTES)
        m = cls(0, 10_000)
        cap = m.t1.shape[0]
        assert 10_000 / cap == pytest.approx(cls.SIZED_LOAD, rel=0.05)
        h1, h2 = digests(15_000, seed=9)
        offs = np.arange(15_000, dtype=np.int64)
        if cls is VersionMap:
            m.put(h1, h2, offs, offs * 2, np.ones(15_000, dtype=np.bool_))
        else:
            m.put(h1, h2, offs)
        assert cap < m.t1.shape[0] < 1.6 * cap
        assert (m.get(h1, h2) == offs).all() and len(m) == 15_000
        if cls is VersionMap:
            assert (m.tver[m.tv != 0] % 2 == 0).all()
