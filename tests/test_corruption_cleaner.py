"""The cleaner trusts nothing it reads (issue 9, item 3, "Trusting files that can be wrong").

Reproductions, each failing before the cleaner validated its input:
* a batch whose CRC fails, in the dirty range, was copied into the cleaned segment, exit 0;
* a flipped byte in a batch's base offset (outside the CRC) made ``clean`` lose latest values;
* two flipped bytes in a ``.index`` made ``clean`` drop the latest value of keys;
* a flipped byte in a ``.txnindex`` passed ``verify`` (and aborted data looked committed).

Now the partition is refused with one line naming the file, position, offset and field (found
against expected), its files stay byte for byte as they were (no ``.cleaned``/``.swap`` left, its
checkpoint unchanged), the other partitions are cleaned and the command exits non-zero. Where the
loader may legitimately rebuild a damaged index before the cleaner runs, the test accepts a clean
that produces exactly what the undamaged partition produces, and nothing else. The task-level tests
run the cleaning task on a plan made before the damage, so they check the cleaner alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import struct

import pytest

from compactlog.cleaner.cleaner import Cleaner, make_plan
from compactlog.cleaner.source import SegmentInfo, SourceSegment
from compactlog.cleaner.task import clean_partition
from compactlog.errors import CompactlogError, CorruptRecordError
from compactlog.storage.datadir import DataDir
from compactlog.storage.index_check import CorruptIndexError

T0 = 1_900_000_000_000
CONFIG = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "segment.bytes": "4096",
          "index.interval.bytes": "256", "delete.retention.ms": "1000"}


def build(root: str, partitions: int = 2, rounds: int = 120, start: int = 0) -> None:
    """Compacted topic t: 40 keys rewritten in turn, and every 10th round an aborted transaction
    writing the key again (if its txn-index entry is lost, the aborted value looks latest)."""
    with DataDir(root, clock=lambda: T0, create=True, writable=True) as dd:
        if "t" not in dd.topics():
            dd.create_topic("t", partitions, CONFIG)
        for p in range(partitions):
            log = dd.open_log("t", p)
            for i in range(start, start + rounds):
                keys = [f"k{(i * 3 + j) % 40}".encode() for j in range(3)]
                log.append_records(keys, [f"v{i}.{j}".encode() * 5 for j in range(3)],
                                   timestamps=[T0 - 10**6 + i] * 3)
                if i % 10 == 4:
                    pid = 1000 + i
                    log.append_records([keys[0]], [b"aborted"], producer_id=pid, producer_epoch=0,
                                       base_sequence=0, transactional=True, timestamps=[T0 - 10**6 + i])
                    log.append_control(commit=False, producer_id=pid, producer_epoch=0)
            log.roll()
            log.append_records([b"tail"], [b"x"], timestamps=[T0 - 10**6 + start + rounds])
    # one more open by a writer, so that what an open normalises (stray producer snapshots) is done
    # before a test takes the partition's state
    with DataDir(root, clock=lambda: T0, writable=True) as dd:
        for p in dd.partitions("t"):
            dd.open_log("t", p)


def pdir(root: str, p: int = 0) -> str:
    return os.path.join(root, f"t-{p}")


def segment_paths(part_dir: str) -> list[str]:
    return sorted(os.path.join(part_dir, n) for n in os.listdir(part_dir) if n.endswith(".log"))


def raw_batches(path: str) -> list[tuple[int, int, int, int]]:
    """(position, size, base offset, attributes) of every batch, parsed independently."""
    data = open(path, "rb").read()
    out, pos = [], 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        out.append((pos, length + 12, base, struct.unpack_from(">h", data, pos + 21)[0]))
        pos += length + 12
    return out


def state(part_dir: str) -> dict[str, str]:
    return {n: hashlib.sha256(open(os.path.join(part_dir, n), "rb").read()).hexdigest()
            for n in sorted(os.listdir(part_dir))}


def checkpoint_entries(root: str) -> dict:
    path = os.path.join(root, "cleaner-offset-checkpoint")
    if not os.path.exists(path):
        return {}
    lines = open(path).read().split("\n")[2:]
    return {tuple(ln.split()[:2]): ln.split()[2] for ln in lines if ln.strip()}


def flip(path: str, position: int, mask: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)[0]
        f.seek(position)
        f.write(bytes([b ^ mask]))


def clean(cli, root: str):
    r = cli("--data-dir", root, "clean", "--engine", "local", "--now-ms", T0, "--json")
    outs = {(o["topic"], o["partition"]): o for o in map(json.loads, r.out.splitlines()) if o.get("topic")}
    return r, outs


def assert_refused(cli, root: str, before: dict, checkpoints: dict, *expected: str) -> str:
    """t-0 refused with an error holding ``expected``, unchanged; t-1 cleaned; exit non-zero."""
    r, outs = clean(cli, root)
    assert r.code != 0, r.out
    assert "Traceback" not in r.err
    err = outs[("t", 0)]["error"] or ""
    assert not outs[("t", 0)]["cleaned"], err
    for text in expected:
        assert text in err, err
    assert len(err.splitlines()) == 1
    assert state(pdir(root)) == before, "the refused partition must not change"
    assert not [n for n in os.listdir(pdir(root)) if n.endswith((".cleaned", ".swap"))]
    assert checkpoint_entries(root).get(("t", "0")) == checkpoints.get(("t", "0"))
    assert outs[("t", 1)]["cleaned"], outs[("t", 1)]
    return err


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    """Built data dirs of 1 and 2 partitions, copied by each test."""
    out = {}
    for partitions in (1, 2):
        root = str(tmp_path_factory.mktemp(f"template{partitions}") / "d")
        build(root, partitions=partitions)
        out[partitions] = root
    return out


@pytest.fixture
def settled(tmp_path, templates):
    def copy(partitions: int = 2) -> str:
        root = str(tmp_path / "d")
        shutil.copytree(templates[partitions], root)
        return root
    return copy


def cleaned_copy(cli, tmp_path, root: str) -> dict:
    """What cleaning an undamaged copy produces (segment files of t-0)."""
    copy = str(tmp_path / "pristine")
    shutil.copytree(root, copy)
    r, outs = clean(cli, copy)
    assert r.code == 0 and outs[("t", 0)]["cleaned"], r.out
    return segment_state(pdir(copy))


def segment_state(part_dir: str) -> dict[str, str]:
    return {n: h for n, h in state(part_dir).items() if n.endswith((".log", ".index", ".timeindex", ".txnindex"))}


def assert_refused_or_same_as_pristine(cli, root: str, pristine: dict, before: dict, *expected: str) -> None:
    r, outs = clean(cli, root)
    assert "Traceback" not in r.err
    out = outs[("t", 0)]
    if out["cleaned"]:
        assert segment_state(pdir(root)) == pristine, "a clean after the damage must equal the undamaged clean"
    else:
        assert r.code != 0
        for text in expected:
            assert text in out["error"], out["error"]
        assert state(pdir(root)) == before


# --- CRC ----------------------------------------------------------------------------------------

def test_crc_failure_in_the_dirty_range_is_refused(settled, cli):
    root = settled()
    seg = segment_paths(pdir(root))[1]
    pos, size, base, _ = raw_batches(seg)[3]
    flip(seg, pos + size - 3, 0x20)           # a byte of a record value: only the CRC can tell
    before, checkpoints = state(pdir(root)), checkpoint_entries(root)
    assert_refused(cli, root, before, checkpoints, f"{seg}, position {pos}, offset {base}: crc: stored CRC")


def test_crc_failure_in_the_clean_section_is_refused(settled, cli):
    root = settled()
    r, outs = clean(cli, root)
    assert r.code == 0 and outs[("t", 0)]["cleaned"]
    build(root, start=120, rounds=60)          # new dirty data: the cleaned section is rewritten again
    seg = segment_paths(pdir(root))[0]
    pos, size, base, _ = raw_batches(seg)[1]
    flip(seg, pos + 30, 0x01)                  # the batch's max timestamp
    before, checkpoints = state(pdir(root)), checkpoint_entries(root)
    assert_refused(cli, root, before, checkpoints, f"{seg}, position {pos}, offset {base}: crc:")


# --- base offsets (not covered by the CRC) --------------------------------------------------------

@pytest.mark.parametrize("which", ["first", "middle", "last"])
@pytest.mark.parametrize("byte", range(8))
@pytest.mark.parametrize("mask", [0x01, 0x80])
def test_flipped_base_offset_is_refused(settled, tmp_path, cli, which, byte, mask):
    root = settled()
    seg = segment_paths(pdir(root))[2]
    batches = raw_batches(seg)
    pos, _, base, _ = batches[{"first": 0, "middle": len(batches) // 2, "last": -1}[which]]
    flip(seg, pos + byte, mask)
    before, checkpoints = state(pdir(root)), checkpoint_entries(root)
    found = struct.unpack(">q", open(seg, "rb").read()[pos:pos + 8])[0]
    r = cli("--data-dir", root, "verify")
    assert r.code != 0 and f"{seg}: position " in r.out and "base offset" in r.out, r.out
    assert state(pdir(root)) == before
    err = assert_refused(cli, root, before, checkpoints, f"{seg}, position ", ": baseOffset: ")
    assert f"found {found}" in err or f"base offset {found}" in err, err


# --- the offset index ---------------------------------------------------------------------------

def test_two_flipped_bytes_in_an_offset_index_never_lose_a_value(settled, tmp_path, cli):
    root = settled()
    pristine = cleaned_copy(cli, tmp_path, root)
    idx = segment_paths(pdir(root))[1][:-4] + ".index"
    assert os.path.getsize(idx) >= 16
    flip(idx, 7, 0x40)                         # entry 0's position
    flip(idx, 11, 0x03)                        # entry 1's offset
    r = cli("--data-dir", root, "verify")
    assert r.code != 0 and f"{idx}: entry 0" in r.out, r.out
    assert_refused_or_same_as_pristine(cli, root, pristine, state(pdir(root)), idx)


# --- the transaction index ------------------------------------------------------------------------

TXN_DAMAGE = {
    # entry fields: version int16 @0, producer id @2, first offset @10, last offset @18, LSO @26
    "version": lambda raw: raw[:0] + bytes([raw[0] ^ 0x01]) + raw[1:],
    "producer-id": lambda raw: raw[:9] + bytes([raw[9] ^ 0x01]) + raw[10:],
    "last-offset": lambda raw: raw[:25] + bytes([raw[25] ^ 0x01]) + raw[26:],
    "first-offset-above-data": lambda raw: raw[:10] + raw[18:26] + raw[18:],
    "stable-offset": lambda raw: raw[:30] + bytes([raw[30] ^ 0x40]) + raw[31:],
    "missing-entry": lambda raw: raw[34:],
}


def txnindex_with_entries(root: str) -> str:
    return next(p[:-4] + ".txnindex" for p in segment_paths(pdir(root))
                if os.path.exists(p[:-4] + ".txnindex") and os.path.getsize(p[:-4] + ".txnindex") >= 34)


@pytest.mark.parametrize("damage", sorted(TXN_DAMAGE))
def test_damaged_txn_index_is_flagged_by_verify_and_never_cleaned_on(settled, tmp_path, cli, damage):
    root = settled()
    pristine = cleaned_copy(cli, tmp_path, root)
    path = txnindex_with_entries(root)
    raw = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(TXN_DAMAGE[damage](raw))
    r = cli("--data-dir", root, "verify")
    assert r.code != 0, r.out
    assert f"{path}: entry 0" in r.out, r.out
    assert_refused_or_same_as_pristine(cli, root, pristine, state(pdir(root)), path)


# --- the cleaning task alone, on a plan made before the damage ------------------------------------

def plan_for(root: str, partition: int = 0):
    with DataDir(root, clock=lambda: T0, writable=True) as dd:
        cleaner = Cleaner(dd)
        (status,) = cleaner.statuses(T0, "t", partition)
        assert status.eligible
        return make_plan(dd, dd.open_log("t", partition), status, T0)


def run_task_expecting(plan, error_type, *expected: str) -> str:
    before = state(plan.dir)
    with pytest.raises(error_type) as e:
        clean_partition(plan)
    assert state(plan.dir) == before
    for text in expected:
        assert text in str(e.value), str(e.value)
    return str(e.value)


def test_task_refuses_an_offset_index_that_disagrees_with_the_log(settled):
    root = settled()
    plan = plan_for(root)
    idx = segment_paths(pdir(root))[0][:-4] + ".index"
    flip(idx, 7, 0x08)                         # entry 0's position: no longer a batch start
    run_task_expecting(plan, CorruptIndexError, f"{idx}: entry 0: position")


def test_task_refuses_a_missing_txn_index_entry(settled):
    root = settled()
    plan = plan_for(root)
    path = txnindex_with_entries(root)
    os.remove(path)
    run_task_expecting(plan, CorruptIndexError, f"{path}: entry 0: lastOffset", "missing entry: the ABORT marker")


def test_task_refuses_a_segment_whose_base_offsets_overlap(settled):
    root = settled()
    plan = plan_for(root)
    seg = segment_paths(pdir(root))[1]
    batches = raw_batches(seg)
    pos, _, base, _ = batches[2]
    with open(seg, "r+b") as f:                 # the third batch claims the second batch's offsets
        f.seek(pos)
        f.write(struct.pack(">q", batches[1][2]))
    run_task_expecting(plan, CorruptRecordError, f"{seg}, position {pos}, offset {batches[1][2]}: baseOffset: "
                                                 f"found {batches[1][2]}, expected above")


def test_task_refuses_any_flipped_byte_of_the_dirty_segments(settled):
    """Every byte of every batch is covered by the CRC, the structure walk or the offset rules,
    except the leader epoch (bytes 12-15): Kafka keeps no redundant copy of it to compare with."""
    root = settled(1)
    plan = plan_for(root)
    segs = segment_paths(pdir(root))[:-1]
    originals = {s: open(s, "rb").read() for s in segs}
    rng = random.Random(9)
    for trial in range(60):
        seg = rng.choice(segs)
        pos, size, _, _ = rng.choice(raw_batches(seg))
        rel = rng.choice([r for r in range(size) if not 12 <= r < 16])
        flip(seg, pos + rel, 1 << rng.randrange(8))
        try:
            with pytest.raises(CompactlogError):
                clean_partition(plan)
            assert not [n for n in os.listdir(pdir(root)) if n.endswith(".cleaned")], (trial, seg, pos, rel)
        finally:
            with open(seg, "wb") as f:
                f.write(originals[seg])


def test_task_on_undamaged_segments_cleans(settled):
    root = settled()
    result = clean_partition(plan_for(root))
    assert result.groups


# --- the source view's own checks -----------------------------------------------------------------

def test_source_segment_checks_its_offset_index_before_a_lookup(settled):
    root = settled(1)
    seg = segment_paths(pdir(root))[0]
    idx = seg[:-4] + ".index"
    info = SegmentInfo(0, os.path.getsize(seg), os.path.getsize(idx), 0, 0)
    assert SourceSegment(pdir(root), info).index_position(50) > 0
    entries = open(idx, "rb").read()
    # an entry whose position is a later batch: a lookup would skip the batches in between
    rel, position = struct.unpack_from(">ii", entries, 0)
    later = next(p for p, _, b, _ in raw_batches(seg) if p > position and b > rel)
    with open(idx, "r+b") as f:
        f.write(struct.pack(">ii", rel, later))
    with pytest.raises(CorruptIndexError) as e:
        SourceSegment(pdir(root), info).index_position(50)
    assert str(e.value).startswith(f"{idx}: entry 0: offset {rel}: below the base offset")


def test_a_crc_is_checked_once_per_round(settled, cli, monkeypatch):
    """The map phase checks the batches it reads; the rewrite checks the others, and only them."""
    root = settled(1)
    r, outs = clean(cli, root)
    assert r.code == 0 and outs[("t", 0)]["cleaned"]
    build(root, partitions=1, start=120, rounds=60)
    plan = plan_for(root)
    from compactlog.cleaner import validate
    calls = {}
    real = validate.check_crcs

    def counting(path, buf, layout, lo, hi):
        calls.setdefault(path, []).append((lo, hi))
        return real(path, buf, layout, lo, hi)
    monkeypatch.setattr(validate, "check_crcs", counting)
    clean_partition(plan)
    assert set(calls) == {os.path.join(plan.dir, f"{s.base_offset:020d}.log") for s in plan.segments[:-1]}
    for path, ranges in calls.items():
        covered = sorted(ranges)
        assert covered[0][0] == 0 and all(a[1] == b[0] for a, b in zip(covered, covered[1:])), (path, ranges)
        assert covered[-1][1] == os.path.getsize(path)


def test_source_segment_checks_the_rest_of_its_crcs_only(settled, monkeypatch):
    root = settled(1)
    seg = segment_paths(pdir(root))[1]
    info = SegmentInfo(int(os.path.basename(seg)[:20]), os.path.getsize(seg), 0, 0, 0)
    from compactlog.cleaner import validate
    calls = []
    real = validate.check_crcs
    monkeypatch.setattr(validate, "check_crcs", lambda *a: calls.append(a[3:]) or real(*a))
    source = SourceSegment(pdir(root), info)
    middle = raw_batches(seg)[3][0]
    source.validate(None, middle)
    source.validate(None, 0)
    source.validate(None, 0)
    assert calls == [(middle, info.log_bytes), (0, middle)]
