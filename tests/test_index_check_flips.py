"""index_check against real segments: Kafka's pass, and every flipped index byte is caught or harmless.

Every segment of the Kafka cleaner corpus (inputs and Kafka's cleaned outputs), the Kafka-written
vectors and what compactlog's own cleaner and producer write must pass every check: the loader
rebuilds an index that fails, so a false alarm costs a rebuild on every open. Then single-byte flips
(random position, random mask) of the corpus' index files are either reported or *harmless*, with
harmless defined and checked exhaustively by tests/index_truth.py against a linear scan of the log:
no timestamp or offset lookup, read_committed read, retention or MAX_TIMESTAMP answer changes.
"""

from __future__ import annotations

import copy
import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import index_truth as T
from compactlog.storage import files, index_check as IC

HERE = os.path.dirname(os.path.abspath(__file__))


def partition_dirs(root: str) -> list[str]:
    out = []
    for dp, _, names in os.walk(root):
        if any(files.is_segment_log(n) for n in names):
            out.append(dp)
    return sorted(out)


def bases_of(d: str) -> list[int]:
    return sorted(files.offset_from_filename(n) for n in os.listdir(d) if files.is_segment_log(n))


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def check_dir(d: str) -> list:
    bases = bases_of(d)
    carry = IC.TxnCarry()
    problems = []
    for i, b in enumerate(bases):
        nxt = bases[i + 1] if i + 1 < len(bases) else None
        data = read(files.segment_file(d, b, files.LOG_SUFFIX))
        problems += IC.check_segment(d, b, data, closed=nxt is not None, next_base=nxt, carry=carry)
    return problems


def test_every_kafka_corpus_segment_passes(corpus_dir):
    dirs = partition_dirs(os.path.join(corpus_dir, "cases"))
    segments = sum(len(bases_of(d)) for d in dirs)
    assert len(dirs) > 200 and segments > 3000
    problems = [str(p) for d in dirs for p in check_dir(d)]
    assert problems == []


@pytest.mark.parametrize("root", ["kafka-vectors", "corpus-sample"])
def test_every_kafka_vector_segment_passes(root):
    dirs = partition_dirs(os.path.join(HERE, "data", root))
    assert dirs
    assert [str(p) for d in dirs for p in check_dir(d)] == []


def test_what_compactlog_writes_passes(corpus_dir, tmp_path):
    """compactlog's cleaner output over the corpus' compressed cases, and a log written by its
    producer path. An uncompressed case's output is Kafka's byte for byte, its index files too
    (test_corpus, kcompare's files_diff, every case), and Kafka's outputs pass above: only a
    compressed case's bytes (the codec's) and so its index positions may differ from Kafka's."""
    from corpus_support import case_names, load_case, run_case_api
    from compactlog.cleaner.executor import InProcessExecutor
    compressed = [name for name in case_names() if load_case(corpus_dir, name)["compressed"]]
    assert len(compressed) >= 10
    for name in compressed:
        d = str(tmp_path / name)
        for k, diffs, outcomes in run_case_api(corpus_dir, name, d, InProcessExecutor()):
            assert not [o.error for o in outcomes if o.error]
        for part in partition_dirs(d):
            assert [str(p) for p in check_dir(part)] == [], name
    from test_corruption_cleaner import build
    root = str(tmp_path / "produced")
    build(root)
    for part in partition_dirs(root):
        assert [str(p) for p in check_dir(part)] == []


# --- flips --------------------------------------------------------------------------------------

class Candidates:
    """The corpus' non-empty index files of whole-v2 segments, by kind."""

    def __init__(self, corpus_dir: str):
        self.by_kind = {"offset": [], "time": [], "txn": []}
        self.partitions = {}
        for d in partition_dirs(os.path.join(corpus_dir, "cases")):
            bases = bases_of(d)
            try:
                segs = [(b, T.parse_log(read(files.segment_file(d, b, files.LOG_SUFFIX))),
                         read(files.segment_file(d, b, files.TXN_INDEX_SUFFIX))
                         if os.path.exists(files.segment_file(d, b, files.TXN_INDEX_SUFFIX)) else b"")
                        for b in bases]
            except AssertionError:
                continue
            self.partitions[d] = (bases, segs, T.Partition(segs))
            for i, b in enumerate(bases):
                for kind, suffix in (("offset", files.INDEX_SUFFIX), ("time", files.TIME_INDEX_SUFFIX),
                                     ("txn", files.TXN_INDEX_SUFFIX)):
                    path = files.segment_file(d, b, suffix)
                    if os.path.exists(path) and os.path.getsize(path):
                        self.by_kind[kind].append((d, i))


@pytest.fixture(scope="module")
def candidates(corpus_dir):
    c = Candidates(corpus_dir)
    assert all(len(v) > 100 for v in c.by_kind.values()), {k: len(v) for k, v in c.by_kind.items()}
    return c


SUFFIX = {"offset": files.INDEX_SUFFIX, "time": files.TIME_INDEX_SUFFIX, "txn": files.TXN_INDEX_SUFFIX}


