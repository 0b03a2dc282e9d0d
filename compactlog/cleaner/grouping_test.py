from compactlog.cleaner.grouping import SegmentSizes, group_segments_by_size

M = 2**31


def segs(*spec):
    return [SegmentSizes(base, size, idx, tidx, base) for base, size, idx, tidx in spec]


def bases(groups):
    return [[s.base_offset for s in g] for g in groups]


def test_groups_by_log_and_index_size():
    s = segs(*[(i * 10, 100, 8, 12) for i in range(10)])
    assert bases(group_segments_by_size(s, 2**31 - 1, 2**31 - 1, 100)) == [[i * 10 for i in range(10)]]
    assert all(len(g) == 1 for g in group_segments_by_size(s, 1, 2**31 - 1, 100))
    assert [len(g) for g in group_segments_by_size(s, 301, 2**31 - 1, 100)] == [3, 3, 3, 1]
    # both indexes count against segment.index.bytes: 3 offset-index slots but only 2 time-index ones fit
    assert [len(g) for g in group_segments_by_size(s, 2**31 - 1, 25, 100)] == [2, 2, 2, 2, 2]
    no_time_index = segs(*[(i * 10, 100, 8, 0) for i in range(10)])
    assert [len(g) for g in group_segments_by_size(no_time_index, 2**31 - 1, 25, 100)] == [3, 3, 3, 1]


def test_groups_never_span_more_than_2_pow_31_offsets_but_empty_segments_merge():
    s = segs((0, 100, 8, 12), (M, 100, 8, 12), (2 * M, 100, 8, 12), (3 * M, 100, 8, 12))
    assert bases(group_segments_by_size(s[:3], 2**31 - 1, 2**31 - 1, 3 * M)) == [[0], [M], [2 * M]]
    emptied = segs((0, 0, 0, 0), (M, 0, 0, 0), (2 * M, 100, 8, 12))
    assert bases(group_segments_by_size(emptied, 2**31 - 1, 2**31 - 1, 3 * M)) == [[0, M], [2 * M]]