def caught_or_harmless(c: Candidates, kind: str, pick: int, where: int, mask: int) -> None:
    d, i = c.by_kind[kind][pick % len(c.by_kind[kind])]
    bases, segs, partition = c.partitions[d]
    base = bases[i]
    nxt = bases[i + 1] if i + 1 < len(bases) else None
    log = read(files.segment_file(d, base, files.LOG_SUFFIX))
    raw = read(files.segment_file(d, base, SUFFIX[kind]))
    flipped = bytearray(raw)
    flipped[where % len(raw)] ^= mask
    flipped = bytes(flipped)
    layout = IC.walk_segment(log, base)
    if kind == "offset":
        problem = IC.check_offset_index(flipped, layout)
        harmless = lambda: T.offset_index_harmless(flipped, raw, segs[i][1], base, len(log))  # noqa: E731
    elif kind == "time":
        problem = IC.check_time_index(flipped, layout, closed=nxt is not None)
        harmless = lambda: T.time_index_harmless(flipped, raw, segs[i][1], base, nxt is not None)  # noqa: E731
    else:
        carry = IC.TxnCarry()
        for b, _, txn_raw in segs[:i]:
            IC.check_txn_index(txn_raw, IC.walk_segment(read(files.segment_file(d, b, files.LOG_SUFFIX)), b),
                               carry=carry)
        problem = IC.check_txn_index(flipped, layout, next_base=nxt, carry=copy.deepcopy(carry))
        harmless = lambda: T.txn_index_harmless(partition, i, flipped)  # noqa: E731
    assert problem is not None or harmless(), f"{files.segment_file(d, base, SUFFIX[kind])}: byte " \
                                              f"{where % len(raw)} ^ {mask:#04x} is neither caught nor harmless"


FLIPS = dict(pick=st.integers(0, 10**6), where=st.integers(0, 10**6),
             mask=st.one_of(st.sampled_from([1 << b for b in range(8)]), st.integers(1, 255)))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**FLIPS)
def test_offset_index_flip_is_caught_or_harmless(candidates, pick, where, mask):
    caught_or_harmless(candidates, "offset", pick, where, mask)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**FLIPS)
def test_time_index_flip_is_caught_or_harmless(candidates, pick, where, mask):
    caught_or_harmless(candidates, "time", pick, where, mask)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(**FLIPS)
def test_txn_index_flip_is_caught_or_harmless(candidates, pick, where, mask):
    caught_or_harmless(candidates, "txn", pick, where, mask)


def test_every_single_bit_flip_of_a_txn_index_is_caught_or_harmless(candidates):
    """Exhaustively, on the first corpus txn index with more than one entry."""
    pick = next(k for k, (d, i) in enumerate(candidates.by_kind["txn"])
                if len(candidates.partitions[d][1][i][2]) >= 68)
    d, i = candidates.by_kind["txn"][pick]
    size = len(candidates.partitions[d][1][i][2])
    for where in range(size):
        for bit in range(8):
            caught_or_harmless(candidates, "txn", pick, where, 1 << bit)


def test_the_ground_truth_sees_harm(candidates):
    """The harmlessness oracle is not vacuous: known-harmful edits (each also caught) are seen."""
    import struct
    for d, i in candidates.by_kind["offset"]:
        bases, segs, partition = candidates.partitions[d]
        base, batches = bases[i], segs[i][1]
        raw = read(files.segment_file(d, base, files.INDEX_SUFFIX))
        rel, pos = struct.unpack_from(">ii", raw, 0)
        holder = next(k for k, b in enumerate(batches) if b.last >= base + rel)
        if holder + 1 < len(batches):
            break
    log = read(files.segment_file(d, base, files.LOG_SUFFIX))
    later = batches[holder + 1].pos        # past the batch holding the entry's offset: a lookup skips it
    bad = struct.pack(">ii", rel, later) + raw[8:]
    assert not T.offset_index_harmless(bad, raw, batches, base, len(log))
    assert IC.check_offset_index(bad, IC.walk_segment(log, base)) is not None

    d, i = next((d, i) for d, i in candidates.by_kind["time"]
                if len(read(files.segment_file(d, candidates.partitions[d][0][i], files.TIME_INDEX_SUFFIX))) >= 24)
    bases, segs, _ = candidates.partitions[d]
    base, batches = bases[i], segs[i][1]
    raw = read(files.segment_file(d, base, files.TIME_INDEX_SUFFIX))
    ts0, _ = struct.unpack_from(">qi", raw, 0)
    ts1, rel1 = struct.unpack_from(">qi", raw, 12)
    bad = raw[:12] + struct.pack(">qi", ts0, rel1) + raw[24:]    # entry 1 keeps entry 0's timestamp
    assert not T.time_index_harmless(bad, raw, batches, base, closed=False)
    log = read(files.segment_file(d, base, files.LOG_SUFFIX))
    assert IC.check_time_index(bad, IC.walk_segment(log, base), closed=False) is not None

    for d, i in candidates.by_kind["txn"]:
        bases, segs, partition = candidates.partitions[d]
        raw = segs[i][2]
        if not T.txn_index_harmless(partition, i, raw[34:]):          # the first entry lost
            break
    else:
        pytest.fail("no corpus txn index whose first entry matters")
    log = read(files.segment_file(d, bases[i], files.LOG_SUFFIX))
    carry = IC.TxnCarry()
    for b, _, txn_raw in segs[:i]:
        IC.check_txn_index(txn_raw, IC.walk_segment(read(files.segment_file(d, b, files.LOG_SUFFIX)), b), carry=carry)
    assert IC.check_txn_index(raw[34:], IC.walk_segment(log, bases[i]), carry=carry) is not None
